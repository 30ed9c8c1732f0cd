"""The ``harmony`` renderer: gpt-oss prompts rendered by ``openai-harmony``, offline.

gpt-oss models are prompted in OpenAI's Harmony format; servers (vLLM, SGLang) build the prompt
with ``openai-harmony`` rather than with the chat template: the function tools go into the
developer message as ``ToolDescription.new(name, description, parameters=...)``. Harmony's
``ToolDescription`` is a pydantic model whose ``description`` is a required ``str``: a tool the
server hands over with ``description=None`` raises a ``ValidationError`` (the HTTP 400 gpt-oss
servers answered for a tool declared without description), while ``description=""`` renders the
tool without its ``//`` comment line. This renderer passes each serialized tool's
``function.description`` as it is (``None`` when the key is absent or null), so the *serializer*
of a side decides: ``model-dump`` / ``client-fields`` / ``as-sent`` of a tool without description
fail that side (the row's ``error``), ``empty-description`` renders it.

Offline vocabulary: openai-harmony loads ``o200k_base.tiktoken`` (199,998 ranks) and downloads it
unless ``TIKTOKEN_ENCODINGS_BASE`` names a folder holding it. :func:`harmony_vocab_dir` rebuilds
that file from the vocabulary the ``quicktok-v1`` package ships (``quicktok/data/o200k.vocab``:
``u32 count``, then per token ``u16 length, bytes, u32 rank``, little-endian) as
``base64(token bytes) rank`` lines sorted by rank, into a cache folder, and points
``TIKTOKEN_ENCODINGS_BASE`` at it. Nothing is downloaded.

Messages (as the gpt-oss chat template reads them): a first ``system`` or ``developer`` message is
the developer message's ``# Instructions``; ``user`` is a user message; an ``assistant`` message's
``content`` goes to the ``final`` channel and each of its ``tool_calls`` to the ``commentary``
channel addressed to ``functions.<name>`` (``<|constrain|>json``); a ``tool`` message is from
``functions.<name>`` (its ``name``, else the name of the call its ``tool_call_id`` answers). The
system message carries ``Current date:`` (the pinned ``--date``) and ``Reasoning: medium``.
"""

from __future__ import annotations

import base64
import datetime as _dt
import os
import struct
from pathlib import Path
from typing import Any

from replay.render.base import RenderError

#: The file openai-harmony (through tiktoken) loads for gpt-oss.
O200K_FILE = "o200k_base.tiktoken"
#: Ranks in o200k_base.
O200K_RANKS = 199_998


