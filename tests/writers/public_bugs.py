"""A capture (format v1) of the public-bug cases, written at test time from ``../shared``.

:func:`write_public_bugs_capture` reads ``../shared/cases/public-bugs.jsonl`` (one case a line:
``input.parser`` the model family, ``input.tools``, ``input.raw_output`` the raw completion with its
special tokens, ``input.chunks`` the deltas as the faulty server streamed them) and writes one
exchange per case that carries a raw completion: a streamed chat.completions request declaring
the case's tools, under a served model name that ``replay.parsers.family_for_model`` maps to the
case's family, and ``server.output_text`` / ``server.steps`` holding the completion and its
recorded chunking. The project keeps none of the cases' text: the capture exists only in a test's
temporary folder.

Cases written: the parsing cases (B01 ... B53) whose family replay knows. Left out, each with its
reason in :func:`skipped_cases`: rendering cases (no ``raw_output``) and families replay has no
parser for (``xlam``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from replay.parsers import family_for_model, get_parser

#: family (replay's canonical parser name) -> a served model name that picks it (``replay formats``
#: prints the model-name table these names are checked against by :func:`model_for_family`).
MODEL_FOR_FAMILY: dict[str, str] = {
    "hermes": "Qwen/Qwen2.5-7B-Instruct",
    "qwen3_coder": "Qwen/Qwen3-Coder-30B-A3B-Instruct",
    "deepseek_v3": "deepseek-ai/DeepSeek-V3-0324",
    "deepseek_v31": "deepseek-ai/DeepSeek-V3.1",
    "deepseek_v32": "deepseek-ai/DeepSeek-V3.2",
    "kimi_k2": "moonshotai/Kimi-K2-Instruct",
    "glm45": "zai-org/GLM-4.5",
    "harmony": "openai/gpt-oss-20b",
    "gemma4": "google/gemma-4-27b-it",
    "llama3_json": "meta-llama/Llama-3.1-8B-Instruct",
    "pythonic": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "mistral": "mistralai/Mistral-Small-3.2-24B-Instruct-2506",
    "granite": "ibm-granite/granite-3.1-8b-instruct",
    "minimax_m2": "MiniMaxAI/MiniMax-M2",
}

#: The user turn every exchange carries (neutral; the cases hold no conversation).
USER_TEXT = "Please use the tools to answer."


def model_for_family(family: str) -> str:
    """The served model name for replay family ``family`` (a canonical parser name).

    Raises KeyError when :data:`MODEL_FOR_FAMILY` has no name for it, and AssertionError when the
    name does not map back to ``family`` through replay's model-name table (the table changed).
    """
    model = MODEL_FOR_FAMILY[family]
    assert family_for_model(model) == family, f"{model!r} maps to {family_for_model(model)!r}, not {family!r}"
    return model


def read_cases(cases: Path) -> list[dict[str, Any]]:
    """Every case of the JSON-lines file ``cases``, in file order. Raises ValueError naming the file
    and line of a line that is not a JSON object."""
    out = []
    for n, line in enumerate(cases.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            case = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{cases}:{n}: not JSON: {exc}") from None
        if not isinstance(case, dict):
            raise ValueError(f"{cases}:{n}: a case is a JSON object, got {type(case).__name__}")
        out.append(case)
    return out


def family_of(case: dict[str, Any]) -> str | None:
    """The replay family (canonical parser name) of a parsing case, or None (a rendering case, or a
    family replay has no parser for)."""
    inp = case.get("input") or {}
    if "raw_output" not in inp or not inp.get("parser"):
        return None
    try:
        return get_parser(inp["parser"]).name
    except Exception:  # an unknown family name (xlam): replay has no parser for it
        return None


def skipped_cases(cases: Path) -> dict[str, str]:
    """Case id -> why :func:`write_public_bugs_capture` leaves it out."""
    out = {}
    for case in read_cases(cases):
        inp = case.get("input") or {}
        if "raw_output" not in inp:
            out[case["id"]] = "a rendering case (no raw completion)"
        elif family_of(case) is None:
            out[case["id"]] = f"replay has no parser for family {inp.get('parser')!r}"
    return out


def exchange_of(case: dict[str, Any], n: int) -> dict[str, Any]:
    """The v1 record of parsing case ``case`` (the ``n``-th written: it sets the timestamp). Its id
    is the case id; the recorded steps are the case's chunks (the whole completion as one step
    when the case records none). Raises ValueError when the chunks do not join to the
    completion."""
    inp = case["input"]
    family = family_of(case)
    if family is None:
        raise ValueError(f"case {case.get('id')}: not a parsing case of a family replay knows")
    model = model_for_family(family)
    text = inp["raw_output"]
    steps = list(inp.get("chunks") or [text])
    if "".join(steps) != text:
        raise ValueError(f"case {case['id']}: its chunks do not join to its raw_output")
    return {
        "id": case["id"],
        "ts": f"2026-12-01T00:{n // 60:02d}:{n % 60:02d}Z",
        "route": "chat.completions",
        "model": model,
        "request": {
            "model": model,
            "messages": [{"role": "user", "content": USER_TEXT}],
            "tools": inp.get("tools") or [],
            "stream": True,
        },
        "server": {"output_text": text, "steps": steps},
    }


def write_public_bugs_capture(cases: Path, out: Path, *, ids: list[str] | None = None) -> Path:
    """Write the capture of the parsing cases of ``cases`` (``public-bugs.jsonl``) to ``out`` (a
    ``.jsonl`` file, its folder created); returns ``out``.

    ``ids``: only these case ids (default every case :func:`skipped_cases` does not leave out).
    Raises FileNotFoundError when ``cases`` is missing, ValueError for a bad case line or an id of
    ``ids`` that is not a written case.
    """
    records = []
    for case in read_cases(cases):
        if family_of(case) is None or (ids is not None and case["id"] not in ids):
            continue
        records.append(exchange_of(case, len(records)))
    if ids is not None:
        missing = sorted(set(ids) - {r["id"] for r in records})
        if missing:
            raise ValueError(f"{cases}: no parsing case {', '.join(missing)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return out
