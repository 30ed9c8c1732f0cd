"""--engine ray (replay.runner.executors.RayEngine): the same stage functions, one Ray task per batch
that reads its rows from the run folder and writes its own parts, write the same rows as the
in-process driver (issue 9, item 6; issue 22, item 4), on a local Ray of 2 CPUs and on a local
cluster of 3 nodes. Skipped when Ray cannot be imported (it is the optional extra `ray`) or
cannot start its cluster."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.stages.stage import RENDER, STREAM
from replay.runner.driver import run_stage
from replay.stages.validate import validate_specs
from replay.runspec import RunSpec, build_config

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
KEYS = {
    "renders": ["exchange_id", "side"],
    "streams": ["exchange_id", "side", "chunking"],
    "calls": ["exchange_id", "side", "chunking", "index"],
}


@pytest.fixture(scope="module")
def ray():
    """One local Ray of 2 CPUs for the module (RayEngine uses a Ray that is already up)."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning")
    yield ray
    ray.shutdown()


def _rows(run: Path, table: str) -> list[dict]:
    t = pq.read_table(run / f"{table}.parquet")
    return t.sort_by([(k, "ascending") for k in KEYS[table]]).to_pylist()


def _ingested(tmp_path: Path, name: str) -> Path:
    run = tmp_path / name
    res = CliRunner().invoke(app, ["ingest", str(SAMPLES / "coding-agent.jsonl"), str(SAMPLES / "model-gateway.jsonl"), "--out", str(run), "-q"])
    assert res.exit_code == 0, res.output
    return run


def test_ray_writes_the_rows_the_local_driver_writes(ray, tmp_path: Path) -> None:
    from replay.runner.executors import RayEngine

    local = _ingested(tmp_path, "local")
    cfg = build_config(RunSpec(batch_rows=16))  # several batches, so the part order matters
    validate_specs(cfg)
    want = {**run_stage(local, RENDER, cfg), **run_stage(local, STREAM, cfg)}
    assert want["renders"] > 0 and want["streams"] > 0 and want["calls"] > 0

    on_ray = tmp_path / "ray"
    shutil.copytree(_ingested(tmp_path, "ray-src"), on_ray)
    engine = RayEngine(num_cpus=2)
    seen: list[int] = []
    got = {**engine.run_stage(on_ray, RENDER, cfg, seen.append), **engine.run_stage(on_ray, STREAM, cfg)}
    engine.close()  # a Ray it did not start is left running
    assert ray.is_initialized()
    assert got == want
    assert sum(seen) == pq.ParquetFile(on_ray / "exchanges.parquet").metadata.num_rows
    for table in KEYS:
        assert _rows(on_ray, table) == _rows(local, table), table
        # and in the same order: Ray keeps the batches in file order
        assert pq.read_table(on_ray / f"{table}.parquet").equals(pq.read_table(local / f"{table}.parquet")), table
    assert not (on_ray / ".parts").exists()


def test_cli_audit_engine_ray(ray, tmp_path: Path) -> None:
    args = [str(SAMPLES / "coding-agent.jsonl"), "-q"]
    res = CliRunner().invoke(app, ["audit", *args, "--out", str(tmp_path / "local")])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["audit", *args, "--out", str(tmp_path / "ray"), "--engine", "ray"])
    assert res.exit_code == 0, res.output
    for table in KEYS:
        assert _rows(tmp_path / "ray", table) == _rows(tmp_path / "local", table), table
    assert (tmp_path / "ray" / "report.md").read_text() .count("\n") > 10


def test_engine_without_a_spec_is_refused(tmp_path: Path) -> None:
    from replay.runner.executors import EngineError, RayEngine
    from replay.runspec import AuditConfig

    with pytest.raises(EngineError, match="RunSpec"):
        RayEngine().run_stage(tmp_path, RENDER, AuditConfig())


def test_the_default_path_does_not_import_ray() -> None:
    """--engine ray imports Ray when asked; `replay audit` without it never pays Ray's import."""
    import subprocess
    import sys

    code = "import sys, replay.cli, replay.audit, replay.stages.stage, replay.runner.driver, replay.runner.executors; assert 'ray' not in sys.modules, 'ray imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1000:]


