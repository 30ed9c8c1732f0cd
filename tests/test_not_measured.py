"""A count over nothing judged is `–` / null, never 0 (issue #20, "a number in a PR that nothing measured").

Two small v1 captures, audited by the real CLI:

- ``noserved``: requests with a tool and a raw completion holding one Hermes call each, but no
  response and no stream: nothing served to judge. The served column of ``summary``, the ``served:``
  verdict rows, ``served_checks`` and ``fidelity`` must say null, and the terminal, ``report.md``
  and ``report.html`` `–` or "not judged", where they used to print "0 dropped, 0 non-JSON".
- ``nocalls``: requests without tools whose raw completion and served response hold no call: no
  call to drop, no call whose arguments could be non-JSON, no tool schema to leak a null.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app

runner = CliRunner()
N = 3
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _audit(tmp: Path, name: str, records: list[dict]) -> tuple[Path, str]:
    cap = _write(tmp / f"{name}.jsonl", records)
    out = tmp / name
    result = runner.invoke(app, ["audit", str(cap), "--out", str(out), "--jobs", "1"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return out, result.output


def _query(run: Path, name: str, fmt: str = "json") -> str:
    result = runner.invoke(app, ["query", name, "--run", str(run), "--format", fmt])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def noserved(tmp_path_factory) -> tuple[Path, str]:
    out = 'Sure.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    records = [
        {"id": f"ns-{i}", "route": "chat.completions", "model": "Qwen/Qwen3-32B",
         "request": {"model": "Qwen/Qwen3-32B", "messages": [{"role": "user", "content": "hi"}], "tools": [TOOL]},
         "server": {"output_text": out}}
        for i in range(N)
    ]
    return _audit(tmp_path_factory.mktemp("nm"), "noserved", records)


@pytest.fixture(scope="module")
def nocalls(tmp_path_factory) -> tuple[Path, str]:
    records = [
        {"id": f"nc-{i}", "route": "chat.completions", "model": "Qwen/Qwen3-32B",
         "request": {"model": "Qwen/Qwen3-32B", "messages": [{"role": "user", "content": "hi"}]},
         "response": {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello."}, "finish_reason": "stop"}]},
         "server": {"output_text": "Hello."}}
        for i in range(N)
    ]
    return _audit(tmp_path_factory.mktemp("nm"), "nocalls", records)


def test_summary_served_column_is_null_without_a_served_response(noserved) -> None:
    run, terminal = noserved
    rows = {r["side"]: r for r in json.loads(_query(run, "summary"))}
    served, old = rows["served"], rows["old"]
    assert (served["calls_whole"], served["calls_dropped"], served["non_json_joins"], served["argument_mismatches"]) == (None,) * 4
    # the replays judged every call: their zeros are measurements
    assert (old["calls_whole"], old["calls_dropped"], old["non_json_joins"], old["argument_mismatches"]) == (N, 0, 0, 0)
    got = {r["side"]: r for r in csv.DictReader(io.StringIO(_query(run, "summary", "csv")))}
    assert (got["served"]["calls_whole"], got["served"]["calls_dropped"], got["served"]["non_json_joins"]) == ("", "", "")
    assert "│ calls_whole                     │      – │   3 │   3 │         3 │" in terminal
    assert "│ calls_dropped                   │      – │   0 │   0 │         – │" in terminal


def test_served_verdict_rows_and_served_checks_are_null(noserved) -> None:
    run, terminal = noserved
    verdicts = {r["check"]: r for r in json.loads(_query(run, "verdicts"))}
    for check in ("served:client-error", "served:name-repeat", "served:non-json-join", "served:finish-reason"):
        row = verdicts[check]
        assert row["exchanges"] == 0 and row["same-ok"] is None and row["wrong"] is None, row
    assert verdicts["dropped-call"]["same-ok"] == N and verdicts["dropped-call"]["not-judged"] == 0
    (sc,) = json.loads(_query(run, "served_checks"))
    assert (sc["exchanges"], sc["served"], sc["streamed"]) == (N, 0, 0)
    assert [sc[k] for k in ("calls", "non_json_calls", "name_repeats", "index_faults", "markup_in_content", "stop_with_calls")] == [None] * 6
    (fid,) = json.loads(_query(run, "fidelity"))
    assert fid["exchanges_compared"] == 0 and fid["reproduced"] is None and fid["not_reproduced"] is None
    assert "│ served:name-repeat   │     – │        – │      – │       – │" in terminal


def test_report_md_and_html_say_not_judged(noserved) -> None:
    run, terminal = noserved
    md = (run / "report.md").read_text(encoding="utf-8")
    assert "| calls_dropped | – | 0 | 0 | – |" in md
    assert "| non_json_joins | – | 0 | 0 | – |" in md
    assert "| served:name-repeat | – | – | – | – | – | – | – | – | 0 | – |" in md
    assert "| v1 | chat.completions | 3 | 0 | 0 | – | – | – | – | – | – |" in md
    assert "No exchange has a captured response or stream: what clients received was not judged" in md
    assert "What clients received" not in md.split("## Summary")[0]
    assert "No exchange has a captured response or stream" in terminal
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "nothing served to judge" in page and "Nothing clients received has a fault" not in page


def test_no_call_to_judge_is_not_zero_faults(nocalls) -> None:
    run, terminal = nocalls
    rows = {r["side"]: r for r in json.loads(_query(run, "summary"))}
    for side in ("old", "new"):
        r = rows[side]
        # no tools declared, no call in the completions: nothing to leak, drop or join
        assert (r["calls_whole"], r["schemas_with_leaked_null"], r["calls_dropped"], r["non_json_joins"], r["argument_mismatches"]) == (
            0, None, None, None, None), r
        assert (r["prompts_with_leaked_null"], r["render_failures"]) == (0, 0)  # 3 prompts rendered: measured
    served = rows["served"]
    assert (served["calls_dropped"], served["non_json_joins"], served["argument_mismatches"]) == (None, None, None)
    dropped = json.loads(_query(run, "dropped_calls"))
    assert dropped and all((d["replays"], d["calls_whole"], d["calls_dropped"], d["stop_with_calls"]) == (N, 0, None, None) for d in dropped)
    md = (run / "report.md").read_text(encoding="utf-8")
    assert "Old side (parser `hermes`): dropped calls not measured (no call in the whole-text parse of a replayed completion)" in md
    assert f"What clients received ({N} captured responses): non-JSON arguments not measured (no call received)" in md
    assert "0 with non-JSON" not in md and "0 of 0" not in md
    assert "dropped calls not measured" in terminal


def test_a_gate_over_nothing_judged_is_an_error_not_a_pass(noserved) -> None:
    """`--fail-on served:name-repeat>0` on a capture with no served stream read a 0 and passed;
    nothing was judged, so it exits 1 naming the check (as a gate on a stage that never ran does)."""
    run, _ = noserved
    res = runner.invoke(app, ["report", "--run", str(run), "--fail-on", "served:name-repeat>0"])
    assert res.exit_code == 1, res.output
    assert "--fail-on served:name-repeat>0: nothing judged for served:name-repeat" in res.output
    # a check that judged every exchange gates as before
    assert runner.invoke(app, ["report", "--run", str(run), "--fail-on", "dropped-call:broken>0"]).exit_code == 0
    assert runner.invoke(app, ["report", "--run", str(run), "--fail-on", "broken"]).exit_code == 0


def test_a_side_that_rendered_no_schema_has_no_leak_count(tmp_path) -> None:
    """The new side's template rejects every request with tools: it serialized no schema that
    reached a prompt, so its leaked-null count is – (null), not "0 of 0"."""
    tmpl = tmp_path / "reject.jinja"
    tmpl.write_text("{% if tools %}{{ raise_exception('tools are not supported') }}{% endif %}"
                    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}", encoding="utf-8")
    ok = tmp_path / "ok.jinja"
    ok.write_text("{% for t in tools or [] %}{{ t | tojson }}\n{% endfor %}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
                  encoding="utf-8")
    records = [{"id": f"r-{i}", "route": "chat.completions", "model": "m",
                "request": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [TOOL]}} for i in range(N)]
    run, _ = _audit(tmp_path, "reject", records + [])
    res = runner.invoke(app, ["render", "--run", str(run), "--old-chat-template", str(ok), "--new-chat-template", str(tmpl),
                              "--chat-template", str(ok)])
    assert res.exit_code == 0, res.output
    rows = {r["side"]: r for r in json.loads(_query(run, "summary"))}
    assert (rows["old"]["schemas_with_leaked_null"], rows["new"]["schemas_with_leaked_null"], rows["new"]["render_failures"]) == (N, None, N)
    md = (run / "report.md").read_text(encoding="utf-8")
    assert f"{N} of {N} tool schemas carried a null the client never sent with `model-dump`; – of 0 with `client-fields`." in md