def cache_dir() -> Path:
    """``$REPLAY_CACHE`` or ``$XDG_CACHE_HOME/replay`` (default ``~/.cache/replay``)."""
    env = os.environ.get("REPLAY_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "replay"


def read_quicktok_vocab(path: str | os.PathLike[str]) -> list[tuple[int, bytes]]:
    """``[(rank, token bytes)]`` from a quicktok ``.vocab`` file, sorted by rank.

    Format (quicktok-v1's bundled binary vocabularies): ``u32 count``, then ``count`` records of
    ``u16 length, length bytes, u32 rank``, little-endian. Raises ValueError when the file is
    truncated or has bytes left over."""
    data = Path(path).read_bytes()
    if len(data) < 4:
        raise ValueError(f"{path}: too short for a quicktok vocabulary")
    (count,) = struct.unpack_from("<I", data, 0)
    off = 4
    out: list[tuple[int, bytes]] = []
    try:
        for _ in range(count):
            (length,) = struct.unpack_from("<H", data, off)
            off += 2
            token = data[off : off + length]
            off += length
            (rank,) = struct.unpack_from("<I", data, off)
            off += 4
            out.append((rank, token))
    except struct.error as exc:
        raise ValueError(f"{path}: truncated at byte {off}") from exc
    if off != len(data):
        raise ValueError(f"{path}: {len(data) - off} bytes after the last of {count} tokens")
    out.sort()
    return out


def harmony_vocab_dir(folder: str | os.PathLike[str] | None = None) -> Path:
    """A folder holding ``o200k_base.tiktoken``, built from quicktok-v1's ``o200k.vocab`` when it
    is not there yet; ``TIKTOKEN_ENCODINGS_BASE`` is set to it (unless it is already set to a
    folder holding the file, which is then returned).

    ``folder``: where to write (default ``cache_dir()/tiktoken``). The file is written to a
    temporary name and renamed, so concurrent runs never read half a file. Raises ImportError when
    quicktok-v1 is not installed, ValueError when its vocabulary is not the 199,998-rank o200k."""
    env = os.environ.get("TIKTOKEN_ENCODINGS_BASE")
    if folder is None and env and (Path(env) / O200K_FILE).is_file():
        return Path(env)
    target = Path(folder) if folder is not None else cache_dir() / "tiktoken"
    out = target / O200K_FILE
    if not out.is_file():
        import quicktok

        vocab = Path(quicktok.__file__).parent / "data" / "o200k.vocab"
        ranks = read_quicktok_vocab(vocab)
        if len(ranks) != O200K_RANKS or ranks[-1][0] != O200K_RANKS - 1:
            raise ValueError(f"{vocab}: {len(ranks)} ranks, expected o200k's {O200K_RANKS}")
        target.mkdir(parents=True, exist_ok=True)
        tmp = target / f".{O200K_FILE}.{os.getpid()}"
        tmp.write_bytes(b"".join(base64.b64encode(tok) + b" " + str(rank).encode() + b"\n" for rank, tok in ranks))
        tmp.replace(out)
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(target)
    return target


def _text(content: Any) -> str:
    """A message's content as text: a string, or the ``text`` of its text parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
            elif isinstance(part, str):
                out.append(part)
            else:
                raise RenderError(f"harmony: unsupported content part {str(part)[:80]!r}")
        return "".join(out)
    raise RenderError(f"harmony: content must be a string or a list of parts, got {type(content).__name__}")


class HarmonyTextTokenizer:
    """Token ids of a prompt text with the gpt-oss Harmony encoding (o200k + Harmony special
    tokens, all recognised in the text). ``encode(text).ids`` as :class:`tokenizers.Tokenizer`."""

    def __init__(self, encoding: Any) -> None:
        self.encoding = encoding

    def ids(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token strings (``<|start|>`` ...) become their ids."""
        return list(self.encoding.encode(text, allowed_special="all"))

    def encode(self, text: str, add_special_tokens: bool = False) -> Any:
        """``self.ids(text)`` in an object with an ``ids`` attribute."""

        class _Enc:
            pass

        enc = _Enc()
        enc.ids = self.ids(text)  # type: ignore[attr-defined]
        return enc


class HarmonyRenderer:
    """Render a request as gpt-oss's Harmony prompt with openai-harmony (see the module docstring).

    ``date``: the ``Current date:`` of the system message (``datetime.date``; default: none
    written). ``reasoning_effort``: ``low`` / ``medium`` / ``high``.
    ``render(messages, tools)`` returns the prompt text (up to the ``<|start|>assistant`` the
    completion follows); ``render_ids`` returns ``(text, ids)`` as Harmony renders them.
    ``tokenizer``: a :class:`HarmonyTextTokenizer`. Raises :class:`RenderError` for a tool Harmony
    rejects (``description`` None: pydantic ``ValidationError``) or a message it cannot hold.
    The constructor raises ImportError / ValueError when the encoding cannot be loaded offline.
    """

    name = "harmony"
    vocab = "o200k_harmony"  # token ids of renderers with one vocab are compared

    def __init__(self, date: _dt.date | None = None, reasoning_effort: str = "medium") -> None:
        harmony_vocab_dir()
        from openai_harmony import HarmonyEncodingName, ReasoningEffort, load_harmony_encoding

        self.encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
        self.tokenizer = HarmonyTextTokenizer(self.encoding)
        self.date = date
        self.effort = {"low": ReasoningEffort.LOW, "medium": ReasoningEffort.MEDIUM, "high": ReasoningEffort.HIGH}[reasoning_effort]

    def _tool(self, i: int, tool: Any) -> Any:
        from openai_harmony import ToolDescription

        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(fn, dict):
            raise RenderError(f"harmony: tools[{i}] is not an object")
        try:
            return ToolDescription.new(fn.get("name"), fn.get("description"), parameters=fn.get("parameters"))
        except Exception as exc:  # pydantic ValidationError: description None, name not a string
            first = " ".join(line.strip() for line in str(exc).splitlines()[:3])
            raise RenderError(f"harmony: tools[{i}] ({fn.get('name')!r}): {type(exc).__name__}: {first}") from exc

    def _conversation(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
        from openai_harmony import Author, Conversation, DeveloperContent, Message, Role, SystemContent

        system = SystemContent.new().with_reasoning_effort(self.effort)
        if self.date is not None:
            system = system.with_conversation_start_date(self.date.isoformat())
        out = [Message.from_role_and_content(Role.SYSTEM, system)]
        rest = list(messages)
        instructions = None
        if rest and rest[0].get("role") in ("system", "developer"):
            instructions = _text(rest.pop(0).get("content"))
        descs = [self._tool(i, t) for i, t in enumerate(tools or ())]
        if instructions or descs:
            dev = DeveloperContent.new()
            if instructions:
                dev = dev.with_instructions(instructions)
            if descs:
                dev = dev.with_function_tools(descs)
            out.append(Message.from_role_and_content(Role.DEVELOPER, dev))
        call_names: dict[str, str] = {}
        for m in rest:
            role = m.get("role")
            if role in ("system", "developer"):
                out.append(Message.from_role_and_content(Role.DEVELOPER, DeveloperContent.new().with_instructions(_text(m.get("content")))))
            elif role == "user":
                out.append(Message.from_role_and_content(Role.USER, _text(m.get("content"))))
            elif role == "assistant":
                text = _text(m.get("content"))
                if text:
                    out.append(Message.from_role_and_content(Role.ASSISTANT, text).with_channel("final"))
                for call in m.get("tool_calls") or ():
                    f = call.get("function") or {}
                    name = f.get("name")
                    args = f.get("arguments")
                    if not isinstance(name, str):
                        raise RenderError("harmony: an assistant tool call has no function name")
                    if call.get("id"):
                        call_names[call["id"]] = name
                    out.append(
                        Message.from_role_and_content(Role.ASSISTANT, args if isinstance(args, str) else _json(args))
                        .with_channel("commentary")
                        .with_recipient(f"functions.{name}")
                        .with_content_type("<|constrain|>json")
                    )
            elif role == "tool":
                name = m.get("name") or call_names.get(m.get("tool_call_id") or "")
                if not name:
                    raise RenderError("harmony: a tool message names no function (no name, no known tool_call_id)")
                out.append(
                    Message.from_author_and_content(Author.new(Role.TOOL, f"functions.{name}"), _text(m.get("content")))
                    .with_channel("commentary")
                    .with_recipient("assistant")
                )
            else:
                raise RenderError(f"harmony: unsupported role {role!r}")
        return Conversation.from_messages(out)

    def render_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> tuple[str, list[int]]:
        """``(prompt text, token ids)``; raises :class:`RenderError`."""
        from openai_harmony import Role

        conv = self._conversation(messages, tools)
        try:
            ids = list(self.encoding.render_conversation_for_completion(conv, Role.ASSISTANT))
        except Exception as exc:  # HarmonyError
            raise RenderError(f"harmony: {type(exc).__name__}: {exc}") from exc
        return self.encoding.decode_utf8(ids), ids

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        """The prompt text; raises :class:`RenderError`."""
        return self.render_ids(messages, tools)[0]


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
