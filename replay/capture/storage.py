"""Captures in object storage: ``s3://``, ``gs://`` and ``az://`` URIs listed and read through fsspec.

Backend: `fsspec <https://filesystem-spec.readthedocs.io>`_ with ``s3fs``, ``gcsfs`` and ``adlfs``,
the filesystems pandas, Dask, Polars and Hugging Face ``datasets`` open the same URIs with. Chosen
over ``pyarrow.fs`` because each of the three reads its provider's own default credential chain
from the environment and config files (botocore's chain for S3, ``AWS_ENDPOINT_URL`` included;
``google.auth.default()`` for GCS; ``AZURE_STORAGE_*`` variables and ``DefaultAzureCredential``
for Azure), where ``pyarrow.fs.AzureFileSystem`` needs the account passed in code. Each backend is
an optional extra (``replay-audit[s3]``, ``[gcs]``, ``[azure]``): a URI whose backend is not
installed stops with :class:`MissingBackend`, one line naming the extra.

Scheme to backend (:data:`SCHEMES`): ``s3://bucket/key`` (s3fs), ``gs://`` or ``gcs://bucket/key``
(gcsfs), ``az://``, ``abfs://`` or ``abfss://container/path`` (adlfs; the account from
``AZURE_STORAGE_ACCOUNT_NAME`` or ``AZURE_STORAGE_CONNECTION_STRING``). replay has no credential
option of its own.

Listing (:func:`list_uri`) follows :func:`replay.capture.files.discover`'s rules for a local
folder: a URI naming an object is taken whatever its name; a URI naming a prefix is listed
recursively (``s3://bucket/logs`` and ``s3://bucket/logs/`` both list the keys under ``logs/``),
keeping the names that end in a capture suffix, skipping sidecar request files and every key with
a path segment (below the prefix) that starts with ``.``; sorted by URI. Each object is a
:class:`RemoteObject` carrying its size and ETag (recorded in ``run.json`` and in the audit's
resume fingerprint, so that a rerun can tell a changed input).

Reading (:meth:`RemoteObject.open`) streams the object in ranged reads of about
:data:`READ_BLOCK` bytes (fsspec's read-ahead cache holds the block being
read and the next one), through the same decompressors as a local file: nothing is downloaded
whole first. Errors name the URI (``s3://bucket/key``), and line errors ``s3://bucket/key:line``.
"""

from __future__ import annotations

import importlib
import io
import os
import re
from collections import OrderedDict
from typing import IO, Any, Callable

__all__ = [
    "MissingBackend",
    "RemoteObject",
    "SCHEMES",
    "StorageError",
    "filesystem",
    "is_uri",
    "list_uri",
    "open_input",
]

#: URI scheme -> (the fsspec protocol, the module that implements it, the pip extra that installs it).
SCHEMES: dict[str, tuple[str, str, str]] = {
    "s3": ("s3", "s3fs", "s3"),
    "gs": ("gs", "gcsfs", "gcs"),
    "gcs": ("gs", "gcsfs", "gcs"),
    "az": ("az", "adlfs", "azure"),
    "abfs": ("abfs", "adlfs", "azure"),
    "abfss": ("abfs", "adlfs", "azure"),
}

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

#: Bytes fetched per ranged read of an object (and held ahead by fsspec's read-ahead cache).
READ_BLOCK = 1 << 20

#: An object of at most this many bytes (as listed) is fetched whole in one request and kept in
#: :data:`_SMALL` for the next opens of it: detection, then reading, open a capture more than once,
#: and LiteLLM's bucket loggers write one small object per request.
SMALL_OBJECT = READ_BLOCK
#: Bytes of small objects kept at most (the least recently opened are dropped first).
SMALL_CACHE_BYTES = 32 << 20


