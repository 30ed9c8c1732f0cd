"""``replay repro``: a run's failure shrunk to the smallest case, written as an upstream-style test
and proven (fails on the broken side, passes on the fixed one). See docs/repro.md."""

from replay import checks

#: The checks ``replay repro`` shrinks: the stream checks of the registry (a render or served check
#: has no completion or chunking to shrink).
STREAM_CHECKS: tuple[str, ...] = tuple(c.name for c in checks.by_scope("stream"))
#: The default time bound of the shrinking, in seconds (``--max-seconds``).
DEFAULT_SECONDS = 120.0
