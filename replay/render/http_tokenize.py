"""A running server as a side's renderer: its tokenize endpoint renders and tokenizes each request.

Spec (the ``renderer`` key of a side, or ``--renderer``): ``http://HOST:PORT[/PATH][?OPTIONS]``
(``https://`` too). Each prepared request (the side's preparer's messages and its serializer's
tool declarations) is sent as vLLM's tokenize request, ``POST /tokenize`` with
``{"model", "messages", "tools", "add_generation_prompt": true, "return_token_strs": true}``
(vLLM's ``TokenizeChatRequest``, ``vllm/entrypoints/serve/tokenize/protocol.py``; older
releases: ``vllm/entrypoints/openai/protocol.py``), and the answer's ``tokens`` (the
``TokenizeResponse``: ``count``, ``max_model_len``, ``tokens``, ``token_strs``) are the side's
token ids: the renders table records them (``prompt_ids_sha256``, ``prompt_tokens``,
``tokens_differing``) and divergence is judged by ids (:func:`ids_plan`). A URL without a path
posts to ``/tokenize``; a URL with a path posts to that path as given. SGLang has no equivalent:
its ``/v1/tokenize`` takes only a ``prompt`` text (``serving_tokenize.py``), no messages.

The prompt text (``prompt_sha256``, ``prompt_chars``) is the answer's ``prompt`` when it has one
(a server of your own may send it), else the ``token_strs`` joined and read as byte-level BPE
tokens (GPT-2's byte alphabet, what ``convert_ids_to_tokens`` returns for Qwen, Llama 3,
DeepSeek ...; a token string outside that alphabet, a special token such as
``<｜begin▁of▁sentence｜>``, is taken as written), else (``text=detokenize``, or no
``token_strs``) the ``prompt`` of ``POST /detokenize`` with the ids. For SentencePiece
tokenizers (``▁`` for a space) give ``text=detokenize``.

OPTIONS (a query string, read here and not sent):

- ``model``: the request's ``model`` (default: none sent, which vLLM takes as the model it
  serves; it answers 404 for a name it does not serve);
- ``concurrency``: requests in flight at once (default :data:`DEFAULT_CONCURRENCY`);
- ``timeout``: seconds per request (default :data:`DEFAULT_TIMEOUT`);
- ``retries``: further attempts after a connection error (refused, reset, connect timeout) or an
  HTTP 429 or 5xx answer (default :data:`DEFAULT_RETRIES`), waiting ``backoff`` seconds (default
  :data:`DEFAULT_BACKOFF`) times 2 to the attempt's number between attempts; a read timeout is
  not retried (a server that hangs costs one ``timeout`` per request);
- ``text``: ``token-strs`` (default) or ``detokenize`` (above);
- ``add_generation_prompt``: ``true`` (default) or ``false``.

A request that fails (after its retries) fails that side's render of that exchange: its
``renders`` row's ``error`` names the URL and the HTTP status (``tokenize
http://127.0.0.1:8000/tokenize: HTTP 500 after 4 attempts: ...``), or the timeout or connection
error; the audit goes on and the render-failure check counts it. The requests of one render
batch are sent together (:func:`prefetch`, ``concurrency`` at a time), then each side's row is
made from the answers as for any renderer.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from replay import exactjson
from replay.render.base import RenderError

__all__ = ["DEFAULT_CONCURRENCY", "DEFAULT_TIMEOUT", "DEFAULT_RETRIES", "DEFAULT_BACKOFF", "TokenizeError", "TokenizeSpec",
           "HttpTokenizeRenderer", "is_tokenize_spec", "parse_spec", "decode_token_strs", "prefetch", "ids_plan", "token_ids"]

#: Requests in flight at once per server (``concurrency=``).
DEFAULT_CONCURRENCY = 4
#: Seconds one request may take (``timeout=``).
DEFAULT_TIMEOUT = 30.0
#: Further attempts after a connection error or an HTTP 429 / 5xx (``retries=``).
DEFAULT_RETRIES = 3
#: Seconds before the first retry, doubled for each next one (``backoff=``).
DEFAULT_BACKOFF = 0.5
#: ``vocab`` of every server renderer: their ids are kept as they are (the sides' servers are
#: taken to serve one model), other sides' prompts are tokenized (:func:`ids_plan`).
VOCAB = "server-tokenize"
#: Answers of earlier batches kept per server renderer (besides the current batch's).
KEEP_ANSWERS = 128
TEXT_MODES = ("token-strs", "detokenize")


class TokenizeError(RenderError):
    """A tokenize request that failed after its retries: the message names the URL and the HTTP
    status, timeout or connection error; recorded as the side's ``renders.error``."""


