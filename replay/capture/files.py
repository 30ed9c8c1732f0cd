"""Capture file discovery and streaming, decompressing line reading.

Compression is detected by the file's first bytes (zstd frame magic ``28 B5 2F FD`` or a zstd
skippable frame ``5? 2A 4D 18``, RFC 8878; gzip ``1F 8B``, RFC 1952), so a misnamed file still
reads; a file without either magic is read as plain text, whatever its extension. Files are read
in blocks of :data:`BLOCK_SIZE` bytes and decompressed incrementally: memory holds one block, the
decompressor's window and the current line, never the whole file. Multi-frame zstd files and
multi-member gzip files (``cat a.gz b.gz``) are read through to the end.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Callable, Iterable, Iterator

import zstandard

__all__ = [
    "BLOCK_SIZE",
    "CAPTURE_SUFFIXES",
    "StreamFault",
    "TruncatedStream",
    "CorruptStream",
    "detect_compression",
    "discover",
    "open_lines",
]

#: Bytes read from disk per block.
BLOCK_SIZE = 1 << 20

#: File name endings :func:`discover` picks up inside folders (compared lower-cased).
CAPTURE_SUFFIXES: tuple[str, ...] = tuple(
    base + comp
    for base in (".jsonl", ".ndjson", ".json", ".sse", ".har")
    for comp in ("", ".zst", ".zstd", ".gz")
)

#: Sidecar request files of SSE transcripts and response bodies (:mod:`replay.capture.sse`):
#: read with their transcript, never as captures of their own during folder discovery.
SIDECAR_SUFFIX = ".request.json"

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_GZIP_MAGIC = b"\x1f\x8b"

#: Decompressed bytes aimed at per decompressor call (bounds memory on highly compressible input).
_TARGET_OUT = 4 << 20


class StreamFault(Exception):
    """Reading a capture file stopped before its end; the lines before the fault were yielded.

    Attributes: ``reason`` (short kind for ``ingest_errors.reason``), ``line_no`` (1-based number
    of the line being read when the fault happened: the last complete line + 1), ``byte_offset``
    (offset of that line's start in the decompressed stream, bytes), ``partial`` (the bytes of that
    line decoded before the fault, possibly empty), ``detail`` (what happened).
    """

    reason = "stream-fault"

    def __init__(self, detail: str, line_no: int, byte_offset: int, partial: bytes = b"") -> None:
        super().__init__(detail)
        self.detail = detail
        self.line_no = line_no
        self.byte_offset = byte_offset
        self.partial = partial


class TruncatedStream(StreamFault):
    """The compressed stream ended inside a zstd frame or gzip member (reason ``truncated-stream``)."""

    reason = "truncated-stream"


class CorruptStream(StreamFault):
    """The decompressor rejected the data: a corrupt frame, bad checksum, or trailing garbage
    after the last frame (reason ``corrupt-stream``)."""

    reason = "corrupt-stream"


def _is_capture_name(name: str) -> bool:
    low = name.lower()
    return low.endswith(CAPTURE_SUFFIXES) and not low.endswith(SIDECAR_SUFFIX)


def discover(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    """The capture files named by ``paths``, sorted and without duplicates.

    ``paths``: one path or an iterable of paths, each a file or a folder. A file named directly is
    always taken (whatever its name: compression is detected by content). A folder is searched
    recursively for files ending in one of :data:`CAPTURE_SUFFIXES` (``.jsonl``, ``.ndjson``,
    ``.json``, ``.sse``, ``.har``, each plain or ``.zst``/``.zstd``/``.gz``), except sidecar request
    files (``*.request.json``, read with their transcript); files and folders whose name starts
    with ``.`` are skipped. Returns the paths as given (not resolved), sorted by their string form.

    Raises :class:`FileNotFoundError` naming the first path that does not exist.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: dict[str, Path] = {}
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise FileNotFoundError(f"capture path does not exist: {str(path)!r}")
        if path.is_dir():
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                for name in filenames:
                    if not name.startswith(".") and _is_capture_name(name):
                        fp = Path(dirpath) / name
                        found.setdefault(os.path.normpath(fp), fp)
        else:
            found.setdefault(os.path.normpath(path), path)
    return [found[k] for k in sorted(found)]


def detect_compression(head: bytes) -> str:
    """``"zstd"``, ``"gzip"`` or ``"plain"`` from the first bytes of a file (at least 4 bytes
    for zstd). Used by :func:`open_lines`; the file name is not consulted."""
    if head.startswith(_ZSTD_MAGIC) or (
        len(head) >= 4 and head[0] & 0xF0 == 0x50 and head[1:4] == b"\x2a\x4d\x18"
    ):
        return "zstd"
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    return "plain"


class _Corrupt(Exception):
    """Raised by :class:`_Decoder` when the decompressor rejects its input."""