def _planted(fault: str):
    """The re-stream stage's function with a planted fault on the batch holding ``agent-02``:
    ``raise`` raises (every time), ``exit`` kills the Ray worker process. Defined here, so Ray
    pickles it by value to its workers."""
    from replay.stages.stage import STREAM, Stage

    def function(batch, spec):
        if "agent-02" in batch.column("exchange_id").to_pylist():
            if fault == "raise":
                raise RuntimeError("planted fault")
            import os

            os._exit(3)
        return STREAM.function(batch, spec)

    return Stage(STREAM.name, function, STREAM.columns, STREAM.tables)


@pytest.mark.parametrize("fault, message", [
    ("raise", "WorkerError: the Ray task failed on this batch of 4 exchanges, twice (RuntimeError: planted fault)"),
    ("exit", "WorkerError: the Ray worker process died on this batch of "),
])
def test_a_ray_task_that_fails_costs_its_batch_not_the_audit(ray, tmp_path: Path, fault: str, message: str) -> None:
    """A batch whose function fails twice (a raise, or a dead worker process after Ray's retry)
    gets rows carrying the error, as a pool process that died twice does; every other batch's
    rows are those of the local driver, and the failure is counted for run.json."""
    from replay.runner.executors import RayEngine

    local = _ingested(tmp_path, "local")
    cfg = build_config(RunSpec(batch_rows=4))
    validate_specs(cfg)
    run_stage(local, STREAM, cfg)
    on_ray = _ingested(tmp_path, "ray")
    ids = pq.read_table(on_ray / "exchanges.parquet", columns=["exchange_id"]).column("exchange_id").to_pylist()
    k = ids.index("agent-02") // 4
    bad = set(ids[4 * k : 4 * k + 4])  # the batch of 4 holding agent-02
    engine = RayEngine(num_cpus=2)
    got = engine.run_stage(on_ray, _planted(fault), cfg)
    engine.close()
    rows = _rows(on_ray, "streams")
    want = _rows(local, "streams")
    assert {r["exchange_id"] for r in rows} == {r["exchange_id"] for r in want}
    lost = {r["exchange_id"] for r in rows if (r["error"] or "").startswith("WorkerError")}
    if fault == "raise":  # the batch alone
        assert lost == bad & {r["exchange_id"] for r in want if r["side"] == "old"}
        assert cfg.executor_stats["stream"] == {"engine": "ray", "batches_failed": 1}
    else:  # Ray drops the dead task's whole output: its block may hold more batches than the planted one
        assert bad & {r["exchange_id"] for r in want if r["side"] == "old"} <= lost
        in_lost = [i for i in ids if i in lost or i in bad]
        assert cfg.executor_stats["stream"]["batches_failed"] >= 1
        bad = set(in_lost)
    assert [r for r in rows if r["exchange_id"] not in bad] == [r for r in want if r["exchange_id"] not in bad]
    failed = [r for r in rows if r["exchange_id"] in bad]
    replays = [r for r in failed if r["side"] in ("old", "new")]
    assert replays and all(r["error"].startswith(message) for r in replays), {r["error"] for r in replays}
    assert all(r["error"] is None for r in failed if r["side"] == "reference")  # the built-in reference parse, made where the rows are
    assert got["streams"] == len(rows)


