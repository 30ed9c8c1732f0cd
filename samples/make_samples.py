"""Write the bundled sample captures (capture format v1). Run: ``python samples/make_samples.py``.

Everything here is written for this project: the tool declarations, the conversations and the model
outputs are ours. The files are committed; this script documents how they were built and rebuilds
them byte for byte. ``tests/test_end_to_end.py`` asserts the counts that follow from the choices below.

- ``coding-agent.jsonl``: a coding agent on a Qwen3 model (Hermes ``<tool_call>`` syntax), 7 turns,
  5 tools per request: ``read`` (no ``strict``), ``bash`` (``strict: false``), ``edit`` (no
  description), ``write`` (``strict: true``, a ``"default": null`` inside its parameters) and
  ``todo_list`` (no arguments, no ``strict``). Served faults planted in the captured streams: turn 4
  streamed empty arguments for a no-argument call, turn 5 streamed raw model text before the parsed
  JSON, turn 6 dropped a call held in the last step (``finish_reason: stop``).
- ``deepseek-v31.jsonl.zst``: a gateway client on DeepSeek V3.1, 5 requests, 3 tools: ``web_search``
  (no ``strict``), ``get_time`` (name only: no description, no parameters) and ``create_ticket``
  (``strict: false``, a ``"default": null`` inside its parameters).
- ``model-gateway.jsonl``: one request per further model family behind a gateway (Qwen3-Coder,
  Kimi K2, GLM-4.6, gpt-oss, Gemma 4, Mistral Small 3.2, MiniMax-M2, Llama 3.1), each with its raw
  completion in the family's own syntax, recorded steps and a correctly served stream; 2 tools:
  ``get_weather`` (no ``strict``; ``days`` declared integer, so XML families type it) and
  ``get_time`` (``strict: true``). The MiniMax-M2 exchange logs its prompt, which ends inside
  ``<think>``: its completion starts in the reasoning section.
- ``malformed.jsonl``: one good line and five bad ones (bad JSON, not an object, no ``request``,
  ``tools`` not a list, non-UTF-8 bytes).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import zstandard

HERE = Path(__file__).resolve().parent

# DeepSeek special tokens, built from code points: U+FF5C FULLWIDTH VERTICAL LINE, U+2581 LOWER ONE EIGHTH BLOCK.
_B, _S = "\uff5c", "\u2581"


def _ds(words: str) -> str:
    return "<" + _B + words.replace(" ", _S) + _B + ">"


DS_CALLS_BEGIN, DS_CALLS_END = _ds("tool calls begin"), _ds("tool calls end")
DS_CALL_BEGIN, DS_CALL_END, DS_SEP = _ds("tool call begin"), _ds("tool call end"), _ds("tool sep")
DS_EOS = _ds("end of sentence")
MARKERS = ("<tool_call>", "</tool_call>", DS_CALLS_BEGIN, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END, DS_SEP, DS_EOS)
# special tokens of the gateway's families, each one step as a server sends it
MARKERS += (
    "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_end|>",
    "<|tool_call_argument_begin|>", "<think>", "</think>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
    "<|channel|>", "<|message|>", "<|start|>", "<|end|>", "<|call|>", "<|constrain|>",
    "<|tool_call>", "<tool_call|>", '<|"|>', "[TOOL_CALLS]", "[ARGS]", "<minimax:tool_call>", "</minimax:tool_call>",
)


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False)


def steps_of(text: str) -> list[str]:
    """Split like a detokenizer: each marker is one step; other text in word / space / punctuation pieces."""
    pattern = "(" + "|".join(re.escape(m) for m in MARKERS) + r")|(\w+|\s+|[^\w\s])"
    return [m.group(0) for m in re.finditer(pattern, text)]


def merge_from(steps: list[str], start_text: str) -> list[str]:
    """Merge the step where ``start_text`` first begins and every step after it into one last step."""
    begin = "".join(steps).find(start_text)
    if begin < 0:
        raise ValueError(start_text)
    acc = 0
    for j, t in enumerate(steps):
        if acc + len(t) > begin:
            return steps[:j] + ["".join(steps[j:])]
        acc += len(t)
    raise ValueError(start_text)


# ------------------------------------------------------------------------------------------------ tools
CODING_TOOLS = [
    {"type": "function", "function": {
        "name": "read",
        "description": "Read a file of the workspace. Returns at most `limit` lines starting at `offset`.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "Path relative to the workspace root."},
            "offset": {"type": "integer", "minimum": 1, "description": "First line, 1-based."},
            "limit": {"type": "integer", "maximum": 2000}},
            "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "bash",
        "description": "Run a shell command in the workspace and return stdout and stderr.",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string"},
            "timeout": {"type": "number", "description": "Seconds before the command is killed."}},
            "required": ["command"], "additionalProperties": False},
        "strict": False}},
    {"type": "function", "function": {
        "name": "edit",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"},
            "old_text": {"type": "string"},
            "new_text": {"type": "string"}},
            "required": ["path", "old_text", "new_text"]}}},
    {"type": "function", "function": {
        "name": "write",
        "description": "Create or overwrite a file.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"},
            "content": {"type": "string"},
            "mode": {"type": ["string", "null"], "enum": ["0644", "0755", None], "default": None}},
            "required": ["path", "content", "mode"], "additionalProperties": False},
        "strict": True}},
    {"type": "function", "function": {
        "name": "todo_list",
        "description": "Show the agent's open to-do items.",
        "parameters": {"type": "object", "properties": {}}}},
]

GATEWAY_TOOLS = [
    {"type": "function", "function": {
        "name": "web_search",
        "description": "Search the web and return the top results.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "max_results": {"type": "integer", "default": 5}},
            "required": ["query"]}}},
    {"type": "function", "function": {"name": "get_time"}},
    {"type": "function", "function": {
        "name": "create_ticket",
        "description": "Open a support ticket.",
        "parameters": {"type": "object", "properties": {
            "title": {"type": "string"},
            "priority": {"type": "string", "enum": ["low", "high"]},
            "assignee": {"type": ["string", "null"], "default": None}},
            "required": ["title", "priority"]},
        "strict": False}},
]

SYSTEM = "You are a coding agent working in a Python repository. Use the tools; keep answers short."


# ------------------------------------------------------------------------------------------------ streams
def chunk(delta: dict, finish: str | None = None, i: int = 0) -> dict:
    return {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1764500000 + i, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def served_stream(content_pieces: list[str], calls: list[tuple[str, list[str]]], finish: str) -> list:
    """SSE payloads of a server: a role chunk, content pieces, per call a first delta with id and
    name then argument fragments, a final chunk with ``finish_reason``, then ``[DONE]``."""
    out = [chunk({"role": "assistant", "content": ""})]
    for piece in content_pieces:
        out.append(chunk({"content": piece}))
    for index, (name, frags) in enumerate(calls):
        out.append(chunk({"tool_calls": [{"index": index, "id": f"call_{index}", "type": "function",
                                          "function": {"name": name, "arguments": ""}}]}))
        for f in frags:
            out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": f}}]}))
    out.append(chunk({}, finish))
    return [json.dumps(p, ensure_ascii=False) for p in out] + ["[DONE]"]


def frags(args_json: str, size: int = 7) -> list[str]:
    return [args_json[i:i + size] for i in range(0, len(args_json), size)]


def hermes_call(name: str, args: dict) -> str:
    return "<tool_call>\n" + dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def ds_call(name: str, args: dict) -> str:
    return DS_CALL_BEGIN + name + DS_SEP + dumps(args) + DS_CALL_END


def exchange(xid, ts, model, messages, tools, *, stream, output_text=None, steps=None, response=None,
             served=None, prompt=None):
    request = {"model": model, "messages": messages, "tools": tools, "stream": stream}
    if stream:
        request["stream_options"] = {"include_usage": False}
    ex = {"id": xid, "ts": ts, "route": "chat.completions", "model": model, "request": request}
    if stream:
        ex["stream"] = served
    else:
        ex["response"] = response
    server = {}
    if output_text is not None:
        server["output_text"] = output_text
    if steps is not None:
        assert "".join(steps) == output_text, xid
        server["steps"] = steps
    if server:
        ex["server"] = server
    return ex


def response_body(content, calls, finish):
    msg = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = [{"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                             for i, (n, a) in enumerate(calls)]
    return {"id": "chatcmpl-r", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}]}


def coding_agent() -> list[dict]:
    model = "Qwen/Qwen3-32B"
    history = [{"role": "system", "content": SYSTEM},
               {"role": "user", "content": "The app ignores CONFIG_PATH. Find where the config is loaded and fix it."}]
    out = []

    def turn(xid, i, *, content, calls, steps_fn=None, served_fault=None, stream=True):
        text = content + "".join(("\n" if (content or k) else "") + hermes_call(n, a) for k, (n, a) in enumerate(calls))
        msgs = [dict(m) for m in history]
        ts = f"2026-11-20T10:{i:02d}:00Z"
        args = [(n, dumps(a)) for n, a in calls]
        if not stream:
            ex = exchange(xid, ts, model, msgs, CODING_TOOLS, stream=False, output_text=text,
                          response=response_body(content or None, args, "tool_calls" if calls else "stop"))
        else:
            steps = steps_of(text)
            if steps_fn:
                steps = steps_fn(steps)
            served_calls = [(n, frags(a)) for n, a in args]
            finish = "tool_calls" if calls else "stop"
            if served_fault == "empty-arguments":
                served_calls = [(n, []) for n, _ in args]
            elif served_fault == "raw-then-parsed":
                raw = text.split('"arguments": ', 1)[1].rsplit("}\n</tool_call>", 1)[0]
                served_calls = [(n, frags(raw[: len(raw) // 2]) + frags(a)) for n, a in args]
            elif served_fault == "dropped-last-step":
                served_calls, finish = [], "stop"
            ex = exchange(xid, ts, model, msgs, CODING_TOOLS, stream=True, output_text=text, steps=steps,
                          served=served_stream(frags(content, 12) if content else [], served_calls, finish))
        out.append(ex)
        history.append({"role": "assistant", "content": content,
                        "tool_calls": [{"id": f"{xid}_{k}", "type": "function", "function": {"name": n, "arguments": a}}
                                       for k, (n, a) in enumerate(args)]} if calls else {"role": "assistant", "content": content})
        for k, (n, _) in enumerate(args):
            history.append({"role": "tool", "tool_call_id": f"{xid}_{k}", "content": f"(output of {n})"})

    # 1. non-streamed, one call
    turn("agent-01", 1, content="", calls=[("read", {"path": "app/config.py"})], stream=False)
    # 2. content, then a call whose end arrives in the last step (its arguments close in the same step)
    turn("agent-02", 2, content="Let me see how the tests exercise it.",
         calls=[("bash", {"command": "pytest -q tests/test_config.py", "timeout": 120})],
         steps_fn=lambda s: merge_from(s, '120}}'))
    # 3. two calls in one step
    turn("agent-03", 3, content="",
         calls=[("read", {"path": "app/settings.py", "offset": 1, "limit": 80}), ("read", {"path": "app/__main__.py"})],
         steps_fn=lambda s: merge_from(s, "<tool_call>"))
    # 4. a call with no arguments; the server streamed empty arguments (served fault)
    turn("agent-04", 4, content="", calls=[("todo_list", {})], served_fault="empty-arguments")
    # 5. an edit with escapes and non-ASCII; the server streamed raw text before the parsed JSON (served fault)
    turn("agent-05", 5, content="Found it: the loader reads a hard-coded path.",
         calls=[("edit", {"path": "app/config.py", "old_text": "path = \"config.toml\"",
                          "new_text": "path = os.environ.get(\"CONFIG_PATH\", \"config.toml\")  # r\u00e9glable"})],
         served_fault="raw-then-parsed")
    # 6. a write held entirely in the last step; the server never flushed it (served fault: dropped, finish stop)
    turn("agent-06", 6, content="",
         calls=[("write", {"path": "tests/test_env.py", "content": "def test_env(monkeypatch):\n    monkeypatch.setenv('CONFIG_PATH', 'x.toml')\n", "mode": None})],
         steps_fn=lambda s: merge_from(s, "<tool_call>"), served_fault="dropped-last-step")
    # 7. plain answer, no call
    turn("agent-07", 7, content="CONFIG_PATH is now read in app/config.py, and a test covers it.", calls=[])
    return out


def gateway() -> list[dict]:
    model = "deepseek-ai/DeepSeek-V3.1"
    out = []

    def req(xid, i, user, *, content="", calls=(), steps_fn=None, stream=True):
        body = "".join(ds_call(n, a) for n, a in calls)
        text = content + (DS_CALLS_BEGIN + body + DS_CALLS_END if calls else "") + DS_EOS
        msgs = [{"role": "user", "content": user}]
        args = [(n, dumps(a)) for n, a in calls]
        finish = "tool_calls" if calls else "stop"
        ts = f"2026-11-21T08:{i:02d}:00Z"
        if not stream:
            out.append(exchange(xid, ts, model, msgs, GATEWAY_TOOLS, stream=False, output_text=text,
                                response=response_body(content or None, args, finish)))
            return
        steps = steps_of(text)
        if steps_fn:
            steps = steps_fn(steps)
        out.append(exchange(xid, ts, model, msgs, GATEWAY_TOOLS, stream=True, output_text=text, steps=steps,
                            served=served_stream(frags(content, 12) if content else [], [(n, frags(a)) for n, a in args], finish)))

    # 1. one call, ending in the last step (its end token, the section end and EOS arrive together)
    req("gw-01", 1, "What's new in Python 3.14?", calls=[("web_search", {"query": "Python 3.14 release notes", "max_results": 3})],
        steps_fn=lambda s: merge_from(s, '3}'))
    # 2. two calls in one step
    req("gw-02", 2, "Open a ticket about the outage and tell me the time.",
        content="I'll do both.",
        calls=[("create_ticket", {"title": "Outage in eu-west", "priority": "high", "assignee": None}), ("get_time", {})],
        steps_fn=lambda s: merge_from(s, DS_CALL_BEGIN))
    # 3. a call with no arguments
    req("gw-03", 3, "What time is it?", calls=[("get_time", {})])
    # 4. non-streamed answer without a call
    req("gw-04", 4, "Say hello.", content="Hello!", stream=False)
    # 5. non-ASCII arguments
    req("gw-05", 5, "Weather news for Zürich and 上海?", calls=[("web_search", {"query": "Zürich 上海 weather \"today\""})])
    return out


WEATHER_TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Weather forecast for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time",
        "description": "Current local time in a time zone.",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}},
                       "required": ["tz"], "additionalProperties": False},
        "strict": True}},
]
W_ARGS = {"city": "Paris", "days": 3}
T_ARGS = {"tz": "Europe/Paris"}
Q = '<|"|>'

#: (model, raw completion in the family's syntax, calls it holds, content the client sees, logged prompt)
GATEWAY_OUTPUTS = [
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct",
     "I'll look both up.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
     "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n"
     "<parameter=tz>\nEurope/Paris\n</parameter>\n</function>\n</tool_call>",
     [("get_weather", W_ARGS), ("get_time", T_ARGS)], "I'll look both up.\n", None),
    ("moonshotai/Kimi-K2-Instruct",
     "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
     + dumps(W_ARGS) + "<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>"
     + dumps(T_ARGS) + "<|tool_call_end|><|tool_calls_section_end|>",
     [("get_weather", W_ARGS), ("get_time", T_ARGS)], "", None),
    ("zai-org/GLM-4.6",
     "<think>Need weather and time.</think>\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
     "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n<tool_call>get_time\n<arg_key>tz</arg_key>\n"
     "<arg_value>Europe/Paris</arg_value>\n</tool_call>",
     [("get_weather", W_ARGS), ("get_time", T_ARGS)], "", None),
    ("openai/gpt-oss-20b",
     "<|channel|>analysis<|message|>Need the forecast first.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>" + json.dumps(W_ARGS, separators=(",", ":")) + "<|call|>",
     [("get_weather", W_ARGS)], "", None),
    ("google/gemma-4-31b-it",
     f"<|tool_call>call:get_weather{{city:{Q}Paris{Q},days:3}}<tool_call|><|tool_call>call:get_time{{tz:{Q}Europe/Paris{Q}}}<tool_call|>",
     [("get_weather", W_ARGS), ("get_time", T_ARGS)], "", None),
    ("mistralai/Mistral-Small-3.2-24B-Instruct-2506",
     "Checking now.[TOOL_CALLS]get_weather[ARGS]" + dumps(W_ARGS) + "[TOOL_CALLS]get_time[ARGS]" + dumps(T_ARGS),
     [("get_weather", W_ARGS), ("get_time", T_ARGS)], "Checking now.", None),
    ("MiniMaxAI/MiniMax-M2",
     "Both are needed.\n</think>\n\n<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n"
     "<parameter name=\"days\">3</parameter>\n</invoke>\n<invoke name=\"get_time\">\n<parameter name=\"tz\">Europe/Paris</parameter>\n"
     "</invoke>\n</minimax:tool_call>",
     [("get_weather", W_ARGS), ("get_time", T_ARGS)], "", "]~!b[]~b]user\nWeather and time in Paris?[e~[\n]~b]ai\n<think>\n"),
    ("meta-llama/Llama-3.1-8B-Instruct",
     '{"name": "get_weather", "parameters": ' + dumps(W_ARGS) + "}",
     [("get_weather", W_ARGS)], "", None),
]


def model_gateway() -> list[dict]:
    out = []
    for i, (model, text, calls, content, prompt) in enumerate(GATEWAY_OUTPUTS, 1):
        args = [(n, dumps(a)) for n, a in calls]
        ex = exchange(f"mg-{i:02d}", f"2026-11-23T12:{i:02d}:00Z", model,
                      [{"role": "user", "content": "Weather and time in Paris?"}], WEATHER_TOOLS,
                      stream=True, output_text=text, steps=steps_of(text),
                      served=served_stream(frags(content, 12) if content else [], [(n, frags(a)) for n, a in args],
                                           "tool_calls" if calls else "stop"))
        if prompt is not None:
            ex["server"] = {"prompt": prompt, **ex["server"]}
        out.append(ex)
    return out


def malformed() -> bytes:
    good = {"id": "bad-file-ok", "ts": "2026-11-22T09:00:00Z", "route": "chat.completions", "model": "Qwen/Qwen3-32B",
            "request": {"model": "Qwen/Qwen3-32B", "messages": [{"role": "user", "content": "ping"}]},
            "response": response_body("pong", [], "stop")}
    lines = [
        json.dumps(good).encode(),
        b'{"id": "bad-json", "route": "chat.completions", "request": {"messages": [',  # cut mid-line
        b'["an", "array", "not", "an", "object"]',
        b'{"id": "no-request", "route": "chat.completions", "model": "Qwen/Qwen3-32B"}',
        json.dumps({"id": "tools-object", "route": "chat.completions", "model": "Qwen/Qwen3-32B",
                    "request": {"messages": [{"role": "user", "content": "hi"}], "tools": {"name": "read"}}}).encode(),
        b'{"id": "latin-1", "request": {"messages": [{"role": "user", "content": "caf\xe9"}]}}',
    ]
    return b"\n".join(lines) + b"\n"


def main() -> None:
    (HERE / "coding-agent.jsonl").write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in coding_agent()), encoding="utf-8")
    raw = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in gateway()).encode("utf-8")
    (HERE / "deepseek-v31.jsonl.zst").write_bytes(zstandard.ZstdCompressor(level=19).compress(raw))
    (HERE / "model-gateway.jsonl").write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in model_gateway()), encoding="utf-8")
    (HERE / "malformed.jsonl").write_bytes(malformed())


if __name__ == "__main__":
    main()
