"""The run spec: a run's options as plain, picklable values (:class:`RunSpec`, where every option
is declared once), and the config built from it (:class:`AuditConfig`, derived from RunSpec's
fields, with the objects they name).

A stage's batch function (:func:`replay.stages.render.render_batch`, :func:`replay.stages.stream.stream_batch`)
takes a :class:`RunSpec` and builds, once per process, what the spec names: the renderers (a chat
template file, a ``--renderer`` / ``--reference-encoder`` spec), the tokenizer, the chunkings, the
serializers and parsers (:func:`config_for`). A spec is what an executor sends to a pool process
(``--jobs``) or a Ray task: strings, paths, tuples and numbers only, so it pickles and hashes.

``replay``'s command line makes a spec from its options and calls :func:`build_config`; the
errors it raises name the option (``--chat-template x.jinja: ...``), so the CLI only prints them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

#: ``chunkings`` value that means "the defaults", chosen per side (:func:`replay.stages.stream.side_chunkings`).
DEFAULT = None


@dataclass(frozen=True)
class RunSpec:
    """The options of the render and re-stream stages as plain values: the one place an option is
    declared. :class:`AuditConfig` is derived from it (:func:`_stage_options`): every field not in
    :data:`BUILT_FROM` is an AuditConfig field too, with the same type and default, copied by
    :func:`build_config` and recorded in ``run.json`` ``options``; the fields of
    :data:`BUILT_FROM` name objects :func:`build_config` builds (renderers, the tokenizer).

    Serializer and parser specs are built-in names or ``module:attr`` / ``file.py:attr`` plugins
    (:mod:`replay.resolve`). ``parser``: force one family for every exchange (else chosen from the
    model name). ``old_parser``/``new_parser``/``reference_parser``: default to the family's
    built-in parser. ``chunkings``: names understood by :func:`replay.stream.split`, or
    ``split-all``; every side replays exactly these. None (the default): each side gets
    :func:`replay.stages.stream.side_chunkings` (a built-in parser ``recorded`` and ``whole``; any other
    parser the synthetic chunkings and ``split-all``, with ``token`` when a tokenizer is given).
    ``old_python``/``new_python``: run that side's serializer and parser in this interpreter
    (:mod:`replay.sides`), with ``old_pythonpath``/``new_pythonpath`` (tuples of directories)
    first on its import path; ``old_render_in``/``new_render_in`` ``"python"``: render that side's
    prompts there too (preparer, serializer, renderer, tokenizer; needs ``spec``), ``"audit"``
    (default): render them in this process. ``chat_template``/``tokenizer``: file paths (str) or None.
    ``renderer``/``reference_encoder``: renderer specs (:func:`replay.render.specs.renderer_from_spec`)
    or None. ``date``: ``YYYY-MM-DD`` or None (the pinned default).
    """

    old_serializer: str = "model-dump"
    new_serializer: str = "client-fields"
    reference_serializer: str = "as-sent"
    # render side (replay.render.options), built into renderers and a tokenizer: the plain
    # template and tokenizer, per-model ones ("PATTERN=FILE"), renderer specs, per-side ones
    chat_template: str | None = None
    tokenizer: str | None = None
    renderer: str | None = None
    reference_encoder: str | None = None
    chat_template_routes: tuple[str, ...] = ()
    tokenizer_routes: tuple[str, ...] = ()
    old_chat_template: str | None = None
    new_chat_template: str | None = None
    reference_chat_template: str | None = None
    old_renderer: str | None = None
    new_renderer: str | None = None
    old_preparer: str | None = None  # request preparers (replay.prepare; None: the default, vllm)
    new_preparer: str | None = None
    reference_preparer: str | None = None
    date: str | None = None
    parser: str | None = None
    old_parser: str | None = None
    new_parser: str | None = None
    chunkings: tuple[str, ...] | None = DEFAULT  # None: the defaults, per side (side_chunkings)
    replay_timeout: float = 10.0  # seconds one parse or one replay may take before it is recorded as an error
    reference_parser: str | None = None
    old_python: str | None = None
    new_python: str | None = None
    old_pythonpath: tuple[str, ...] = ()
    new_pythonpath: tuple[str, ...] = ()
    old_render_in: str = "audit"  # "python": the old side renders in old_python's interpreter (replay.sides.render_spec)
    new_render_in: str = "audit"
    batch_rows: int = 512  # exchanges per record batch: the unit of a part file, of --jobs and of resume
    # how the run is executed (EXECUTION_FIELDS): the tables do not depend on them, nor do the fingerprints
    jobs: int = 1  # processes the batch functions run on (replay.runner.pool); 1: this process
    parallel_ingest: bool = False  # parse the capture-v1 lines on the stages' pool too (replay audit --parallel-ingest)
    overlap: bool = True  # run the stages on each row group as ingest writes it (replay.runner.overlap; --no-overlap)

    def replace(self, **changes: Any) -> "RunSpec":
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def results_key(self) -> str:
        """The spec as text without how it is executed (:data:`EXECUTION_FIELDS` at their
        defaults): what the stages' fingerprints hash, so that an interrupted run resumes under
        another ``--jobs``."""
        return repr(dataclasses.replace(self, **{f.name: f.default for f in dataclasses.fields(self) if f.name in EXECUTION_FIELDS}))


#: RunSpec fields that say how a run is executed, not what it computes (the tables do not depend on them).
EXECUTION_FIELDS: frozenset[str] = frozenset({"jobs", "parallel_ingest", "overlap"})


#: The RunSpec fields :func:`build_config` builds objects from (the render setup,
#: :func:`replay.render.options.render_setup`) rather than copying them to :class:`AuditConfig`;
#: ``run.json`` records them as the render setup words them.
BUILT_FROM: frozenset[str] = frozenset(
    {
        "chat_template", "tokenizer", "renderer", "reference_encoder", "chat_template_routes", "tokenizer_routes",
        "old_chat_template", "new_chat_template", "reference_chat_template", "old_renderer", "new_renderer", "date",
    }
)
#: The RunSpec fields the stages read as they are: the fields :class:`AuditConfig` shares with it.
STAGE_OPTIONS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RunSpec) if f.name not in BUILT_FROM)
#: Stage options ``run.json`` records with the executor's (``--jobs``), not with the spec's.
_EXECUTOR_OPTIONS = frozenset({"batch_rows", *EXECUTION_FIELDS})


def _stage_options(cls: type) -> type:
    """Class decorator, applied before ``@dataclass``: give ``cls`` each field of
    :data:`STAGE_OPTIONS` with RunSpec's type and default, ahead of its own fields."""
    own = dict(cls.__dict__.get("__annotations__", {}))
    shared = {f.name: f for f in dataclasses.fields(RunSpec) if f.name in STAGE_OPTIONS}
    clash = set(shared) & set(own)
    if clash:
        raise TypeError(f"{cls.__name__} redeclares RunSpec fields {sorted(clash)}")
    cls.__annotations__ = {**{n: f.type for n, f in shared.items()}, **own}
    for name, f in shared.items():
        setattr(cls, name, f.default)
    return cls