class _SmallObjects:
    """The bytes of recently opened small objects, by ``(uri, etag, size)``, up to
    :data:`SMALL_CACHE_BYTES` in all (least recently used dropped first)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.held = 0
        self.items: "OrderedDict[tuple, bytes]" = OrderedDict()

    def get(self, key: tuple) -> bytes | None:
        data = self.items.get(key)
        if data is not None:
            self.items.move_to_end(key)
        return data

    def put(self, key: tuple, data: bytes) -> None:
        if key in self.items or len(data) > self.budget:
            return
        self.items[key] = data
        self.held += len(data)
        while self.held > self.budget:
            _, old = self.items.popitem(last=False)
            self.held -= len(old)


_SMALL = _SmallObjects(SMALL_CACHE_BYTES)


class StorageError(OSError):
    """Object storage could not be listed or read: the message is one line naming the URI and
    what went wrong (no bucket, no credentials, an unsupported scheme)."""


class MissingBackend(StorageError):
    """The filesystem package a URI's scheme needs is not installed; the message names the extra
    (``pip install 'replay-audit[s3]'``)."""


def is_uri(path: Any) -> bool:
    """True when ``path`` is a :class:`RemoteObject` or a string of the form ``scheme://...``
    (any scheme: an unknown one is refused by :func:`filesystem`, never read as a local path)."""
    return isinstance(path, RemoteObject) or (isinstance(path, str) and _URI.match(path) is not None)


def _scheme(uri: str) -> str:
    m = _URI.match(uri)
    if m is None:
        raise StorageError(f"{uri}: not a URI (scheme://bucket/key)")
    return m.group(1).lower()


def _check_credentials(scheme: str, uri: str) -> None:
    """Fail fast, naming ``uri``, where a backend would otherwise go on without credentials (gcsfs
    falls back to anonymous access and adlfs refuses without an account): the provider's default
    chain is asked first, the same one the backend then uses."""
    if scheme in ("gs", "gcs"):
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            google.auth.default()
        except DefaultCredentialsError:
            raise StorageError(
                f"{uri}: no Google Cloud credentials found by the default chain "
                "(GOOGLE_APPLICATION_CREDENTIALS, `gcloud auth application-default login`, the metadata server)"
            ) from None
    elif scheme in ("az", "abfs", "abfss"):
        if not (os.environ.get("AZURE_STORAGE_ACCOUNT_NAME") or os.environ.get("AZURE_STORAGE_CONNECTION_STRING")):
            raise StorageError(
                f"{uri}: no Azure storage account: set AZURE_STORAGE_ACCOUNT_NAME (credentials from "
                "AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_TOKEN or DefaultAzureCredential) or AZURE_STORAGE_CONNECTION_STRING"
            )


def filesystem(uri: str) -> Any:
    """The fsspec filesystem that reads ``uri`` (``s3://``, ``gs://``, ``az://`` ...: :data:`SCHEMES`),
    configured only from the environment and the provider's config files, as they are at the call
    (a new instance each call).

    Raises :class:`MissingBackend` when the scheme's package (or fsspec) is not installed, naming
    the extra; :class:`StorageError` for an unknown scheme, or when no GCS credentials or Azure
    account can be found (checked without contacting the provider)."""
    scheme = _scheme(uri)
    if scheme not in SCHEMES:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise StorageError(f"{uri}: unsupported URI scheme {scheme}:// (captures are read from local paths and {known})")
    protocol, module, extra = SCHEMES[scheme]
    for mod in ("fsspec", module):
        try:
            importlib.import_module(mod)
        except ImportError:
            raise MissingBackend(
                f"{uri}: reading {scheme}:// needs the {mod} package: pip install 'replay-audit[{extra}]'"
            ) from None
    _check_credentials(scheme, uri)
    import fsspec

    # a new instance: the environment and config files are read now, as by a new process (fsspec
    # would otherwise hand back one made earlier in this process, with its credentials and listings)
    kwargs: dict[str, Any] = {"skip_instance_cache": True}
    if module == "adlfs":
        kwargs["anon"] = False  # the account's credentials (key, SAS, DefaultAzureCredential), never anonymous
    try:
        return fsspec.filesystem(protocol, **kwargs)
    except Exception as exc:  # noqa: BLE001 - a backend refusing its configuration
        raise StorageError(f"{uri}: {type(exc).__name__}: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


class RemoteObject:
    """One object in a bucket: ``uri`` (``scheme://bucket/key``, as named in ``source_file``,
    errors and ``run.json``), ``size`` (bytes, None when not listed), ``etag`` (the store's
    entity tag, None when not listed). It answers the part of :class:`pathlib.Path` the capture
    readers use (``name``, ``parent``, ``with_name``, ``is_file``, ``read_bytes``, ``str()``,
    ordering); it has no ``__fspath__``, so built-in ``open`` refuses it rather than read a local
    file of that name: open it with :meth:`open` or :func:`open_input`."""

    __slots__ = ("uri", "size", "etag", "_fs")

    def __init__(self, uri: str, fs: Any, size: int | None = None, etag: str | None = None) -> None:
        self.uri = uri
        self.size = size
        self.etag = etag
        self._fs = fs

    @property
    def scheme(self) -> str:
        """The URI's scheme (``s3``, ``gs`` ...)."""
        return _scheme(self.uri)

    @property
    def key(self) -> str:
        """``bucket/key``: the URI without its scheme, as fsspec names the object."""
        return self._fs._strip_protocol(self.uri)

    @property
    def name(self) -> str:
        """The last segment of the key."""
        return self.key.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> "RemoteObject":
        """The prefix holding the object (a :class:`RemoteObject` without size)."""
        head = self.uri.rstrip("/").rsplit("/", 1)[0]
        return RemoteObject(head, self._fs)

    def with_name(self, name: str) -> "RemoteObject":
        """The object named ``name`` beside this one (not listed: size and ETag unknown)."""
        return RemoteObject(f"{self.parent.uri}/{name}", self._fs)

    def is_file(self) -> bool:
        """True when the object exists (one metadata request); False when it does not or cannot
        be seen."""
        try:
            return self._fs.isfile(self.key)
        except Exception:  # noqa: BLE001 - unreadable is not a file for the sidecar lookup
            return False

    def open(self) -> IO[bytes]:
        """A seekable binary file object streaming the object in ranged reads of about
        :data:`READ_BLOCK` bytes (:class:`_ObjectReader`); an object listed with at most
        :data:`SMALL_OBJECT` bytes is fetched in one request, and its bytes kept (within
        :data:`SMALL_CACHE_BYTES`) for the next open of the same URI, ETag and size. Raises :class:`OSError` naming the
        URI (:class:`FileNotFoundError` when the object is gone), from here or from ``read``:
        whatever the backend raises (gcsfs's ``HttpError``, botocore's errors) becomes an
        ``OSError``, which ingest records as an ``unreadable-file`` row."""
        try:
            if self.size is not None and self.size <= SMALL_OBJECT:  # one request, kept for the next open
                at = (self.uri, self.etag, self.size)
                data = _SMALL.get(at)
                if data is None:
                    data = self._fs.cat_file(self.key)
                    _SMALL.put(at, data)
                return _ObjectReader(io.BytesIO(data), self.uri)  # type: ignore[return-value]
            fh = self._fs.open(self.key, "rb", block_size=READ_BLOCK, cache_type="readahead")
        except Exception as exc:  # noqa: BLE001 - every backend fault: one OSError naming the URI
            raise _os_error(self.uri, exc) from None
        return _ObjectReader(fh, self.uri)  # type: ignore[return-value]

    def read_bytes(self) -> bytes:
        """The whole object (for small sidecar files only). Raises as :meth:`open`."""
        with self.open() as fh:
            return fh.read()

    def __str__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"RemoteObject({self.uri!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemoteObject) and other.uri == self.uri

    def __hash__(self) -> int:
        return hash(("RemoteObject", self.uri))

    def __lt__(self, other: "RemoteObject") -> bool:
        return self.uri < str(other)

    def __reduce__(self) -> tuple:
        # the filesystem is rebuilt from the environment where it is unpickled
        return (_unpickle, (self.uri, self.size, self.etag))


def _why(exc: BaseException) -> str:
    """``Type: message`` of a backend's exception on one line, with a hint when no credentials
    were found."""
    why = f"{type(exc).__name__}: {_one_line(exc)}"
    if "NoCredentials" in type(exc).__name__:
        why += " (the provider's default chain found none: environment, config files, instance role)"
    return why


def _os_error(uri: str, exc: BaseException) -> OSError:
    """``exc`` as an OSError whose message names ``uri`` (``FileNotFoundError`` and
    ``PermissionError`` kept as such)."""
    cls = type(exc) if isinstance(exc, (FileNotFoundError, PermissionError)) else OSError
    return cls(f"{uri}: {_why(exc)}")


class _ObjectReader:
    """The file object of :meth:`RemoteObject.open`: ``read``, ``seek``, ``tell``, ``close`` of
    the backend's file, any exception they raise turned into an OSError naming ``uri``."""

    def __init__(self, fh: Any, uri: str) -> None:
        self._fh = fh
        self.uri = uri

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self._fh, name)(*args)
        except Exception as exc:  # noqa: BLE001 - one kind of error for every backend
            raise _os_error(self.uri, exc) from None

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all the rest when ``n`` < 0); ``b""`` at the end."""
        return self._call("read", n)

    def seek(self, pos: int, whence: int = 0) -> int:
        """Move to ``pos`` (as :meth:`io.IOBase.seek`); returns the new position."""
        return self._call("seek", pos, whence)

    def tell(self) -> int:
        """The current position (bytes)."""
        return self._call("tell")

    def readable(self) -> bool:
        """True."""
        return True

    def seekable(self) -> bool:
        """True: a seek becomes the next ranged read's start."""
        return True

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._fh.closed

    def close(self) -> None:
        """Close the backend's file (never raises: nothing was written)."""
        try:
            self._fh.close()
        except Exception:  # noqa: BLE001 - a read-only file has nothing to flush
            pass

    def __enter__(self) -> "_ObjectReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _unpickle(uri: str, size: int | None, etag: str | None) -> RemoteObject:
    return RemoteObject(uri, filesystem(uri), size, etag)


