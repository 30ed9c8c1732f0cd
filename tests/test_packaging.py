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
