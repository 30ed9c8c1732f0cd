"""Hypothesis profiles for the whole suite: ``ci`` (default) and ``thorough``.

``HYPOTHESIS_PROFILE=thorough python -m pytest -q -n auto`` runs every property test with ten
times its examples (:mod:`hypo` scales the per-test budgets, which a profile alone cannot, since a
test's own ``max_examples`` wins over the profile's).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from hypo import PROFILE, examples

settings.register_profile("ci", max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "thorough", max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(PROFILE)