class _Deferred(Exception):
    """Raised by a renderer while :func:`prefetch` collects the requests of a batch (not a
    RenderError: the SGLang preparer's flat-tools retry does not run on it)."""


def is_tokenize_spec(spec: str) -> bool:
    """Whether a renderer spec names a server (``http://`` or ``https://``)."""
    return spec.strip().lower().startswith(("http://", "https://"))


@dataclass(frozen=True)
class TokenizeSpec:
    """A parsed server spec (module docstring): ``url`` the tokenize endpoint, ``origin`` the
    server (``scheme://host:port``), the options with their defaults."""

    url: str
    origin: str
    model: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    backoff: float = DEFAULT_BACKOFF
    text: str = "token-strs"
    add_generation_prompt: bool = True


def parse_spec(spec: str) -> TokenizeSpec:
    """The :class:`TokenizeSpec` of ``http[s]://HOST:PORT[/PATH][?OPTIONS]``. Raises ValueError
    (the caller names the option and the spec) for a URL without a host, a URL the HTTP client
    (httpx) refuses (a port that is not a number from 0 to 65535, ...), an unknown option, or an
    option value out of range
    (``concurrency`` and ``retries`` integers, ``concurrency`` at least 1; ``timeout`` a positive
    number of seconds; ``backoff`` seconds, 0 or more)."""
    spec = spec.strip()
    parts = urlsplit(spec)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError("expected http://HOST:PORT[/PATH][?OPTIONS]")
    path = parts.path if parts.path not in ("", "/") else "/tokenize"
    url = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    import httpx

    try:  # the client that will post to it checks the URL now (a port that is no number, ...), not mid-render
        parts.port
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as exc:
        raise ValueError(f"expected http://HOST:PORT[/PATH][?OPTIONS]: {exc}") from None
    kw: dict[str, Any] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        key = key.replace("-", "_")
        try:
            if key == "model":
                kw["model"] = value
            elif key in ("concurrency", "retries"):
                kw[key] = int(value)
                if kw[key] < (1 if key == "concurrency" else 0):
                    raise ValueError(f"{key} must be at least {1 if key == 'concurrency' else 0}")
            elif key in ("timeout", "backoff"):
                kw[key] = float(value)
                if not (kw[key] > 0 if key == "timeout" else kw[key] >= 0):
                    raise ValueError(f"{key} must be {'positive' if key == 'timeout' else '0 or more'} (seconds)")
            elif key == "text":
                if value not in TEXT_MODES:
                    raise ValueError(f"text must be one of {', '.join(TEXT_MODES)}")
                kw["text"] = value
            elif key == "add_generation_prompt":
                if value.lower() not in ("true", "false"):
                    raise ValueError("add_generation_prompt must be true or false")
                kw["add_generation_prompt"] = value.lower() == "true"
            else:
                raise KeyError(key)
        except KeyError:
            raise ValueError(f"unknown option {key!r} (model, concurrency, timeout, retries, backoff, text, add_generation_prompt)") from None
        except ValueError as exc:  # int()/float()'s own words name the value
            raise ValueError(f"option {key}: {exc}") from None
    return TokenizeSpec(url=url, origin=urlunsplit((parts.scheme, parts.netloc, "", "", "")), **kw)


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet reversed: each of the 256 characters byte-level BPE
    tokenizers write for a byte -> that byte (``bytes_to_unicode`` of GPT-2's ``encoder.py``)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_BYTES = _byte_decoder()


def decode_token_strs(token_strs: list[str]) -> str:
    """The text of byte-level BPE token strings (what vLLM's ``return_token_strs`` gives:
    ``convert_ids_to_tokens``): each string whose every character is in GPT-2's byte alphabet is
    read as those bytes, any other (a special token) as its UTF-8; the bytes joined are decoded as
    UTF-8 (an invalid sequence as U+FFFD)."""
    out = bytearray()
    for s in token_strs:
        if all(c in _BYTES for c in s):
            out.extend(_BYTES[c] for c in s)
        else:
            out.extend(s.encode("utf-8"))
    return out.decode("utf-8", errors="replace")


class HttpTokenizeRenderer:
    """Render (and tokenize) requests on a running server's tokenize endpoint (module docstring).

    ``spec``: the renderer spec (:func:`parse_spec`). ``render_ids(messages, tools)``
    returns ``(prompt text, token ids)``; ``render`` the text. ``name``: ``tokenize:URL``;
    ``vocab``: :data:`VOCAB`; ``counts_own_ids``: its rows' ``prompt_tokens`` are the server's
    ids' count; ``tokenizer``: tokenizes another side's prompt text on the same
    server (``POST`` with ``prompt`` and ``add_special_tokens: false``, vLLM's
    ``TokenizeCompletionRequest``). Raises :class:`TokenizeError` (a RenderError) for a request
    that fails after its retries or an answer that is not a tokenize response. ``stats``:
    ``requests`` (HTTP requests sent, retries included), ``retries``, ``failed``."""

    vocab = VOCAB
    counts_own_ids = True  # prompt_tokens: the server's ids' count, even with a --tokenizer

    def __init__(self, spec: str) -> None:
        import httpx

        self.given = spec
        self.spec = parse_spec(spec)
        self.name = f"tokenize:{self.spec.url}"
        self._client = httpx.Client(timeout=self.spec.timeout, limits=httpx.Limits(max_connections=self.spec.concurrency))
        self._cache: dict[bytes, Any] = {}  # request body -> (text, ids) or TokenizeError, oldest first
        self._recording: list[bytes] | None = None
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "failed": 0}
        self.tokenizer = _ServerTextTokenizer(self)

    def __reduce__(self) -> tuple[Any, ...]:  # a copy in another process builds its own client
        return (HttpTokenizeRenderer, (self.given,))

    def body(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> bytes:
        """The JSON body sent for one render (the cache key of :func:`prefetch`)."""
        req: dict[str, Any] = {"model": self.spec.model} if self.spec.model is not None else {}
        req["messages"] = messages
        if tools is not None:
            req["tools"] = tools
        req["add_generation_prompt"] = self.spec.add_generation_prompt
        req["return_token_strs"] = self.spec.text == "token-strs"
        return exactjson.dumps(req)

    def render_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> tuple[str, list[int]]:
        """``(prompt text, token ids)`` of one request, from this batch's answers (:func:`prefetch`)
        or asked now. Raises :class:`TokenizeError`."""
        try:
            body = self.body(messages, tools)
        except TypeError as exc:  # orjson: a value that is not JSON
            raise TokenizeError(f"tokenize {self.spec.url}: the request is not JSON ({exc})") from None
        if self._recording is not None:
            self._recording.append(body)
            raise _Deferred()
        got = self._cache.get(body)
        if got is None:
            got = self._cache[body] = self._answer(body)
        if isinstance(got, TokenizeError):
            raise TokenizeError(str(got))
        return got

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        """The prompt text; raises :class:`TokenizeError`."""
        return self.render_ids(messages, tools)[0]

    def fetch(self, bodies: list[bytes]) -> None:
        """Send ``bodies`` (distinct ones, not already answered), ``concurrency`` at a time, and
        keep each answer (or its error) for :meth:`render_ids`. Never raises."""
        todo = [b for b in dict.fromkeys(bodies) if b not in self._cache]
        if not todo:
            return
        if len(todo) == 1 or self.spec.concurrency == 1:
            for b in todo:
                self._cache[b] = self._answer(b)
            return
        with ThreadPoolExecutor(max_workers=min(self.spec.concurrency, len(todo)), thread_name_prefix="replay-tokenize") as pool:
            for b, answer in zip(todo, pool.map(self._answer, todo)):
                self._cache[b] = answer

    def _with_model(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"model": self.spec.model, **req} if self.spec.model is not None else req

    def trim(self, keep: int = KEEP_ANSWERS) -> None:
        """Forget all but the ``keep`` newest answers (:func:`prefetch` starts each batch with
        this: an exchange that repeats an earlier batch's request is not sent again)."""
        for body in [b for b, got in self._cache.items() if isinstance(got, TokenizeError)]:
            del self._cache[body]  # a failed request is tried again in a later batch
        for body in list(self._cache)[: max(0, len(self._cache) - keep)]:
            del self._cache[body]

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _post(self, url: str, body: bytes) -> Any:
        """The decoded JSON answer of one POST, with retries (module docstring). Raises
        :class:`TokenizeError` naming ``url``."""
        import httpx

        attempts = self.spec.retries + 1
        for attempt in range(attempts):
            if attempt:
                self._count("retries")
                time.sleep(self.spec.backoff * (2 ** (attempt - 1)))
            self._count("requests")
            last = attempt == attempts - 1
            tries = f" after {attempt + 1} attempts" if attempt else ""
            try:
                resp = self._client.post(url, content=body, headers={"Content-Type": "application/json"})
            except httpx.ReadTimeout:
                raise TokenizeError(f"tokenize {url}: timed out after {self.spec.timeout:g} s (no answer){tries}") from None
            except (httpx.TransportError) as exc:  # refused, reset, connect timeout, protocol error
                if last:
                    kind = "connection refused" if isinstance(exc, httpx.ConnectError) else type(exc).__name__
                    raise TokenizeError(f"tokenize {url}: {kind}{tries} ({exc})") from None
                continue
            if resp.status_code == 429 or resp.status_code >= 500:
                if last:
                    raise TokenizeError(f"tokenize {url}: HTTP {resp.status_code}{tries}: {_excerpt(resp.text)}")
                continue
            if resp.status_code != 200:
                raise TokenizeError(f"tokenize {url}: HTTP {resp.status_code}: {_excerpt(resp.text)}")
            try:
                return exactjson.loads(resp.content)
            except ValueError:
                raise TokenizeError(f"tokenize {url}: HTTP 200 but not JSON: {_excerpt(resp.text)}") from None
        raise AssertionError("unreachable")

    def _answer(self, body: bytes) -> tuple[str, list[int]] | TokenizeError:
        """One render's ``(text, ids)`` from the server, or the error (counted in ``stats``)."""
        try:
            got = self._post(self.spec.url, body)
            ids = token_ids(got, self.spec.url, empty_ok=False)  # a chat request renders to some tokens
            text = got.get("prompt")
            if not isinstance(text, str):
                strs = got.get("token_strs")
                if self.spec.text == "token-strs" and isinstance(strs, list) and len(strs) == len(ids) and all(isinstance(s, str) for s in strs):
                    text = decode_token_strs(strs)
                else:
                    text = self._detokenize(ids)
            return text, ids
        except TokenizeError as exc:
            self._count("failed")
            return exc

    def _detokenize(self, ids: list[int]) -> str:
        """vLLM's ``POST /detokenize`` (``{"model", "tokens"}`` -> ``{"prompt"}``) beside the
        tokenize URL. Raises :class:`TokenizeError`."""
        url = self.spec.url.rsplit("/", 1)[0] + "/detokenize"
        got = self._post(url, exactjson.dumps(self._with_model({"tokens": ids})))
        if not (isinstance(got, dict) and isinstance(got.get("prompt"), str)):
            raise TokenizeError(f"tokenize {url}: the answer has no \"prompt\": {_excerpt(str(got))}")
        return got["prompt"]


def token_ids(answer: Any, url: str, *, empty_ok: bool) -> list[int]:
    """The token ids of a tokenize answer ``answer`` (parsed JSON) from ``url``: its ``tokens``,
    a list of integers 0 or more (vLLM's ``TokenizeResponse.tokens``: ``list[int]``; a JSON
    ``true`` is no id). ``empty_ok``: whether no id is a right answer (only for an empty text:
    a chat request, or a text that is not empty, has tokens). Returns the ids. Raises
    :class:`TokenizeError` naming ``url`` and an excerpt of the answer otherwise."""
    ids = answer.get("tokens") if isinstance(answer, dict) else None
    if not (isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)):
        raise TokenizeError(f"tokenize {url}: the answer has no token ids (\"tokens\": a list of integers 0 or more): {_excerpt(str(answer))}")
    if not ids and not empty_ok:
        raise TokenizeError(f"tokenize {url}: the answer has no token ids (\"tokens\" is empty): {_excerpt(str(answer))}")
    return list(ids)