class _RenderObject:
    """A descriptor for :class:`AuditConfig`'s render objects (renderers, tokenizer): a plain
    attribute, except that on a config whose render setup is deferred (:func:`build_config` with
    ``load=False``) the first read builds them in this process (:meth:`AuditConfig.load_render`).
    As a dataclass field's default it gives None (``__get__`` on the class)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return None  # the field's default
        if obj.__dict__.get("_deferred"):
            obj.load_render()
        return obj.__dict__.get(self.slot)

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.slot] = value


#: Where the render setup's words go in an :class:`AuditConfig`'s ``options`` until they are known
#: (:func:`build_config` with ``load=False``): a placeholder key, replaced in place, in order.
_RENDER_SLOT = "\0render"


@dataclass
@_stage_options
class AuditConfig:
    """The render and re-stream stages' options with their objects built: every field of
    :data:`STAGE_OPTIONS` (declared once, on :class:`RunSpec`, with its meaning there) and the
    renderers and tokenizer built from the spec's render options. Recorded in ``run.json``.

    Made by :func:`build_config` from a RunSpec (``spec``), which is what a pool process or a Ray
    task gets; a library caller may also build one by hand with its own renderer objects
    (``spec`` None), which then runs in this process only.

    Deferred render setup (:func:`build_config` ``load=False``, what ``replay audit`` makes): the
    renderers and tokenizer (a chat template and a ``tokenizer.json``: transformers' imports and
    the first renders' caches, in memory and start-up time) are built at their first
    read in this process (:meth:`load_render`), or never when the ``--jobs`` pool renders: then a
    pool process builds them and reports the options (:func:`replay.runner.pool.render_check`, which
    :meth:`set_render_words` records). :attr:`has_tokenizer` answers without building.
    """

    renderer: Any = _RenderObject()  # old and new sides' renderer (replay.render.base.Renderer)
    reference_renderer: Any = _RenderObject()  # --reference-encoder / --reference-chat-template: renders the reference side
    old_renderer: Any = _RenderObject()  # --old-chat-template / --old-renderer (None: renderer)
    new_renderer: Any = _RenderObject()  # --new-chat-template / --new-renderer (None: renderer)
    tokenizer: Any = _RenderObject()
    # what the executors went through, per stage ({"render": {...}, "stream": {...}}, replay.runner.pool.PoolStats.as_dict
    # or replay.runner.executors.RayEngine's), and the pool processes' side-worker counts by pid: for run.json and the report
    executor_stats: dict[str, Any] = field(default_factory=dict)
    pool_workers: dict[int, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # as given on the command line, for run.json
    spec: Any = None  # the RunSpec this config was built from (None: built by hand, in process only)

    def __post_init__(self) -> None:
        self.__dict__["_options_set"] = True

    def __setattr__(self, name: str, value: Any) -> None:
        """Attributes are settable but the options (:data:`STAGE_OPTIONS` and ``spec``): those
        are resolved once, into the :class:`RunSpec` this config is built from (issue #22: ``--jobs``
        was written onto the config after the command line and read in five places). Raises
        ``dataclasses.FrozenInstanceError`` naming the option."""
        if self.__dict__.get("_options_set") and (name in STAGE_OPTIONS or name == "spec"):
            raise dataclasses.FrozenInstanceError(
                f"AuditConfig.{name} is an option: give it in the RunSpec (spec.replace({name}=...)) and build the config from it"
            )
        object.__setattr__(self, name, value)

    def serializer_specs(self) -> dict[str, str]:
        """``{side: serializer spec}`` for old, new and reference."""
        return {"old": self.old_serializer, "new": self.new_serializer, "reference": self.reference_serializer}

    @property
    def deferred(self) -> bool:
        """True while the render objects are not built yet (:func:`build_config` ``load=False``)."""
        return bool(self.__dict__.get("_deferred"))

    @property
    def has_tokenizer(self) -> bool:
        """Whether the run has a plain ``--tokenizer`` (the ``token`` chunking's, token counts),
        without building it: from the spec while the render setup is deferred."""
        if self.deferred:
            return self.spec.tokenizer is not None
        return self.tokenizer is not None

    def load_render(self) -> None:
        """Build the deferred render objects in this process (:func:`render_objects` of
        ``spec``) and record their options; nothing when they are built. Raises ValueError
        naming the option, as :func:`build_config` (the config stays deferred then)."""
        if not self.deferred:
            return
        setup, words = render_objects(self.spec)
        self.__dict__["_deferred"] = False
        self.renderer = setup.renderer
        self.reference_renderer = setup.reference_renderer
        self.old_renderer = setup.old_renderer
        self.new_renderer = setup.new_renderer
        self.tokenizer = setup.tokenizer
        self.render_words = words  # what a pool process reports to the parent (replay.runner.pool.render_check)
        self.set_render_words(words)

    def set_render_words(self, words: dict[str, Any]) -> None:
        """Put the render setup's words for ``run.json`` (:func:`render_objects`' second value:
        renderer names, paths, special-token sources) into ``options`` where
        :func:`build_config` left their place; the render objects stay as they are (deferred, when
        a pool process built them and reported these, :func:`replay.runner.pool.render_check`)."""
        if _RENDER_SLOT not in self.options:
            return
        merged: dict[str, Any] = {}
        for key, value in self.options.items():
            if key == _RENDER_SLOT:
                merged.update(words)
            else:
                merged[key] = value
        self.options.clear()
        self.options.update(merged)

    def ingest_tokenizer(self) -> Any:
        """The tokenizer for ingest (server logs that hold token ids only,
        :mod:`replay.capture.serverlog`), or None: while the render setup is deferred, an object
        that builds it at its first use (:class:`_TokenizerOnUse`), so a capture that needs none
        never loads it in this process."""
        if self.deferred:
            return _TokenizerOnUse(self) if self.has_tokenizer else None
        return self.tokenizer


class _TokenizerOnUse:
    """Stands for a deferred config's tokenizer (:meth:`AuditConfig.ingest_tokenizer`): any
    attribute (``decode``, ``get_vocab_size``) is the tokenizer's, built at the first one."""

    def __init__(self, cfg: AuditConfig) -> None:
        self._cfg = cfg

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cfg.tokenizer, name)

    def __len__(self) -> int:
        return len(self._cfg.tokenizer)


