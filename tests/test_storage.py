"""Captures in object storage (issue 21, item 4): ``replay audit s3://bucket/prefix/`` against a real
S3 API, moto's server (``python -m moto.server``) on 127.0.0.1 at a free port, started and stopped
here, with ``AWS_ENDPOINT_URL`` pointed at it and dummy credentials in the environment (botocore's
default chain, as a user's would be read). ``gs://`` and ``az://`` are checked without the network:
they route to gcsfs and adlfs and fail, naming the URI, without credentials or without the extra.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from replay.capture import discover, ingest
from replay.capture import storage
from replay.capture.files import open_lines
from replay.cli import app

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
BUCKET = "captures"
runner = CliRunner()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3():
    """The endpoint of a moto S3 server (its own process, so that this one's memory is the
    reader's alone), with the environment a user of the default chain would have: endpoint,
    region, dummy keys; no config file, no instance metadata."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("moto server did not start")
            time.sleep(0.05)
    mp = pytest.MonkeyPatch()
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    for k, v in env.items():
        mp.setenv(k, v)
    import fsspec

    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir(BUCKET)
    for f in sorted(SAMPLES.rglob("*")):  # every file, the non-captures too: the name rules pick
        if f.is_file():
            fs.pipe(f"{BUCKET}/samples/{f.relative_to(SAMPLES).as_posix()}", f.read_bytes())
    yield fs
    mp.undo()
    proc.terminate()
    proc.wait(10)


def _rows(path: Path, local: str, remote: str) -> tuple:
    """A Parquet table's schema and rows, the local root in every string replaced by the URI's."""
    table = pq.read_table(path)

    def norm(v):
        if isinstance(v, str):
            return v.replace(local, remote)
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v

    return table.schema, [{k: norm(v) for k, v in r.items()} for r in table.to_pylist()]


def _audit(paths: list[str], out: Path) -> None:
    result = runner.invoke(app, ["audit", *paths, "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output


def test_discover_lists_a_prefix_with_the_rules_of_a_folder(s3) -> None:
    local = discover(str(SAMPLES))
    remote = discover(f"s3://{BUCKET}/samples/")
    assert [str(o) for o in remote] == [str(p).replace(str(SAMPLES), f"s3://{BUCKET}/samples") for p in local]
    assert f"s3://{BUCKET}/samples/formats/chat-body.request.json" not in map(str, remote)  # a sidecar
    assert all(o.size == (SAMPLES / o.uri.split("/samples/", 1)[1]).stat().st_size for o in remote)
    assert all(o.etag and len(o.etag) == 32 for o in remote)
    # no trailing slash: the same prefix; an object named directly is taken whatever its name
    assert [o.uri for o in discover(f"s3://{BUCKET}/samples")] == [o.uri for o in remote]
    assert [o.uri for o in discover(f"s3://{BUCKET}/samples/make_samples.py")] == [f"s3://{BUCKET}/samples/make_samples.py"]


def test_hidden_keys_are_skipped_and_a_rerun_sees_new_objects(s3) -> None:
    s3.pipe(f"{BUCKET}/hid/.tmp/a.jsonl", b"{}\n")
    s3.pipe(f"{BUCKET}/hid/.b.jsonl", b"{}\n")
    s3.pipe(f"{BUCKET}/hid/x/c.jsonl", b"{}\n")
    assert [o.uri for o in discover(f"s3://{BUCKET}/hid/")] == [f"s3://{BUCKET}/hid/x/c.jsonl"]
    s3.pipe(f"{BUCKET}/hid/x/d.json.gz", b"")
    assert [o.uri for o in discover(f"s3://{BUCKET}/hid/")] == [f"s3://{BUCKET}/hid/x/c.jsonl", f"s3://{BUCKET}/hid/x/d.json.gz"]


def test_audit_of_a_bucket_equals_the_local_audit(s3, tmp_path) -> None:
    _audit([str(SAMPLES)], tmp_path / "local")
    _audit([f"s3://{BUCKET}/samples/"], tmp_path / "s3")
    tables = sorted(p.name for p in (tmp_path / "local").glob("*.parquet"))
    assert {"exchanges.parquet", "tools.parquet", "ingest_errors.parquet", "renders.parquet", "streams.parquet"} <= set(tables)
    assert sorted(p.name for p in (tmp_path / "s3").glob("*.parquet")) == tables
    for name in tables:
        local = _rows(tmp_path / "local" / name, str(SAMPLES), f"s3://{BUCKET}/samples")
        remote = _rows(tmp_path / "s3" / name, "\0", "\0")
        assert remote[0] == local[0], name
        assert remote[1] == local[1], name
    ex = pq.read_table(tmp_path / "s3" / "exchanges.parquet").to_pylist()
    assert len(ex) == 38 and all(r["source_file"].startswith(f"s3://{BUCKET}/samples/") for r in ex)
    # errors name the object's URI and line
    errs = pq.read_table(tmp_path / "s3" / "ingest_errors.parquet").to_pylist()
    assert [(r["source_file"], r["source_line"]) for r in errs] == [
        (f"s3://{BUCKET}/samples/malformed.jsonl", n) for n in (2, 3, 4, 5, 6)
    ]
    assert f"s3://{BUCKET}/samples/malformed.jsonl:2" in (tmp_path / "s3" / "report.md").read_text(encoding="utf-8")
    meta = json.loads((tmp_path / "s3" / "run.json").read_text(encoding="utf-8"))
    zst = next(i for i in meta["inputs"] if i["path"].endswith("deepseek-v31.jsonl.zst"))
    assert zst["bytes"] == (SAMPLES / "deepseek-v31.jsonl.zst").stat().st_size
    assert zst["etag"] == s3.info(f"{BUCKET}/samples/deepseek-v31.jsonl.zst")["ETag"].strip('"')


def test_changed_object_changes_the_fingerprint(s3) -> None:
    from replay.audit import audit_fingerprint
    from replay.runspec import AuditConfig

    cfg = AuditConfig()
    s3.pipe(f"{BUCKET}/fp/a.jsonl", b'{"request": {"x": 1}}\n')
    before = audit_fingerprint(discover(f"s3://{BUCKET}/fp/"), cfg, None, False, 1 << 20)
    assert audit_fingerprint(discover(f"s3://{BUCKET}/fp/"), cfg, None, False, 1 << 20) == before
    s3.pipe(f"{BUCKET}/fp/a.jsonl", b'{"request": {"y": 1}}\n')  # same key and size, other content: the ETag tells
    assert audit_fingerprint(discover(f"s3://{BUCKET}/fp/"), cfg, None, False, 1 << 20) != before


def test_litellm_bucket_layout(s3, tmp_path) -> None:
    """LiteLLM's S3/GCS loggers write one StandardLoggingPayload per object, one JSON document on
    one line, under date folders: each object one record, read as the same file read locally."""
    rows = [json.loads(ln) for ln in (SAMPLES / "formats" / "litellm-spend.jsonl").read_text().splitlines() if ln.strip()]
    local = tmp_path / "litellm"
    for i, row in enumerate(rows):
        day = ("2025-11-30", "2025-12-01")[i % 2]  # LiteLLM's key: <prefix>/<date>/time-<H-M-S-us>_<id>.json
        rel = f"{day}/time-10-0{i}-00-000000_{row.get('request_id') or row.get('id')}.json"
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(json.dumps(row).encode())
        s3.pipe(f"{BUCKET}/litellm/{rel}", json.dumps(row).encode())
    ingest([str(local)], tmp_path / "l-local")
    objects = discover(f"s3://{BUCKET}/litellm/")
    gets: list[str] = []
    objects[0]._fs.s3.meta.events.register("before-parameter-build.s3.GetObject", lambda params, **_: gets.append(params["Key"]))
    stats = ingest(objects, tmp_path / "l-s3")
    # one request per object: detection and reading share the small object's bytes
    assert sorted(gets) == sorted(o.uri.split(f"{BUCKET}/", 1)[1] for o in objects)
    assert (stats.files, stats.lines, stats.exchanges, stats.errors) == (len(rows), len(rows), len(rows), 0)
    assert stats.formats == {"litellm": len(rows)}
    for name in ("exchanges.parquet", "tools.parquet", "ingest_errors.parquet"):
        assert _rows(tmp_path / "l-s3" / name, "\0", "\0") == _rows(tmp_path / "l-local" / name, str(local), f"s3://{BUCKET}/litellm")


def test_mixed_local_paths_and_uris(s3, tmp_path) -> None:
    out = tmp_path / "mixed"
    result = runner.invoke(app, ["ingest", str(SAMPLES / "formats"), f"s3://{BUCKET}/samples/malformed.jsonl", "--out", str(out)])
    assert result.exit_code == 0, result.output
    ex = pq.read_table(out / "exchanges.parquet").to_pylist()
    files = {r["source_file"] for r in ex}
    assert f"s3://{BUCKET}/samples/malformed.jsonl" in files and str(SAMPLES / "formats" / "chat-body.json") in files
    assert len(ex) == 17 + 1
    meta = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert meta["inputs"][-1]["path"] == f"s3://{BUCKET}/samples/malformed.jsonl" and meta["inputs"][-1]["etag"]
    assert "etag" not in meta["inputs"][0]


@pytest.mark.parametrize("uri, said", [
    (f"s3://no-such-bucket/logs/", "The specified bucket does not exist"),
    (f"s3://{BUCKET}/no-such-prefix/", None),
])
def test_missing_bucket_or_prefix_is_one_line(s3, tmp_path, uri, said) -> None:
    result = runner.invoke(app, ["audit", uri, "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    msg = " ".join(result.output.split())
    assert msg.startswith(f"error: capture path does not exist: '{uri}'")
    if said:
        assert said in msg
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) <= 2  # a wrapped line


def test_a_large_object_is_streamed_in_ranges(s3) -> None:
    """A ~50 MB object read line by line: every request a range of a few MiB, the bytes fetched
    about once, and this process's RSS does not grow by anything near the object's size."""
    import psutil

    line = json.dumps({"request": {"model": "m", "messages": [{"role": "user", "content": "x" * 900}]}}).encode()
    n = 52_000
    s3.pipe(f"{BUCKET}/big/big.jsonl", (line + b"\n") * n)
    (obj,) = discover(f"s3://{BUCKET}/big/")
    assert obj.size == n * (len(line) + 1)
    fetched: list[tuple[int, int]] = []  # the byte range of every GetObject the reader sends

    def on_get(params, **_kw):
        start, _, end = params.get("Range", f"bytes=0-{obj.size - 1}").removeprefix("bytes=").partition("-")
        fetched.append((int(start), min(int(end) + 1, obj.size)))

    obj._fs.s3.meta.events.register("before-parameter-build.s3.GetObject", on_get)
    gc.collect()
    proc = psutil.Process()
    rss0 = proc.memory_info().rss
    peak = count = 0
    for i, (_l, _o, raw) in enumerate(open_lines(obj)):
        assert raw == line
        count += 1
        if i % 2000 == 0:
            peak = max(peak, proc.memory_info().rss - rss0)
    assert count == n
    assert len(fetched) > 10 and max(e - s for s, e in fetched) <= 4 * storage.READ_BLOCK
    assert sum(e - s for s, e in fetched) <= obj.size + 4 * storage.READ_BLOCK
    assert peak < 25 << 20, peak


@pytest.fixture
def no_network(monkeypatch):
    """Any connection or name lookup other than 127.0.0.1 / localhost fails the test."""
    real_connect, real_gai = socket.socket.connect, socket.getaddrinfo

    def connect(self, address):
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"network access to {address}")
        return real_connect(self, address)

    def getaddrinfo(host, *a, **k):
        if host not in ("127.0.0.1", "::1", "localhost", None):
            raise AssertionError(f"name lookup of {host}")
        return real_gai(host, *a, **k)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_gs_routes_to_gcsfs_and_needs_credentials(no_network, monkeypatch, tmp_path) -> None:
    from google.auth.compute_engine import _metadata

    assert storage.SCHEMES["gs"][1] == "gcsfs"
    monkeypatch.setattr(_metadata, "_NO_GCE_CHECK", True)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))
    result = runner.invoke(app, ["ingest", "gs://some-bucket/logs/", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    msg = " ".join(result.output.split())
    assert msg.startswith("error: gs://some-bucket/logs/: no Google Cloud credentials found by the default chain"), msg
    # with credentials found, the filesystem is gcsfs's
    import google.auth

    monkeypatch.setattr(google.auth, "default", lambda *a, **k: (object(), "p"))
    import gcsfs

    assert isinstance(storage.filesystem("gs://some-bucket/logs/"), gcsfs.GCSFileSystem)


def test_az_routes_to_adlfs_and_needs_an_account(no_network, monkeypatch, tmp_path) -> None:
    for k in ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_CONNECTION_STRING"):
        monkeypatch.delenv(k, raising=False)
    result = runner.invoke(app, ["audit", "az://container/logs/", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    msg = " ".join(result.output.split())
    assert msg.startswith("error: az://container/logs/: no Azure storage account: set AZURE_STORAGE_ACCOUNT_NAME"), msg
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", "a2V5")
    import adlfs

    assert isinstance(storage.filesystem("az://container/logs/"), adlfs.AzureBlobFileSystem)


@pytest.mark.parametrize("uri, extra, module", [
    ("s3://b/p/", "s3", "s3fs"), ("gs://b/p/", "gcs", "gcsfs"), ("gcs://b/p/", "gcs", "gcsfs"),
    ("az://c/p/", "azure", "adlfs"), ("abfs://c/p/", "azure", "adlfs"),
])
def test_a_missing_backend_names_the_extra(no_network, monkeypatch, tmp_path, uri, extra, module) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    result = runner.invoke(app, ["ingest", uri, "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    msg = " ".join(result.output.split())
    assert msg == f"error: {uri}: reading {uri.split(':')[0]}:// needs the {module} package: pip install 'replay-audit[{extra}]'"


def test_an_unknown_scheme_is_refused_not_read_as_a_local_path(tmp_path) -> None:
    result = runner.invoke(app, ["ingest", "http://example.com/x.jsonl", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert "unsupported URI scheme http://" in " ".join(result.output.split())


def test_an_object_gone_after_listing_is_an_error_row_naming_its_uri(s3, tmp_path) -> None:
    s3.pipe(f"{BUCKET}/gone/a.jsonl", (SAMPLES / "malformed.jsonl").read_bytes())
    s3.pipe(f"{BUCKET}/gone/b.jsonl", (SAMPLES / "malformed.jsonl").read_bytes())
    files = discover(f"s3://{BUCKET}/gone/")
    s3.rm(f"{BUCKET}/gone/a.jsonl")
    stats = ingest(files, tmp_path / "r")
    errs = pq.read_table(tmp_path / "r" / "ingest_errors.parquet").to_pylist()
    gone = [r for r in errs if r["source_file"] == f"s3://{BUCKET}/gone/a.jsonl"]
    assert [(r["source_line"], r["reason"]) for r in gone] == [(1, "unreadable-file")]
    assert gone[0]["detail"].startswith(f"FileNotFoundError: s3://{BUCKET}/gone/a.jsonl: ")
    assert stats.exchanges == 1 and stats.errors == 1 + 5  # b.jsonl read as the local file is


def test_a_backend_fault_while_reading_is_an_oserror_naming_the_uri(s3) -> None:
    """gcsfs raises its own HttpError, botocore its ClientError: every fault of a read is an
    OSError naming the object (what ingest records as unreadable-file) and never a crash."""
    s3.pipe(f"{BUCKET}/fault/a.jsonl", b"{}\n" * 10)
    (obj,) = discover(f"s3://{BUCKET}/fault/")
    fh = obj.open()

    class Backend:  # a backend file whose read fails as gcsfs's does, with its own exception
        def read(self, *_a):
            raise RuntimeError("HTTP 503 Slow Down")

    fh._fh = Backend()
    with pytest.raises(OSError) as info:
        fh.read(4)
    assert str(info.value) == f"s3://{BUCKET}/fault/a.jsonl: RuntimeError: HTTP 503 Slow Down"


def test_no_s3_credentials_is_one_line(s3, monkeypatch, tmp_path) -> None:
    """Read from the environment as it is at each listing: credentials that were there for an
    earlier listing in this process (fsspec keeps its filesystems) are not used once gone."""
    assert discover(f"s3://{BUCKET}/samples/")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = runner.invoke(app, ["audit", f"s3://{BUCKET}/samples/", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    msg = " ".join(result.output.split())
    assert msg.startswith(f"error: s3://{BUCKET}/samples/: cannot list: NoCredentialsError: Unable to locate credentials"), msg


def test_a_small_object_is_fetched_once_per_version(s3) -> None:
    """The bytes of a small object serve every open of the same URI, ETag and size; a new version
    (listed again: another ETag) is fetched anew, never the old bytes."""
    s3.pipe(f"{BUCKET}/ver/a.jsonl", b'{"v": 1}\n')
    (old,) = discover(f"s3://{BUCKET}/ver/")
    assert [raw for _l, _o, raw in open_lines(old)] == [b'{"v": 1}']
    s3.pipe(f"{BUCKET}/ver/a.jsonl", b'{"v": 2}\n')  # same size
    assert [raw for _l, _o, raw in open_lines(old)] == [b'{"v": 1}']  # the bytes kept for its ETag
    (new,) = discover(f"s3://{BUCKET}/ver/")
    assert new.etag != old.etag
    assert [raw for _l, _o, raw in open_lines(new)] == [b'{"v": 2}']
