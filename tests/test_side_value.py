"""A side as one value (replay/side.py): ``--old``/``--new``/``--reference`` KEY=VALUE or a TOML
inline table, the sides file (``--sides``), the deprecated per-side flags folded into the same
value, run.json storing each value as given and ``replay show`` reading it back, and ``replay
audit --help`` grouped by purpose within two screens at 80 columns."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.side import SideError, SideSpec, from_json, load_sides_file, parse, resolve, spec_fields
from sides_data import SAMPLES, write_capture

runner = CliRunner()
OLD_T = SAMPLES / "templates" / "agent-old.jinja"
NEW_T = SAMPLES / "templates" / "agent-new.jinja"


def audit(capture: Path, out: Path, *args: str):
    return runner.invoke(app, ["audit", str(capture), "--out", str(out), "-q", *map(str, args)])


# --- the parser of side values -----------------------------------------------------------------


def test_key_value_items_split_at_commas_then_at_the_first_equals_sign():
    spec = parse("parser=my_parsers.py:Old=Hermes, serializer=model-dump ,chat-template=/t/a.jinja", "old")
    assert spec.items() == {"serializer": "model-dump", "chat_template": "/t/a.jinja", "parser": "my_parsers.py:Old=Hermes"}
    assert spec.to_json() == "parser=my_parsers.py:Old=Hermes, serializer=model-dump ,chat-template=/t/a.jinja"


def test_a_value_with_a_comma_is_given_as_a_toml_inline_table():
    spec = parse('{parser = "hermes", chat_template = "/p/a,b.jinja", python = "/v/bin/python", pythonpath = ["/x", "/y"]}', "new")
    assert spec.items() == {"chat_template": "/p/a,b.jinja", "parser": "hermes", "python": "/v/bin/python", "pythonpath": "/x:/y"}
    # the same comma in the KEY=VALUE spelling is an error that says how to write it
    with pytest.raises(SideError, match=r"--new: 'b.jinja' is not KEY=VALUE \(a value holding a comma needs the inline table"):
        parse("parser=hermes,chat_template=/p/a,b.jinja", "new")


def test_a_repeated_option_merges_its_values_and_keeps_them_as_given():
    spec = parse(["parser=vllm/hermes", "python=/venv/bin/python,pythonpath=/src"], "old")
    assert spec.items() == {"parser": "vllm/hermes", "python": "/venv/bin/python", "pythonpath": "/src"}
    assert spec.to_json() == ["parser=vllm/hermes", "python=/venv/bin/python,pythonpath=/src"]
    assert from_json(spec.to_json(), "old") == spec


def test_spec_fields_name_the_run_spec_fields_of_each_side():
    sides = {"old": parse("parser=sglang/qwen25,render_in=python,python=/p", "old"),
             "reference": parse("renderer=mistral-common:v7,serializer=as-sent", "reference")}
    assert spec_fields(sides) == {"old_parser": "sglang/qwen25", "old_python": "/p", "old_render_in": "python",
                                  "reference_serializer": "as-sent", "reference_encoder": "mistral-common:v7"}


BAD_VALUES = [
    (["--old", "parsr=hermes"], "--old: unknown key 'parsr'; the keys: preparer, serializer, chat_template"),
    (["--new", "parser=hermes,parser=qwen3"], "--new: key 'parser' given twice"),
    (["--new", "parser=hermes", "--new", "parser=qwen3"], "--new: key 'parser' given twice"),
    (["--old", "parser=hermes,chat_template=/p/a,b.jinja"], "--old: 'b.jinja' is not KEY=VALUE"),
    (["--old", '{parser = "hermes"'], "--old: '{parser = \"hermes\"' is not a TOML inline table"),
    (["--old", '{parser = hermes}'], "is not a TOML inline table"),
    (["--old", "{parser = 3}"], "--old: parser must be a string, not int 3"),
    (["--old", "parser="], "--old: parser is empty"),
    (["--old", ""], "--old: an empty value"),
    (["--reference", "python=/usr/bin/python3"], "--reference: python: the reference side runs in the audit's own process"),
    (["--new", "render_in=elsewhere"], "--new: render_in 'elsewhere' is not one of: audit, python"),
    (["--old", "render_in=python"], "--old: render_in=python needs python=INTERPRETER"),
    (["--new", "pythonpath=/src"], "--new: pythonpath needs python=INTERPRETER"),
    (["--reference", "chat_template=a.jinja,renderer=harmony"], "--reference: chat_template and renderer both name the side's renderer"),
    (["--old", "parser=hermes", "--old-parser", "qwen3"], "--old-parser and parser in the old side's value: give it once"),
    (["--reference", "renderer=harmony", "--reference-encoder", "harmony"], "--reference-encoder and renderer in the reference side's value"),
]


@pytest.mark.parametrize(("args", "message"), BAD_VALUES, ids=[" ".join(a) for a, _ in BAD_VALUES])
def test_a_bad_side_value_exits_2_in_one_line_naming_the_option(tmp_path: Path, args: list[str], message: str):
    capture = write_capture(tmp_path / "c.jsonl", [["read"]])
    result = audit(capture, tmp_path / "run", *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert result.stdout == "" and not (tmp_path / "run").exists()


# --- the sides file ----------------------------------------------------------------------------

SIDES_TOML = """
new = "pr-123"           # old, new, reference are names of [sides.NAME] tables

