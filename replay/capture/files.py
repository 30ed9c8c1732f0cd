"""Capture file discovery and streaming, decompressing line reading.

Compression is detected by the file's first bytes (zstd frame magic ``28 B5 2F FD`` or a zstd
skippable frame ``5? 2A 4D 18``, RFC 8878; gzip ``1F 8B``, RFC 1952), so a misnamed file still
reads; a file without either magic is read as plain text, whatever its extension. Files are read
in blocks of :data:`BLOCK_SIZE` bytes and decompressed incrementally: memory holds one block, the
decompressor's window and the current line, never the whole file. Multi-frame zstd files and
multi-member gzip files (``cat a.gz b.gz``) are read through to the end. An object in a bucket
(``s3://``, ``gs://``, ``az://``: :mod:`replay.capture.storage`) is discovered under the same name
rules and read the same way, its blocks fetched in ranged requests.

A line longer than ``max_line_bytes`` (default :data:`MAX_LINE_BYTES`, 32 MiB) is not held: its
first :data:`LONG_LINE_HEAD` bytes are kept, the rest is read past in blocks and counted, and it is
yielded as a :class:`LongLine` (ingest records it as ``line-too-long``). Peak memory is therefore
about ``max_line_bytes`` (twice that while the longest accepted line is joined) plus one block,
whatever the line lengths of the file.
"""

from __future__ import annotations

import contextvars
import os
import stat
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator

import zstandard

from replay.capture.storage import RemoteObject, is_uri, list_uri, open_input

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
    "input_record",
    "line_limit",
    "open_lines",
    "source_name",
    "spool",
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


