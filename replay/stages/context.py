"""What a stage builds once per process from its run spec (:class:`replay.runspec.RunSpec`):
the sides (serializers in process, a worker per out-of-process side) and the parser resolver
that picks each side's tool parser class per model family (:class:`ParserResolver`). Kept apart
from the render and re-stream stages, which both use it.
"""

from __future__ import annotations


from dataclasses import dataclass
from replay.adapters import is_per_family_spec, per_family_parser
from replay.parsers import family_for_model, get_parser
from replay.runspec import AuditConfig
from replay.sides import open_sides
from typing import Any


@dataclass
class _Sides:
    """Parser classes resolved once per family: reference, old, new (an out-of-process side's
    parser is a :class:`replay.sides.RemoteParser`: its name and markers, as its worker has it)."""

    reference: type
    old: Any
    new: Any
    family_builtin: Any = None  # the family's built-in parser class (get_parser(family))

    def builtin(self, side: str) -> bool:
        """True when ``side``'s parser is the family's built-in parser class (in process, no plugin)."""
        return getattr(self, side) is self.family_builtin

    def cut_markers(self, side: str) -> tuple[str, ...]:
        """The markers (strings) that ``side``'s (``"old"``/``"new"``) chunkings are cut at: the
        reference family's, then the side's parser's own (a plugin or framework parser may add
        tokens). The re-stream stage and the report's exemplars (:mod:`replay.report.exemplars`) use it."""
        return tuple(self.reference.markers) + tuple(getattr(getattr(self, side), "markers", ()))


class ParserResolver:
    """Resolve the parser classes of each side for an exchange's model, once per family.

    ``sides``: the run's :class:`replay.sides.Sides` (opened from ``cfg`` when a side has an
    interpreter and none is given). Raises :class:`replay.parsers.UnknownParserError` (a
    ValueError) for a bad spec, at the first exchange that needs it; the pipeline records it on
    that exchange's rows.
    """

    def __init__(self, cfg: AuditConfig, sides: Any = None) -> None:
        self.cfg = cfg
        self.cache: dict[str, _Sides] = {}
        self.plugins: dict[str, type] = {}
        self._families: dict[Any, str | None] = {}  # model name -> family_for_model (family())
        if sides is None and (cfg.old_python or cfg.new_python):
            sides = open_sides(cfg)
        self.remote = sides

    def _side(self, spec: str | None, family: str) -> type:
        """The class for one side: the family's built-in parser, unless ``spec`` names a parser
        for this family. A parser whose ``name`` is a built-in family (a subclass of HermesParser
        keeps ``name = "hermes"``) replaces only that family's parser; one with any other name
        replaces every family's."""
        if spec is None:
            return get_parser(family)
        if is_per_family_spec(spec):  # parser=sglang: the framework's own parser for this family
            return per_family_parser(spec, family)
        if spec not in self.plugins:
            self.plugins[spec] = get_parser(spec)
        cls = self.plugins[spec]
        own = family_of_parser(cls)
        if own is not None and own != family_of_parser(get_parser(family)):
            return get_parser(family)
        return cls

    def family(self, model: str | None) -> str | None:
        """The family for ``model``: ``--parser`` when given, else the model-name table
        (:func:`replay.parsers.family_for_model`, looked up once per distinct model name: a
        capture holds a few names, asked twice per exchange)."""
        if self.cfg.parser:
            return self.cfg.parser
        try:
            return self._families[model]
        except KeyError:
            if len(self._families) >= 4096:  # a capture of many distinct names stays bounded
                self._families.clear()
            got = self._families[model] = family_for_model(model)
            return got
        except TypeError:  # an unhashable model value (never from the tables)
            return family_for_model(model)

    def _for(self, side: str, spec: str | None, family: str) -> Any:
        worker = self.remote.remote(side) if self.remote is not None else None
        if worker is not None:  # the worker applies the same rule to its own classes
            return worker.parser_for(str(getattr(get_parser(family), "name", family)))
        return self._side(spec, family)

    def sides(self, family: str) -> _Sides:
        if family not in self.cache:
            self.cache[family] = _Sides(
                reference=self._side(self.cfg.reference_parser, family),
                old=self._for("old", self.cfg.old_parser, family),
                new=self._for("new", self.cfg.new_parser, family),
                family_builtin=get_parser(family),
            )
        return self.cache[family]


def family_of_parser(cls: type) -> str | None:
    """The built-in family a parser class belongs to, by its ``name`` attribute; None when the
    name is not a built-in family's."""
    try:
        return get_parser(str(getattr(cls, "name", ""))).name
    except ValueError:
        return None


class _StageContext:
    """What a stage builds once per process from its config: the sides (serializers in process,
    a worker per out-of-process side) and the parser resolver."""

    def __init__(self, cfg: AuditConfig) -> None:
        self.cfg = cfg
        self.sides = open_sides(cfg)
        self.resolver = ParserResolver(cfg, self.sides)


def stage_context(spec: Any) -> _StageContext:
    """The :class:`_StageContext` of ``spec`` (a :class:`replay.runspec.RunSpec`, or an
    :class:`AuditConfig`), built at the first call in this process and kept on the config."""
    from replay.runspec import config_for

    cfg = config_for(spec)
    ctx = getattr(cfg, "_stage_ctx", None)
    if ctx is None or ctx.sides is not getattr(cfg, "_sides", None):  # the sides were closed since
        ctx = _StageContext(cfg)
        cfg._stage_ctx = ctx
    return ctx
