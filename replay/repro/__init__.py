"""``replay repro``: a run's failure shrunk to the smallest case, written as an upstream-style test
and proven (fails on the broken side, passes on the fixed one). See docs/repro.md."""
