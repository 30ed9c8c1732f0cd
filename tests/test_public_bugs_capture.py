"""The capture of the public-bug cases (tests/writers/public_bugs.py) is ingested whole and judged
as the bug reports say by the built-in parsers: every parsing case of a known family is an
exchange, and no stream check finds the built-in parser wrong on it (the reports' faulty
releases are judged in tests/test_repro_sglang.py). Skips when ``../shared`` is absent."""

from __future__ import annotations

import duckdb
import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.sql import connect
from strategies import PUBLIC_BUGS
from tests.writers.public_bugs import family_of, model_for_family, read_cases, skipped_cases, write_public_bugs_capture

#: Cases the built-in parsers do not pass yet (tests/test_public_bugs.py marks them xfail).
NOT_DONE = {"B49"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not PUBLIC_BUGS.exists():
        pytest.skip(f"no {PUBLIC_BUGS}")
    tmp = tmp_path_factory.mktemp("public-bugs")
    capture = write_public_bugs_capture(PUBLIC_BUGS, tmp / "public-bugs.jsonl")
    out = tmp / "run"
    got = CliRunner().invoke(app, ["audit", str(capture), "--out", str(out), "--quiet"])
    assert got.exit_code == 0, got.output
    return capture, out


def test_every_parsing_case_is_one_exchange(run):
    capture, out = run
    cases = read_cases(PUBLIC_BUGS)
    skipped = skipped_cases(PUBLIC_BUGS)
    written = [c["id"] for c in cases if c["id"] not in skipped]
    assert skipped["B09"] == "replay has no parser for family 'xlam'"
    assert len(written) == 19 and len(cases) == 26
    con = duckdb.connect()
    rows = con.execute(
        f"SELECT exchange_id, model, server_steps FROM read_parquet('{out / 'exchanges.parquet'}') ORDER BY exchange_id"
    ).fetchall()
    assert [r[0] for r in rows] == sorted(written)
    by_id = {c["id"]: c for c in cases}
    for xid, model, steps in rows:
        inp = by_id[xid]["input"]
        assert list(steps) == inp["chunks"]  # the recorded chunking is the case's
        assert model == model_for_family(family_of(by_id[xid]))  # the model name picks the case's family
    assert con.execute(f"SELECT count(*) FROM read_parquet('{out / 'ingest_errors.parquet'}')").fetchone() == (0,)


def test_the_built_in_parsers_pass_every_case(run):
    """Old and new are the built-in parsers: no stream check finds either wrong on a case (the
    cases the built-in parsers do not pass yet, :data:`NOT_DONE`, left out), under the recorded
    chunking and the whole completion."""
    _, out = run
    con = connect(out)
    wrong = con.execute(
        "SELECT DISTINCT exchange_id, \"check\" FROM verdict_pairs WHERE chunking <> 'render' AND (old_wrong OR new_wrong) ORDER BY ALL"
    ).fetchall()
    assert [w for w in wrong if w[0] not in NOT_DONE] == []
    judged = con.execute("SELECT count(DISTINCT exchange_id) FROM verdict_pairs WHERE chunking = 'recorded'").fetchone()[0]
    assert judged >= 18
