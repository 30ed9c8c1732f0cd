"""What keeps a ``--jobs`` pool process small (its RSS counts toward the audit's peak).

- :func:`replay.runner.memory.glibc_allocators`: Arrow allocates through glibc, and glibc's mmap
  threshold stays fixed (a freed large block no longer raises it, which sent every later block
  up to that size to the heap);
- the ingest tables' Parquet pages are small (:data:`replay.capture.ingest.PAGE_BYTES`), so a
  stage reading a 64-row slice of a row group decodes one page of ``request_json``, not the
  whole row group's.

Each check runs in a fresh interpreter: allocator state is per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, *args: str) -> dict:
    got = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert got.returncode == 0, got.stderr[-3000:]
    return json.loads(got.stdout.strip().splitlines()[-1])


# After a 4 MiB block is malloc'd and freed, glibc's dynamic threshold rises to 4 MiB: a 1 MiB
# block then comes from the heap (no new mapping). With the threshold fixed it is mapped.
MMAP_PROBE = r"""
import ctypes, json, sys
libc = ctypes.CDLL("libc.so.6")
class MI(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc.mallinfo2.restype = MI
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "pool":
    from replay.runner.memory import glibc_allocators
    glibc_allocators()
import pyarrow as pa
libc.free(libc.malloc(4 << 20))
before = libc.mallinfo2().hblks
p = libc.malloc(1 << 20)
mapped = libc.mallinfo2().hblks - before
libc.free(p)
print(json.dumps({"mapped": mapped, "arrow": pa.default_memory_pool().backend_name}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_glibc_allocators_keep_large_blocks_mapped_and_arrow_on_glibc() -> None:
    plain = _python(MMAP_PROBE, "plain")
    assert plain["mapped"] == 0, "the probe relies on glibc raising its threshold after a freed mapped block"
    assert plain["arrow"] != "system"
    pool = _python(MMAP_PROBE, "pool")
    assert pool["mapped"] == 1, "a 1 MiB block came from the heap: the mmap threshold was not fixed"
    assert pool["arrow"] == "system"


def test_a_pool_process_runs_with_the_glibc_allocators(tmp_path: Path) -> None:
    code = r"""
import json
from replay.runner.pool import _shared, close_pools
from replay.runspec import RunSpec

def probe():
    import pyarrow as pa
    return pa.default_memory_pool().backend_name

if __name__ == "__main__":
    pool = _shared(1, RunSpec())
    print(json.dumps({"arrow": pool.submit(probe).result()}))
    close_pools()
"""
    script = tmp_path / "probe_pool.py"
    script.write_text(code, encoding="utf-8")
    got = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert got.returncode == 0, got.stderr[-3000:]
    assert json.loads(got.stdout.strip().splitlines()[-1]) == {"arrow": "system"}


# Ingest a bench-shaped capture (~30 KB requests) into one row group of 512 exchanges.
WRITE = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, "benchmarks")
import bench_scale
from replay.capture import ingest
tmp = Path(sys.argv[1])
bench_scale.write_capture(tmp / "cap.jsonl.zst", 512)
ingest([tmp / "cap.jsonl.zst"], tmp / "run", batch_rows=512)
print(json.dumps({}))
"""
# In a fresh process: Arrow's peak allocation while reading the row group's render slices, and
# the row group's uncompressed request_json.
SLICES = r"""
import json, sys
from pathlib import Path
import pyarrow as pa
import pyarrow.parquet as pq
from replay.runner import driver as pipeline
from replay.stages.render import RENDER_COLUMNS
pa.set_memory_pool(pa.system_memory_pool())  # counts exactly what the reader holds
path = Path(sys.argv[1]) / "run" / "exchanges.parquet"
rg = pq.ParquetFile(path).metadata.row_group(0)
col = [rg.column(i) for i in range(rg.num_columns) if rg.column(i).path_in_schema == "request_json"][0]
pool = pa.default_memory_pool()
base = pool.bytes_allocated()
for b in pipeline.read_slices(path, pipeline.batch_refs(path, 512)[0], RENDER_COLUMNS):
    del b
print(json.dumps({"request_json": col.total_uncompressed_size, "peak": pool.max_memory() - base}))
"""


def test_a_slice_of_a_row_group_decodes_one_page_not_the_row_group(tmp_path: Path) -> None:
    from replay.capture.ingest import PAGE_BYTES

    _python(WRITE, str(tmp_path))
    got = _python(SLICES, str(tmp_path))
    assert got["request_json"] > 2 * PAGE_BYTES, got  # the row group spans several pages
    # Arrow's peak while reading the slices: about one page decoded at a time (7.9 MB here), where
    # a row group written as one page was decoded whole for each slice (16.7 MB)
    assert got["peak"] < got["request_json"] * 6 // 10, got
