"""Which capture format a file holds, sniffed from its first bytes and records.

:func:`detect_file` reads :data:`SNIFF_BYTES` decompressed bytes of a file (a file starting with
``{`` / ``[`` on to its first :data:`SNIFF_LINES` whole lines, at most :data:`SNIFF_MAX_BYTES`)
and names one of :data:`FORMATS`:

==================  ==========================================================================
``v1``              capture format v1 (:mod:`replay.capture.v1`): JSON lines with ``request``
``sse``             an SSE transcript (``data:`` / ``event:`` lines) of Chat Completions,
                    Anthropic Messages or Responses (:mod:`replay.capture.sse`)
``body``            one non-streaming response body as a JSON document (``chat.completion``,
                    an Anthropic ``message``, a Responses ``response``) (:mod:`replay.capture.sse`)
``openai-batch``    a Batch API input or output JSON-lines file (``custom_id``), OpenAI's or
                    Anthropic's Message Batches (:mod:`replay.capture.batch`)
``har``             a HAR 1.2 archive (``log.entries``) (:mod:`replay.capture.har`)
``serverlog``       server-side JSON-lines logs: prompt, token ids, output, steps (:mod:`replay.capture.serverlog`)
``litellm``         LiteLLM spend-log rows / standard logging payloads (:mod:`replay.capture.litellm`)
``otel``            OpenTelemetry spans and GenAI log records, OTLP JSON (:mod:`replay.capture.otel`)
``kong``            Kong AI Gateway's file log with ``ai.<plugin>.payload`` (:mod:`replay.capture.gateways`)
``helicone``        Helicone's export, records with ``request_body`` / ``response_body`` (:mod:`replay.capture.gateways`)
``mitmproxy``       mitmproxy's native flow dump (``mitmdump -w``; tnetstring) (:mod:`replay.capture.mitm`)
``langfuse``        Langfuse observations: API pages, the bucket export (:mod:`replay.capture.langfuse`)
``vllm-log``        vLLM's request-logger text lines (``Received request``, ``Generated response``) (:mod:`replay.capture.vllmlog`)
``openai-stored``   OpenAI stored completions: list pages of ``GET /v1/chat/completions`` and
                    ``<id>.messages.json`` messages pages (:mod:`replay.capture.stored`)
==================  ==========================================================================

Rules, in order: a file whose first non-blank line starts with an SSE field (``data:``,
``event:``, ``id:``, ``retry:``) or comment (``:``) is ``sse``; a file that starts as a tnetstring
dictionary holding a flow's ``version``, ``request`` or ``response`` key is ``mitmproxy``; a text file (first non-blank line
not ``{`` / ``[``) holding a line of vLLM's request logger is ``vllm-log``. Otherwise the first
:data:`SNIFF_LINES` non-blank lines are parsed as JSON and the first object that names a format
decides (:func:`classify_record`). When no line is a whole JSON object (a pretty-printed document),
the head of the text is searched for the keys of a HAR (``"log"`` and ``"entries"``), an OTLP
export (``"resourceSpans"``, ``"resourceLogs"``), a Kong log (``"ai"`` and ``"started_at"``), a
Helicone export (``"request_id"`` with ``"request_body"`` or ``"response_body"``), LiteLLM rows
(``"call_type"`` with ``"request_id"`` or ``"model_parameters"``), a stored-completions page
(``"object": "list"`` with a ``chat.completion`` or ``"content_parts"``) or a response body. Anything else is ``v1``, so that a broken v1
file still gives v1's errors line by line.
"""

from __future__ import annotations

import gzip
import io
import os
import re
from pathlib import Path
from typing import IO, Any, Callable

import orjson
import zstandard

from replay.capture.files import detect_compression
from replay.capture.storage import open_input

__all__ = ["FORMATS", "SNIFF_BYTES", "SNIFF_LINES", "SNIFF_MAX_BYTES", "classify_record", "detect_file", "is_stored_page", "open_binary", "sniff"]

#: Every format name ``--capture-format`` accepts.
FORMATS = ("v1", "sse", "body", "openai-batch", "har", "serverlog", "litellm", "otel", "kong", "helicone", "vllm-log", "mitmproxy", "langfuse", "openai-stored")

