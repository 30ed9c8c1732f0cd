"""Helpers of the render and re-stream stages whose speed comes from doing less, checked against the
plain way they replace: the per-parse deadline (armed and disarmed around each parse and replay,
inside and outside a stage's installed handler), request bodies read as views of Arrow's buffer,
the preparers' copy of decoded JSON, and the render stage's key of a request's tool list."""

from __future__ import annotations

import copy
import signal
import time

import orjson
import pyarrow as pa
import pytest

from replay.deadline import ReplayTimeout, deadline, deadlines_installed
from replay.stages.rows import _bodies, decode_request, exchange_rows
from replay.prepare.base import deep
from replay.render.exchange import _tools_digest


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.mark.parametrize("installed", [False, True], ids=["own-handler", "stage-handler"])
def test_deadline_stops_a_block_that_runs_past_it_and_leaves_the_timer_and_handler_as_they_were(installed):
    before = signal.getsignal(signal.SIGALRM)

    def run() -> None:
        with pytest.raises(ReplayTimeout, match="took more than 0.05 s"):
            with deadline(0.05):
                _spin(2.0)
        with deadline(0.5):  # a block that ends in time: nothing raised
            pass
        # without the stage's handler the timer is disarmed at once; with it, a deadline leaves
        # it armed for the next one (disarmed when deadlines_installed ends, checked below)
        assert (signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)) is not installed
        with pytest.raises(ValueError):  # an error in the block goes through
            with deadline(0.5):
                raise ValueError("x")
        assert (signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)) is not installed
        _spin(0.6)  # the alarm left armed fires with no deadline running: ignored
        with deadline(0):  # no limit
            _spin(0.01)

    if installed:
        with deadlines_installed():
            run()
    else:
        run()
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    _spin(0.1)  # no stray alarm left armed


def test_a_timer_left_armed_by_an_earlier_deadline_does_not_cut_a_later_one_short():
    """Under the stage's handler a deadline reuses the timer an earlier one left armed: when it
    fires for the earlier deadline's end, the running one is given its whole limit (re-armed),
    and it still raises once that limit has passed."""
    with deadlines_installed():
        with deadline(0.3):  # arms the timer for ~0.3 s from now, ends at once
            pass
        _spin(0.1)
        start = time.monotonic()
        with pytest.raises(ReplayTimeout, match="took more than 0.3 s"):
            with deadline(0.3):
                _spin(0.25)  # the first alarm (0.2 s in) comes and is re-armed: nothing raised yet
                assert time.monotonic() - start >= 0.25
                _spin(2.0)
        took = time.monotonic() - start
        assert 0.29 <= took < 1.0, took
        with deadline(5.0):  # a longer limit after a shorter one that is armed: not cut at the short one's end
            with deadline(0.05):
                pass
            _spin(0.2)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_nested_deadline_with_a_shorter_limit_arms_the_timer_for_it():
    with deadlines_installed():
        with deadline(5.0):
            start = time.monotonic()
            with pytest.raises(ReplayTimeout, match="took more than 0.1 s"):
                with deadline(0.1):
                    _spin(2.0)
            assert time.monotonic() - start < 1.0
            _spin(0.2)  # the outer deadline (5 s) is not over: nothing raised


def test_deadline_nested_inside_the_stage_handler_restores_the_outer_limit():
    from replay import deadline as dl

    with deadlines_installed():
        with deadline(5.0):
            with deadline(0.5):
                assert dl._current[0] == 0.5
            assert dl._current[0] == 5.0
        assert dl._current[0] is None


def test_bodies_are_the_column_values_without_a_copy():
    values = ['{"a": 1}', "{}", "", '{"x": "\\u00e9 é"}', "[1, 2]"]
    col = pa.array(values, pa.string())
    got = _bodies(col)
    assert [bytes(v) for v in got] == [v.encode() for v in values]
    assert all(isinstance(v, memoryview) for v in got)
    sliced = col.slice(1, 3)
    assert [bytes(v) for v in _bodies(sliced)] == [v.encode() for v in values[1:4]]
    assert _bodies(pa.array(["a", None], pa.string())) == [b"a", None]  # nulls: bytes, as to_pylist gives
    assert _bodies(pa.array([], pa.string())) == []


def test_exchange_rows_read_bodies_as_views_and_decode_them_once():
    batch = pa.RecordBatch.from_pylist(
        [{"exchange_id": "a", "request_json": '{"tools": [1]}'}, {"exchange_id": "b", "request_json": "{}"}, {"exchange_id": "c", "request_json": "not json"}],
        schema=pa.schema([("exchange_id", pa.string()), ("request_json", pa.string())]),
    )
    rows = exchange_rows(batch)
    assert rows[1]["request_json"] == "{}" and "_body" not in rows[1]
    assert decode_request(rows[0])["_request"] == {"tools": [1]} and "_body" not in rows[0]
    bad = decode_request(rows[2])  # orjson cannot read it: the text again, for the stage to record its own error
    assert bad["request_json"] == "not json" and "_request" not in bad


def test_deep_copies_decoded_json_as_deepcopy_does():
    doc = orjson.loads(b'{"a": [1, 2.5, {"b": null, "c": [true, "x"]}], "d": {"e": {"f": []}}, "g": "s"}')
    got = deep(doc)
    assert got == copy.deepcopy(doc) == doc
    got["a"][2]["c"].append("y")
    got["d"]["e"]["f"].append(1)
    assert doc["a"][2]["c"] == [True, "x"] and doc["d"]["e"]["f"] == []  # nothing shared
    odd = {"t": (1, [2]), "o": {1, 2}}  # not JSON types: copy.deepcopy's own copy
    out = deep(odd)
    assert out == odd and out["t"][1] is not odd["t"][1] and out["o"] is not odd["o"]


def test_tools_digest_is_an_exact_key_of_the_client_and_prepared_declarations():
    client = [{"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}]
    same_objects = list(client)  # what openai_tools gives for chat.completions: the client's dicts
    equal_copy = orjson.loads(orjson.dumps(client))  # equal, other objects (a preparer that copies)
    other = [{"type": "function", "function": {"name": "b"}}]
    k_same = _tools_digest(client, same_objects)
    assert _tools_digest(client, same_objects) == _tools_digest(equal_copy, list(equal_copy))  # equal content, equal key
    assert _tools_digest(client, equal_copy) != k_same  # the prepared list is other objects: written in full
    assert _tools_digest(client, equal_copy) == _tools_digest(equal_copy, orjson.loads(orjson.dumps(client)))
    assert _tools_digest(client, other) != _tools_digest(client, equal_copy)
    assert _tools_digest(other, list(other)) != k_same
    assert _tools_digest(None, None) != _tools_digest([], [])
    assert _tools_digest([{"x": object()}], None) is None  # not writable: no key (not cached)
