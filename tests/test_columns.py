"""replay.capture.columns: ingest's batches are ``pa.array``'s columns without pandas imported,
and the string-view column of request texts equals ``pa.array`` of the same values."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypo import budget
from replay.capture.columns import batch_from_rows, text_view_column
from replay.tables import CALL, EXCHANGES, INGEST_ERRORS, TOOLS

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
ascii_texts = st.text(alphabet=st.characters(max_codepoint=127), max_size=12)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
stamps = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(timezone.utc))
calls = st.fixed_dictionaries({"index": st.none() | int32s, "id": st.none() | texts, "name": st.none() | texts, "arguments": st.none() | texts})

@budget(60)
@given(st.lists(st.none() | texts | texts.map(str.encode) | st.text(min_size=13, max_size=200).map(str.encode), max_size=20))
def test_text_view_column_equals_pa_array(vals):
    """The one builder of our own: string views over each value's bytes (inline up to 12 bytes)."""
    got = text_view_column(vals)
    got.validate(full=True)
    assert got.type == pa.string_view()
    assert got.to_pylist() == pa.array(vals, pa.string()).to_pylist()
    assert got.null_count == sum(v is None for v in vals)


def test_batch_from_rows_schema_and_not_null():
    rows = [{"source_file": "f", "source_line": 3, "byte_offset": None, "reason": "bad-json", "detail": "x", "excerpt": "y"}]
    b = batch_from_rows(rows, INGEST_ERRORS)
    assert b.schema.equals(INGEST_ERRORS) and b.to_pylist() == [{**rows[0]}]
    assert batch_from_rows([], EXCHANGES).num_rows == 0 and batch_from_rows([], TOOLS).schema.equals(TOOLS)
    with pytest.raises(ValueError, match="reason may not be null"):
        batch_from_rows([{**rows[0], "reason": None}], INGEST_ERRORS)


def test_building_a_batch_does_not_import_pandas():
    """pa.array would import pandas (0.2-0.4 s of a `replay ingest`) without arrow_without_pandas."""
    code = (
        "import sys; from replay.capture.columns import batch_from_rows; from replay.tables import TOOLS;"
        "batch_from_rows([{'exchange_id': 'x', 'tool_index': 0, 'has_description': True, 'has_parameters': False,"
        "'has_strict': False, 'client_null_paths': ['$.a'], 'tool_json': '{}'}], TOOLS); print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _by_columns(rows):
    """exchanges rows built column by column (batch_from_rows), as ingest built them before the
    one-pass struct conversion of exchanges_batch."""
    from replay.capture.ingest import EXCHANGES_BATCH, _tools_json_column

    return batch_from_rows(rows, EXCHANGES_BATCH, {"request_json": text_view_column([r["request_json"] for r in rows]),
                                                   "tools_json": _tools_json_column([r.get("tools_json") for r in rows])})


_exchange_rows = st.fixed_dictionaries(
    {"exchange_id": texts, "source_file": texts, "source_line": int64s, "route": st.sampled_from(["chat.completions", "messages"]),
     "request_json": texts.map(str.encode), "tools_json": st.sampled_from([b"null", b"[]", b'[{"type":"function"}]'])},
    optional={"ts": st.none() | stamps, "model": st.none() | texts, "stream": st.none() | st.booleans(), "n_messages": st.none() | int32s,
              "n_tools": st.none() | int32s, "served_content": st.none() | texts, "served_tool_calls": st.none() | st.lists(calls, max_size=3),
              "server_prompt_token_ids": st.none() | st.lists(int32s, max_size=4), "server_steps": st.none() | st.lists(texts, max_size=4),
              "capture_lacks": st.none() | st.lists(texts, max_size=2), "served_stop_with_calls": st.none() | st.booleans(),
              "served_client_error": st.none() | texts, "extra_key": texts},
)


@budget(60)
@given(st.lists(_exchange_rows, max_size=8))
def test_exchanges_batch_equals_the_columns_built_one_by_one(rows):
    from replay.capture.ingest import exchanges_batch

    got = exchanges_batch(rows)
    got.validate(full=True)
    assert got.equals(_by_columns(rows))


@pytest.mark.parametrize("bad", [{"n_tools": 2**40}, {"source_line": "3"}, {"exchange_id": None}, {"served_content": 5},
                                 {"server_steps": ["a", 1]}, {"served_tool_calls": [{"index": 2**33}]}, {"stream": "yes"},
                                 {"model": "\ud800"}, {"ts": "2025-01-01"}])
def test_exchanges_batch_rejects_what_the_columns_reject_with_their_error(bad):
    """A value the schema rejects raises the same exception, with the same message, as the
    column-by-column build (ingest writes that message into the bad-field error row)."""
    from replay.capture.ingest import exchanges_batch

    row = {"exchange_id": "x", "source_file": "f", "source_line": 1, "route": "messages", "request_json": b"{}", "tools_json": b"null", **bad}
    with pytest.raises(Exception) as want:
        _by_columns([row])
    with pytest.raises(type(want.value)) as got:
        exchanges_batch([row])
    assert str(got.value) == str(want.value)


def test_ingest_of_v1_lines_imports_neither_pyarrow_compute_nor_other_readers(tmp_path):
    """Start-up counts in every `replay ingest`: a v1 capture is ingested without pyarrow.compute
    (~25 ms: `take` is called as a kernel, the tool_json dictionary built here) and without the
    readers of the other formats (imported when a file of theirs is read)."""
    cap = tmp_path / "c.jsonl"
    cap.write_text('{"id": "a", "route": "chat.completions", "request": {"model": "m", "messages": [], '
                   '"tools": [{"type": "function", "function": {"name": "f"}}]}}\n')
    code = (
        "import sys; from replay.capture import ingest; "
        f"s = ingest([{str(cap)!r}], {str(tmp_path / 'run')!r}); assert s.exchanges == 1 and s.tools == 1, s; "
        "print(sorted(m for m in sys.modules if m == 'pyarrow.compute' or m in "
        "('replay.capture.sse', 'replay.capture.har', 'replay.capture.batch', 'replay.capture.otel', 'replay.capture.litellm', "
        "'replay.capture.serverlog', 'replay.capture.jsonlines')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
