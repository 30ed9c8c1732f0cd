"""A local OpenAI- and Anthropic-compatible server on 127.0.0.1 that answers a script of exchanges
and records what it received and sent: the oracle of the capture fixtures, the one fake server of
every generator in ``tests/writers/``.

:data:`EXCHANGES` is the script most generators run, in order: (1) a tool call; (2) a history
holding an assistant tool call and its tool result, answered with text; (3) two parallel calls,
streamed; (4) a text answer, streamed. Every request declares the same 2 tools (:data:`TOOLS`).
A generator may pass its own script (``tests/writers/scenarios.py``: the LiteLLM and Batch
fixtures').

:class:`FakeOpenAI` serves a script: the n-th request gets the n-th scripted answer, whatever its
route:

- ``POST /v1/chat/completions``: a ``chat.completion`` body, or SSE ``chat.completion.chunk``
  events ending with ``data: [DONE]`` when the request has ``stream: true`` (a usage chunk when it
  asked ``stream_options.include_usage``);
- ``POST /v1/messages``: an Anthropic ``message`` (a ``text`` block, then one ``tool_use`` block
  per call); not streamed.

- ``POST /tokenize``, ``POST /detokenize`` (vLLM's tokenize endpoints, when the server is made
  with ``tokenize=``: the block at the end, :class:`Tokenize`): answered at once, several at a
  time, not recorded as exchanges.

Every answer names the model the request named. ``POST /v1/embeddings`` gets :data:`EMBEDDING`
and is not recorded (not an exchange: the writers' embedding spans are there to be skipped).
:meth:`FakeOpenAI.expected` returns one dict per exchange: ``{"exchange": n, "request": <the body
received, parsed>, "response": <the body sent> | None, "stream": [<each chunk sent>] | None}``
(:func:`answer_of` reads the answer back from it). A generator's ``expected.jsonl`` holds these
dicts, one a line, with keys of its own added (where the exchange stands in its files).
:attr:`FakeOpenAI.wire` keeps, per exchange, the bytes as they crossed the wire: ``{"request": <the
body received>, "response": <the body or the SSE text sent>}`` (what a gateway that logs raw bodies
holds). Standard library only (http.server), so it runs beside any writer's dependencies.
"""

from __future__ import annotations

import json
from pathlib import Path
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Tokenize", "CREATED", "EMBEDDING", "EMBEDDING_MODEL", "EXCHANGES", "FakeOpenAI", "MODEL", "TOOLS", "answer_of", "function_tool", "write_expected"]

MODEL = "gpt-4o-mini"
#: ``created`` of every body and chunk (seconds since the epoch), so the fixtures do not depend on the clock.
CREATED = 1764500000



def function_tool(name: str, description: str, argument: str) -> dict[str, Any]:
    """A Chat Completions tool declaration ``{"type": "function", "function": {...}}`` taking one
    required string ``argument``; returns a new dict."""
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {argument: {"type": "string"}}, "required": [argument]}}}


TOOLS: list[dict[str, Any]] = [
    function_tool("get_weather", "Current weather for a city.", "city"),
    function_tool("get_time", "Local time in an IANA time zone.", "tz"),
]

_SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
_CALL_1 = {"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Lisbon\"}"}}

