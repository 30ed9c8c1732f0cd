"""Test doubles that follow the serving frameworks' tool-parser protocols, written for these tests.

Each parses one format (Hermes: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``) and
records every call the adapter makes in ``log``, so that tests can assert the exact sequence:

- :class:`MiniTRT`: TensorRT-LLM's protocol (``detect_and_parse``, ``parse_streaming_increment``,
  ``finish``, each with the tools; results with ``normal_text`` and ``calls`` of
  ``ToolCallItem(tool_index, name, parameters)``);
- :class:`MiniDetector`: SGLang's detector protocol (the same without ``finish`` being required;
  SGLang 0.5.23 calls ``finish(tools)`` at the end of a stream), with ``has_tool_call`` and the
  ``prev_tool_call_arr``/``streamed_args_for_tool`` SGLang's serving layer reads at the end;
- :class:`MiniVLLM`: vLLM's ``ToolParser`` protocol (``extract_tool_calls(model_output,
  request)``, ``extract_tool_calls_streaming(previous_text, current_text, delta_text,
  previous_token_ids, current_token_ids, delta_token_ids, request)``), built on a tokenizer whose
  vocabulary must hold ``<tool_call>``.

The streaming paths are correct (streamed, joined == whole-text parse) except where a class says
otherwise: :class:`LeakyFinishTRT` drops held text at ``finish`` (a planted bug).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

START, END = "<tool_call>", "</tool_call>"


@dataclass
class Item:
    """A framework's ``ToolCallItem``."""

    tool_index: int
    name: str | None
    parameters: str


@dataclass
class Result:
    """A framework's ``StreamingParseResult``."""

    normal_text: str = ""
    calls: list[Item] = field(default_factory=list)


def dumps(obj: Any) -> str:
    """Arguments as the frameworks write them: ``json.dumps(obj, ensure_ascii=False)``."""
    return json.dumps(obj, ensure_ascii=False)


def whole(text: str) -> tuple[str, list[tuple[str, Any]]]:
    """The whole-text parse: (content outside complete blocks, [(name, arguments object)]).
    An unterminated block stays in the content."""
    content, calls, pos = [], [], 0
    while True:
        i = text.find(START, pos)
        j = text.find(END, i) if i >= 0 else -1
        if i < 0 or j < 0:
            content.append(text[pos:])
            return "".join(content), calls
        content.append(text[pos:i])
        obj = json.loads(text[i + len(START) : j])
        calls.append((obj["name"], obj["arguments"]))
        pos = j + len(END)


def _names(tools: Any) -> list[str] | None:
    return None if tools is None else [t.function.name for t in tools]


