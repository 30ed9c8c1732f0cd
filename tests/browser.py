"""Headless Chromium for the report-page tests (tests/test_report_html.py, tests/test_report_matrix_html.py):
Debian's ``chromium`` (``.ci/run`` installs it) driven by playwright's Python package (the test
extra). A test skips only when either cannot be had."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

#: Chromium's flags: no sandbox (root in CI), no GPU, no network but the page's own file.
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def chromium() -> str | None:
    """The path of a Chromium executable, or None."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


@contextmanager
def headless_page(page_file: Path, profile: Path) -> Iterator[tuple[Any, list[str], list[str]]]:
    """Open ``page_file`` (an HTML file) in headless Chromium with its profile in ``profile``, a
    1100x900 viewport. Yields ``(page, problems, requests)``: the playwright page, the console
    errors and warnings and page errors seen so far, and every URL the page requested (the page's
    own first). Skips the test when Chromium or playwright is missing."""
    exe = chromium()
    if exe is None:
        pytest.skip("no chromium (apt-get install chromium; .ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (pip, the test extra) is not installed")
    with sync_api.sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(profile), executable_path=exe, headless=True, args=ARGS,
                                                   viewport={"width": 1100, "height": 900})
        try:
            page = ctx.new_page()
            problems: list[str] = []
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_file.as_uri())
            yield page, problems, requests
        finally:
            ctx.close()
