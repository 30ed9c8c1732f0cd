"""replay.capture.columns builds the same Arrow arrays as ``pa.array`` (the oracle), and rejects what it rejects.

Every type of the ingest tables (replay.tables EXCHANGES, TOOLS, INGEST_ERRORS) is drawn with
hypothesis, nulls included; the result must equal ``pa.array(values, type)`` value for value and
type for type. Values ``pa.array`` refuses for a declared type (a str in an int column, a bool in
an int column, an int past the range, a number in a string column) must raise here too.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypo import budget
from replay.capture.columns import batch_from_rows, column, text_column
from replay.tables import CALL, EXCHANGES, INGEST_ERRORS, TOOLS

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
ascii_texts = st.text(alphabet=st.characters(max_codepoint=127), max_size=12)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
stamps = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(timezone.utc))
calls = st.fixed_dictionaries({"index": st.none() | int32s, "id": st.none() | texts, "name": st.none() | texts, "arguments": st.none() | texts})

CASES = [
    (pa.string(), texts),
    (pa.string(), ascii_texts),
    (pa.int32(), int32s),
    (pa.int64(), int64s),
    (pa.bool_(), st.booleans()),
    (pa.timestamp("us", tz="UTC"), stamps),
    (pa.list_(pa.string()), st.lists(texts, max_size=5)),
    (pa.list_(pa.int32()), st.lists(int32s, max_size=5)),
    (pa.list_(CALL), st.lists(calls, max_size=3)),
]


@pytest.mark.parametrize("typ,values", CASES, ids=[str(t) for t, _ in CASES])
@budget(60)
@given(data=st.data())
def test_column_equals_pa_array(typ, values, data):
    vals = data.draw(st.lists(st.none() | values, max_size=20))
    got = column(vals, typ)
    want = pa.array(vals, typ)
    assert got.type == want.type
    got.validate(full=True)
    assert got.to_pylist() == want.to_pylist()
    assert got.null_count == want.null_count


def test_text_column_takes_utf8_bytes_and_non_ascii():
    arr = text_column([b'{"a":"\xc3\xa9"}', "é", None, "", "plain"])
    arr.validate(full=True)
    assert arr.to_pylist() == ['{"a":"é"}', "é", None, "", "plain"]


@pytest.mark.parametrize(
    "values,typ,exc",
    [
        (["1"], pa.int32(), TypeError),
        ([True], pa.int32(), TypeError),
        ([1.5], pa.int64(), TypeError),
        ([2**31], pa.int32(), OverflowError),
        ([-(2**31) - 1], pa.int32(), OverflowError),
        ([2**63], pa.int64(), OverflowError),
        ([1], pa.string(), TypeError),
        (["\ud800"], pa.string(), UnicodeEncodeError),
        ([1], pa.bool_(), TypeError),
        (["2025-01-01"], pa.timestamp("us", tz="UTC"), TypeError),
        ([datetime(2025, 1, 1)], pa.timestamp("us", tz="UTC"), TypeError),  # naive: no zone to read it in
        (["ab"], pa.list_(pa.string()), TypeError),
        ([[1]], pa.list_(pa.string()), TypeError),
        (["x"], pa.list_(CALL), TypeError),
    ],
)
def test_rejects_what_does_not_fit(values, typ, exc):
    with pytest.raises(exc):
        column(values, typ)


def test_timestamp_in_another_zone_is_the_same_instant():
    t = datetime(2025, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2)))
    assert column([t], pa.timestamp("us", tz="UTC")).to_pylist() == [datetime(2025, 1, 1, 0, 0, tzinfo=timezone.utc)]


def test_batch_from_rows_schema_and_not_null():
    rows = [{"source_file": "f", "source_line": 3, "byte_offset": None, "reason": "bad-json", "detail": "x", "excerpt": "y"}]
    b = batch_from_rows(rows, INGEST_ERRORS)
    assert b.schema.equals(INGEST_ERRORS) and b.to_pylist() == [{**rows[0]}]
    assert batch_from_rows([], EXCHANGES).num_rows == 0 and batch_from_rows([], TOOLS).schema.equals(TOOLS)
    with pytest.raises(ValueError, match="reason may not be null"):
        batch_from_rows([{**rows[0], "reason": None}], INGEST_ERRORS)


def test_building_a_batch_does_not_import_pandas():
    """The reason the module exists: pa.array imports pandas (0.2-0.4 s of a `replay ingest`)."""
    code = (
        "import sys; from replay.capture.columns import batch_from_rows; from replay.tables import TOOLS;"
        "batch_from_rows([{'exchange_id': 'x', 'tool_index': 0, 'has_description': True, 'has_parameters': False,"
        "'has_strict': False, 'client_null_paths': ['$.a'], 'tool_json': '{}'}], TOOLS); print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
