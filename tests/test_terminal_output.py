"""What the terminal shows a new user (issue #20, "no wrong number, hang or traceback under
faults"): faults said, not silent, and captured text never acting on the terminal.

- an exchange whose recorded chunking the secret scrub dropped (a secret-shaped string split across
  two recorded deltas) is counted in the terminal, ``report.md`` and the ingest output;
- terminal escape codes and rich markup in captured strings (exchange id, model name, tool name)
  are shown as text, escape codes made visible (``\\x1b``), by every command that prints them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replay.cli import app
from sides_data import TOOL, call_text, query_json, runner

SK = "sk-proj-Prompt9f8e7d6c5b4a3210ZYXW"  # an OpenAI-shaped key (as tests/test_secrets.py plants)


def _record(eid: str, steps: list[str], model: str = "Qwen/Qwen3-8B", tool: dict = TOOL) -> dict:
    return {"id": eid, "route": "chat.completions", "model": model,
            "request": {"model": model, "messages": [{"role": "user", "content": "go"}], "tools": [tool]},
            "server": {"output_text": "".join(steps), "steps": steps}}


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_scrub_that_drops_the_recorded_chunking_is_said(tmp_path):
    """Three exchanges with a raw completion and its recorded steps: the key split across two steps
    (`split`) is replaced in the completion but not in the steps, so its steps no longer join and
    are dropped; the key whole in one step (`whole`) is replaced in both and keeps its chunking;
    `clean` holds none. The loss is counted once, and said in the audit's terminal output,
    report.md and `replay ingest`'s output."""
    body = call_text("read")
    cap = _write(tmp_path / "c.jsonl", [
        _record("split", ["Key ", SK[:10], SK[10:] + " then.\n", body]),
        _record("whole", ["Key ", SK, " then.\n", body]),
        _record("clean", ["Key none then.\n", body]),
    ])
    sentence = ("1 exchange lost its recorded chunking: the secret scrub rewrote its completion (a secret-shaped "
                "string split across recorded deltas), so the deltas no longer joined to it and were dropped; "
                "the other chunkings still replay it.")
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", str(cap), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    assert f"• {sentence}" in result.output
    assert f"- {sentence}" in (out / "report.md").read_text(encoding="utf-8")
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["ingest"]["redactions"]["steps-dropped"] == 1
    got = {r["exchange_id"]: r["recorded"] for r in query_json(
        out, "SELECT exchange_id, bool_or(chunking = 'recorded') AS recorded FROM streams GROUP BY 1")}
    assert got == {"split": False, "whole": True, "clean": True}
    assert SK not in result.output
    result = runner.invoke(app, ["ingest", str(cap), "--out", str(tmp_path / "ing"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert sentence in result.output.splitlines()


# an xterm title (OSC ... BEL), clear-screen and colour (CSI) sequences, and rich markup
EID = "e\x1b]0;pwned\x07[bold]id"
MODEL = "Qwen/Qwen3-8B\x1b[2J[bold]"  # its name picks the Hermes parser
HOUSE = "acme/m\x1b[2J[bold]odel"  # no family matches: the audit's family-mismatch headline names it
TOOL_NAME = "re\x1b[31m[red]ad"
SHOWN = {  # how each must be printed: control characters escaped, brackets as they are
    EID: "e\\x1b]0;pwned\\x07[bold]id",
    MODEL: "Qwen/Qwen3-8B\\x1b[2J[bold]",
    HOUSE: "acme/m\\x1b[2J[bold]odel",
    TOOL_NAME: "re\\x1b[31m[red]ad",
}


@pytest.fixture(scope="module")
def escape_run(tmp_path_factory) -> tuple[Path, str]:
    """An audit of one exchange whose id, model and tool name carry escape codes and markup (the
    raw completion a Hermes call of that tool, its name JSON-escaped as a model writes it)."""
    tmp = tmp_path_factory.mktemp("esc")
    tool = {"type": "function", "function": {"name": TOOL_NAME, "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}
    call = '<tool_call>\n{"name": %s, "arguments": {"path": "a.py"}}\n</tool_call>' % json.dumps(TOOL_NAME)
    cap = _write(tmp / "esc.jsonl", [_record(EID, ["Let me look.\n", call], model=MODEL, tool=tool),
                                     _record("house", ["Let me look.\n", call], model=HOUSE, tool=tool)])
    out = tmp / "run"
    result = runner.invoke(app, ["audit", str(cap), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    return out, result.output


def _no_control(text: str, *which: str) -> None:
    assert "\x1b" not in text and "\x07" not in text
    for raw in which:
        assert SHOWN[raw] in text, (SHOWN[raw], text)


def test_audit_summary_shows_escape_codes_as_text(escape_run):
    out, output = escape_run
    _no_control(output, HOUSE)
    assert f"1 exchange of model `{SHOWN[HOUSE]}` (of 1) looks like family `hermes`" in output
    _no_control((out / "report.md").read_text(encoding="utf-8"), HOUSE)  # `cat report.md` is terminal output too
    result = runner.invoke(app, ["report", "--run", str(out)])
    assert result.exit_code == 0, result.output
    _no_control(result.output, HOUSE)


def test_query_table_shows_escape_codes_as_text(escape_run):
    out, _ = escape_run
    sql = "SELECT e.exchange_id, e.model, t.name FROM exchanges e JOIN tools t USING (exchange_id) WHERE e.model = 'Qwen/Qwen3-8B\x1b[2J[bold]'"
    for fmt in ("table", "md"):
        result = runner.invoke(app, ["query", "--run", str(out), "--sql", sql, "--format", fmt])
        assert result.exit_code == 0, result.output
        _no_control(result.output, EID, MODEL, TOOL_NAME)
    # a column name is shown the same way
    result = runner.invoke(app, ["query", "--run", str(out), "--sql", "SELECT 1 AS \"a\x1b[2Jb\""])
    assert result.exit_code == 0 and "a\\x1b[2Jb" in result.output and "\x1b" not in result.output
    # JSON stays JSON: its own escapes (\u001b), read back as the captured value
    result = runner.invoke(app, ["query", "--run", str(out), "--sql", sql, "--format", "json"])
    assert "\x1b" not in result.output and json.loads(result.output) == [{"exchange_id": EID, "model": MODEL, "name": TOOL_NAME}]


def test_show_shows_escape_codes_as_text(escape_run):
    out, _ = escape_run
    for fmt in ("text", "md"):
        result = runner.invoke(app, ["show", EID, "--run", str(out), "--format", fmt])
        assert result.exit_code == 0, result.output
        _no_control(result.output, EID, MODEL, TOOL_NAME)
    result = runner.invoke(app, ["show", "no\x1b[2Jsuch", "--run", str(out)])  # the error names the id as text
    assert result.exit_code == 1 and "no\\x1b[2Jsuch" in result.output and "\x1b" not in result.output
