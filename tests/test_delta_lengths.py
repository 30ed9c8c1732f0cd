"""``streams.delta_lengths``: the re-stream stage stores each chunking's cut, and the report's
exemplars read it instead of cutting the completion again (issue 9, part 5).

Expected values come from :func:`replay.stream.split` on the capture's own text (the cut the
stage is meant to make) and, for the exemplar, from lengths written into the table by the test:
an exemplar that re-cut the completion would not follow them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from replay.cli import app
from replay.parsers.hermes import HermesParser
from replay.report.exemplars import cut_at
from replay.stream import split

from tests.test_verdicts import OUTPUTS, plugins, stream_capture  # noqa: F401  (fixtures)

runner = CliRunner()


def _audit(capture: Path, out: Path, *args: str) -> None:
    res = runner.invoke(app, ["audit", str(capture), "--out", str(out), "--quiet", *args])
    assert res.exit_code == 0, res.output


def test_stored_lengths_are_the_cut_the_stage_made(stream_capture, plugins, tmp_path):
    run = tmp_path / "r"
    _audit(stream_capture, run, "--new-parser", f"{plugins}:DropLast", "--chunkings", "recorded,whole,char,fixed-3,fixed-13")
    texts = {f"x{i}": t for i, t in enumerate(OUTPUTS)}
    steps = {json.loads(line)["id"]: json.loads(line)["server"].get("steps") for line in stream_capture.read_text().splitlines()}
    rows = pq.read_table(run / "streams.parquet", columns=["exchange_id", "side", "chunking", "n_deltas", "delta_lengths", "error"]).to_pylist()
    markers = tuple(HermesParser.markers)
    seen = set()
    for r in rows:
        if r["chunking"] == "parse":
            assert r["delta_lengths"] is None
            continue
        text = texts[r["exchange_id"]]
        want = [len(d) for d in split(text, r["chunking"], markers=markers, steps=steps[r["exchange_id"]])]
        assert r["delta_lengths"] == want, r
        assert len(r["delta_lengths"]) == r["n_deltas"] and sum(r["delta_lengths"]) == len(text)
        seen.add(r["chunking"])
    assert seen == {"recorded", "whole", "char", "fixed-3", "fixed-13"}


def test_exemplar_deltas_follow_the_stored_lengths(stream_capture, plugins, tmp_path):
    run = tmp_path / "r"
    _audit(stream_capture, run, "--new-parser", f"{plugins}:DropLast", "--chunkings", "whole", "--exemplar-text")
    doc = json.loads((run / "exemplars" / "dropped-call.json").read_text(encoding="utf-8"))
    xid, text = doc["exchange_id"], doc["completion"]
    assert doc["delta_texts"] == [text]
    # plant another cut in the table: the exemplar must show exactly it (nothing is cut again)
    path = run / "streams.parquet"
    t = pq.read_table(path)
    lengths = t.column("delta_lengths").to_pylist()
    hit = [i for i, r in enumerate(t.select(["exchange_id", "side", "chunking"]).to_pylist()) if (r["exchange_id"], r["side"], r["chunking"]) == (xid, "new", "whole")]
    assert len(hit) == 1
    lengths[hit[0]] = [5, len(text) - 5]
    t = t.set_column(t.schema.get_field_index("delta_lengths"), "delta_lengths", pa.array(lengths, pa.list_(pa.int32())))
    pq.write_table(t, path)
    res = runner.invoke(app, ["report", "--run", str(run), "--exemplar-text"])
    assert res.exit_code == 0, res.output
    doc = json.loads((run / "exemplars" / "dropped-call.json").read_text(encoding="utf-8"))
    assert doc["delta_texts"] == [text[:5], text[5:]] and doc["deltas_note"] is None
    # a run without the column (written before it existed): a note, no re-cut
    pq.write_table(t.drop_columns(["delta_lengths"]), path)
    res = runner.invoke(app, ["report", "--run", str(run)])
    assert res.exit_code == 0, res.output
    doc = json.loads((run / "exemplars" / "dropped-call.json").read_text(encoding="utf-8"))
    assert doc["delta_texts"] is None and "no delta lengths stored" in doc["deltas_note"]


def test_cut_at():
    assert cut_at("abcdef", [1, 2, 3]) == ["a", "bc", "def"]
    assert cut_at("é😀x", [1, 1, 1]) == ["é", "😀", "x"]
    try:
        cut_at("abc", [1, 1])
    except ValueError as exc:
        assert "add up to 2 chars, the completion has 3" in str(exc)
    else:
        raise AssertionError("lengths that do not cover the text must raise")
