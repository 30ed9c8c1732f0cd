"""Completions written in another tool-parser family's syntax than the model name picks (issue 10
part 7): the ``family_fit`` facts (replay/family_fit.py), query ``family_mismatch``, and the
sentence in the terminal summary, report.md and report.html.

The capture below is written for these tests (a gateway that serves a Mistral fine-tune under the
name ``Qwen/Qwen3-8B``, so the Hermes parser the name picks sees Mistral ``[TOOL_CALLS]`` syntax).
Its exchanges and what each must give (the counts asserted follow from this list):

- ``qm-01`` .. ``qm-05``: Qwen3-8B, raw completions in Mistral syntax: v11 ``[TOOL_CALLS]name[ARGS]{..}``
  with 1, 1, 2 (two ``[TOOL_CALLS]``) and 1 calls, then a pre-v11 ``[TOOL_CALLS] [{..}, {..}]`` list
  with 2 calls: 7 calls. The server (Hermes parser) sent them to the client as content.
- ``qm-06``: Qwen3-8B, no raw completion; the served content is ``[TOOL_CALLS]get_time[ARGS]{..}``
  (1 call): judged on the served content.
- ``qm-07``: Qwen3-8B, a Hermes ``<tool_call>`` call: fits.
- ``qm-08``: Qwen3-8B, a Hermes call *and* two Mistral calls: holds the picked family's markers, so
  not flagged.
- ``qm-09``: Qwen3-8B, text with ``[``, ``{`` and the words ``[TOOL_CALLS]`` but no call: not
  flagged (the Mistral parse finds no call there).
- ``ms-01``: Mistral Small 3.2 in its own syntax: fits.
- ``hm-01``: ``acme/house-model-v2`` (no family matches the name) with a Hermes call: looks like
  ``hermes``.

So: Qwen3-8B -> ``mistral`` 6 exchanges of 9 (8 calls: 7 + 1; 1 from served content), the house
model -> ``hermes`` 1 of 1. On ``samples/`` (every model in its own family's syntax) nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.family_fit import call_starts_of, families_in, fit_row
from replay.report.markdown import mismatch_lines
from replay.parsers import PARSERS, families

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {"name": "get_time", "description": "Local time.", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}},
    },
]
HERMES_CALL = '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>'
QWEN_MISTRAL = {
    "qm-01": '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}',
    "qm-02": 'Let me check.[TOOL_CALLS]get_time[ARGS]{"tz": "Europe/Paris"}',
    "qm-03": '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}[TOOL_CALLS]get_time[ARGS]{"tz": "Europe/Oslo"}',
    "qm-04": '[TOOL_CALLS]get_weather[ARGS]{"city": "Lima"}</s>',
    "qm-05": '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Rome"}}, {"name": "get_time", "arguments": {"tz": "Europe/Rome"}}]',
}
NOT_A_CALL = 'Lists look like [1, 2], objects like {"a": 1}; Mistral models open calls with the token [TOOL_CALLS].'


def _line(xid: str, model: str, raw: str | None, content: str | None) -> str:
    rec = {
        "id": xid,
        "route": "chat.completions",
        "model": model,
        "request": {"model": model, "messages": [{"role": "user", "content": "Weather and time?"}], "tools": TOOLS},
        "response": {
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        },
    }
    if raw is not None:
        rec["server"] = {"output_text": raw}
    return json.dumps(rec)


def write_capture(folder: Path) -> Path:
    """The capture of the module docstring, one v1 file."""
    lines = [_line(x, "Qwen/Qwen3-8B", raw, raw) for x, raw in QWEN_MISTRAL.items()]
    lines.append(_line("qm-06", "Qwen/Qwen3-8B", None, '[TOOL_CALLS]get_time[ARGS]{"tz": "UTC"}'))
    lines.append(_line("qm-07", "Qwen/Qwen3-8B", HERMES_CALL, None))
    lines.append(_line("qm-08", "Qwen/Qwen3-8B", HERMES_CALL + '[TOOL_CALLS]get_weather[ARGS]{"city": "A"}[TOOL_CALLS]get_time[ARGS]{"tz": "B"}', None))
    lines.append(_line("qm-09", "Qwen/Qwen3-8B", NOT_A_CALL, NOT_A_CALL))
    lines.append(_line("ms-01", "mistralai/Mistral-Small-3.2-24B-Instruct-2506", '[TOOL_CALLS]get_weather[ARGS]{"city": "Bern"}', None))
    lines.append(_line("hm-01", "acme/house-model-v2", HERMES_CALL, HERMES_CALL))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "gateway.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def query_json(run: Path, name: str) -> list[dict]:
    result = runner.invoke(app, ["query", name, "--run", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


# --- the declared markers --------------------------------------------------------------------


def test_every_family_declares_distinctive_call_starts() -> None:
    """Each built-in family declares ``call_starts``: markers of at least 5 characters with a
    character that is not a letter, digit or space (so never ``[``, ``{`` or a word of prose)."""
    for cls in families():
        starts = cls.__dict__.get("call_starts") or getattr(cls, "call_starts", None)
        assert starts, cls.name
        for m in starts:
            assert len(m) >= 5 and any(not (c.isalnum() or c.isspace()) for c in m), (cls.name, m)


def test_a_framework_or_subclass_parser_gets_its_familys_call_starts() -> None:
    class Adapter:  # a framework adapter is named for the family its parser implements
        name = "mistral"

    class Unknown:
        name = "house"

    assert call_starts_of(Adapter) == ("[TOOL_CALLS]",)
    assert call_starts_of(Unknown) is None
    assert call_starts_of(PARSERS["qwen25"]) == ("<tool_call>",)


@pytest.mark.parametrize(
    "text, family, looks_like, calls",
    [
        (QWEN_MISTRAL["qm-01"], "qwen3", "mistral", 1),
        (QWEN_MISTRAL["qm-05"], "hermes", "mistral", 2),
        (QWEN_MISTRAL["qm-01"], "mistral", None, None),  # its own syntax
        (QWEN_MISTRAL["qm-01"], None, "mistral", 1),  # no family picked
        (NOT_A_CALL, "hermes", None, None),  # the marker in prose: Mistral's parse finds no call
        ('Use [1, 2] and {"name": "get_time", "arguments": {}}', "hermes", None, None),  # generic text: no family
        (HERMES_CALL + QWEN_MISTRAL["qm-03"], "hermes", None, None),  # holds the picked family's markers too
        (HERMES_CALL, "mistral", "hermes", 1),  # <tool_call> families: Hermes' parse wins on JSON
        ("<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>", "mistral", "qwen3_coder", 1),
        ("<tool_call>get_time\n<arg_key>tz</arg_key>\n<arg_value>UTC</arg_value>\n</tool_call>", "kimi_k2", "glm45", 1),
        ('<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0<|tool_call_argument_begin|>{"tz": "UTC"}<|tool_call_end|><|tool_calls_section_end|>', "qwen3", "kimi_k2", 1),
        ("<\uff5ctool_calls_begin\uff5c><\uff5ctool_call_begin\uff5c>function<\uff5ctool_sep\uff5c><steptml:invoke name=\"get_time\">"
         "<steptml:parameter name=\"tz\">UTC</steptml:parameter></steptml:invoke><\uff5ctool_call_end\uff5c><\uff5ctool_calls_end\uff5c>", "deepseek_v31", "step3", 1),
    ],
)
def test_fit_row(text: str, family: str | None, looks_like: str | None, calls: int | None) -> None:
    row = fit_row("x", "m", family, text, "completion", TOOLS)
    assert (row["looks_like"], row["looks_like_calls"]) == (looks_like, calls)
    assert row["marker_families"] == list(families_in(text))
    if looks_like is not None:
        assert row["looks_like_marker"] in text and row["looks_like_marker"] in PARSERS[looks_like].call_starts


def test_tools_are_decoded_only_when_candidates_are_parsed() -> None:
    asked = []

    def tools():
        asked.append(1)
        return TOOLS

    fit_row("x", "m", "hermes", HERMES_CALL, "completion", tools)
    fit_row("x", "m", "hermes", "plain text", "completion", tools)
    assert asked == []
    assert fit_row("x", "m", "hermes", QWEN_MISTRAL["qm-03"], "completion", tools)["looks_like_calls"] == 2
    assert asked == [1]


# --- end to end ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mismatch_run(tmp_path_factory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("fit")
    capture = write_capture(tmp / "capture")
    out = tmp / "run"
    result = runner.invoke(app, ["audit", str(capture), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    return out, " ".join(result.output.split())


EXPECTED_ROWS = [
    {
        "model": "Qwen/Qwen3-8B", "family": "hermes", "looks_like": "mistral", "exchanges": 6, "of_model": 9,
        "calls_found": 8, "calls_picked": 0, "marker": "[TOOL_CALLS]", "from_content": 1, "example": "qm-01",
    },
    {
        "model": "acme/house-model-v2", "family": None, "looks_like": "hermes", "exchanges": 1, "of_model": 1,
        "calls_found": 1, "calls_picked": 0, "marker": "<tool_call>", "from_content": 0, "example": "hm-01",
    },
]
SENTENCES = [
    "6 exchanges of model `Qwen/Qwen3-8B` (of 9) look like family `mistral`, not `hermes`: `[TOOL_CALLS]` in the "
    "completions or served content, where `mistral`'s parse finds 8 calls and `hermes`'s 0; try `--parser mistral` "
    "(`replay query family_mismatch`).",
    "1 exchange of model `acme/house-model-v2` (of 1) looks like family `hermes`, and no family matches its name: "
    "`<tool_call>` in the completions, where `hermes`'s parse finds 1 call; try `--parser hermes` (`replay query family_mismatch`).",
]


def test_family_mismatch_query(mismatch_run) -> None:
    run, _ = mismatch_run
    assert query_json(run, "family_mismatch") == EXPECTED_ROWS


def test_family_fit_rows(mismatch_run) -> None:
    run, _ = mismatch_run
    rows = {r["exchange_id"]: r for r in pq.read_table(run / "family_fit.parquet").to_pylist()}
    assert sorted(rows) == sorted([*QWEN_MISTRAL, "qm-06", "qm-07", "qm-08", "qm-09", "ms-01", "hm-01"])
    flagged = {x: r["looks_like"] for x, r in rows.items() if r["looks_like"]}
    assert flagged == {**{x: "mistral" for x in QWEN_MISTRAL}, "qm-06": "mistral", "hm-01": "hermes"}
    assert rows["qm-06"]["text_source"] == "served_content"
    assert rows["qm-08"]["marker_families"][0] == "hermes" and "mistral" in rows["qm-08"]["marker_families"]
    assert rows["qm-08"]["family_markers"] is True
    assert rows["qm-09"]["marker_families"] == ["mistral"] and rows["qm-09"]["family_calls"] == 0
    assert rows["ms-01"]["family"] == "mistral" and rows["ms-01"]["family_markers"] is True


def test_sentence_in_terminal_report_md_and_html(mismatch_run) -> None:
    run, terminal = mismatch_run
    md = (run / "report.md").read_text(encoding="utf-8")
    html = (run / "report.html").read_text(encoding="utf-8")
    for sentence in SENTENCES:
        assert f"• {sentence}" in terminal
        assert f"- {sentence}" in md
    assert "`replay query family_mismatch`" in md and "| Qwen/Qwen3-8B | hermes | mistral | 6 | 9 | 8 | 0 |" in md
    assert 'id="family-mismatch"' in html and "<code>--parser mistral</code>" in html


def test_the_suggested_parser_fits(mismatch_run, tmp_path: Path) -> None:
    """Re-run with ``--parser mistral`` as suggested: the six Qwen3-8B exchanges now fit and their
    8 calls are in the reference parse; the Hermes-syntax ones now look like ``hermes``."""
    run, _ = mismatch_run
    out = tmp_path / "again"
    capture = next((run.parent / "capture").glob("*.jsonl"))
    result = runner.invoke(app, ["audit", str(capture), "--out", str(out), "--parser", "mistral", "--quiet"])
    assert result.exit_code == 0, result.output
    rows = {r["exchange_id"]: r for r in pq.read_table(out / "family_fit.parquet").to_pylist()}
    assert {x for x, r in rows.items() if r["looks_like"]} == {"qm-07", "hm-01"}
    assert {rows[x]["looks_like"] for x in ("qm-07", "hm-01")} == {"hermes"}
    streams = pq.read_table(out / "streams.parquet").to_pylist()
    ref = {r["exchange_id"]: r["calls_whole"] for r in streams if r["side"] == "reference"}
    assert sum(ref[x] for x in QWEN_MISTRAL) == 7


def test_mismatch_lines_singular_and_content_only() -> None:
    row = {**EXPECTED_ROWS[0], "exchanges": 1, "from_content": 1, "calls_found": 1}
    assert mismatch_lines([row]) == [
        "1 exchange of model `Qwen/Qwen3-8B` (of 9) looks like family `mistral`, not `hermes`: `[TOOL_CALLS]` in the "
        "served content, where `mistral`'s parse finds 1 call and `hermes`'s 0; try `--parser mistral` (`replay query family_mismatch`)."
    ]


# --- samples/: every model in its own family's syntax ----------------------------------------


def test_no_flag_on_the_samples(tmp_path: Path) -> None:
    out = tmp_path / "samples"
    result = runner.invoke(app, ["audit", str(SAMPLES), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    rows = pq.read_table(out / "family_fit.parquet").to_pylist()
    # 21 raw completions + the 6 exchanges with served content and no raw completion
    assert [sum(r["text_source"] == s for r in rows) for s in ("completion", "served_content")] == [21, 6]
    assert [r for r in rows if r["looks_like"]] == []
    # every raw completion with calls holds its own family's call starts, but Llama 3.1's bare
    # JSON call (mg-08: no <|python_tag|>; bare JSON is no distinctive marker)
    streams = pq.read_table(out / "streams.parquet").to_pylist()
    with_calls = {r["exchange_id"] for r in streams if r["side"] == "reference" and r["calls_whole"]}
    assert len(with_calls) == 19
    assert {r["exchange_id"] for r in rows if r["exchange_id"] in with_calls and not r["family_markers"]} == {"mg-08"}
    assert query_json(out, "family_mismatch") == []
    assert "look like family" not in result.output and "looks like family" not in result.output
    assert "family_mismatch" not in (out / "report.md").read_text(encoding="utf-8")


def test_formats_lists_the_call_starts() -> None:
    result = runner.invoke(app, ["formats"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "call starts" in result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") > 5}
    assert "[TOOL_CALLS]" in rows["mistral"].split("│")[5] and "to=functions." in rows["harmony"].split("│")[5]


def _families_in_naive(text):
    from replay.family_fit import _table

    found = {}
    for name, starts in _table():
        for m in starts:
            if m in text:
                found[name] = m
                break
    return found


def test_families_in_is_the_plain_substring_search():
    """families_in searches each distinct marker once, behind its two-character prefix: the same
    answer, in the same order, as searching every family's markers in turn."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from replay.family_fit import _table, families_in

    pieces = sorted({m for _, starts in _table() for m in starts} | {m[:2] for _, starts in _table() for m in starts}
                    | {m[:-1] for _, starts in _table() for m in starts} | {"x", "<", "|", "{\"a\": 1}", "\n"})

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(pieces), max_size=8))
    def check(parts):
        text = "".join(parts)
        got = families_in(text)
        want = _families_in_naive(text)
        assert got == want and list(got) == list(want)

    check()