def _cluster_or_skip(nodes: int):
    """A local Ray cluster of ``nodes`` nodes (each its own raylet, 1 CPU, a small object store),
    the driver connected to it; skipped when Ray cannot start one here."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    if ray.is_initialized():  # the module's single-node Ray (fixture `ray`): RayEngine would use it
        ray.shutdown()

    small = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
    try:
        cluster = Cluster(initialize_head=True, head_node_args={**small, "include_dashboard": False})
        for _ in range(nodes - 1):
            cluster.add_node(**small)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, logging_level="warning")
    except Exception as exc:  # noqa: BLE001 - no room for raylets on this machine: skipped, not failed
        pytest.skip(f"Ray could not start a local cluster of {nodes} nodes: {exc}")
    return cluster


def test_ray_workers_write_their_own_parts_on_a_cluster_of_several_nodes(tmp_path: Path) -> None:
    """Issue 22 item 4: on a cluster of 3 nodes, each Ray task reads its batch from the run
    folder and writes its parts itself; the driver gets only small metadata back and joins the
    parts. Every table is the one `--jobs 1` writes (same rows, same order, same bytes)."""
    import os
    import pickle

    import ray

    from replay.runner.executors import RayEngine

    local = _ingested(tmp_path, "local")
    cfg = build_config(RunSpec(batch_rows=4))  # 13 batches of the two captures: spread over the nodes
    validate_specs(cfg)
    want = {**run_stage(local, RENDER, cfg, jobs=1), **run_stage(local, STREAM, cfg, jobs=1)}

    on_ray = _ingested(tmp_path, "ray")  # tmp_path: a path every node of this one machine reads
    cluster = _cluster_or_skip(3)
    try:
        assert len([n for n in ray.nodes() if n["Alive"]]) == 3
        engine = RayEngine()
        got = engine.run_stage(on_ray, RENDER, cfg)
        returned = list(engine.returned)
        got.update(engine.run_stage(on_ray, STREAM, cfg))
        returned += engine.returned
        engine.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert got == want
    n_batches = -(-pq.ParquetFile(on_ray / "exchanges.parquet").metadata.num_rows // 4)
    assert len(returned) == 2 * n_batches and sorted(r["key"] for r in returned) == sorted(list(range(n_batches)) * 2)
    # the batches ran in worker processes, on more than one node, and sent back a few bytes each
    assert all(r["pid"] != os.getpid() for r in returned)
    assert len({r["node"] for r in returned}) >= 2
    assert all(set(r) == {"key", "rows", "exchanges", "failed", "pid", "node"} for r in returned)
    assert max(len(pickle.dumps(r)) for r in returned) < 400
    for name in sorted(p.name for p in local.glob("*.parquet")):
        a, b = pq.read_table(local / name), pq.read_table(on_ray / name)
        keys = [(f.name, "ascending") for f in a.schema if pa.types.is_primitive(f.type) or pa.types.is_string(f.type)]
        assert b.sort_by(keys).to_pylist() == a.sort_by(keys).to_pylist(), name
        assert (on_ray / name).read_bytes() == (local / name).read_bytes(), name
    assert {p.name for p in on_ray.glob("*.parquet")} == {p.name for p in local.glob("*.parquet")}
    assert not (on_ray / ".parts").exists()


def test_ray_resumes_from_the_parts_an_interrupted_run_left(ray, tmp_path: Path) -> None:
    """Parts of the same stage, spec and capture (an interrupted run's) are kept on Ray as on the
    local path: their batches are not run again, and the tables are those of an uninterrupted run."""
    from replay.runner.executors import RayEngine
    from replay.runner.driver import batch_refs, mark_parts, run_ref, stage_fingerprint, write_parts

    local = _ingested(tmp_path, "local")
    cfg = build_config(RunSpec(batch_rows=4))
    validate_specs(cfg)
    run_stage(local, STREAM, cfg, jobs=1)

    run = _ingested(tmp_path, "ray")
    path = run / "exchanges.parquet"
    refs = batch_refs(path, cfg.batch_rows)
    assert len(refs) > 2
    mark_parts(run, STREAM, stage_fingerprint(run, STREAM, cfg))
    for ref in refs[:2]:  # what an interrupted run wrote before it stopped
        write_parts(run, STREAM, ref.key, run_ref(STREAM, path, ref, cfg))
    engine = RayEngine()
    seen: list[int] = []
    engine.run_stage(run, STREAM, cfg, seen.append)
    assert sorted(r["key"] for r in engine.returned) == [ref.key for ref in refs[2:]]
    assert sum(seen) == pq.ParquetFile(path).metadata.num_rows
    for table in STREAM.tables:
        assert (run / f"{table}.parquet").read_bytes() == (local / f"{table}.parquet").read_bytes(), table
    assert not (run / ".parts").exists()
