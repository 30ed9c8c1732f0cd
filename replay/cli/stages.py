"""``replay render`` and ``replay stream``: one stage of an ingested run again, with other
sides (:func:`replay.runner.driver.run_render`, :func:`replay.runner.driver.run_stream`), then
the report rewritten.
"""

from __future__ import annotations

import typer
import typer.core

from pathlib import Path
from replay.cli.app import _GroupedHelp, app, console
from replay.cli.common import _config, _duckdb, _engine, _fail, _hold_run, _progress, _report_interrupted, _resolve_sides, _threads_of
from replay.cli.options import BatchRowsOpt, ChunkingsOpt, DateOpt, DuckMemOpt, DuckTempOpt, DuckThreadsOpt, EngineOpt, JobsOpt, NewParser, NewPath, NewPreparer, NewPython, NewRenderIn, NewRendererOpt, NewSer, NewSide, NewTemplate, OldParser, OldPath, OldPreparer, OldPython, OldRenderIn, OldRendererOpt, OldSer, OldSide, OldTemplate, ParserOpt, QuietOpt, RayAddressOpt, RefEncoderOpt, RefParser, RefPreparer, RefSer, RefSide, RefTemplate, RenderTokenizerOpt, RendererOpt, RunOpt, SidesFileOpt, TemplateOpt, TimeoutOpt, TokenizerOpt
from replay.errors import UsageError
from replay.term import plain
from typing import Any, Optional


def _stage_command(ctx: Any, which: str, run: Path, cfg: Any, quiet: bool, duckdb_settings: Any = None, engine: str = "local", ray_address: Optional[str] = None) -> None:
    folder = _hold_run(ctx, run, "render" if which == "render" else "stream")
    from replay.matrix_vars import matrix_rewrite_refusal

    refusal = matrix_rewrite_refusal(run, "render" if which == "render" else "stream")
    if refusal:  # its tables hold the matrix's named sides
        _fail(refusal)
    from replay.audit import write_report
    from replay.runner.driver import count_exchanges, run_render, run_stream
    from replay.stages.validate import validate_specs
    from replay.sides import close_sides

    try:
        n = count_exchanges(run)
        meta = folder.read_meta()  # a run.json that is not JSON fails here, before any table is rewritten
        validate_specs(cfg)
    except (FileNotFoundError, ValueError) as exc:
        close_sides(cfg)
        _fail(str(exc), 2 if isinstance(exc, UsageError) else 1)
    executor = _engine(engine, ray_address, cfg)
    folder.mark(which)
    try:
        with _progress(quiet) as stage:
            with stage(which, n) as advance:
                if executor is not None:
                    from replay.stages.stage import RENDER, STREAM

                    got = executor.run_stage(run, RENDER if which == "render" else STREAM, cfg, advance)
                    counts = got["renders"] if which == "render" else (got["streams"], got["calls"])
                else:
                    counts = run_render(run, cfg, progress=advance) if which == "render" else run_stream(run, cfg, progress=advance)
    except ValueError as exc:  # replay.runner.executors.EngineError: Ray missing or unreachable
        _fail(str(exc))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: run.json keeps saying the stage is incomplete
        command = "render" if which == "render" else "stream"
        _fail(f"interrupted during {which}: {run} is incomplete (run.json says so; replay query and replay report refuse it); "
              f"run `replay {command} --run {run}` again with the same options: it resumes", 130)
    finally:
        from replay.runner.pool import close_pools

        close_pools()
        sides = close_sides(cfg)
        if executor is not None:
            executor.close()
    from replay.runner.plan import executor_meta

    sides, executors = executor_meta(cfg, sides)
    meta["executors"] = {**meta.get("executors", {}), **executors}
    if sides:
        meta["sides"] = {**meta.get("sides", {}), **{s: {**v, "stage": which} for s, v in sides.items()}}
    given = {k: v for k, v in cfg.options.items() if k in _STAGE_KEYS[which]}
    if which == "re-stream" and given.get("tokenizer") is None:
        given.pop("tokenizer", None)  # the render stage's tokenizer stays on record
    if "sides" in given:  # the other stage's keys of each side stay as the run had them
        from replay.side import merge_stage

        given["sides"] = merge_stage((meta.get("options") or {}).get("sides") or {}, given["sides"], which)
    meta["options"] = {**meta.get("options", {}), **given}
    if which == "re-stream":
        from replay.stages.stream import chunking_plan

        meta["chunkings"] = chunking_plan(cfg)
    folder.finish()
    try:
        write_report(run, meta, duckdb_settings=duckdb_settings)
    except ValueError as exc:  # a table of the run DuckDB cannot read
        _fail(f"{which} done, report.md not written: {exc}")
    except KeyboardInterrupt:
        _report_interrupted(run)
    wrote = f"{counts:,} renders rows" if which == "render" else f"{counts[0]:,} streams rows and {counts[1]:,} calls rows"
    console.print(plain(f"{which}: wrote {wrote}; {run}/report.md updated."))


_SIDE_KEYS = {"old_python", "new_python", "old_pythonpath", "new_pythonpath", "sides"}


_RENDER_IN_KEYS = {"old_render_in", "new_render_in"}


