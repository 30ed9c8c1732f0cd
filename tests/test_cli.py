"""The command line without rough edges: help read at 80 columns is never cut, every bad option
value exits 2 before any work with one line naming the option and what it accepts (filter values
that would silently do nothing, unknown side names, a bad DuckDB memory limit, `replay query`
without a name), a template file that is not text is one line naming its option, `--quiet` is
explained everywhere, an existing run is not overwritten by `ingest` without `--force`, and the
commands README.md and docs/ show run as written (quoted `--fail-on` thresholds, no `--out`
collision)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from replay.cli import app
from sides_data import ROOT, SAMPLES, write_capture

runner = CliRunner()
AGENT = SAMPLES / "coding-agent.jsonl"
COMMANDS = [c.name or c.callback.__name__ for c in app.registered_commands]


def help_at(width: int, *args: str) -> str:
    result = runner.invoke(app, [*args, "--help"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_listed():
    assert set(COMMANDS) >= {"audit", "ingest", "render", "stream", "query", "report", "formats", "show"}


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_at_80_columns_is_wrapped_not_cut(command):
    text = help_at(80, *([command] if command else []))
    shown = text
    for nargs in ("[ARGS]...", "{paths}...", "paths...", "PATHS..."):  # click's marks of repeatable arguments
        shown = shown.replace(nargs, "")
    assert "…" not in shown and "..." not in shown, text
    assert max(len(line) for line in text.splitlines()) <= 80, text
    if command == "audit":  # the texts rich cut at 80 columns
        flat = " ".join(text.split()).replace("- ", "-")  # click breaks lines after a hyphen
        assert "(e.g. broken, 'dropped-call:broken>0', 'null-leak:still-wrong>10': quote a >)" in flat
        assert "recorded,whole,char,fixed-2,3,5,8,13,40, token with --tokenizer, and split-all" in flat  # the non-built-in default


@pytest.mark.parametrize("command", [c for c in COMMANDS if c in ("audit", "ingest", "render", "stream")])
def test_quiet_is_explained(command):
    flat = " ".join(help_at(100, command).split())
    assert "-q, --quiet No progress bar" in flat


BAD = [
    (["--replay-timeout", "abc"], "Invalid value for '--replay-timeout': 'abc' is not a number of seconds >= 0 (0: no limit)"),
    (["--replay-timeout", "-1"], "Invalid value for '--replay-timeout': '-1' is not a number of seconds >= 0"),
    (["--chunkings", "bogus"], "Invalid value for '--chunkings': unknown chunking 'bogus'; expected comma-separated names: recorded, whole,"),
    (["--chunkings", ""], "Invalid value for '--chunkings': empty; expected comma-separated names"),
    (["--chunkings", "whole,,char"], "Invalid value for '--chunkings': 'whole,,char' has an empty name"),
    (["--chunkings", "token"], "Invalid value for '--chunkings': the token chunking needs --tokenizer"),
    (["--capture-format", "xml"], "Invalid value for '--capture-format': unknown format 'xml'; one of: v1, sse, body, openai-batch, har,"),
    (["--date", "2026-13-45"], "Invalid value for '--date': '2026-13-45': not a calendar date (month must be in 1..12)"),
    (["--max-line-bytes", "0"], "Invalid value for '--max-line-bytes'"),
    (["--fail-on", "nope:broken"], "--fail-on 'nope:broken': unknown check 'nope'"),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_option_value_exits_2_in_one_line_before_any_work(tmp_path: Path, args: list[str], message: str):
    capture = write_capture(tmp_path / "cap" / "c.jsonl", [["read"]])
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", str(capture), "--out", str(out), "-q", *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert result.stdout == "" and not out.exists()


@pytest.mark.parametrize(
    ("command", "args", "option"),
    [
        ("ingest", ["--capture-format", "xml"], "--capture-format"),
        ("stream", ["--chunkings", ""], "--chunkings"),
        ("stream", ["--replay-timeout", "x"], "--replay-timeout"),
        ("render", ["--date", "2026-02-30"], "--date"),
        ("query", ["summary", "--format", "xml"], "--format"),
    ],
)
def test_the_other_commands_refuse_the_same_way(tmp_path: Path, command: str, args: list[str], option: str):
    target = ["--run", str(tmp_path / "none")] if command != "ingest" else [str(tmp_path), "--out", str(tmp_path / "o")]
    result = runner.invoke(app, [command, *target, *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and option in lines[0], result.stderr
    assert not (tmp_path / "o").exists()


def test_ingest_refuses_an_existing_run_without_force(tmp_path: Path):
    first = write_capture(tmp_path / "a" / "c.jsonl", [["read"], ["bash"]])
    second = write_capture(tmp_path / "b" / "c.jsonl", [["read"]])
    out = tmp_path / "run"
    assert runner.invoke(app, ["audit", str(first), "--out", str(out), "-q"]).exit_code == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.is_file()}
    result = runner.invoke(app, ["ingest", str(second), "--out", str(out), "-q"])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    # other captures than the run's: which ones (tests/test_run_folder.py has the same captures' refusal)
    assert line == (f"error: --out {out} holds a run of other captures than these ({second} added; {first} removed); "
                    "give --force to replace it with a run of these captures, or another --out")
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.is_file()} == before
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    result = runner.invoke(app, ["ingest", str(second), "--out", str(out), "-q", "--force"])
    assert result.exit_code == 0, result.output
    # the old run's renders/streams are gone with it: they belonged to other exchanges
    assert sorted(p.name for p in out.iterdir()) == ["exchanges.parquet", "ingest_errors.parquet", "notes.txt", "run.json", "tools.parquet"]
    assert runner.invoke(app, ["ingest", str(second), "--out", str(tmp_path / "fresh"), "-q"]).exit_code == 0


def test_usage_errors_are_typer_bad_parameters():
    """The one-line display covers typer's BadParameter (raised by the option callbacks)."""
    from replay.cli import _OneLineErrors

    assert issubclass(typer.BadParameter, _OneLineErrors._usage)


