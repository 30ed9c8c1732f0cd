"""The conformance table: replay's built-in parsers run on the upstream tool-parser test cases.

Cases (one JSON object a line, see README.md):

* ``tests/conformance/{vllm,sglang,trtllm}.jsonl``: transcribed from those projects' test suites;
* llama.cpp: the ``tests/test-chat.cpp`` records of the shared corpus
  (``../shared/corpus/outputs/*.jsonl``, read in place, never copied), mapped to replay's families
  by :data:`LLAMA_FORMATS`; absent corpus -> no llama.cpp rows.

Each case is run through the family's built-in parser (:func:`replay.parsers.get_parser`) as a
whole-text parse and streamed under :data:`CHUNKINGS` (assembled as a client does,
:func:`replay.stream.replay_stream`). A run *agrees* when its calls have the expected names in
order, each with the same JSON arguments (:func:`replay.stream.json_key`: key order and spacing
ignored, ``true`` is not ``1``), and its content equals the expected content (when the case states
one) after stripping leading/trailing whitespace (servers differ in trimming; None is ``""``), or
contains ``content_contains``. A case agrees when its whole-text run and every streamed run agree.

``python -m tests.conformance.table`` prints the agreement per family and per source (markdown);
``--cases`` lists each disagreeing case with what differed.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.parsers import get_parser
from replay.parsers._reasoning import THINK
from replay.stream import _strict, json_key, replay_stream, split

HERE = Path(__file__).resolve().parent
#: the shared corpus beside the checkout (``../shared``), or ``$REPLAY_SHARED``
SHARED_OUTPUTS = Path(os.environ.get("REPLAY_SHARED") or HERE.parents[2] / "shared") / "corpus" / "outputs"
SOURCES = ("vllm", "sglang", "trtllm", "llama.cpp")
#: the streamed runs of every case: one delta, every character, a seeded random split, 3-char steps
CHUNKINGS = ("whole", "char", "random-0", "fixed-3")

#: shared-corpus file (llama.cpp test-chat.cpp records) -> replay family
LLAMA_FORMATS = {
    "hermes.jsonl": "hermes",
    "qwen3_coder_xml.jsonl": "qwen3_coder",
    "llama3_json.jsonl": "llama3_json",
    "lfm2_pythonic.jsonl": "pythonic",
    "mistral.jsonl": "mistral",
    "deepseek_r1_v3.jsonl": "deepseek_v3",
    "deepseek_v3_1.jsonl": "deepseek_v31",
    "deepseek_v3_2_dsml.jsonl": "deepseek_v32",
    "kimi_k2.jsonl": "kimi_k2",
    "glm45.jsonl": "glm45",
    "gpt_oss_harmony.jsonl": "harmony",
    "gemma4.jsonl": "gemma4",
    "minimax_m2.jsonl": "minimax_m2",
    "granite.jsonl": "granite",
    "seed_oss.jsonl": "seed_oss",
}


def _tool(tool_name: str, /, **props: str) -> dict:
    return {"type": "function", "function": {"name": tool_name, "parameters": {"type": "object", "properties": {k: {"type": t} for k, t in props.items()}}}}


#: llama.cpp's test tools (tests/test-chat.cpp) whose declared types decide expected values
LLAMA_TOOLS = {
    "special_function_tool": _tool("special_function", arg1="integer"),
    "special_function_tool_with_optional_param": _tool("special_function_with_opt", arg1="integer", arg2="integer"),
    "python_tool": _tool("python", code="string"),
    "html_tool": _tool("html", markup="string"),
    "todo_list": _tool("todo_list", todos="array"),
    "edit_tool": _tool("edit", filename="string", oldString="string", newString="string"),
    "magic_tool": _tool("magic", name="string", ref="string"),
    "magic_int_tool": _tool("magic_int", ref="integer", name="string"),
    "amount_tool": _tool("amount", orig="number"),
    "imaginary_number_tool": _tool("imaginary_number", number="object"),
    "string_param_tool": _tool("string_param", text="string"),
    "quoted_unquoted_tool": _tool("quoted_unquoted", quoted="string", unquoted="string"),
    "empty_args_tool": _tool("empty_args"),
}

#: reasoning tags per family where they are not ``<think>``/``</think>`` (None: the family's
#: prompt never opens a reasoning section), and the families whose llama.cpp thinking flag does not
#: mean the prompt opened it (the rules of the family test modules' corpus checks)
_THINK_TAGS: dict[str, tuple[str, str] | None] = {
    "mistral": ("[THINK]", "[/THINK]"), "seed_oss": ("<seed:think>", "</seed:think>"),
    "harmony": None, "gemma4": None, "llama3_json": None,
}
_NO_FLAG = {"mistral", "llama3_json"}


def _prompt_opened(family: str, text: str, ctx: dict) -> bool:
    """Whether the llama.cpp test's prompt opened the reasoning section: thinking enabled in the
    test context, or the text closes a section it never opened."""
    tags = _THINK_TAGS.get(family, THINK)
    if tags is None:
        return False
    if family not in _NO_FLAG and ctx.get("enable_thinking") == "true":
        return True
    return tags[1] in text and tags[0] not in text


def _llama_case(fname: str, line: int, rec: dict) -> dict | None:
    """A conformance case from a shared-corpus llama.cpp record, or None when the record states
    nothing checkable (partial stream, expected arguments only as partial JSON, no expectation)."""
    calls = rec.get("expected_calls")
    if rec.get("partial") or any("arguments" not in c for c in calls or []):
        return None
    if calls is None and rec.get("expected_content") is None:
        return None
    if "continue_final_message" in json.dumps(rec.get("test_context") or {}):
        return None  # the text continues a prefilled message; expected values include the prefill
    ctx = rec.get("test_context") or {}
    tools = [LLAMA_TOOLS[t] for t in ctx.get("tools", []) if t in LLAMA_TOOLS] or None
    family = LLAMA_FORMATS[fname]
    text = rec["text"]
    source = rec.get("source", "")
    return {
        "id": f"llama.cpp-{fname.removesuffix('.jsonl')}-{line + 1:03d}",
        "source": "llama.cpp",
        "cite": source,
        "family": family,
        "text": text,
        "tools": tools,
        "reasoning_open": _prompt_opened(family, text, ctx),
        "expected": {"calls": [{"name": c["name"], "arguments": c["arguments"]} for c in calls or []],
                     **({"content": rec["expected_content"]} if rec.get("expected_content") is not None else {})},
    }


def load_cases(sources: tuple[str, ...] = SOURCES) -> list[dict]:
    """Every case of ``sources``, in file order: the transcribed JSON lines and, for
    ``llama.cpp``, the shared-corpus records (:func:`_llama_case`). Raises ValueError naming the
    file and line of a line that is not JSON."""
    cases: list[dict] = []
    for src in sources:
        if src == "llama.cpp":
            if not SHARED_OUTPUTS.is_dir():
                continue
            for fname in LLAMA_FORMATS:
                path = SHARED_OUTPUTS / fname
                if not path.exists():
                    continue
                for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
                    if line.strip():
                        rec = json.loads(line)
                        if "llama.cpp" in rec.get("source", ""):
                            c = _llama_case(fname, i, rec)
                            if c is not None:
                                cases.append(c)
            continue
        path = HERE / f"{src}.jsonl"
        if not path.exists():
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                cases.append(json.loads(line))
            except ValueError as e:
                raise ValueError(f"{path}:{i}: not JSON: {e}") from None
    return cases


@dataclass
class Outcome:
    """One case's result: ``whole`` / ``stream`` the differences of the whole-text run and of the
    streamed runs (empty lists when they agree; a streamed difference names its chunking)."""

    case: dict
    whole: list[str]
    stream: list[str]

    @property
    def agrees(self) -> bool:
        return not self.whole and not self.stream


def _differences(got_calls: list[tuple[str | None, str]], content: str, expected: dict) -> list[str]:
    want = expected["calls"]
    out = []
    names = [n for n, _ in got_calls]
    if names != [c["name"] for c in want]:
        out.append(f"names {names} != {[c['name'] for c in want]}")
    else:
        for k, ((_, args), w) in enumerate(zip(got_calls, want)):
            if json_key(args) != _strict(w["arguments"]):
                out.append(f"call {k} arguments {args} != {json.dumps(w['arguments'], ensure_ascii=False)}")
    if "content" in expected and (content or "").strip() != (expected["content"] or "").strip():
        out.append(f"content {content!r} != {expected['content']!r}")
    if "content_contains" in expected and expected["content_contains"] not in content:
        out.append(f"content {content!r} lacks {expected['content_contains']!r}")
    return out


def run_case(case: dict) -> Outcome:
    """Run ``case`` through its family's built-in parser, whole-text and under every
    :data:`CHUNKINGS`; a parser exception is a difference (its type and message)."""
    cls = get_parser(case["family"])
    tools, ro = case.get("tools"), bool(case.get("reasoning_open"))
    text = case["text"]
    try:
        parser = cls(tools, reasoning_open=True) if ro else cls(tools)
        r = parser.parse(text)
        whole = _differences([(c.name, c.arguments) for c in r.calls], r.content, case["expected"])
    except Exception as e:  # noqa: BLE001 - a crash is an outcome of the case
        whole = [f"parse raised {type(e).__name__}: {e}"]
    stream: list[str] = []
    for ch in CHUNKINGS:
        try:
            got = replay_stream(cls, tools, split(text, ch, markers=cls.markers), reasoning_open=ro)
            diffs = _differences([(c.name, c.arguments) for c in got.calls], got.content, case["expected"])
        except Exception as e:  # noqa: BLE001
            diffs = [f"raised {type(e).__name__}: {e}"]
        stream += [f"{ch}: {d}" for d in diffs]
    return Outcome(case, whole, stream)


def run_all(cases: list[dict] | None = None) -> list[Outcome]:
    """:func:`run_case` on every case of :func:`load_cases` (or ``cases``)."""
    return [run_case(c) for c in (load_cases() if cases is None else cases)]


def table(outcomes: list[Outcome]) -> str:
    """Markdown: per family (rows) and source (columns) ``agreeing/cases``, with totals; then the
    whole-text and streamed agreement per source."""
    cell: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for o in outcomes:
        for key in ((o.case["family"], o.case["source"]), (o.case["family"], "all"), ("all", o.case["source"]), ("all", "all")):
            cell[key]["n"] += 1
            cell[key]["ok"] += o.agrees
            cell[key]["whole"] += not o.whole
            cell[key]["stream"] += not o.stream
    srcs = [s for s in SOURCES if cell[("all", s)]["n"]]
    fams = sorted({o.case["family"] for o in outcomes})

    def fmt(c: Counter) -> str:
        return f"{c['ok']}/{c['n']} ({100 * c['ok'] / c['n']:.0f}%)" if c["n"] else "-"

    lines = ["| family | " + " | ".join(srcs) + " | all |", "|---" * (len(srcs) + 2) + "|"]
    for f in [*fams, "all"]:
        lines.append(f"| {f} | " + " | ".join(fmt(cell[(f, s)]) for s in [*srcs, "all"]) + " |")
    lines += ["", "| source | cases | whole-text agrees | streamed agrees (all chunkings) | both |", "|---|---|---|---|---|"]
    for s in [*srcs, "all"]:
        c = cell[("all", s)]
        lines.append(f"| {s} | {c['n']} | {c['whole']} | {c['stream']} | {c['ok']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.conformance.table", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", action="store_true", help="list every disagreeing case and what differed")
    ap.add_argument("--family", help="only this family")
    args = ap.parse_args(argv)
    cases = [c for c in load_cases() if not args.family or c["family"] == args.family]
    outcomes = run_all(cases)
    print(table(outcomes))
    if args.cases:
        for o in outcomes:
            if not o.agrees:
                print(f"\n{o.case['id']} ({o.case.get('test') or o.case.get('cite')})")
                for d in (o.whole + o.stream)[:4]:
                    print("   ", d[:300])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
