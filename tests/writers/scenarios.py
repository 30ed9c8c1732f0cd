"""The 4 exchanges of the LiteLLM and Batch capture fixtures (issue #21), with the 2 tools they declare.

Each scenario is a script item of :class:`fake_openai.FakeOpenAI` (``answer``: what the server
sends) with the generator's own keys: ``name``, ``messages`` and ``stream`` (whether the request
streams where the source streams). In order: a tool call; a history with an assistant tool call
and its tool result; two parallel calls (streamed); a text answer (streamed). The same 4 kinds as
:data:`fake_openai.EXCHANGES`, with their own messages and tools: the committed fixtures hold these.
"""

from __future__ import annotations

from fake_openai import function_tool

TOOLS = [
    function_tool("get_weather", "Current weather in a city", "city"),
    function_tool("get_time", "Local time in a time zone", "timezone"),
]

ASK = {"role": "user", "content": "What is the weather in Paris?"}
CALL = {"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}


def _call(cid: str, name: str, arguments: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


SCENARIOS = [
    {"name": "tool-call", "messages": [ASK], "stream": False, "answer": {"content": None, "tool_calls": [CALL]}},
    {"name": "history", "messages": [ASK, {"role": "assistant", "content": None, "tool_calls": [CALL]},
                                     {"role": "tool", "tool_call_id": "call_w1", "content": "18C, cloudy"}],
     "stream": False, "answer": {"content": "It is 18C and cloudy in Paris."}},
    {"name": "parallel-stream", "messages": [{"role": "user", "content": "Weather in Paris and the time in Tokyo?"}], "stream": True,
     "answer": {"content": None, "tool_calls": [_call("call_p1", "get_weather", '{"city": "Paris"}'),
                                                _call("call_p2", "get_time", '{"timezone": "Asia/Tokyo"}')]}},
    {"name": "text-stream", "messages": [{"role": "user", "content": "Say hello."}], "stream": True,
     "answer": {"content": "Hello! How can I help you today?"}},
]
