"""StepFun Step-3 tool calls: ``<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="NAME">...``.

Output syntax (vLLM ``tests/tool_parsers/test_step3_tool_parser.py``, SGLang
``python/sglang/srt/function_call/step3_detector.py``): a section ``<｜tool_calls_begin｜>`` ...
``<｜tool_calls_end｜>`` holding one block per call::

    <｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_weather">
    <steptml:parameter name="city">Tokyo</steptml:parameter></steptml:invoke><｜tool_call_end｜>

The tokens use U+FF5C FULLWIDTH VERTICAL LINE and ASCII underscores (not DeepSeek's U+2581); they
are built here from code points. Parameter values are raw text, typed by the request's schema.
(Step-3.5 writes Qwen3-Coder's ``<tool_call><function=...>`` format instead:
:mod:`replay.parsers.qwen3_coder`.)

Facts from the public implementations: SGLang's detector drops the section tokens, takes each
``<｜tool_call_begin｜>(.*?)<｜tool_call_end｜>``, needs the ``function<｜tool_sep｜>`` header (a block
of another type or without the separator is skipped), strips each value and types it by the
declared type (not ``string``: ``json.loads``, then a Python literal), and returns the whole text
as content when the section has no ``<｜tool_calls_end｜>``. vLLM's shared-suite configuration for
its ``step3`` parser expects calls from blocks without the header too, and a string value keeps
its surrounding whitespace (``TestStep3ParameterWhitespace``).

Reference behaviour (this module's definition; the whole-text parse and the stream run the same
grammar, :meth:`Step3Parser.read`):

* Reasoning: a leading ``<think>...</think>`` is split off first (:mod:`replay.parsers._reasoning`).
* Section tokens ``<｜tool_calls_begin｜>``, ``<｜tool_calls_end｜>`` and a ``<｜tool_sep｜>`` between
  blocks are framing: dropped wherever they stand outside a block. Calls are recognised with or
  without the enclosing section (as replay reads DeepSeek and Kimi blocks).
* A block starts at ``<｜tool_call_begin｜>`` and ends at the first ``<｜tool_call_end｜>``. It is a
  call when it is exactly: an optional header ``TYPE<｜tool_sep｜>`` with ``TYPE`` stripped equal to
  ``function`` (any text after the separator up to the invoke, such as a name line, is ignored),
  whitespace, ``<steptml:invoke name="NAME">`` (NAME non-empty, no ``"``), parameters separated by
  whitespace, ``</steptml:invoke>``, whitespace, then ``<｜tool_call_end｜>``. A parameter is
  ``<steptml:parameter name="KEY">VALUE</steptml:parameter>``; VALUE is the text up to the first
  ``</steptml:parameter>``, typed by :func:`replay.parsers._schema.convert_value` with the declared
  type (a ``string`` keeps its whitespace, as vLLM; undeclared: the JSON value of the stripped
  text, else the text); a repeated KEY keeps its last value. Arguments are ``json.dumps(args,
  ensure_ascii=False)`` (``{}`` for none). A value nested deeper than
  :data:`~replay.parsers._jsonscan.MAX_DEPTH` makes the block no call.
* Any other block is content, verbatim, markers included, up to and including its
  ``<｜tool_call_end｜>``; a block the text ends in before ``<｜tool_call_end｜>`` is content to the end
  (a call cut off is no call). Everything else is content, verbatim.
* ``tools``: the declared types. Calls to undeclared tools are reported (SGLang drops them).
* End token ``<|im_end|>`` (``end_tokens``; taken from Step-3.5's ChatML template, unconfirmed for
  Step-3) is removed from the raw text in both paths.

Streaming: the engine of :class:`~replay.parsers._family.GrammarParser`: a block is read again when
``<｜tool_call_end｜>`` arrives, and its call sent in one tool-call delta (name once, arguments
exactly the whole-text parse's string).
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from replay.parsers._family import GrammarParser
from replay.parsers._jsonscan import TOO_DEEP, skip_ws
from replay.parsers._reasoning import THINK
from replay.parsers._schema import convert_value, declared_types
from replay.parsers.base import ToolCall

_BAR = "\uff5c"  # FULLWIDTH VERTICAL LINE


def _token(word: str) -> str:
    return "<" + _BAR + word + _BAR + ">"


CALLS_BEGIN = _token("tool_calls_begin")
CALLS_END = _token("tool_calls_end")
CALL_BEGIN = _token("tool_call_begin")
CALL_END = _token("tool_call_end")
SEP = _token("tool_sep")
INVOKE_CLOSE = "</steptml:invoke>"
PARAM_CLOSE = "</steptml:parameter>"

MARKERS = (CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP)
FRAMING = (CALLS_BEGIN, CALLS_END, SEP)

_INVOKE = re.compile(r'<steptml:invoke name="([^"]+)">')
_PARAM = re.compile(r'<steptml:parameter name="([^"]*)">')


def read_call(body: str, types: dict[str, dict[str, str]]) -> tuple[str, str] | None:
    """``(name, arguments JSON text)`` of a whole block body (between ``<｜tool_call_begin｜>`` and
    ``<｜tool_call_end｜>``) under the module's grammar, or None when it is no call."""
    sep = body.find(SEP)
    q = 0
    if sep >= 0:
        if body[:sep].strip() != "function":
            return None
        q = body.find("<steptml:invoke", sep + len(SEP))
        if q < 0:
            return None
    m = _INVOKE.match(body, skip_ws(body, q))
    if m is None:
        return None
    name = m.group(1)
    declared = types.get(name, {})
    args: dict[str, Any] = {}
    q = m.end()
    while True:
        q = skip_ws(body, q)
        if body.startswith(INVOKE_CLOSE, q):
            if skip_ws(body, q + len(INVOKE_CLOSE)) != len(body):
                return None
            return name, json.dumps(args, ensure_ascii=False)
        p = _PARAM.match(body, q)
        if p is None:
            return None
        v = body.find(PARAM_CLOSE, p.end())
        if v < 0:
            return None
        value = convert_value(body[p.end() : v], declared.get(p.group(1)))
        if value is TOO_DEEP:
            return None
        args.pop(p.group(1), None)
        args[p.group(1)] = value
        q = v + len(PARAM_CLOSE)


