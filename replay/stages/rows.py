"""Arrow row building shared by the stages: exchanges of a record batch as Python rows
(:func:`exchange_rows`, their request decoded once and tool lists shared across rows,
:func:`decode_request`), result rows back into Arrow tables of :mod:`replay.tables`' schemas
(:func:`rows_table`, lone surrogates escaped rather than a batch lost), and the batching of rows
for out-of-process sides (:func:`_batches`). Pure functions of their arguments; nothing here knows
of processes or files.
"""

from __future__ import annotations

import hashlib
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from replay import exactjson
from replay.prepare.base import openai_tools as _openai_tools
from replay.runspec import AuditConfig
from replay.sides import BATCH_CHARS
from typing import Any


SIDES = ("old", "new", "reference")


#: The request's tool declarations in Chat Completions form (moved to :mod:`replay.prepare.base`).
openai_tools = _openai_tools


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _utf8_safe(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings written as a ``\\uXXXX`` escape."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return "".join(f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, dict):
        return {k: _utf8_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utf8_safe(v) for v in value]
    return value


def _batches(rows: Any, n: int, chars: int = BATCH_CHARS) -> Any:
    """Lists of at most ``n`` exchanges whose raw completions hold at most about ``chars`` chars
    (a list holds one exchange at least), so a batch of huge completions stays bounded."""
    chunk: list[dict[str, Any]] = []
    size = 0
    for ex in rows:
        chunk.append(ex)
        size += len(ex.get("server_output_text") or "")
        if len(chunk) >= n or size >= chars:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def with_copies(table: pa.Table, copies: list[tuple[str, int, int, int]]) -> pa.Table:
    """``table`` (rows with a ``side`` column) with copies of some of its rows put in: each entry
    of ``copies`` is ``(side, at, r0, r1)``: rows ``r0:r1`` of ``table``, ``side`` set to
    ``side``, inserted before row ``at`` (entries in order of ``at``; equal ``at`` in list order).
    The same table :func:`rows_table` makes of the rows with the copies as dicts, built by one
    Arrow ``take`` instead (:func:`finish_stream` ``copies``)."""
    if not copies:
        return table
    take: list[int] = []
    sides = table.column("side").to_pylist()
    out_sides: list[str] = []
    pos = 0
    for side, at, r0, r1 in copies:
        take.extend(range(pos, at))
        out_sides.extend(sides[pos:at])
        take.extend(range(r0, r1))
        out_sides.extend([side] * (r1 - r0))
        pos = at
    take.extend(range(pos, table.num_rows))
    out_sides.extend(sides[pos:])
    out = table.take(pa.array(take, pa.int64()))
    i = out.schema.get_field_index("side")
    return out.set_column(i, out.schema.field(i), pa.array(out_sides, out.schema.field(i).type))


#: ``id(schema)`` -> ``(schema, its struct type)`` for :func:`_from_rows` (the tables' few schemas).
_ROW_TYPES: dict[int, tuple[pa.Schema, pa.DataType]] = {}


def _from_rows(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema=schema)``, the same table (values, types, nullability;
    keys a row lacks are null, keys the schema lacks ignored; the same exceptions), converted by
    Arrow in one pass as one struct array of ``schema``'s fields: ``from_pylist`` builds each
    column from a Python list of the rows' values, several times the cost."""
    got = _ROW_TYPES.get(id(schema))
    if got is None or got[0] is not schema:
        got = _ROW_TYPES[id(schema)] = (schema, pa.struct(list(schema)))
    table = pa.Table.from_struct_array(pa.array(rows, type=got[1]))
    return table.replace_schema_metadata(schema.metadata) if schema.metadata else table


def rows_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows (dicts) -> an Arrow table of ``schema`` (:func:`_from_rows`). A string UTF-8 cannot
    hold (a lone surrogate a parser decoded from a ``"\\ud800"`` escape) is written escaped
    (:func:`_utf8_safe`) rather than lose the batch or stop the run."""
    try:
        return _from_rows(rows, schema)
    except (UnicodeEncodeError, pa.ArrowException):
        return _from_rows([_utf8_safe(r) for r in rows], schema)


def exchange_rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The rows of a record batch of ``exchanges`` as dicts, with ``request_json`` as a view of
    Arrow's UTF-8 buffer (:func:`_bodies`) under ``_body`` instead of a Python str (``request_json`` is None then,
    but ``"{}"`` for a capture without its request, which the stages skip): no str of the 10-60
    KB body is built, and orjson reads bytes without the str's UTF-8 encoding (less CPU per
    request). :func:`decode_request` decodes one row's body when the stage reaches it (decoding
    the whole batch first would keep 512 decoded requests alive at once: more memory, and
    Python's garbage collector walking them). A batch without ``request_json`` is ``to_pylist()``."""
    names = batch.schema.names
    if "request_json" not in names and "tools_json" not in names:
        return batch.to_pylist()
    rows = batch.select([n for n in names if n not in ("request_json", "tools_json")]).to_pylist()
    if "tools_json" in names:
        for ex, text in zip(rows, _shared_texts(batch.column(names.index("tools_json")))):
            ex["tools_json"] = text
    if "request_json" in names:
        for ex, body in zip(rows, _bodies(batch.column(names.index("request_json")))):
            if body == b"{}":
                ex["request_json"] = "{}"
            else:
                ex["request_json"], ex["_body"] = None, body
    return rows


def _shared_texts(column: pa.Array) -> list[str | None]:
    """The values of a string column with each distinct text one shared ``str`` object (its hash
    computed once): a dictionary array's dictionary values, else the column dictionary-encoded."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    values = column.dictionary.to_pylist()
    return [None if i is None else values[i] for i in column.indices.to_pylist()]


#: Tools of the tool lists seen by this process (:func:`exchange_tools`), by ``(route,
#: tools_json)``: each distinct list decoded and put in OpenAI form once. Bounded: emptied when full.
_TOOLS_SEEN: dict[tuple[Any, str], Any] = {}


_TOOLS_SEEN_MAX = 1024


def exchange_tools(ex: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The OpenAI-form tools (:func:`replay.prepare.base.openai_tools`) of an exchanges row (of
    :func:`exchange_rows`, or a plain dict): from its ``tools_json`` (the request's ``tools`` text)
    when known, each distinct list decoded once per process and the same list object returned
    for every exchange that sends it (read-only: never modified by the stages); else from the
    decoded request (``request_json``). Raises for an unreadable request or tools text."""
    text = ex.get("tools_json")
    if text is None:
        decode_request(ex)
        request = ex.pop("_request") if "_request" in ex else exactjson.loads(ex["request_json"])
        return openai_tools(ex.get("route"), request.get("tools"))
    key = (ex.get("route"), text)
    tools = _TOOLS_SEEN.get(key, _TOOLS_SEEN)
    if tools is _TOOLS_SEEN:
        tools = openai_tools(ex.get("route"), exactjson.loads(text))
        if len(_TOOLS_SEEN) >= _TOOLS_SEEN_MAX:
            _TOOLS_SEEN.clear()
        _TOOLS_SEEN[key] = tools
    return tools


def _bodies(column: pa.Array) -> list[Any]:
    """The values of a string column as read-only ``memoryview``s of Arrow's UTF-8 data buffer
    (no copy of the 10-60 KB bodies; each view keeps the buffer alive), or as ``bytes`` (None for
    a null) when the column has nulls or is not a plain string array."""
    if column.null_count or column.type != pa.string():
        return column.cast(pa.binary()).to_pylist()
    _, offsets, data = column.buffers()
    n, first = len(column), column.offset
    ends = memoryview(offsets).cast("i")[first : first + n + 1].tolist() if n else []
    view = memoryview(data) if data is not None else memoryview(b"")
    return [view[a:b] for a, b in zip(ends, ends[1:])]


def decode_request(ex: dict[str, Any], *, share_tools: bool = False) -> dict[str, Any]:
    """``ex`` (a row of :func:`exchange_rows`) with its request decoded: ``_request`` =
    ``orjson.loads`` of its body; a body orjson cannot read becomes ``request_json`` text again,
    so the stage decodes it itself and records its own error, as for any row. Returns ``ex``.

    ``share_tools``: the request's ``tools`` is taken from the row's ``tools_json`` when the body
    holds that text as its top-level ``"tools":`` member (:func:`_decode_sharing_tools`): the
    same decoded list object for every exchange that sends the same tools, read-only (about half
    the bytes of an agent's request are its tools: they are decoded once per distinct list).
    ``ex["_tools_key"]`` is then that text (:func:`replay.render.exchange.render_rows` keys its
    tool-list caches by it). The decoded request is equal either way."""
    body = ex.pop("_body", None)
    if body is not None:
        try:
            got = _decode_sharing_tools(body, ex.get("tools_json")) if share_tools else None
            if got is not None:
                ex["_request"], ex["_tools_key"] = got, ex["tools_json"]
            else:
                ex["_request"] = exactjson.loads(body)
        except orjson.JSONDecodeError:
            ex["request_json"] = bytes(body).decode("utf-8")
    return ex


#: ``tools_json`` text -> ``(b'"tools":' + its UTF-8, its decoded value)``, or None when the text
#: does not decode (:func:`_decode_sharing_tools`). Bounded: emptied when full.
_SHARED_TOOLS: dict[str, tuple[bytes, Any] | None] = {}


_SHARED_TOOLS_MAX = 1024


#: Tool lists shorter than this (chars) are decoded with their request (nothing to gain).
_SHARE_MIN_CHARS = 256


def _decode_sharing_tools(body: Any, text: str | None) -> dict[str, Any] | None:
    """The request in ``body`` (bytes or a memoryview of orjson's compact JSON) decoded with its
    top-level ``tools`` replaced by the shared decoded value of ``text`` (the row's
    ``tools_json``), or None when that cannot be shown equal to ``exactjson.loads(body)`` (the caller
    then decodes the whole body).

    The first ``"tools":`` + ``text`` in the body is replaced by a placeholder string
    (:data:`_TOOLS_PLACEHOLDER`, which the body must not hold) and the rest decoded: an unescaped
    ``"tools":`` is a member name (a quote inside a string is escaped), so the replaced text is a
    whole JSON value and the body is valid exactly when the rest is. The result is used only when
    its top-level ``tools`` is then the placeholder (the occurrence replaced is the member orjson
    keeps: a nested member of the same text, or a duplicate key after it, leaves another value
    there); ``tools`` is then set to the shared value, the same a decode of the whole body gives
    there. (``text`` is the row's ``tools_json``, orjson's text of the value the body's ``tools``
    decodes to, as ingest writes it: a long text, never the placeholder's.) Raises ``orjson.JSONDecodeError`` only as ``orjson.loads`` would
    on the rest."""
    if text is None or len(text) < _SHARE_MIN_CHARS:
        return None
    try:
        entry = _SHARED_TOOLS[text]
    except KeyError:
        try:
            entry = (b'"tools":' + text.encode("utf-8"), exactjson.loads(text))
        except (orjson.JSONDecodeError, UnicodeEncodeError):
            entry = None
        if len(_SHARED_TOOLS) >= _SHARED_TOOLS_MAX:
            _SHARED_TOOLS.clear()
        _SHARED_TOOLS[text] = entry
    if entry is None:
        return None
    pattern, tools = entry
    raw = body if type(body) is bytes else bytes(body)
    # the first occurrence of the whole pattern: found by its head (a long needle makes
    # bytes.find preprocess all of it, as slow as decoding), then compared in place
    head = pattern[:64]
    i = raw.find(head)
    while i >= 0 and not raw.startswith(pattern, i):
        i = raw.find(head, i + 1)
    if i < 0:
        return None
    if raw.find(_TOOLS_PLACEHOLDER) >= 0:  # the body holds the placeholder itself: it would not tell
        return None
    j = i + 8  # just after '"tools":'
    try:
        request = exactjson.loads(b"".join((raw[:j], _TOOLS_PLACEHOLDER, raw[i + len(pattern):])))
    except orjson.JSONDecodeError:
        return None
    if type(request) is not dict or request.get("tools") != _PLACEHOLDER_VALUE:
        return None
    request["tools"] = tools
    return request


#: The JSON text :func:`_decode_sharing_tools` puts where the tools were, and its value: a string
#: a body that does not hold these bytes cannot decode to anywhere else.
_TOOLS_PLACEHOLDER = b'"\\u0000replay:shared-tools"'


_PLACEHOLDER_VALUE = exactjson.loads(_TOOLS_PLACEHOLDER)


def shares_tools(cfg: AuditConfig) -> bool:
    """True when the render stage may hand every exchange that sends the same tools one shared,
    read-only decoded list (:func:`decode_request` ``share_tools``): every side's tool serializer
    and request preparer is a built-in (:data:`replay.tools.SERIALIZERS`,
    :data:`replay.prepare.PREPARERS`; none modifies what it is given). A plugin might modify the
    declarations it gets, which must then stay the exchange's own."""
    from replay.prepare import PREPARERS
    from replay.tools import SERIALIZERS

    return all(spec in SERIALIZERS for spec in cfg.serializer_specs().values()) and all(
        getattr(cfg, f"{side}_preparer", None) in (None, *PREPARERS) for side in SIDES
    )
