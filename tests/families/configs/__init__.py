"""Every family's test configuration: each module here defines ``FAMILY`` (a
:class:`families.spec.Family`, or a tuple of them for a module covering two registered families);
:data:`FAMILIES` collects them in module order. A new family is a new module."""

from __future__ import annotations

import importlib
import pkgutil

from families.spec import Family


def _load() -> tuple[Family, ...]:
    found: list[Family] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        fam = importlib.import_module(f"{__name__}.{info.name}").FAMILY
        found.extend(fam if isinstance(fam, tuple) else (fam,))
    return tuple(found)


FAMILIES: tuple[Family, ...] = _load()

#: family name -> its call syntax (:class:`families.spec.Syntax`), for tests that write calls of any family
SYNTAX = {f.cls.name: f.syntax for f in FAMILIES}
