"""``replay audit``: ingest, render, re-stream, count, report (:func:`replay.audit.audit`)."""

from __future__ import annotations

import typer
import typer.core

from pathlib import Path
from replay.cli.app import _GroupedHelp, app, console
from replay.cli.common import _captures, _config, _default_out, _duckdb, _engine, _fail, _filters, _gate, _gates, _nothing_ingested, _progress, _resolve_sides, _threads_of
from replay.cli.options import OUTPUT, BatchRowsOpt, CaptureFormatOpt, ChunkingsOpt, DateOpt, DuckMemOpt, DuckTempOpt, DuckThreadsOpt, EngineOpt, ExemplarTextOpt, FailOnOpt, JobsOpt, LimitOpt, MaxLineOpt, ModelOpt, NewParser, NewPath, NewPreparer, NewPython, NewRenderIn, NewRendererOpt, NewSer, NewSide, NewTemplate, OldParser, OldPath, OldPreparer, OldPython, OldRenderIn, OldRendererOpt, OldSer, OldSide, OldTemplate, OverlapOpt, ParallelIngestOpt, ParserOpt, QuietOpt, RayAddressOpt, RedactOpt, RefEncoderOpt, RefParser, RefPreparer, RefSer, RefSide, RefTemplate, RenderTokenizerOpt, RendererOpt, RouteOpt, SampleKeyOpt, SampleOpt, SidesFileOpt, SinceOpt, TemplateOpt, TimeoutOpt, UntilOpt
from replay.errors import UsageError
from replay.term import plain
from typing import Annotated, Optional


