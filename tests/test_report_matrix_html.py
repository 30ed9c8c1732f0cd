"""The matrix page of ``replay matrix`` (replay/report/matrix.py): RUN/report.html, self-contained,
its cells the numbers of the query ``matrix``, each cell with wrong exchanges opening its exemplars;
checked in headless Chromium as tests/test_report_html.py checks the audit's page (Debian's
`chromium` driven by playwright's Python package; skips only when either cannot be had)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.matrix import matrix_connect
from replay.report.matrix import cell_text
from replay.sql import run_query
from test_matrix import SAMPLES, sides_file
from browser import headless_page

runner = CliRunner()
NAMES = ["dump", "droplast", "fields"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("matrix-html")
    out = d / "m"
    result = runner.invoke(app, ["matrix", str(SAMPLES), "--sides", str(sides_file(d)), "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    return out


def queries(run: Path) -> tuple[list[dict], list[dict]]:
    con = matrix_connect(run, NAMES, "dump")
    try:
        return run_query(con, "matrix").to_pylist(), run_query(con, "matrix_exemplars").to_pylist()
    finally:
        con.close()


def test_the_page_is_self_contained_and_masked(run: Path):
    page = (run / "report.html").read_text(encoding="utf-8")
    markup = re.sub(r"(<script[^>]*>).*?</script>", r"\1</script>", page, flags=re.S)
    assert not re.search(r"<(?:script|link|img|iframe)[^>]*\s(?:src|href)=", markup, re.I)
    assert "default-src 'none'" in page
    assert 'id="matrix"' in page and 'data-check="dropped-call" data-side="droplast"' in page
    assert "xxxx" in page  # argument text masked by default


def test_matrix_page_in_headless_chromium(run: Path, tmp_path: Path):
    matrix, exemplars = queries(run)
    url = (run / "report.html").as_uri()
    with headless_page(run / "report.html", tmp_path / "profile") as (page, problems, requests):
        # every cell present, with the query's numbers, shown as the terminal shows them
        cells = page.evaluate(
            "Array.from(document.querySelectorAll('#matrix td[data-check]')).map(td => ({check: td.dataset.check, side: td.dataset.side, "
            "wrong: +td.dataset.wrong, judged: +td.dataset.judged, fixed: +td.dataset.fixed, broke: +td.dataset.broke, text: td.textContent}))"
        )
        assert [(c["check"], c["side"]) for c in cells] == [(r["check"], r["side"]) for r in matrix]
        for c, r in zip(cells, matrix):
            assert (c["wrong"], c["judged"], c["fixed"], c["broke"]) == (r["wrong"], r["judged"], r["fixed"], r["broke"])
            assert c["text"] == cell_text(r["wrong"], r["fixed"], r["broke"], r["side"] == "dump")
        leak = next(c for c in cells if (c["check"], c["side"]) == ("null-leak", "fields"))
        assert leak["text"] == "5 (-30 +0)"
        # no exemplar shows before a click; clicking a cell shows its exchanges, and only those
        assert page.evaluate("document.querySelectorAll('section.panel:not([hidden])').length") == 0
        page.click('#matrix td[data-check="dropped-call"][data-side="droplast"] button')
        shown = page.evaluate(
            "Array.from(document.querySelectorAll('section.panel:not([hidden])')).map(s => [s.dataset.check, s.dataset.side, "
            "Array.from(s.querySelectorAll('div.exemplar')).map(e => e.dataset.exchange)])"
        )
        want = [r["exchange_id"] for r in exemplars if (r["check"], r["side"]) == ("dropped-call", "droplast")]
        assert shown == [["dropped-call", "droplast", want]] and want
        assert page.is_visible('section.panel:not([hidden]) div.exemplar')
        page.click('#matrix td[data-check="null-leak"][data-side="dump"] button')
        shown = page.evaluate("Array.from(document.querySelectorAll('section.panel:not([hidden])')).map(s => [s.dataset.check, s.dataset.side, "
                              "s.querySelectorAll('div.exemplar').length])")
        assert shown == [["null-leak", "dump", 20]]  # 35 wrong: the first 20 (EXEMPLARS_PER_CELL)
        # a cell with nothing wrong has no button
        assert page.evaluate("document.querySelectorAll('#matrix td[data-wrong=\"0\"] button').length") == 0
        assert problems == []
        assert requests == [url]


def test_masked_exemplars_keep_structure_and_names():
    from replay.report.matrix import _masked

    row = {"check": "dropped-call", "side": "s", "exchange_id": "e", "smallest_failing_chunking": "whole", "error": None,
           "outcome": "[1] tool_calls", "content": "Let me look up Oslo.",
           "calls": [{"name": "get_weather", "arguments": '{"city": "Oslo"}'}], "reference_calls": [{"name": "get_time", "arguments": '{"tz": "UTC"}'}]}
    got = _masked([row], True)[0]
    assert got["outcome"] == "[1] tool_calls"
    assert got["content"] == "Xxx xx xxxx xx Xxxx.".replace("X", "x")
    assert got["calls"] == [{"name": "get_weather", "arguments": '{"xxxx": "xxxx"}'}]
    assert got["reference_calls"] == [{"name": "get_time", "arguments": '{"xx": "xxx"}'}]
    mism = dict(row, check="argument-mismatch", outcome="[{'i': 1, 'n': get_weather, 'a': '{\"city\": \"Oslo\"}'}]")
    assert _masked([mism], True)[0]["outcome"] == "[{'i': 1, 'n': get_weather, 'a': '{\"xxxx\": \"xxxx\"}'}]"
    leak = dict(row, check="null-leak", smallest_failing_chunking="render", outcome="[0$.function.strict]")
    assert _masked([leak], True)[0]["outcome"] == "[0$.function.strict]"
    assert _masked([row], False)[0] == row
