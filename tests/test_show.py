"""`replay show ID --run RUN` (replay/show.py): prompt diffs re-rendered from run.json, served
against replayed calls, the delta where a stream went wrong, why an exchange is unreliable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.parsers.hermes import HermesParser
from replay.show import where_it_went_wrong
from replay.stream import split
from sides_data import call_text, write_capture

runner = CliRunner()
SAMPLES = Path(__file__).resolve().parent.parent / "samples"

#: A new-side parser that loses a delta starting with "}": the fault is at one cut.
PLUGIN = '''
from replay.parsers.base import StreamDelta
from replay.parsers.hermes import HermesParser


class LoseBrace(HermesParser):
    def feed(self, delta):
        if delta.startswith("}"):
            return StreamDelta()
        return super().feed(delta)
'''


@pytest.fixture(scope="module")
def samples_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("show") / "run"
    result = runner.invoke(app, ["audit", str(SAMPLES), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    return out


def show(*args: str):
    return runner.invoke(app, ["show", *args])


def test_leaked_null_and_served_dropped_call(samples_run: Path):
    result = show("agent-06", "--run", str(samples_run))
    assert result.exit_code == 0, result.output
    text = result.output
    # the prompts, re-rendered: the judged SHA-256s match (no "not the judged prompt" note)
    assert "old       model-dump     json-tools: 1,494 chars" in text and "not the judged prompt" not in text
    assert "leaked nulls: 0 $.function.strict, 2 $.function.description" in text
    diff = text.split("== prompt diff: old -> new\n")[1].split("\n== ")[0].splitlines()
    assert diff[:2] == ["--- old", "+++ new"]
    assert '-"strict": null}' in diff and '+"required": ["path"]}}' in diff and '-"description": null,' in diff
    assert "new and reference: identical (1,425 chars)" in text
    # served: the client got no call where every replay finds the write call
    assert "served               no call; finish_reason stop" in text
    why = text.split("== why unreliable (served against the old replay, field by field)\n")[1]
    assert "calls          DIFFER: served no call" in why and "old replay 0:write(" in why
    assert "finish_reason  DIFFERS: served stop; old replay tool_calls" in why and "content        same" in why


def test_markdown_and_masking(samples_run: Path):
    md = show("agent-06", "--run", str(samples_run), "--format", "md")
    assert md.exit_code == 0
    assert md.output.startswith("### `replay show agent-06`") and "```diff\n--- old\n+++ new" in md.output
    masked = show("agent-06", "--run", str(samples_run), "--mask")
    assert masked.exit_code == 0
    assert "test_env" not in masked.output and "monkeypatch" not in masked.output
    assert "0:write(" in masked.output  # tool names stay


def test_unknown_exchange_and_bad_format(samples_run: Path, tmp_path: Path):
    bad = show("agent-6", "--run", str(samples_run))
    assert bad.exit_code == 1 and "no exchange 'agent-6'" in bad.stderr and "closest: agent-06" in bad.stderr
    assert show("agent-06", "--run", str(tmp_path)).exit_code == 1
    fmt = show("agent-06", "--run", str(samples_run), "--format", "html")
    assert fmt.exit_code == 2 and "Invalid value for '--format'" in fmt.stderr


def test_the_delta_where_it_went_wrong(tmp_path: Path):
    plugin = tmp_path / "lose.py"
    plugin.write_text(PLUGIN, encoding="utf-8")
    capture = write_capture(tmp_path / "c.jsonl", [["read"]])
    out = tmp_path / "run"
    result = runner.invoke(app, ["audit", str(capture), "--out", str(out), "-q", "--new-parser", f"{plugin}:LoseBrace", "--chunkings", "whole,char"])
    assert result.exit_code == 0, result.output
    text = show("x0", "--run", str(out)).output
    section = text.split("== smallest failing chunking: char (")[1].split("\n== ")[0]
    lines = section.splitlines()
    marked = [line for line in lines if "<-- went wrong here" in line]
    deltas = split(call_text("read"), "char", markers=HermesParser.markers)  # markers stay whole
    first_brace = next(i for i, d in enumerate(deltas) if d.startswith("}"))
    assert marked == [f"{first_brace + 1:>4} {json.dumps('}')}   <-- went wrong here (the cut before this delta)"]
    assert f"cutting before delta {first_brace + 1} breaks it: 0 calls, the reference parse has 1" in section


def test_where_it_went_wrong_in_the_library():
    class LoseBrace(HermesParser):
        def feed(self, delta):
            if delta.startswith("}"):
                from replay.parsers.base import StreamDelta

                return StreamDelta()
            return super().feed(delta)

    text = call_text("read")
    expected = HermesParser().parse(text)
    for n in range(2, 14):  # a fixed size that cuts just before a "}"
        deltas = split(text, f"fixed-{n}", markers=HermesParser.markers)
        if any(d.startswith("}") for d in deltas):
            break
    k, why = where_it_went_wrong(LoseBrace, None, deltas, expected)
    assert k == next(i for i, d in enumerate(deltas) if d.startswith("}")) and "arguments" in why
    assert where_it_went_wrong(HermesParser, None, deltas, expected) == (None, "right under every prefix")

    class DropAll(HermesParser):
        def finish(self):
            from replay.parsers.base import StreamDelta

            super().finish()
            return StreamDelta()

        def feed(self, delta):
            d = super().feed(delta)
            from replay.parsers.base import StreamDelta

            return StreamDelta(content=d.content)

    k, why = where_it_went_wrong(DropAll, None, deltas, expected)
    assert k is None and why.startswith("wrong even with the completion as one delta: 0 calls")


@pytest.mark.parametrize("xid", ["agent-01", "agent-06"])
def test_the_readme_examples_are_what_show_prints(samples_run: Path, xid: str):
    readme = (Path(__file__).resolve().parent.parent / "docs" / "reports.md").read_text(encoding="utf-8")
    block = readme.split(f"$ replay show {xid} --run runs/samples\n")[1].split("```")[0]
    text = show(xid, "--run", str(samples_run)).output
    shown = [line for line in block.splitlines() if "..." not in line and line]
    assert len(shown) >= 8
    for line in shown:
        assert line in text.splitlines(), line


def test_render_exemplars_in_report_md_are_text_not_python_reprs(tmp_path) -> None:
    """A render exemplar's lines in report.md name the leaked null paths, or ``none``, and the
    error, or ``-``: never ``[]`` or ``None`` (found by a new-user pass after ``replay render
    --old serializer=exclude-none``)."""
    from typer.testing import CliRunner

    from replay.cli import app

    runner = CliRunner()
    out = tmp_path / "run"
    root = Path(__file__).resolve().parents[1]
    assert runner.invoke(app, ["audit", str(root / "samples"), "--out", str(out), "--jobs", "1", "-q"]).exit_code == 0
    res = runner.invoke(app, ["render", "--run", str(out), "--old", "serializer=exclude-none", "--jobs", "1", "-q"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in (out / "report.md").read_text(encoding="utf-8").splitlines() if ": leaked nulls " in ln]
    assert lines, "no render exemplar"
    assert "old       exclude-none: leaked nulls none, prompt sha256 " in lines[0] and lines[0].endswith(", error -")
    assert any(": leaked nulls 1 $.function.parameters, " in ln for ln in lines)
    assert not any("[" in ln or "None" in ln for ln in lines)
