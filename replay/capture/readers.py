"""One entry point over every capture format: plan the files, then read each into :class:`Unit` s.

:func:`plan` detects each file's format (:func:`replay.capture.detect.detect_file`, or the one
given with ``--capture-format``) and pairs Batch input and output files
(:func:`replay.capture.batch.pair_files`); :func:`read_units` reads one planned file with its
format's reader. Readers are pure mappings from bytes/records to v1-form records
(:mod:`replay.capture.records`); ingest turns every record into rows in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from replay.capture.detect import FORMATS, detect_file
from replay.capture.files import open_lines, source_name
from replay.capture.records import Unit
from replay.capture.v1 import CaptureError, decode_line

# each format's reader is imported when a file of that format is read (a run of v1 captures
# imports none of them: less start-up for every `replay ingest`)

__all__ = ["PlannedFile", "plan", "read_units"]


@dataclass
class PlannedFile:
    """A capture file and how to read it: ``fmt`` (one of :data:`FORMATS`); ``pair``: a Batch
    input's output file; ``consumed``: True for a Batch output read with its input (the file is
    listed but yields nothing of its own), and for a stored completion's messages file read with the
    list page of its folder."""

    path: Path
    fmt: str
    pair: Path | None = None
    consumed: bool = False


def _batch_role(path: Path) -> str | None:
    from replay.capture import batch

    return batch.file_role(path)


def plan(files: list[Path], capture_format: str | None = None) -> list[PlannedFile]:
    """The files with their formats, in the given order. ``capture_format``: force this format for
    every file (raises ``ValueError`` when it is not one of :data:`FORMATS`); None: detect each."""
    if capture_format is not None and capture_format not in FORMATS:
        raise ValueError(f"--capture-format {capture_format}: unknown format; known: {', '.join(FORMATS)}")
    planned = [PlannedFile(p, capture_format or detect_file(p)) for p in files]
    roles = {pf.path: r for pf in planned if pf.fmt == "openai-batch" and (r := _batch_role(pf.path))}
    if roles:
        from replay.capture import batch

        pairs = batch.pair_files(roles)
    else:
        pairs = {}
    stored = [pf for pf in planned if pf.fmt == "openai-stored"]
    if stored:  # a completion's messages file is read with the list page beside it (replay.capture.stored)
        from replay.capture.stored import is_messages_file

        pages_in = {pf.path.parent for pf in stored if not is_messages_file(pf.path)}
        for pf in planned:  # by name: a broken messages file (not sniffed as one) is its completion's error
            if pf.path.parent in pages_in and is_messages_file(pf.path) and capture_format in (None, "openai-stored"):
                pf.fmt, pf.consumed = "openai-stored", True
    outputs = set(pairs.values())
    for pf in planned:
        if pf.path in pairs:
            pf.pair = pairs[pf.path]
        elif pf.path in outputs:
            pf.consumed = True
    return planned


def _v1_units(path: Path, on_read: Callable[[int], None] | None) -> Iterator[Unit]:
    for line, offset, raw in open_lines(path, on_read=on_read):
        if not raw.strip():
            yield Unit(line, offset, raw, blank=True)
        else:
            yield Unit(line, offset, raw, v1_raw=True)


#: How a line that is not JSON is named, per JSON-lines format whose reader does not say it itself.
_BAD_JSON_LABEL = {"kong": "kong (Kong log entry)", "helicone": "helicone (Helicone export record)", "langfuse": "langfuse (observation or API page)",
                   "openai-stored": "openai-stored (list page of stored completions)"}


def _named(units: Iterator[Unit], fmt: str) -> Iterator[Unit]:
    """``units`` with the detail of each ``bad-json`` error prefixed by the format it was read as."""
    for unit in units:
        if unit.error is not None and unit.error.reason == "bad-json" and not unit.error.detail.startswith(fmt):
            unit.error = CaptureError("bad-json", f"{_BAD_JSON_LABEL[fmt]}: {unit.error.detail}")
        yield unit


def read_units(pf: PlannedFile, *, on_read: Callable[[int], None] | None = None, tokenizer: Any = None) -> Iterator[Unit]:
    """The units of one planned file (see :mod:`replay.capture.records`). ``tokenizer``: decodes
    token ids of server logs (:mod:`replay.capture.serverlog`). Raises
    :class:`replay.capture.files.StreamFault` / ``OSError`` after the units read before the fault,
    as :func:`replay.capture.files.open_lines` does."""
    path, source = pf.path, source_name(pf.path)
    if pf.consumed:
        return iter(())
    if pf.fmt == "v1":
        return _v1_units(path, on_read)
    from replay.capture import batch, har, litellm, otel, serverlog, sse
    from replay.capture.jsonlines import read_json_lines

    if pf.fmt == "sse":
        return sse.read_transcript(path, source, on_read)
    if pf.fmt == "body":
        return sse.read_body(path, source, on_read)
    if pf.fmt == "har":
        return har.read_har(path, source, on_read)
    if pf.fmt == "openai-batch":
        return batch.read_batch(path, source, pf.pair, on_read)
    if pf.fmt == "serverlog":
        return read_json_lines(path, lambda obj: serverlog.record_from_log(obj, tokenizer), on_read)
    if pf.fmt == "litellm":
        return read_json_lines(path, litellm.record_from_row, on_read, decode=litellm.decode)
    if pf.fmt == "otel":
        return otel.read_export(path, on_read)
    if pf.fmt == "langfuse":
        from replay.capture import langfuse

        return _named(read_json_lines(path, langfuse.records_from_value, on_read, arrays=True), "langfuse")
    if pf.fmt == "mitmproxy":
        from replay.capture import mitm

        return mitm.read_dump(path, on_read)
    if pf.fmt == "openai-stored":
        from replay.capture import stored

        return _named(stored.read_stored(path, on_read), "openai-stored")
    if pf.fmt == "vllm-log":
        from replay.capture import vllmlog

        return vllmlog.read_log(path, on_read, tokenizer)
    if pf.fmt in ("kong", "helicone"):
        from replay.capture import gateways

        to_records = gateways.kong_record if pf.fmt == "kong" else gateways.helicone_record
        return _named(read_json_lines(path, to_records, on_read, arrays=True), pf.fmt)
    raise ValueError(f"unknown capture format {pf.fmt!r}")
