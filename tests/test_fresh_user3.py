"""Faults found by a third fresh-user pass (README only, then bad input): a run folder reused by
an interrupted audit, template files that are not text, filter options that silently did
nothing, and usage errors reported with the wrong exit code."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.audit import audit
from replay.cli import app
from replay.pipeline import AuditConfig
from replay.render.json_tools import JsonToolsRenderer

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
AGENT = SAMPLES / "coding-agent.jsonl"
runner = CliRunner()


def _interrupt_at(name: str):
    """A progress callback for :func:`replay.audit.audit` that raises KeyboardInterrupt (a Ctrl-C)
    when stage ``name`` starts."""

    @contextlib.contextmanager
    def stage(stage_name: str, total: int | None):
        if stage_name == name:
            raise KeyboardInterrupt
        yield lambda n: None

    return stage


def test_interrupted_audit_into_an_old_run_leaves_no_table_read_as_complete(tmp_path: Path) -> None:
    run = tmp_path / "run"
    audit([AGENT], run, AuditConfig(renderer=JsonToolsRenderer(), chunkings=("whole",)))
    assert (run / "streams.parquet").is_file()
    with pytest.raises(KeyboardInterrupt):
        # force: an --out holding a finished run is refused otherwise (replay.audit.prepare_out)
        audit([SAMPLES / "model-gateway.jsonl"], run, AuditConfig(renderer=JsonToolsRenderer(), chunkings=("whole",)), stage=_interrupt_at("re-stream"), force=True)
    # the first run's streams/calls must not sit beside the second run's exchanges
    assert not (run / "streams.parquet").exists()
    assert not (run / "calls.parquet").exists()
    for args in (["query", "summary", "--run", str(run)], ["report", "--run", str(run)], ["query", "--run", str(run), "--sql", "SELECT 1"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (args, result.output)
        assert "stopped during re-stream" in result.output and "incomplete" in result.output
    # finishing the missing stage makes it a run again
    result = runner.invoke(app, ["stream", "--run", str(run), "--chunkings", "whole", "-q"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["query", "summary", "--run", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output


def test_finished_audit_is_not_marked_incomplete(tmp_path: Path) -> None:
    import json

    run = tmp_path / "run"
    audit([AGENT], run, AuditConfig(renderer=JsonToolsRenderer(), chunkings=("whole",)))
    assert "incomplete" not in json.loads((run / "run.json").read_text())
    result = runner.invoke(app, ["report", "--run", str(run)])
    assert result.exit_code == 0, result.output


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
