"""A local OpenAI-compatible server (``POST /v1/chat/completions`` on 127.0.0.1) that answers a
fixed script of exchanges and records what it received and sent: the oracle of the capture fixtures.

:data:`EXCHANGES` is the script every generator runs, in order: (1) a tool call; (2) a history
holding an assistant tool call and its tool result, answered with text; (3) two parallel calls,
streamed; (4) a text answer, streamed. Every request declares the same 2 tools (:data:`TOOLS`).

:class:`FakeOpenAI` serves the script: the n-th request gets the n-th scripted answer (a
``chat.completion`` body, or SSE ``chat.completion.chunk`` events ending with ``data: [DONE]`` when
the request has ``stream: true``; a usage chunk when it asked ``stream_options.include_usage``).
``POST /v1/embeddings`` gets :data:`EMBEDDING` and is not recorded (not an exchange: the writers'
embedding spans are there to be skipped).
:meth:`FakeOpenAI.expected` returns one dict per exchange: ``{"exchange": n, "request": <the body
received, parsed>, "response": <the body sent> | None, "stream": [<each chunk sent>] | None}``.
:attr:`FakeOpenAI.wire` keeps, per exchange, the bytes as they crossed the wire: ``{"request": <the
body received>, "response": <the body or the SSE text sent>}`` (what a gateway that logs raw bodies
holds). Standard library only (http.server), so it runs beside any writer's dependencies.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["CREATED", "EMBEDDING", "EMBEDDING_MODEL", "EXCHANGES", "FakeOpenAI", "MODEL", "TOOLS"]

MODEL = "gpt-4o-mini"
#: ``created`` of every body and chunk (seconds since the epoch), so the fixtures do not depend on the clock.
CREATED = 1764500000

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Local time in an IANA time zone.",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}},
]

_SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
_CALL_1 = {"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Lisbon\"}"}}

#: The script: each item is the request the generator sends (``stream`` included) and the answer:
#: ``content`` (str or None), ``tool_calls`` (Chat Completions calls) and ``finish_reason``;
#: ``pieces``: for a streamed answer, how its content / each call's arguments are cut into deltas.
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


def _body(n: int, answer: dict) -> dict:
    msg: dict[str, Any] = {"role": "assistant", "content": answer["content"]}
    if answer["tool_calls"]:
        msg["tool_calls"] = answer["tool_calls"]
    return {"id": f"chatcmpl-fx{n}", "object": "chat.completion", "created": CREATED, "model": MODEL,
            "choices": [{"index": 0, "message": msg, "finish_reason": answer["finish_reason"]}], "usage": _USAGE}


def _chunks(n: int, ex: dict, include_usage: bool) -> list[dict]:
    answer, pieces = ex["answer"], ex.get("pieces") or []

    def chunk(delta: dict, finish: str | None = None) -> dict:
        c = {"id": f"chatcmpl-fx{n}", "object": "chat.completion.chunk", "created": CREATED, "model": MODEL,
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if include_usage:
            c["usage"] = None
        return c

    out = [chunk({"role": "assistant", "content": "" if not answer["tool_calls"] else None})]
    if answer["tool_calls"]:
        for i, (call, parts) in enumerate(zip(answer["tool_calls"], pieces)):
            out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                              "function": {"name": call["function"]["name"], "arguments": ""}}]}))
            out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for p in parts]
    else:
        out += [chunk({"content": p}) for p in pieces]
    out.append(chunk({}, answer["finish_reason"]))
    if include_usage:
        out.append({"id": f"chatcmpl-fx{n}", "object": "chat.completion.chunk", "created": CREATED, "model": MODEL,
                    "choices": [], "usage": _USAGE})
    return out


class FakeOpenAI:
    """The scripted server on ``127.0.0.1`` (an ephemeral port): :attr:`base_url` is the ``/v1``
    URL for the SDK. Use as a context manager (starts and stops the server thread). A request past
    the end of the script, or to another path, gets HTTP 404 and is not recorded."""

    def __init__(self, exchanges: list[dict] = EXCHANGES) -> None:
        self.exchanges = exchanges
        self.records: list[dict] = []
        self.wire: list[dict[str, bytes]] = []
        self.stored: list[dict] = []  # store: true (see the stored-completions block at the end)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - stored completions (the block at the end)
                _stored_get(outer, self)

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                n = len(outer.records)
                if self.path.rstrip("/") == "/v1/embeddings":  # not an exchange: answered, not recorded
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    data = json.dumps(EMBEDDING).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if self.path.rstrip("/") != "/v1/chat/completions" or n >= len(outer.exchanges):
                    self.send_response(404)
                    self.end_headers()
                    return
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                req = json.loads(raw)
                ex = outer.exchanges[n]
                wire = {"request": raw, "response": b""}
                outer.wire.append(wire)
                rec: dict[str, Any] = {"exchange": n + 1, "request": req, "response": None, "stream": None}
                outer.records.append(rec)
                if req.get("stream"):
                    usage = bool((req.get("stream_options") or {}).get("include_usage"))
                    chunks = _chunks(n + 1, ex, usage)
                    rec["stream"] = chunks
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for c in chunks:
                        wire["response"] += b"data: " + json.dumps(c).encode() + b"\n\n"
                    wire["response"] += b"data: [DONE]\n\n"
                    self.wfile.write(wire["response"])
                    self.wfile.flush()
                    self.close_connection = True
                else:
                    body = _body(n + 1, ex["answer"])
                    rec["response"] = body
                    data = json.dumps(body).encode()
                    wire["response"] = data
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                if req.get("store"):  # stored completions (the block at the end)
                    outer.stored.append(_stored_completion(n + 1, ex, req))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

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
    body = _body(n, ex["answer"])
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
