"""Capture file discovery and streaming, decompressing line reading.

Compression is detected by the file's first bytes (zstd frame magic ``28 B5 2F FD`` or a zstd
skippable frame ``5? 2A 4D 18``, RFC 8878; gzip ``1F 8B``, RFC 1952), so a misnamed file still
reads; a file without either magic is read as plain text, whatever its extension. Files are read
in blocks of :data:`BLOCK_SIZE` bytes and decompressed incrementally: memory holds one block, the
decompressor's window and the current line, never the whole file. Multi-frame zstd files and
multi-member gzip files (``cat a.gz b.gz``) are read through to the end.

A line longer than ``max_line_bytes`` (default :data:`MAX_LINE_BYTES`, 32 MiB) is not held: its
first :data:`LONG_LINE_HEAD` bytes are kept, the rest is read past in blocks and counted, and it is
yielded as a :class:`LongLine` (ingest records it as ``line-too-long``). Peak memory is therefore
about ``max_line_bytes`` (twice that while the longest accepted line is joined) plus one block,
whatever the line lengths of the file.
"""

from __future__ import annotations

import contextvars
import os
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator

import zstandard

__all__ = [
    "BLOCK_SIZE",
    "CAPTURE_SUFFIXES",
    "LONG_LINE_HEAD",
    "LongLine",
    "MAX_LINE_BYTES",
    "StreamFault",
    "TruncatedStream",
    "CorruptStream",
    "detect_compression",
    "discover",
    "file_size",
    "line_limit",
    "open_lines",
]

#: Bytes read from disk per block.
BLOCK_SIZE = 1 << 20

#: Longest line (bytes, decompressed, without its newline) :func:`open_lines` yields whole; longer
#: lines come as :class:`LongLine`. 32 MiB: above any request we have seen (a 1M-token context is
#: about 4 MB of text), and small enough that a few in flight do not exhaust a laptop.
MAX_LINE_BYTES = 32 << 20

_LIMIT: contextvars.ContextVar[int] = contextvars.ContextVar("max_line_bytes", default=MAX_LINE_BYTES)


@contextmanager
def line_limit(max_line_bytes: int) -> Iterator[None]:
    """Within the block, :func:`open_lines` called without ``max_line_bytes`` (by any reader)
    uses this limit. Ingest sets it from ``--max-line-bytes``; raises ValueError when < 1."""
    if max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be >= 1, got {max_line_bytes}")
    token = _LIMIT.set(max_line_bytes)
    try:
        yield
    finally:
        _LIMIT.reset(token)


#: Bytes of an over-long line kept in its :class:`LongLine` (for the error excerpt).
LONG_LINE_HEAD = 4096


class LongLine(bytes):
    """A line longer than the limit of :func:`open_lines`: its first :data:`LONG_LINE_HEAD` bytes
    (at most the limit, so never the whole line),
    with ``length``, the line's full length in bytes (without its newline). Being ``bytes``, code
    that does not know it sees a cut line (which will not parse)."""

    length: int

    def __new__(cls, head: bytes, length: int) -> "LongLine":
        obj = super().__new__(cls, head)
        obj.length = length
        return obj


#: File name endings :func:`discover` picks up inside folders (compared lower-cased).
CAPTURE_SUFFIXES: tuple[str, ...] = tuple(
    base + comp
    for base in (".jsonl", ".ndjson", ".json", ".sse", ".har", ".log", ".mitm")
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
    ``.json``, ``.sse``, ``.har``, ``.log``, ``.mitm``, each plain or ``.zst``/``.zstd``/``.gz``), except sidecar request
    files (``*.request.json``, read with their transcript); files and folders whose name starts
    with ``.`` are skipped. Returns the paths as given (not resolved), sorted by their string form.

    Raises :class:`FileNotFoundError` naming the first path that does not exist (a dangling
    symlink exists: it is taken, and ingest records it as unreadable).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: dict[str, Path] = {}
    for p in paths:
        path = Path(p)
        # a symlink that leads nowhere (dangling, or a loop) is still an entry: taken as a file,
        # it becomes an unreadable-file row at ingest, as it does when found inside a folder
        if not path.exists() and not path.is_symlink():
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


def file_size(path: str | os.PathLike) -> int | None:
    """Size of ``path`` in bytes, or None when it cannot be stat'ed (a dangling symlink, a
    symlink loop, a file gone since discovery): such a file is reported by ingest as an
    ``unreadable-file`` row, not by a crash of whatever only wanted its size."""
    try:
        return os.stat(path).st_size
    except OSError:
        return None


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
    """Raised by :class:`_Decoder` when the decompressor rejects its input; ``done``: the bytes
    decompressed from the same piece before the fault (earlier frames' data), not yet yielded."""

    def __init__(self, msg: str, done: bytes = b"") -> None:
        super().__init__(msg)
        self.done = done


