"""The command line without rough edges: help read at 80 columns is never cut, every bad option
value exits 2 before any work with one line naming the option and what it accepts, `--quiet` is
explained everywhere, and an existing run is not overwritten by `ingest` without `--force`."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from replay.cli import app
from sides_data import write_capture

runner = CliRunner()
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
