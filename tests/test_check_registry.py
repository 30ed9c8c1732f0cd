"""The check registry (replay/checks.py): each check declared once, read by the SQL, the report
and ``--fail-on``; one JSON-object rule for the replay sides and the served side."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay import checks, judge, verdicts
from replay.capture.served import check_served
from replay.cli import app
from replay.sql import connect, run_query, run_sql

ROOT = Path(__file__).resolve().parents[1]

# (text, is a JSON object by the rule of replay.checks.json_object: RFC 8259 text, as a client's
# json.loads / JSON.parse reads it)
TRICKY = [
    ('{"a": "\\ud800"}', True),  # lone high surrogate escape: valid JSON text (orjson refuses it)
    ('{"a": "\\udc00\\ud800"}', True),  # reversed pair
    ('{"a": NaN}', False),
    ('{"a": Infinity}', False),
    ('{"a": -Infinity}', False),
    ('{"n": 123456789012345678901234567890}', True),  # beyond 64 bits
    ('{"n": -99999999999999999999}', True),
    ('{"a": 1, "a": 2}', True),  # duplicate keys: the last wins
    ('{"a": 1} x', False),  # trailing garbage
    ('{"a": 1}{"b": 2}', False),
    ('{"a": 1,}', False),  # trailing comma (DuckDB's json_valid accepts it)
    ("\ufeff{\"a\": 1}", False),  # a byte-order mark
    (' \n\t{"a": 1} \r\n', True),  # whitespace around the value
    ("", False),
    ("[1, 2]", False),
    ('"{}"', False),
    ("null", False),
    ('{"a": {"b": [1, 2.5e3, true, null]}}', True),
]


def _served_says_object(text: str) -> bool:
    cols = check_served("chat.completions", "gpt-4o", None, None, [{"index": 0, "name": "f", "arguments": text}], "tool_calls")
    return cols["served_non_json_calls"] == 0


def _replay_says_object(text: str) -> bool:
    """What the judge writes to ``calls.arguments_json_ok`` (through its per-plan memo)."""
    return judge._Memo().json_object(text)


@pytest.mark.parametrize("text,expected", TRICKY, ids=[repr(t)[:40] for t, _ in TRICKY])
def test_served_and_replay_sides_judge_json_by_one_rule(text: str, expected: bool) -> None:
    assert checks.json_object(text) is expected
    assert _replay_says_object(text) is expected
    assert _served_says_object(text) is expected


def test_sql_json_rule_is_the_registry_rule(tmp_path: Path) -> None:
    """The SQL of summary and non_json_joins judges served arguments by ``is_json_object``,
    which is :func:`replay.checks.json_object` (not DuckDB's json_valid)."""
    run = _ingest_only(tmp_path)
    con = connect(run)
    for text, expected in TRICKY:
        got = run_sql(con, "SELECT is_json_object(?::VARCHAR) AS ok".replace("?", "'" + text.replace("'", "''") + "'")).column("ok")[0].as_py()
        assert got is expected, text
    con.close()


def _ingest_only(tmp_path: Path) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy(ROOT / "samples" / "formats" / "chat-body.json", src)
    shutil.copy(ROOT / "samples" / "formats" / "chat-body.request.json", src)
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["ingest", str(src), "--out", str(run)])
    assert res.exit_code == 0, res.output
    return run


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A full audit of a small capture: the coding agent's first three lines (raw completions:
    stream checks judged) and the chat-stream sample (two served streams)."""
    base = tmp_path_factory.mktemp("registry")
    src = base / "in"
    src.mkdir()
    for name in ("chat-stream.sse", "chat-stream.request.json"):
        shutil.copy(ROOT / "samples" / "formats" / name, src)
    lines = (ROOT / "samples" / "coding-agent.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (src / "agent.jsonl").write_text("".join(lines[:3]), encoding="utf-8")
    run = base / "run"
    res = CliRunner().invoke(app, ["audit", str(src), "--out", str(run)])
    assert res.exit_code == 0, res.output
    return run


def test_every_registered_check_is_a_verdict_row_and_in_the_report(audited: Path) -> None:
    con = connect(audited)
    rows = run_query(con, "verdicts").column("check").to_pylist()
    con.close()
    assert rows == list(checks.names())  # every check, once, in registry order
    assert len(rows) == 21
    report = (audited / "report.md").read_text(encoding="utf-8")
    for name in checks.names():
        assert re.search(rf"^\| {re.escape(name)} \|", report, re.M), name
    for c in checks.REGISTRY:
        if c.explained:
            assert f"`{c.name}`: {c.sentence}" in report


def test_a_new_registry_entry_reaches_the_sql_and_fail_on(audited: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding a check is one entry: the verdict table and the views pick it up from the registry."""
    extra_stream = checks.Check("always-wrong", 14, "stream", ("streams.error",), "planted", applies="true", wrong="true",
                                outcome="'x'")
    extra_served = checks.Check("served:always-ok", 107, "served", ("exchanges.served_chunks",), "planted",
                                applies="e.served_chunks IS NOT NULL", wrong="false")
    monkeypatch.setattr(checks, "REGISTRY", checks.REGISTRY + (extra_stream, extra_served))
    con = connect(audited)
    table = {r["check"]: r for r in run_query(con, "verdicts").to_pylist()}
    pairs = run_sql(con, "SELECT count(*) AS n FROM verdict_pairs WHERE \"check\" = 'always-wrong'").column("n")[0].as_py()
    streamed = run_sql(con, "SELECT count(*) AS n FROM exchanges WHERE served_chunks IS NOT NULL").column("n")[0].as_py()
    con.close()
    assert list(table)[13:15] == ["semantic-diff", "always-wrong"] and list(table)[-1] == "served:always-ok"
    assert table["always-wrong"]["exchanges"] == table["dropped-call"]["exchanges"] > 0
    assert table["always-wrong"]["still-wrong"] + table["always-wrong"]["unreliable"] == table["always-wrong"]["exchanges"]
    assert pairs > 0
    assert table["served:always-ok"]["wrong"] == 0
    assert table["served:always-ok"]["exchanges"] == table["served:client-error"]["exchanges"] == streamed == 4


