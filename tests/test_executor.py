"""The stage driver's executors and outputs (issue 9 items 5-6, 'Bad input and faults'): ``--jobs``
on a spawned process pool writes the rows ``--jobs 1`` writes; a pool process that dies costs its
batch's rows an error, not the audit; an interrupted stage or audit resumes from its part files;
an ``--out`` holding a run is refused without ``--force``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from replay.capture import ingest
from replay.stages.stage import STREAM, Stage
from replay.runner.driver import run_render, run_stage, run_stream
from replay.stages.validate import validate_specs
from replay.runner.pool import close_pools
from replay.runspec import RunSpec, build_config
from replay.sides import close_sides
from sides_data import SAMPLES, invoke, write_capture

NAMES = [["read"], ["read", "boom"], ["edit"], ["write"], ["read"], ["edit", "write"]]  # x1: the exchange a plugin kills its process on
KEYS = {"renders": ("exchange_id", "side"), "streams": ("exchange_id", "side", "chunking"), "calls": ("exchange_id", "side", "chunking", "index")}


def _ingested(tmp_path: Path, name: str, captures: list[Path]) -> Path:
    run = tmp_path / name
    ingest(captures, run)
    return run


def _rows(run: Path, table: str) -> list[dict]:
    return sorted(pq.read_table(run / f"{table}.parquet").to_pylist(), key=lambda r: tuple(str(r[k]) for k in KEYS[table]))


def _stages(run: Path, spec: RunSpec, jobs: int) -> None:
    cfg = build_config(spec.replace(jobs=jobs))
    validate_specs(cfg)
    try:
        run_render(run, cfg)
        run_stream(run, cfg)
    finally:
        close_pools()
        close_sides(cfg)


def test_jobs_1_and_jobs_2_write_the_same_rows(tmp_path: Path) -> None:
    """The bundled samples (10 families, reasoning, recorded steps, render errors) in batches of
    8 exchanges: a pool of 2 spawned processes writes the rows of one process (sorted by key)."""
    from replay.capture import discover

    files = discover([SAMPLES])
    one, two = _ingested(tmp_path, "one", files), _ingested(tmp_path, "two", files)
    spec = RunSpec(batch_rows=8, new_parser=None, chunkings=("recorded", "whole", "char", "fixed-3"))
    _stages(one, spec, 1)
    _stages(two, spec, 2)
    for table in KEYS:
        a, b = _rows(one, table), _rows(two, table)
        assert len(a) > 30 and a == b, table
    assert not (two / ".parts").exists()  # the parts were joined and removed


def test_a_pool_process_that_dies_costs_its_batch_not_the_audit(tmp_path: Path) -> None:
    """A plugin that kills its process (os._exit) on x1: the batch holding x1 (x0, x1) is retried
    alone, dies again, and its old/new rows carry the error (replay-error rows, the built-in
    reference parse is made in the parent); the other batches are replayed as usual."""
    plugin = tmp_path / "killer.py"
    plugin.write_text(
        "import os\n"
        "from replay.parsers.hermes import HermesParser\n"
        "class Killer(HermesParser):\n"
        "    def parse(self, text):\n"
        "        if 'boom' in text: os._exit(3)\n"
        "        return super().parse(text)\n"
    )
    run = _ingested(tmp_path, "run", [write_capture(tmp_path / "cap" / "c.jsonl", NAMES)])
    _stages(run, RunSpec(batch_rows=2, old_parser=f"{plugin}:Killer", chunkings=("whole",)), 2)
    rows = _rows(run, "streams")
    by = {(r["exchange_id"], r["side"], r["chunking"]): r for r in rows}
    for xid in ("x0", "x1"):
        for side in ("old", "new"):
            for chunking in ("parse", "whole"):
                assert by[(xid, side, chunking)]["error"].startswith("WorkerError: the pool process died on this batch"), (xid, side)
        assert by[(xid, "reference", "parse")]["error"] is None
    assert all(r["error"] is None for r in rows if r["exchange_id"] not in ("x0", "x1"))
    assert {r["exchange_id"] for r in rows} == {f"x{i}" for i in range(len(NAMES))}
    assert by[("x5", "old", "whole")]["calls_streamed"] == 2


def test_pool_restarts_and_failed_batches_reach_run_json_and_the_report(tmp_path: Path) -> None:
    """The same killer through `replay audit --jobs 2`: run.json says the re-stream stage's pool
    lost a process, ran the batches then in flight again alone, and one (x0, x1) failed again;
    report.md says so in one sentence; the render stage (no parse there) lost nothing."""
    plugin = tmp_path / "killer.py"
    plugin.write_text(
        "import os\n"
        "from replay.parsers.hermes import HermesParser\n"
        "class Killer(HermesParser):\n"
        "    def parse(self, text):\n"
        "        if 'boom' in text: os._exit(3)\n"
        "        return super().parse(text)\n"
    )
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    out = tmp_path / "run"
    res = invoke("audit", capture, "--out", out, "-q", "--chunkings", "whole", "--old-parser", f"{plugin}:Killer", "--jobs", "2", "--batch-rows", "2")
    assert res.exit_code == 0, res.output
    meta = json.loads((out / "run.json").read_text())
    stream = meta["executors"]["stream"]
    assert (stream["engine"], stream["jobs"], stream["batches_failed"]) == ("pool", 2, 1)
    assert stream["pool_restarts"] >= 1 and 1 <= stream["batches_retried"] <= 3  # the batches in flight when it broke
    assert meta["executors"]["render"] == {"engine": "pool", "jobs": 2, "pool_restarts": 0, "batches_retried": 0, "batches_failed": 0}
    report = (out / "report.md").read_text()
    assert (
        f"The re-stream stage's pool of 2 processes lost a process {stream['pool_restarts']} time{'s' if stream['pool_restarts'] != 1 else ''}: "
        f"{stream['batches_retried']} batch{'es' if stream['batches_retried'] != 1 else ''} run again alone; 1 batch failed again and its rows carry the error"
    ) in report


def test_an_interrupted_stage_resumes_from_its_parts(tmp_path: Path) -> None:
    """The re-stream stage stopped after its first batch: a rerun with the same spec runs only
    the batches without parts and writes the table a run without interruption writes; another
    spec starts over."""
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    run, fresh = _ingested(tmp_path, "run", [capture]), _ingested(tmp_path, "fresh", [capture])
    cfg = build_config(RunSpec(batch_rows=2, chunkings=("whole", "char")))
    run_stream(fresh, cfg)

    class Stop(Exception):
        pass

    def stop(n: int) -> None:
        raise Stop

    with pytest.raises(Stop):
        run_stage(run, STREAM, cfg, progress=stop)
    assert not (run / "streams.parquet").exists()  # no table a query would read as complete
    assert sorted(p.name for p in (run / ".parts" / "streams").iterdir()) == ["part-000000.parquet"]
    seen = []

    def counting(batch, spec):
        seen.append(batch.column("exchange_id").to_pylist())
        return STREAM.function(batch, spec)

    run_stage(run, Stage("stream", counting, STREAM.columns, STREAM.tables), cfg)
    assert seen == [["x2", "x3"], ["x4", "x5"]]
    for table in ("streams", "calls"):
        assert _rows(run, table) == _rows(fresh, table)
    assert not (run / ".parts").exists()
    # parts of another spec are not reused
    with pytest.raises(Stop):
        run_stage(run, STREAM, cfg, progress=stop)
    seen.clear()
    run_stage(run, Stage("stream", counting, STREAM.columns, STREAM.tables), build_config(RunSpec(batch_rows=2, chunkings=("whole",))))
    assert len(seen) == 3


def test_out_holding_a_run_is_refused_resumed_or_replaced(tmp_path: Path) -> None:
    """An --out holding a finished run: refused (exit 2, naming --force); --force replaces it. An
    audit interrupted in re-stream: rerun with the same captures and options, it resumes (ingest
    not run again, run.json says resumed); with other options it is refused."""
    from replay.audit import RunExistsError, audit

    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    out = tmp_path / "run"
    assert invoke("audit", capture, "--out", out, "-q").exit_code == 0
    again = invoke("audit", capture, "--out", out, "-q")
    assert again.exit_code == 2 and "already holds a run" in again.output and "--force" in again.output
    assert invoke("audit", capture, "--out", out, "-q", "--force").exit_code == 0
    assert not (out / ".parts").exists()

    from contextlib import contextmanager

    stages: list[str] = []

    @contextmanager
    def stop_in_stream(name, total):
        stages.append(name)
        if name == "re-stream":
            raise KeyboardInterrupt
        yield lambda n: None

    spec = RunSpec(batch_rows=2)
    part = tmp_path / "part"
    with pytest.raises(KeyboardInterrupt):
        audit([capture], part, build_config(spec), stage=stop_in_stream)
    assert (part / "renders.parquet").is_file() and json.loads((part / "run.json").read_text())["incomplete"]  # marked while a stage runs
    with pytest.raises(RunExistsError):
        audit([capture], part, build_config(RunSpec(batch_rows=2, chunkings=("whole",))))
    stages.clear()

    @contextmanager
    def record(name, total):
        stages.append(name)
        yield lambda n: None

    result = audit([capture], part, build_config(spec), stage=record)
    assert stages == ["render", "re-stream"] and result.meta["resumed"] is True
    meta = json.loads((part / "run.json").read_text())
    assert meta["ingest"]["exchanges"] == len(NAMES) and not (part / ".parts").exists()
    shutil.rmtree(out)


def test_batches_are_cut_within_row_groups_and_read_by_reference(tmp_path: Path) -> None:
    """``exchanges.parquet`` in row groups of 5 rows (ingest's batch size) and a stage batch size
    of 3: each row group is cut into batches of 3 and 2, keyed in file order, never spanning two
    row groups; read_batch gives exactly the rows of each slice; a pool of 2 processes reading
    their own batches writes the rows of one process."""
    from replay.runner.driver import batch_refs, read_batch

    files = [write_capture(tmp_path / "cap" / "c.jsonl", NAMES * 2)]  # 12 exchanges: row groups 5, 5, 2
    one, two = tmp_path / "one", tmp_path / "two"
    ingest(files, one, batch_rows=5)
    ingest(files, two, batch_rows=5)
    path = one / "exchanges.parquet"
    assert [pq.ParquetFile(path).metadata.row_group(i).num_rows for i in range(3)] == [5, 5, 2]
    refs = batch_refs(path, 3)
    assert [(r.key, r.row_group, r.start, r.rows) for r in refs] == [(0, 0, 0, 3), (1, 0, 3, 2), (2, 1, 0, 3), (3, 1, 3, 2), (4, 2, 0, 2)]
    ids = pq.read_table(path, columns=["exchange_id"]).column(0).to_pylist()
    got = [read_batch(path, r, ["exchange_id", "model"]) for r in refs]
    assert [x for b in got for x in b.column("exchange_id").to_pylist()] == ids
    assert all(b.schema.names == ["exchange_id", "model"] for b in got)
    spec = RunSpec(batch_rows=3, chunkings=("whole", "char"))
    _stages(one, spec, 1)
    _stages(two, spec, 2)
    for table in KEYS:
        a, b = _rows(one, table), _rows(two, table)
        assert a and a == b, table


def test_an_audit_ingests_row_groups_of_its_batch_size(tmp_path: Path) -> None:
    """`replay audit --batch-rows 2` writes exchanges.parquet in row groups of at most 2 rows, so
    that each stage batch is one row group a pool process reads alone."""
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    out = tmp_path / "run"
    res = invoke("audit", capture, "--out", out, "-q", "--jobs", "1", "--batch-rows", "2")
    assert res.exit_code == 0, res.output
    meta = pq.ParquetFile(out / "exchanges.parquet").metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [2, 2, 2]


def test_arrow_without_pandas_keeps_pandas_out_and_importable() -> None:
    """In a fresh interpreter: after arrow_without_pandas(), pa.array and from_pylist do not
    import pandas (they would: pyarrow's shim imports it to recognise a Series); pandas can still
    be imported and Table.to_pandas() still works. The pool processes call it first thing."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from replay.runner.memory import arrow_without_pandas\n"
        "import pyarrow as pa\n"
        "assert arrow_without_pandas() is True\n"
        "pa.array(['a']); pa.RecordBatch.from_pylist([{'a': 1}]); pa.Table.from_pylist([{'a': 1}])\n"
        "assert 'pandas' not in sys.modules, 'pa.array imported pandas'\n"
        "assert arrow_without_pandas() is True\n"
        "df = pa.table({'a': [1, 2]}).to_pandas()\n"
        "assert list(df['a']) == [1, 2] and 'pandas' in sys.modules\n"
        "assert arrow_without_pandas() is False\n"
        "import pandas\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_an_audit_starts_its_pool_before_ingest_and_the_stages_reuse_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With captures of at least PRESTART_BYTES (0 here), `--jobs 2` starts the pool before ingest
    (its processes start up while ingest runs) and render and re-stream run on that same pool:
    one pool made in the whole audit, and the rows of a `--jobs 1` audit. With `--parallel-ingest`
    ingest parses on that pool too (run.json `executors.ingest`), for the same rows."""
    import replay.audit as audit_mod
    import replay.runner.plan as plan_mod
    import replay.runner.pool as pool_mod
    from replay.audit import audit

    made: list[int] = []
    real = pool_mod._pool

    def counting(jobs, spec):
        made.append(jobs)
        return real(jobs, spec)

    monkeypatch.setattr(pool_mod, "_pool", counting)
    monkeypatch.setattr(plan_mod, "PRESTART_BYTES", 0)
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    runs = {}
    for jobs, parallel in ((2, False), (1, False), (2, True)):
        cfg = build_config(RunSpec(batch_rows=2, chunkings=("whole", "char"), jobs=jobs, parallel_ingest=parallel))
        res = audit([capture], tmp_path / f"j{jobs}{parallel}", cfg)
        runs[jobs, parallel] = res.run_dir
        if jobs == 2 and not parallel:
            assert made == [2] and res.meta["executors"]["render"]["engine"] == "pool"
            assert res.meta["executors"]["ingest"] == {"engine": "local", "jobs": 1}
        if parallel:
            assert res.meta["executors"]["ingest"]["engine"] == "pool" and res.meta["executors"]["ingest"]["jobs"] == 2
    assert made == [2, 2]  # --jobs 1 starts none
    for table in KEYS:
        assert _rows(runs[1, False], table) == _rows(runs[2, False], table) == _rows(runs[2, True], table), table
