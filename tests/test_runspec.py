"""RunSpec and AuditConfig are two views of one set of options (issue 9, part 5): every option is
declared once, on RunSpec; AuditConfig gets the ones the stages read as they are, with the same
defaults, and build_config copies and records them. The option shaping a command line needs
(``PATTERN=FILE`` routes, ``--chunkings`` text, ``PYTHONPATH`` strings) is in the library."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from replay.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
from replay.runspec import AuditConfig as PipelineAuditConfig
from replay.runspec import BUILT_FROM, EXECUTION_FIELDS, STAGE_OPTIONS, AuditConfig, RunSpec, build_config, spec_from_options
from replay.stream import ChunkingError, parse_chunkings


def test_audit_config_has_every_stage_option_of_run_spec_with_its_default():
    spec_fields = {f.name: f for f in dataclasses.fields(RunSpec)}
    cfg_fields = {f.name: f for f in dataclasses.fields(AuditConfig)}
    assert PipelineAuditConfig is AuditConfig  # the public path replay.runspec.AuditConfig
    assert set(STAGE_OPTIONS) == set(spec_fields) - BUILT_FROM
    assert BUILT_FROM <= set(spec_fields)
    for name in STAGE_OPTIONS:
        assert name in cfg_fields, name
        assert cfg_fields[name].default == spec_fields[name].default, name
    # the built objects are AuditConfig's own
    assert {"renderer", "reference_renderer", "old_renderer", "new_renderer", "tokenizer", "jobs", "options", "spec"} <= set(cfg_fields)


def _changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, tuple):
        return ("x1", "x2")
    return "changed"


def test_build_config_copies_and_records_every_stage_option():
    changes = {f.name: _changed(f.default) for f in dataclasses.fields(RunSpec) if f.name in STAGE_OPTIONS}
    spec = RunSpec(**changes)
    cfg = build_config(spec)
    for name, value in changes.items():
        assert getattr(cfg, name) == value, name
        if name not in ("batch_rows", *EXECUTION_FIELDS):  # recorded with --jobs by the executor options
            assert cfg.options[name] == (list(value) if isinstance(value, tuple) else value), name
    assert cfg.spec is spec and cfg.renderer is not None and cfg.options["renderer"] == "json-tools"


def test_a_hand_built_config_takes_stage_options_by_keyword():
    cfg = AuditConfig(chunkings=("whole",), replay_timeout=0.2, old_parser="hermes")
    assert (cfg.chunkings, cfg.replay_timeout, cfg.old_parser, cfg.new_serializer, cfg.spec) == (("whole",), 0.2, "hermes", "client-fields", None)
    with pytest.raises(TypeError):
        AuditConfig(chat_template="x.jinja")  # a render option is built, not copied


def test_spec_from_options_shapes_command_line_values(tmp_path):
    spec = spec_from_options(
        chat_templates=["qwen*=a.jinja", "plain.jinja"], tokenizers=tmp_path, chunkings="whole, char,token",
        old_pythonpath=os.pathsep.join(["a", "b"]), new_parser="hermes",
    )
    assert spec.chat_template == "plain.jinja" and spec.chat_template_routes == ("qwen*=a.jinja",)
    assert spec.tokenizer == str(tmp_path) and spec.chunkings == ("whole", "char", "token")
    assert spec.old_pythonpath == (str(Path("a").resolve()), str(Path("b").resolve())) and spec.new_parser == "hermes"
    with pytest.raises(ValueError, match="a second plain --chat-template"):
        spec_from_options(chat_templates=["a.jinja", "b.jinja"])
    with pytest.raises(UsageError, match="the token chunking needs --tokenizer"):
        spec_from_options(chunkings="whole,token")
    with pytest.raises(TypeError):
        spec_from_options(no_such_option=1)


def test_parse_chunkings():
    assert parse_chunkings("recorded, whole,fixed-3,split-all,token") == ("recorded", "whole", "fixed-3", "split-all", "token")
    for bad, msg in (("", "empty"), ("whole,,char", "has an empty name"), ("whole,nope", "unknown chunking 'nope'")):
        with pytest.raises(ChunkingError, match=msg):
            parse_chunkings(bad)


def test_options_are_resolved_once_into_the_spec_and_the_config_refuses_them_after():
    """Issue #22: ``--jobs`` and the other options go into the frozen RunSpec; an AuditConfig built
    from it carries them and refuses to be given one afterwards (``cfg.jobs = 2`` raised nothing
    and was read in five places); its per-process state (built objects, executor stats) stays settable."""
    spec = RunSpec(jobs=3, parallel_ingest=True, overlap=False, batch_rows=7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.jobs = 2  # type: ignore[misc]
    cfg = build_config(spec)
    assert (cfg.jobs, cfg.parallel_ingest, cfg.overlap, cfg.batch_rows) == (3, True, False, 7)
    for name, value in (("jobs", 2), ("overlap", True), ("old_parser", "hermes"), ("batch_rows", 1), ("spec", None)):
        with pytest.raises(dataclasses.FrozenInstanceError, match=f"AuditConfig.{name} is an option"):
            setattr(cfg, name, value)
    assert cfg.jobs == 3 and cfg.spec is spec
    cfg.executor_stats["render"] = {"engine": "local"}  # what the executors went through: state, not options
    cfg.renderer = cfg.renderer
    # how it runs is not what it computes: the fingerprints hash the spec without it
    assert spec.results_key() == RunSpec(batch_rows=7).results_key() != RunSpec(batch_rows=8).results_key()
    # not recorded with the spec's options in run.json (the command line records them, as given)
    assert not {"jobs", "parallel_ingest", "overlap", "batch_rows"} & set(cfg.options)
    assert build_config(RunSpec(), recorded={"jobs": 4, "sides": {}}).options["jobs"] == 4


def test_the_cli_builds_its_config_once_with_jobs_in_the_spec(tmp_path, monkeypatch):
    """``replay audit --jobs 1 --batch-rows 5 --no-overlap`` puts them in the spec it builds the
    config from (one build_config call), and run.json records them as before."""
    import json

    import replay.runspec as runspec
    from typer.testing import CliRunner

    from replay.cli import app

    built = []
    real = runspec.build_config
    monkeypatch.setattr(runspec, "build_config", lambda spec, **kw: built.append(spec) or real(spec, **kw))
    out = tmp_path / "run"
    got = CliRunner().invoke(app, ["audit", str(ROOT / "samples" / "coding-agent.jsonl"), "--out", str(out), "--jobs", "1",
                                   "--batch-rows", "5", "--no-overlap"])
    assert got.exit_code == 0, got.output
    assert [(s.jobs, s.batch_rows, s.overlap, s.parallel_ingest) for s in built] == [(1, 5, False, False)]
    options = json.loads((out / "run.json").read_text(encoding="utf-8"))["options"]
    assert (options["jobs"], options["batch_rows"], options["overlap"]) == (1, 5, False) and "parallel_ingest" not in options
    keys = list(options)
    assert keys.index("sides") < keys.index("redact") < keys.index("jobs") < keys.index("batch_rows") < keys.index("overlap") < keys.index("capture_format")
