"""``replay matrix``, ``replay repro`` and the commands that read a run, given what a new user gets
wrong or leaves half done: the report's ingest accounting, a repro asked of a matrix run, a sides
file's errors naming the file, and the hint for a matrix run stopped midway.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from test_report_html import DROP_LAST

runner = CliRunner()
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def matrix_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("matrix-inputs")
    f = d / "sides.toml"
    f.write_text('[sides.dump]\nserializer = "model-dump"\n\n[sides.fields]\n', encoding="utf-8")
    run = d / "m"
    result = runner.invoke(app, ["matrix", str(SAMPLES), "--sides", str(f), "--out", str(run), "-q"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return run


def test_report_md_accounts_for_every_ingested_line_as_the_audit_does(matrix_run):
    """44 lines, 45 records (an OTLP line holds several spans), 5 errors by reason, 2 skipped:
    the README's sample numbers, not the record count written as lines."""
    md = (matrix_run / "report.md").read_text(encoding="utf-8")
    line = next(x for x in md.splitlines() if x.startswith("Ingested"))
    assert line.startswith(
        "Ingested 44 lines, 45 records: 38 exchanges, 5 errors (bad-json: 1, missing-request: 1, not-object: 1, "
        "not-utf8: 1, tools-not-list: 1), 2 skipped (not an LLM exchange); first: `"
    ), line
    assert "malformed.jsonl:2 bad-json" in line


def test_repro_on_a_matrix_run_says_it_reads_an_audit_s_sides(matrix_run):
    """A matrix run has named sides and no old/new: repro refuses it in one line naming them,
    not "the old side does not fail", which reads as if the exchange passed."""
    result = runner.invoke(app, ["repro", str(matrix_run), "agent-01", "--check", "dropped-call"])
    assert result.exit_code == 1, result.output
    text = one_line(result.output)
    assert f"{matrix_run} is a replay matrix run (sides dump, fields): replay repro reads an audit's old and new sides" in text, text
    assert "does not fail" not in text


