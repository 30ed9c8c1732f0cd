"""Hypothesis profiles for the whole suite: ``ci`` (default) and ``thorough``; and the terminal
width every test starts from.

``HYPOTHESIS_PROFILE=thorough python -m pytest -q -n auto`` runs every property test with ten
times its examples (:mod:`hypo` scales the per-test budgets, which a profile alone cannot, since a
test's own ``max_examples`` wins over the profile's).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from hypo import PROFILE, examples

settings.register_profile("ci", max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "thorough", max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(PROFILE)


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``COLUMNS`` / ``LINES`` from the environment the suite runs in (a terminal, a CI runner,
    pytest-xdist's workers): replay's stdout takes its width from ``COLUMNS``, so a test that
    reads a line of output would depend on where it runs. A test that wants a width sets it
    (``runner.invoke(..., env={"COLUMNS": "80"})``)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