def _salvage(obj, data: bytes, step: int = 256) -> bytes:
    """What a zlib decompressor ``obj`` (a copy taken before the failing call) outputs from
    ``data`` before it raises: fed ``step`` bytes then one byte at a time, so the output of the
    bytes before the fault (a gzip member whose CRC-32 or length does not match) is not lost."""
    got: list[bytes] = []
    for i in range(0, len(data), step):
        piece = data[i : i + step]
        before = obj.copy()
        try:
            got.append(obj.decompress(piece))
        except zlib.error:
            for j in range(len(piece)):
                try:
                    got.append(before.decompress(piece[j : j + 1]))
                except zlib.error:
                    break
            break
        if obj.eof:
            break
    return b"".join(got)


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
                    raise _Corrupt("trailing garbage after the last gzip member", b"".join(out))
                data = stripped
                self.obj = self._new()
                self.in_frame = True
            snap = self.obj.copy() if self.kind == "gzip" else None
            try:
                out.append(self.obj.decompress(data))
            except (zstandard.ZstdError, zlib.error) as exc:
                if snap is not None:  # a bad CRC is found at the member's end: keep what came before
                    out.append(_salvage(snap, data))
                raise _Corrupt(str(exc), b"".join(out)) from exc
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
            try:
                out = self._feed_piece(piece)
            except _Corrupt as exc:
                if exc.done:  # the frames before the fault decoded: their lines are read
                    yield exc.done
                raise
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
    max_line_bytes: int | None = None,
) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(line_no, byte_offset, raw)`` for every line of a capture file, decompressing as a stream.

    ``line_no``: 1-based. ``byte_offset``: offset of the line's first byte in the decompressed
    stream (bytes). ``raw``: the line's bytes without the terminating ``b"\\n"`` (a ``\\r`` before
    it is kept; JSON parsers treat it as whitespace). Lines are split on ``b"\\n"`` only, and a final
    line without a newline is yielded too; an empty file yields nothing. A line longer than
    ``max_line_bytes`` (None: the limit of the enclosing :func:`line_limit`, else
    :data:`MAX_LINE_BYTES`) is yielded as a :class:`LongLine` (its head and its length) after being
    read past without being kept; the next line's offset counts all its bytes. ``on_read``: called with
    the number of bytes read from disk after each block (for a progress bar). Compression: see the
    module docstring.

    Raises, after yielding every complete line decoded before the fault:
    :class:`TruncatedStream` when a zstd/gzip file ends inside a frame, :class:`CorruptStream`
    when the decompressor rejects the data. :class:`OSError` when the file cannot be read.
    :class:`ValueError` when ``max_line_bytes < 1``.
    """
    if max_line_bytes is None:
        max_line_bytes = _LIMIT.get()
    if max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be >= 1, got {max_line_bytes}")
    with open(path, "rb") as fh:
        first = fh.read(block_size)
        if on_read and first:
            on_read(len(first))
        kind = detect_compression(first[:4])
        decoder = _Decoder(kind) if kind != "plain" else None

        line_no = 1
        offset = 0  # decompressed offset of the current line's start
        pending: list[bytes] = []  # pieces of the current line so far (empty once it is too long)
        pending_len = 0  # bytes of the current line so far
        head = b""  # first bytes of the current line once it is too long
        head_cap = min(LONG_LINE_HEAD, max_line_bytes)  # never the whole line: it would parse
        too_long = False

        def take(piece: bytes) -> None:
            """Add a piece of the current line, switching to skip mode past the limit."""
            nonlocal pending, pending_len, head, too_long
            if not too_long and pending_len + len(piece) > max_line_bytes:
                parts, got = [], 0  # the head only: joining the held pieces would copy them all
                for p in (*pending, piece):
                    parts.append(p[: head_cap - got])
                    got += len(parts[-1])
                    if got >= head_cap:
                        break
                head = b"".join(parts)
                pending = []
                too_long = True
            elif not too_long:
                pending.append(piece)
            pending_len += len(piece)

        def end_line() -> tuple[int, int, bytes]:
            nonlocal pending, pending_len, head, too_long, line_no, offset
            line = LongLine(head, pending_len) if too_long else b"".join(pending)
            item = (line_no, offset, line)
            offset += pending_len + 1
            line_no += 1
            pending, pending_len, head, too_long = [], 0, b"", False
            return item

        def split(data: bytes) -> Iterator[tuple[int, int, bytes]]:
            start = 0
            while True:
                nl = data.find(b"\n", start)
                if nl < 0:
                    if start < len(data):
                        take(data[start:])
                    return
                if not pending and not too_long and nl - start <= max_line_bytes:
                    yield _emit(data[start:nl])  # fast path: the whole line is in this piece
                else:
                    take(data[start:nl])
                    yield end_line()
                start = nl + 1

        def _emit(line: bytes) -> tuple[int, int, bytes]:
            nonlocal line_no, offset
            item = (line_no, offset, line)
            offset += len(line) + 1
            line_no += 1
            return item

        def partial() -> bytes:
            return head if too_long else b"".join(pending)

        block = first
        while block:
            if decoder is not None:
                try:
                    for data in decoder.feed(block):
                        yield from split(data)
                except _Corrupt as exc:
                    raise CorruptStream(
                        f"{kind} stream corrupt after {offset + pending_len} decompressed bytes: {exc}",
                        line_no, offset, partial(),
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
                line_no, offset, partial(),
            )
        if pending or too_long:
            yield end_line()
