"""Render and re-stream during ingest (:mod:`replay.runner.overlap`, issue 9: ``--jobs 2`` wall time): a
batch run by a drain while ingest writes gives the parts the stages would write for it, an audit
whose batches all ran during ingest writes the rows of one without, and a batch a drain fails on,
a drain process that dies, or parts an interrupted ingest left never change a row."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import replay.audit as audit_mod
import replay.runner.plan as plan_mod
from replay.audit import audit
from replay.capture import discover, ingest
from replay.runner.overlap import STAGES, Overlap, run_file, write_batch_file
from replay.runner.driver import BatchRef, parts_dir, part_name, run_ref, write_atomic
from replay.runner.pool import close_pools
from replay.runspec import RunSpec, build_config
from replay.sides import close_sides
from procs import running, wait_for
from sides_data import SAMPLES

SPEC = RunSpec(batch_rows=4)
TABLES = [t for stage in STAGES for t in stage.tables]


def _sorted(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=repr)


def _in_memory(tmp_path: Path) -> tuple[Path, list[tuple[int, pa.RecordBatch]]]:
    """The samples ingested in row groups of 4, with the batches ingest wrote (``on_exchanges``)."""
    run = tmp_path / "run"
    seen: list[tuple[int, pa.RecordBatch]] = []
    ingest(discover([SAMPLES]), run, batch_rows=4, on_exchanges=lambda k, b: seen.append((k, b)))
    return run, seen


def test_a_batch_run_from_its_file_gives_the_parts_the_stages_write(tmp_path: Path) -> None:
    """Every row group of the samples, as ingest handed it over (``request_json`` a string view),
    written by :func:`write_batch_file` and run by :func:`run_file`: each stage's part holds the
    rows :func:`run_ref` makes of that row group of ``exchanges.parquet``."""
    run, seen = _in_memory(tmp_path)
    assert [k for k, _ in seen] == list(range(pq.ParquetFile(run / "exchanges.parquet").metadata.num_row_groups))
    assert pa.types.is_string_view(seen[0][1].schema.field("request_json").type)
    cfg = build_config(SPEC)
    try:
        rows = 0
        for key, batch in seen:
            path = tmp_path / f"{key}.arrow"
            write_batch_file(batch, path)
            assert run_file(run, key, path, cfg) == batch.num_rows
            rows += batch.num_rows
            ref = BatchRef(key, key, 0, batch.num_rows)
            for stage in STAGES:
                want = run_ref(stage, run / "exchanges.parquet", ref, cfg)
                for table in stage.tables:
                    got = pq.read_table(parts_dir(run, table) / part_name(key))
                    assert got.to_pylist() == want[table].to_pylist(), (key, table)
        assert rows == 38
    finally:
        close_sides(cfg)


def test_a_batch_with_null_tool_lists_reads_its_requests_as_the_row_group_does(tmp_path: Path) -> None:
    """A batch whose ``tools_json`` holds nulls (files of older versions; a request the tool list
    could not be cut from): the file says how many (``tools_nulls``) and the re-stream stage gets
    ``request_json`` too, as :func:`replay.runner.driver.stage_columns` gives it for such a row group,
    so those rows' tools come from their requests: the same rows as from Parquet."""
    run, seen = _in_memory(tmp_path)
    key, batch = next((k, b) for k, b in seen if b.num_rows == 4 and all(v is not None for v in b.column("tools_json").to_pylist()))
    i = batch.schema.get_field_index("tools_json")
    nulled = batch.set_column(i, batch.schema.field(i), pa.array([None, *batch.column(i).to_pylist()[1:]]).dictionary_encode())
    path = tmp_path / "b.arrow"
    write_batch_file(nulled, path)
    with pa.OSFile(str(path)) as fh:
        assert pa.ipc.open_stream(fh).schema.metadata[b"tools_nulls"] == b"1"
    pf = tmp_path / "pq"
    pf.mkdir()
    cast = nulled.set_column(nulled.schema.get_field_index("request_json"), "request_json", nulled.column("request_json").cast(pa.string()))
    pq.write_table(pa.Table.from_batches([cast]), pf / "exchanges.parquet")
    cfg = build_config(SPEC)
    try:
        run_file(run, 0, path, cfg)
        want = run_ref(STAGES[1], pf / "exchanges.parquet", BatchRef(0, 0, 0, 4), cfg)
        for table in STAGES[1].tables:
            assert pq.read_table(parts_dir(run, table) / part_name(0)).to_pylist() == want[table].to_pylist(), table
        assert any(r["side"] == "old" for r in want["streams"].to_pylist())
    finally:
        close_sides(cfg)


def _audit(out: Path, *, overlap: bool = True) -> dict:
    cfg = build_config(SPEC.replace(jobs=2, overlap=overlap))
    try:
        return audit([SAMPLES], out, cfg).meta
    finally:
        close_pools()