def _recorded(value: Any) -> Any:
    """An option's value as ``run.json`` holds it: tuples as lists."""
    return list(value) if isinstance(value, tuple) else value


def render_objects(spec: RunSpec) -> tuple[Any, dict[str, Any]]:
    """The render setup a spec names, built (:func:`replay.render.options.render_setup`: the
    renderers and the loaded tokenizer), and its words for ``run.json`` ``options`` (the
    :data:`BUILT_FROM` fields but ``date``, as the setup words them). Raises ValueError naming the option for a tokenizer, chat template, renderer or
    encoder that cannot be loaded and for a bad ``--date`` (ImportError and OSError are given as
    ValueError with the option first too); :class:`replay.errors.UnknownNameError` for a renderer
    name that is no built-in."""
    from replay.render.options import render_setup

    day = _day(spec)
    try:
        setup = render_setup(
            chat_templates=[*([spec.chat_template] if spec.chat_template else []), *spec.chat_template_routes],
            tokenizers=[*([spec.tokenizer] if spec.tokenizer else []), *spec.tokenizer_routes],
            renderer=spec.renderer, reference_encoder=spec.reference_encoder,
            old_chat_template=spec.old_chat_template, new_chat_template=spec.new_chat_template,
            reference_chat_template=spec.reference_chat_template, old_renderer=spec.old_renderer, new_renderer=spec.new_renderer,
            date=day,
        )
    except (ImportError, OSError) as exc:  # the message names the option
        raise ValueError(str(exc)) from None
    return setup, dict(setup.options)


