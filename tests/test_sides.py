"""Sides through the CLI: plugin sides in process, out-of-process sides in a second virtualenv, and
the equivalence of the two paths.

- a real audit with a ``module:attr`` plugin parser and a ``file.py:attr`` serializer;
- main and a "PR" version of a user package ``acme_tools`` (v1 and v2, same import name), each
  importable only by its own worker running in a venv created here from the stdlib alone (no
  orjson, no replay installed: the parent puts this checkout on the worker's path), in one audit;
- a planted faulty parser as the old side, in process and out of process: identical tables.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sides_data import LATE_FLUSH, ROOT, SAMPLES, invoke, query_json, summary, write_capture

NAMES = [["read"], ["read", "write"], ["edit"], []]  # 4 exchanges, 4 calls, one answer without calls


def test_module_attr_parser_and_file_serializer_sides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--old-parser sides_plugin_lateflush:LateFlush`` (a module on the import path) and
    ``--new-serializer strict_null.py:serialize`` (a file): the audit counts what each plugin does."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "sides_plugin_lateflush.py").write_text(LATE_FLUSH)
    monkeypatch.syspath_prepend(str(plugins))
    ser = tmp_path / "strict_null.py"
    ser.write_text(
        "import copy\n"
        "def serialize(tool):\n"
        "    out = copy.deepcopy(tool)\n"
        "    out['function']['strict'] = None  # leaks strict only, where model-dump also leaks description\n"
        "    return out\n"
    )
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    out = tmp_path / "run"
    result = invoke(
        "audit", capture, "--out", out, "-q", "--chunkings", "whole,char",
        "--old-parser", "sides_plugin_lateflush:LateFlush", "--new-serializer", f"{ser}:serialize",
    )
    assert result.exit_code == 0, result.output
    s = summary(out)
    # LateFlush forgets the calls of the last step: under `whole` all 4 calls are lost
    assert (s["old"]["calls_whole"], s["old"]["calls_dropped"], s["new"]["calls_dropped"]) == (4, 4, 0)
    leaks = query_json(out, "SELECT side, l.path AS path, count(*) AS n FROM renders, unnest(leaked_nulls) AS t(l) GROUP BY ALL ORDER BY ALL")
    assert leaks == [
        {"side": "new", "path": "$.function.strict", "n": 4},
        {"side": "old", "path": "$.function.description", "n": 4},
        {"side": "old", "path": "$.function.strict", "n": 4},
    ]
    parsers = query_json(out, "SELECT side, string_agg(DISTINCT parser) AS p FROM streams GROUP BY side ORDER BY side")
    assert parsers == [{"side": "new", "p": "hermes"}, {"side": "old", "p": "hermes"}, {"side": "reference", "p": "hermes"}]
    meta = json.loads((out / "run.json").read_text())
    assert meta["sides"]["old"] == {
        "in_process": True,
        "python": sys.executable,
        "python_version": platform.python_version(),
        "serializer": "model-dump",
        "parser": "sides_plugin_lateflush:LateFlush",
    }


# --- a second virtualenv: main and a PR version of a user package in one audit -----------------

ACME_V1 = LATE_FLUSH + """
import copy

VERSION = "1"


def serialize(tool):
    '''v1 (main): writes "strict": null when the client sent no strict.'''
    out = copy.deepcopy(tool)
    out["function"].setdefault("strict", None)
    return out


Parser = LateFlush  # v1 (main): loses the calls of the last step
"""

ACME_V2 = """
import copy

from replay.parsers.hermes import HermesParser

VERSION = "2"


def serialize(tool):
    '''v2 (the PR): the declaration as sent.'''
    return copy.deepcopy(tool)


class Parser(HermesParser):
    '''v2 (the PR): the fixed parser.'''
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with the standard library only (no pip, no orjson, no replay)."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "v")], check=True)
    py = root / "v" / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    assert py.exists()
    return py


def _package(where: Path, source: str) -> Path:
    (where / "acme_tools").mkdir(parents=True)
    (where / "acme_tools" / "__init__.py").write_text(source)
    return where


def test_main_and_pr_versions_of_a_package_in_one_audit(tmp_path: Path, venv: Path) -> None:
    v1 = _package(tmp_path / "main", ACME_V1)
    v2 = _package(tmp_path / "pr", ACME_V2)
    # only the workers can import the user's package, and the venv has neither orjson nor replay
    assert importlib.util.find_spec("acme_tools") is None
    for mod in ("orjson", "replay", "acme_tools"):
        assert subprocess.run([str(venv), "-c", f"import {mod}"], cwd=tmp_path, capture_output=True).returncode != 0, mod
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    out = tmp_path / "run"
    side_args = []
    for side, path in (("old", v1), ("new", v2)):
        side_args += [
            f"--{side}-python", venv, f"--{side}-pythonpath", path,
            f"--{side}-serializer", "acme_tools:serialize", f"--{side}-parser", "acme_tools:Parser",
        ]
    result = invoke("audit", capture, "--out", out, "-q", "--chunkings", "whole,char,fixed-3", *side_args)
    assert result.exit_code == 0, result.output
    s = summary(out)
    assert (s["old"]["schemas_with_leaked_null"], s["new"]["schemas_with_leaked_null"]) == (4, 0)
    assert (s["old"]["calls_dropped"], s["new"]["calls_dropped"]) == (4, 0)
    assert (s["old"]["prompts_diverged_from_reference"], s["new"]["prompts_diverged_from_reference"]) == (4, 0)
    errors = query_json(out, "SELECT count(*) AS n FROM streams WHERE error IS NOT NULL")
    assert errors == [{"n": 0}]
    meta = json.loads((out / "run.json").read_text())
    for side, path in (("old", v1), ("new", v2)):
        m = meta["sides"][side]
        assert m["in_process"] is False and m["python"] == str(venv)
        assert Path(m["executable"]).parent == venv.parent  # the venv's interpreter ran it
        assert m["python_version"] == platform.python_version()  # the venv's base interpreter
        assert m["pythonpath"] == [str(path)]
        assert m["replay_package"] == str(ROOT / "replay")
        assert m["restarts"] == 0
    assert meta["options"]["old_pythonpath"] == str(v1)
    report = (out / "report.md").read_text()
    assert f"Old side ran in `{venv}` (Python {platform.python_version()}) as a worker process." in report


