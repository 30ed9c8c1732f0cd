"""Renderers: a request's messages and serialized tool declarations → the prompt text.

- ``json-tools`` (:mod:`replay.render.json_tools`): each tool's ``function`` as one JSON line, what
  tokenizers that ``json.dumps`` each tool into their prompt do.
- ``chat-template`` (:mod:`replay.render.chat_template`): a Jinja chat template rendered by
  transformers, as ``apply_chat_template`` renders it on a server.
- reference encoders, named by :func:`replay.render.specs.renderer_from_spec` (``--reference-encoder``,
  ``--renderer``): ``mistral-common[:VERSION]`` (:mod:`replay.render.mistral`), ``harmony``
  (:mod:`replay.render.harmony`, gpt-oss), a checkpoint's ``encoding.py:function``
  (:mod:`replay.render.encoder`). They also offer ``render_ids(messages, tools) -> (text, ids)``.

:func:`load_tokenizer` loads a tokenizer for token counts (``--tokenizer``).
"""

from replay.render.base import RenderError, Renderer, load_tokenizer, count_tokens
from replay.render.chat_template import ChatTemplateRenderer
from replay.render.json_tools import JsonToolsRenderer

__all__ = [
    "RenderError",
    "Renderer",
    "ChatTemplateRenderer",
    "JsonToolsRenderer",
    "load_tokenizer",
    "count_tokens",
]