def _excerpt(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n] + "..."


class _ServerTextTokenizer:
    """Token ids of a prompt text on the renderer's server (``ids(text)``; ``encode(text).ids``
    as :class:`tokenizers.Tokenizer`), cached by text for the batch. Raises TokenizeError."""

    def __init__(self, renderer: HttpTokenizeRenderer) -> None:
        self.renderer = renderer

    def ids(self, text: str) -> list[int]:
        r = self.renderer
        body = exactjson.dumps(r._with_model({"prompt": text, "add_special_tokens": False}))
        got = r._cache.get(body)
        if got is None:
            try:
                ans = r._post(r.spec.url, body)
                got = token_ids(ans, r.spec.url, empty_ok=not text)
            except TokenizeError as exc:
                r._count("failed")
                got = exc
            r._cache[body] = got
        if isinstance(got, TokenizeError):
            raise TokenizeError(str(got))
        return got

    def encode(self, text: str, add_special_tokens: bool = False) -> Any:
        class _Enc:
            pass

        enc = _Enc()
        enc.ids = self.ids(text)  # type: ignore[attr-defined]
        return enc


class _TokenizerIds:
    """A ``tokenizers.Tokenizer`` (``--tokenizer``) as an ids plan's tokenizer: ``ids(text)`` its
    ``encode(text, add_special_tokens=False).ids``."""

    def __init__(self, tok: Any) -> None:
        self.tok = tok

    def ids(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False).ids)


