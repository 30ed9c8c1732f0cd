"""Spec validation, once per run before any row is written: every serializer, parser and
chunking a run spec names resolves, and the out-of-process sides' workers start
(:func:`validate_specs`). Errors name the option (``--old parser=...: ...``).
"""

from __future__ import annotations

import sys

from replay.errors import UsageError
from replay.adapters import is_per_family_spec, per_family_parser
from replay.parsers import get_parser
from replay.runspec import AuditConfig
from replay.sides import SideError, open_sides, side_specs
from replay.stages.rows import SIDES
from replay.stages.stream import SPLIT_ALL, _has_tokenizer
from replay.stream import ChunkingError, check_chunking
from replay.tools import get_serializer
from typing import Any


def _named(option: str, spec: str, resolve: Any) -> None:
    """``resolve(spec)``; its ValueError is raised again, same class, with ``option`` first in the
    message (so the user sees which of the six spec options is wrong)."""
    try:
        resolve(spec)
    except ValueError as exc:
        try:
            err = type(exc)(f"{option} {spec}: {exc}")
        except Exception:  # noqa: BLE001 - a class whose constructor takes other arguments
            err = ValueError(f"{option} {spec}: {exc}")
        raise err from None


class ReferenceFrameworkError(UsageError):
    """``--reference-parser sglang/NAME`` (``vllm/NAME``, ``trtllm/NAME``) where that framework is
    not importable: the reference side runs in the ``replay`` process, never in a worker. A usage
    error (exit 2) saying how to run it."""


def _reference_parser(spec: str) -> None:
    """Resolve the ``--reference-parser`` spec here (the reference side always runs in this
    process; a framework spec imports its framework now). Raises :class:`ReferenceFrameworkError`
    when the framework is not importable in this interpreter, else as :func:`_named`."""
    from replay.adapters import FrameworkMissingError, is_framework_spec

    try:
        _named("--reference-parser", spec, get_parser)
    except FrameworkMissingError as exc:
        if not is_framework_spec(spec):
            raise
        framework = spec.split("/", 1)[0]
        raise ReferenceFrameworkError(
            f"--reference-parser {spec}: {framework} is not importable in {sys.executable}, and the reference side runs in "
            f"the replay process (never in a worker). Run replay with an interpreter that has {framework} (install replay into "
            f"that venv and run its bin/replay), or keep the built-in reference and audit {spec} as a side in its own venv: "
            f"--new-parser {spec} --new-python VENV/bin/python (likewise --old-parser/--old-python)."
        ) from None


def validate_specs(cfg: AuditConfig) -> None:
    """Resolve every serializer and parser spec once, so a typo fails before any work is done.

    In-process specs are resolved here; an out-of-process side's worker is started and resolves
    its own (:func:`replay.sides.open_sides`; the workers are kept for the run). Raises
    ValueError (UnknownSerializerError, UnknownParserError, PluginError, ChunkingError,
    SideError) naming the option and the spec; ValueError for a negative ``replay_timeout``.
    """
    for side in ("old", "new"):
        if getattr(cfg, f"{side}_pythonpath") and not getattr(cfg, f"{side}_python"):
            raise SideError(f"--{side}-pythonpath needs --{side}-python (the interpreter to run that side in)")
    if cfg.replay_timeout < 0:
        raise ValueError(f"--replay-timeout {cfg.replay_timeout:g}: seconds must be 0 (no limit) or more")
    specs = side_specs(cfg)
    for spec in specs.values():
        if spec.in_process:
            _named(f"--{spec.side}-serializer", spec.serializer, get_serializer)
            if spec.parser is not None and spec.side == "reference":
                _reference_parser(spec.parser)
            elif spec.parser is not None:
                _named(f"--{spec.side}-parser", spec.parser, per_family_parser if is_per_family_spec(spec.parser) else get_parser)
    if cfg.parser is not None:
        _named("--parser", cfg.parser, get_parser)
    from replay.prepare import get_preparer

    for side in SIDES:
        spec = getattr(cfg, f"{side}_preparer", None)
        if spec is not None:
            _named(f"--{side}-preparer", spec, get_preparer)
    if cfg.chunkings is not None and not cfg.chunkings:
        raise ChunkingError("no chunking given")
    for chunking in cfg.chunkings or ():
        if chunking == SPLIT_ALL:
            continue
        if chunking == "token" and getattr(cfg, "deferred", False) and _has_tokenizer(cfg):
            continue  # the tokenizer is checked where it is built (replay.runner.plan.setup_render), not loaded here for this
        try:
            check_chunking(chunking, tokenizer=cfg.tokenizer if chunking == "token" else None)  # only token reads it
        except ChunkingError as exc:
            raise ChunkingError(f"--chunkings {chunking}: {exc}") from None
    open_sides(cfg)
