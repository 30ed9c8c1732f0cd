"""--engine ray (replay.executors.RayEngine): the same stage functions on Ray Data write the same
rows as the in-process driver (issue 9, item 6), on a local Ray of 2 CPUs. Skipped when Ray Data
cannot be imported (it is the optional extra `ray`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.pipeline import RENDER, STREAM, run_stage, validate_specs
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
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning")
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
    from replay.executors import RayEngine

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
    from replay.executors import EngineError, RayEngine
    from replay.pipeline import AuditConfig

    with pytest.raises(EngineError, match="RunSpec"):
        RayEngine().run_stage(tmp_path, RENDER, AuditConfig())


def test_the_default_path_does_not_import_ray() -> None:
    """--engine ray imports Ray when asked; `replay audit` without it never pays Ray's import."""
    import subprocess
    import sys

    code = "import sys, replay.cli, replay.audit, replay.pipeline, replay.executors; assert 'ray' not in sys.modules, 'ray imported'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1000:]
