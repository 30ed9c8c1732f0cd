"""Capture inputs that are not plain files (issue #20): a symlink beside its target, a folder
linked into itself, a FIFO inside a capture folder and a FIFO or pipe named on the command line."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from replay.capture import discover, ingest
from replay.cli import app


def _line(i: int) -> bytes:
    rec = {"id": f"ex-{i}", "route": "chat.completions", "model": "m",
           "request": {"model": "m", "messages": [{"role": "user", "content": f"hi {i}"}]}}
    return orjson.dumps(rec) + b"\n"


def _ids(run: Path) -> list[str]:
    return pq.read_table(run / "exchanges.parquet").column("exchange_id").to_pylist()


def _cli(args: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    """``replay ARGS`` in a subprocess; a hang fails the test (TimeoutExpired) instead of blocking it."""
    return subprocess.run([sys.executable, "-m", "replay", *args], capture_output=True, text=True, timeout=timeout)


def test_symlinked_capture_read_once_and_folder_loop_ends(tmp_path: Path) -> None:
    d = tmp_path / "caps"
    (d / "sub").mkdir(parents=True)
    (d / "a.jsonl").write_bytes(_line(1) + _line(2))
    (d / "sub" / "b.jsonl").write_bytes(_line(3))
    os.symlink("../a.jsonl", d / "sub" / "z-link.jsonl")  # sorts after a.jsonl: a.jsonl is kept
    os.symlink("..", d / "sub" / "up")  # a loop: caps/sub/up/sub/up/...
    os.link(d / "sub" / "b.jsonl", d / "sub" / "hard.jsonl")  # another name of b.jsonl, which sorts first
    skipped: list[dict] = []
    assert discover(d, skipped) == [d / "a.jsonl", d / "sub" / "b.jsonl"]
    assert [(s["path"], s["reason"], s.get("same_as")) for s in skipped] == [
        (str(d / "sub" / "up"), "folder-walked", None),
        (str(d / "sub" / "hard.jsonl"), "duplicate", str(d / "sub" / "b.jsonl")),
        (str(d / "sub" / "z-link.jsonl"), "duplicate", str(d / "a.jsonl")),
    ]
    stats = ingest(d, tmp_path / "run")
    assert _ids(tmp_path / "run") == ["ex-1", "ex-2", "ex-3"]
    assert (stats.files, stats.exchanges, stats.duplicate_ids) == (2, 3, 0)
    assert [s["reason"] for s in stats.skipped_files] == ["folder-walked", "duplicate", "duplicate"]
    # `replay audit` says it too: run.json and a warning naming each path
    res = CliRunner().invoke(app, ["audit", str(d), "--out", str(tmp_path / "audit"), "--quiet", "--jobs", "1"])
    assert res.exit_code == 0, res.output
    meta = json.loads((tmp_path / "audit" / "run.json").read_text())
    assert [(s["path"], s["reason"]) for s in meta["ingest"]["skipped_files"]] == [(s["path"], s["reason"]) for s in skipped]
    assert [i["path"] for i in meta["inputs"]] == [str(d / "a.jsonl"), str(d / "sub" / "b.jsonl")]
    said = " ".join(res.output.split())
    assert f"skipped {d / 'sub' / 'z-link.jsonl'}: the same file as {d / 'a.jsonl'} (a link): read once" in said
    # a linked folder that is not a loop is walked (once)
    other = tmp_path / "other"
    other.mkdir()
    (other / "c.jsonl").write_bytes(_line(4))
    os.symlink(other, d / "linked")
    assert discover(d) == [d / "a.jsonl", d / "linked" / "c.jsonl", d / "sub" / "b.jsonl"]


def test_fifo_in_a_folder_is_skipped_and_named(tmp_path: Path) -> None:
    d = tmp_path / "caps"
    d.mkdir()
    (d / "a.jsonl").write_bytes(_line(1))
    os.mkfifo(d / "b.jsonl")  # no writer: opening it would wait for ever
    proc = _cli(["ingest", str(d), "--out", str(tmp_path / "run"), "--quiet"])
    assert proc.returncode == 0, proc.stderr
    assert _ids(tmp_path / "run") == ["ex-1"]
    assert f"skipped {d / 'b.jsonl'}: a FIFO (named pipe), not a regular file" in " ".join(proc.stderr.split())
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert [(s["path"], s["reason"]) for s in meta["ingest"]["skipped_files"]] == [(str(d / "b.jsonl"), "not-a-regular-file")]
    assert [i["path"] for i in meta["inputs"]] == [str(d / "a.jsonl")]


def test_fifo_named_directly_is_read_once_whole(tmp_path: Path) -> None:
    fifo = tmp_path / "live.jsonl"
    os.mkfifo(fifo)
    data = b"".join(_line(i) for i in range(5))

    def write() -> None:
        with open(fifo, "wb") as fh:  # waits for the reader, as a producer in a shell pipeline does
            fh.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    proc = _cli(["ingest", str(fifo), "--out", str(tmp_path / "run"), "--quiet"])
    writer.join(5)
    assert proc.returncode == 0, proc.stderr
    assert _ids(tmp_path / "run") == [f"ex-{i}" for i in range(5)]
    src = pq.read_table(tmp_path / "run" / "exchanges.parquet").column("source_file").to_pylist()
    assert src == [str(fifo)] * 5  # named as given, not as the temporary copy
    meta = json.loads((tmp_path / "run" / "run.json").read_text())
    assert meta["inputs"] == [{"path": str(fifo), "bytes": len(data), "mtime_ns": None}]  # a pipe has no time of its own


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="no /dev/fd")
def test_process_substitution_pipe(tmp_path: Path) -> None:
    # what `replay ingest <(zstdcat x.zst)` hands over: /dev/fd/N, an anonymous pipe
    src = tmp_path / "a.jsonl"
    src.write_bytes(_line(1) + _line(2))
    proc = subprocess.run(["bash", "-c", f'"{sys.executable}" -m replay ingest <(cat "{src}") --out "{tmp_path / "run"}" --quiet'],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert _ids(tmp_path / "run") == ["ex-1", "ex-2"]
    assert pq.read_table(tmp_path / "run" / "exchanges.parquet").column("source_file").to_pylist()[0].startswith("/dev/fd/")


def test_fifo_named_directly_waits_for_its_writer_and_says_so(tmp_path: Path) -> None:
    fifo = tmp_path / "live.jsonl"
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-m", "replay", "ingest", str(fifo), "--out", str(tmp_path / "run"), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # said before it blocks on the FIFO (no writer yet); a silent wait fails here, not hangs
        assert select.select([proc.stderr], [], [], 30)[0], "nothing said on stderr while waiting for the FIFO's writer"
        said = proc.stderr.readline()
        assert f"reading the FIFO {fifo} to its end" in said
        with open(fifo, "wb") as fh:  # the writer comes later, as in a shell pipeline
            fh.write(_line(1))
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert _ids(tmp_path / "run") == ["ex-1"]


def test_folder_of_fifos_only_says_what_it_skipped(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "x.jsonl")
    proc = _cli(["ingest", str(tmp_path), "--out", str(tmp_path / "run")])
    assert proc.returncode == 1
    assert f"no capture file to read in {tmp_path}: skipped {tmp_path / 'x.jsonl'}: a FIFO (named pipe)" in " ".join(proc.stderr.split())