@pytest.mark.parametrize(
    "option, content, name, says",
    [
        ("--chat-template", b"\x89PNG\r\n\x1a\n\xff\xfe\x00binary", "t.jinja", "not UTF-8 text"),
        ("--new-chat-template", b"\xff\xfe\xfd", "t.jinja", "not UTF-8 text"),
        ("--old-chat-template", b"{not json", "tokenizer_config.json", "not JSON"),
        ("--chat-template", b"[1, 2]", "tokenizer_config.json", "no chat_template string"),
    ],
)
def test_template_file_that_is_not_text_is_one_line_naming_the_option(tmp_path: Path, option: str, content: bytes, name: str, says: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    # a side's template in the side value (--new chat_template=PATH); the error names the earlier flag
    args = [option, str(path)] if option == "--chat-template" else [f"--{option.split('-')[2]}", f"chat_template={path}"]
    result = runner.invoke(app, ["audit", str(AGENT), "--out", str(tmp_path / "run"), "-q", *args])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    line = result.output.strip()
    assert "\n" not in line and line.startswith(f"error: {option} {path}") and says in line, line


@pytest.mark.parametrize(
    "args, option",
    [
        (["--sample", "0.5", "--sample-key", "bogus_col"], "--sample-key"),
        (["--model", ""], "--model"),
        (["--model", "Qwen/*", "--model", "  "], "--model"),
    ],
)
@pytest.mark.parametrize("command", ["audit", "ingest"])
def test_filter_values_that_would_silently_do_nothing_are_usage_errors(tmp_path: Path, command: str, args: list[str], option: str) -> None:
    run = tmp_path / "run"
    result = runner.invoke(app, [command, str(AGENT), "--out", str(run), "-q", *args])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and line.startswith(f"error: Invalid value for '{option}': "), line
    assert not (run / "exchanges.parquet").exists()


def test_good_sample_keys_still_sample(tmp_path: Path) -> None:
    for key in ("model", "exchange_id", "request.metadata.session_id"):
        result = runner.invoke(app, ["ingest", str(AGENT), "--out", str(tmp_path / key), "-q", "--sample", "0.5", "--sample-key", key])
        assert result.exit_code == 0, result.output


def test_query_without_a_name_or_sql_says_what_is_missing(tmp_path: Path) -> None:
    """`replay query --run RUN` alone said "give a query NAME or --sql, not both"."""
    result = runner.invoke(app, ["query", "--run", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip() == "error: give a query NAME or --sql (replay query --list shows the names)"
    both = runner.invoke(app, ["query", "summary", "--sql", "SELECT 1", "--run", str(tmp_path)])
    assert both.exit_code == 2 and "not both" in both.output


def _user_guide() -> str:
    """README.md (the front page) and every page of docs/, joined: the commands a user copies."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


def test_readme_and_help_quote_fail_on_thresholds() -> None:
    """The README's `--fail-on dropped-call:broken>0` unquoted is a shell redirection: run as
    written it creates files `0` and `10` and gates on `dropped-call:broken` instead."""
    import re

    readme = _user_guide()
    commands = [ln for ln in readme.splitlines() if ln.lstrip().startswith(("replay ", "$ replay "))]
    assert any("--fail-on" in ln for ln in commands)
    for ln in commands:
        for expr in re.findall(r"--fail-on\s+(\S+)", ln):
            assert ">" not in expr or expr[0] in "'\"", ln
    help_text = runner.invoke(app, ["report", "--help"], env={"COLUMNS": "200"}).output
    assert "--fail-on dropped-call:broken>0" not in help_text


@pytest.mark.parametrize("how", ["option", "env"])
def test_bad_duckdb_memory_is_a_usage_error_before_any_work(tmp_path: Path, how: str) -> None:
    """`--duckdb-memory lots` ran ingest, render and re-stream, then failed at the report (exit 1)."""
    run = tmp_path / "run"
    args, env = (["--duckdb-memory", "lots"], {}) if how == "option" else ([], {"REPLAY_DUCKDB_MEMORY": "lots"})
    result = runner.invoke(app, ["audit", str(AGENT), "--out", str(run), "-q", *args], env=env)
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and "--duckdb-memory" in line and "'lots'" in line, line
    assert not run.exists()


def test_readme_ingest_example_does_not_collide_with_the_audit_run() -> None:
    """The README audits into runs/samples, then shows `replay ingest samples/ --out runs/samples`,
    which refuses (exit 2: already holds a run)."""
    readme = _user_guide()
    audits = {ln.split("--out ")[1].split()[0] for ln in readme.splitlines() if ln.startswith("replay audit ") and "--out " in ln}
    for ln in readme.splitlines():
        if ln.startswith("replay ingest ") and "--force" not in ln:
            assert ln.split("--out ")[1].split()[0] not in audits, ln


@pytest.mark.parametrize("option", ["--old-serializer", "--new-parser", "--old-preparer", "--new-renderer", "--parser"])
def test_unknown_names_are_usage_errors(tmp_path, option):
    """A side spec naming no built-in is a bad option value: exit 2 before any work, one line naming
    the option (it exited 1 like a plugin that fails to load, issue 12 part 4)."""
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["audit", str(SAMPLES), "--out", str(out), "--quiet", option, "bogus"])
    assert result.exit_code == 2, result.output
    assert f"{option} bogus: unknown" in " ".join(result.output.split())
    assert not (out / "exchanges.parquet").exists()
