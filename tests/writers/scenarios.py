"""The 4 exchanges every capture-source fixture holds (issue #21), with the 2 tools they declare.

Each scenario is ``(name, messages, stream, answer)``: a tool call; a history with an assistant
tool call and its tool result; two parallel calls (streamed where the source streams); a text
answer (streamed likewise). ``answer`` is what :class:`fake_upstream.FakeUpstream`
is scripted to send.
"""

from __future__ import annotations

from fake_upstream import Answer

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Local time in a time zone",
        "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}},
]

ASK = {"role": "user", "content": "What is the weather in Paris?"}
CALL = {"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}

SCENARIOS = [
    ("tool-call", [ASK], False, Answer(calls=[("call_w1", "get_weather", '{"city": "Paris"}')])),
    ("history", [ASK, {"role": "assistant", "content": None, "tool_calls": [CALL]},
                 {"role": "tool", "tool_call_id": "call_w1", "content": "18C, cloudy"}],
     False, Answer(content="It is 18C and cloudy in Paris.")),
    ("parallel-stream", [{"role": "user", "content": "Weather in Paris and the time in Tokyo?"}], True,
     Answer(calls=[("call_p1", "get_weather", '{"city": "Paris"}'), ("call_p2", "get_time", '{"timezone": "Asia/Tokyo"}')])),
    ("text-stream", [{"role": "user", "content": "Say hello."}], True, Answer(content="Hello! How can I help you today?")),
]