class _Decoder:
    """Incremental multi-frame decompressor with bounded output per step.

    :meth:`feed` takes a block of compressed bytes and yields decompressed pieces. The block is fed
    to the decompressor in slices whose size adapts to the compression ratio, so that one piece
    stays near :data:`_TARGET_OUT` bytes even for highly compressible data (1 MiB of zstd can
    expand to GBs): a zstd block of >= 4 compressed bytes yields <= 128 KiB, so a 64-byte slice
    yields <= 2 MiB, and deflate expands at most ~1032:1.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.obj = self._new()
        self.in_frame = False  # bytes of the current frame/member consumed, frame not finished
        self.slice = 1024  # grows (x2 per call) while the output stays small

    def _new(self):
        if self.kind == "zstd":
            return zstandard.ZstdDecompressor().decompressobj()
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)

    def _feed_piece(self, data: bytes) -> bytes:
        out: list[bytes] = []
        while data:
            if not self.in_frame:
                # between frames: tolerate zero padding (as gzip(1) and Python's gzip do)
                stripped = data.lstrip(b"\x00")
                if not stripped:
                    break
                if self.kind == "gzip" and not stripped.startswith(_GZIP_MAGIC[: len(stripped)]):
                    raise _Corrupt("trailing garbage after the last gzip member")
                data = stripped
                self.obj = self._new()
                self.in_frame = True
            try:
                out.append(self.obj.decompress(data))
            except (zstandard.ZstdError, zlib.error) as exc:
                raise _Corrupt(str(exc)) from exc
            if self.obj.eof:
                data = self.obj.unused_data
                self.in_frame = False
            else:
                data = b""
        return b"".join(out)

    def feed(self, block: bytes) -> Iterator[bytes]:
        """Yield the decompressed bytes of ``block``; raises _Corrupt on corrupt data."""
        pos = 0
        while pos < len(block):
            piece = block[pos : pos + self.slice]
            pos += len(piece)
            out = self._feed_piece(piece)
            if len(out) > _TARGET_OUT:
                self.slice = max(64, self.slice // 4)
            elif len(out) < _TARGET_OUT // 8:
                self.slice = min(BLOCK_SIZE, self.slice * 2)
            if out:
                yield out

    def finished(self) -> bool:
        """True when the input ended at a frame boundary (no frame left half-read)."""
        return not self.in_frame


def open_lines(
    path: str | os.PathLike,
    *,
    on_read: Callable[[int], None] | None = None,
    block_size: int = BLOCK_SIZE,
) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(line_no, byte_offset, raw)`` for every line of a capture file, decompressing as a stream.

    ``line_no``: 1-based. ``byte_offset``: offset of the line's first byte in the decompressed
    stream (bytes). ``raw``: the line's bytes without the terminating ``b"\\n"`` (a ``\\r`` before
    it is kept; JSON parsers treat it as whitespace). Lines are split on ``b"\\n"`` only, may be of
    any length, and a final line without a newline is yielded too; an empty file yields nothing.
    ``on_read``: called with the number of bytes read from disk after each block (for a progress
    bar). Compression: see the module docstring.

    Raises, after yielding every complete line decoded before the fault:
    :class:`TruncatedStream` when a zstd/gzip file ends inside a frame, :class:`CorruptStream`
    when the decompressor rejects the data. :class:`OSError` when the file cannot be read.
    """
    with open(path, "rb") as fh:
        first = fh.read(block_size)
        if on_read and first:
            on_read(len(first))
        kind = detect_compression(first[:4])
        decoder = _Decoder(kind) if kind != "plain" else None

        line_no = 1
        offset = 0  # decompressed offset of the current line's start
        pending: list[bytes] = []  # pieces of the current line so far
        pending_len = 0

        def split(data: bytes) -> Iterator[tuple[int, int, bytes]]:
            nonlocal line_no, offset, pending, pending_len
            start = 0
            while True:
                nl = data.find(b"\n", start)
                if nl < 0:
                    if start < len(data):
                        pending.append(data[start:])
                        pending_len += len(data) - start
                    return
                piece = data[start:nl]
                if pending:
                    pending.append(piece)
                    line = b"".join(pending)
                    pending = []
                    pending_len = 0
                else:
                    line = piece
                yield line_no, offset, line
                offset += len(line) + 1
                line_no += 1
                start = nl + 1

        block = first
        while block:
            if decoder is not None:
                try:
                    for data in decoder.feed(block):
                        yield from split(data)
                except _Corrupt as exc:
                    raise CorruptStream(
                        f"{kind} stream corrupt after {offset + pending_len} decompressed bytes: {exc}",
                        line_no, offset, b"".join(pending),
                    ) from None
            else:
                yield from split(block)
            block = fh.read(block_size)
            if on_read and block:
                on_read(len(block))
        if decoder is not None and not decoder.finished():
            raise TruncatedStream(
                f"{kind} stream ends inside a frame after {offset + pending_len} decompressed bytes "
                f"(file truncated?)",
                line_no, offset, b"".join(pending),
            )
        if pending:
            yield line_no, offset, b"".join(pending)
