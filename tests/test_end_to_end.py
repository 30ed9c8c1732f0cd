"""The real CLI on `samples/`: exact counts, derived from how `samples/make_samples.py` builds them.

Derivation (see the docstring of samples/make_samples.py):
- exchanges: 7 coding-agent turns + 5 DeepSeek gateway requests + 8 model-gateway requests + 1 good
  line of malformed.jsonl = 21; ingest errors: the 5 bad lines of malformed.jsonl.
- tool schemas: 7 x 5 coding tools + 5 x 3 gateway tools + 8 x 2 model-gateway tools = 66.
- leaked nulls with model-dump: per coding request `read` (strict), `edit` (description, strict),
  `todo_list` (strict) = 3 schemas; per gateway request `web_search` (strict), `get_time` (description,
  parameters, strict) = 2 schemas; per model-gateway request `get_weather` (strict) = 1 schema.
  7 x 3 + 5 x 2 + 8 x 1 = 39 schemas, in 20 prompts.
  With client-fields: only the name-only `get_time` (parameters: null) = 5 schemas, in 5 prompts.
  `write`'s and `create_ticket`'s `"default": null` are the client's own: never a leak.
- prompts: the 20 requests with tools differ between old and new (json-tools renderer); the 21st has none.
  new vs reference: the 5 gateway prompts (`"parameters": null` on get_time).
- raw completions: 7 + 5 + 8 = 20; calls in the whole-text parse: coding 1+1+2+1+1+1+0 = 7, gateway
  1+2+1+0+1 = 5, model gateway 2+2+2+1+2+2+2+1 = 14: 26 in all.
- served: agent-04 streamed "" arguments and agent-05 raw text before the JSON (2 non-JSON joins);
  agent-06's call never reached the client (1 dropped).
- samples/formats (samples/make_format_samples.py): 19 records of 9 other formats (10 files, two of
  them a Batch input/output pair): 17 exchanges, 2 skipped (a HAR page load, an OTel HTTP span), no
  error. 15 of them declare the one tool `get_weather` (no `strict`: a leaked `strict: null` with
  model-dump, none with client-fields) -> 66 + 15 = 81 schemas, 39 + 15 = 54 leaking in 20 + 15 = 35
  prompts. 16 are rendered (the Batch output line without its input has no request): 21 + 16 = 37
  prompts compared, 35 differ old vs new. The server log's first line brings a raw completion with 10
  recorded steps and 1 DeepSeek V3.1 call: 21 raw completions, 27 calls (26 under `recorded`, over
  19 replays); its second line logs token ids only (no --tokenizer here: not re-streamed). Their
  served calls are all well formed: the served counts stay (1 dropped, 2 non-JSON).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
SUMMARY_COLUMNS = [
    "side",
    "exchanges",
    "ingest_errors",
    "tool_schemas",
    "schemas_with_leaked_null",
    "prompts_with_leaked_null",
    "prompts_diverged_from_reference",
    "render_failures",
    "calls_whole",
    "calls_dropped",
    "non_json_joins",
    "argument_mismatches",
]

runner = CliRunner()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "samples"
    result = runner.invoke(app, ["audit", str(SAMPLES), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "replay audit" in result.output  # the summary table's title
    return out


def query_json(run_dir: Path, *args: str) -> list[dict]:
    result = runner.invoke(app, ["query", *args, "--run", str(run_dir), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_summary_columns_and_counts(run_dir: Path) -> None:
    rows = query_json(run_dir, "summary")
    assert [list(r) for r in rows] == [SUMMARY_COLUMNS] * 4
    by = {r["side"]: r for r in rows}
    assert list(by) == ["served", "old", "new", "reference"]
    for r in rows:
        # served: the calls of the 20 raw completions whose exchange has a served response, the ones
        # its calls_dropped is counted over (the server log's srv-1 and its 1 DeepSeek call have none)
        assert (r["exchanges"], r["ingest_errors"], r["tool_schemas"], r["calls_whole"]) == (38, 5, 81, 26 if r["side"] == "served" else 27)
    assert {k: by["old"][k] for k in SUMMARY_COLUMNS[4:]} == {
        "schemas_with_leaked_null": 54,
        "prompts_with_leaked_null": 35,
        "prompts_diverged_from_reference": 35,
        "render_failures": 0,
        "calls_whole": 27,
        "calls_dropped": 0,
        "non_json_joins": 0,
        "argument_mismatches": 0,
    }
    assert {k: by["new"][k] for k in SUMMARY_COLUMNS[4:]} == {
        "schemas_with_leaked_null": 5,
        "prompts_with_leaked_null": 5,
        "prompts_diverged_from_reference": 5,
        "render_failures": 0,
        "calls_whole": 27,
        "calls_dropped": 0,
        "non_json_joins": 0,
        "argument_mismatches": 0,
    }
    ref = by["reference"]
    assert (ref["schemas_with_leaked_null"], ref["prompts_with_leaked_null"], ref["render_failures"]) == (0, 0, 0)
    assert (ref["prompts_diverged_from_reference"], ref["calls_dropped"], ref["non_json_joins"]) == (None, None, None)
    served = by["served"]
    assert (served["schemas_with_leaked_null"], served["render_failures"]) == (None, None)
    assert (served["calls_dropped"], served["non_json_joins"], served["argument_mismatches"]) == (1, 2, 0)


def test_null_leaks_by_field(run_dir: Path) -> None:
    rows = query_json(run_dir, "null_leaks")
    got = {(r["side"], r["field"]): r["schemas_leaking"] for r in rows}
    assert got == {
        ("old", "strict"): 7 * 3 + 5 * 2 + 8 + 15,  # read, edit, todo_list; web_search, get_time; get_weather; formats' get_weather
        ("old", "description"): 7 + 5,  # edit; get_time
        ("old", "parameters"): 5,  # get_time
        ("new", "parameters"): 5,  # get_time
    }


def test_divergent_prompts(run_dir: Path) -> None:
    rows = {r["comparison"]: r for r in query_json(run_dir, "divergent_prompts")}
    assert (rows["old vs new"]["prompts_compared"], rows["old vs new"]["prompts_diverged"]) == (37, 35)
    assert rows["new vs reference"]["prompts_diverged"] == 5
    assert rows["old vs new"]["extra_chars_total"] > 0
    assert rows["old vs new"]["extra_tokens_total"] is None  # no --tokenizer


def test_dropped_calls_and_chunkings(run_dir: Path) -> None:
    rows = query_json(run_dir, "dropped_calls")
    chunkings = {r["chunking"] for r in rows}
    # built-in parsers on both sides: by default they replay recorded and whole only (issue 9 item 4)
    assert chunkings == {"parse", "recorded", "whole"}
    for r in rows:
        assert r["calls_dropped"] == 0 and r["stop_with_calls"] == 0 and r["replay_errors"] == 0, r
        # recorded: only the 18 streamed v1 exchanges (agent-01 and gw-04 were not streamed) and the
        # server log's srv-1 have steps, holding 26 of the 27 calls; every other chunking replays
        # all 21 raw completions
        assert r["replays"] == (19 if r["chunking"] == "recorded" else 21), r
        assert r["calls_whole"] == (26 if r["chunking"] == "recorded" else 27), r


def test_non_json_joins_served(run_dir: Path) -> None:
    rows = {(r["side"], r["chunking"]): r for r in query_json(run_dir, "non_json_joins")}
    served = rows[("served", "served")]
    assert (served["non_json_joins"], served["empty_arguments"], served["argument_mismatches"]) == (2, 1, 0)
    assert all(r["non_json_joins"] == 0 for k, r in rows.items() if k[0] != "served")


def test_ingest_errors_name_file_and_line(run_dir: Path) -> None:
    rows = query_json(run_dir, "--sql", "SELECT source_file, source_line, reason FROM ingest_errors ORDER BY source_line")
    assert [(Path(r["source_file"]).name, r["source_line"], r["reason"]) for r in rows] == [
        ("malformed.jsonl", 2, "bad-json"),
        ("malformed.jsonl", 3, "not-object"),
        ("malformed.jsonl", 4, "missing-request"),
        ("malformed.jsonl", 5, "tools-not-list"),
        ("malformed.jsonl", 6, "not-utf8"),
    ]


def test_report_md(run_dir: Path) -> None:
    text = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "54 of 81 tool schemas carried a null the client never sent with `model-dump`; 5 with `client-fields`." in text
    assert "| count | served | old | new | reference |" in text
    assert "| schemas_with_leaked_null | – | 54 | 5 | 0 |" in text
    assert "2 exchanges from otel: request rebuilt from logged fields; no raw completion, not re-streamed;" in text
    # each bad line is named with its file and line
    assert "malformed.jsonl:2 bad-json" in text and "| " in text.split("## Lines that did not become exchanges")[1]
    assert text.split("## Lines that did not become exchanges")[1].count("malformed.jsonl:") == 5
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["ingest"]["exchanges"] == 38 and meta["ingest"]["errors"] == 5 and meta["ingest"]["skipped"] == 2
    assert set(meta["seconds"]) >= {"ingest", "render", "stream"}


@pytest.mark.parametrize("fmt, needle", [("csv", "side,exchanges,ingest_errors"), ("md", "| side | exchanges"), ("table", "schemas_with_leaked")])
def test_query_formats(run_dir: Path, fmt: str, needle: str) -> None:
    result = runner.invoke(app, ["query", "summary", "--run", str(run_dir), "--format", fmt], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert needle in result.output


def test_query_errors_are_clear(run_dir: Path, tmp_path: Path) -> None:
    bad = runner.invoke(app, ["query", "no_such_query", "--run", str(run_dir)])
    assert bad.exit_code == 1 and "no query 'no_such_query'" in bad.output
    sql = runner.invoke(app, ["query", "--run", str(run_dir), "--sql", "SELECT nope FROM exchanges"])
    assert sql.exit_code == 1 and "nope" in sql.output
    notrun = runner.invoke(app, ["query", "summary", "--run", str(tmp_path)])
    assert notrun.exit_code == 1 and "not a run folder" in notrun.output


def test_planted_parser_plugin_shows_dropped_calls(run_dir: Path, tmp_path: Path) -> None:
    """A plugin old parser that loses calls completed in the last delta (the vLLM-style missing
    end-of-stream flush): the audit must count them as dropped, and the new side (built-in) none."""
    plugin = tmp_path / "late_flush.py"
    plugin.write_text(
        "from replay.parsers.hermes import HermesParser\n"
        "from replay.parsers.base import StreamDelta\n"
        "class LateFlush(HermesParser):\n"
        "    '''Withholds each step's call deltas until the next step; finish() forgets them.'''\n"
        "    def __init__(self, tools=None):\n"
        "        super().__init__(tools)\n"
        "        self._held = []\n"
        "    def feed(self, delta):\n"
        "        out = super().feed(delta)\n"
        "        calls, self._held = self._held, out.calls\n"
        "        return StreamDelta(content=out.content, calls=calls)\n"
        "    def finish(self):\n"
        "        return StreamDelta(content=super().finish().content)\n"
    )
    out = tmp_path / "run"
    shutil.copytree(run_dir, out)
    result = runner.invoke(
        app, ["stream", "--run", str(out), "--old-parser", f"{plugin}:LateFlush", "--chunkings", "whole", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    rows = {(r["side"], r["chunking"]): r for r in query_json(out, "dropped_calls")}
    # under `whole` every Hermes call is in the one and only delta: all 7 calls of the 7 coding-agent
    # completions are lost (6 of them with finish_reason stop). The plugin is a HermesParser
    # (name "hermes"), so the DeepSeek exchanges keep the built-in deepseek_v31 parser: 0 dropped there.
    assert rows[("old", "whole")]["calls_dropped"] == 7
    assert rows[("old", "whole")]["stop_with_calls"] == 6
    assert rows[("new", "whole")]["calls_dropped"] == 0


@pytest.mark.parametrize(
    "args, message, code",
    [
        # a chunking name of the wrong form is a usage error (exit 2): tests/test_cli.py
        # a name that is no built-in is a bad option value (exit 2); a plugin that fails to load, 1
        (["--old-serializer", "nope"], "nope", 2),
        (["--old-parser", "no/such/file.py:P"], "no/such/file.py:P", 1),
    ],
)
def test_bad_options_fail_before_any_work(tmp_path: Path, args: list[str], message: str, code: int) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", str(SAMPLES), "--out", str(out), "--quiet", *args])
    assert result.exit_code == code, result.output
    assert message in result.output
    assert not out.exists()


def test_chat_template_that_does_not_compile(tmp_path: Path) -> None:
    tmpl = tmp_path / "broken.jinja"
    tmpl.write_text("{% if %}")
    result = runner.invoke(app, ["audit", str(SAMPLES), "--out", str(tmp_path / "run"), "--chat-template", str(tmpl), "-q"])
    assert result.exit_code == 1 and "does not compile" in result.output


def test_render_failures_are_said_and_left_out_of_the_denominators(tmp_path: Path) -> None:
    """A template that raises on requests with tools: those prompts are failures, named in the
    headline with their error, and the leak sentence counts only the schemas that rendered."""
    tmpl = tmp_path / "no_tools.jinja"
    tmpl.write_text("{% if tools %}{{ raise_exception('tools are not supported') }}{% endif %}"
                    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", str(SAMPLES), "--out", str(out), "--chat-template", str(tmpl), "-q"])
    assert result.exit_code == 0, result.output
    text = (out / "report.md").read_text()
    # 35 of the 37 rendered requests carry tools: each side fails those 35 and renders the two without
    assert "Render failures: 35 on the old side, 35 on the new side, 35 on the reference" in text
    # the template's own raise_exception is its rejection, listed per side with one exchange
    import re

    assert re.search(r"Top render-failure reasons, old: `rejected by the template: tools are not supported` \(35, e\.g\. `[^`]+`\)\.", text)
    assert "35 exchanges not judged on the render checks" in text
    assert "0 of 0 tool schemas" not in text and "of 81 tool schemas" not in text
    summary = {r["side"]: r for r in query_json(out, "summary")}
    # the 2 prompts rendered declare no tool: no schema judged, so no count of leaked nulls (null, not 0)
    assert summary["old"]["render_failures"] == 35 and summary["old"]["schemas_with_leaked_null"] is None
    assert summary["old"]["prompts_with_leaked_null"] == 0


def test_replay_errors_are_said(tmp_path: Path, run_dir: Path) -> None:
    plugin = tmp_path / "crash.py"
    plugin.write_text("from replay.parsers.hermes import HermesParser\n"
                      "class Crash(HermesParser):\n"
                      "    def feed(self, delta):\n"
                      "        raise RuntimeError('parser bug')\n")
    out = tmp_path / "run"
    shutil.copytree(run_dir, out)
    result = runner.invoke(app, ["stream", "--run", str(out), "--old-parser", f"{plugin}:Crash", "--chunkings", "whole,char", "-q"])
    assert result.exit_code == 0, result.output
    text = (out / "report.md").read_text()
    # 7 Hermes completions x 2 chunkings; the DeepSeek exchanges keep their built-in parser
    assert "14 old-side replays failed" in text and "RuntimeError: parser bug" in text


def test_ingest_only_run_has_null_stage_counts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, ["ingest", str(SAMPLES), "--out", str(out), "-q"])
    # 45 records on 44 lines: samples/formats/otel-spans.jsonl holds 3 spans on 2 lines
    assert result.exit_code == 0 and "44 lines, 45 records: 38 exchanges, 5 errors, 2 skipped" in result.output
    old = {r["side"]: r for r in query_json(out, "summary")}["old"]
    assert (old["exchanges"], old["tool_schemas"]) == (38, 81)
    assert old["schemas_with_leaked_null"] is None and old["calls_dropped"] is None and old["render_failures"] is None


def test_family_chosen_from_the_model_name(run_dir: Path) -> None:
    rows = query_json(
        run_dir,
        "--sql",
        "SELECT e.model, s.parser, s.reasoning_open, s.calls_whole FROM streams s JOIN exchanges e USING (exchange_id) "
        "WHERE s.side = 'reference' AND e.exchange_id LIKE 'mg-%' ORDER BY e.exchange_id",
    )
    assert [(r["model"], r["parser"], r["calls_whole"]) for r in rows] == [
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3_coder", 2),
        ("moonshotai/Kimi-K2-Instruct", "kimi_k2", 2),
        ("zai-org/GLM-4.6", "glm45", 2),
        ("openai/gpt-oss-20b", "harmony", 1),
        ("google/gemma-4-31b-it", "gemma4", 2),
        ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "mistral", 2),
        ("MiniMaxAI/MiniMax-M2", "minimax_m2", 2),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama3_json", 1),
    ]
    # the MiniMax-M2 prompt ends inside <think>: its completion starts in the reasoning section
    assert [r["reasoning_open"] for r in rows] == [False] * 6 + [True, False]
    # every family's calls, typed by the declared schema where the syntax is text (days: integer)
    calls = query_json(run_dir, "--sql", "SELECT DISTINCT arguments FROM calls WHERE side = 'reference' AND name = 'get_weather' AND exchange_id LIKE 'mg-%'")
    assert [c["arguments"] for c in calls] == ['{"city": "Paris", "days": 3}']


def test_formats_and_markup_like_text_in_tables(run_dir: Path) -> None:
    """Family markers such as [TOOL_CALLS] and [/THINK] are text, never rich markup."""
    result = runner.invoke(app, ["formats"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    for family in ("hermes", "qwen3_coder", "mistral", "harmony", "gemma4", "seed_oss", "granite4"):
        assert family in result.output
    assert "[/THINK]" in result.output
    table = runner.invoke(app, ["query", "--run", str(run_dir), "--sql", "SELECT '[/THINK] [TOOL_CALLS]' AS x"], env={"COLUMNS": "250"})
    assert table.exit_code == 0 and "[/THINK] [TOOL_CALLS]" in table.output
    bad = runner.invoke(app, ["audit", str(SAMPLES), "--out", str(run_dir.parent / "x"), "--chunkings", "[/b]"])
    assert bad.exit_code == 2 and "unknown chunking '[/b]'" in bad.output


def test_served_checks_and_capture_formats(run_dir: Path) -> None:
    """The faults planted in samples/formats (samples/make_format_samples.py), counted from the
    streams alone, and what each format lacks."""
    rows = {(r["capture_format"], r["route"]): r for r in query_json(run_dir, "served_checks")}
    assert (rows[("sse", "chat.completions")]["name_repeats"], rows[("sse", "chat.completions")]["stop_with_calls"]) == (1, 1)
    assert rows[("sse", "messages")]["index_faults"] == 1
    assert rows[("body", "chat.completions")]["markup_in_content"] == 1
    assert rows[("v1", "chat.completions")]["non_json_calls"] == 2
    faults = ("name_repeats", "index_faults", "markup_in_content", "stop_with_calls")
    assert sum(r[k] or 0 for r in rows.values() for k in faults) == 4
    # a count over nothing judged is null, not 0: the server log holds no served side, a body no stream
    assert [rows[("serverlog", "chat.completions")][k] for k in ("served", "calls", "non_json_calls", *faults)] == [0] + [None] * 6
    assert (rows[("body", "chat.completions")]["name_repeats"], rows[("body", "chat.completions")]["index_faults"]) == (None, None)
    lacks = {r["capture_format"]: r for r in query_json(run_dir, "capture_formats")}
    assert {k: v["exchanges"] for k, v in lacks.items()} == {
        "v1": 21, "body": 1, "har": 2, "litellm": 2, "openai-batch": 4, "otel": 2, "serverlog": 2, "sse": 4}
    assert {k: v["re_streamable"] for k, v in lacks.items()} == {
        "v1": 20, "body": 0, "har": 0, "litellm": 0, "openai-batch": 0, "otel": 0, "serverlog": 1, "sse": 0}
    assert lacks["otel"]["lacks"] == "exact_request, raw_completion, stream"
