"""The report: what a run's tables say, for the terminal, ``report.md``, ``report.html`` and
``RUN/exemplars/``.

This package only reads tables (DuckDB views over the run's Parquet, :mod:`replay.sql`) and the
run's ``run.json``; the per-row facts it words are computed by the stages (:mod:`replay.judge`,
:mod:`replay.stages`), so nothing here imports a stage, a parser or a renderer.

- :mod:`replay.report.markdown`: the rich summary table, the headline sentences, the verdict
  section and the whole ``report.md``;
- :mod:`replay.report.exemplars`: one reproducer per check with broken or still-wrong exchanges;
- :mod:`replay.report.html`: ``report.html``, one self-contained offline page.

altair and the Vega bundle are imported only when ``report.html`` is written.
"""

from replay.report.exemplars import Exemplar, write_exemplars
from replay.report.html import write_html_report
from replay.report.markdown import (
    REPORT_QUERIES,
    chunking_lost_line,
    fidelity_sentence,
    headlines,
    markdown_report,
    markdown_table,
    render_failure_lines,
    render_route_lines,
    rich_table,
    run_report_queries,
    summary_by_side,
    verdict_markdown,
)

__all__ = [
    "Exemplar",
    "REPORT_QUERIES",
    "chunking_lost_line",
    "fidelity_sentence",
    "headlines",
    "markdown_report",
    "markdown_table",
    "render_failure_lines",
    "render_route_lines",
    "rich_table",
    "run_report_queries",
    "summary_by_side",
    "verdict_markdown",
    "write_exemplars",
    "write_html_report",
]