[sides.old]
chat_template = "{old}"
serializer = "model-dump"

[sides.pr-123]
chat_template = "{new}"
parser = "hermes"

[sides.v0-9]             # a side of the matrix not audited here: checked all the same
python = "/opt/v0.9/bin/python"
pythonpath = ["/src/a", "/src/b"]
"""


def test_a_sides_file_gives_the_same_spec_as_the_command_line(tmp_path: Path):
    path = tmp_path / "sides.toml"
    path.write_text(SIDES_TOML.format(old=OLD_T, new=NEW_T), encoding="utf-8")
    file = load_sides_file(path)
    assert file.chosen == {"old": "old", "new": "pr-123"}
    assert file.tables["v0-9"].items() == {"python": "/opt/v0.9/bin/python", "pythonpath": "/src/a:/src/b"}
    from_file = resolve({}, path)
    from_flags = resolve({"old": [f"chat_template={OLD_T},serializer=model-dump"], "new": [f"{{chat_template = '{NEW_T}', parser = 'hermes'}}"]})
    assert from_file == from_flags and set(from_file) == {"old", "new"}
    assert from_file["new"].to_json() == {"chat_template": str(NEW_T), "parser": "hermes"}  # the table, as given
    # a side on the command line replaces the file's
    assert resolve({"new": ["parser=qwen3"]}, path)["new"] == SideSpec(parser="qwen3")


@pytest.mark.parametrize(("text", "message"), [
    ("[sides.old]\nparser = \n", "not TOML: Invalid value (at line 2, column 10)"),
    ("[sides.old]\nparsr = 'hermes'\n", "[sides.old]: unknown key 'parsr'"),
    ("old = 'main'\n[sides.pr]\nparser = 'hermes'\n", "old = 'main' names no [sides.NAME] table (tables: pr)"),
    ("[sides.reference]\npython = '/p'\n", "[sides.reference]: python: the reference side runs in the audit's own process"),
    ("matrix = 1\n[sides.old]\nparser = 'hermes'\n", "unknown top-level key 'matrix'"),
    ("title = 'x'\n", "unknown top-level key 'title'"),
    ("", "no [sides.NAME] table"),
])
def test_a_bad_sides_file_exits_2_naming_the_file(tmp_path: Path, text: str, message: str):
    path = tmp_path / "sides.toml"
    path.write_text(text, encoding="utf-8")
    capture = write_capture(tmp_path / "c.jsonl", [["read"]])
    result = audit(capture, tmp_path / "run", "--sides", path)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --sides {path}") and message in lines[0], result.stderr


# --- run.json and replay show ------------------------------------------------------------------


def _prompt_lines(run: Path) -> list[str]:
    result = runner.invoke(app, ["show", "x0", "--run", str(run)])
    assert result.exit_code == 0, result.output
    section = result.output.split("== prompts (re-rendered from run.json's options)\n")[1].split("\n\n")[0]
    return section.splitlines()


@pytest.mark.parametrize("how", ["key-value", "inline-table", "sides-file", "deprecated-flags"])
def test_run_json_keeps_each_side_as_given_and_show_renders_it_again(tmp_path: Path, how: str):
    """Each spelling of per-side chat templates: run.json ``options.sides`` holds the values as
    given, and ``replay show`` re-renders each side from them to the prompt the run judged
    (it rebuilt the sides from the render words, ``chat-template:agent-old.jinja``, which lost the
    template: the old and new prompts it showed were json-tools renders)."""
    capture = write_capture(tmp_path / "c.jsonl", [["read"]])
    file = tmp_path / "sides.toml"
    file.write_text(f"[sides.old]\nchat_template = '{OLD_T}'\n[sides.new]\nchat_template = '{NEW_T}'\n", encoding="utf-8")
    args, stored = {
        "key-value": (["--old", f"chat_template={OLD_T}", "--new", f"chat_template={NEW_T}"],
                      {"old": f"chat_template={OLD_T}", "new": f"chat_template={NEW_T}"}),
        "inline-table": (["--old", f"{{chat_template = '{OLD_T}'}}", "--new", f"chat_template={NEW_T}"],
                         {"old": f"{{chat_template = '{OLD_T}'}}", "new": f"chat_template={NEW_T}"}),
        "sides-file": (["--sides", file], {"old": {"chat_template": str(OLD_T)}, "new": {"chat_template": str(NEW_T)}}),
        "deprecated-flags": (["--old-chat-template", OLD_T, "--new-chat-template", NEW_T],
                             {"old": {"chat_template": str(OLD_T)}, "new": {"chat_template": str(NEW_T)}}),
    }[how]
    run = tmp_path / "run"
    result = audit(capture, run, *args)
    assert result.exit_code == 0, result.output
    assert json.loads((run / "run.json").read_text())["options"]["sides"] == stored
    lines = _prompt_lines(run)
    assert [line.split()[:3] for line in lines] == [["old", "model-dump", "chat-template:agent-old.jinja:"],
                                                   ["new", "client-fields", "chat-template:agent-new.jinja:"],
                                                   ["reference", "as-sent", "json-tools:"]]
    assert not any("not the judged prompt" in line for line in lines), lines
    if how == "deprecated-flags":
        assert result.stderr.splitlines() == ["warning: --old-chat-template is deprecated; give --old chat_template=VALUE",
                                              "warning: --new-chat-template is deprecated; give --new chat_template=VALUE"]
    else:
        assert result.stderr == ""


def test_show_reads_an_interpreter_side_back_and_renders_it_here(tmp_path: Path):
    """An out-of-process side's value as given (python, pythonpath): ``show`` keeps its other keys
    and renders it in this process."""
    capture = write_capture(tmp_path / "c.jsonl", [["read"]])
    run = tmp_path / "run"
    value = f'{{python = "{sys.executable}", pythonpath = ["{tmp_path}"], chat_template = "{OLD_T}"}}'
    assert audit(capture, run, "--old", value).exit_code == 0
    assert json.loads((run / "run.json").read_text())["options"]["sides"] == {"old": value}
    lines = _prompt_lines(run)
    assert lines[0].split()[:3] == ["old", "model-dump", "chat-template:agent-old.jinja:"]
    assert not any("not the judged prompt" in line for line in lines), lines


# --- help ----------------------------------------------------------------------------------------


def test_audit_help_is_grouped_and_fits_two_screens_at_80_columns():
    result = runner.invoke(app, ["audit", "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    text = result.output
    lines = text.splitlines()
    assert len(lines) <= 102 and max(map(len, lines)) <= 80 and "…" not in text
    sections = [line[:-1] for line in lines if line and not line.startswith(" ") and line.endswith(":")]
    assert sections == ["Arguments", "Captures", "Sides", "Checks", "Output", "Scale"]
    sides = text.split("\nSides:\n")[1].split("\n\n")[0]
    assert [line.split()[0] for line in sides.splitlines() if line.startswith("  --")] == [
        "--old", "--new", "--reference", "--sides", "--chat-template", "--tokenizer", "--renderer", "--parser", "--date"]
    for flag in ("--old-parser", "--new-serializer", "--reference-chat-template", "--old-python", "--old-render-in", "--reference-encoder"):
        assert flag not in text  # deprecated: hidden


def test_render_and_stream_again_keep_the_other_stages_side_keys(tmp_path: Path):
    """``replay stream --old parser=...`` on an audited run: the old side's chat template (a render
    key) stays in run.json ``options.sides``, so ``replay show`` still renders the judged prompt."""
    capture = write_capture(tmp_path / "c.jsonl", [["read"]])
    run = tmp_path / "run"
    assert audit(capture, run, "--old", f"chat_template={OLD_T}").exit_code == 0

    def sides() -> dict:
        return json.loads((run / "run.json").read_text())["options"]["sides"]

    result = runner.invoke(app, ["stream", "--run", str(run), "-q", "--new", "parser=hermes"])
    assert result.exit_code == 0, result.output
    assert sides() == {"old": f"chat_template={OLD_T}", "new": "parser=hermes"}
    result = runner.invoke(app, ["stream", "--run", str(run), "-q", "--old", "parser=hermes"])
    assert result.exit_code == 0, result.output
    assert sides() == {"old": {"chat_template": str(OLD_T), "parser": "hermes"}}  # new: the stream's default again
    lines = _prompt_lines(run)
    assert lines[0].split()[:3] == ["old", "model-dump", "chat-template:agent-old.jinja:"]
    assert not any("not the judged prompt" in line for line in lines), lines
    result = runner.invoke(app, ["render", "--run", str(run), "-q", "--new", f"chat_template={NEW_T}"])
    assert result.exit_code == 0, result.output
    assert sides() == {"old": {"parser": "hermes"}, "new": f"chat_template={NEW_T}"}