#: The script: each item is the request the generator sends (``stream`` included) and the answer:
#: ``content`` (str or None), ``tool_calls`` (Chat Completions calls) and ``finish_reason``;
#: ``pieces``: for a streamed answer, how its content (without calls) / each call's arguments are
#: cut into deltas. The server reads only ``answer`` and ``pieces`` (answer keys and pieces may be
#: left out: :func:`_chunks`, :func:`_finish`).
EXCHANGES: list[dict[str, Any]] = [
    {"request": {"model": MODEL, "messages": [_SYSTEM, {"role": "user", "content": "Weather in Lisbon?"}], "tools": TOOLS},
     "answer": {"content": None, "tool_calls": [_CALL_1], "finish_reason": "tool_calls"}},
    {"request": {"model": MODEL, "messages": [
        _SYSTEM, {"role": "user", "content": "Weather in Lisbon?"},
        {"role": "assistant", "content": None, "tool_calls": [_CALL_1]},
        {"role": "tool", "tool_call_id": "call_w1", "content": "{\"temp_c\": 21}"}], "tools": TOOLS},
     "answer": {"content": "It is 21 °C in Lisbon.", "tool_calls": [], "finish_reason": "stop"}},
    {"request": {"model": MODEL, "messages": [_SYSTEM, {"role": "user", "content": "Weather and time in Paris?"}],
                 "tools": TOOLS, "stream": True},
     "answer": {"content": None, "finish_reason": "tool_calls", "tool_calls": [
         {"id": "call_p1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
         {"id": "call_p2", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"Europe/Paris\"}"}}]},
     "pieces": [["{\"city\": ", "\"Paris\"}"], ["{\"tz\": ", "\"Europe/", "Paris\"}"]]},
    {"request": {"model": MODEL, "messages": [_SYSTEM, {"role": "user", "content": "Say hello."}], "tools": TOOLS, "stream": True},
     "answer": {"content": "Hello! How can I help?", "tool_calls": [], "finish_reason": "stop"},
     "pieces": ["Hello", "! How", " can I help?"]},
]