@pytest.mark.parametrize("stage", ["sides dump, fields", "report"])
def test_a_matrix_run_stopped_midway_is_sent_back_to_replay_matrix(matrix_run, tmp_path, stage):
    """A matrix run left by Ctrl-C: report and query refuse it and say to run ``replay matrix``
    again with --force (``replay audit`` does not resume it; in its report stage the sides' tables
    are being merged, so ``replay report`` cannot finish it either)."""
    import shutil

    run = tmp_path / "m"
    shutil.copytree(matrix_run, run)
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    meta["incomplete"] = stage
    (run / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    before = (run / "report.md").read_text(encoding="utf-8")
    for args in (["report", "--run", str(run)], ["query", "matrix", "--run", str(run)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, result.output
        text = one_line(result.output)
        assert f"stopped during {stage} (interrupted?): its tables are incomplete; run `replay matrix` again with --force" in text, text
        assert "replay audit" not in text and "finish it" not in text
    assert (run / "report.md").read_text(encoding="utf-8") == before


def test_a_side_whose_interpreter_is_missing_names_the_sides_file_and_table(tmp_path):
    f = tmp_path / "releases.toml"
    missing = tmp_path / "no-venv" / "bin" / "python"
    f.write_text(f'[sides.a]\nparser = "hermes"\n\n[sides."0.5.8"]\npython = "{missing}"\n', encoding="utf-8")
    out = tmp_path / "r"
    result = runner.invoke(app, ["matrix", str(SAMPLES / "coding-agent.jsonl"), "--sides", str(f), "--out", str(out), "-q"])
    assert result.exit_code == 1, result.output
    text = one_line(result.output)
    assert text.startswith(f"error: --sides {f} [sides.0.5.8] python {missing}: cannot run it"), text
    assert not (out / "exchanges.parquet").exists()  # nothing ingested


def test_matrix_help_speaks_of_sides_not_old_and_new_and_fits_80_columns():
    """A matrix has no old/new roles: its --help says what a shared option does to its sides."""
    result = runner.invoke(app, ["matrix", "--help"], env={"COLUMNS": "80", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    assert "old and new" not in one_line(result.output)
    assert "--renderer SPEC Renderer of every side that names none" in one_line(result.output)
    assert max(len(line) for line in result.output.splitlines()) <= 80


def test_queries_of_an_audit_s_old_and_new_are_refused_on_a_matrix_run(matrix_run):
    """On a matrix run (sides dump, fields) the queries that read the sides old/new by name would
    print empty tables or every exchange not-judged; they are refused in one line, and every query
    let through reads the matrix's own sides (no row of a side old or new)."""
    from replay.sql import list_queries

    refused, allowed = set(), {}
    for name in list_queries():
        result = runner.invoke(app, ["query", name, "--run", str(matrix_run), "--format", "json"])
        if result.exit_code == 1:
            assert one_line(result.output).startswith(
                f"error: {matrix_run} is a replay matrix run (sides dump, fields): query {name} reads an audit's old and new sides"), result.output
            refused.add(name)
        else:
            assert result.exit_code == 0, (name, result.output)
            allowed[name] = json.loads(result.output)
    assert {"summary", "verdicts", "verdict_exchanges", "dropped_calls", "render_failures", "divergent_prompts", "fidelity"} <= refused
    assert {"matrix", "matrix_faults", "matrix_exemplars", "null_leaks", "ingest_errors", "served_checks"} <= set(allowed)
    for name, rows in allowed.items():
        assert not [r for r in rows if r.get("side") in ("old", "new")], name
    assert [(r["side"], r["wrong"]) for r in allowed["matrix"] if r["check"] == "null-leak"] == [("dump", 35), ("fields", 5)]



def test_an_audit_run_answers_the_queries_a_matrix_run_refuses(tmp_path):
    run = tmp_path / "a"
    assert runner.invoke(app, ["audit", str(SAMPLES / "coding-agent.jsonl"), "--out", str(run), "-q"]).exit_code == 0
    result = runner.invoke(app, ["query", "verdicts", "--run", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    got = {r["check"]: r for r in json.loads(result.output)}
    assert (got["null-leak"]["fixed"], got["null-leak"]["exchanges"], got["null-leak"]["not-judged"]) == (7, 7, 0)


@pytest.mark.parametrize("name", ["a, b", "", " a", "a\\tb"])
def test_a_side_name_the_report_cannot_list_is_refused_naming_the_file(tmp_path, name):
    """Side names are columns and items of "a, b, c" lists: "a, b" would read as two sides in
    `wrong on`, "" as a blank column."""
    f = tmp_path / "s.toml"
    f.write_text(f'[sides."{name}"]\nserializer = "model-dump"\n\n[sides.b]\n', encoding="utf-8")
    out = tmp_path / "r"
    result = runner.invoke(app, ["matrix", str(SAMPLES / "coding-agent.jsonl"), "--sides", str(f), "--out", str(out), "-q"])
    assert result.exit_code == 2, result.output
    text = one_line(result.output)
    assert text.startswith(f"error: --sides {f}: [sides.{json.dumps(name.replace(chr(92) + 't', chr(9)))}]: a side's name is a column"), text
    assert not (out / "exchanges.parquet").exists()


def test_a_pipe_in_a_side_name_keeps_report_md_a_table(tmp_path):
    """A side named x|y (allowed) is escaped in the table's header as in its cells, so the table
    pastes with one column per side."""
    f = tmp_path / "s.toml"
    f.write_text('[sides."x|y"]\nserializer = "model-dump"\n\n[sides.b]\n', encoding="utf-8")
    out = tmp_path / "r"
    result = runner.invoke(app, ["matrix", str(SAMPLES / "coding-agent.jsonl"), "--sides", str(f), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text(encoding="utf-8").splitlines()
    header = md.index("| check | x\\|y | b | judged |")
    assert md[header + 1] == "|---|---|---|---|"
    assert "| null-leak | 7 | 0 (-7 +0) | 7 |" in md
    assert "| null-leak | agent-01 | hermes | x\\|y | b | x\\|y |" in md


def test_a_matrix_of_one_side_says_so_in_words(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[sides.only]\nserializer = "model-dump"\n', encoding="utf-8")
    out = tmp_path / "r"
    result = runner.invoke(app, ["matrix", str(SAMPLES / "coding-agent.jsonl"), "--sides", str(f), "--out", str(out), "-q"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "1 side, only: no other side to compare it with." in md and "1 sides" not in md
    assert "1 side, only: no other side to compare it with." in one_line(result.output)
    assert "| null-leak | 7 | 7 |" in md


@pytest.mark.parametrize("url, why", [("http://127.0.0.1:notaport", "Port could not be cast to integer value as 'notaport'"),
                                      ("http://127.0.0.1:99999", "Port out of range 0-65535")])
def test_a_server_url_the_http_client_refuses_is_one_line_before_any_work(tmp_path, url, why):
    """It was a traceback from inside the render stage (httpx.InvalidURL), the run folder left
    half written."""
    from replay.render.http_tokenize import parse_spec

    with pytest.raises(ValueError, match=f"expected http://HOST:PORT\\[/PATH\\]\\[\\?OPTIONS\\]: {why}"):
        parse_spec(url)
    f = tmp_path / "s.toml"
    f.write_text(f'[sides.a]\n\n[sides.srv]\nrenderer = "{url}"\n', encoding="utf-8")
    out = tmp_path / "r"
    result = runner.invoke(app, ["matrix", str(SAMPLES / "coding-agent.jsonl"), "--sides", str(f), "--out", str(out), "-q"])
    assert result.exit_code == 1, result.output
    assert one_line(result.output) == f"error: --sides {f} [sides.srv] renderer {url}: expected http://HOST:PORT[/PATH][?OPTIONS]: {why}"
    assert not out.exists()


def test_render_failures_are_said_with_their_reason_per_side(tmp_path):
    """A side that cannot render (here a template that raises; an unreachable server alike) is
    named with its reason in report.md and the terminal; a reference that cannot render says
    why the render checks judged nothing (the table alone showed 0 wrong, 0 judged)."""
    boom = tmp_path / "boom.jinja"
    boom.write_text("{{ raise_exception('boom') }}", encoding="utf-8")
    f = tmp_path / "s.toml"
    f.write_text(f'[sides.a]\n\n[sides.b]\nchat_template = "{boom}"\n', encoding="utf-8")
    out = tmp_path / "r"
    result = runner.invoke(app, ["matrix", str(SAMPLES / "coding-agent.jsonl"), "--sides", str(f), "--out", str(out), "-q"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    said = "Render failures, b: 7 exchanges; `rejected by the template: boom` (7, e.g. `agent-01`)."
    assert f"- {said}" in (out / "report.md").read_text(encoding="utf-8").splitlines()
    assert said in one_line(result.output) and "Render failures, a" not in result.output
    assert "| render-failure | 0 | 7 (-0 +7) | 7 |" in (out / "report.md").read_text(encoding="utf-8")

    f.write_text(f'[sides.a]\n\n[sides.b]\n\n[sides.reference]\nchat_template = "{boom}"\n', encoding="utf-8")
    out = tmp_path / "r2"
    result = runner.invoke(app, ["matrix", str(SAMPLES / "coding-agent.jsonl"), "--sides", str(f), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "- Render failures, reference: 7 exchanges; `rejected by the template: boom` (7, e.g. `agent-01`)." in md
    assert "- 7 exchanges the reference could not render: no side is judged on them by null-leak, prompt-divergence and render-failure." in md
    assert "| render-failure | 0 | 0 | 0 |" in md


@pytest.mark.parametrize("command", ["render", "stream"])
def test_render_and_stream_refuse_a_matrix_run_and_leave_it_whole(matrix_run, tmp_path, command):
    """They rewrote the renders (streams) table with old/new rows and report.md with an audit's:
    the matrix then counted 0 wrong, 0 judged on every side."""
    import shutil

    run = tmp_path / "m"
    shutil.copytree(matrix_run, run)
    before = {n: (run / n).read_bytes() for n in ("renders.parquet", "streams.parquet", "calls.parquet", "report.md")}
    result = runner.invoke(app, [command, "--run", str(run), "-q"])
    assert result.exit_code == 1, result.output
    assert one_line(result.output).startswith(
        f"error: {run} is a replay matrix run (sides dump, fields): replay {command} writes an audit's old and new sides"), result.output
    assert {n: (run / n).read_bytes() for n in before} == before
    got = json.loads(runner.invoke(app, ["query", "matrix", "--run", str(run), "--format", "json"]).output)
    assert [(r["side"], r["wrong"], r["judged"]) for r in got if r["check"] == "null-leak"] == [("dump", 35, 37), ("fields", 5, 37)]


def test_ctrl_c_in_the_report_stage_says_the_run_is_incomplete(tmp_path, monkeypatch):
    """A Ctrl-C while DuckDB runs the report's queries arrives as duckdb.InterruptException: it
    ended in the generic "interrupted: replay matrix stopped", not saying the folder is incomplete."""
    import duckdb

    import replay.report.matrix

    def interrupted(*args, **kwargs):  # as the report's first DuckDB query would raise it
        raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")

    monkeypatch.setattr(replay.report.matrix, "write_matrix_report", interrupted)
    f = tmp_path / "s.toml"
    f.write_text('[sides.a]\n\n[sides.b]\nserializer = "model-dump"\n', encoding="utf-8")
    out = tmp_path / "r"
    result = runner.invoke(app, ["matrix", str(SAMPLES / "coding-agent.jsonl"), "--sides", str(f), "--out", str(out), "-q"])
    assert result.exit_code == 130, result.output
    assert one_line(result.output) == f"error: interrupted: {out} is incomplete (run.json says so); run the matrix again with --force"
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["incomplete"] == "report"


@pytest.fixture()
def canned_server():
    """A server answering every POST with one JSON body (set ``server.body``); yields its URL base."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = self.server.body.encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.body = "{}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("body, why", [('{"tokens": [], "token_strs": []}', '"tokens" is empty'),
                                       ('{"tokens": [1, true], "token_strs": ["a", "b"]}', '"tokens": a list of integers 0 or more'),
                                       ('{"tokens": [5, -1], "token_strs": ["a", "b"]}', '"tokens": a list of integers 0 or more')])
def test_a_server_answer_without_usable_ids_is_an_error_on_every_side_it_tokenizes(tmp_path, canned_server, body, why):
    """An empty id list was taken as the prompt (0 tokens on every side: prompt-divergence
    same-ok everywhere); a `true` among the ids was refused for the server side's render but taken
    for the other sides' texts tokenized on the same server."""
    from replay.render.http_tokenize import TokenizeError, token_ids

    canned_server.body = body
    url = f"http://127.0.0.1:{canned_server.server_address[1]}"
    with pytest.raises(TokenizeError, match=why):
        token_ids(json.loads(body), url, empty_ok=False)
    assert token_ids({"tokens": []}, url, empty_ok=True) == []
    run = tmp_path / "a"
    result = runner.invoke(app, ["audit", str(SAMPLES / "coding-agent.jsonl"), "--out", str(run), "-q",
                                 "--new", f"renderer={url}?retries=0,preparer=as-sent,serializer=as-sent"])
    assert result.exit_code == 0, result.output
    got = json.loads(runner.invoke(app, ["query", "--run", str(run), "--format", "json", "--sql",
                                         "SELECT side, count(*) AS n, count(*) FILTER (WHERE error LIKE '%' || $$" + why + "$$ || '%') AS why "
                                         "FROM renders GROUP BY side ORDER BY side"]).output)
    assert got == [{"side": s, "n": 7, "why": 7} for s in ("new", "old", "reference")]


def test_repro_when_the_run_s_interpreter_is_gone_is_one_line_naming_the_side(tmp_path):
    """The new side ran in another interpreter (here a link to this one), since deleted: repro
    ended in a traceback of SideError naming --old-python (the slot the tested side sits in)."""
    import os
    import sys

    plugin = tmp_path / "drop_last.py"
    plugin.write_text(DROP_LAST.read_text(encoding="utf-8"), encoding="utf-8")
    py = tmp_path / "py"
    os.symlink(sys.executable, py)
    run = tmp_path / "a"
    result = runner.invoke(app, ["audit", str(SAMPLES / "coding-agent.jsonl"), "--out", str(run), "-q",
                                 "--new", f"python={py},parser={plugin}:DropLast"])
    assert result.exit_code == 0, result.output
    py.unlink()
    result = runner.invoke(app, ["repro", str(run), "agent-01", "--check", "dropped-call", "--max-seconds", "5"])
    assert result.exit_code == 1, result.output
    assert one_line(result.output).startswith(
        f"replay repro: the new side's python {py} (as the run recorded it): cannot run it"), result.output
    assert not (run / "repro").exists()


def test_the_terminal_accounts_for_the_ingested_lines_too(tmp_path):
    """Five of malformed.jsonl's six lines are errors: the terminal said nothing of them."""
    f = tmp_path / "s.toml"
    f.write_text('[sides.a]\n\n[sides.b]\nserializer = "model-dump"\n', encoding="utf-8")
    result = runner.invoke(app, ["matrix", str(SAMPLES / "malformed.jsonl"), "--sides", str(f), "--out", str(tmp_path / "r"), "-q"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert ("Ingested 6 lines: 1 exchange, 5 errors (bad-json: 1, missing-request: 1, not-object: 1, not-utf8: 1, tools-not-list: 1); "
            "first: `") in one_line(result.output)


def test_repro_of_a_run_given_by_a_relative_path_proves_its_test(tmp_path, monkeypatch):
    """`replay repro runs/x ID` as the docs write it: pytest ran in the test's folder with the
    file's relative path, found nothing there (exit 4) and the proof failed: "not written"."""
    plugin = tmp_path / "drop_last.py"
    plugin.write_text(DROP_LAST.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["audit", str(SAMPLES / "coding-agent.jsonl"), "--out", "runs/a", "-q", "--new", f"parser={plugin}:DropLast"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["repro", "runs/a", "agent-01", "--check", "dropped-call", "--max-seconds", "20"])
    assert result.exit_code == 0, result.output
    text = one_line(result.output)
    assert "on the broken side (" in text and "fails (1 of 1 tests)" in text and "on the fixed side (built-in in this interpreter): passes (1 tests)" in text
    assert sorted(p.name for p in (tmp_path / "runs/a/repro").glob("*.py")) == [
        "test_repro_agent_01_dropped_call.py", "test_repro_agent_01_dropped_call_protocol.py"]


@pytest.fixture(scope="module")
def dropping_audit(tmp_path_factory) -> Path:
    """An audit whose new side (a plugin dropping each completion's last call) fails dropped-call."""
    d = tmp_path_factory.mktemp("dropping")
    plugin = d / "drop_last.py"
    plugin.write_text(DROP_LAST.read_text(encoding="utf-8"), encoding="utf-8")
    run = d / "a"
    result = runner.invoke(app, ["audit", str(SAMPLES / "coding-agent.jsonl"), "--out", str(run), "-q", "--new", f"parser={plugin}:DropLast"])
    assert result.exit_code == 0, result.output
    return run


def test_repro_refuses_a_run_left_incomplete(dropping_audit, tmp_path):
    import shutil

    run = tmp_path / "a"
    shutil.copytree(dropping_audit, run)
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    meta["incomplete"] = "re-stream"
    (run / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    result = runner.invoke(app, ["repro", str(run), "agent-01", "--check", "dropped-call", "--max-seconds", "5"])
    assert result.exit_code == 1, result.output
    assert one_line(result.output) == (f"replay repro: {run}: the command that wrote this run stopped during re-stream (interrupted?): "
                                       "its tables are incomplete; run it again to the end, then repro")
    assert not (run / "repro").exists()


def test_repro_out_that_is_a_file_is_one_line(dropping_audit, tmp_path):
    out = tmp_path / "taken"
    out.write_text("x", encoding="utf-8")
    result = runner.invoke(app, ["repro", str(dropping_audit), "agent-01", "--check", "dropped-call", "--max-seconds", "5", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert one_line(result.output) == f"replay repro: {out}: File exists"