def _day(spec: RunSpec) -> Any:
    """The spec's ``--date`` as a ``datetime.date`` (the pinned default when not given); raises
    ValueError for a bad one."""
    from replay.render.specs import DEFAULT_DATE, parse_date

    return parse_date(spec.date) if spec.date is not None else DEFAULT_DATE


def build_config(spec: RunSpec, *, load: bool = True, recorded: dict[str, Any] | None = None) -> AuditConfig:
    """The :class:`AuditConfig` a spec names, with its renderers and tokenizer built and
    ``options`` (for ``run.json``: each RunSpec field in order, the render setup's words for the
    :data:`BUILT_FROM` ones) filled in; ``cfg.spec`` is ``spec``.

    ``load`` False: the render setup is deferred (see :class:`AuditConfig`): only ``--date`` is
    checked here, the render objects are built at their first read in this process
    (:meth:`AuditConfig.load_render`) and ``options`` holds their words once they are
    (or once :meth:`AuditConfig.set_render_words` records a pool process's).

    ``recorded``: what else the command line gives ``run.json`` ``options`` (values as given,
    ``jobs``, the engine), merged last into ``options`` (a key already there keeps its place).

    Raises ValueError naming the option for a tokenizer, chat template, renderer or encoder that
    cannot be loaded, and for a bad ``--date`` (ImportError and OSError are given as ValueError
    with the option first too); :class:`replay.errors.UnknownNameError` for a renderer name that is
    no built-in. Spec strings of serializers and parsers are not resolved here
    (:func:`replay.stages.validate.validate_specs` does, once per run).
    """
    day = _day(spec)  # a bad --date fails here either way
    options: dict[str, Any] = {}
    for f in dataclasses.fields(RunSpec):
        if f.name == "date":
            options["date"] = day.isoformat()
        elif f.name in BUILT_FROM:
            options.setdefault(_RENDER_SLOT, None)  # once, at the first render option
        elif f.name not in _EXECUTOR_OPTIONS:
            options[f.name] = _recorded(getattr(spec, f.name))
    options.update(recorded or {})
    cfg = AuditConfig(**{name: getattr(spec, name) for name in STAGE_OPTIONS}, options=options, spec=spec)
    cfg.__dict__["_deferred"] = True
    if load:
        cfg.load_render()
    return cfg