#: Decompressed bytes read to sniff a file.
SNIFF_BYTES = 256 << 10
#: Non-blank lines parsed to sniff a JSON-lines file.
SNIFF_LINES = 16
#: Most decompressed bytes read to complete the first :data:`SNIFF_LINES` lines of a file that
#: starts with ``{`` / ``[`` (a long first line must not hide the whole lines after it); the
#: default line limit of :data:`replay.capture.files.MAX_LINE_BYTES`.
SNIFF_MAX_BYTES = 32 << 20

_SSE_START = re.compile(rb"^(data|event|id|retry)\s*:|^:")
#: The start of a tnetstring dictionary (a mitmproxy flow: ``<length>:<key length>:<key>``).
_TNETSTRING = re.compile(rb"^\d{1,12}:\d{1,3}:")
#: A line of vLLM's request logger (vllm/entrypoints/logger.py), anywhere in a text file.
_VLLM_LINE = re.compile(rb"(Received request \S+: (prompt|params): |Generated response \S+: output: |Request \S+ details: prompt: )")
_SERVERLOG_KEYS = ("prompt_token_ids", "output_token_ids", "output_text", "step_token_ids", "delta_token_ids", "steps", "deltas", "token_ids")


def litellm_kind(obj: Any) -> str | None:
    """:func:`replay.capture.litellm.kind_of`, imported when first needed (a run of v1 captures
    imports no other reader)."""
    from replay.capture.litellm import kind_of

    return kind_of(obj)


def _is_observation(obj: Any) -> bool:
    """A Langfuse observation: ``traceId``, ``type`` and ``startTime`` (an OTel span has ``traceId``
    too, but ``spanId`` and no ``type``)."""
    return isinstance(obj, dict) and all(k in obj for k in ("traceId", "type", "startTime")) and "spanId" not in obj


def is_stored_page(obj: Any) -> bool:
    """True for a list page of OpenAI stored completions (``object: list``, first item a
    ``chat.completion``) or a messages page (``object: list``, first item with ``id`` and ``role``
    and no ``object``): the distinctive keys of format ``openai-stored`` (:mod:`replay.capture.stored`).
    Other ``object: list`` responses of the API (embeddings, models, Assistants messages) name
    their items' ``object`` and are not pages of it."""
    if not (isinstance(obj, dict) and obj.get("object") == "list" and isinstance(obj.get("data"), list) and obj["data"]):
        return False
    first = obj["data"][0]
    return isinstance(first, dict) and (first.get("object") == "chat.completion" or ("role" in first and "id" in first and "object" not in first))


def classify_record(obj: Any) -> str | None:
    """The format one decoded JSON record belongs to, or None when it names none.

    ``log.entries`` -> ``har``; ``resourceSpans`` or ``resourceLogs`` (or a span: ``spanId`` with
    ``attributes``; a Jaeger document: ``data[0]`` with ``traceID`` and ``spans``; a Zipkin span:
    ``traceId`` with ``localEndpoint``) -> ``otel``; a Langfuse observation (``traceId``, ``type``,
    ``startTime``) or a page of them (``data`` and ``meta``) -> ``langfuse``; an ``ai`` object with
    ``started_at``, or a ``route`` that is an object (Kong's route entity; v1's route is a string)
    -> ``kong`` (before v1: a Kong entry has ``request`` and ``route`` too); ``request_id`` with ``request_body`` / ``response_body`` /
    ``request_path`` -> ``helicone``;
    ``object`` ``list`` whose first item is a ``chat.completion``, or a message with ``id`` and
    ``role`` and no ``object`` -> ``openai-stored`` (:func:`is_stored_page`);
    ``custom_id``, or ``requests`` whose first item has one (an Anthropic Message Batch create
    body) -> ``openai-batch``; ``request`` with ``route`` -> ``v1``; ``object``
    ``chat.completion`` / ``response`` or ``type`` ``message`` -> ``body``; a LiteLLM payload,
    spend-log row, ``/spend/logs`` array or ``/spend/logs/v2`` page
    (:func:`replay.capture.litellm.kind_of`) -> ``litellm``; another JSON array -> None;
    any of the server-log keys (``prompt_token_ids``, ``output_text``, ``steps``, ...) -> ``serverlog``;
    ``request`` alone -> ``v1``.
    """
    if isinstance(obj, list):
        return "litellm" if litellm_kind(obj) else None
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("log"), dict) and "entries" in obj["log"]:
        return "har"
    if "resourceSpans" in obj or "resourceLogs" in obj or ("spanId" in obj and "attributes" in obj):
        return "otel"
    data = obj.get("data")
    if isinstance(data, list) and data and isinstance(data[0], dict) and "traceID" in data[0] and "spans" in data[0]:
        return "otel"  # a Jaeger JSON document of spans
    if "traceId" in obj and "localEndpoint" in obj and isinstance(obj.get("tags", {}), dict):
        return "otel"  # a Zipkin v2 span
    if _is_observation(obj) or (isinstance(obj.get("data"), list) and isinstance(obj.get("meta"), dict)
                                and obj["data"] and _is_observation(obj["data"][0])):
        return "langfuse"
    if (isinstance(obj.get("ai"), dict) or isinstance(obj.get("route"), dict)) and (
        "started_at" in obj or isinstance(obj.get("route"), dict)
    ):
        return "kong"  # also an entry of a route without an AI plugin: v1's route is a string, never an object
    if "request_id" in obj and any(k in obj for k in ("request_body", "response_body", "request_path")):
        return "helicone"
    if is_stored_page(obj):
        return "openai-stored"
    reqs = obj.get("requests")
    if "custom_id" in obj or (isinstance(reqs, list) and reqs and isinstance(reqs[0], dict) and "custom_id" in reqs[0]):
        return "openai-batch"
    if "request" in obj and "route" in obj:
        return "v1"
    if obj.get("object") in ("chat.completion", "response") or obj.get("type") == "message":
        return "body"
    if litellm_kind(obj):
        return "litellm"
    if any(k in obj for k in _SERVERLOG_KEYS):
        return "serverlog"
    if "request" in obj:
        return "v1"
    return None


