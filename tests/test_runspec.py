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
from replay.runspec import AuditConfig as PipelineAuditConfig
from replay.runspec import BUILT_FROM, STAGE_OPTIONS, AuditConfig, RunSpec, build_config, spec_from_options
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
        if name != "batch_rows":  # recorded with --jobs by the executor options
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