def spec_from_options(
    *,
    chat_templates: Any = (),
    tokenizers: Any = (),
    chunkings: str | tuple[str, ...] | list[str] | None = None,
    old_pythonpath: str | None = None,
    new_pythonpath: str | None = None,
    **options: Any,
) -> RunSpec:
    """A :class:`RunSpec` from option values as a command line gives them.

    ``chat_templates``/``tokenizers``: one path (str or PathLike) or a list of the repeatable
    options' values, each ``FILE`` or ``PATTERN=FILE`` (:func:`replay.render.options.split_route`):
    at most one plain one each. ``chunkings``: names separated by commas (or a sequence), None
    for the defaults. ``old_pythonpath``/``new_pythonpath``: directories joined by
    ``os.pathsep`` (:func:`replay.sides.split_pythonpath`). ``options``: any other RunSpec field,
    by name (a path-like value is given as str; None: not given, the field's default).

    Raises ValueError naming the option for a second plain ``--chat-template`` or
    ``--tokenizer``; :class:`replay.errors.UsageError` (a usage error) for the ``token``
    chunking without a plain tokenizer and for ``old_render_in="python"`` without ``old_python``
    (and the new side's); TypeError for an unknown option name.
    """
    import os

    from replay.errors import UsageError
    from replay.render.options import split_route
    from replay.sides import split_pythonpath

    def values(v: Any) -> list[str]:
        if v is None:
            return []
        return [os.fspath(v)] if isinstance(v, (str, os.PathLike)) else [os.fspath(x) for x in v]

    templates, toks = values(chat_templates), values(tokenizers)
    plain_t = [v for v in templates if split_route(v)[0] is None]
    plain_k = [v for v in toks if split_route(v)[0] is None]
    if len(plain_t) > 1:
        raise ValueError(f"--chat-template {plain_t[1]}: a second plain --chat-template (give per-model ones as 'PATTERN=FILE')")
    if len(plain_k) > 1:
        raise ValueError(f"--tokenizer {plain_k[1]}: a second plain --tokenizer (give per-model ones as 'PATTERN=FILE')")
    if isinstance(chunkings, str):
        chunks: tuple[str, ...] | None = tuple(c.strip() for c in chunkings.split(","))
    else:
        chunks = tuple(chunkings) if chunkings is not None else None
    if chunks is not None and "token" in chunks and not plain_k:
        raise UsageError("Invalid value for '--chunkings': the token chunking needs --tokenizer (a tokenizer.json or a folder holding one)")
    plain = {k: (os.fspath(v) if isinstance(v, os.PathLike) else v) for k, v in options.items() if v is not None}
    for side in ("old", "new"):
        if plain.get(f"{side}_render_in") == "python" and plain.get(f"{side}_python") is None:
            raise UsageError(f"--{side} render_in=python: the {side} side has no interpreter of its own (give --{side} python=INTERPRETER)")
    return RunSpec(
        chat_template=plain_t[0] if plain_t else None,
        tokenizer=plain_k[0] if plain_k else None,
        chat_template_routes=tuple(v for v in templates if split_route(v)[0] is not None),
        tokenizer_routes=tuple(v for v in toks if split_route(v)[0] is not None),
        chunkings=chunks,
        old_pythonpath=split_pythonpath(old_pythonpath),
        new_pythonpath=split_pythonpath(new_pythonpath),
        **plain,
    )


_BUILT: dict[RunSpec, Any] = {}


def config_for(spec: Any) -> Any:
    """The built :class:`AuditConfig` of ``spec``, once per process (a cache keyed
    by the spec). An AuditConfig given as ``spec`` is returned as it is (a library caller that
    built its own renderer objects; such a config runs in this process only)."""
    if not isinstance(spec, RunSpec):
        return spec
    cfg = _BUILT.get(spec)
    if cfg is None:
        cfg = _BUILT[spec] = build_config(spec)
    return cfg


def close_built() -> None:
    """Stop the out-of-process sides of every config :func:`config_for` built in this process
    (a pool process's exit hook)."""
    from replay.sides import close_sides

    for cfg in _BUILT.values():
        close_sides(cfg)