@pytest.fixture(scope="module")
def without(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The samples audited with ``--jobs 2 --no-overlap``: the rows every other audit must write."""
    out = tmp_path_factory.mktemp("without") / "run"
    meta = _audit(out, overlap=False)
    assert "during_ingest" not in meta["executors"]
    return out


def _same_tables(a: Path, b: Path) -> None:
    for table in ("exchanges", *TABLES):
        x, y = pq.read_table(a / f"{table}.parquet"), pq.read_table(b / f"{table}.parquet")
        assert x.num_rows > 0 and x.to_pylist() == y.to_pylist(), table  # same rows, same order


def _consumed(work: Path, seconds: float = 60) -> None:
    """Wait until no file of ``work`` waits or is being run (a drain took it and finished)."""
    if not wait_for(lambda: not [n for n in os.listdir(work) if n.endswith(".arrow") or n.startswith(".claimed-")], seconds, step=0.01):
        raise AssertionError(f"the drain did not take {os.listdir(work)}")


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> None:
    """The samples (a few KB) start the pool as a capture of 8 MiB would."""
    monkeypatch.setattr(plan_mod, "PRESTART_BYTES", 0)


def test_an_audit_whose_batches_all_ran_during_ingest_writes_the_same_rows(tmp_path: Path, without: Path, pooled: None,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Ingest waits after each row group until the drain has run it (a slow capture, a fast
    pool): every batch of every stage ran during ingest, run.json says so, and the tables are
    those of ``--no-overlap`` row for row, in the same order."""
    offer = Overlap.offer

    def waiting_offer(self: Overlap, key: int, batch: pa.RecordBatch) -> None:
        offer(self, key, batch)
        _consumed(self.work)

    monkeypatch.setattr(Overlap, "offer", waiting_offer)
    meta = _audit(tmp_path / "run")
    groups = pq.ParquetFile(tmp_path / "run" / "exchanges.parquet").metadata.num_row_groups
    assert meta["executors"]["during_ingest"] == {"batches": groups, "exchanges": 38, "offered": groups, "sent": groups}
    _same_tables(tmp_path / "run", without)
    assert not (tmp_path / "run" / ".parts").exists()


def test_a_batch_a_drain_fails_on_is_run_again_by_its_stage(tmp_path: Path, without: Path, pooled: None,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The file of row group 1 is not Arrow (a torn write): the drain drops that batch and goes
    on, and the stages run it after ingest; the tables are unchanged."""
    offer = Overlap.offer

    def torn(self: Overlap, key: int, batch: pa.RecordBatch) -> None:
        if key == 1:
            (self.work / "1.arrow").write_bytes(b"not arrow")
        else:
            offer(self, key, batch)
        _consumed(self.work)

    monkeypatch.setattr(Overlap, "offer", torn)
    meta = _audit(tmp_path / "run")
    groups = pq.ParquetFile(tmp_path / "run" / "exchanges.parquet").metadata.num_row_groups
    assert meta["executors"]["during_ingest"]["batches"] == groups - 1
    _same_tables(tmp_path / "run", without)


def test_a_drain_process_that_dies_leaves_its_batches_to_the_stages(tmp_path: Path, without: Path, pooled: None,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The drain's process is killed (SIGKILL, as the OOM killer does) after row group 2: ingest
    goes on, the broken pool is replaced, the stages run what the drain did not, and the tables
    are unchanged."""
    from replay.runner.pool import _KEPT

    offer = Overlap.offer

    def killing(self: Overlap, key: int, batch: pa.RecordBatch) -> None:
        offer(self, key, batch)
        if key < 2:
            _consumed(self.work)
        elif key == 2:
            for pool in _KEPT.values():
                for pid in list(pool._processes):
                    os.kill(pid, signal.SIGKILL)
            for fut in self.futures:
                try:
                    fut.exception(timeout=30)
                except Exception:  # noqa: BLE001 - waiting for the pool to see its process die
                    pass

    monkeypatch.setattr(Overlap, "offer", killing)
    meta = _audit(tmp_path / "run")
    assert meta["executors"]["during_ingest"]["batches"] == 0  # the dead drain reported nothing
    _same_tables(tmp_path / "run", without)


def test_parts_an_interrupted_ingest_left_are_never_marked_as_this_ingests(tmp_path: Path, without: Path, pooled: None,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An audit interrupted during ingest is resumed (same captures and options: ingest runs
    again). A render part of row group 0 that the interrupted run left (here: one holding no
    rows) is removed before the drains start, so marking this ingest's parts never takes it in;
    row group 0 is not sent to the drain, and its rows come from the render stage."""
    import json

    out = tmp_path / "run"
    cfg = build_config(SPEC.replace(jobs=2))
    files = discover([SAMPLES])
    state = {"fingerprint": audit_mod.audit_fingerprint(files, cfg, None, False, 32 << 20, None), "ingest": None}
    (out / ".parts").mkdir(parents=True)
    (out / ".parts" / "audit.json").write_text(json.dumps(state))
    from replay.tables import TABLES as SCHEMAS

    write_atomic(parts_dir(out, "renders") / part_name(0), SCHEMAS["renders"].empty_table())
    offer = Overlap.offer

    def skip_first(self: Overlap, key: int, batch: pa.RecordBatch) -> None:
        if key:
            offer(self, key, batch)
            _consumed(self.work)

    monkeypatch.setattr(Overlap, "offer", skip_first)
    try:
        meta = audit([SAMPLES], out, cfg).meta
    finally:
        close_pools()
    assert meta["resumed"] is True
    _same_tables(out, without)



def _slow_audit(tmp_path: Path) -> tuple[list[str], Path]:
    """A ``replay audit --jobs 2`` command line on the samples whose ingest sleeps 1 s after
    each row group it offers to the drain (its pool started as for a capture of 8 MiB); its --out."""
    (tmp_path / "run_cli.py").write_text(
        "import sys, time\n"
        "if __name__ == '__main__':  # the spawned pool processes import this file too\n"
        "    import replay.audit, replay.runner.overlap, replay.runner.plan\n"
        "    replay.runner.plan.PRESTART_BYTES = 0\n"
        "    offer = replay.runner.overlap.Overlap.offer\n"
        "    def slow(self, key, batch):\n"
        "        offer(self, key, batch)\n"
        "        time.sleep(1)\n"
        "    replay.runner.overlap.Overlap.offer = slow\n"
        "    from replay.cli import app\n"
        "    sys.argv = ['replay'] + sys.argv[1:]\n"
        "    sys.exit(app())\n")
    out = tmp_path / "run"
    import sys

    return [sys.executable, str(tmp_path / "run_cli.py"), "audit", str(SAMPLES), "--out", str(out), "--jobs", "2",
            "--batch-rows", "4", "-q"], out


def test_sigterm_during_an_overlapping_ingest_leaves_no_work_folder_and_no_process(tmp_path: Path) -> None:
    """``replay audit --jobs 2`` stopped with SIGTERM while ingest writes and the drain runs:
    exit 130 as for Ctrl-C, its work folder (/dev/shm) removed, its pool processes ended; and a
    work folder a SIGKILLed audit left (a dead pid's) is removed by the next audit that runs its
    stages during ingest."""
    import subprocess

    import psutil

    from replay.runner.ingest import _shm_dir

    dead = subprocess.Popen(["true"])
    dead.wait()
    shm = _shm_dir(tmp_path / "run")
    stale = shm / f"replay-stages-{dead.pid}-left"
    stale.mkdir()
    (stale / "0.arrow").write_bytes(b"x")
    cmd, out = _slow_audit(tmp_path)
    try:
        with running(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
            mine = lambda: list(shm.glob(f"replay-stages-{proc.pid}-*"))  # noqa: E731
            wait_for(lambda: list((out / ".parts").glob("renders/part-*.parquet")), 60)
            assert mine() and list((out / ".parts").glob("renders/part-*.parquet")), "the drain never wrote a part"
            assert not stale.exists()
            pool = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
    finally:
        shutil.rmtree(stale, ignore_errors=True)
    assert proc.returncode == 130, err.decode()
    assert b"Traceback" not in err, err.decode()
    assert not mine()
    alive = lambda: [p for p in pool if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]  # noqa: E731
    wait_for(lambda: not alive(), 30, step=0.1)
    assert not alive()


def test_an_audit_without_render_objects_does_not_wait_for_the_pool_to_check_them(tmp_path: Path, pooled: None,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec naming no chat template, tokenizer or renderer (the defaults): the render setup is
    built in the audit's own process (~0.05 s, nothing imported), not checked through the pool's
    first process (``render_check`` waits ~0.6-1 s for it to start, while ingest could run); a
    spec naming a chat template is still checked there."""
    import replay.runner.pool as pool

    asked: list[object] = []
    monkeypatch.setattr(pool, "render_check", lambda spec, jobs: asked.append(spec) or None)
    cfg = build_config(SPEC.replace(jobs=2), load=False)
    plan_mod.setup_render(discover([SAMPLES]), cfg)
    assert asked == [] and not cfg.deferred
    close_pools()
    templated = build_config(RunSpec(batch_rows=4, jobs=2, chat_template=str(SAMPLES / "templates" / "agent-new.jinja")), load=False)
    try:
        plan_mod.setup_render(discover([SAMPLES]), templated)
        assert asked == [templated.spec]
    finally:
        close_pools()