def _kind(mode: int) -> str | None:
    """What a file of ``mode`` (``st_mode``) is when it is not a regular file or a folder (``"a
    FIFO (named pipe)"``, ``"a socket"``, ...), else None."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return None


def discover(paths: str | os.PathLike | Iterable[str | os.PathLike], skipped: list[dict] | None = None) -> list[Path | RemoteObject]:
    """The capture files named by ``paths``, sorted and without duplicates.

    ``paths``: one path or an iterable of paths, each a file or a folder, or a URI of an object or
    prefix in a bucket (``s3://``, ``gs://``, ``az://``: listed by
    :func:`replay.capture.storage.list_uri` under the same name rules, each object a
    :class:`replay.capture.storage.RemoteObject`; local paths and URIs may be mixed, and are sorted
    together by their string form). A file named directly is
    always taken (whatever its name: compression is detected by content; a pipe, such as the
    ``/dev/fd/63`` of ``replay audit <(zstdcat x.zst)``, or a FIFO is first copied to a temporary
    file, :func:`spool`, since the readers read a file more than once). A folder is searched
    recursively for files ending in one of :data:`CAPTURE_SUFFIXES` (``.jsonl``, ``.ndjson``,
    ``.json``, ``.sse``, ``.har``, ``.log``, ``.mitm``, each plain or ``.zst``/``.zstd``/``.gz``), except sidecar request
    files (``*.request.json``, read with their transcript); files and folders whose name starts
    with ``.`` are skipped. Symlinked folders are followed, each real folder walked once (a link
    back to a parent is not walked again, so a loop ends). Found in a folder, a file that is not a
    regular file (a FIFO, a socket, a device: reading one could wait for ever) is skipped. One
    file reached by two paths (a symlink beside its target, a hard link, a folder linked twice)
    is taken once, by the first of its paths in sorted order. Returns the paths as given (not
    resolved; a spooled pipe's temporary copy, :func:`source_name` gives its name), sorted by
    their string form.

    ``skipped``: when given, one dict per path left out is appended to it: ``path``, ``reason``
    (``duplicate``: the same file as ``same_as``; ``not-a-regular-file``; ``folder-walked``: a
    linked folder whose real folder was already walked) and ``detail`` (a sentence). Paths the
    same after normalisation (``a/b.jsonl`` and ``a/./b.jsonl``) are one path, not listed.

    Raises :class:`FileNotFoundError` naming the first path that does not exist (a dangling
    symlink exists: it is taken, and ingest records it as unreadable), or URI whose bucket,
    object or prefix does not exist; :class:`OSError` when a pipe named directly cannot be read or
    copied (naming it); :class:`replay.capture.storage.StorageError` (an ``OSError``) naming a URI
    that cannot be listed (its backend not installed: the message names the extra; no credentials).
    """
    if isinstance(paths, (str, os.PathLike, RemoteObject)):
        paths = [paths]
    found: dict[str, Path | RemoteObject] = {}
    for p in paths:
        if isinstance(p, RemoteObject):  # listed already (ingest after the CLI's discovery)
            found.setdefault(p.uri, p)
            continue
        if is_uri(p):
            for obj in list_uri(str(p), _is_capture_name):
                found.setdefault(obj.uri, obj)
            continue
        path = Path(p)
        # a symlink that leads nowhere (dangling, or a loop) is still an entry: taken as a file,
        # it becomes an unreadable-file row at ingest, as it does when found inside a folder
        if not path.exists() and not path.is_symlink():
            raise FileNotFoundError(f"capture path does not exist: {str(path)!r}")
        if path.is_dir():
            walked: set[tuple[int, int]] = set()
            for dirpath, dirnames, filenames in os.walk(path, followlinks=True):
                st = os.stat(dirpath)
                if (st.st_dev, st.st_ino) in walked:  # a linked folder already walked (a loop, or linked twice)
                    if skipped is not None:
                        skipped.append({"path": dirpath, "reason": "folder-walked",
                                        "detail": f"a link to {os.path.realpath(dirpath)}, a folder already walked: not walked again"})
                    dirnames[:] = []
                    continue
                walked.add((st.st_dev, st.st_ino))
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for name in filenames:
                    if not name.startswith(".") and _is_capture_name(name):
                        fp = Path(dirpath) / name
                        found.setdefault(os.path.normpath(fp), fp)
        else:
            found.setdefault(os.path.normpath(path), path)
    explicit = {os.path.normpath(p) for p in paths if not isinstance(p, RemoteObject) and not is_uri(p)}
    out: list[Path | RemoteObject] = []
    seen: dict[tuple[int, int] | str, Path] = {}
    for key in sorted(found):
        fp = found[key]
        if isinstance(fp, RemoteObject):  # an object in a bucket: no inode, no pipe; listed once by its URI
            out.append(fp)
            continue
        try:
            st = os.stat(fp)
        except OSError:  # dangling, a loop, gone: ingest records it as unreadable-file
            out.append(fp)
            continue
        kind = _kind(st.st_mode)
        if kind is not None and key not in explicit:
            if skipped is not None:
                skipped.append({"path": str(fp), "reason": "not-a-regular-file",
                                "detail": f"{kind}, not a regular file: not read (name it directly to read it)"})
            continue
        ident = (st.st_dev, st.st_ino)
        if ident in seen:
            if skipped is not None:
                skipped.append({"path": str(fp), "reason": "duplicate", "same_as": str(seen[ident]),
                                "detail": f"the same file as {seen[ident]} (a link): read once"})
            continue
        seen[ident] = fp
        out.append(spool(fp) if kind is not None else fp)
    return out


#: Temporary copies of pipes named directly: (st_dev, st_ino) of the pipe -> the copy; copy -> name.
_SPOOLED: dict[tuple[int, int], Path] = {}
_SPOOL_NAMES: dict[str, str] = {}


def spool(path: Path) -> Path:
    """A regular file holding the bytes of ``path``, a pipe, FIFO or other file that can be read
    only once and not seeked: copied in blocks of :data:`BLOCK_SIZE` to a temporary folder
    (removed when the process exits), once per process (the same pipe again gives the same copy,
    as :func:`discover` runs more than once in an audit). Reading a FIFO waits for its writer, as
    ``cat`` does. Returns the copy's path; :func:`source_name` maps it back to ``str(path)``.
    Raises :class:`OSError` naming ``path`` when it cannot be read or the copy written."""
    st = os.stat(path)
    ident = (st.st_dev, st.st_ino)
    if ident in _SPOOLED:
        return _SPOOLED[ident]
    import atexit
    import shutil
    import tempfile

    try:
        with open(path, "rb") as src:  # a FIFO: waits here for its writer; the folder is made after
            folder = tempfile.mkdtemp(prefix="replay-pipe-")
            atexit.register(shutil.rmtree, folder, True)
            copy = Path(folder) / (path.name or "pipe")
            with open(copy, "wb") as dst:
                shutil.copyfileobj(src, dst, BLOCK_SIZE)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot read {path} ({_kind(st.st_mode) or 'not a regular file'}) into a temporary copy: {exc.strerror or exc}") from exc
    _SPOOLED[ident] = copy
    _SPOOL_NAMES[str(copy)] = str(path)
    return copy


def source_name(path: str | os.PathLike) -> str:
    """The name a capture file's rows carry (``source_file``) and ``run.json`` lists: ``str(path)``,
    or for the temporary copy of a pipe (:func:`spool`), the pipe's path as named."""
    return _SPOOL_NAMES.get(str(path), str(path))


def file_size(path: str | os.PathLike | RemoteObject) -> int | None:
    """Size of ``path`` in bytes, or None when it cannot be stat'ed (a dangling symlink, a
    symlink loop, a file gone since discovery): such a file is reported by ingest as an
    ``unreadable-file`` row, not by a crash of whatever only wanted its size. An object in a
    bucket (:class:`replay.capture.storage.RemoteObject`): its size as listed."""
    if isinstance(path, RemoteObject):
        return path.size
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def input_record(path: str | os.PathLike | RemoteObject) -> dict:
    """What ``run.json`` records of one input (``inputs``) so that a rerun can tell whether it
    changed (:func:`replay.runner.runfolder.inputs_changed`): ``{"path", "bytes", "mtime_ns"}`` for a local
    file (``path`` as its rows name it, :func:`source_name`; ``bytes`` and ``mtime_ns`` None when it
    cannot be stat'ed, ``mtime_ns`` None for a pipe read into a temporary copy, whose time says
    nothing of the input), ``{"path", "bytes", "etag"}`` for an object in a bucket (its URI, its
    listed size and ETag)."""
    if isinstance(path, RemoteObject):
        return {"path": path.uri, "bytes": path.size, "etag": path.etag}
    try:
        st = os.stat(path)
        size, mtime = st.st_size, st.st_mtime_ns
    except OSError:  # gone since discovery: ingest reports it as unreadable-file
        size = mtime = None
    name = source_name(path)
    if name != str(path):
        mtime = None
    return {"path": name, "bytes": size, "mtime_ns": mtime}


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

    ``path``: a local file, or an object in a bucket (:class:`replay.capture.storage.RemoteObject`,
    read in ranged requests of about ``block_size`` bytes: never downloaded whole).

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
    with open_input(path) as fh:
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