@app.command(cls=_GroupedHelp, short_help="Ingest, re-render and re-stream captures; count; report.")
def audit(
    paths: Annotated[list[str], typer.Argument(help="Capture files or folders (recursive): .jsonl/.ndjson/.json/.sse/.har/.log/.mitm, plain, .zst or .gz; or s3://, gs://, az:// URIs of objects or prefixes.")],
    out: Annotated[Optional[Path], typer.Option("--out", rich_help_panel=OUTPUT, help="Run folder to write (default runs/audit-<time>).")] = None,
    old: OldSide = None,
    new: NewSide = None,
    reference: RefSide = None,
    sides: SidesFileOpt = None,
    chat_template: TemplateOpt = None,
    tokenizer: RenderTokenizerOpt = None,
    renderer: RendererOpt = None,
    parser: ParserOpt = None,
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
    old_parser: OldParser = None,
    new_parser: NewParser = None,
    reference_parser: RefParser = None,
    old_python: OldPython = None,
    new_python: NewPython = None,
    old_pythonpath: OldPath = None,
    new_pythonpath: NewPath = None,
    old_render_in: OldRenderIn = None,
    new_render_in: NewRenderIn = None,
    chunkings: ChunkingsOpt = None,
    replay_timeout: TimeoutOpt = 10.0,
    redact: RedactOpt = False,
    max_line_bytes: MaxLineOpt = 32 << 20,
    capture_format: CaptureFormatOpt = None,
    fail_on: FailOnOpt = None,
    exemplar_text: ExemplarTextOpt = False,
    model: ModelOpt = None,
    route: RouteOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    sample: SampleOpt = None,
    sample_key: SampleKeyOpt = "exchange_id",
    limit: LimitOpt = None,
    jobs: JobsOpt = None,
    parallel_ingest: ParallelIngestOpt = False,
    overlap: OverlapOpt = True,
    batch_rows: BatchRowsOpt = 512,
    force: Annotated[
        bool,
        typer.Option(
            "--force", rich_help_panel=OUTPUT,
            help="Replace the run --out holds (without it, only an interrupted audit of the same inputs is resumed).",
        ),
    ] = False,
    quiet: QuietOpt = False,
    duckdb_memory: DuckMemOpt = None,
    duckdb_threads: DuckThreadsOpt = None,
    duckdb_temp: DuckTempOpt = None,
    engine: EngineOpt = "local",
    ray_address: RayAddressOpt = None,
) -> None:
    """Ingest captures, re-render and re-stream every exchange, count what differs, write report.md.

    An --out that holds a run is refused without --force; an interrupted audit rerun with the
    same captures and options resumes where it stopped.

    Example: replay audit samples/ --out runs/samples --fail-on broken
    """
    from replay.audit import audit as run_audit
    from replay.report import rich_table, summary_by_side
    from replay.report import fidelity_sentence

    gates = _gates(fail_on)
    filters = _filters(model, route, since, until, sample, sample_key, limit)
    side_specs = _resolve_sides(old, new, reference, sides, dict(
        old_serializer=old_serializer, new_serializer=new_serializer, reference_serializer=reference_serializer,
        old_preparer=old_preparer, new_preparer=new_preparer, reference_preparer=reference_preparer,
        old_chat_template=old_chat_template, new_chat_template=new_chat_template, reference_chat_template=reference_chat_template,
        old_renderer=old_renderer, new_renderer=new_renderer, reference_encoder=reference_encoder,
        old_parser=old_parser, new_parser=new_parser, reference_parser=reference_parser,
        old_python=old_python, new_python=new_python, old_pythonpath=old_pythonpath, new_pythonpath=new_pythonpath,
        old_render_in=old_render_in, new_render_in=new_render_in,
    ))
    cfg = _config(side_specs, chat_template, tokenizer, parser, chunkings, replay_timeout, renderer_spec=renderer, date=date, defer=True,
                  jobs=jobs, batch_rows=batch_rows, recorded=dict(redact=redact, max_line_bytes=max_line_bytes),
                  execution=dict(parallel_ingest=parallel_ingest, overlap=overlap), engine=engine, ray_address=ray_address)
    if redact and exemplar_text:
        _fail("--redact (hash message text at ingest) and --exemplar-text (show it in the exemplars) contradict each other", 2)
    skipped: list[dict] = []
    files = _captures(paths, skipped)  # listed once: the audit reads exactly these (a bucket may change meanwhile)
    run_dir = out or _default_out()
    from replay.audit import RunExistsError

    executor = _engine(engine, ray_address, cfg)
    try:
        with _progress(quiet) as stage:
            result = run_audit(files, run_dir, cfg, stage=stage, capture_format=capture_format,
                               redact=not exemplar_text, hash_text=redact, max_line_bytes=max_line_bytes, filters=filters,
                               duckdb_settings=_duckdb(duckdb_memory, _threads_of(duckdb_threads, jobs), duckdb_temp), engine=executor, force=force,
                               skipped=skipped)
    except (RunExistsError, UsageError) as exc:  # usage errors, raised before any work
        _fail(str(exc), 2)
    except (OSError, ValueError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        from replay.runner.runfolder import RunFolder

        _fail(f"interrupted during {RunFolder(run_dir, 'replay audit').incomplete_stage() or 'start-up'}: {run_dir} is incomplete (run.json says so; "
              "replay query and replay report refuse it); run the audit again", 130)
    finally:
        if executor is not None:
            executor.close()
    console.print(rich_table(result.report.results["verdicts"], title="verdicts (exchanges; old vs new against the reference)"))
    console.print(plain(fidelity_sentence(result.report.results["fidelity"])))
    if result.meta.get("filters"):
        console.print(plain(f"Filters: {result.meta['filters']['sentence']}."))
    console.print(rich_table(summary_by_side(result.report.results["summary"]), title=f"replay audit: {run_dir}"))
    for line in result.report.headlines:
        console.print(plain(f"• {line}"), soft_wrap=True)
    total = sum(result.seconds.values())
    console.print(plain(f"\nWrote {result.report.path} and the tables in {run_dir}/ ({total:.2f} s)."))
    _nothing_ingested(result.meta)
    _gate(gates, result.report.results["verdicts"])