def servers(cfg: Any) -> dict[str, HttpTokenizeRenderer]:
    """``{side: server renderer}`` of the sides (old, new, reference) that render on a server."""
    from replay.render.exchange import render_plan

    plan = render_plan(cfg)
    return {side: r for side, r in plan.renderers.items() if isinstance(r, HttpTokenizeRenderer)}


def prefetch(chunk: list[dict[str, Any]], cfg: Any, serializers: dict[str, Callable], pre: list[dict[str, Any]] | None,
             decode: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Send the tokenize requests of a list of exchanges rows at once, before the render stage
    makes their rows: for each side that renders on a server, each exchange is prepared and
    serialized as :func:`replay.render.exchange.render_rows` does (it runs, for those sides, with
    the renderer collecting its request bodies), then every server gets its bodies
    ``concurrency`` at a time; ``render_rows`` then reads the answers. ``decode``: the stage's
    request decoder (:func:`replay.stages.rows.decode_request`); each row is left as it was given.
    Nothing without such a side. Never raises for the data (a failed request is that row's
    error when the stage renders it)."""
    from replay.render.exchange import render_rows

    by_side = servers(cfg)
    if not by_side:
        return
    renderers = list({id(r): r for r in by_side.values()}.values())
    for r in renderers:
        r.trim()
        r._recording = []
    try:
        for i, ex in enumerate(chunk):
            if ex.get("request_json") == "{}":
                continue
            saved = dict(ex)
            try:
                render_rows(decode(ex), cfg, serializers, pre[i] if pre is not None else None, sides=tuple(by_side))
            finally:
                ex.clear()
                ex.update(saved)
        bodies = [(r, list(r._recording or ())) for r in renderers]
    finally:
        for r in renderers:
            r._recording = None
    for r, todo in bodies:
        r.fetch(todo)


def ids_plan(cfg: Any) -> tuple[Any, str | None]:
    """The token-id comparison of a run where a side renders on a server (and the reference
    renderer gives no ids of its own): ``(tokenizer, vocab)`` for
    :func:`replay.render.exchange.render_rows`: the server sides keep the ids their server
    gave, every other side's prompt is tokenized with the run's ``--tokenizer`` when given, else
    on the (first) server, so that every prompt is compared by ids. ``(None, None)`` without a
    server side. Built once per config (kept on it)."""
    got = getattr(cfg, "_http_ids_plan", None)
    if got is None:
        by_side = servers(cfg)
        if not by_side:
            got = (None, None)
        else:
            first = by_side.get("reference") or next(iter(by_side.values()))
            tok = _TokenizerIds(cfg.tokenizer) if cfg.tokenizer is not None else first.tokenizer
            got = (tok, VOCAB)
        cfg._http_ids_plan = got
    return got
