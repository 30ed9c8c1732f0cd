"""OpenAI stored completions (format ``openai-stored``): the list pages of ``GET /v1/chat/completions`` and each completion's messages.

What the API keeps for a request sent with ``store: true`` (OpenAI API reference, "List Chat
Completions" and "Get chat messages"; the openai SDK's ``client.chat.completions.list()`` ->
``SyncCursorPage[ChatCompletion]`` and ``client.chat.completions.messages.list(id)`` ->
``SyncCursorPage[ChatCompletionStoreMessage]``):

- a **list page** ``{"object": "list", "data": [<chat.completion>, ...], "first_id", "last_id",
  "has_more"}``: each item the completion as served (``choices``: content, ``tool_calls``,
  ``finish_reason``; ``model``, ``created``) with what the API stored of the request beside it:
  ``tools`` (null when none were sent), ``tool_choice``, ``metadata``, ``request_id``, sampling
  parameters;
- a **messages page** ``{"object": "list", "data": [<message with its "id">, ...], ...}``: the
  request's messages. It does not name its completion, so the export convention carries the id in
  the file name: ``<completion id>.messages.json`` (plain, ``.gz`` or ``.zst``), beside the list
  page file, holding every page of that completion's messages joined (``has_more: false``), as
  ``docs/export_stored_completions.py`` writes them (the SDK's pagination; checked on the files it
  wrote against the fake server, ``tests/data/captures/openai-stored/``).

One exchange per completion of a list page (JSON lines: a page a line; or one pretty-printed page),
at the page's line. Request rebuilt: ``{"model", "messages", "tools", "tool_choice", "metadata",
"store": true}`` (``model`` is the served one; messages without their ``id``, a null
``content`` taken from ``content_parts`` when set, keys whose value is null dropped but
``content``). Lacks, always: ``exact_request``, ``raw_completion``, ``stream`` (the API stores the
assembled completion, never chunks, and not whether the request streamed: the row's ``stream`` is
null); ``tools`` when the completion has no ``tools`` key; ``request`` when no messages file of
that completion is beside the list page (request ``{}``).

Errors (``bad-field``, naming the format, the item ``data[i]`` and the field): a page that is not
``{"object": "list", "data": [...]}``, an item that is not a ``chat.completion`` with an ``id``
and ``choices`` array, ``tools`` that is not an array or null, a messages file that is not JSON or
not a messages page, or whose ``has_more`` is true (only its first page was exported). A messages
page read by itself (its folder gave no list page, or it is not named ``<id>.messages.json``) is
one error naming the convention. A messages file whose completion is in no list page of its folder
is not read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from replay import exactjson
from replay.capture.detect import is_stored_page, open_binary  # is_stored_page: re-exported (the sniffer's rule)
from replay.capture.jsonlines import read_json_lines
from replay.capture.records import Unit, failed
from replay.capture.v1 import CaptureError

__all__ = ["MESSAGES_SUFFIX", "completion_record", "is_messages_file", "is_stored_page", "page_records", "read_stored"]

#: The name of a completion's messages file: ``<completion id>`` + this (then ``.gz`` / ``.zst`` when compressed).
MESSAGES_SUFFIX = ".messages.json"
#: Largest messages file read (bytes, decompressed).
MESSAGES_MAX_BYTES = 64 << 20
_PAGE_KEYS = ("object", "data", "first_id", "last_id", "has_more")


def _keys(obj: Any) -> str:
    return (", ".join(list(obj)[:8]) or "none") if isinstance(obj, dict) else f"a JSON {type(obj).__name__}"


def is_messages_file(path: Any) -> bool:
    """True when the file name of ``path`` (a ``Path`` or a bucket object) ends in
    :data:`MESSAGES_SUFFIX`, optionally followed by ``.gz`` / ``.zst`` / ``.zstd``."""
    name = path.name.lower()
    for suf in (".gz", ".zst", ".zstd"):
        if name.endswith(suf):
            name = name[: -len(suf)]
    return name.endswith(MESSAGES_SUFFIX)


def _messages_of(folder_file: Any, cid: str, on_read: Callable[[int], None] | None) -> list[dict] | None:
    """The rebuilt request messages of completion ``cid`` from ``<cid>.messages.json[.gz|.zst]``
    beside ``folder_file``, or None when there is none. Raises :class:`CaptureError`."""
    for suf in ("", ".gz", ".zst"):
        side = folder_file.with_name(cid + MESSAGES_SUFFIX + suf)
        try:
            if not side.is_file():
                continue
        except OSError:
            continue
        name = side.name
        try:
            with open_binary(side, on_read) as fh:
                data = fh.read(MESSAGES_MAX_BYTES + 1)
        except Exception as exc:  # noqa: BLE001 - zstd/gzip/OS faults of every kind
            raise CaptureError("bad-field", f"openai-stored: {name}: cannot be read: {type(exc).__name__}: {exc}") from None
        if len(data) > MESSAGES_MAX_BYTES:
            raise CaptureError("bad-field", f"openai-stored: {name}: more than {MESSAGES_MAX_BYTES} bytes")
        try:
            page = exactjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise CaptureError("bad-field", f"openai-stored: {name}: not JSON: {exc}") from None
        if not (isinstance(page, dict) and page.get("object") == "list" and isinstance(page.get("data"), list)):
            raise CaptureError("bad-field", f"openai-stored: {name}: not a messages page: expected {', '.join(_PAGE_KEYS)}; found: {_keys(page)}")
        if page.get("has_more") is True:
            raise CaptureError("bad-field", f"openai-stored: {name}: has_more is true: only the first page of the messages was "
                               "exported (export every page: docs/export_stored_completions.py)")
        out = []
        for j, m in enumerate(page["data"]):
            if not (isinstance(m, dict) and isinstance(m.get("role"), str)):
                raise CaptureError("bad-field", f"openai-stored: {name}: data[{j}]: a message needs a 'role'; found: {_keys(m)}")
            msg = {k: v for k, v in m.items() if k not in ("id", "content_parts") and (v is not None or k == "content")}
            if msg.get("content") is None and isinstance(m.get("content_parts"), list):
                msg["content"] = m["content_parts"]
            out.append(msg)
        return out
    return None


def completion_record(item: Any, folder_file: Any, on_read: Callable[[int], None] | None = None) -> dict:
    """The v1-form record of one stored completion ``item`` of a list page read from
    ``folder_file`` (its messages file is looked up beside it). Mapping and errors: module
    docstring; raises :class:`CaptureError` (``bad-field``) naming the field."""
    if not isinstance(item, dict) or item.get("object") != "chat.completion":
        found = f"object {item.get('object')!r:.40}" if isinstance(item, dict) else f"a JSON {type(item).__name__}"
        raise CaptureError("bad-field", f"openai-stored: not a chat.completion: found {found}")
    cid = item.get("id")
    if not isinstance(cid, str) or not cid:
        raise CaptureError("bad-field", "openai-stored: id must be a non-empty string")
    if not isinstance(item.get("choices"), list):
        raise CaptureError("bad-field", f"openai-stored: choices must be an array, got {type(item.get('choices')).__name__}")
    lacks = ["exact_request", "raw_completion", "stream"]
    tools = item.get("tools")
    if "tools" not in item:
        lacks.append("tools")
    elif tools is not None and not isinstance(tools, list):
        raise CaptureError("bad-field", f"openai-stored: tools must be an array or null, got {type(tools).__name__}")
    messages = None if "/" in cid or "\\" in cid else _messages_of(folder_file, cid, on_read)
    request: dict[str, Any] = {}
    if messages is None:
        lacks.append("request")
    else:
        request = {"model": item.get("model"), "messages": messages}
        if tools:
            request["tools"] = tools
        if item.get("tool_choice") is not None:
            request["tool_choice"] = item["tool_choice"]
        if isinstance(item.get("metadata"), dict) and item["metadata"]:
            request["metadata"] = item["metadata"]
        request["store"] = True
    rec: dict[str, Any] = {"route": "chat.completions", "id": cid, "request": request, "response": item,
                           "capture_lacks": lacks, "stream_unknown": True}
    if isinstance(item.get("model"), str):
        rec["model"] = item["model"]
    if isinstance(item.get("created"), (int, float)) and not isinstance(item.get("created"), bool):
        rec["ts"] = item["created"]
    return rec


def page_records(obj: Any, folder_file: Any, on_read: Callable[[int], None] | None = None) -> list[dict | CaptureError]:
    """The records of one list page ``obj`` (one per item; an item that cannot be mapped a
    :class:`CaptureError` naming ``data[i]``, so that the others still count). Raises
    :class:`CaptureError` for a value that is not a list page of completions."""
    if not (isinstance(obj, dict) and obj.get("object") == "list" and isinstance(obj.get("data"), list)):
        raise CaptureError("bad-field", f"openai-stored: not a list page of stored completions: expected {', '.join(_PAGE_KEYS)}; found: {_keys(obj)}")
    first = obj["data"][0] if obj["data"] else None
    if isinstance(first, dict) and "role" in first and "object" not in first:
        raise CaptureError("bad-field", "openai-stored: a messages page read by itself: name it <completion id>.messages.json "
                           "beside the list page holding that completion")
    out: list[dict | CaptureError] = []
    for i, item in enumerate(obj["data"]):
        try:
            out.append(completion_record(item, folder_file, on_read))
        except CaptureError as exc:
            out.append(CaptureError(exc.reason, f"data[{i}]: {exc.detail}"))
    return out


def read_stored(path: Path, on_read: Callable[[int], None] | None = None) -> Iterator[Unit]:
    """The units of one ``openai-stored`` file: a list page file's completions (JSON lines of
    pages, or one document: :func:`replay.capture.jsonlines.read_json_lines`), or, for a messages
    file read by itself (no list page in its folder), one error at line 1 saying so. Raises as
    :func:`read_json_lines`."""
    if is_messages_file(path):
        yield failed(1, 0, "bad-field", f"openai-stored: {path.name} is a messages page: it is read with the list page holding its "
                     "completion, and no list page (GET /v1/chat/completions) was given in its folder")
        return
    yield from read_json_lines(path, lambda obj: page_records(obj, path, on_read), on_read)
