"""report.md, the exemplars and report.html stay bounded on a huge completion (issue #20).

A user's capture had one 5 MB completion with 1.3M recorded steps: report.md came out at 5.3 MB,
an exemplar at 26 MB, and the report stage's time grew with the completion (the exemplar masked the whole completion,
every content and argument, then wrote them all; report.html ran a char-by-char difflib over them,
whose time grows with the product of the lengths). Here a generated v1 capture with one exchange
of ~1 MB and 200,000 recorded steps, audited with plugin parsers that stream in linear time (the
old side right, the new side losing its calls past 1,000 deltas, so the smallest failing
chunking is `recorded` with all its deltas): every output must be bounded, every cut marked with
how much it left out and where the whole text is (`replay show ID --run RUN`), and the report
stage must mask only what it shows.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app

runner = CliRunner()
XID = "big-1"
STEP = 5
PLUGIN = '''
from replay.parsers.base import CallDelta, StreamDelta
from replay.parsers.hermes import HermesParser


class Buffered(HermesParser):
    """Streams nothing until finish(), then its whole-text parse as one step (linear time)."""

    def __init__(self, tools=None):
        super().__init__(tools)
        self._parts = []

    def feed(self, delta):
        self._parts.append(delta)
        return StreamDelta()

    def finish(self):
        got = self.parse("".join(self._parts))
        return StreamDelta(content=got.content, calls=[
            CallDelta(index=i, name=c.name, arguments=c.arguments, id=f"call_{i}") for i, c in enumerate(got.calls)])


class LosesLongStreams(Buffered):
    """Loses its calls when fed more than 1,000 deltas: a fault only long streams hit."""

    def finish(self):
        out = super().finish()
        return StreamDelta(content=out.content) if len(self._parts) > 1000 else out
'''


def big_capture(path: Path, content_chars: int, argument_chars: int) -> tuple[int, int]:
    """Write a v1 capture of one exchange whose raw completion is ``content_chars`` of prose and a
    Hermes call to ``write`` with ``argument_chars`` of file content, recorded in steps of
    ``STEP`` chars. Returns (completion chars, steps)."""
    rnd = random.Random(20)
    words = ["alpha", "beta", "gamma", "file", "line", "value", "the", "config", "module", "test"]

    def prose(n: int) -> str:
        out, size = [], 0
        while size < n:
            out.append(rnd.choice(words))
            size += len(out[-1]) + 1
        return " ".join(out)[:n]

    call = "<tool_call>\n" + json.dumps({"name": "write", "arguments": {"path": "big.txt", "content": prose(argument_chars)}}) + "\n</tool_call>"
    text = prose(content_chars) + call
    steps = [text[i : i + STEP] for i in range(0, len(text), STEP)]
    tool = {"type": "function", "function": {"name": "write", "description": "Write a file.", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}
    record = {"id": XID, "route": "chat.completions", "model": "Qwen/Qwen3-32B",
              "request": {"model": "Qwen/Qwen3-32B", "messages": [{"role": "user", "content": "write it"}], "tools": [tool]},
              "server": {"output_text": text, "steps": steps}}
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return len(text), len(steps)


@pytest.fixture(scope="module")
def big_run(tmp_path_factory) -> tuple[Path, int, int]:
    tmp = tmp_path_factory.mktemp("big")
    chars, steps = big_capture(tmp / "big.jsonl", 800_000, 200_000)
    (tmp / "plugins.py").write_text(PLUGIN, encoding="utf-8")
    run = tmp / "run"
    result = runner.invoke(app, [
        "audit", str(tmp / "big.jsonl"), "--out", str(run), "--jobs", "1", "--quiet", "--chunkings", "recorded,whole",
        "--old-parser", f"{tmp / 'plugins.py'}:Buffered", "--new-parser", f"{tmp / 'plugins.py'}:LosesLongStreams",
    ])
    assert result.exit_code == 0, result.output
    return run, chars, steps


def test_the_capture_is_big_and_the_exemplar_is_its_long_stream(big_run) -> None:
    run, chars, steps = big_run
    assert chars > 1_000_000 and steps > 200_000
    doc = json.loads((run / "exemplars" / "dropped-call.json").read_text(encoding="utf-8"))
    assert (doc["exchange_id"], doc["chunking"], doc["deltas"], doc["completion_chars"]) == (XID, "recorded", steps, chars)


def test_exemplar_files_are_bounded_and_say_what_was_cut(big_run) -> None:
    from replay.report.exemplars import COMPLETION_CHARS, MAX_DELTAS, TEXT_CHARS

    run, chars, steps = big_run
    files = sorted((run / "exemplars").glob("*.json"))
    assert files
    for f in files:
        assert f.stat().st_size < 64_000, (f.name, f.stat().st_size)
    doc = json.loads((run / "exemplars" / "dropped-call.json").read_text(encoding="utf-8"))
    show = f"`replay show {XID} --run RUN`"
    assert len(doc["completion"]) == COMPLETION_CHARS
    assert doc["completion_cut"] == f"… {chars - COMPLETION_CHARS:,} more chars; {show}"
    shown = doc["delta_texts"]
    assert 0 < len(shown) <= MAX_DELTAS and "".join(shown) == doc["completion"][: sum(map(len, shown))]
    assert doc["deltas_cut"] == f"… {steps - len(shown):,} more deltas ({chars - sum(map(len, shown)):,} chars); {show}"
    (call,) = doc["expected"]["calls"]
    assert call["arguments_chars"] > 200_000 and call["arguments"].endswith(f"… {call['arguments_chars'] - TEXT_CHARS:,} more chars; {show}")
    new = doc["got_new"]  # the new side lost the call, and kept the 800,000 chars of prose before it
    assert new["calls"] == [] and new["content_chars"] == 800_000 and new["finish_reason"] == "stop"
    assert new["content"].endswith(f"… {800_000 - TEXT_CHARS:,} more chars; {show}") and len(new["content"]) < TEXT_CHARS + 80


def test_report_md_and_html_are_bounded(big_run) -> None:
    from replay.report.html import vega_runtime

    run, chars, steps = big_run
    md = (run / "report.md").read_text(encoding="utf-8")
    assert len(md.encode()) < 40_000, len(md.encode())
    block = md.split("### dropped-call:")[1].split("###")[0]
    assert f"smallest failing chunking `recorded` ({steps} deltas)" in block
    assert f"more deltas; `replay show {XID} --run RUN`" in block
    assert f"… {800_000 - 300:,} more chars; `replay show {XID} --run RUN`" in block  # the new side's content
    page = (run / "report.html").read_text(encoding="utf-8")
    assert len(page.encode()) - len(vega_runtime().encode()) < 150_000
    assert f"more deltas; `replay show {XID} --run RUN`" in page


def test_the_report_stage_masks_and_diffs_only_what_it_shows(big_run, monkeypatch) -> None:
    """The work of `replay report` follows the bounded output, not the completion's size: the text
    it masks and the text report.html diffs char by char stay under a bound 10 times smaller than
    the 1 MB completion (the report used to mask the completion, each side's content and the
    call's arguments whole, and diff them whole)."""
    import difflib

    import replay.report.exemplars as ex
    from replay.report.exemplars import COMPLETION_CHARS

    run, chars, _ = big_run
    masked: list[int] = []
    real_redact = ex.redact_text

    def counting_redact(text, *a, **k):
        masked.append(len(text or ""))
        return real_redact(text, *a, **k)

    diffed: list[int] = []
    real_sm = difflib.SequenceMatcher

    class CountingMatcher(real_sm):
        def __init__(self, isjunk=None, a="", b="", autojunk=True):
            diffed.append(len(a) + len(b))
            super().__init__(isjunk, a, b, autojunk)

    monkeypatch.setattr(ex, "redact_text", counting_redact)
    monkeypatch.setattr(difflib, "SequenceMatcher", CountingMatcher)
    result = runner.invoke(app, ["report", "--run", str(run)])
    assert result.exit_code == 0, result.output
    # each text masked is at most the completion's shown prefix (and a little context past the cut);
    # two exemplars (dropped-call, streaming-fault) mask about 30,000 chars each
    assert masked and max(masked) <= COMPLETION_CHARS + 64 and sum(masked) < chars / 10, masked
    assert sum(diffed) < chars / 20, sum(diffed)


def test_highlight_diff_compares_only_a_bounded_middle(monkeypatch) -> None:
    """report.html's diff of expected and got: the common prefix and suffix are kept as they are,
    a short differing middle is diffed char by char, a long one marked whole (difflib's time grows
    with the product of the lengths)."""
    import difflib

    from replay.report.html import DIFF_CHARS, highlight_diff

    sizes: list[int] = []
    real_sm = difflib.SequenceMatcher

    class CountingMatcher(real_sm):
        def __init__(self, isjunk=None, a="", b="", autojunk=True):
            sizes.append(max(len(a), len(b)))
            assert sizes[-1] <= DIFF_CHARS, f"difflib called on {sizes[-1]:,} chars"  # fail before a long difflib run
            super().__init__(isjunk, a, b, autojunk)

    monkeypatch.setattr(difflib, "SequenceMatcher", CountingMatcher)
    a, b = highlight_diff("calls: read(x.py)", "calls: read(y.py)")
    assert (a, b) == ("calls: read(<del>x</del>.py)", "calls: read(<ins>y</ins>.py)")
    head, tail = "p" * 400_000, "s" * 400_000
    a, b = highlight_diff(head + "x" * 5_000 + tail, head + "y" * 6_000 + tail)
    assert a == head + "<del>" + "x" * 5_000 + "</del>" + tail and b == head + "<ins>" + "y" * 6_000 + "</ins>" + tail
    assert max(sizes) <= DIFF_CHARS, sizes