def test_fail_on_and_check_tables_come_from_the_registry() -> None:
    assert verdicts.CHECKS == checks.names("render", "stream")
    assert verdicts.SERVED_CHECKS == tuple(n.removeprefix("served:") for n in checks.names("served"))
    assert set(verdicts.CHECK_TABLE) == set(checks.names())
    for name in checks.names("render", "stream"):
        assert verdicts.parse_fail_on(f"{name}:broken>0").check == name
    for name in verdicts.SERVED_CHECKS:
        assert verdicts.parse_fail_on(f"served:{name}>0").check == f"served:{name}"
    with pytest.raises(verdicts.FailOnError, match="unknown check"):
        verdicts.parse_fail_on("no-such-check:broken")
    assert [c.ord for c in checks.REGISTRY] == sorted(c.ord for c in checks.REGISTRY)
    assert len(set(checks.names())) == len(checks.REGISTRY)


def _code(path: Path) -> str:
    """The file's text without comments (SQL ``--``, Python ``#``) and Python docstrings."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".sql":
        return re.sub(r"--[^\n]*", "", text)
    text = re.sub(r'("""|\'\'\')(?:.|\n)*?\1', '""', text)
    return re.sub(r"#[^\n]*", "", text)


def literal_check_lists(root: Path) -> dict[str, list[str]]:
    """Files of ``root`` (``queries/*.sql``, ``replay/**/*.py`` but the registry) whose code quotes
    three or more check names as string literals: a restated check list."""
    names = {n for n in checks.names()} | {n.removeprefix("served:") for n in checks.names("served")}
    quoted = re.compile(r"""['"]((?:served:)?[a-z]+(?:-[a-z]+)+)['"]""")
    out = {}
    files = sorted((root / "queries").glob("*.sql")) + sorted((root / "replay").rglob("*.py"))
    for f in files:
        if f == root / "replay" / "checks.py":
            continue
        found = sorted({m for m in quoted.findall(_code(f)) if m in names})
        if len(found) >= 3:
            out[str(f.relative_to(root))] = found
    return out


def test_no_check_list_outside_the_registry() -> None:
    assert literal_check_lists(ROOT) == {}


def test_a_restated_check_list_is_found(tmp_path: Path) -> None:
    (tmp_path / "queries").mkdir()
    (tmp_path / "replay").mkdir()
    (tmp_path / "queries" / "x.sql").write_text(
        "-- 'null-leak', 'prompt-divergence', 'render-failure' in a comment is prose\n"
        "SELECT list_position(['null-leak', 'prompt-divergence', 'render-failure'], c)\n", encoding="utf-8")
    (tmp_path / "replay" / "y.py").write_text('"""\'dropped-call\' \'call-id\' \'served:call-id\'"""\nX = ("dropped-call", "call-id")\n', encoding="utf-8")
    assert literal_check_lists(tmp_path) == {"queries/x.sql": ["null-leak", "prompt-divergence", "render-failure"]}


def test_served_counts_in_every_query_use_the_one_rule(tmp_path: Path) -> None:
    """A served response whose calls carry the tricky arguments: the ``served:non-json-join`` column
    (ingest), the summary's and non_json_joins' served rows (SQL) count the same calls."""
    import json

    src = tmp_path / "in"
    src.mkdir()
    calls = [{"id": f"call_{i}", "type": "function", "function": {"name": "get_weather", "arguments": text}}
             for i, (text, _) in enumerate(TRICKY)]
    body = {"id": "chatcmpl-t", "object": "chat.completion", "created": 1764500000, "model": "Qwen/Qwen3-8B",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": calls}, "finish_reason": "tool_calls"}]}
    (src / "tricky.json").write_text(json.dumps(body), encoding="utf-8")
    shutil.copy(ROOT / "samples" / "formats" / "chat-body.request.json", src / "tricky.request.json")
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["ingest", str(src), "--out", str(run)])
    assert res.exit_code == 0, res.output
    expected = sum(1 for _, ok in TRICKY if not ok)
    con = connect(run)
    column = run_sql(con, "SELECT sum(served_non_json_calls) AS n FROM exchanges").column("n")[0].as_py()
    summary = {r["side"]: r for r in run_query(con, "summary").to_pylist()}["served"]["non_json_joins"]
    by_side = {r["side"]: r for r in run_query(con, "non_json_joins").to_pylist()}["served"]["non_json_joins"]
    con.close()
    assert column == summary == by_side == expected == 11


def test_expand_sql_names_an_unknown_marker() -> None:
    assert "struct_pack(c := 'null-leak'" in checks.expand_sql("SELECT {{checks:render}}")
    assert "{{" not in checks.expand_sql("{{checks:served_applies}} {{checks:served_wrong}} {{checks:stream}}")
    with pytest.raises(ValueError, match=r"unknown \{\{checks:nope\}\}.*render, stream, served_applies, served_wrong"):
        checks.expand_sql("SELECT {{checks:nope}}")
