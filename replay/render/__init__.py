"""Renderers: a request's messages and serialized tool declarations → the prompt text.

- ``json-tools`` (:mod:`replay.render.json_tools`): each tool's ``function`` as one JSON line, what
  tokenizers that ``json.dumps`` each tool into their prompt do.
- ``chat-template`` (:mod:`replay.render.chat_template`): a Jinja chat template rendered by
  transformers, as ``apply_chat_template`` renders it on a server.

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
