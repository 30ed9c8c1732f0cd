"""replay: audit LLM serving front ends on captured traffic.

Re-render each captured request's tool declarations with an old and a new tool serializer and
renderer, re-stream each captured raw completion through an old and a new tool parser under
many chunkings, and count with DuckDB what differs from a reference.

The pieces a user imports:

- :mod:`replay.capture`  ingest capture files into Parquet (``exchanges``, ``tools``, ``ingest_errors``)
- :mod:`replay.tools`    tool serializers and the null-path scanner
- :mod:`replay.render`   renderers (``json-tools``, Jinja chat templates through transformers)
- :mod:`replay.parsers`  tool parsers, one module per model family, and their registry
- :mod:`replay.stream`   chunkings, replay of a parser over a chunking, OpenAI-SDK client assembly
- :mod:`replay.stages` the batch stages that write ``renders``, ``streams`` and ``calls``; :mod:`replay.runner`
  executes them (pool, Ray, part files, resume) and owns the run folder
- :mod:`replay.sql`      DuckDB views over a run and the queries in ``queries/``
- :mod:`replay.tables`   the Arrow schema of every table
"""

__version__ = "0.1.0"