class Step3Parser(GrammarParser):
    """Tool parser for StepFun Step-3 (``<｜tool_call_begin｜>`` blocks of ``<steptml:invoke>`` XML).

    Mirrors vLLM ``Step3ToolParser`` and SGLang ``Step3Detector`` in syntax; the rules for a block
    without the ``function<｜tool_sep｜>`` header, for whitespace in string values and for malformed
    blocks are this module's (module docstring). ``tools``: types parameter values by the
    declared schema. ``reasoning_open=True``: the prompt opened ``<think>``.
    """

    name: ClassVar[str] = "step3"
    covers: ClassVar[str] = "stepfun-ai/step3 (<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke> XML calls)"
    markers: ClassVar[tuple[str, ...]] = (*MARKERS, *THINK)
    #: [unconfirmed for Step-3 itself] the end-of-turn token of its successor's chat template
    #: (Step-3.5 Flash, ChatML ``<|im_end|>``, shared corpus), removed from the raw text in both paths
    end_tokens: ClassVar[tuple[str, ...]] = ("<|im_end|>",)
    STARTS = (CALL_BEGIN, *FRAMING)
    WAKE = (CALL_END,)
    THINK = THINK

    def __init__(self, tools: list[dict[str, Any]] | None = None, *, reasoning_open: bool = False) -> None:
        self._types = declared_types(tools)
        super().__init__(tools, reasoning_open=reasoning_open)

    def read(self, text: str, s: int, mark: str, final: bool) -> tuple[int, list[ToolCall] | None] | None:
        """The grammar: framing is dropped; a block runs to its ``<｜tool_call_end｜>`` (None on a
        stream's prefix before it) and is a call or content."""
        if mark != CALL_BEGIN:
            return s + len(mark), []
        body = s + len(mark)
        e = text.find(CALL_END, body)
        if e < 0:
            return (len(text), None) if final else None
        call = read_call(text[body:e], self._types)
        return e + len(CALL_END), None if call is None else [ToolCall(*call)]
