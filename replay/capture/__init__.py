"""Capture ingest: file discovery, streaming decompression, format readers, ingest to Parquet.

- :func:`discover` finds capture files under files and folders, and objects under ``s3://``,
  ``gs://``, ``az://`` prefixes (:mod:`replay.capture.storage`, through fsspec);
- :func:`ingest` reads them (capture format v1, :mod:`replay.capture.v1`, and the formats of
  :mod:`replay.capture.detect`: SSE transcripts, response bodies, Batch pairs, HAR, server logs,
  LiteLLM rows, OTel spans; one module each, dispatched by :mod:`replay.capture.readers`) and writes
  ``exchanges.parquet``, ``tools.parquet`` and ``ingest_errors.parquet``, returning
  :class:`IngestStats`;
- :func:`replay.capture.files.open_lines` streams the lines of one file or object, plain, zstd or gzip.
"""

from replay.capture.files import discover, open_lines
from replay.capture.ingest import IngestStats, ingest

__all__ = ["IngestStats", "discover", "ingest", "open_lines"]
