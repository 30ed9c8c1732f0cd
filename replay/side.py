"""A side as one value: ``--old``, ``--new``, ``--reference`` and the sides file (``--sides``).

A side (DESIGN.md, "side") is what one implementation does to a request and to a raw completion:
its request preparer, tool serializer, renderer or chat template, tool parser, and for ``old`` and
``new`` the interpreter it runs in (``python``, ``pythonpath``) and where its prompts render
(``render_in``). On the command line a side is one option value, in one of two spellings:

- ``KEY=VALUE,KEY=VALUE``: split on every comma, then each item at its first ``=`` (a value may
  hold ``=`` and ``:``, e.g. ``parser=my_parsers.py:OldHermes``); the option is repeatable and
  its items are merged (``--old parser=hermes --old serializer=model-dump``);
- a TOML inline table, ``{parser = "hermes", chat_template = "/p/a,b.jinja"}``: the spelling for
  a value holding a comma (or starting or ending with spaces); TOML's own quoting rules apply.

A value that is neither (an item without ``=``) is an error. Keys are :data:`KEYS`; ``-`` and
``_`` are the same in a key (``chat-template=``). A sides file (:func:`load_sides_file`) is TOML
with one ``[sides.NAME]`` table per side, of the same keys; the tables named ``old``, ``new``
and ``reference`` are those sides unless top-level ``old = "NAME"`` (``new``, ``reference``)
names another table. A side given on the command line replaces the file's side of that name.

Each side resolves once, on the command line, into a :class:`SideSpec`, immutable; the run spec
(:class:`replay.runspec.RunSpec`) takes its fields from it (:meth:`SideSpec.spec_fields`), and
``run.json`` ``options.sides`` stores the value as given (:meth:`SideSpec.to_json`: the string,
the list of strings of a repeated option, or the table), which ``replay show`` reads back with
:func:`from_json`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from replay.errors import UsageError

#: The side names of an audit.
SIDES: tuple[str, ...] = ("old", "new", "reference")
#: The keys of a side value, in the order run.json and the help list them.
KEYS: tuple[str, ...] = ("preparer", "serializer", "chat_template", "renderer", "parser", "python", "pythonpath", "render_in")
#: Keys the reference side refuses: it runs in the audit's own process (replay.sides).
IN_PROCESS_ONLY: frozenset[str] = frozenset({"python", "pythonpath", "render_in"})
#: Values of ``render_in`` (:data:`replay.sides.RENDER_IN`).
RENDER_IN: tuple[str, ...] = ("audit", "python")


class SideError(UsageError):
    """A side value, or a sides file, that does not parse: bad quoting, an unknown or repeated
    key, a value of the wrong kind. The message names the option (or the file) first; the CLI
    prints it in one line and exits 2."""


@dataclass(frozen=True)
class SideSpec:
    """One side's settings, each None where not given (the run's default then: the shared
    ``--renderer``/``--chat-template``, the family's parser, the side's default serializer).

    ``preparer``/``serializer``/``parser``: a built-in name, ``module:attr`` / ``file.py:attr``, or
    for a parser a framework's (``vllm/NAME``, ``sglang/NAME``, ``trtllm/NAME``).
    ``chat_template``: a Jinja template or tokenizer_config.json path. ``renderer``: a renderer
    spec (``json-tools``, ``harmony``, ``mistral-common[:VERSION]``, ``path/encoding.py:function``, a server's tokenize endpoint ``http://HOST:PORT[?OPTIONS]``;
    on the reference side the reference encoder). ``python``: the interpreter of the side's worker;
    ``pythonpath``: directories put first on its import path (as given: one string joined by
    ``os.pathsep``, or a TOML list); ``render_in``: ``audit`` or ``python``. ``given``: the value as
    the user wrote it (not compared), what :meth:`to_json` returns.
    """

    preparer: str | None = None
    serializer: str | None = None
    chat_template: str | None = None
    renderer: str | None = None
    parser: str | None = None
    python: str | None = None
    pythonpath: str | None = None
    render_in: str | None = None
    given: Any = field(default=None, compare=False, hash=False, repr=False)

    def items(self) -> dict[str, str]:
        """The keys given, ``{key: value}`` in :data:`KEYS` order."""
        return {k: getattr(self, k) for k in KEYS if getattr(self, k) is not None}

    def to_json(self) -> Any:
        """The value as ``run.json`` stores it: as given (a string, a list of the repeated
        option's strings, or a table), else the keys given as a table."""
        return self.given if self.given is not None else self.items()

    def spec_fields(self, side: str) -> dict[str, str]:
        """The :class:`replay.runspec.RunSpec` fields of this value as ``side`` (``old``, ``new``,
        ``reference``), keyword arguments of :func:`replay.runspec.spec_from_options`: e.g.
        ``old_parser``; a reference side's ``renderer`` is ``reference_encoder``. Keys not given
        are left out (the spec's defaults)."""
        out = {}
        for key, value in self.items().items():
            name = "reference_encoder" if (side, key) == ("reference", "renderer") else f"{side}_{key}"
            out[name] = value
        return out


def _value_kind(option: str, key: str, value: Any) -> str:
    """``value`` of ``key`` as a string; a TOML list of strings is accepted for ``pythonpath``
    (joined by ``os.pathsep``). Raises SideError for anything else."""
    if key == "pythonpath" and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return os.pathsep.join(value)
    if not isinstance(value, str):
        want = "a string or a list of strings" if key == "pythonpath" else "a string"
        raise SideError(f"{option}: {key} must be {want}, not {type(value).__name__} {value!r}")
    if not value.strip():
        raise SideError(f"{option}: {key} is empty")
    return value


def _checked(option: str, side: str | None, items: dict[str, Any], given: Any) -> SideSpec:
    """A SideSpec of ``items`` (``{key: value}``, keys normalised), checked: known keys, string
    values, ``render_in`` one of :data:`RENDER_IN` and only with ``python``, ``pythonpath`` only
    with ``python``, not both ``chat_template`` and ``renderer``; no interpreter keys on the
    reference side. Raises SideError naming ``option``."""
    values: dict[str, str] = {}
    for key, value in items.items():
        if key not in KEYS:
            raise SideError(f"{option}: unknown key {key!r}; the keys: {', '.join(KEYS)}")
        values[key] = _value_kind(option, key, value)
    if side == "reference":
        bad = sorted(IN_PROCESS_ONLY & set(values))
        if bad:
            raise SideError(f"{option}: {', '.join(bad)}: the reference side runs in the audit's own process")
    if values.get("render_in") is not None and values["render_in"] not in RENDER_IN:
        raise SideError(f"{option}: render_in {values['render_in']!r} is not one of: {', '.join(RENDER_IN)}")
    if values.get("render_in") == "python" and values.get("python") is None:
        raise SideError(f"{option}: render_in=python needs python=INTERPRETER (the side has no interpreter of its own)")
    if values.get("pythonpath") is not None and values.get("python") is None:
        raise SideError(f"{option}: pythonpath needs python=INTERPRETER (the interpreter to run the side in)")
    if values.get("chat_template") is not None and values.get("renderer") is not None:
        raise SideError(f"{option}: chat_template and renderer both name the side's renderer: give one")
    from replay.render.framework import framework_side_error

    why = framework_side_error(values)  # renderer=sglang:/vllm: renders in the framework's interpreter
    if why is not None:
        raise SideError(f"{option}: {why}")
    return SideSpec(**values, given=given)


def _key(option: str, raw: str) -> str:
    key = raw.strip().replace("-", "_")
    if not key:
        raise SideError(f"{option}: an item with no key before '='")
    return key


def _items(option: str, text: str) -> dict[str, Any]:
    """The ``{key: value}`` of one option value (either spelling, module docstring); raises
    SideError for bad quoting, an item that is not KEY=VALUE, an empty value or a repeated key."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            table = tomllib.loads("side = " + stripped)["side"]
        except tomllib.TOMLDecodeError as exc:
            raise SideError(f"{option}: {stripped!r} is not a TOML inline table ({exc})") from None
        if not isinstance(table, dict):
            raise SideError(f"{option}: {stripped!r} is not a TOML inline table")
        out: dict[str, Any] = {}
        for raw, value in table.items():
            key = _key(option, raw)
            if key in out:
                raise SideError(f"{option}: key {key!r} given twice")
            out[key] = value
        return out
    if not stripped:
        raise SideError(f"{option}: an empty value (give KEY=VALUE,... or a TOML inline table)")
    out = {}
    for item in stripped.split(","):
        if "=" not in item:
            raise SideError(
                f"{option}: {item.strip()!r} is not KEY=VALUE (a value holding a comma needs the inline table "
                f"spelling: {option} '{{chat_template = \"a,b.jinja\"}}')"
            )
        raw, value = item.split("=", 1)
        key = _key(option, raw)
        if key in out:
            raise SideError(f"{option}: key {key!r} given twice")
        value = value.strip()
        if not value:
            raise SideError(f"{option}: {key} is empty")
        out[key] = value
    return out


def parse(text: str | list[str] | tuple[str, ...], side: str | None = None, option: str | None = None) -> SideSpec:
    """The :class:`SideSpec` of a command-line value (module docstring for the spelling): one
    string, or the strings of a repeated option, merged. ``side``: ``old``, ``new`` or
    ``reference`` (checks the keys that side accepts); ``option``: the name errors start with
    (default ``--SIDE``). Raises :class:`SideError` (a usage error) for an unknown key, a key given
    twice (within one value or across repeated ones), an item that is not ``KEY=VALUE``, a
    malformed inline table, an empty or non-string value, ``render_in`` not ``audit``/``python``,
    ``render_in=python`` or ``pythonpath`` without ``python``, both ``chat_template`` and
    ``renderer``, interpreter keys on the reference side."""
    option = option or (f"--{side}" if side else "side")
    texts = [text] if isinstance(text, str) else list(text)
    merged: dict[str, Any] = {}
    for one in texts:
        for key, value in _items(option, one).items():
            if key in merged:
                raise SideError(f"{option}: key {key!r} given twice")
            merged[key] = value
    given: Any = texts[0] if len(texts) == 1 else texts
    return _checked(option, side, merged, given)


def from_json(value: Any, side: str | None = None) -> SideSpec:
    """The :class:`SideSpec` of a value as ``run.json`` stores it (:meth:`SideSpec.to_json`): a
    string, a list of strings or a table. Raises :class:`SideError` as :func:`parse`."""
    option = f"run.json sides.{side}" if side else "run.json side"
    if isinstance(value, dict):
        return _checked(option, side, {_key(option, k): v for k, v in value.items()}, value)
    if isinstance(value, (str, list)):
        return parse(value, side, option)
    raise SideError(f"{option}: {value!r} is neither a string nor a table")


@dataclass(frozen=True)
class SidesFile:
    """A sides file, read: ``tables`` every ``[sides.NAME]`` as a :class:`SideSpec` (its ``given``
    the table), ``chosen`` ``{old|new|reference: NAME}`` for the sides it names."""

    path: str
    tables: dict[str, SideSpec]
    chosen: dict[str, str]

    def side(self, side: str) -> SideSpec | None:
        """The SideSpec the file gives ``side``, or None."""
        name = self.chosen.get(side)
        return self.tables.get(name) if name is not None else None


def load_sides_file(path: str | os.PathLike[str]) -> SidesFile:
    """Read a sides file (module docstring): TOML, a ``sides`` table of ``[sides.NAME]`` tables
    of side keys, and optional top-level ``old``/``new``/``reference`` strings naming one of them
    (default: the table of that name, when there is one). Raises :class:`SideError` naming the
    file (with TOML's line and column for a syntax error) for a file that cannot be read, is not
    TOML, has another top-level key, names a table it lacks, or has a table :func:`parse` would
    refuse (a reference side's table is checked as the reference's)."""
    where = str(path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SideError(f"--sides {where}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise SideError(f"--sides {where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SideError(f"--sides {where}: not TOML: {exc}") from None
    extra = sorted(set(data) - {"sides", *SIDES})
    if extra:
        raise SideError(f"--sides {where}: unknown top-level key {extra[0]!r}; a sides file holds [sides.NAME] tables and old/new/reference = \"NAME\"")
    raw = data.get("sides")
    if not isinstance(raw, dict) or not raw:
        raise SideError(f"--sides {where}: no [sides.NAME] table")
    chosen = {s: s for s in SIDES if s in raw}
    for s in SIDES:
        if s in data:
            if not isinstance(data[s], str) or data[s] not in raw:
                raise SideError(f"--sides {where}: {s} = {data[s]!r} names no [sides.NAME] table (tables: {', '.join(raw)})")
            chosen[s] = data[s]
    roles = {name: s for s, name in chosen.items()}
    tables = {}
    for name, table in raw.items():
        if not isinstance(table, dict):
            raise SideError(f"--sides {where}: sides.{name} is not a table")
        option = f"--sides {where} [sides.{name}]"
        tables[name] = _checked(option, roles.get(name), {_key(option, k): v for k, v in table.items()}, table)
    return SidesFile(where, tables, chosen)


def resolve(values: dict[str, Any], sides_file: str | os.PathLike[str] | None = None,
            legacy: dict[str, dict[str, Any]] | None = None) -> dict[str, SideSpec]:
    """Every side's :class:`SideSpec` from the command line, resolved once: ``values``
    ``{side: the --SIDE option's strings or None}``, ``sides_file`` the ``--sides`` path,
    ``legacy`` ``{side: {key: value}}`` of the deprecated per-side flags (``--old-parser``) that
    were given. A side given as ``--SIDE`` replaces the file's; a deprecated flag adds its key to
    the side, and is a usage error when the side's value has that key too. Returns
    ``{side: SideSpec}`` for each side given (a side not given is absent). Raises
    :class:`SideError`."""
    file = load_sides_file(sides_file) if sides_file is not None else None
    out: dict[str, SideSpec] = {}
    for side in SIDES:
        text = values.get(side)
        spec = parse(text, side) if text else (file.side(side) if file is not None else None)
        flags = {k: v for k, v in (legacy or {}).get(side, {}).items() if v is not None}
        if flags:
            base = spec.items() if spec is not None else {}
            both = sorted(set(base) & set(flags))
            if both:
                flag = "--reference-encoder" if (side, both[0]) == ("reference", "renderer") else f"--{side}-{both[0].replace('_', '-')}"
                raise SideError(f"{flag} and {both[0]} in the {side} side's value: give it once")
            # as given: the value's keys and the flags' together, as one table
            spec = _checked(f"--{side}", side, {**base, **flags}, None)
        if spec is not None:
            out[side] = spec
    return out


#: The side keys each stage reads (``replay render``, ``replay stream``); the interpreter keys both.
STAGE_KEYS: dict[str, frozenset[str]] = {
    "render": frozenset({"preparer", "serializer", "chat_template", "renderer", "python", "pythonpath", "render_in"}),
    "re-stream": frozenset({"parser", "python", "pythonpath"}),
}


def merge_stage(before: dict[str, Any], now: dict[str, Any], stage: str) -> dict[str, Any]:
    """``run.json`` ``options.sides`` after ``replay render`` or ``replay stream`` (``stage``:
    ``render``, ``re-stream``) ran again on a run: ``before`` the run's values as given, ``now``
    the command's. A side's keys that ``stage`` reads come from ``now``, its others (the other
    stage's) stay as ``before`` had them; a side stays as given when one value holds all its
    keys, else it is stored as a table of the merged keys. Raises :class:`SideError` for a value
    :func:`from_json` refuses."""
    keys = STAGE_KEYS[stage]
    out: dict[str, Any] = {}
    for side in [*before, *(s for s in now if s not in before)]:
        old = from_json(before[side], side).items() if side in before else {}
        new = from_json(now[side], side).items() if side in now else {}
        merged = {**{k: v for k, v in old.items() if k not in keys}, **{k: v for k, v in new.items() if k in keys}}
        if not merged:
            continue
        if side in now and merged == new:
            out[side] = now[side]
        elif side in before and merged == old:
            out[side] = before[side]
        else:
            out[side] = {k: merged[k] for k in KEYS if k in merged}
    return out


def spec_fields(sides: dict[str, SideSpec]) -> dict[str, str]:
    """The :class:`replay.runspec.RunSpec` keyword arguments of every side in ``sides``
    (:meth:`SideSpec.spec_fields`), for :func:`replay.runspec.spec_from_options`."""
    out: dict[str, str] = {}
    for side, spec in sides.items():
        out.update(spec.spec_fields(side))
    return out


def sides_json(sides: dict[str, SideSpec]) -> dict[str, Any]:
    """``run.json`` ``options.sides``: ``{side: value as given}`` (:meth:`SideSpec.to_json`)."""
    return {side: spec.to_json() for side, spec in sides.items()}


__all__ = ["SIDES", "KEYS", "STAGE_KEYS", "SideError", "SideSpec", "SidesFile", "parse", "from_json", "load_sides_file", "resolve",
           "merge_stage", "spec_fields", "sides_json"]