def _etag(info: dict) -> str | None:
    for k in ("ETag", "etag", "Etag"):
        if info.get(k):
            return str(info[k]).strip('"')
    return None


def _kept(rel: str, is_capture_name: Callable[[str], bool]) -> bool:
    parts = [p for p in rel.split("/") if p]
    return bool(parts) and not any(p.startswith(".") for p in parts) and is_capture_name(parts[-1])


def list_uri(uri: str, is_capture_name: Callable[[str], bool]) -> list[RemoteObject]:
    """The capture objects ``uri`` names (rules: module docstring), sorted by URI.
    ``is_capture_name``: whether an object's last name segment is a capture (the rule of a local
    folder, :func:`replay.capture.files.discover`); an object named by ``uri`` itself is always kept.

    Raises :class:`FileNotFoundError` (one line: ``capture path does not exist: 's3://...'`` and the
    store's reason) when the bucket, object or prefix does not exist or holds nothing;
    :class:`MissingBackend` / :class:`StorageError` as :func:`filesystem`, and
    :class:`StorageError` naming the URI for any other failure of the store (credentials refused,
    the endpoint unreachable)."""
    fs = filesystem(uri)
    scheme = _scheme(uri)
    key = fs._strip_protocol(uri).rstrip("/")  # bucket/key (adlfs also drops an account host)
    try:
        fs.invalidate_cache()  # a listing cached by an earlier call in this process may be stale
        info = fs.info(key)
        if info.get("type") == "directory":
            found = fs.find(key, detail=True)
            infos = [(k, v) for k, v in found.items() if v.get("type", "file") == "file"]
        else:
            infos = [(key, info)]
            found = None
    except FileNotFoundError as exc:
        why = _one_line(exc)
        why = "" if why.strip("/") == key else f" ({why})"
        raise FileNotFoundError(f"capture path does not exist: {uri!r}{why}") from None
    except Exception as exc:  # noqa: BLE001 - credentials, endpoint, permission: one line naming the URI
        raise StorageError(f"{uri}: cannot list: {_why(exc)}") from None
    out = []
    for k, v in infos:
        k = k.rstrip("/")
        if found is not None and not _kept(k[len(key):], is_capture_name):
            continue
        size = v.get("size", v.get("Size"))
        out.append(RemoteObject(f"{scheme}://{k}", fs, int(size) if size is not None else None, _etag(v)))
    return sorted(out, key=lambda o: o.uri)


def open_input(path: Any) -> IO[bytes]:
    """A binary file object over a capture: a :class:`RemoteObject` or URI string streamed from
    its store (:meth:`RemoteObject.open`), else the local file ``open(path, "rb")``. Raises
    :class:`OSError` as they do (:class:`StorageError` for a URI that cannot be resolved)."""
    if isinstance(path, RemoteObject):
        return path.open()
    if isinstance(path, str) and is_uri(path):
        return RemoteObject(path, filesystem(path)).open()
    return open(path, "rb")
