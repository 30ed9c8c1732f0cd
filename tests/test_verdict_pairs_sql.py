"""The view verdict_pairs (queries/_verdict_pairs.sql) on tables written by hand: each side's wrong
calls become its outcome, in call-index order, and two wrong sides are `still-wrong` when their
outcomes are equal and `changed-wrong` when not.

The calls of a (side, chunking) are grouped once and the lists of faulty calls are taken from the
faulty calls alone; these rows pin what each list holds, so that a call left out of them (or a list
out of index order) changes a verdict or an outcome here.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from replay.capture.columns import batch_from_rows
from replay.sql import connect, run_sql
from replay.tables import TABLES


def _write(run: Path, name: str, rows: list[dict]) -> None:
    pq.write_table(pa.Table.from_batches([batch_from_rows(rows, TABLES[name])]), run / f"{name}.parquet")


def _stream(xid: str, side: str, chunking: str, **kw) -> dict:
    return {"exchange_id": xid, "side": side, "chunking": chunking, "n_deltas": 0 if chunking == "parse" else 3, "calls_whole": 2,
            "finish_reason": "tool_calls", "content": "", "name_repeats": 0, "id_faults": 0, "finish_fault": False,
            "differs_from_reference": False, "differs_from_own_parse": False if chunking != "parse" else None, **kw}


def _call(xid: str, side: str, chunking: str, index: int, name: str, args: str, **kw) -> dict:
    return {"exchange_id": xid, "side": side, "chunking": chunking, "index": index, "name": name, "arguments": args,
            "arguments_json_ok": True, "matches_whole": True, "id": f"c{index}", "names_sent": 1, "id_fault": False, **kw}


def test_outcomes_hold_the_faulty_calls_in_index_order(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _write(run, "exchanges", [{"exchange_id": x, "source_file": "f", "source_line": i, "request_json": "{}"} for i, x in enumerate(("same", "diff"), 1)])
    streams, calls = [], []
    for xid in ("same", "diff"):
        streams.append(_stream(xid, "reference", "parse"))
        calls += [_call(xid, "reference", "parse", i, "read", '{"p": %d}' % i) for i in (0, 1)]
        for side in ("old", "new"):
            streams.append(_stream(xid, side, "whole", name_repeats=1, id_faults=1))
            renamed = "readread" if (xid == "diff" and side == "new") else "read"
            # index 1 first: the lists must come out in index order whatever order the rows are in
            calls.append(_call(xid, side, "whole", 1, renamed, '{"p": 1', arguments_json_ok=False, names_sent=2, id_fault=True))
            calls.append(_call(xid, side, "whole", 0, "read", '{"p": 0}', names_sent=2))
    _write(run, "streams", streams)
    _write(run, "calls", calls)
    con = connect(run)
    rows = run_sql(con, "SELECT exchange_id, \"check\", old_wrong, new_wrong, old_outcome, new_outcome, verdict FROM verdict_pairs "
                        "WHERE chunking = 'whole' ORDER BY exchange_id, \"check\"").to_pylist()
    got = {(r["exchange_id"], r["check"]): r for r in rows}
    same = got[("same", "name-repeat")]
    assert (same["old_wrong"], same["new_wrong"], same["verdict"]) == (True, True, "still-wrong")
    assert same["old_outcome"] == "[{'i': 0, 'n': read}, {'i': 1, 'n': read}]"
    diff = got[("diff", "name-repeat")]
    assert diff["verdict"] == "changed-wrong" and diff["new_outcome"] == "[{'i': 0, 'n': read}, {'i': 1, 'n': readread}]"
    assert got[("same", "non-json-join")]["old_outcome"] == "[{'i': 1, 'a': '{\"p\": 1'}]"
    assert got[("same", "call-id")]["old_outcome"] == "[{'i': 1, 'id': c1}]"
    assert got[("same", "non-json-join")]["verdict"] == "still-wrong"
    # index 1's arguments do not parse: not an argument mismatch (that needs arguments that parse)
    assert (got[("same", "argument-mismatch")]["old_wrong"], got[("same", "dropped-call")]["old_wrong"]) == (False, False)
    # the finish-reason outcome carries a digest of the calls in index order: equal sides, equal digests
    fr = got[("same", "finish-reason")]
    assert fr["old_outcome"] == fr["new_outcome"] and got[("diff", "finish-reason")]["old_outcome"] != got[("diff", "finish-reason")]["new_outcome"]
    # the digest of the calls at index 0 and 1 (their rows came in the order 1, 0)
    want = run_sql(con, "SELECT (hash(0, 'read', '{\"p\": 0}')::HUGEINT + hash(1, 'read', '{\"p\": 1')::HUGEINT)::VARCHAR AS k")
    assert fr["old_outcome"] == "tool_calls " + want.column("k")[0].as_py()
    # the digest takes each call's index: the same two calls at each other's index differ
    swapped = run_sql(con, "SELECT (hash(1, 'read', '{\"p\": 0}')::HUGEINT + hash(0, 'read', '{\"p\": 1')::HUGEINT)::VARCHAR AS k")
    assert fr["old_outcome"] != "tool_calls " + swapped.column("k")[0].as_py()
