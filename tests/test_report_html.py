"""RUN/report.html (replay/report/html.py): self-contained and offline, with the verdict table's
numbers, drawn charts and the exemplars; checked in headless Chromium (Debian's `chromium`, driven
by playwright's Python package through `executable_path`; `.ci/run` installs it when absent). The
browser test skips only when Chromium or playwright cannot be had."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from browser import headless_page
from replay.cli import app

runner = CliRunner()
SAMPLES = Path(__file__).resolve().parent.parent / "samples"

#: A new-side parser that drops the last call of every completion: dropped-call exemplars.
#: A parser that drops the last call of every Hermes completion when streamed.
DROP_LAST = Path(__file__).resolve().parent / "data" / "plugins" / "drop_last.py"

CHARTS = ["chart-checks", "chart-families", "chart-extra-tokens", "chart-nulls", "chart-served", "chart-errors"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("html")
    (d / "drop_last.py").write_text(DROP_LAST.read_text(encoding="utf-8"), encoding="utf-8")
    out = d / "run"
    result = runner.invoke(app, ["audit", str(SAMPLES), "--out", str(out), "-q", "--new-parser", f"{d / 'drop_last.py'}:DropLast"])
    assert result.exit_code == 0, result.output
    return out


def verdict_rows(run: Path) -> list[dict]:
    result = runner.invoke(app, ["query", "verdicts", "--run", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_audit_writes_a_self_contained_page(run: Path):
    page = (run / "report.html").read_text(encoding="utf-8")
    assert len(page.encode()) < 1_200_000  # the Vega bundle (~0.9 MB) and the data
    # nothing is loaded from elsewhere: no src/href to a URL, and the CSP forbids any fetch
    markup = re.sub(r"(<script[^>]*>).*?</script>", r"\1</script>", page, flags=re.S)  # the tags, not the bundle's strings
    assert markup.count("<script") == 3  # the specs (JSON), the bundle, the drawing
    assert not re.search(r"<(?:script|link|img|iframe)[^>]*\s(?:src|href)=", markup, re.I)
    assert "default-src 'none'" in page
    for cid in CHARTS:
        assert f'id="{cid}"' in page
    assert 'data-check="dropped-call"' in page and "<del>" in page  # the exemplar, its diff marked
    assert "xxxx" in page  # masked text by default


def test_report_rewrites_the_page_and_an_ingest_only_run_says_not_judged(run: Path, tmp_path: Path):
    (run / "report.html").unlink()
    assert runner.invoke(app, ["report", "--run", str(run)]).exit_code == 0
    assert (run / "report.html").is_file()
    out = tmp_path / "ing"
    assert runner.invoke(app, ["ingest", str(SAMPLES), "--out", str(out), "-q"]).exit_code == 0
    assert runner.invoke(app, ["report", "--run", str(out)]).exit_code == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "Not judged" in page and 'id="verdicts"' not in page


def test_page_in_headless_chromium(run: Path, tmp_path: Path):
    url = (run / "report.html").as_uri()
    with headless_page(run / "report.html", tmp_path / "profile") as (page, problems, requests):
        page.evaluate("window.replayChartsDrawn")
        assert problems == []
        assert requests == [url]  # the page itself, nothing else
        # the verdict table: every number as `replay query verdicts` gives it, column by column
        cells = page.evaluate(
            "Array.from(document.querySelectorAll('#verdicts tbody tr')).map(tr => "
            "Object.fromEntries(Array.from(tr.querySelectorAll('td')).map(td => [td.dataset.col, td.textContent])))"
        )
        want = verdict_rows(run)
        assert [list(r) for r in cells] == [list(r) for r in want]
        assert cells == [{k: (f"{v:,}" if isinstance(v, int) else "–" if v is None else str(v)) for k, v in r.items()} for r in want]
        assert any(r["check"] == "dropped-call" and r["broken"] > 0 for r in want)
        # every chart drew its marks (Vega's SVG: one g.role-mark per mark, a path per bar)
        drawn = page.evaluate(
            "Array.from(document.querySelectorAll('div.chart')).map(el => [el.id, el.dataset.drawn || null, "
            "el.querySelectorAll('svg g.role-mark path, svg g.role-mark rect, svg g.role-mark line').length])"
        )
        assert [d[0] for d in drawn] == CHARTS
        assert all(d[1] == "1" and d[2] > 0 for d in drawn), drawn
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 50_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_family_chart_counts_stream_checks_of_re_streamed_exchanges_only():
    """The per-family chart drew render checks (null-leak, prompt-divergence) per parser family,
    and the exchanges without a raw completion as a `(not re-streamed)` family, the tallest bar on
    `samples/`; render checks do not depend on the parser, so it now draws stream checks only."""
    import pyarrow as pa
    import pyarrow.compute  # noqa: F401  (pa.compute)

    from replay.report.html import family_chart

    faults = pa.table({
        "family": ["(not re-streamed)", "hermes", "hermes", "hermes", "kimi_k2"],
        "check": ["null-leak", "null-leak", "dropped-call", "non-json-join", "prompt-divergence"],
        "old_wrong": [14, 3, 2, 0, 1],
        "new_wrong": [0, 1, 0, 4, 1],
        "exchanges": [16, 5, 5, 5, 1],
    })
    chart, note = family_chart(faults)
    assert note == ""
    values = sorted((v["family"], v["side"], v["check"], v["n"]) for v in chart.to_dict()["data"]["values"])
    assert values == [("hermes", "new", "non-json-join", 4), ("hermes", "old", "dropped-call", 2)]
    chart, note = family_chart(faults.filter(pa.compute.field("check") == "null-leak"))
    # no stream-check row at all: nothing was re-streamed, so "no fault" would be a claim over nothing
    assert chart is None and note == "No exchange was re-streamed (no raw completion): the stream checks judged nothing."
    judged = faults.filter(pa.compute.field("check") == "non-json-join").set_column(3, "new_wrong", pa.array([0]))
    chart, note = family_chart(judged)
    assert chart is None and note == "No side gets any re-streamed exchange wrong on a stream check."
