"""Every kind of bad input of tests/bad_inputs.py: no crash, a clear ingest_errors row naming the
file and line (or byte offset), and accounting that adds up
(records - blank - skipped = exchanges + errors).

Each case is ingested on its own through the library (exact counts per case), and the whole corpus
once through the real CLI in a child process (``python -m replay audit``: exit 0, no traceback,
and the same counts per case folder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bad_inputs import CASES, Case, write_corpus
from replay.capture import discover, ingest

ROOT = Path(__file__).resolve().parents[1]


def test_at_least_30_kinds() -> None:
    assert len({c.name for c in CASES}) == len(CASES) >= 30


def _check_error_rows(errors: list[dict], folder: Path) -> None:
    for e in errors:
        assert Path(e["source_file"]).is_relative_to(folder), e
        assert e["source_line"] is not None or e["byte_offset"] is not None, e
        assert e["source_line"] is None or e["source_line"] >= 1, e
        assert e["reason"] and e["reason"] == e["reason"].strip(), e
        assert e["detail"], e  # what happened, in words
        assert len(e["excerpt"] or "") <= 120, e


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case: Case, tmp_path: Path) -> None:
    if case.skip:
        pytest.skip(case.skip)
    folder = tmp_path / "in"
    folder.mkdir()
    case.build(folder)
    out = tmp_path / "out"
    stats = ingest(discover(folder), out)  # the files as discovered, as `replay audit` passes them
    errors = pq.read_table(out / "ingest_errors.parquet").to_pylist()
    exchanges = pq.read_table(out / "exchanges.parquet").to_pylist()

    assert dict(Counter(e["reason"] for e in errors)) == case.reasons
    assert stats.errors_by_reason == dict(sorted(case.reasons.items()))
    assert (stats.exchanges, len(exchanges)) == (case.exchanges, case.exchanges)
    assert stats.lines - stats.blank_lines - stats.skipped == stats.exchanges + stats.errors
    assert (stats.blank_lines, stats.skipped) == (case.blank, case.skipped)
    if case.lines is not None:
        assert stats.lines == case.lines
    assert stats.duplicate_ids == case.duplicate_ids
    assert len({x["exchange_id"] for x in exchanges}) == len(exchanges)  # still a key
    _check_error_rows(errors, folder)


def test_line_too_long_row_names_line_and_offset(tmp_path: Path) -> None:
    """The 100 MB line: its row names line 2 at the byte after line 1, and ingest goes on past it."""
    (case,) = [c for c in CASES if c.name == "line-100mb"]
    case.build(tmp_path)
    path = tmp_path / "long.jsonl"
    first_len = path.open("rb").readline().__len__()
    out = tmp_path / "out"
    ingest(tmp_path, out)
    (err,) = pq.read_table(out / "ingest_errors.parquet").to_pylist()
    assert (err["source_file"], err["source_line"], err["byte_offset"], err["reason"]) == (str(path), 2, first_len, "line-too-long")
    long_len = path.stat().st_size - first_len - len(open(path, "rb").readlines()[-1]) - 1
    assert f"line of {long_len} bytes" in err["detail"]
    assert err["excerpt"].startswith('{"id": "long"')
    assert [x["source_line"] for x in pq.read_table(out / "exchanges.parquet").to_pylist()] == [1, 3]


def test_html_error_page_is_named(tmp_path: Path) -> None:
    """Each line of an HTML error page says it looks like HTML, not only where JSON parsing failed."""
    (case,) = [c for c in CASES if c.name == "html-error-page"]
    case.build(tmp_path)
    ingest(tmp_path, tmp_path / "out")
    errors = pq.read_table(tmp_path / "out" / "ingest_errors.parquet").to_pylist()
    assert len(errors) == 7
    assert all(e["detail"].startswith("not JSON, looks like HTML (an error page") for e in errors), errors


def test_over_long_first_line_of_a_json_lines_format(tmp_path: Path) -> None:
    """A server log whose first line is over the limit: that line is line-too-long and the next
    one is read (the file was taken for one pretty-printed document and lost whole)."""
    import orjson

    rec = {"request_id": "x", "model": "m", "request": {"messages": [{"role": "user", "content": "hi"}]}, "prompt": "p", "output_text": "o"}
    (tmp_path / "log.jsonl").write_bytes(b'{"request_id": "long", "prompt": "' + b"x" * 3000 + b'"}\n' + orjson.dumps(rec) + b"\n")
    stats = ingest(tmp_path, tmp_path / "out", capture_format="serverlog", max_line_bytes=1000)
    assert (stats.lines, stats.exchanges, stats.errors_by_reason) == (2, 1, {"line-too-long": 1})


@pytest.mark.parametrize("first", ["cut", "deep"])
def test_long_bad_first_line_keeps_the_lines_after_it(tmp_path: Path, first: str) -> None:
    """A v1 file whose first line is bad and long (a 70 KB exchange cut 3 bytes short, or
    100,000-deep nesting) followed by a 200 KB exchange: the sniffed head must not cut the second
    line, or no line parses whole and the file is read as one document (1 line, 0 exchanges).
    The bad line is one error (bad-json, too-deep); the 8 exchanges after it are read."""
    samples = (ROOT / "samples" / "coding-agent.jsonl").read_text().splitlines()

    def sized(n: int, rid: str) -> str:
        rec = json.loads(samples[0])
        rec["id"] = rid
        rec["note"] = "x" * n  # a key v1 ignores, last: the head cuts a line after its response
        return json.dumps(rec)

    line1 = sized(70_000, "cut")[:-3] if first == "cut" else "[" * 100_000 + "]" * 100_000
    (tmp_path / "caps.jsonl").write_text("\n".join([line1, sized(200_000, "big"), *samples]) + "\n")
    stats = ingest(tmp_path, tmp_path / "out")
    assert (stats.lines, stats.exchanges, stats.errors_by_reason) == (9, 8, {"bad-json" if first == "cut" else "too-deep": 1})
    errors = pq.read_table(tmp_path / "out" / "ingest_errors.parquet").to_pylist()
    assert [e["source_line"] for e in errors] == [1]


def test_max_line_bytes_option(tmp_path: Path) -> None:
    """A lower limit turns a normal line into line-too-long; the next line still reads."""
    (case,) = [c for c in CASES if c.name == "crlf-lines"]
    case.build(tmp_path)
    out = tmp_path / "out"
    stats = ingest(tmp_path, out, max_line_bytes=100)
    assert (stats.exchanges, stats.errors_by_reason) == (0, {"line-too-long": 2})
    with pytest.raises(ValueError):
        ingest(tmp_path, tmp_path / "o2", max_line_bytes=0)


def test_cli_on_the_whole_corpus(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    folders = write_corpus(root)
    run = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "replay", "audit", str(root), "--out", str(run), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ, COLUMNS="200"),
    )
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == 0, proc.stderr
    errors = pq.read_table(run / "ingest_errors.parquet").to_pylist()
    exchanges = pq.read_table(run / "exchanges.parquet").to_pylist()
    meta = json.loads((run / "run.json").read_text())
    ing = meta["ingest"]
    cases = {c.name: c for c in CASES}
    assert ing["lines"] - ing["blank_lines"] - ing["skipped"] == ing["exchanges"] + ing["errors"]
    assert ing["skipped"] == sum(c.skipped for n, c in cases.items() if n in folders)
    for name, folder in folders.items():
        case = cases[name]
        mine_err = [e for e in errors if Path(e["source_file"]).is_relative_to(folder)]
        mine_ex = [x for x in exchanges if Path(x["source_file"]).is_relative_to(folder)]
        assert dict(Counter(e["reason"] for e in mine_err)) == case.reasons, name
        assert len(mine_ex) == case.exchanges, name
        _check_error_rows(mine_err, folder)
    assert sum(c.exchanges for n, c in cases.items() if n in folders) == ing["exchanges"]
    assert (run / "report.md").is_file()
