"""What the terminal shows a new user (issue #20, "no wrong number, hang or traceback under
faults"): faults said, not silent, and captured text never acting on the terminal.

- an exchange whose recorded chunking the secret scrub dropped (a secret-shaped string split across
  two recorded deltas) is counted in the terminal, ``report.md`` and the ingest output;
- terminal escape codes and rich markup in captured strings (exchange id, model name, tool name)
  are shown as text, escape codes made visible (``\\x1b``), by every command that prints them;
- at 80 and 60 columns every table (verdicts, summary, ``replay query``, ``replay formats``)
  fits without cutting a value: each check name whole, each count next to its column's name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.cells import cell_len

from replay.cli import app
from sides_data import TOOL, call_text, query_json, runner

ROOT = Path(__file__).resolve().parents[1]

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
    assert sentence in " ".join(result.output.split())  # one sentence, whatever the width (COLUMNS) wraps it to


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


def _tokens(output: str) -> set[str]:
    return set(re.split(r"[\s│┃]+", output))


def _row(output: str, key: str, headers: list[str]) -> dict[str, str]:
    """``{header: shown value}`` of the row whose first cell is ``key``, from either layout: a
    table line ``│ key │ v1 │ ...``, or a stacked block (``key`` alone on a line, then indented
    ``header value`` pairs)."""
    lines = output.splitlines()
    for line in lines:
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0] == key and len(cells) == len(headers) + 1:
            return dict(zip(headers, cells[1:]))
    start = lines.index(key)  # ValueError: the key is not whole on a line of its own
    block = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        block.append(line.strip())
    text = "  " + "  ".join(block) + "  "
    got = {}
    for h in headers:
        m = re.search(rf"  {re.escape(h)} (\S+)  ", text)
        assert m, (h, text)
        got[h] = m.group(1)
    return got


def _shown(v) -> str:
    return "–" if v is None else f"{v:,}"


@pytest.mark.parametrize("width", [80, 60])
def test_tables_fit_the_terminal_without_cutting_a_value(width, tmp_path):
    """`replay audit samples/` on an 80- and a 60-column terminal (COLUMNS, as rich reads it): no
    value is cut with …, no table line is wider than the terminal, every check name of the verdict
    table is whole (rich cut them to `nul…` and seven identical `ser…`), and each count is shown
    under (or next to) its column's name with the value `replay query verdicts` gives. The summary
    table, `replay query` and `replay formats` the same."""
    env = {"COLUMNS": str(width)}
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", str(ROOT / "samples"), "--out", str(out), "--quiet"], env=env)
    assert result.exit_code == 0, result.output
    output = result.output
    assert "…" not in output
    # the headline bullets are soft-wrapped (the terminal wraps them, nothing is cut)
    assert all(cell_len(line) <= width for line in output.splitlines() if not line.startswith("• ")), output
    verdicts = json.loads(runner.invoke(app, ["query", "verdicts", "--run", str(out), "--format", "json"]).output)
    checks = [r["check"] for r in verdicts]
    assert len(checks) == 21 and sum(c.startswith("served:") for c in checks) == 7
    headers = [h for h in verdicts[0] if h != "check"]
    for r in verdicts:
        assert r["check"] in _tokens(output)
        assert _row(output, r["check"], headers) == {h: _shown(r[h]) for h in headers}
    summary = {r["side"]: r for r in json.loads(runner.invoke(app, ["query", "summary", "--run", str(out), "--format", "json"]).output)}
    assert _row(output, "schemas_with_leaked_null", ["served", "old", "new", "reference"]) == {
        s: _shown(summary[s]["schemas_with_leaked_null"]) for s in ("served", "old", "new", "reference")}
    from replay.parsers import PARSERS

    # `replay query` (table) names every check whole, `replay formats` every parser family
    for args, names in ((["query", "verdicts", "--run", str(out)], set(checks)), (["formats"], {c.name for c in PARSERS.values()})):
        got = runner.invoke(app, args, env=env)
        assert got.exit_code == 0, got.output
        assert "…" not in got.output and all(cell_len(line) <= width for line in got.output.splitlines()), got.output
        assert names <= _tokens(got.output)


def test_visible_escapes_every_control_character():
    """C0 (but newline and tab), DEL, C1 (U+009B is a one-byte CSI) and bidi controls are escaped;
    other text, brackets included, is unchanged."""
    from replay.term import visible

    assert visible("a\x1b[2Jb\r\x00\x7f\x9b\u202eZ\tc\nd [bold]é") == "a\\x1b[2Jb\\r\\x00\\x7f\\x9b\\u202eZ\tc\nd [bold]é"
    assert visible(12) == "12"


def test_fit_table_breaks_headers_before_it_stacks():
    """Between the width the table needs whole (headers on one line) and the width its values need,
    headers break after a hyphen (`still-` over `wrong`) and the values stay whole in a table."""
    import io

    from rich.console import Console

    from replay.term import FitTable

    t = FitTable(["check", "same-ok", "still-wrong", "changed-wrong"], [["served:non-json-join", "1,234", "0", "–"]],
                 numeric=[False, True, True, True])
    whole, broken = 20 + 7 + 11 + 13 + 13, 20 + 5 + 6 + 8 + 13  # cells + 3 per column + 1
    for width, layout in ((whole, "one-line"), (whole - 1, "broken"), (broken, "broken"), (broken - 1, "stacked")):
        buf = io.StringIO()
        Console(file=buf, width=width).print(t)
        text = buf.getvalue()
        assert all(cell_len(line) <= width for line in text.splitlines()), (width, text)
        if layout == "stacked":
            assert text.splitlines()[:2] == ["served:non-json-join", "  same-ok 1,234  still-wrong 0  changed-wrong –"]
            continue
        row = next(line for line in text.splitlines() if "served:non-json-join" in line)
        assert [c.strip() for c in row.split("│")[1:-1]] == ["served:non-json-join", "1,234", "0", "–"]
        assert ("still-wrong" in text) == (layout == "one-line") and ("changed-" in text)