_STAGE_KEYS = {
    "render": {"engine", "ray_address", "old_serializer", "new_serializer", "reference_serializer", "renderer", "chat_template", "tokenizer", "reference_encoder", "date",
               "chat_template_routes", "tokenizer_routes", "old_renderer", "new_renderer", "reference_chat_template", "special_tokens", "chat_template_paths",
               "old_preparer", "new_preparer", "reference_preparer", *_SIDE_KEYS, *_RENDER_IN_KEYS},
    "re-stream": {"engine", "ray_address", "parser", "old_parser", "new_parser", "reference_parser", "chunkings", "tokenizer", "replay_timeout", *_SIDE_KEYS},
}


@app.command(cls=_GroupedHelp, short_help="Re-render the prompts of an ingested run.")
def render(
    ctx: typer.Context,
    run: RunOpt,
    old: OldSide = None,
    new: NewSide = None,
    reference: RefSide = None,
    sides: SidesFileOpt = None,
    chat_template: TemplateOpt = None,
    tokenizer: RenderTokenizerOpt = None,
    renderer: RendererOpt = None,
    date: DateOpt = None,
    old_serializer: OldSer = None,
    new_serializer: NewSer = None,
    reference_serializer: RefSer = None,
    old_preparer: OldPreparer = None,
    new_preparer: NewPreparer = None,
    reference_preparer: RefPreparer = None,
    old_chat_template: OldTemplate = None,
    new_chat_template: NewTemplate = None,
    reference_chat_template: RefTemplate = None,
    old_renderer: OldRendererOpt = None,
    new_renderer: NewRendererOpt = None,
    reference_encoder: RefEncoderOpt = None,
    old_python: OldPython = None,
    new_python: NewPython = None,
    old_pythonpath: OldPath = None,
    new_pythonpath: NewPath = None,
    old_render_in: OldRenderIn = None,
    new_render_in: NewRenderIn = None,
    jobs: JobsOpt = None,
    batch_rows: BatchRowsOpt = 512,
    quiet: QuietOpt = False,
    duckdb_memory: DuckMemOpt = None,
    duckdb_threads: DuckThreadsOpt = None,
    duckdb_temp: DuckTempOpt = None,
    engine: EngineOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Re-render the prompts of an ingested run (rewrites renders.parquet and report.md).

    An interrupted render rerun with the same options resumes: the batches already written are kept.

    Example: replay render --run runs/samples --chat-template qwen3.jinja --tokenizer tok/
    """
    side_specs = _resolve_sides(old, new, reference, sides, dict(
        old_serializer=old_serializer, new_serializer=new_serializer, reference_serializer=reference_serializer,
        old_preparer=old_preparer, new_preparer=new_preparer, reference_preparer=reference_preparer,
        old_chat_template=old_chat_template, new_chat_template=new_chat_template, reference_chat_template=reference_chat_template,
        old_renderer=old_renderer, new_renderer=new_renderer, reference_encoder=reference_encoder,
        old_python=old_python, new_python=new_python, old_pythonpath=old_pythonpath, new_pythonpath=new_pythonpath,
        old_render_in=old_render_in, new_render_in=new_render_in,
    ))
    cfg = _config(side_specs, chat_template, tokenizer, None, None, renderer_spec=renderer, date=date,
                  jobs=jobs, batch_rows=batch_rows, engine=engine, ray_address=ray_address)
    _stage_command(ctx, "render", run, cfg, quiet, _duckdb(duckdb_memory, _threads_of(duckdb_threads, jobs), duckdb_temp), engine, ray_address)


@app.command(cls=_GroupedHelp, short_help="Re-stream the raw completions of an ingested run.")
def stream(
    ctx: typer.Context,
    run: RunOpt,
    old: OldSide = None,
    new: NewSide = None,
    reference: RefSide = None,
    sides: SidesFileOpt = None,
    parser: ParserOpt = None,
    old_parser: OldParser = None,
    new_parser: NewParser = None,
    reference_parser: RefParser = None,
    old_python: OldPython = None,
    new_python: NewPython = None,
    old_pythonpath: OldPath = None,
    new_pythonpath: NewPath = None,
    chunkings: ChunkingsOpt = None,
    tokenizer: TokenizerOpt = None,
    replay_timeout: TimeoutOpt = 10.0,
    jobs: JobsOpt = None,
    batch_rows: BatchRowsOpt = 512,
    quiet: QuietOpt = False,
    duckdb_memory: DuckMemOpt = None,
    duckdb_threads: DuckThreadsOpt = None,
    duckdb_temp: DuckTempOpt = None,
    engine: EngineOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Re-stream the raw completions of an ingested run (rewrites streams/calls.parquet and report.md).

    An interrupted re-stream rerun with the same options resumes: the batches already written are kept.

    Example: replay stream --run runs/samples --old parser=my_parsers.py:OldHermes --chunkings whole,char
    """
    side_specs = _resolve_sides(old, new, reference, sides, dict(
        old_parser=old_parser, new_parser=new_parser, reference_parser=reference_parser,
        old_python=old_python, new_python=new_python, old_pythonpath=old_pythonpath, new_pythonpath=new_pythonpath,
    ))
    cfg = _config(side_specs, None, tokenizer, parser, chunkings, replay_timeout,
                  jobs=jobs, batch_rows=batch_rows, engine=engine, ray_address=ray_address)
    _stage_command(ctx, "re-stream", run, cfg, quiet, _duckdb(duckdb_memory, _threads_of(duckdb_threads, jobs), duckdb_temp), engine, ray_address)
