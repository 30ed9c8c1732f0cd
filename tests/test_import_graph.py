"""No import cycles among the ``replay.*`` modules (issue 9, part 5), the layering of issue 22
(``replay.capture`` and ``replay.stages`` never import ``replay.runner``), and every module
imports on its own in a fresh interpreter.

The graph is read from the source with :mod:`ast`: an edge for every ``import`` / ``from ... import``
of a ``replay`` module, at module level *and* inside functions (a deferred import is how the old
cycles pipeline -> verdicts -> report -> verdicts -> pipeline and parsers <-> adapters were kept
from failing at import time, so it counts). ``from pkg import name`` is an edge to the submodule
``pkg.name`` when there is one, else to ``pkg``. The implicit import of a module's parent package
is not an edge (every submodule has it; a package ``__init__`` re-exporting from its submodules
is not a cycle). A dynamic ``importlib.import_module`` is not seen.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def module_files(root: Path, package: str = "replay") -> dict[str, tuple[Path, bool]]:
    """``{dotted module name: (file, is_package)}`` for every ``.py`` under ``root/package``."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_pkg)
    return out


def import_graph(root: Path, package: str = "replay") -> dict[str, set[str]]:
    """``{module: modules of the package it imports}``, every import statement of the file counted."""
    mods = module_files(root, package)
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(here[: len(here) - (node.level - 1)] + ([node.module] if node.module else [])) if node.level else node.module
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:  # import a.b.c of a module a.b: the deepest module named
                    t = t.rpartition(".")[0]
                if t and t != name:
                    deps.add(t)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _describe(graph: dict[str, set[str]], found: list[list[str]]) -> str:
    return "; ".join(" ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) for c in found)


def test_no_import_cycles_among_replay_modules():
    graph = import_graph(ROOT)
    assert len(graph) > 50 and "replay.runner.driver" in graph["replay.audit"]  # the walk sees the package
    found = cycles(graph)
    assert found == [], "import cycles: " + _describe(graph, found)


def test_a_planted_cycle_is_found(tmp_path):
    shutil.copytree(ROOT / "replay", tmp_path / "replay", ignore=shutil.ignore_patterns("__pycache__"))
    tables = tmp_path / "replay" / "tables.py"
    # a deferred import, as the old cycles were written: replay.runner.driver imports replay.tables
    tables.write_text(tables.read_text(encoding="utf-8") + "\n\ndef _planted():\n    from replay.runner.driver import run_stage\n", encoding="utf-8")
    graph = import_graph(tmp_path)
    found = cycles(graph)
    assert any({"replay.tables", "replay.runner.driver"} <= set(c) for c in found), found
    # and one through a relative import inside a package
    (tmp_path / "replay" / "parsers" / "base.py").write_text(
        (ROOT / "replay" / "parsers" / "base.py").read_text(encoding="utf-8") + "\n\ndef _planted():\n    from .hermes import HermesParser\n",
        encoding="utf-8",
    )
    found = cycles(import_graph(tmp_path))
    assert any({"replay.parsers.base", "replay.parsers.hermes"} <= set(c) for c in found), found


#: Packages that must not import the runner (issue #22): the capture readers and the stages are
#: pure functions of their inputs; the runner executes them, never the reverse.
BELOW_RUNNER = ("replay.capture", "replay.stages")


def runner_imports(graph: dict[str, set[str]], below: tuple[str, ...] = BELOW_RUNNER) -> list[str]:
    """``"module -> runner module"`` for every edge from a module of ``below`` (the packages and
    their submodules) into ``replay.runner`` (the package or a submodule), sorted."""
    def inside(mod: str, pkg: str) -> bool:
        return mod == pkg or mod.startswith(pkg + ".")

    return sorted(f"{m} -> {d}" for m, deps in graph.items() if any(inside(m, b) for b in below)
                  for d in deps if inside(d, "replay.runner"))


def test_capture_and_stages_do_not_import_the_runner():
    graph = import_graph(ROOT)
    assert {"replay.stages.render", "replay.stages.stream", "replay.runner.driver", "replay.runner.pool"} <= set(graph)
    assert runner_imports(graph) == []
    # the other direction is the point: the runner runs the stages and reads captures
    assert "replay.stages.stage" in graph["replay.runner.driver"] and "replay.capture.ingest" in graph["replay.runner.ingest"]


@pytest.mark.parametrize("module, planted", [
    ("stages/render.py", "\n\ndef _planted():\n    from replay.runner.pool import map_batches\n"),
    ("capture/ingest.py", "\nfrom replay.runner import pool\n"),
    ("stages/rows.py", "\nimport replay.runner.driver\n"),
])
def test_a_planted_runner_import_below_the_runner_is_found(tmp_path, module, planted):
    shutil.copytree(ROOT / "replay", tmp_path / "replay", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "replay" / module
    target.write_text(target.read_text(encoding="utf-8") + planted, encoding="utf-8")
    found = runner_imports(import_graph(tmp_path))
    assert len(found) == 1 and found[0].startswith("replay." + module[:-3].replace("/", ".") + " -> replay.runner"), found


def test_cycles_of_a_small_graph():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


#: Runs in a clean interpreter: each module imported first, in a forked child of a parent that has
#: imported nothing of replay (an import-order cycle fails there, whatever the suite imported).
_FRESH = textwrap.dedent(
    """
    import os, sys
    bad = []
    for name in sys.argv[1:]:
        pid = os.fork()
        if pid == 0:
            try:
                __import__(name)
            except BaseException as exc:
                sys.stderr.write(f"{name}: {type(exc).__name__}: {exc}\\n")
                os._exit(1)
            os._exit(0)
        if os.waitpid(pid, 0)[1]:
            bad.append(name)
    print(" ".join(bad))
    """
)


def test_every_module_imports_first_in_a_fresh_interpreter():
    names = [m for m in module_files(ROOT) if not m.endswith("__main__")]
    done = subprocess.run([sys.executable, "-c", _FRESH, *names], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], done.stderr


#: A module longer than this says in its docstring why it is one concern (issue #22).
MAX_LINES = 600


def long_modules_without_reason(root: Path, package: str = "replay") -> list[str]:
    """``"module (N lines)"`` for every module of ``package`` over :data:`MAX_LINES` lines whose
    docstring does not say it is one concern (the words ``one concern``, any case)."""
    out = []
    for name, (path, _pkg) in sorted(module_files(root, package).items()):
        text = path.read_text(encoding="utf-8")
        n = text.count("\n")
        if n > MAX_LINES and "one concern" not in (ast.get_docstring(ast.parse(text)) or "").lower():
            out.append(f"{name} ({n} lines)")
    return out


def test_no_module_over_600_lines_without_its_reason():
    assert long_modules_without_reason(ROOT) == []


def test_a_long_module_without_its_reason_is_found(tmp_path):
    (tmp_path / "replay").mkdir()
    (tmp_path / "replay" / "__init__.py").write_text('"""pkg"""\n')
    (tmp_path / "replay" / "big.py").write_text('"""Many things."""\n' + "x = 1\n" * MAX_LINES)
    (tmp_path / "replay" / "ok.py").write_text('"""Many lines: one concern, the grammar."""\n' + "x = 1\n" * MAX_LINES)
    (tmp_path / "replay" / "small.py").write_text('"""Short."""\n' + "x = 1\n" * 10)
    assert long_modules_without_reason(tmp_path) == [f"replay.big ({MAX_LINES + 1} lines)"]


def test_the_cli_starts_without_duckdb_arrow_or_a_command_s_library():
    """``import replay.cli`` (every command's module) loads no DuckDB, Arrow, stage or repro code:
    each command imports its library when it runs. (An audit's pool processes and the CLI process
    carried ~25 MiB more peak RSS while ``replay.cli.repro`` imported ``replay.repro`` at start-up.)
    The repro command's own defaults agree with the library's."""
    import subprocess
    import sys

    code = ("import sys, replay.cli; "
            "print(sorted(m for m in ('duckdb', 'pyarrow', 'replay.repro.core', 'replay.matrix', 'replay.stages.stream') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
    from replay.cli import repro as command
    from replay.repro.core import DEFAULT_SECONDS
    from replay.repro.judge import STREAM_CHECKS

    assert command.DEFAULT_SECONDS == DEFAULT_SECONDS and command.STREAM_CHECKS == STREAM_CHECKS
