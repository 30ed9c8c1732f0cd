"""The runner: how the stages are executed, and the run folder they write.

The stages (:mod:`replay.stages`) are pure batch functions, from a batch of rows and a run spec
of plain values to tables; this package owns everything else about a run: the run folder's
lifecycle (:mod:`replay.runner.runfolder`: open, lock, clear, mark incomplete, resume, finish,
describe), the local process pool (:mod:`replay.runner.pool`), Ray
(:mod:`replay.runner.executors`), part files, fingerprints, resume and merge
(:mod:`replay.runner.driver`), the stages during ingest (:mod:`replay.runner.overlap`), ingest's
parallel engine (:mod:`replay.runner.ingest`), memory settings (:mod:`replay.runner.memory`) and
progress (:mod:`replay.runner.progress`).

Layering: :mod:`replay.capture` and :mod:`replay.stages` never import this package
(``tests/test_import_graph.py`` checks it). Nothing is imported here, so that ``import
replay.runner.runfolder`` stays light (``replay ingest`` needs it, not the stages).
"""