# --- in process and out of process give the same tables ------------------------------------


def _table(run: Path, name: str) -> list[dict]:
    return pq.read_table(run / f"{name}.parquet").to_pylist()


def _other_python() -> str | None:
    """Another CPython 3.10+ on this machine than the one running the tests, if any."""
    found = [shutil.which(n) for n in ("python3.10", "python3.12", "python3.13", "python3.11")]
    found += [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.1*/bin/python"))]  # pyenv installs
    for path in found:
        if path:
            got = subprocess.run([path, "-c", "import sys; print(sys.version_info[:2] >= (3, 10), sys.version_info[:2] != tuple(%r))" % (list(sys.version_info[:2]),)],
                                 capture_output=True, text=True)
            if got.returncode == 0 and got.stdout.split() == ["True", "True"]:
                return path
    return None


OTHER_PYTHON = _other_python()


@pytest.mark.parametrize(
    "python",
    [sys.executable, pytest.param(OTHER_PYTHON, marks=pytest.mark.skipif(OTHER_PYTHON is None, reason="no other Python 3.10+ on PATH"))],
    ids=["this-python", "other-python"],
)
def test_planted_faulty_parser_in_and_out_of_process_give_identical_tables(tmp_path: Path, python: str) -> None:
    """The bundled samples (10 families, reasoning, recorded steps) with LateFlush as the old
    parser: once in process, once with both sides in worker processes (this interpreter, and
    another Python version when one is installed: the worker then runs replay from this checkout
    without orjson). The chunkings are forced: by default an out-of-process side counts as not
    built-in (it gets the synthetic chunkings) while the in-process new side is built-in."""
    plugin = tmp_path / "late_flush.py"
    plugin.write_text(LATE_FLUSH)
    args = ["--old-parser", f"{plugin}:LateFlush", "--chunkings", "recorded,whole,char,fixed-3,split-all", "-q"]
    inproc, outproc = tmp_path / "in", tmp_path / "out"
    assert invoke("audit", SAMPLES, "--out", inproc, *args).exit_code == 0
    result = invoke("audit", SAMPLES, "--out", outproc, *args, "--old-python", python, "--new-python", python)
    assert result.exit_code == 0, result.output
    for name in ("renders", "streams", "calls"):
        a, b = _table(inproc, name), _table(outproc, name)
        assert len(a) == len(b) and a == b, name
    assert summary(outproc)["old"]["calls_dropped"] == 7  # the fault is there, not an empty comparison
    meta = json.loads((outproc / "run.json").read_text())
    assert meta["sides"]["old"]["in_process"] is False and meta["sides"]["reference"]["in_process"] is True


def test_reference_parser_is_what_every_side_is_judged_against(tmp_path: Path) -> None:
    """``--reference-parser`` with a whole-text parse that keeps only the first call: the second
    call of x1 is no longer in the reference, so both built-in sides stream one call more than
    the reference (``calls_whole`` 3, not 4) and that call matches nothing."""
    plugin = tmp_path / "first_only.py"
    plugin.write_text(
        "from replay.parsers.hermes import HermesParser\n"
        "from replay.parsers.base import ParseResult\n"
        "class FirstOnly(HermesParser):\n"
        "    def parse(self, text):\n"
        "        r = super().parse(text)\n"
        "        return ParseResult(r.content, r.calls[:1], r.reasoning)\n"
    )
    capture = write_capture(tmp_path / "cap" / "c.jsonl", NAMES)
    out = tmp_path / "run"
    result = invoke("audit", capture, "--out", out, "-q", "--chunkings", "whole", "--reference-parser", f"{plugin}:FirstOnly")
    assert result.exit_code == 0, result.output
    assert summary(out)["old"]["calls_whole"] == 3
    rows = query_json(out, "SELECT side, chunking, calls_streamed, calls_whole FROM streams WHERE exchange_id = 'x1' ORDER BY side, chunking")
    assert rows == [
        {"side": "new", "chunking": "parse", "calls_streamed": 2, "calls_whole": 1},
        {"side": "new", "chunking": "whole", "calls_streamed": 2, "calls_whole": 1},
        {"side": "old", "chunking": "parse", "calls_streamed": 2, "calls_whole": 1},
        {"side": "old", "chunking": "whole", "calls_streamed": 2, "calls_whole": 1},
        {"side": "reference", "chunking": "parse", "calls_streamed": 1, "calls_whole": 1},
    ]
    unmatched = query_json(out, "SELECT side, name FROM calls WHERE NOT matches_whole ORDER BY side")
    assert unmatched == [{"side": "new", "name": "write"}, {"side": "new", "name": "write"}, {"side": "old", "name": "write"}, {"side": "old", "name": "write"}]
    assert json.loads((out / "run.json").read_text())["options"]["reference_parser"] == f"{plugin}:FirstOnly"
