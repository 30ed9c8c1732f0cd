"""Write the Batch API fixtures with the real ``openai`` and ``anthropic`` SDKs (tests/data/captures/{openai-batch,anthropic-batch}/).

Run: ``python tests/writers/batch_writer.py OUT_ROOT`` with the ``writers`` extra installed. No
network: each request goes through the SDK to :class:`fake_openai.FakeOpenAI` on 127.0.0.1,
and the SDK's parsed response becomes the result line, as the Batch API would write it. Batches
do not stream, so every scenario of :data:`scenarios.SCENARIOS` is sent whole.

``OUT_ROOT/openai-batch/files``: TWO OpenAI batches in one folder, as a user keeps them: input
files named as uploaded (``weather-requests.jsonl``, ``mixed-requests.jsonl``: lines
``{custom_id, method, url, body}``) and outputs named as OpenAI names the download
(``batch_<id>_output.jsonl``: lines ``{id, custom_id, response: {status_code, request_id, body},
error}``; ``body`` is the SDK's ``ChatCompletion`` ``model_dump``). Both batches use the custom_ids
``request-1`` and ``request-2`` (as users do); they differ in model (``gpt-4o-mini``,
``gpt-4.1-mini``). The first batch holds the tool call and the history, the second the parallel
calls and the text answer.

``OUT_ROOT/anthropic-batch/files``: one Message Batch: ``message-batch-create.json`` (the create
call's body ``{"requests": [{custom_id, params}]}``, typed by
``anthropic.types.messages.batch_create_params``) and ``msgbatch_<id>_results.jsonl`` (one
``MessageBatchIndividualResponse(...).model_dump(mode="json")`` a line, result
``MessageBatchSucceededResult``).

Each ``OUT_ROOT/<source>/expected.jsonl``: per request, what the fake server received (the body
as sent) and sent (:meth:`fake_openai.FakeOpenAI.expected`'s record), with ``name``, ``batch``
(the output file), ``input`` (OpenAI: the input file) and ``custom_id``. One server answers the
OpenAI batches' requests, then the Anthropic batch's (:data:`SCRIPT`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fake_openai import FakeOpenAI
from scenarios import SCENARIOS, TOOLS

import anthropic
import openai
from anthropic.types.messages import MessageBatchIndividualResponse, MessageBatchSucceededResult, batch_create_params

OPENAI_BATCHES = [
    ("batch_6931a2f0c4e881908d1f2b3c4d5e6f70", "weather-requests.jsonl", "gpt-4o-mini", SCENARIOS[:2]),
    ("batch_6931a31e9b7c8190a4e5f6a7b8c9d0e1", "mixed-requests.jsonl", "gpt-4.1-mini", SCENARIOS[2:]),
]
#: The requests in the order they are sent: the OpenAI batches', then the Anthropic batch's.
SCRIPT = [sc for *_ids, scenarios in OPENAI_BATCHES for sc in scenarios] + SCENARIOS
ANTHROPIC_BATCH = "msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d"
ANTHROPIC_MODEL = "claude-sonnet-4-5"


def _anthropic_messages(messages: list[dict]) -> list[dict]:
    """Chat Completions messages as Anthropic Messages ones (tool_use / tool_result blocks)."""
    out: list[dict] = []
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            blocks = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": json.loads(c["function"]["arguments"])}
                       for c in m["tool_calls"]]
            out.append({"role": "assistant", "content": blocks})
        elif m["role"] == "tool":
            out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in TOOLS]


def write_openai(root: Path, up: FakeOpenAI) -> None:
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    client = openai.OpenAI(base_url=up.base_url, api_key="sk-fake", max_retries=0)
    expected = []
    for batch_id, input_name, model, scenarios in OPENAI_BATCHES:
        inputs, outputs = [], []
        for i, sc in enumerate(scenarios, 1):
            cid = f"request-{i}"
            body = {"model": model, "messages": sc["messages"], "tools": TOOLS}
            inputs.append({"custom_id": cid, "method": "POST", "url": "/v1/chat/completions", "body": body})
            completion = client.chat.completions.create(**body)
            outputs.append({
                "id": f"batch_req_{batch_id[6:18]}{i:04d}", "custom_id": cid,
                "response": {"status_code": 200, "request_id": f"req_{batch_id[6:22]}{i:02d}", "body": completion.model_dump(mode="json", exclude_unset=True)},
                "error": None,
            })
            expected.append({**up.expected()[-1], "name": sc["name"], "batch": f"{batch_id}_output.jsonl", "input": input_name,
                             "custom_id": cid})
        (files / input_name).write_text("".join(json.dumps(x) + "\n" for x in inputs))
        (files / f"{batch_id}_output.jsonl").write_text("".join(json.dumps(x) + "\n" for x in outputs))
    (root / "expected.jsonl").write_text("".join(json.dumps(e) + "\n" for e in expected))
    (root / "WRITER.md").write_text(f"Written by `python tests/writers/batch_writer.py` with openai {openai.__version__}, Python {sys.version.split()[0]}.\n")


def write_anthropic(root: Path, up: FakeOpenAI) -> None:
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    client = anthropic.Anthropic(base_url=up.origin, api_key="sk-ant-fake", max_retries=0)
    requests: list[batch_create_params.Request] = []
    results, expected = [], []
    for i, sc in enumerate(SCENARIOS, 1):
        cid = f"request-{i}"
        params = {"model": ANTHROPIC_MODEL, "max_tokens": 1024, "messages": _anthropic_messages(sc["messages"]), "tools": ANTHROPIC_TOOLS}
        requests.append(batch_create_params.Request(custom_id=cid, params=params))
        message = client.messages.create(**params)
        result = MessageBatchIndividualResponse(custom_id=cid, result=MessageBatchSucceededResult(type="succeeded", message=message))
        results.append(result.model_dump(mode="json"))
        expected.append({**up.expected()[-1], "name": sc["name"], "batch": f"{ANTHROPIC_BATCH}_results.jsonl", "custom_id": cid})
    (files / "message-batch-create.json").write_text(json.dumps(batch_create_params.BatchCreateParams(requests=requests)) + "\n")
    (files / f"{ANTHROPIC_BATCH}_results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in results))
    (root / "expected.jsonl").write_text("".join(json.dumps(e) + "\n" for e in expected))
    (root / "WRITER.md").write_text(f"Written by `python tests/writers/batch_writer.py` with anthropic {anthropic.__version__}, Python {sys.version.split()[0]}.\n")


def main(out_root: Path) -> None:
    with FakeOpenAI(SCRIPT) as up:
        write_openai(out_root / "openai-batch", up)
        write_anthropic(out_root / "anthropic-batch", up)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: batch_writer.py OUT_ROOT")
    main(Path(sys.argv[1]))
