"""DuckDB's limits on every connection replay opens (replay.sql.DuckDBSettings): a memory limit, a
thread cap and a spill folder; past the limit a query spills, and a query that cannot spill fails
with a message naming the setting to raise (issue 9, item 2: `replay query summary` on a 20k run
failed with DuckDB's bare "Out of Memory" before)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from replay import tables
from replay.cli import app
from replay.sql import DEFAULT_MEMORY_LIMIT, DuckDBSettings, QueryError, connect, run_sql, scalar

# 2M distinct keys of ~100 chars (~200 MB) grouped: more than a 40 MB limit holds, so the
# aggregate must spill (the report's queries group by exchange the same way)
GROUP_2M = (
    "SELECT count(*) AS groups, max(c) AS most, max(s) AS last FROM "
    "(SELECT s, count(*) AS c FROM (SELECT repeat('x', 100) || i::VARCHAR AS s FROM range(2000000) t(i)) GROUP BY s)"
)
# one group's list of 1M strings of 100 chars (~100 MB): a list aggregate does not spill
ONE_BIG_LIST = "SELECT length(list(repeat('x', 100) || i::VARCHAR)) AS n FROM range(1000000) t(i)"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A run folder holding an empty exchanges table (all connect() needs)."""
    d = tmp_path / "run"
    d.mkdir()
    pq.write_table(pa.Table.from_batches([], schema=tables.EXCHANGES), d / "exchanges.parquet")
    return d


def _setting(con, name: str) -> object:
    return scalar(con, f"SELECT current_setting('{name}')")