_USAGE = {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
EMBEDDING_MODEL = "text-embedding-3-small"
#: The answer to every ``POST /v1/embeddings`` (a call that is not an exchange: not recorded).
EMBEDDING = {"object": "list", "model": EMBEDDING_MODEL, "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5, 0.125]}],
             "usage": {"prompt_tokens": 2, "total_tokens": 2}}


def _finish(answer: dict) -> str:
    """The answer's ``finish_reason``; left out: ``tool_calls`` when it has calls, else ``stop``."""
    return answer.get("finish_reason") or ("tool_calls" if answer.get("tool_calls") else "stop")


def _body(n: int, answer: dict, model: str) -> dict:
    msg: dict[str, Any] = {"role": "assistant", "content": answer.get("content")}
    if answer.get("tool_calls"):
        msg["tool_calls"] = answer["tool_calls"]
    return {"id": f"chatcmpl-fx{n}", "object": "chat.completion", "created": CREATED, "model": model,
            "choices": [{"index": 0, "message": msg, "finish_reason": _finish(answer)}], "usage": _USAGE}


def _halves(text: str) -> list[str]:
    half = max(1, len(text) // 2)
    return [text[:half], text[half:]]


def _chunks(n: int, ex: dict, model: str, include_usage: bool) -> list[dict]:
    """The chunks of a streamed answer: the role, the content's pieces, each call's id and name
    then its arguments' pieces, ``finish_reason`` alone, as OpenAI streams them. ``ex["pieces"]``
    left out: the content and each call's arguments in two halves."""
    answer, pieces = ex["answer"], ex.get("pieces")
    calls, content = answer.get("tool_calls") or [], answer.get("content")

    def chunk(delta: dict, finish: str | None = None) -> dict:
        c = {"id": f"chatcmpl-fx{n}", "object": "chat.completion.chunk", "created": CREATED, "model": model,
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if include_usage:
            c["usage"] = None
        return c

    out = [chunk({"role": "assistant", "content": "" if not calls else None})]
    if content:
        out += [chunk({"content": p}) for p in (pieces if pieces and not calls else _halves(content))]
    for i, call in enumerate(calls):
        parts = pieces[i] if pieces and calls else _halves(call["function"]["arguments"])
        out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for p in parts]
    out.append(chunk({}, _finish(answer)))
    if include_usage:
        out.append({"id": f"chatcmpl-fx{n}", "object": "chat.completion.chunk", "created": CREATED, "model": model,
                    "choices": [], "usage": _USAGE})
    return out


#: Chat Completions finish_reason -> Anthropic stop_reason.
_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _message(n: int, answer: dict, model: str) -> dict:
    """The answer as an Anthropic Messages ``message``: a ``text`` block (when there is content),
    then a ``tool_use`` block per call (``input``: its arguments parsed)."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": answer["content"]}] if answer.get("content") else []
    blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": json.loads(c["function"]["arguments"])}
               for c in answer.get("tool_calls") or []]
    return {"id": f"msg_fx{n}", "type": "message", "role": "assistant", "model": model, "content": blocks,
            "stop_reason": _STOP_REASONS[_finish(answer)], "stop_sequence": None,
            "usage": {"input_tokens": _USAGE["prompt_tokens"], "output_tokens": _USAGE["completion_tokens"]}}


def answer_of(record: dict) -> tuple[str | None, list[tuple[str, str, Any]], str]:
    """What one :meth:`FakeOpenAI.expected` record says the server answered: ``(content or None,
    [(call id, name, arguments parsed)], finish_reason)``, from its Chat Completions body, or its
    chunks joined by call index as the OpenAI SDK joins them (content concatenated, a call's name
    and arguments concatenated across deltas). Raises ``json.JSONDecodeError`` when joined
    arguments are not JSON, ``KeyError`` on an Anthropic message (read its ``content`` blocks)."""
    if record["response"] is not None:
        choice = record["response"]["choices"][0]
        calls = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in choice["message"].get("tool_calls") or []]
        return choice["message"]["content"] or None, calls, choice["finish_reason"]
    content, joined, finish = "", {}, None
    for chunk in record["stream"]:
        for ch in chunk["choices"]:
            d = ch["delta"]
            content += d.get("content") or ""
            for tc in d.get("tool_calls") or []:
                c = joined.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                c["id"] = tc.get("id") or c["id"]
                c["name"] += (tc.get("function") or {}).get("name") or ""
                c["arguments"] += (tc.get("function") or {}).get("arguments") or ""
            finish = ch.get("finish_reason") or finish
    return content or None, [(c["id"], c["name"], json.loads(c["arguments"])) for _, c in sorted(joined.items())], finish


class FakeOpenAI:
    """The scripted server on ``127.0.0.1`` (an ephemeral port): :attr:`base_url` is the ``/v1``
    URL for the OpenAI SDK, :attr:`origin` the URL for SDKs that add ``/v1`` themselves (the
    Anthropic SDK). ``exchanges``: the script, items as in :data:`EXCHANGES` (only ``answer`` and
    ``pieces`` are read). Use as a context manager (starts and stops the server thread). A request
    past the end of the script, to another path, or a streamed ``/v1/messages`` request gets HTTP
    404 and is not recorded. Requests are answered one at a time, in the order they arrive."""

    def __init__(self, exchanges: list[dict] = EXCHANGES, tokenize: "Tokenize | None" = None) -> None:
        self.exchanges = exchanges
        self.tokenize = tokenize
        self.records: list[dict] = []
        self.wire: list[dict[str, bytes]] = []
        self._lock = threading.Lock()
        self.stored: list[dict] = []  # store: true (see the stored-completions block at the end)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - stored completions (the block at the end)
                _stored_get(outer, self)

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                if outer.tokenize is not None and self.path.rstrip("/") in ("/tokenize", "/detokenize"):
                    outer.tokenize.handle(self)  # not an exchange: concurrent, not recorded
                    return
                with outer._lock:
                    self._answer()

            def _answer(self) -> None:
                n = len(outer.records)
                path = self.path.rstrip("/")
                if path == "/v1/embeddings":  # not an exchange: answered, not recorded
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    self._send_json(EMBEDDING)
                    return
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                req = json.loads(raw or b"{}")
                if path not in ("/v1/chat/completions", "/v1/messages") or n >= len(outer.exchanges) or (
                        path == "/v1/messages" and req.get("stream")):
                    self.send_response(404)
                    self.end_headers()
                    return
                ex = outer.exchanges[n]
                model = req.get("model") or MODEL
                rec: dict[str, Any] = {"exchange": n + 1, "request": req, "response": None, "stream": None}
                outer.records.append(rec)
                self._wire = {"request": raw, "response": b""}
                outer.wire.append(self._wire)
                if path == "/v1/messages":
                    rec["response"] = _message(n + 1, ex["answer"], model)
                    self._send_json(rec["response"])
                elif req.get("stream"):
                    usage = bool((req.get("stream_options") or {}).get("include_usage"))
                    chunks = _chunks(n + 1, ex, model, usage)
                    rec["stream"] = chunks
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for c in chunks:
                        self._wire["response"] += b"data: " + json.dumps(c).encode() + b"\n\n"
                    self._wire["response"] += b"data: [DONE]\n\n"
                    self.wfile.write(self._wire["response"])
                    self.wfile.flush()
                    self.close_connection = True
                else:
                    rec["response"] = _body(n + 1, ex["answer"], model)
                    self._send_json(rec["response"])
                if req.get("store"):  # stored completions (the block at the end)
                    outer.stored.append(_stored_completion(n + 1, ex, req))

            _wire: dict[str, bytes] | None = None  # this request's entry of FakeOpenAI.wire (None: not an exchange)

            def _send_json(self, obj: Any) -> None:
                data = json.dumps(obj).encode()
                if self._wire is not None:
                    self._wire["response"] = data
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"{self.origin}/v1"

    def __enter__(self) -> "FakeOpenAI":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def expected(self) -> list[dict]:
        """What was received and sent, one dict per exchange in order (shape: module docstring)."""
        return list(self.records)


# --- stored completions (``store: true``): the list and messages endpoints -------------------------
# A request with ``store: true`` is kept as the API keeps it (openai SDK 3.63: ``ChatCompletion`` plus
# the stored fields of the API reference's "List Chat Completions" example: ``metadata``,
# ``request_id``, ``tools``, ``tool_choice``, ``seed``, ``temperature``, ``top_p``; a streamed
# answer stored as its assembled ``chat.completion``), its request messages as
# ``ChatCompletionStoreMessage`` s (``id`` ``<completion id>-<i>``, ``content_parts`` null).
# ``GET /v1/chat/completions`` (``after``, ``limit`` default 20, ``order`` asc|desc, ``model``) and
# ``GET /v1/chat/completions/<id>/messages`` (``after``, ``limit``, ``order``) answer cursor pages
# ``{"object": "list", "data", "first_id", "last_id", "has_more"}``; GETs are not exchanges.
STORED_REQUEST_ID = "req_fx{n}"


def _stored_completion(n: int, ex: dict, req: dict) -> dict:
    body = _body(n, ex["answer"], req.get("model") or MODEL)
    body.update({"metadata": req.get("metadata") or {}, "request_id": STORED_REQUEST_ID.format(n=n),
                 "tools": req.get("tools"), "tool_choice": req.get("tool_choice"), "seed": req.get("seed"),
                 "temperature": req.get("temperature", 1.0), "top_p": req.get("top_p", 1.0)})
    messages = [{"id": f"{body['id']}-{i}", **m, "content_parts": None} for i, m in enumerate(req.get("messages") or [])]
    return {"completion": body, "messages": messages}


def _page(items: list[dict], query: dict[str, list[str]]) -> dict:
    if (query.get("order") or ["asc"])[0] == "desc":
        items = items[::-1]
    after = (query.get("after") or [None])[0]
    if after is not None:
        ids = [it["id"] for it in items]
        items = items[ids.index(after) + 1:] if after in ids else []
    limit = int((query.get("limit") or ["20"])[0])
    data = items[:limit]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": len(items) > limit}


def _stored_get(outer: "FakeOpenAI", handler: BaseHTTPRequestHandler) -> None:
    from urllib.parse import parse_qs, urlsplit

    url = urlsplit(handler.path)
    parts = url.path.rstrip("/").split("/")
    query = parse_qs(url.query)
    page = None
    if parts[:4] == ["", "v1", "chat", "completions"] and len(parts) == 4:
        items = [s["completion"] for s in outer.stored]
        if query.get("model"):
            items = [c for c in items if c["model"] == query["model"][0]]
        page = _page(items, query)
    elif parts[:4] == ["", "v1", "chat", "completions"] and len(parts) == 6 and parts[5] == "messages":
        found = [s["messages"] for s in outer.stored if s["completion"]["id"] == parts[4]]
        page = _page(found[0], query) if found else None
    if page is None:
        handler.send_response(404)
        handler.end_headers()
        return
    data = json.dumps(page).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def write_expected(folder: Path, records: list[dict]) -> None:
    """Write ``records`` (what :meth:`FakeOpenAI.expected` returned, with a generator's own keys)
    as ``folder/expected.jsonl``: one compact JSON object a line, non-ASCII kept."""
    (folder / "expected.jsonl").write_text("".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n" for e in records))


# --- vLLM's tokenize endpoints (``FakeOpenAI(tokenize=Tokenize(...))``) ------------------------------
# ``POST /tokenize`` with vLLM's TokenizeChatRequest (``messages``, ``tools``, ``add_generation_prompt``,
# ``return_token_strs``; vllm/entrypoints/serve/tokenize/protocol.py) renders the chat template with
# transformers' ``apply_chat_template`` and tokenizes the text (no special tokens added), as vLLM's
# handler does; with TokenizeCompletionRequest (``prompt``, ``add_special_tokens``) it tokenizes the
# text. It answers vLLM's TokenizeResponse ``{"count", "max_model_len", "tokens", "token_strs"}``
# (``token_strs``: ``convert_ids_to_tokens``, only when asked). ``POST /detokenize`` ``{"tokens"}``
# answers ``{"prompt"}``. Faults are scripted per request number (counted from 1, in arrival order).


class Tokenize:
    """The tokenize endpoints' state. ``tokenizer``: a transformers tokenizer (a
    ``PreTrainedTokenizerFast``); ``chat_template``: the Jinja template text it renders;
    ``ids``: optional ``(tokenizer, text) -> ids`` replacing ``tokenizer.encode`` for chat requests
    (a server whose tokenization differs); ``faults``: ``{request number: (status, delay seconds)}``
    (status 0: the answer is delayed by ``delay`` then sent normally; a status other than 200:
    that status with vLLM's error body); ``delay``: seconds every request waits before answering
    (so that requests overlap). Records ``requests`` (the request bodies, in arrival order),
    ``in_flight`` now and ``max_in_flight``."""

    def __init__(self, tokenizer: Any, chat_template: str, *, ids: Any = None,
                 faults: dict[int, tuple[int, float]] | None = None, delay: float = 0.0, max_model_len: int = 32768) -> None:
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        self.ids = ids
        self.faults = dict(faults or {})
        self.delay = delay
        self.max_model_len = max_model_len
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        import time

        left = []

        def leave() -> None:  # once per request
            if not left:
                left.append(True)
                with self._lock:
                    self.in_flight -= 1

        def _reply(h: BaseHTTPRequestHandler, status: int, obj: Any) -> None:
            # a request leaves in_flight before its answer is written: the client sends its next
            # request as soon as it has read this one's answer, before the handler returns
            leave()
            _write_reply(h, status, obj)

        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        with self._lock:
            self.requests.append(json.loads(raw or b"{}"))
            n = len(self.requests)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            status, wait = self.faults.get(n, (200, 0.0))
            time.sleep(self.delay + wait)
            if status not in (0, 200):
                _reply(h, status, {"error": {"message": f"planted fault on request {n}", "type": "InternalServerError",
                                             "param": None, "code": status}})
                return
            req = self.requests[n - 1]
            tok = self.tokenizer
            if h.path.rstrip("/") == "/detokenize":
                _reply(h, 200, {"prompt": tok.decode(req["tokens"])})
                return
            if "messages" in req:
                text = tok.apply_chat_template(req["messages"], tools=req.get("tools"), chat_template=self.chat_template,
                                               add_generation_prompt=req.get("add_generation_prompt", True), tokenize=False)
                ids = self.ids(tok, text) if self.ids is not None else tok.encode(text, add_special_tokens=False)
            else:
                ids = tok.encode(req["prompt"], add_special_tokens=bool(req.get("add_special_tokens", True)))
            body = {"count": len(ids), "max_model_len": self.max_model_len, "tokens": ids,
                    "token_strs": tok.convert_ids_to_tokens(ids) if req.get("return_token_strs") else None}
            _reply(h, 200, body)
        finally:
            leave()


def _write_reply(h: BaseHTTPRequestHandler, status: int, obj: Any) -> None:
    data = json.dumps(obj).encode()
    try:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
        h.close_connection = True
