"""``replay matrix`` (replay/matrix.py, queries/matrix*.sql, replay/report/matrix.py) on the bundled
samples: three sides, the first two run as one pair of the stages and the third with the built-in
partner whose rows are dropped, checked against a two-side ``replay audit`` of the same captures
(its old and new are two of the matrix's sides: each side's per-exchange judgement must be the
same whichever pair and role it ran in), and the sides-file errors.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.matrix import MatrixError, matrix_connect, matrix_sides, pairs
from replay.sql import connect, run_query, run_sql

runner = CliRunner()
SAMPLES = Path(__file__).resolve().parent.parent / "samples"

#: A parser that drops the last call of every Hermes completion when streamed (test_report_html's).
from test_report_html import DROP_LAST  # a parser that drops the last call of every Hermes completion when streamed


def sides_file(d: Path) -> Path:
    (d / "drop_last.py").write_text(DROP_LAST.read_text(encoding="utf-8"), encoding="utf-8")
    f = d / "sides.toml"
    f.write_text(
        '[sides.dump]\nserializer = "model-dump"\n\n'
        f'[sides.droplast]\nparser = "{d / "drop_last.py"}:DropLast"\n\n'
        '[sides.fields]\n',  # no keys: the built-in parsers and the matrix's default serializer, client-fields
        encoding="utf-8",
    )
    return f


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("matrix")
    m = d / "m"
    result = runner.invoke(app, ["matrix", str(SAMPLES), "--sides", str(sides_file(d)), "--out", str(m), "-q"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    a = d / "a"
    result_a = runner.invoke(app, ["audit", str(SAMPLES), "--out", str(a), "-q"])  # model-dump -> client-fields, built-in parsers
    assert result_a.exit_code == 0, result_a.output
    return {"matrix": m, "audit": a, "output": result.output}


def rows(run: Path, names: list[str], baseline: str, query: str) -> list[dict]:
    con = matrix_connect(run, names, baseline)
    try:
        return run_query(con, query).to_pylist()
    finally:
        con.close()


def test_sides_run_two_at_a_time_each_once():
    assert pairs(("a", "b", "c")) == [("a", "b"), ("c", None)]
    assert pairs(("a", "b")) == [("a", "b")]


def test_each_side_is_judged_as_the_audit_judges_it_whatever_its_pair(runs):
    """The audit's old (model-dump) and new (client-fields) are the matrix's `dump` (old of the
    first pair) and `fields` (old of the second pair, beside the built-in partner; it names no
    serializer, and gets client-fields though an audit's old side would get model-dump): their
    rows of view side_states are the same, exchange by exchange and check by check."""
    cols = 'exchange_id, "check", chunkings_judged, wrong, failing_chunkings, smallest_failing_chunking, outcome'

    def states(run: Path, side: str) -> list[tuple]:
        con = connect(run)
        try:
            return [tuple(r.values()) for r in run_sql(con, f"SELECT {cols} FROM side_states WHERE side = '{side}' ORDER BY ALL").to_pylist()]
        finally:
            con.close()

    assert states(runs["matrix"], "dump") == states(runs["audit"], "old")
    assert states(runs["matrix"], "fields") == states(runs["audit"], "new")
    con = connect(runs["matrix"])
    try:  # the built-in partner of `fields` left no row; the reference's rows are there once
        sides = run_sql(con, "SELECT side, count(*) AS n FROM streams GROUP BY side ORDER BY side").to_pylist()
        assert [r["side"] for r in sides] == ["droplast", "dump", "fields", "reference"]
        assert run_sql(con, "SELECT count(*) AS n FROM renders WHERE side = 'reference'").column("n")[0].as_py() == 37
    finally:
        con.close()


def test_the_matrix_table_counts_and_the_readme_numbers(runs):
    got = {(r["check"], r["side"]): (r["wrong"], r["judged"], r["fixed"], r["broke"])
           for r in rows(runs["matrix"], ["dump", "droplast", "fields"], "dump", "matrix")}
    # the README's audit: null-leak 30 fixed and 5 improved (both sides wrong) of 37
    assert got[("null-leak", "dump")] == (35, 37, 0, 0)
    assert got[("null-leak", "fields")] == (5, 37, 30, 0)
    assert got[("null-leak", "droplast")] == (5, 37, 30, 0)
    # DropLast drops the last streamed call of every Hermes completion with a call
    wrong, judged, fixed, broke = got[("dropped-call", "droplast")]
    assert wrong == broke and wrong > 0 and fixed == 0
    assert got[("dropped-call", "dump")][0] == got[("dropped-call", "fields")][0] == 0
    # an audit run read as the matrix of its two sides (the variables unset): old, new
    audit = {(r["check"], r["side"]): (r["wrong"], r["fixed"], r["broke"]) for r in run_query(connect(runs["audit"]), "matrix").to_pylist()}
    assert audit[("null-leak", "old")] == (35, 0, 0) and audit[("null-leak", "new")] == (5, 30, 0)


def test_where_each_fault_appears_and_goes_away(runs):
    faults = rows(runs["matrix"], ["dump", "droplast", "fields"], "dump", "matrix_faults")
    dropped = [f for f in faults if f["check"] == "dropped-call"]
    assert dropped and all(f["appears"] == "droplast" and f["goes_away"] == "fields" and f["wrong_sides"] == ["droplast"]
                           and f["baseline"] == "right" and f["family"] == "hermes" and not f["returns"] for f in dropped)
    leaks = [f for f in faults if f["check"] == "null-leak"]
    assert sum(f["goes_away"] == "droplast" for f in leaks) == 30  # fixed by client-fields
    assert sum(f["goes_away"] is None and f["wrong_sides"] == ["dump", "droplast", "fields"] for f in leaks) == 5
    # the same order read backwards: the fault is then in the last side and goes away nowhere
    back = rows(runs["matrix"], ["fields", "droplast", "dump"], "fields", "matrix_faults")
    assert all(f["appears"] == "droplast" and f["goes_away"] == "dump" for f in back if f["check"] == "dropped-call")


def test_terminal_and_report_md_carry_the_table(runs):
    out = runs["output"]
    assert "check by side (exchanges wrong; baseline dump)" in out
    md = (runs["matrix"] / "report.md").read_text(encoding="utf-8")
    assert "| check | dump | droplast | fields | judged |" in md
    assert "| null-leak | 35 | 5 (-30 +0) | 5 (-30 +0) | 37 |" in md
    meta = json.loads((runs["matrix"] / "run.json").read_text(encoding="utf-8"))
    assert meta["options"]["matrix"]["order"] == ["dump", "droplast", "fields"] and "incomplete" not in meta
    assert not (runs["matrix"] / ".matrix").exists()  # the pairs' work folders are gone


def test_sides_file_errors_name_the_file(tmp_path: Path):
    f = tmp_path / "s.toml"
    f.write_text('[sides.served]\nparser = "hermes"\n', encoding="utf-8")
    with pytest.raises(MatrixError, match=r"s\.toml: \[sides\.served\]"):
        matrix_sides(f)
    f.write_text('[sides.reference]\nparser = "hermes"\n', encoding="utf-8")
    with pytest.raises(MatrixError, match="no side besides the reference"):
        matrix_sides(f)
    f.write_text('[sides.a]\nparser = "hermes"\n[sides.b]\nparser = "hermes"\n', encoding="utf-8")
    with pytest.raises(MatrixError, match=r"--baseline c: no side of that name .* \(sides: a, b\)"):
        matrix_sides(f, "c")
    assert matrix_sides(f, "b").baseline == "b" and matrix_sides(f).names == ("a", "b")
    f.write_text('old = "b"\n[sides.a]\nparser = "hermes"\n[sides.b]\nparser = "hermes"\n', encoding="utf-8")
    with pytest.raises(MatrixError, match="top-level old/new"):
        matrix_sides(f)
    f.write_text('reference = "r"\n[sides.a]\nparser = "hermes"\n[sides.r]\nparser = "hermes"\n[sides.b]\n', encoding="utf-8")
    got = matrix_sides(f)
    assert got.names == ("a", "b") and got.reference is not None and got.reference.parser == "hermes"
    f.write_text('[sides.a]\nparser = "hermes"\n[sides.b]\nparser = "hermes"\n', encoding="utf-8")
    result = runner.invoke(app, ["matrix", str(SAMPLES), "--sides", str(f), "--baseline", "c", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "--baseline c" in result.output


def test_parser_sglang_in_process_is_the_framework_s_parser_per_family(monkeypatch):
    """``parser=sglang`` on a side in the audit's own process: each family gets the class SGLang's
    table gives it (replay.adapters.family_parsers; here a stand-in table, SGLang not being
    installed in this venv), a family the table lacks is an error naming it."""
    import replay.adapters.sglang as sg
    from replay.adapters import AdapterError
    from replay.parsers.hermes import HermesParser
    from replay.stages.context import ParserResolver
    from replay.runspec import build_config, spec_from_options

    class Stand(HermesParser):
        pass

    monkeypatch.setattr(sg, "family_adapters", lambda: {"hermes": Stand})
    cfg = build_config(spec_from_options(old_parser="sglang"), load=False)
    resolver = ParserResolver(cfg)
    assert resolver.sides("hermes").old is Stand
    assert resolver.sides("hermes").new is HermesParser and resolver.sides("hermes").reference is HermesParser
    with pytest.raises(AdapterError, match="no tool parser for the kimi_k2 family .*it has: hermes"):
        resolver.sides("kimi_k2")


def test_parser_sglang_without_sglang_says_so(tmp_path: Path):
    result = runner.invoke(app, ["audit", str(SAMPLES / "coding-agent.jsonl"), "--out", str(tmp_path / "r"), "-q", "--old", "parser=sglang"])
    assert result.exit_code != 0
    text = " ".join(result.output.split())
    assert "parser sglang: sglang is not installed" in text, text


def test_a_bad_side_fails_before_any_work_naming_it(tmp_path: Path):
    f = tmp_path / "s.toml"
    f.write_text('[sides.a]\nparser = "hermes"\n[sides.b]\nserializer = "bogus"\n', encoding="utf-8")
    out = tmp_path / "r"
    result = runner.invoke(app, ["matrix", str(SAMPLES / "coding-agent.jsonl"), "--sides", str(f), "--out", str(out), "-q"])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert line.startswith(f"error: --sides {f} [sides.b] serializer bogus: unknown"), line
    assert not (out / "exchanges.parquet").exists()  # nothing ingested


def test_query_matrix_on_a_matrix_run_reads_its_recorded_order(runs):
    result = runner.invoke(app, ["query", "matrix", "--run", str(runs["matrix"]), "--format", "json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.output)
    assert [r["side"] for r in got if r["check"] == "null-leak"] == ["dump", "droplast", "fields"]
    assert [(r["wrong"], r["fixed"]) for r in got if r["check"] == "null-leak"] == [(35, 0), (5, 30), (5, 30)]


def test_replay_report_rewrites_a_matrix_run_s_own_report(runs, tmp_path: Path):
    import shutil

    run = tmp_path / runs["matrix"].name  # the page's title names the run folder
    shutil.copytree(runs["matrix"], run)
    before = {n: (run / n).read_text(encoding="utf-8") for n in ("report.md", "report.html")}
    for n in before:
        (run / n).unlink()
    result = runner.invoke(app, ["report", "--run", str(run)])
    assert result.exit_code == 0, result.output
    assert "| null-leak | 35 | 5 (-30 +0) | 5 (-30 +0) | 37 |" in result.output
    after = {n: (run / n).read_text(encoding="utf-8") for n in before}
    assert after["report.md"] == before["report.md"]
    assert after["report.html"] == before["report.html"]


def test_replay_show_on_a_matrix_run_says_where_its_exchanges_are(runs):
    result = runner.invoke(app, ["show", "agent-01", "--run", str(runs["matrix"])])
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "is a replay matrix run: replay show reads an audit's old and new sides" in text and "matrix_exemplars" in text
