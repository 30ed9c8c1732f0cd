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
