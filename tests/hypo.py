"""Hypothesis budgets scaled by the active profile (registered in tests/conftest.py).

A test's ``@settings(max_examples=N)`` overrides the profile's ``max_examples``, so a profile alone
cannot make such a test run more: every property test asks :func:`examples` for its budget
instead, which multiplies the test's own base count by the profile's factor.

* ``ci`` (the default): factor 1, the base counts, sized to keep the whole suite well under ten
  minutes on two cores;
* ``thorough`` (``HYPOTHESIS_PROFILE=thorough``): factor 10, for a run before a release or after a
  parser change.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

#: profile name -> factor on every test's base number of examples
FACTORS = {"ci": 1, "thorough": 10}
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
if PROFILE not in FACTORS:
    raise ValueError(f"HYPOTHESIS_PROFILE={PROFILE!r}: one of {', '.join(FACTORS)}")


def examples(base: int) -> int:
    """The number of examples a test whose ``ci`` budget is ``base`` runs under the active profile."""
    return max(1, base * FACTORS[PROFILE])


def budget(base: int, **kwargs) -> settings:
    """``settings(max_examples=examples(base), deadline=None)`` with the too-slow health check
    suppressed (the property tests replay many chunkings per example); ``kwargs`` are passed on."""
    kwargs.setdefault("deadline", None)
    kwargs.setdefault("suppress_health_check", [HealthCheck.too_slow])
    return settings(max_examples=examples(base), **kwargs)
