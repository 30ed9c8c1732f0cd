"""The renderer protocol, render errors, and the tokenizer used for token counts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol


class RenderError(ValueError):
    """A side cannot render a request: the template raised, or the input does not fit it.

    The pipeline records the message on that side's ``renders`` row and goes on.
    """


class Renderer(Protocol):
    """``render(messages, tools) -> prompt``.

    ``messages``: the request's ``messages`` (list of dicts, as the client sent them).
    ``tools``: the serialized tool declarations (list of dicts) or None when the request has none.
    Returns the prompt text (str). Raises :class:`RenderError`.
    ``name``: a short label recorded on every ``renders`` row.
    """

    name: str

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str: ...


def load_tokenizer(path: str | os.PathLike[str]) -> Any:
    """Load a fast tokenizer from a ``tokenizer.json`` file or a folder holding one.

    Returns a ``tokenizers.Tokenizer`` (Hugging Face tokenizers), whose ``encode`` recognises the
    checkpoint's added special tokens in text. Raises FileNotFoundError when neither exists.
    """
    from tokenizers import Tokenizer

    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        raise FileNotFoundError(f"no tokenizer.json at {path}")
    return Tokenizer.from_file(str(p))


def count_tokens(tokenizer: Any, text: str) -> int:
    """Number of tokens ``tokenizer`` encodes ``text`` into, special tokens in the text included
    and no BOS/EOS added (the prompt already carries them when the template writes them).

    A ``tokenizers.Tokenizer`` counts from cached segments (:mod:`replay.render.segments`: the
    same count as a whole ``encode``, each distinct piece of text encoded once per process);
    any other object by its own ``encode(text, add_special_tokens=False).ids``."""
    from replay.render.segments import segment_encoder

    enc = segment_encoder(tokenizer)
    if enc is not None:
        return enc.count(text)
    return len(tokenizer.encode(text, add_special_tokens=False).ids)
