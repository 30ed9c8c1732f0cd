"""The command line's option declarations, shared by the commands: the value checks run
before any work (a bad value is a usage error, exit 2, one line naming the option) and the
``Annotated`` option types with their ``--help`` group (captures, sides, checks, output, scale).
One concern at about 400 lines: every option is declared here once, so that two commands
spelling one option cannot drift apart.
"""

from __future__ import annotations

import typer
import typer.core

from pathlib import Path
from typing import Annotated, Any, Optional


# --- option values, judged before any work (a bad one: typer.BadParameter, exit 2, one line) -----
def _timeout_value(text: Any) -> float:
    """``--replay-timeout``: seconds, a number >= 0 (0: no limit)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise typer.BadParameter(f"{text!r} is not a number of seconds >= 0 (0: no limit)")
    return value


def _chunkings_value(value: Optional[str]) -> Optional[str]:
    """Comma-separated chunking names (:func:`replay.stream.check_chunking`); an empty list or an
    empty name is an error (it silently meant the defaults). Returns the value as given."""
    if value is None:
        return None
    from replay.stream import ChunkingError, parse_chunkings

    try:
        parse_chunkings(value)
    except ChunkingError as exc:
        raise typer.BadParameter(str(exc)) from None
    return value


def _format_value(value: Optional[str]) -> Optional[str]:
    from replay.capture.detect import FORMATS

    if value is not None and value not in FORMATS:
        raise typer.BadParameter(f"unknown format {value!r}; one of: {', '.join(FORMATS)}")
    return value


def _date_value(value: Optional[str]) -> Optional[str]:
    from replay.render.specs import parse_date

    if value is not None:
        try:
            parse_date(value)
        except ValueError as exc:  # "'2026-13-45': not a calendar date (month must be in 1..12)"
            raise typer.BadParameter(str(exc).removeprefix("--date ")) from None
    return value


def _ts_value(value: Optional[str]) -> Optional[str]:
    """``--since`` / ``--until``: ISO 8601 or epoch seconds (:func:`replay.capture.timestamps.parse_ts`)."""
    if value is not None:
        from replay.capture.timestamps import TimestampError, parse_ts

        try:
            parse_ts(value)
        except TimestampError:
            raise typer.BadParameter(f"{value!r} is not a time: ISO 8601 (2026-01-31, 2026-01-31T12:00:00Z) or epoch seconds") from None
    return value


def _fraction_value(value: Optional[str]) -> Optional[str]:
    if value is not None:
        from replay.capture.filters import parse_fraction

        try:
            parse_fraction(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return value


def _sample_key_value(value: str) -> str:
    """``--sample-key``: a column of ``exchanges`` or ``request.<dotted path>``."""
    from replay.tables import EXCHANGES

    if value.startswith("request.") and all(value[len("request.") :].split(".")):
        return value
    if value in EXCHANGES.names:
        return value
    raise typer.BadParameter(f"{value!r} is neither request.PATH (e.g. request.metadata.session_id) nor a column of exchanges (exchange_id, model, route, ...)")


def _models_value(value: Optional[list[str]]) -> Optional[list[str]]:
    """``--model``: shell globs; an empty one matches no model name, so it would keep nothing."""
    for glob in value or []:
        if not glob.strip():
            raise typer.BadParameter(f"{glob!r}: an empty pattern matches no model (give a glob such as 'Qwen/*')")
    return value


def _routes_value(value: Optional[list[str]]) -> Optional[list[str]]:
    from replay.capture.v1 import ROUTES

    for route in value or []:
        if route not in ROUTES:
            raise typer.BadParameter(f"unknown route {route!r}; one of: {', '.join(ROUTES)}")
    return value


# --- shared options -------------------------------------------------------------------------------
# ``rich_help_panel`` names the section of ``--help`` an option is listed in (:class:`_GroupedHelp`).
CAPTURES, SIDES, CHECKS, OUTPUT, SCALE = "Captures", "Sides", "Checks", "Output", "Scale"


RunOpt = Annotated[Path, typer.Option("--run", rich_help_panel=OUTPUT, help="Run folder (made by `replay audit` or `replay ingest`).")]


SideHelp = {
    "old": "The old side: comma-separated KEY=VALUE (repeatable), or a TOML inline table for a value with a comma. Keys: preparer, "
           "serializer (default model-dump), chat_template, renderer, parser, python, pythonpath, render_in.",
    "new": "The new side, as --old (serializer default: client-fields).",
    "reference": "The side judged against (serializer default: as-sent), as --old without python, pythonpath, render_in: "
                 "its parser (e.g. sglang/NAME, vllm/NAME, trtllm/NAME) must be importable by the interpreter running replay.",
}


OldSide = Annotated[Optional[list[str]], typer.Option("--old", metavar="KEY=VALUE", rich_help_panel=SIDES, help=SideHelp["old"])]


NewSide = Annotated[Optional[list[str]], typer.Option("--new", metavar="KEY=VALUE", rich_help_panel=SIDES, help=SideHelp["new"])]


RefSide = Annotated[Optional[list[str]], typer.Option("--reference", metavar="KEY=VALUE", rich_help_panel=SIDES, help=SideHelp["reference"])]


SidesFileOpt = Annotated[
    Optional[Path],
    typer.Option("--sides", metavar="FILE", rich_help_panel=SIDES,
                 help="TOML file of [sides.NAME] tables of those keys: old, new, reference."),
]


TemplateOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--chat-template",
        metavar="FILE",
        rich_help_panel=SIDES,
        help="Chat template of every side (.jinja or tokenizer_config.json). Repeatable as PATTERN=FILE: the model name picks it.",
    ),
]


TokenizerOpt = Annotated[Optional[Path], typer.Option(rich_help_panel=SIDES, help="tokenizer.json (or a folder holding one) for token counts and the `token` chunking.")]


RenderTokenizerOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--tokenizer",
        metavar="FILE",
        rich_help_panel=SIDES,
        help="tokenizer.json (or its folder): token counts, the token chunking. Repeatable as PATTERN=FILE.",
    ),
]


RendererOpt = Annotated[
    Optional[str],
    typer.Option("--renderer", metavar="SPEC", rich_help_panel=SIDES,
                 help="Renderer of old and new: json-tools (default), harmony, mistral-common[:V], file.py:function, sglang:DIR, vllm:DIR (a release's own), http://HOST:PORT (a tokenize endpoint)."),
]


DateOpt = Annotated[
    Optional[str],
    typer.Option("--date", metavar="YYYY-MM-DD", callback=_date_value, rich_help_panel=SIDES, help="The day templates read (default 2026-01-01)."),
]


ParserOpt = Annotated[Optional[str], typer.Option("--parser", metavar="FAMILY", rich_help_panel=SIDES, help="Parser family of every exchange (default: by model).")]


def _hidden(flag: str, key: str, kind: Any = str) -> Any:
    """A deprecated per-side flag (``--old-parser``): hidden from ``--help``, folded into the side's
    value as ``key`` (:func:`_resolve_sides`, which prints the deprecation line)."""
    side = flag.split("-")[2]
    return Annotated[Optional[kind], typer.Option(flag, hidden=True, help=f"Deprecated: --{side} {key}=VALUE.")]


# the deprecated per-side flags, one release: (flag, side value key)
OldSer = _hidden("--old-serializer", "serializer")


NewSer = _hidden("--new-serializer", "serializer")


RefSer = _hidden("--reference-serializer", "serializer")


OldPreparer = _hidden("--old-preparer", "preparer")


NewPreparer = _hidden("--new-preparer", "preparer")


RefPreparer = _hidden("--reference-preparer", "preparer")


OldTemplate = _hidden("--old-chat-template", "chat_template", Path)


NewTemplate = _hidden("--new-chat-template", "chat_template", Path)


RefTemplate = _hidden("--reference-chat-template", "chat_template", Path)


OldRendererOpt = _hidden("--old-renderer", "renderer")


NewRendererOpt = _hidden("--new-renderer", "renderer")


RefEncoderOpt = _hidden("--reference-encoder", "renderer")


OldParser = _hidden("--old-parser", "parser")


NewParser = _hidden("--new-parser", "parser")


RefParser = _hidden("--reference-parser", "parser")


OldPython = _hidden("--old-python", "python")


NewPython = _hidden("--new-python", "python")


OldPath = _hidden("--old-pythonpath", "pythonpath")


NewPath = _hidden("--new-pythonpath", "pythonpath")


OldRenderIn = _hidden("--old-render-in", "render_in")


NewRenderIn = _hidden("--new-render-in", "render_in")


#: parameter name of a deprecated flag -> (side, side value key)
_LEGACY: dict[str, tuple[str, str]] = {
    f"{side}_{key}": (side, key)
    for side in ("old", "new", "reference")
    for key in ("serializer", "preparer", "chat_template", "renderer", "parser", "python", "pythonpath", "render_in")
    if not (side == "reference" and key in ("renderer", "python", "pythonpath", "render_in"))
}


_LEGACY["reference_encoder"] = ("reference", "renderer")


TimeoutOpt = Annotated[
    float,
    typer.Option(parser=_timeout_value, metavar="SECONDS", rich_help_panel=CHECKS,
                 help="Limit of one parse or replay, else an error (0: none)."),
]


RedactOpt = Annotated[
    bool,
    typer.Option("--redact", rich_help_panel=CAPTURES,
                 help="Hash message text at ingest, tables too (no re-streaming then)."),
]


MaxLineOpt = Annotated[
    int, typer.Option("--max-line-bytes", min=1, metavar="BYTES", rich_help_panel=CAPTURES, help="Longest line read; a longer one is counted as an error.")
]


FailOnOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--fail-on", metavar="RULE", rich_help_panel=CHECKS,
        help="Exit 3 when the verdicts show VERDICT, CHECK:VERDICT or CHECK:VERDICT>N "
        "(e.g. broken, 'dropped-call:broken>0', 'null-leak:still-wrong>10': quote a >). Repeatable.",
    ),
]


ExemplarTextOpt = Annotated[bool, typer.Option("--exemplar-text", rich_help_panel=OUTPUT, help="Message text in exemplars as captured (default: masked).")]


CaptureFormatOpt = Annotated[
    Optional[str],
    typer.Option("--capture-format", metavar="FORMAT", callback=_format_value, rich_help_panel=CAPTURES,
                 help="Read every capture as v1, sse, body, openai-batch, har, serverlog, litellm, otel, kong, helicone, vllm-log, mitmproxy, langfuse or openai-stored (default: detected)."),
]


ModelOpt = Annotated[
    Optional[list[str]],
    typer.Option("--model", metavar="GLOB", callback=_models_value, rich_help_panel=CAPTURES, help="Keep models matching this glob ('Qwen/*'). Repeatable."),
]


RouteOpt = Annotated[
    Optional[list[str]],
    typer.Option("--route", metavar="ROUTE", callback=_routes_value, rich_help_panel=CAPTURES, help="Keep chat.completions, messages or responses. Repeatable."),
]


SinceOpt = Annotated[
    Optional[str], typer.Option("--since", metavar="TIME", callback=_ts_value, rich_help_panel=CAPTURES, help="Keep ts >= TIME (ISO 8601 or epoch seconds; UTC).")
]


UntilOpt = Annotated[Optional[str], typer.Option("--until", metavar="TIME", callback=_ts_value, rich_help_panel=CAPTURES, help="Keep ts < TIME.")]


SampleOpt = Annotated[
    Optional[str],
    typer.Option("--sample", metavar="FRACTION", callback=_fraction_value, rich_help_panel=CAPTURES, help="Keep this fraction (0.1, 10%) by a hash of --sample-key."),
]


SampleKeyOpt = Annotated[
    str,
    typer.Option("--sample-key", metavar="FIELD", callback=_sample_key_value, rich_help_panel=CAPTURES,
                 help="What --sample hashes: a column or request.PATH."),
]


LimitOpt = Annotated[Optional[int], typer.Option("--limit", min=1, metavar="N", rich_help_panel=CAPTURES, help="Keep at most N exchanges.")]


JobsOpt = Annotated[
    Optional[int],
    typer.Option("--jobs", min=1, metavar="N", rich_help_panel=SCALE, help="Processes of the render and re-stream stages (default: CPUs)."),
]


OverlapOpt = Annotated[
    bool,
    typer.Option(
        "--overlap/--no-overlap", rich_help_panel=SCALE,
        help="Render and re-stream row groups while ingest runs.",
    ),
]


ParallelIngestOpt = Annotated[
    bool,
    typer.Option(
        "--parallel-ingest/--no-parallel-ingest", rich_help_panel=SCALE,
        help="Also parse capture-v1 lines on the --jobs pool.",
    ),
]


BatchRowsOpt = Annotated[
    int, typer.Option("--batch-rows", min=1, metavar="N", rich_help_panel=SCALE, help="Exchanges per batch (the unit of work and of resuming).")
]


QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", rich_help_panel=OUTPUT, help="No progress bar or progress lines on stderr.")
]


DuckMemOpt = Annotated[
    Optional[str],
    typer.Option("--duckdb-memory", metavar="SIZE", envvar="REPLAY_DUCKDB_MEMORY", show_envvar=True, rich_help_panel=SCALE,
                 help="DuckDB's memory limit (default 256MB)."),
]


DuckThreadsOpt = Annotated[
    Optional[int], typer.Option("--duckdb-threads", metavar="N", envvar="REPLAY_DUCKDB_THREADS", show_envvar=True, min=1, rich_help_panel=SCALE,
                                help="DuckDB's threads (default: --jobs, at most 4).")
]


DuckTempOpt = Annotated[
    Optional[Path], typer.Option("--duckdb-temp", metavar="DIR", envvar="REPLAY_DUCKDB_TEMP", show_envvar=True, rich_help_panel=SCALE,
                                 help="Where DuckDB spills (default RUN/.duckdb_tmp).")
]


def _one_of(option: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise typer.BadParameter(f"{value!r} is not one of: {', '.join(allowed)}", param_hint=f"'{option}'")
    return value


EngineOpt = Annotated[
    str,
    typer.Option("--engine", callback=lambda v: _one_of("--engine", v, ("local", "ray")), rich_help_panel=SCALE,
                 help="local, or ray (one Ray task per batch; the ray extra)."),
]


RayAddressOpt = Annotated[
    Optional[str], typer.Option("--ray-address", rich_help_panel=SCALE,
                                help="The Ray cluster (default: a local Ray).")
]


ChunkingsOpt = Annotated[
    Optional[str],
    typer.Option(callback=_chunkings_value, metavar="NAMES", rich_help_panel=CHECKS,
                 help="Chunkings of every side. Default: recorded,whole for a built-in parser; else "
                 "recorded,whole,char,fixed-2,3,5,8,13,40, token with --tokenizer, and split-all."),
]