def test_defaults_cap_memory_threads_and_spill_under_the_run(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("REPLAY_DUCKDB_MEMORY", "REPLAY_DUCKDB_THREADS", "REPLAY_DUCKDB_TEMP"):
        monkeypatch.delenv(var, raising=False)
    con = connect(run)
    assert DEFAULT_MEMORY_LIMIT == "256MB"
    assert _setting(con, "memory_limit") == "244.1 MiB"  # DuckDB shows 256 MB (10^6) in MiB
    assert 1 <= int(_setting(con, "threads")) <= 4
    assert _setting(con, "temp_directory") == str(run.resolve() / ".duckdb_tmp")


def test_env_then_option(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAY_DUCKDB_MEMORY", "100MB")
    monkeypatch.setenv("REPLAY_DUCKDB_THREADS", "1")
    monkeypatch.setenv("REPLAY_DUCKDB_TEMP", str(tmp_path / "envtmp"))
    con = connect(run)
    assert (_setting(con, "memory_limit"), _setting(con, "threads"), _setting(con, "temp_directory")) == ("95.3 MiB", 1, str(tmp_path / "envtmp"))
    con = connect(run, DuckDBSettings(memory_limit="1GB", threads=2, temp_directory=str(tmp_path / "opt")))
    assert (_setting(con, "memory_limit"), _setting(con, "threads"), _setting(con, "temp_directory")) == ("953.6 MiB", 2, str(tmp_path / "opt"))


def test_bad_settings_name_the_option(run: Path) -> None:
    with pytest.raises(ValueError, match=r"--duckdb-memory / \$REPLAY_DUCKDB_MEMORY 'lots'"):
        connect(run, DuckDBSettings(memory_limit="lots"))
    with pytest.raises(ValueError, match=r"--duckdb-threads / \$REPLAY_DUCKDB_THREADS"):
        connect(run, DuckDBSettings(threads=0))


def test_a_query_past_the_limit_spills(run: Path, tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    con = connect(run, DuckDBSettings(memory_limit="40MB", threads=1, temp_directory=str(spill)))
    got = run_sql(con, GROUP_2M).to_pylist()
    assert got == [{"groups": 2000000, "most": 1, "last": "x" * 100 + "999999"}]
    assert spill.is_dir()  # DuckDB made its spill folder: it wrote there (it removes it on close)
    con.close()
    assert not spill.exists()
    # the same query with spilling forbidden does not fit: so it was the spill that made it pass
    con = connect(run, DuckDBSettings(memory_limit="40MB", threads=1, temp_directory=str(spill)))
    con.execute("SET max_temp_directory_size = '0KB'")
    with pytest.raises(QueryError, match="--duckdb-memory"):
        run_sql(con, GROUP_2M)


def test_out_of_memory_names_the_setting_to_raise(run: Path, tmp_path: Path) -> None:
    con = connect(run, DuckDBSettings(memory_limit="20MB", threads=1, temp_directory=str(tmp_path / "t")))
    with pytest.raises(QueryError) as info:
        run_sql(con, ONE_BIG_LIST)
    msg = str(info.value)
    assert msg.startswith("DuckDB ran out of memory at replay's limit of 19.0 MiB (1 threads)")
    assert "--duckdb-memory (or $REPLAY_DUCKDB_MEMORY), e.g. --duckdb-memory 64MB" in msg and "--duckdb-threads" in msg
    assert "DuckDB said: Out of Memory Error" in msg
    with pytest.raises(QueryError, match="--duckdb-memory"):
        scalar(con, ONE_BIG_LIST)
    # and raised, it goes through: the same query under a limit that holds it
    con = connect(run, DuckDBSettings(memory_limit="1GB", threads=1))
    assert run_sql(con, ONE_BIG_LIST).to_pylist() == [{"n": 1000000}]


def test_cli_query_out_of_memory_and_option(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPLAY_DUCKDB_MEMORY", raising=False)
    res = CliRunner().invoke(app, ["query", "--run", str(run), "--sql", ONE_BIG_LIST, "--duckdb-memory", "20MB", "--duckdb-threads", "1"])
    assert res.exit_code == 1
    assert "--duckdb-memory" in " ".join(res.output.split())
    monkeypatch.setenv("REPLAY_DUCKDB_MEMORY", "20MB")  # the variable, read by the option
    res = CliRunner().invoke(app, ["query", "--run", str(run), "--sql", ONE_BIG_LIST, "--duckdb-threads", "1", "--format", "json"])
    assert res.exit_code == 1 and "19.0 MiB" in res.output
    res = CliRunner().invoke(app, ["query", "--run", str(run), "--sql", ONE_BIG_LIST, "--duckdb-memory", "1GB", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert '"n": 1000000' in res.output


def test_verdict_pairs_is_computed_once_with_the_same_rows(tmp_path: Path) -> None:
    """The report's queries read verdict_pairs from one temporary table (replay.sql.materialize),
    and that table holds exactly the rows the view gives."""
    from replay.sql import run_query

    sample = Path(__file__).resolve().parent.parent / "samples" / "coding-agent.jsonl"
    res = CliRunner().invoke(app, ["audit", str(sample), "--out", str(tmp_path / "a"), "-q"])
    assert res.exit_code == 0, res.output
    con = connect(tmp_path / "a")
    cols = "exchange_id, \"check\", chunking, old_deltas, new_deltas, old_wrong, new_wrong, old_outcome, new_outcome, verdict, unreliable"
    direct = con.execute(f"SELECT {cols} FROM verdict_pairs ORDER BY ALL").fetchall()
    assert len(direct) > 0 and {r[9] for r in direct} >= {"same-ok", "fixed"}
    by_exchange = con.execute("SELECT * FROM verdicts_by_exchange ORDER BY ALL").fetchall()
    assert len(by_exchange) > 0
    assert scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE temporary") == 0
    verdicts = run_query(con, "verdicts").to_pylist()
    temp = "SELECT list_sort(list(table_name)) FROM duckdb_tables() WHERE temporary"
    assert scalar(con, temp) == ["_verdict_pairs_rows", "_verdicts_by_exchange_rows"]  # verdict_pairs first: the other reads it
    assert con.execute(f"SELECT {cols} FROM _verdict_pairs_rows ORDER BY ALL").fetchall() == direct
    assert con.execute("SELECT * FROM _verdicts_by_exchange_rows ORDER BY ALL").fetchall() == by_exchange
    run_query(con, "smallest_failures")  # reads the same tables: no other one
    assert scalar(con, temp) == ["_verdict_pairs_rows", "_verdicts_by_exchange_rows"]
    assert verdicts == run_query(connect(tmp_path / "a"), "verdicts").to_pylist()


def test_audit_jobs_sets_duckdb_threads_unless_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`replay audit --jobs 1` runs its report on one DuckDB thread (one core in all); an explicit
    `--duckdb-threads` wins; without `--jobs` the default (the CPU count, at most 4) stays."""
    import replay.audit as audit_mod

    seen: list = []
    real = audit_mod.connect

    def spy(run_dir, settings=None):
        seen.append(settings.threads if settings is not None else None)
        return real(run_dir, settings)

    monkeypatch.setattr(audit_mod, "connect", spy)
    monkeypatch.delenv("REPLAY_DUCKDB_THREADS", raising=False)
    capture = Path(__file__).resolve().parents[1] / "samples" / "coding-agent.jsonl"
    for extra, want in ((["--jobs", "1"], 1), (["--jobs", "1", "--duckdb-threads", "3"], 3), ([], None)):
        seen.clear()
        res = CliRunner().invoke(app, ["audit", str(capture), "--out", str(tmp_path / str(len(extra))), "--quiet", *extra])
        assert res.exit_code == 0, res.output
        assert seen and set(seen) == {want}, (extra, seen)
