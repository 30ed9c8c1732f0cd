"""``replay repro`` in this interpreter: ddmin, atoms, the judge's guards, masking and the written
files, on a plugin parser with a planted streaming bug (the real SGLang releases:
tests/test_repro_sglang.py).

The planted parser (:data:`PLUGIN`) is the built-in Hermes parser except that ``feed`` drops the
call deltas of a step that holds a whole ``<tool_call>...</tool_call>`` block whose text has the
word ``Oslo`` (a dropped call under the ``whole`` chunking, for that text only): a failure that
needs one exact word, so masking it makes the failure go away.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.repro.judge import Candidate, ReproError
from replay.repro.run import repro
from replay.repro.shrink import Budget, atoms, ddmin, from_atoms
from replay.repro.testfile import Expected, write_test

PLUGIN = '''
from replay.parsers import HermesParser


class DropsOsloCalls(HermesParser):
    name = "hermes"

    def feed(self, delta):
        out = super().feed(delta)
        if "<tool_call>" in delta and "</tool_call>" in delta and "Oslo" in delta:
            out.calls = []  # the planted bug
        return out
'''

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "read", "description": "Read a file.",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
]
TEXT = 'Let me look that up for you.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}\n</tool_call>'


def _capture(path: Path) -> Path:
    rec = {
        "id": "ex-1",
        "route": "chat.completions",
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "request": {"model": "Qwen/Qwen2.5-7B-Instruct", "stream": True, "tools": TOOLS,
                    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Oslo please"},
                                 {"role": "assistant", "content": "Sure."}, {"role": "user", "content": "Now, Oslo"}]},
        "server": {"output_text": TEXT, "steps": [TEXT[:40], TEXT[40:]]},
    }
    path.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("repro")
    plugin = tmp / "planted.py"
    plugin.write_text(PLUGIN, encoding="utf-8")
    out = tmp / "run"
    got = CliRunner().invoke(app, ["audit", str(_capture(tmp / "cap.jsonl")), "--out", str(out), "--quiet",
                                   "--old", f"parser={plugin}:DropsOsloCalls", "--jobs", "1"])
    assert got.exit_code == 0, got.output
    return out


def test_ddmin_is_one_minimal_and_deterministic():
    calls = []

    def fails(lists):
        calls.append(len(lists))
        return [3 in x and 7 in x for x in lists]

    assert ddmin(list(range(10)), fails, Budget(60)) == [3, 7]
    first = list(calls)
    calls.clear()
    assert ddmin(list(range(10)), fails, Budget(60)) == [3, 7] and calls == first


def test_atoms_keep_markers_whole_and_the_cut():
    deltas = ["ab<tool_", "call>x</tool_call>", "yz"]
    got = atoms(deltas, ["<tool_call>", "</tool_call>"])
    # the marker cut across two deltas is chars; the whole one is one atom
    assert ("</tool_call>", 1) in got and ("<tool_call>", 0) not in got and ("<", 0) in got
    kept = [a for i, a in enumerate(got) if i != 0 and a != ("y", 2)]
    c = from_atoms(kept, [])
    assert c.deltas == ("b<tool_", "call>x</tool_call>", "z") and c.text == "b<tool_call>x</tool_call>z"


def test_repro_shrinks_keeps_the_word_it_needs_and_proves(run, tmp_path):
    got = repro(run, "ex-1", "dropped-call", fixed="reference", out=tmp_path)
    s = got.shrunk.sizes()
    assert got.side == "old" and s == {"chars": [127, 75], "deltas": [1, 1], "tools": [2, 1], "messages": [4, 1]}
    # ddmin over chars, markers whole: the text before the call, the spaces and the argument
    # names go; the call, its name (the reference's calls are kept) and the word the bug needs stay
    assert got.shrunk.after.text == '<tool_call>{"name":"get_weather","arguments":{"":"Oslo","":""}}</tool_call>'
    # masking every word makes the failure go away: the one word it needs is kept and said
    assert got.shrunk.masked and got.shrunk.exact_text == ["Oslo"]
    assert "Oslo" in got.shrunk.after.text and "get_weather" in got.shrunk.after.text
    assert got.broken_proof.failed and got.fixed_proof.passed
    path, fixed_path = got.files  # the plugin's file and the built-in's (another parser: another file)
    assert fixed_path.name == path.name.replace(".py", "_protocol.py")
    src = path.read_text(encoding="utf-8")
    assert "DropsOsloCalls" in src and "PARSER = 'hermes'" in fixed_path.read_text(encoding="utf-8")
    ast.parse(src)
    tree = {n.targets[0].id: ast.literal_eval(n.value) for n in ast.parse(src).body if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id in ("DELTAS", "EXPECTED_CALLS", "TOOLS")}
    assert tree["EXPECTED_CALLS"] == [["get_weather", {"": ""}]]  # the reference's parse (the last of two equal keys)
    # one tool left, without the description and the property the failure does not need
    assert tree["TOOLS"] == [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}]
    assert "Weather of a city" not in src and "look that up" not in src  # the user text is masked
    assert any("Oslo" in d and "<tool_call>" in d and "</tool_call>" in d for d in tree["DELTAS"])


def test_keep_text_writes_the_case_as_captured(run, tmp_path):
    got = repro(run, "ex-1", "dropped-call", out=tmp_path, keep_text=True)
    assert not got.shrunk.masked and got.shrunk.exact_text == [] and "  user text as captured (--keep-text)" in got.lines()
    assert got.broken_proof.failed and got.fixed_proof.passed


def test_a_side_that_does_not_fail_is_refused(run, tmp_path):
    with pytest.raises(ReproError, match="the new side does not fail dropped-call"):
        repro(run, "ex-1", "dropped-call", side="new", out=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cli_repro_json(run, tmp_path):
    got = CliRunner().invoke(app, ["repro", str(run), "ex-1", "--check", "dropped-call", "--out", str(tmp_path), "--format", "json", "--max-seconds", "60"])
    assert got.exit_code == 0, got.output
    data = json.loads(got.output)
    assert data["marker_chars"] == len("<tool_call>") + len("</tool_call>")
    assert data["broken_result"].startswith("fails") and data["fixed_result"].startswith("passes") and data["exact_text"] == ["Oslo"]
    bad = CliRunner().invoke(app, ["repro", str(run), "ex-1", "--check", "null-leak"])
    assert bad.exit_code == 2 and "not a stream check" in bad.output


def test_vllm_style_file_text(tmp_path):
    case = {"check": "dropped-call", "exchange_id": "x", "broken": "vllm/hermes in A", "fixed": "vllm/hermes in B",
            "sizes": {"chars": [90, 40], "deltas": [9, 2], "tools": [2, 1]}, "masked": True,
            "deltas": ['<tool_call>{"name": "f", ', '"arguments": {}}</tool_call>'], "tools": TOOLS[:1], "parser": "hermes", "model": "m",
            "special_tokens": ["<tool_call>", "</tool_call>", "<|im_end|>"]}
    path = write_test(tmp_path / "test_v.py", "vllm", case, Expected((("f", {}),), "", ("<tool_call>",), False))
    src = path.read_text(encoding="utf-8")
    tree = ast.parse(src)
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert names == ["_arguments", "_offline_tokenizer", "tokenizer", "parser", "_request", "_finishing_step", "_ids", "test_streaming_calls"]
    # the last delta is finished as the server finishes it (remaining arguments, engine parsers' flush)
    test_fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "test_streaming_calls")
    assert [n.func.id for n in ast.walk(test_fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "_finishing_step"] == ["_finishing_step"]
    assert "finish_streaming()" in src
    assert "ToolParserManager.get_tool_parser(PARSER)" in src and "extract_tool_calls_streaming(" in src
    assert "pytestmark = pytest.mark.cpu_test" in src
    # the tokenizer is built here (byte-level, the family's markers added), never downloaded by the model's name
    assert "get_tokenizer(" not in src and "from_pretrained(path, local_files_only=True)" in src
    assert "delta_token_ids=delta_ids" in src  # the parser sees the markers' ids, as on the server
    consts = {n.targets[0].id: ast.literal_eval(n.value) for n in tree.body
              if isinstance(n, ast.Assign) and n.targets[0].id in ("DELTAS", "EXPECTED_CALLS", "PARSER", "SPECIAL_TOKENS")}
    assert consts == {"PARSER": "hermes", "DELTAS": case["deltas"], "EXPECTED_CALLS": [["f", {}]],
                      "SPECIAL_TOKENS": ["<tool_call>", "</tool_call>", "<|im_end|>"]}
    whole = write_test(tmp_path / "test_w.py", "vllm", case, Expected((("f", {}),), "", (), False, whole=True)).read_text(encoding="utf-8")
    assert "def test_whole_text_calls(parser)" in whole and "extract_tool_calls_streaming" not in whole
    # the built tokenizer (transformers and tokenizers, as a vLLM venv has them): each marker one special id
    ns: dict = {"os": os}  # the file's constants and helpers, without its vLLM imports
    exec(compile(src.split("@pytest.fixture", 1)[0].split("pytestmark", 1)[1].split("\n", 1)[1], "t", "exec"), ns)
    tok = ns["_offline_tokenizer"]()
    vocab = tok.get_vocab()
    ids = tok.encode("a<tool_call>b", add_special_tokens=False)
    assert len(ids) == 3 and ids[1] == vocab["<tool_call>"] and tok.decode(ids) == "a<tool_call>b"


def test_the_time_bound_stops_shrinking_and_says_so(run, tmp_path):
    """With no time left the captured case itself is written (still proven), marked not 1-minimal."""
    got = repro(run, "ex-1", "dropped-call", out=tmp_path, seconds=1e-9)
    assert got.shrunk.timed_out and got.shrunk.sizes()["chars"] == [127, 127]
    assert got.broken_proof.failed and got.fixed_proof.passed
    assert "(stopped at the time bound: not 1-minimal)" in got.lines()[0]