def partial_suffix(text: str, marker: str) -> int:
    """Length of the longest proper prefix of ``marker`` that ``text`` ends with."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0


class _Streamer:
    """The streaming core: content goes out at once except a suffix that may start a block; a
    complete block goes out as one call (name and arguments together)."""

    bot_token = START
    eot_token = END

    def __init__(self) -> None:
        self._buf = ""
        self._n = 0
        self.log: list[tuple[Any, ...]] = []
        self.prev_tool_call_arr: list[dict[str, Any]] = []
        self.streamed_args_for_tool: list[str] = []

    def _step(self, new_text: str) -> Result:
        self._buf += new_text
        out = Result()
        while True:
            i = self._buf.find(START)
            if i < 0:
                keep = len(self._buf) - partial_suffix(self._buf, START)
                out.normal_text += self._buf[:keep]
                self._buf = self._buf[keep:]
                return out
            out.normal_text += self._buf[:i]
            self._buf = self._buf[i:]
            j = self._buf.find(END)
            if j < 0:
                return out
            obj = json.loads(self._buf[len(START) : j])
            args = dumps(obj["arguments"])
            out.calls.append(Item(self._n, obj["name"], args))
            self.prev_tool_call_arr.append({"name": obj["name"], "arguments": obj["arguments"]})
            self.streamed_args_for_tool.append(args)
            self._n += 1
            self._buf = self._buf[j + len(END) :]

    def _release(self) -> Result:
        rest, self._buf = self._buf, ""
        return Result(rest)


class MiniTRT(_Streamer):
    """TensorRT-LLM protocol, correct."""

    def detect_and_parse(self, text: str, tools: Any) -> Result:
        self.log.append(("detect_and_parse", text, _names(tools)))
        content, calls = whole(text)
        return Result(content, [Item(i, n, dumps(a)) for i, (n, a) in enumerate(calls)])

    def parse_streaming_increment(self, new_text: str, tools: Any) -> Result:
        self.log.append(("parse_streaming_increment", new_text, _names(tools)))
        return self._step(new_text)

    def finish(self, tools: Any) -> Result:
        self.log.append(("finish", _names(tools)))
        return self._release()


class LeakyFinishTRT(MiniTRT):
    """Planted bug: ``finish`` drops the held text (an unterminated block, a partial marker)."""

    def finish(self, tools: Any) -> Result:
        self.log.append(("finish", _names(tools)))
        self._buf = ""
        return Result()


class MiniDetector(_Streamer):
    """SGLang detector protocol, correct when ``finish`` is called (SGLang 0.5.23 does)."""

    def has_tool_call(self, text: str) -> bool:
        self.log.append(("has_tool_call", text))
        return START in text

    def detect_and_parse(self, text: str, tools: Any) -> Result:
        self.log.append(("detect_and_parse", text, _names(tools)))
        content, calls = whole(text)
        # SGLang's base detect_and_parse leaves tool_index -1 to the caller
        return Result(content, [Item(-1, n, dumps(a)) for n, a in calls])

    def parse_streaming_increment(self, new_text: str, tools: Any) -> Result:
        self.log.append(("parse_streaming_increment", new_text, _names(tools)))
        return self._step(new_text)

    def finish(self, tools: Any) -> Result:
        self.log.append(("finish", _names(tools)))
        return self._release()


class FirstCallDetector(MiniDetector):
    """A planted fault in the whole-text path only: ``detect_and_parse`` returns the first call
    and drops the others (its streaming path is :class:`MiniDetector`'s)."""

    def detect_and_parse(self, text: str, tools: Any) -> Result:
        got = super().detect_and_parse(text, tools)
        return Result(got.normal_text, got.calls[:1])


class LaggingDetector(MiniDetector):
    """Streams each call's arguments without their last char, which stays only in
    ``prev_tool_call_arr``: the server's end-of-stream check must send it."""

    def _step(self, new_text: str) -> Result:
        out = super()._step(new_text)
        for item in out.calls:
            item.parameters = item.parameters[:-1]
            self.streamed_args_for_tool[item.tool_index] = item.parameters
        return out


class MiniVLLM:
    """vLLM ``ToolParser`` protocol: state in ``prev_tool_call_arr``/``streamed_args_for_tool``
    as vLLM's parsers keep it; each step sends the new content and each newly complete call (name
    and arguments in one delta). A call completed by the last step loses its name to the server's
    end-of-stream replacement: that is vLLM's rule, reproduced, not this class's fault."""

    def __init__(self, tokenizer: Any) -> None:
        self.model_tokenizer = tokenizer
        self.start_id = tokenizer.get_vocab()[START]  # as vLLM parsers look their tokens up
        self.prev_tool_call_arr: list[dict[str, Any]] = []
        self.streamed_args_for_tool: list[str] = []
        self.current_tool_id = -1
        self._sent = 0
        self.log: list[tuple[Any, ...]] = []

    def adjust_request(self, request: Any) -> Any:
        self.log.append(("adjust_request",))
        return request

    def extract_tool_calls(self, model_output: str, request: Any) -> Any:
        self.log.append(("extract_tool_calls", model_output, _names(request.tools)))
        content, calls = whole(model_output)
        return SimpleNamespace(
            tools_called=bool(calls),
            tool_calls=[SimpleNamespace(index=i, function=SimpleNamespace(name=n, arguments=dumps(a))) for i, (n, a) in enumerate(calls)],
            content=content or None,
        )

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: list[int],
        current_token_ids: list[int],
        delta_token_ids: list[int],
        request: Any,
    ) -> Any:
        self.log.append(("stream", previous_text, current_text, delta_text, list(previous_token_ids), list(current_token_ids), list(delta_token_ids)))
        cut = current_text.rfind(START)
        closed = current_text.find(END, cut) >= 0 if cut >= 0 else True
        content, calls = whole(current_text if closed else current_text[:cut])
        new_content = content[self._sent :]
        self._sent = len(content)
        deltas = []
        for i in range(len(self.prev_tool_call_arr), len(calls)):
            name, args = calls[i]
            self.prev_tool_call_arr.append({"name": name, "arguments": args})
            self.streamed_args_for_tool.append(dumps(args))
            self.current_tool_id = i
            deltas.append(SimpleNamespace(index=i, function=SimpleNamespace(name=name, arguments=dumps(args))))
        if not new_content and not deltas:
            return None
        return SimpleNamespace(content=new_content or None, tool_calls=deltas)


class QuietVLLM(MiniVLLM):
    """A planted fault: keeps each call in ``prev_tool_call_arr`` (as vLLM parsers do) but streams
    no tool-call delta for it, only content; vLLM's server then ends the stream with
    ``finish_reason: tool_calls`` and the client holds no call."""

    def extract_tool_calls_streaming(self, *args: Any, **kwargs: Any) -> Any:
        got = super().extract_tool_calls_streaming(*args, **kwargs)
        if got is None or not got.tool_calls:
            return got
        return SimpleNamespace(content=got.content, tool_calls=[]) if got.content else None
