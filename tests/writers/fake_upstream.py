"""A scripted OpenAI- and Anthropic-compatible upstream on 127.0.0.1, for the capture-source generators.

The generators in ``tests/writers/`` drive a real writer package (``litellm``, the ``openai`` and
``anthropic`` SDKs) against this server and keep the file the package writes; this server keeps
what it received and what it sent, which the tests take as the expected exchanges.

:class:`FakeUpstream` takes answers with :meth:`FakeUpstream.script` (one :class:`Answer` per
request, in order) and serves:

- ``POST /v1/chat/completions`` (and ``/chat/completions``): a ``chat.completion`` body, or with
  ``"stream": true`` an SSE stream of ``chat.completion.chunk`` (the role first, content in
  pieces, each tool call's name and id in its first delta and its arguments in two fragments,
  ``finish_reason`` last, ``data: [DONE]``), as OpenAI streams them;
- ``POST /v1/messages``: an Anthropic ``message`` (``text`` and ``tool_use`` blocks).

Every request is logged in :attr:`FakeUpstream.log` as ``{"path", "request", "response"}`` or,
streamed, ``{"path", "request", "stream": [chunk, ...], "response"}`` with ``response`` the
equivalent whole ``chat.completion``. Standard library only (``http.server``); binds port 0.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Answer", "FakeUpstream"]

CREATED = 1767225600  # 2026-01-01T00:00:00Z: fixed, so that regenerated fixtures differ only where the writer does


@dataclass
class Answer:
    """One scripted answer: ``content`` (text or None), ``calls`` as ``(id, name, arguments JSON
    text)``; ``finish_reason`` defaults to ``tool_calls`` when there are calls, else ``stop``."""

    content: str | None = None
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    finish_reason: str | None = None

    def finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.calls else "stop")


def _completion(ans: Answer, model: str, rid: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": ans.content}
    if ans.calls:
        msg["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}} for cid, name, args in ans.calls
        ]
    return {
        "id": rid, "object": "chat.completion", "created": CREATED, "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": ans.finish(), "logprobs": None}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
    }


def _chunks(ans: Answer, model: str, rid: str) -> list[dict[str, Any]]:
    def chunk(delta: dict, finish: str | None = None) -> dict[str, Any]:
        return {"id": rid, "object": "chat.completion.chunk", "created": CREATED, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if ans.content:
        half = max(1, len(ans.content) // 2)
        out += [chunk({"content": ans.content[:half]}), chunk({"content": ans.content[half:]})]
    for i, (cid, name, args) in enumerate(ans.calls):
        out.append(chunk({"tool_calls": [{"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}]}))
        half = len(args) // 2
        for part in (args[:half], args[half:]):
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]}))
    out.append(chunk({}, ans.finish()))
    return out


def _anthropic_message(ans: Answer, model: str, rid: str) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if ans.content:
        blocks.append({"type": "text", "text": ans.content})
    for cid, name, args in ans.calls:
        blocks.append({"type": "tool_use", "id": cid, "name": name, "input": json.loads(args)})
    return {
        "id": rid, "type": "message", "role": "assistant", "model": model, "content": blocks,
        "stop_reason": "tool_use" if ans.calls else "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 50, "output_tokens": 20},
    }


class FakeUpstream:
    """The server (module docstring). Use as a context manager; :attr:`base_url` is
    ``http://127.0.0.1:<port>``. Raises ``RuntimeError`` from the handler (answered as HTTP 500)
    when a request arrives with no scripted answer left."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.log: list[dict[str, Any]] = []
        self._n = 0
        self._lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                with upstream._lock:
                    if not upstream.answers:
                        self.send_error(500, "no scripted answer left")
                        return
                    ans = upstream.answers.pop(0)
                    upstream._n += 1
                    n = upstream._n
                model = body.get("model", "fake")
                entry: dict[str, Any] = {"path": self.path, "request": body}
                if self.path.rstrip("/").endswith("/messages"):
                    resp = _anthropic_message(ans, model, f"msg_fake{n:03d}")
                    entry["response"] = resp
                    self._send_json(resp)
                elif body.get("stream"):
                    rid = f"chatcmpl-fake{n:03d}"
                    chunks = _chunks(ans, model, rid)
                    entry["stream"] = chunks
                    entry["response"] = _completion(ans, model, rid)
                    data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    resp = _completion(ans, model, f"chatcmpl-fake{n:03d}")
                    entry["response"] = resp
                    self._send_json(resp)
                with upstream._lock:
                    upstream.log.append(entry)

            def _send_json(self, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def script(self, *answers: Answer) -> None:
        """Queue ``answers`` for the next requests, in order."""
        with self._lock:
            self.answers.extend(answers)

    def __enter__(self) -> "FakeUpstream":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
