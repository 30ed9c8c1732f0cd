"""The stages: pure batch functions from a batch of rows (and a run spec of plain values) to
tables, knowing nothing of processes, pools, part files or Ray.

- :mod:`replay.stages.render`: ``exchanges`` -> ``renders``;
- :mod:`replay.stages.stream`: ``exchanges`` -> ``streams``, ``calls``, ``family_fit``;
- :mod:`replay.stages.rows`: Arrow rows in and out, shared by both;
- :mod:`replay.stages.context`: what a stage builds once per process (sides, parser resolver);
- :mod:`replay.stages.stage`: :class:`~replay.stages.stage.Stage`, ``RENDER``, ``STREAM``;
- :mod:`replay.stages.validate`: the run spec's names resolved before any row is written.

Ingest's batch function (lines of a file range -> exchanges) is :func:`replay.capture.ingest.ingest_batch`.
:mod:`replay.runner` executes them; nothing here imports it (``tests/test_import_graph.py``).
Nothing is imported here, so each module's imports stay its own.
"""
