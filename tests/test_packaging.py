"""The wheel holds every subpackage: ``pyproject.toml`` lists packages by hand (``replay.queries``
maps to ``queries/``), so a new package folder left out of the list would import in an editable
checkout and be missing from ``pip install .``."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "replay").rglob("__init__.py")}
    assert found - listed == set(), "package folders missing from [tool.setuptools] packages"
    assert "replay.queries" in listed


def _setup_commands() -> list[str]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_commands", ROOT / ".ci" / "readme_commands.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.setup_commands(ROOT / "README.md")


def test_ci_runs_the_readme_commands_and_installs_nothing_else():
    import re

    commands = _setup_commands()
    assert len(commands) == 2 and commands[1] == "python -m pytest -q -n auto", commands
    extras = re.findall(r"pip install -e '\.\[([a-z,]+)\]'", commands[0])
    assert extras == ["test"], commands[0]
    ci = (ROOT / ".ci" / "run").read_text()
    run_lines = [line.strip() for line in ci.splitlines() if line.strip() and not line.lstrip().startswith(("#", "echo"))]
    # CI runs the README's two commands, as written, in order
    assert [line for line in run_lines if line in commands] == commands, run_lines
    # the only pip install of CI's own is pip's upgrade; the project comes in through the README's command
    installs = [line for line in run_lines if "pip install" in line and line not in commands]
    assert installs == ["python -m pip install --quiet --upgrade pip"], installs
    assert "bash .ci/oldest" in run_lines
    oldest = [line.split("  #")[0].strip() for line in (ROOT / ".ci" / "oldest").read_text().splitlines()]
    assert "python -m uv pip install --quiet --python \"$(command -v python)\" --resolution lowest-direct -e '.[test]'" in oldest
    assert oldest[-1] == commands[1]  # the oldest releases run the README's test command too


def test_every_dependency_has_the_lower_bound_the_oldest_variant_installs():
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for text in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        req = Requirement(text)
        assert [s.operator for s in req.specifier] == [">="], text  # one lower bound, no upper: the newest is tested too