def sniff(head: bytes) -> str:
    """The format of a file whose first decompressed bytes are ``head`` (rules: module docstring)."""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    lines = [ln.strip() for ln in head.split(b"\n")]
    nonblank = [ln for ln in lines if ln]
    if nonblank and _SSE_START.match(nonblank[0]):
        return "sse"
    if _TNETSTRING.match(head) and any(k in head for k in (b"7:version;", b"7:request;", b"8:response;", b"7:version,", b"7:request,")):
        return "mitmproxy"
    if nonblank and nonblank[0][:1] not in (b"{", b"[") and _VLLM_LINE.search(head):
        return "vllm-log"
    parsed_any = False
    for ln in nonblank[:SNIFF_LINES]:
        try:
            obj = orjson.loads(ln)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(obj, dict):  # a bare value on a line of a pretty-printed document (a /spend/logs array: below)
            continue
        parsed_any = True
        fmt = classify_record(obj)
        if fmt is not None:
            return fmt
    if not parsed_any and nonblank and nonblank[0][:1] in (b"{", b"["):
        text = head[:SNIFF_BYTES]
        if re.search(rb'"log"\s*:\s*\{', text) and b'"entries"' in text:
            return "har"
        if b'"resourceSpans"' in text or b'"resourceLogs"' in text:
            return "otel"
        if b'"traceId"' in text and b'"startTime"' in text and re.search(rb'"type"\s*:\s*"(GENERATION|SPAN|EVENT|EMBEDDING|AGENT|TOOL)"', text):
            return "langfuse"  # observations: a pretty-printed page or export
        if (b'"traceID"' in text and b'"spans"' in text) or (b'"traceId"' in text and b'"localEndpoint"' in text):
            return "otel"  # Jaeger's JSON document, a Zipkin v2 span list
        if re.search(rb'"ai"\s*:\s*\{', text) and b'"started_at"' in text:
            return "kong"
        if b'"request_id"' in text and (b'"request_body"' in text or b'"response_body"' in text):
            return "helicone"
        if b'"requests"' in text and b'"custom_id"' in text and b'"params"' in text:
            return "openai-batch"  # an Anthropic Message Batch create body, pretty-printed
        if b'"call_type"' in text and (b'"request_id"' in text or b'"model_parameters"' in text):
            return "litellm"  # before the body test: a LiteLLM row holds a response body
        if re.search(rb'"object"\s*:\s*"list"', text) and (re.search(rb'"object"\s*:\s*"chat\.completion"', text) or b'"content_parts"' in text):
            return "openai-stored"  # a pretty-printed list page of stored completions, or a messages page
        if re.search(rb'"object"\s*:\s*"(chat\.completion|response)"', text) or re.search(rb'"type"\s*:\s*"message"', text):
            return "body"
    return "v1"


