"""Client assembly: what a client ends up with from a stream, exactly as the SDKs build it.

One module for the served side (captured SSE payloads, :mod:`replay.capture.v1`) and for every
replay (a tool parser's events turned into the chunks a server would send, :func:`chunks_from_events`).

- **OpenAI Chat Completions** (:func:`assemble_chat`): mirrors the OpenAI Python SDK's
  ``ChatCompletionStreamState.handle_chunk`` (``openai/lib/streaming/chat/_completions.py``) and its
  ``accumulate_delta`` (``openai/lib/streaming/_deltas.py``). Every string field of a delta is
  concatenated onto the snapshot, nested objects merged, and lists of objects with an ``index``
  merged *by list position* (``acc[index]``; an index past the end inserts at the end). So a
  name sent twice for one index becomes the two names concatenated (``"findfind"``), an id sent
  twice is concatenated, ``index`` and ``type`` are replaced by the latest delta's value. The
  SDK then looks each delta's call up at ``tool_calls[index]``: an index that skips (first call at
  1), goes back, or names a call never opened raises ``IndexError``; a call whose ``type`` is
  ``function`` but has no ``function`` raises too. Where the SDK raises, the client gets an
  exception and no message: :attr:`ClientResult.error` holds ``"<Type>: <message>"`` as the SDK
  words it, and the other fields are what was assembled before that chunk.
- **Anthropic Messages** (:func:`assemble_messages`): mirrors ``accumulate_event`` and
  ``build_events`` of the Anthropic Python SDK (``anthropic/lib/streaming/_messages.py``): the
  first event must be ``message_start``; ``content_block_start`` *appends* a block (its
  ``index`` is not read); deltas and stops look the block up at ``content[index]``;
  ``input_json_delta`` fragments are parsed after each fragment with ``jiter`` in partial mode
  (the SDK's own parser: a truncated value is dropped, invalid JSON raises ``ValueError``); a
  tool call's arguments are the JSON text of that parsed ``input``. An ``error`` event raises in
  the SDK's stream (``APIStatusError``).
- **OpenAI Responses** (:func:`assemble_responses`): ``function_call`` output items by
  ``output_index``, their argument deltas joined (kept simple: no SDK accumulator is mirrored).

Besides what the client sees, each assembled call carries facts the judge counts
(:mod:`replay.judge`): how many deltas sent it a non-empty name (``names_sent``), and the ids sent
for it in order (``ids_sent``). Every function here is pure and never raises on a list of dicts.

One concern at over 600 lines: the client assembly of every route, the OpenAI and Anthropic SDKs'
accumulators mirrored side by side, so that the served side and every replay are joined by one
set of rules (the SDKs are the oracle of its tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import jiter

from replay import exactjson

__all__ = [
    "ClientCall",
    "ClientResult",
    "assemble",
    "assemble_chat",
    "assemble_messages",
    "assemble_responses",
    "chunks_from_events",
    "assemble_events",
    "id_faults",
    "payload_route",
]


@dataclass
class ClientCall:
    """One tool call as the client's SDK holds it at the end of the stream.

    ``index``: position in the client's list (0-based; what a client iterates). ``id``, ``type``,
    ``name``: the snapshot's values (None when never sent; concatenated when sent more than once,
    as the OpenAI SDK does). ``arguments``: JSON text (OpenAI: the joined fragments; Anthropic: the
    parsed ``input`` written back as JSON). ``names_sent``: deltas that carried a non-empty name
    for this call; ``ids_sent``: the non-empty ids sent for it, in order."""

    index: int
    id: str | None
    name: str | None
    arguments: str | None
    type: str | None = None
    names_sent: int = 0
    ids_sent: list[str] = field(default_factory=list)


@dataclass
class ClientResult:
    """What a client ends up with: ``content`` (None when no text came), ``calls`` in the client's
    order, ``finish_reason`` (Messages: ``stop_reason``; Responses: ``status``), ``reasoning``
    (vLLM/SGLang ``reasoning_content`` / ``reasoning``, Anthropic thinking blocks), and ``error``:
    what the SDK raised on this stream (``"IndexError: list index out of range"``), None when it
    did not. ``saw_calls``: a tool-call delta (or block, or item) arrived at all."""

    content: str | None = None
    calls: list[ClientCall] = field(default_factory=list)
    finish_reason: str | None = None
    reasoning: str | None = None
    error: str | None = None
    saw_calls: bool = False


def id_faults(calls: Iterable[ClientCall]) -> int:
    """Calls whose ``id`` a client cannot use: none was sent, one was sent in more than one delta
    of the call (the OpenAI SDK concatenates them, so even the same id twice is wrong), or the
    call's id is also another call's (``call-id`` check; :mod:`replay.judge`)."""
    calls = list(calls)
    seen: dict[str, int] = {}
    for c in calls:
        if c.id:
            seen[c.id] = seen.get(c.id, 0) + 1
    return sum(1 for c in calls if not c.id or len(c.ids_sent) > 1 or seen.get(c.id, 0) > 1)


def payload_route(payload: dict) -> str | None:
    """The route a stream payload belongs to by its shape, or None when it does not tell:
    ``responses`` (``type`` ``response.*``), ``messages`` (``message_*``, ``content_block_*``,
    ``ping``, ``error``), ``chat.completions`` (``object`` ``chat.completion.chunk`` or a
    ``choices`` key)."""
    t = payload.get("type")
    if isinstance(t, str):
        if t.startswith("response."):
            return "responses"
        if t.startswith(("message_", "content_block_")) or t in ("ping", "error"):
            return "messages"
    if payload.get("object") == "chat.completion.chunk" or "choices" in payload:
        return "chat.completions"
    return None


class _SDKError(Exception):
    """Internal: carries the text of the exception the SDK would raise."""


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _has_indexed_entries(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(e, dict) and "index" in e for e in value)


def _accumulate(acc: dict, delta: dict, track: Any = None) -> dict:
    """``accumulate_delta`` of the OpenAI SDK on plain dicts (same rules, same exceptions).
    ``track(entry, delta_entry)``: called for each merged/inserted entry of a top-level indexed
    list (the ``tool_calls`` of a message), to count names and ids per call."""
    for key, dv in delta.items():
        if key not in acc or acc[key] is None:
            if _has_indexed_entries(dv):
                acc[key] = []
            else:
                acc[key] = dv
                if track is not None and key == "tool_calls" and isinstance(dv, list):
                    for e in dv:
                        track(e, e)
                continue
        av = acc[key]
        if key == "index" or key == "type":
            acc[key] = dv
            continue
        if isinstance(av, str) and isinstance(dv, str):
            av += dv
        elif isinstance(av, (int, float)) and isinstance(dv, (int, float)):
            av += dv
        elif isinstance(av, dict) and isinstance(dv, dict):
            av = _accumulate(av, dv)
        elif isinstance(av, list) and isinstance(dv, list):
            if all(isinstance(x, (str, int, float)) for x in av) and (av or not _has_indexed_entries(dv)):
                av.extend(dv)
                continue
            for de in dv:
                if not isinstance(de, dict):
                    raise _SDKError(f"TypeError: Unexpected list delta entry is not a dictionary: {de}")
                if "index" not in de:
                    raise _SDKError(f"RuntimeError: Expected list delta entry to have an `index` key; {de}")
                index = de["index"]
                if not isinstance(index, int):
                    raise _SDKError(f"TypeError: Unexpected, list delta entry `index` value is not an integer; {index}")
                try:
                    ae = av[index]
                except IndexError:
                    try:
                        av.insert(index, de)
                    except OverflowError as exc:  # an index beyond the machine's: the SDK's insert raises it too
                        raise _SDKError(f"OverflowError: {exc}") from None
                    if track is not None and key == "tool_calls":
                        track(de, de)
                else:
                    if not isinstance(ae, dict):
                        raise _SDKError("TypeError: not handled yet")
                    av[index] = _accumulate(ae, de)
                    if track is not None and key == "tool_calls":
                        track(ae, de)
        acc[key] = av
    return acc


def _at(items: list, index: Any, what: str = "list index out of range") -> Any:
    """``items[index]`` with Python's semantics, raising the SDK's exception text."""
    if not isinstance(index, int):
        raise _SDKError(f"TypeError: list indices must be integers or slices, not {type(index).__name__}")
    try:
        return items[index]
    except IndexError:
        raise _SDKError(f"IndexError: {what}") from None


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


class _ChatState:
    """``ChatCompletionStreamState`` of the OpenAI SDK, on plain dicts (no ``input_tools``, no
    ``response_format``: what ``client.chat.completions.create(stream=True)`` gives a client that
    accumulates the chunks)."""

    def __init__(self) -> None:
        self.choices: list[dict] | None = None
        self.states: list[dict] = []  # per choice: current tool index, done tool indices
        self.facts: dict[int, dict] = {}  # id(entry) -> {"names": n, "ids": [...]} of the choice-0 message

    def _track(self, entry: Any, de: Any) -> None:
        if not isinstance(entry, dict) or not isinstance(de, dict):
            return
        f = self.facts.setdefault(id(entry), {"names": 0, "ids": [], "entry": entry})
        fn = de.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn["name"]:
            f["names"] += 1
        if isinstance(de.get("id"), str) and de["id"]:
            f["ids"].append(de["id"])

    def _message(self, delta: Any, acc: dict, track: bool) -> dict:
        return _accumulate(acc, _copy(delta) if isinstance(delta, dict) else {}, self._track if track else None)

    def handle(self, chunk: dict) -> None:
        choices = chunk.get("choices")
        choices = choices if isinstance(choices, list) else []
        if self.choices is None:  # _convert_initial_chunk_into_snapshot
            snap: list[Any] = list(choices)
            for c in choices:
                idx = _get(c, "index")
                entry = {k: _copy(v) for k, v in c.items() if k != "delta"} if isinstance(c, dict) else {}
                entry["message"] = self._message(_get(c, "delta"), {}, idx == 0)
                if not isinstance(idx, int):
                    raise _SDKError(f"TypeError: list indices must be integers or slices, not {type(idx).__name__}")
                try:
                    snap[idx] = entry
                except IndexError:
                    raise _SDKError("IndexError: list assignment index out of range") from None
            self.choices = snap
        else:  # _accumulate_chunk
            for c in choices:
                idx = _get(c, "index")
                delta = _get(c, "delta")
                try:
                    cs = _at(self.choices, idx)
                    prev = [_get(t, "type") for t in cs["message"].get("tool_calls") or []]
                    cs["message"] = self._message(delta, cs["message"], idx == 0)
                    now = cs["message"].get("tool_calls") or []
                    for pos, t in enumerate(prev):
                        if t == "function" and _get(_at(now, pos), "type") != "function":
                            raise _SDKError("AssertionError: ")
                except _SDKError as exc:
                    if not str(exc).startswith("IndexError"):
                        raise
                    cs = {k: _copy(v) for k, v in c.items() if k != "delta"}
                    cs["message"] = self._message(delta, {}, idx == 0)
                    self.choices.append(cs)
                if c.get("finish_reason"):
                    cs["finish_reason"] = c["finish_reason"]
                for tc in _get(delta, "tool_calls") or []:
                    tsnap = _at(cs["message"].get("tool_calls") or [], _get(tc, "index"))
                    if _get(tsnap, "type") == "function":
                        _name_of(tsnap)
        self._events(choices)

    def _state(self, idx: Any) -> dict:
        """``_get_choice_state``: the choice's event state at ``states[idx]``, a new one appended
        when that raises IndexError."""
        try:
            return _at(self.states, idx)
        except _SDKError as exc:
            if not str(exc).startswith("IndexError"):
                raise
            self.states.append({"current": None, "done": set()})
            return self.states[-1]

    def _events(self, choices: list) -> None:
        """The checks ``_build_events`` and ``ChoiceEventState.get_done_events`` make."""
        assert self.choices is not None
        for c in choices:
            idx = _get(c, "index")
            state = self._state(idx)
            cs = _at(self.choices, idx)
            delta = _get(c, "delta") or {}
            tcs = delta.get("tool_calls") if isinstance(delta, dict) else None
            if tcs:
                calls = cs["message"].get("tool_calls")
                if calls is None:
                    raise _SDKError("AssertionError: ")
                for tc in tcs:
                    snap = _at(calls, _get(tc, "index"))
                    if _get(snap, "type") == "function":
                        if _get(tc, "function") is None:
                            raise _SDKError("AssertionError: ")
                        _name_of(snap)
            if cs.get("finish_reason"):
                cur = state["current"]
                if cur is not None and cur not in state["done"]:
                    self._done(state, cs, cur)
            for tc in tcs or []:
                ti = _get(tc, "index")
                if state["current"] != ti and state["current"] is not None:
                    self._done(state, cs, state["current"])
                state["current"] = ti

    def _done(self, state: dict, cs: dict, tool_index: Any) -> None:
        if tool_index in state["done"]:
            return
        state["done"].add(tool_index)
        calls = cs["message"].get("tool_calls")
        if calls is None:
            raise _SDKError("AssertionError: ")
        snap = _at(calls, tool_index)
        if _get(snap, "type") == "function":
            _name_of(snap)

    def result(self, error: str | None) -> ClientResult:
        out = ClientResult(error=error)
        if not self.choices:
            return out
        cs = self.choices[0] if isinstance(self.choices[0], dict) else {}
        msg = cs.get("message") or {}
        content = msg.get("content")
        out.content = content if isinstance(content, str) else None
        for key in ("reasoning_content", "reasoning"):
            if isinstance(msg.get(key), str):
                out.reasoning = msg[key]
                break
        fr = cs.get("finish_reason")
        out.finish_reason = fr if isinstance(fr, str) else None
        tcs = msg.get("tool_calls")
        out.saw_calls = tcs is not None
        for pos, e in enumerate(tcs if isinstance(tcs, list) else []):
            if not isinstance(e, dict):
                continue
            fn = e.get("function") if isinstance(e.get("function"), dict) else {}
            facts = self.facts.get(id(e), {"names": 0, "ids": []})
            out.calls.append(
                ClientCall(
                    index=pos,
                    id=e.get("id") if isinstance(e.get("id"), str) else None,
                    type=e.get("type") if isinstance(e.get("type"), str) else None,
                    name=fn.get("name") if isinstance(fn.get("name"), str) else None,
                    arguments=_text(fn.get("arguments")),
                    names_sent=facts["names"],
                    ids_sent=list(facts["ids"]),
                )
            )
        return out


def _name_of(snap: Any) -> Any:
    fn = _get(snap, "function")
    if fn is None:
        raise _SDKError("AttributeError: 'NoneType' object has no attribute 'name'")
    return _get(fn, "name")


def _text(value: Any) -> str | None:
    """A value as the JSON text a call's arguments are compared as: strings as they are, other
    values (an object a server sent in place of a string) as JSON text, None as None."""
    if value is None or isinstance(value, str):
        return value
    try:
        return exactjson.dumps(value).decode()
    except TypeError:
        return str(value)


def _dump(value: Any) -> str | None:
    """A parsed value (Anthropic's tool ``input``) as compact JSON text; None stays None."""
    if value is None:
        return None
    try:
        return exactjson.dumps(value).decode()
    except TypeError:
        return str(value)


def assemble_chat(chunks: Iterable[dict]) -> ClientResult:
    """What the OpenAI Python SDK's ``ChatCompletionStreamState`` holds after ``chunks`` (the
    ``chat.completion.chunk`` payloads of one stream, ``[DONE]`` removed), for choice 0.

    A payload with a truthy ``error`` key ends the stream with ``APIError`` (the SDK's ``Stream``).
    Rules and exceptions: see the module docstring. Never raises."""
    st = _ChatState()
    error = None
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        if chunk.get("error"):
            err = chunk["error"]
            msg = err.get("message") if isinstance(err, dict) else None
            error = f"APIError: {msg if isinstance(msg, str) and msg else 'An error occurred during streaming'}"
            break
        try:
            st.handle(chunk)
        except _SDKError as exc:
            error = str(exc)
            break
        except (TypeError, KeyError, AttributeError) as exc:  # outside the mirrored domain
            error = f"{type(exc).__name__}: {exc}"
            break
    return st.result(error)


# ------------------------------------------------------------------------------- Anthropic


def _partial(buf: bytes) -> Any:
    try:
        return jiter.from_json(buf, partial_mode=True)
    except ValueError as e:
        raise _SDKError(
            "ValueError: Unable to parse tool parameter JSON from model. Please retry your request or adjust your prompt. "
            f"Error: {e}. JSON: {buf.decode('utf-8', 'replace')}"
        ) from None


_TOOL_BLOCKS = ("tool_use", "server_tool_use")


def assemble_messages(events: Iterable[dict]) -> ClientResult:
    """What the Anthropic Python SDK's ``MessageStream`` snapshot holds after ``events`` (the
    Messages stream's event payloads): text blocks joined as ``content``, ``tool_use`` blocks as
    calls in block order (``arguments`` = the parsed ``input`` as JSON text, ``id``, ``name``),
    thinking blocks joined as ``reasoning``, ``finish_reason`` = ``stop_reason``. Rules and
    exceptions: see the module docstring. Never raises."""
    blocks: list[dict] | None = None
    bufs: dict[int, bytes] = {}
    finish = None
    error = None
    has_usage = False
    for ev in events:
        if not isinstance(ev, dict):
            continue
        et = ev.get("type")
        try:
            if et == "error":
                raise _SDKError(f"APIStatusError: {ev}")
            if et == "ping":
                continue
            if blocks is None:
                if et == "message_start" and isinstance(ev.get("message"), dict):
                    blocks = [_copy(b) for b in ev["message"].get("content") or [] if isinstance(b, dict)]
                    finish = ev["message"].get("stop_reason")
                    has_usage = isinstance(ev["message"].get("usage"), dict)
                    continue
                raise _SDKError(f'RuntimeError: Unexpected event order, got {et} before "message_start"')
            idx = ev.get("index")
            if et == "content_block_start":
                cb = ev.get("content_block")
                blocks.append(_copy(cb) if isinstance(cb, dict) else {})
            elif et == "content_block_delta":
                block = _at(blocks, idx)
                d = ev.get("delta") if isinstance(ev.get("delta"), dict) else {}
                dt = d.get("type")
                if dt == "text_delta" and block.get("type") == "text":
                    block["text"] = (block.get("text") or "") + (d.get("text") or "")
                elif dt == "input_json_delta" and block.get("type") in _TOOL_BLOCKS:
                    buf = bufs.get(idx, b"") + str(d.get("partial_json") or "").encode("utf-8", "surrogatepass")
                    if buf:
                        block["input"] = _partial(buf)
                    bufs[idx] = buf
                    block["_names"] = block.get("_names", 1)
                elif dt == "thinking_delta" and block.get("type") == "thinking":
                    block["thinking"] = (block.get("thinking") or "") + (d.get("thinking") or "")
            elif et == "content_block_stop":
                _at(blocks, idx)
            elif et == "message_delta":
                if not isinstance(ev.get("delta"), dict):
                    raise _SDKError("AttributeError: 'NoneType' object has no attribute 'stop_reason'")
                finish = ev["delta"].get("stop_reason")
                if not has_usage or not isinstance(ev.get("usage"), dict):
                    raise _SDKError("AttributeError: 'NoneType' object has no attribute 'output_tokens'")
        except _SDKError as exc:
            error = str(exc)
            break
    out = ClientResult(error=error, finish_reason=finish if isinstance(finish, str) else None)
    texts: list[str] = []
    thinking: list[str] = []
    for b in blocks or []:
        t = b.get("type")
        if t == "text" and isinstance(b.get("text"), str):
            texts.append(b["text"])
        elif t == "thinking" and isinstance(b.get("thinking"), str):
            thinking.append(b["thinking"])
        elif t in _TOOL_BLOCKS:
            out.saw_calls = True
            name = b.get("name") if isinstance(b.get("name"), str) else None
            bid = b.get("id") if isinstance(b.get("id"), str) else None
            out.calls.append(
                ClientCall(
                    index=len(out.calls), id=bid, name=name, type=t, arguments=_dump(b.get("input")),
                    names_sent=1 if name else 0, ids_sent=[bid] if bid else [],
                )
            )
    if blocks is not None:
        out.saw_calls = out.saw_calls or False
    out.content = "".join(texts) if texts else None
    out.reasoning = "".join(thinking) if thinking else None
    return out


# ------------------------------------------------------------------------------- Responses


def assemble_responses(events: Iterable[dict]) -> ClientResult:
    """What a client reads from OpenAI Responses stream events (kept simple; no SDK accumulator is
    mirrored): ``response.output_text.delta`` texts joined; one call per ``function_call`` item of
    ``response.output_item.added`` by ``output_index`` (``id`` = ``call_id``, ``name``), its
    ``response.function_call_arguments.delta`` deltas joined (the item's own ``arguments`` when no
    delta came), in ``output_index`` order; ``finish_reason``: ``status`` of the last
    ``response.completed`` / ``.incomplete`` / ``.failed``. Never raises."""
    texts: list[str] = []
    items: dict[int, dict] = {}
    finish = None
    for ev in events:
        if not isinstance(ev, dict):
            continue
        et = ev.get("type")
        oi = ev.get("output_index")
        oi = oi if isinstance(oi, int) and not isinstance(oi, bool) and oi >= 0 else None
        if et == "response.output_text.delta" and isinstance(ev.get("delta"), str):
            texts.append(ev["delta"])
        elif et == "response.output_item.added" and isinstance(ev.get("item"), dict):
            item = ev["item"]
            if item.get("type") == "function_call":
                key = oi if oi is not None else max(items, default=-1) + 1
                prev = items.get(key)
                items[key] = {"id": item.get("call_id"), "name": item.get("name"), "init": item.get("arguments"), "args": None,
                              "names": (prev["names"] if prev else 0) + (1 if item.get("name") else 0),
                              "ids": (prev["ids"] if prev else []) + ([item["call_id"]] if isinstance(item.get("call_id"), str) else [])}
        elif et == "response.function_call_arguments.delta" and isinstance(ev.get("delta"), str) and oi is not None:
            it = items.setdefault(oi, {"id": None, "name": None, "init": None, "args": None, "names": 0, "ids": []})
            it["args"] = (it["args"] or "") + ev["delta"]
        elif et in ("response.completed", "response.incomplete", "response.failed") and isinstance(ev.get("response"), dict):
            st = ev["response"].get("status")
            finish = st if isinstance(st, str) else None
    out = ClientResult(content="".join(texts) if texts else None, finish_reason=finish, saw_calls=bool(items))
    for k in sorted(items):
        it = items[k]
        out.calls.append(
            ClientCall(
                index=len(out.calls), id=it["id"] if isinstance(it["id"], str) else None,
                name=it["name"] if isinstance(it["name"], str) else None, type="function_call",
                arguments=_text(it["args"] if it["args"] is not None else it["init"]),
                names_sent=it["names"], ids_sent=it["ids"],
            )
        )
    return out


_BY_ROUTE = {"chat.completions": assemble_chat, "messages": assemble_messages, "responses": assemble_responses}


def assemble(route: str, payloads: Iterable[dict]) -> ClientResult:
    """The client's result for one captured stream of ``route`` (``chat.completions``,
    ``messages``, ``responses``): :func:`assemble_chat`, :func:`assemble_messages` or
    :func:`assemble_responses`. Raises KeyError for another route."""
    return _BY_ROUTE[route](payloads)


# ------------------------------------------------------------------------------- replays


def chunks_from_events(events: Iterable[Any], *, finish_reason: str | None = None) -> list[dict]:
    """The ``chat.completion.chunk`` payloads a server sends for a tool parser's events, as vLLM's
    and SGLang's chat serving layers write them: one chunk per event that carries anything
    (``delta.content``, ``delta.reasoning_content``, ``delta.tool_calls``); a call delta that
    carries a ``name`` opens the call (``id``, ``type: "function"``, ``function.name``); others
    carry ``function.arguments`` (and a repeated ``function.name``) only. The call ``id`` is the
    event's own ``id`` wherever the parser gives one (a framework parser makes its own), else
    ``call_<index>`` on the opening delta.
    The last chunk carries ``finish_reason``: the given one, else ``tool_calls`` when any call
    delta was sent and ``stop`` otherwise (vLLM ``serving_chat``). ``events``: StreamDelta-shaped
    objects (``content``, ``reasoning``, ``calls`` of ``index``/``name``/``arguments``[/``id``])."""
    out: list[dict] = []
    saw_call = False
    opened: set[int] = set()
    for ev in events:
        delta: dict[str, Any] = {}
        if getattr(ev, "content", ""):
            delta["content"] = ev.content
        if getattr(ev, "reasoning", ""):
            delta["reasoning_content"] = ev.reasoning
        tcs = []
        for c in getattr(ev, "calls", ()) or ():
            saw_call = True
            entry: dict[str, Any] = {"index": c.index}
            cid = getattr(c, "id", None)
            fn: dict[str, Any] = {}
            if c.name is not None and c.index not in opened:
                opened.add(c.index)
                entry["id"] = cid if cid is not None else f"call_{c.index}"
                entry["type"] = "function"
            elif cid is not None:
                entry["id"] = cid
            if c.name is not None:
                fn["name"] = c.name
            fn["arguments"] = c.arguments or ""
            entry["function"] = fn
            tcs.append(entry)
        if tcs:
            delta["tool_calls"] = tcs
        if delta:
            out.append({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    fr = finish_reason or ("tool_calls" if saw_call else "stop")
    out.append({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": fr}]})
    return out


def assemble_events(events: Iterable[Any], *, finish_reason: str | None = None) -> ClientResult:
    """A replay's client result: what :func:`assemble_chat` gives for the chunks
    :func:`chunks_from_events` makes of the parser events, computed without building the chunks.

    For those chunks (each entry an int ``index`` and a ``function`` object; only the opening delta
    carries ``type: "function"``) the SDK merges each chunk's entries by list position (an index
    past the end appends), every field concatenated in order, and then looks each entry up at
    ``tool_calls[index]``: the one way it raises is an index still past the end after the chunk (a
    call skipped, a fragment for a call never opened): ``IndexError: list index out of range``. tests/test_assemble_sdk.py checks this against the SDK
    itself on generated events."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[ClientCall] = []
    args: list[list[str]] = []
    opened: set[int] = set()
    saw = False
    error = None
    for ev in events:
        if error:
            break
        if getattr(ev, "content", ""):
            content.append(ev.content)
        if getattr(ev, "reasoning", ""):
            reasoning.append(ev.reasoning)
        evcalls = getattr(ev, "calls", ())
        if not evcalls:  # most deltas carry text only
            continue
        evcalls = list(evcalls)
        for c in evcalls:  # one chunk: its entries merged by list position, as accumulate_delta does
            saw = True
            i = c.index
            if -len(calls) <= i < len(calls):
                call = calls[i]
                parts = args[i]
            else:  # list.insert past either end: at the end (or, for a negative index, the front)
                call = ClientCall(index=0, id=None, name=None, arguments=None)
                parts = []
                if i >= 0:
                    calls.append(call)
                    args.append(parts)
                else:
                    calls.insert(0, call)
                    args.insert(0, parts)
            cid = getattr(c, "id", None)
            if c.name is not None and c.index not in opened:
                opened.add(c.index)
                cid = cid if cid is not None else f"call_{c.index}"
                call.type = "function"
            if cid is not None:
                call.id = (call.id or "") + cid
                if cid:
                    call.ids_sent.append(cid)
            if c.name is not None:
                call.name = (call.name or "") + c.name
                if c.name:
                    call.names_sent += 1
            parts.append(c.arguments or "")
        if any(not -len(calls) <= c.index < len(calls) for c in evcalls):  # the SDK's tool_calls[index] lookups
            error = "IndexError: list index out of range"
    for pos, (call, parts) in enumerate(zip(calls, args)):
        call.index = pos
        call.arguments = "".join(parts)
    fr = finish_reason or ("tool_calls" if saw else "stop")
    return ClientResult(
        content="".join(content) if content else None,
        calls=calls,
        finish_reason=None if error else fr,
        reasoning="".join(reasoning) if reasoning else None,
        error=error,
        saw_calls=saw,
    )