class _Counting(io.RawIOBase):
    """A read-only file wrapper that reports the bytes read (for ``IngestStats.bytes_read``)."""

    def __init__(self, fh: IO[bytes], on_read: Callable[[int], None] | None) -> None:
        self.fh = fh
        self.on_read = on_read

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        data = self.fh.read(len(b))
        n = len(data)
        b[:n] = data
        if n and self.on_read:
            self.on_read(n)
        return n

    def close(self) -> None:
        self.fh.close()
        super().close()


def open_binary(path: str | os.PathLike, on_read: Callable[[int], None] | None = None) -> IO[bytes]:
    """A file object of the decompressed bytes of ``path`` (zstd, gzip or plain, by magic bytes as
    :func:`replay.capture.files.detect_compression`), read as a stream. ``on_read`` is called with
    the bytes read from disk. A truncated or corrupt stream raises from ``read``
    (``zstandard.ZstdError``, ``EOFError``, ``gzip.BadGzipFile``, ``zlib.error``)."""
    raw = open_input(path)  # a local file, or an object in a bucket streamed in ranged reads
    head = raw.read(4)
    raw.seek(0)
    counted = io.BufferedReader(_Counting(raw, on_read), buffer_size=1 << 20)
    kind = detect_compression(head)
    if kind == "zstd":
        return zstandard.ZstdDecompressor().stream_reader(counted, read_across_frames=True)  # type: ignore[return-value]
    if kind == "gzip":
        return gzip.GzipFile(fileobj=counted)  # type: ignore[return-value]
    return counted


def _whole_lines(fh: IO[bytes], head: bytes) -> bytes:
    """``head`` (the first :data:`SNIFF_BYTES` of ``fh``) read on until it holds
    :data:`SNIFF_LINES` whole non-blank lines, the end of the file, or :data:`SNIFF_MAX_BYTES`
    bytes. Only a head that starts with ``{`` / ``[`` is read on: a long first line (broken or
    not) must not cut the lines after it, or no line parses and JSON lines pass for a document.
    Returns the bytes read (the last line may still be cut); read faults propagate."""
    if len(head) < SNIFF_BYTES or head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] not in (b"{", b"["):
        return head
    *whole, tail = head.split(b"\n")
    done = sum(1 for ln in whole if ln.strip())
    tail_nonblank = bool(tail.strip())
    parts, size = [head], len(head)
    while done < SNIFF_LINES and size < SNIFF_MAX_BYTES:
        chunk = fh.read(min(1 << 20, SNIFF_MAX_BYTES - size))
        if not chunk:
            break
        parts.append(chunk)
        size += len(chunk)
        pieces = chunk.split(b"\n")
        for piece in pieces[:-1]:  # each ends a line
            if tail_nonblank or piece.strip():
                done += 1
            tail_nonblank = False
        tail_nonblank = tail_nonblank or bool(pieces[-1].strip())
    return b"".join(parts)


def detect_file(path: str | os.PathLike) -> str:
    """The format of the capture file ``path`` (one of :data:`FORMATS`), from its first
    :data:`SNIFF_BYTES` decompressed bytes, read on to whole lines when the file starts with
    ``{`` / ``[`` (:func:`_whole_lines`, at most :data:`SNIFF_MAX_BYTES`). A file that cannot be
    read or decompressed is ``v1`` (its reader then reports the fault as an ``ingest_errors``
    row)."""
    try:
        with open_binary(path) as fh:
            head = _whole_lines(fh, fh.read(SNIFF_BYTES))
    except Exception:  # noqa: BLE001 - the reader reports the fault with its line
        return "v1"
    return sniff(head)


def sidecar_request_path(path: Path) -> Path:
    """``<stem>.request.json`` beside a transcript or body file ``path`` (compression and the
    ``.sse`` / ``.json`` / ``.txt`` suffix removed from the name first)."""
    name = path.name
    for suf in (".zst", ".zstd", ".gz"):
        if name.lower().endswith(suf):
            name = name[: -len(suf)]
            break
    for suf in (".sse", ".json", ".txt", ".har"):
        if name.lower().endswith(suf):
            name = name[: -len(suf)]
            break
    return path.with_name(name + ".request.json")
