"""replay/capture/redact.py: which names and values are secrets, what is kept, what --redact hashes."""

from __future__ import annotations

import hashlib
import os
from collections import Counter

import orjson
import pytest

from replay.capture.redact import (
    _row_may_hold_key,
    hash_arguments,
    hash_messages,
    hash_text,
    is_secret_name,
    redact_error,
    redact_exchange,
    scrub_excerpt,
    scrub_json,
    scrub_json_text,
    scrub_text,
)

SK = "sk-proj-4f9Qx2LmN8pR7sT1vW3yZ5aB6cD0eF"
AKIA = "AKIAIOSFODNN7EXAMPLE"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
GH = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.mark.parametrize(
    "name",
    ["Authorization", "authorization", "Proxy-Authorization", "x-api-key", "X-Api-Key", "api-key", "api_key", "apiKey",
     "API_KEY", "Cookie", "Set-Cookie", "cookies", "access_token", "refresh_token", "id_token", "x-auth-token", "token",
     "X-Amz-Security-Token", "client_secret", "secret", "password", "db_password", "passphrase", "credentials",
     "AWS_SECRET_ACCESS_KEY", "private_key", "Ocp-Apim-Subscription-Key", "x-goog-api-key", "auth", "jwt"],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["max_tokens", "max_completion_tokens", "token_budget", "tokens", "prompt_token_ids", "eos_token", "pad_token",
     "bos_token", "stop_token_ids", "key", "keys", "session_id", "user", "model", "temperature", "monkey", "turkey",
     "keyword", "tokenizer", "author", "stream_options", "signature", "id", "name", "value"],
)
def test_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(
    "text, kind",
    [(SK, "sk"), ("sk-ant-api03-" + "Ab1" * 30, "sk"), (AKIA, "aws"), (JWT, "jwt"), (GH, "github"),
     ("Bearer abcdEFGH1234ijkl5678", "bearer"), ("Basic dXNlcjpwYXNzd29yZA==", "basic"),
     ("xoxb-123456789012-abcdefABCDEF", "slack"), ("AIza" + "Sy" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "google"),
     ("hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345", "hf"), ("sk_live_" + "a1b2c3d4e5f6g7h8i9", "stripe")],
)
def test_key_like_values_are_replaced_wherever_they_stand(text: str, kind: str) -> None:
    counts: Counter = Counter()
    assert scrub_text(text, counts) == f"[redacted:{kind}]"
    assert scrub_text(f"my key is {text}, use it", counts) == f"my key is [redacted:{kind}], use it"
    assert counts[f"value:{kind}"] == 2


@pytest.mark.parametrize(
    "text",
    ["sk-learn-is-a-great-library-for-ml", "Bearer authentication is described in RFC", "basic understanding",
     "the AKIA prefix", "eyJ alone", "max_tokens=100", "https://example.com/path?q=1&page=2", "a token budget of 12"],
)
def test_text_that_only_resembles_a_key_is_kept(text: str) -> None:
    assert scrub_text(text) == text


def test_url_password_and_secret_query_parameter() -> None:
    assert (
        scrub_text("postgres://bob:hunter2@db:5432/x and https://h/p?api_key=zz9&q=1&access_token=abc")
        == "postgres://[redacted:url-password]@db:5432/x and https://h/p?api_key=[redacted:query]&q=1&access_token=[redacted:query]"
    )


def test_pem_private_key_inside_json_keeps_json_valid() -> None:
    doc = {"note": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "n": 1}
    out = scrub_json_text(orjson.dumps(doc).decode())
    assert orjson.loads(out) == {"note": "[redacted:pem]", "n": 1}


REQUEST = {
    "model": "m",
    "api_key": "plain-secret-1",
    "max_tokens": 100,
    "metadata": {"user": "u1", "Authorization": "plain-secret-2", "session_id": "s1"},
    "extra_headers": [{"name": "x-api-key", "value": "plain-secret-3"}, {"name": "Accept", "value": "json"}],
    "raw_headers": [["Cookie", "sid=plain-secret-4"], ["Accept", "json"]],
    "chat_template_kwargs": {"eos_token": "</s>"},
    "messages": [
        {"role": "user", "content": "what is my token?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "login", "arguments": '{"token": "t0k"}'}}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "auth", "input": {"password": "model-said"}}]},
    ],
    "tools": [
        {"type": "function", "function": {"name": "login", "parameters": {"type": "object", "properties": {
            "token": {"type": "string"}, "api_key": {"type": "string", "default": None}, "token_budget": {"type": "integer"}}}}},
    ],
    "response_format": {"type": "json_schema", "json_schema": {"schema": {"properties": {"password": {"type": "string"}}}}},
}


def test_name_rule_drops_envelope_secrets_and_keeps_schemas_and_arguments() -> None:
    counts: Counter = Counter()
    out = orjson.loads(scrub_json_text(orjson.dumps(REQUEST).decode(), counts))
    expected = orjson.loads(orjson.dumps(REQUEST))
    del expected["api_key"]
    del expected["metadata"]["Authorization"]
    expected["extra_headers"] = [{"name": "Accept", "value": "json"}]
    expected["raw_headers"] = [["Accept", "json"]]
    assert out == expected  # messages, tools, response_format, max_tokens, eos_token, session_id all kept
    assert list(out) == [k for k in REQUEST if k != "api_key"]  # key order kept
    assert counts == Counter({"name": 4})


def test_name_rule_leaves_json_without_secret_names_untouched() -> None:
    text = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}).decode()
    assert scrub_json_text(text) is not None and scrub_json_text(text) == text


def test_scrub_json_survives_deep_nesting() -> None:
    deep: list = []
    node = deep
    for _ in range(100_000):
        node.append([])
        node = node[0]
    node.append(SK)
    scrub_json(deep)
    assert node == ["[redacted:sk]"]


def test_hash_text_marker() -> None:
    text = "Héllo wörld"
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    assert hash_text(text) == f"[redacted sha256:{digest} chars:11]"
    assert hash_text("") == ""


def test_hash_arguments_keeps_shape() -> None:
    out = orjson.loads(hash_arguments('{"path": "a.txt", "n": 3, "flags": [true, null, "x"], "opt": {"k": "v"}}'))
    assert out == {"path": hash_text("a.txt"), "n": 3, "flags": [True, None, hash_text("x")], "opt": {"k": hash_text("v")}}
    assert hash_arguments('{"path": "a.') == hash_text('{"path": "a.')  # not JSON: whole, and still not JSON


def test_hash_messages_chat_anthropic_responses() -> None:
    req = orjson.loads(orjson.dumps(REQUEST))
    hash_messages(req)
    m = req["messages"]
    assert m[0] == {"role": "user", "content": hash_text("what is my token?")}
    fn = m[1]["tool_calls"][0]["function"]
    assert fn["name"] == "login" and orjson.loads(fn["arguments"]) == {"token": hash_text("t0k")}
    assert m[2]["content"][0] == {"type": "tool_use", "id": "u1", "name": "auth", "input": {"password": hash_text("model-said")}}
    assert req["tools"] == REQUEST["tools"] and req["response_format"] == REQUEST["response_format"]
    assert req["model"] == "m" and req["max_tokens"] == 100

    anth = {"system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": "42"}]}]}
    hash_messages(anth)
    assert anth == {"system": [{"type": "text", "text": hash_text("be brief"), "cache_control": {"type": "ephemeral"}}],
                    "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", "content": hash_text("42")}]}]}

    resp = {"instructions": "sys", "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
                                             {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a": "b"}'},
                                             {"type": "function_call_output", "call_id": "c", "output": "out"}],
            "text": {"format": {"type": "text"}}, "reasoning": {"effort": "high"}}
    hash_messages(resp)
    assert resp["instructions"] == hash_text("sys")
    assert resp["input"][0]["content"][0] == {"type": "input_text", "text": hash_text("q")}
    assert resp["input"][1] == {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a":"%s"}' % hash_text("b")}
    assert resp["input"][2]["output"] == hash_text("out")
    assert resp["text"] == {"format": {"type": "text"}} and resp["reasoning"] == {"effort": "high"}


def _row() -> tuple[dict, list[dict]]:
    row = {
        "exchange_id": "x", "source_file": "f", "source_line": 1, "ts": None, "route": "chat.completions", "model": "m",
        "stream": False, "request_json": orjson.dumps(REQUEST).decode(), "n_messages": 3, "n_tools": 1,
        "served_content": f"use {SK}", "served_tool_calls": [{"index": 0, "id": "c", "name": "f", "arguments": '{"k": "%s"}' % AKIA}],
        "served_finish_reason": "tool_calls", "served_chunks": None, "server_prompt": f"<s>{SK}", "server_prompt_token_ids": [1],
        "server_output_text": f"ab {SK} cd", "server_output_token_ids": [2], "server_steps": ["ab ", SK[:5], SK[5:] + " cd"],
    }
    tools = [{"exchange_id": "x", "tool_index": 0, "name": "login", "tool_json": orjson.dumps({"default": JWT}).decode()}]
    return row, tools


def test_redact_exchange_default() -> None:
    row, tools = _row()
    counts: Counter = Counter()
    redact_exchange(row, tools, counts=counts)
    assert "plain-secret" not in row["request_json"] and '"max_tokens":100' in row["request_json"]
    assert row["served_content"] == "use [redacted:sk]"
    assert row["served_tool_calls"][0]["arguments"] == '{"k": "[redacted:aws]"}'
    assert row["server_prompt"] == "<s>[redacted:sk]" and row["server_output_text"] == "ab [redacted:sk] cd"
    assert row["server_steps"] is None  # the key was split across steps: they no longer join to the text
    assert row["server_prompt_token_ids"] == [1]
    assert tools[0]["tool_json"] == '{"default":"[redacted:jwt]"}'
    assert counts["name"] == 4 and counts["value:sk"] == 3 and counts["steps-dropped"] == 1 and counts["raw-dropped"] == 0


def test_redact_exchange_hash() -> None:
    row, tools = _row()
    redact_exchange(row, tools, hash_text_too=True)
    req = orjson.loads(row["request_json"])
    assert req["messages"][0]["content"] == hash_text("what is my token?")
    assert req["tools"] == REQUEST["tools"]
    assert row["served_content"] == hash_text("use [redacted:sk]")
    assert row["served_tool_calls"][0]["arguments"] == '{"k":"%s"}' % hash_text("[redacted:aws]")
    for col in ("server_prompt", "server_prompt_token_ids", "server_output_text", "server_output_token_ids", "server_steps"):
        assert row[col] is None
    assert row["model"] == "m" and row["route"] == "chat.completions" and row["served_finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    "line, secret",
    [
        (b'{"request": {"api_key": "hunter2hunter2", "messages": [', b"hunter2"),
        (b'{"headers": [{"name": "Cookie", "value": "sid=abc123xyz"}], "x": ', b"abc123xyz"),
        (b"Authorization: Basic-custom-value-777", b"custom-value-777"),
        (b"x-api-key: 0123456789", b"0123456789"),
        (b"{'password': 'pw-in-a-repr'", b"pw-in-a-repr"),
        (b'{"k": "' + SK.encode() + b'", ', SK.encode()),
        (b'{"text": "' + b"x" * 100 + b" " + SK.encode(), SK[:15].encode()),  # cut by the 120 chars: the head is not left
    ],
)
def test_excerpt_of_a_bad_line_leaks_no_secret(line: bytes, secret: bytes) -> None:
    out = scrub_excerpt(line, 120)
    assert secret.decode() not in out
    assert len(out) <= 120
    assert "[redacted" in out


def test_error_detail_is_scrubbed() -> None:
    assert redact_error(f"route must be one of a, b; got '{SK}'") == "route must be one of a, b; got '[redacted:sk]'"
    assert redact_error(None) is None


def test_steps_that_never_joined_are_kept() -> None:
    """Steps are dropped only when a replacement broke their join, not because a capture's steps
    differ from its completion (that is for the re-stream stage to report)."""
    row, tools = _row()
    row["server_output_text"] = f"ab {SK} cd"
    row["server_steps"] = ["other", "text"]
    redact_exchange(row, tools)
    assert row["server_steps"] == ["other", "text"]
    row, tools = _row()
    row["server_steps"] = ["ab ", SK, " cd"]  # joined before, and the key is whole in one step
    redact_exchange(row, tools)
    assert row["server_steps"] == ["ab ", "[redacted:sk]", " cd"]


def test_row_without_key_shapes_still_loses_secret_names() -> None:
    """The row-level gate skips rule 1 only: names are still dropped when no value looks like a key."""
    row, tools = _row()
    for col in ("served_content", "server_prompt", "server_output_text"):
        row[col] = "plain"
    row["served_tool_calls"] = None
    row["server_steps"] = None
    tools[0]["tool_json"] = "{}"
    req = dict(REQUEST, metadata={"trace": "t"}, messages=[{"role": "user", "content": "hi"}])
    row["request_json"] = orjson.dumps(req).decode()
    assert not _row_may_hold_key(row, tools)
    counts: Counter = Counter()
    redact_exchange(row, tools, counts=counts)
    assert "plain-secret-1" not in row["request_json"] and counts == Counter({"name": 3})


def test_error_detail_under_redact_hashes_quoted_prose_only() -> None:
    assert redact_error("KeyError('my pass phrase is here')", hash_text_too=True) == f"KeyError('{hash_text('my pass phrase is here')}')"
    for kept in ("no 'request' object", "': request' comment is not JSON", "route must be one of a, b; got 'completions'"):
        assert redact_error(kept, hash_text_too=True) == kept


# --------------------------------------------------------------------------- rule 1 in linear time

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from hypo import examples  # noqa: E402

import re  # noqa: E402

from replay.capture import redact as _r  # noqa: E402
from replay.capture.v1 import parse_line  # noqa: E402

# pieces that make and break key shapes, URLs, query strings and JSON escapes
_PIECES = [SK, AKIA, JWT, GH, "sk-", "Bearer ", "bearer\t", "Basic ", "dXNlcjpwYXNzd29yZA==", "abcdEFGH1234ijkl5678",
           "xoxb-123456789012-abc", "hf_" + "aB" * 16, "sk_live_" + "a1" * 9, "AIza" + "x1" * 18, "://", "bob", ":", "pw9",
           "@", "/", "?", "&", "=", "api_key", "page", "token", "#", " ", "\n", '"', "\\", "é", "ſ", "x", "9", "-", "_", ".",
           "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "ghx", "github_pat_" + "A1" * 20, "AKIA", "ASIA",
           "eyJ", "ab", "BEARER"]
_texts = st.lists(st.sampled_from(_PIECES), max_size=14).map("".join)


_SPEC_RES = [re.compile(pat) for _, pat, _, _ in _r._KEY_RULES]


def _reference_scrub(text: str) -> str:
    """The rule-1 contract, naively: at each position from the left, the first rule (in
    _KEY_RULES order) whose regex matches there and whose check passes is replaced and the scan
    goes on after it; otherwise the next position. Quadratic, as the old alternation was; on the
    rules' patterns as written (the scrub runs rewritten forms of them)."""
    out, i, last = [], 0, 0
    while i < len(text):
        for (kind, _, check, _), rx in zip(_r._KEY_RULES, _SPEC_RES):
            m = rx.match(text, i)
            if m is not None and (check is None or check(m.group(0))):
                out += [text[last:i], _r._replacement(kind, m.group(0))]
                i = last = m.end()
                break
        else:
            i += 1
    return "".join(out) + text[last:] if out else text


@settings(max_examples=examples(1500), deadline=None)
@given(_texts)
def test_scrub_text_is_the_leftmost_first_rule_contract(text: str) -> None:
    assert scrub_text(text) == _reference_scrub(text)


@settings(max_examples=examples(1500), deadline=None)
@given(st.lists(_texts, max_size=4), st.sampled_from(["", "\u00e9", "\u4e2d\U0001f600"]))
def test_gate_spans_hold_every_match_of_the_rules(parts: list[str], wide: str) -> None:
    """The scrub tries a rule only inside the spans where its gate matched (_gate_spans): every
    match of each rule's regex as it runs whose check passes (a match whose check fails replaces
    nothing) must start inside one of them, at character offsets of texts with 1-, 2- and 4-byte
    characters alike, in the text and in JSON text holding it; and the scrub must give what
    searching the whole text gives (spans=None)."""
    from replay.capture import redact as R

    if R._SPAN_GATES is None:
        pytest.skip("hyperscan is not installed")
    text = wide.join(parts)
    for form in (text, orjson.dumps(text).decode()):
        rules, spans = R._gate_spans(form)
        for i, rx in enumerate(R._RULE_RES):
            check, lead = R._KEY_RULES[i][2], R._RULE_LEADS[i]
            found = [(q, rx.match(form, q)) for q in range(len(form) + 1)]
            starts = [q for q, m in found if m and (check is None or check(form[slice(*(m.span(1) if lead else m.span()))]))]
            if starts:
                assert i in rules and spans is not None, (R._KEY_RULES[i][0], form)
                assert all(any(a <= q < b for a, b in spans[i]) for q in starts), (R._KEY_RULES[i][0], form, spans[i])
        assert R._scrub_rules(form, rules, None, spans) == R._scrub_rules(form, rules, None, None)


def test_gate_spans_long_span_and_offsets_past_wide_characters() -> None:
    """A span longer than _MATCH_LOOP_MAX is searched instead of tried position by position, and
    offsets after 2- and 4-byte characters are character offsets: the keys are replaced."""
    from replay.capture import redact as R

    url = "https://" + "u" * 200 + ":" + "p9" * 100 + "@host/x"
    text = "\u4e2d\U0001f600 " + url + " \u00e9 " + SK
    _, spans = R._gate_spans(text)
    if spans is None:
        pytest.skip("hyperscan is not installed")
    assert any(b - a > R._MATCH_LOOP_MAX for a, b in spans[R._KEY_RULES.index(next(r for r in R._KEY_RULES if r[0] == "url-password"))])
    assert scrub_text(text) == "\u4e2d\U0001f600 https://[redacted:url-password]@host/x \u00e9 [redacted:sk]"


def test_a_match_whose_check_fails_hides_nothing_after_it() -> None:
    """`?page=` is not a secret's name: its value is not replaced, and a key or a secret-named
    parameter inside that value still is (the old single alternation consumed the whole match)."""
    assert scrub_text("https://h/p?next=x?api_key=zz9") == "https://h/p?next=x?api_key=[redacted:query]"
    assert scrub_text(f"https://h/p?page={SK}") == "https://h/p?page=[redacted:sk]"


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_texts, min_size=1, max_size=5), st.booleans())
def test_line_gate_finds_every_rule_a_decoded_string_needs(strings: list[str], ascii_only: bool) -> None:
    """The row gate may scan the raw capture line instead of the decoded strings: it must find every
    rule any decoded string needs, whatever escapes the writer used (json.dumps with ensure_ascii
    writes \\uXXXX; a line with escapes that can hide a literal is gated on its decoded strings)."""
    import json

    req = {"model": "m", "messages": [{"role": "user", "content": s} for s in strings]}
    raw = json.dumps({"id": "x", "route": "chat.completions", "request": req, "server": {"output_text": strings[0]}},
                     ensure_ascii=ascii_only).encode()
    row, tools = parse_line(raw, "f", 1)
    need = set().union(*(_r._rules_in(s) for s in strings))
    assert need <= set(_r._row_rules(row, tools, raw))


def test_a_key_spelled_with_json_escapes_in_the_line_is_still_replaced() -> None:
    escaped = "\\u0073" + SK[1:]  # `s` written as \u0073: the raw line holds no "sk-"
    raw = ('{"id": "x", "route": "chat.completions", "request": {"model": "m", "messages": '
           '[{"role": "user", "content": "my key %s"}]}}' % escaped).encode()
    row, tools = parse_line(raw, "f", 1)
    assert SK in row["request_json"]
    counts: Counter = Counter()
    redact_exchange(row, tools, counts=counts, raw=raw)
    assert SK not in row["request_json"] and "[redacted:sk]" in row["request_json"] and counts["value:sk"] == 1


def test_served_text_joined_from_deltas_is_gated_on_its_own() -> None:
    """The served content is joined from stream deltas: a key split over two deltas is in no string
    of the line, yet the row gate must see it."""
    half = len(SK) // 2
    stream = [{"choices": [{"index": 0, "delta": {"content": SK[:half]}}]}, {"choices": [{"index": 0, "delta": {"content": SK[half:]}}]}]
    raw = orjson.dumps({"id": "x", "route": "chat.completions", "request": {"model": "m", "messages": []}, "stream": stream})
    assert SK.encode() not in raw
    row, tools = parse_line(raw, "f", 1)
    redact_exchange(row, tools, raw=raw)
    assert row["served_content"] == "[redacted:sk]"


@pytest.mark.parametrize("hashed", [False, True])
def test_names_read_on_the_decoded_request_as_on_its_text(hashed: bool) -> None:
    """Ingest hands redact_exchange the request it decoded: rules 2-3 then run on it instead of a
    second decoding of request_json, with the same row and counts as a result."""
    a, ta = _row()
    b, tb = _row()
    ca: Counter = Counter()
    cb: Counter = Counter()
    redact_exchange(a, ta, counts=ca, hash_text_too=hashed)
    redact_exchange(b, tb, counts=cb, hash_text_too=hashed, request=orjson.loads(b["request_json"]))
    assert (a, ta, ca) == (b, tb, cb)
    assert "plain-secret-1" not in b["request_json"] and cb["name"] == 4


def test_hyperscan_gates_answer_as_the_re2_set() -> None:
    """The gates run on Hyperscan when it is installed, else on an RE2 set: both must find the same
    rules in the same texts (the rules' own examples, in text, in JSON text and JSON of JSON)."""
    from replay.capture import redact as R

    hs = R._gates([g for *_, g in R._KEY_RULES])
    if not isinstance(hs, R._HyperscanGates):
        pytest.skip("hyperscan is not installed")
    re2_set = R._gate_set([g for *_, g in R._KEY_RULES])
    texts = [SK, AKIA, JWT, GH, "Bearer abcdEFGH1234ijkl5678", "bearer\tabcdEFGH1234ijkl5678", "Basic dXNlcjpwYXNzd29yZA==",
             "BA\u017fIC dXNlcjpwYXNzd29yZA==", "ba\u0130c dXNlcjpwYXNzd29yZA==", "basic thing", "https://u:pw@host/x",
             "https://h/?api_key=abc&x=1", "?monkey=1", "-----BEGIN RSA PRIVATE KEY-----\nabc", "xoxb-123456789012-abcdef",
             "AIza" + "Sy" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345", "sk_live_" + "a1b2c3d4e5f6g7h8i9",
             "plain text", "", "\u00e9\u4e2d" * 50]
    for t in texts:
        for form in (t, orjson.dumps(t), orjson.dumps(orjson.dumps(t).decode()), t.encode("utf-8", "surrogatepass")):
            assert sorted(hs.Match(form)) == sorted(re2_set.Match(form) or []), form


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80) | st.sampled_from([SK, JWT, AKIA, GH]).map(lambda k: "x " + k))
def test_hyperscan_gates_answer_as_the_re2_set_on_any_text(text: str) -> None:
    from replay.capture import redact as R

    hs = R._gates([g for *_, g in R._KEY_RULES])
    if not isinstance(hs, R._HyperscanGates):
        pytest.skip("hyperscan is not installed")
    re2_set = R._gate_set([g for *_, g in R._KEY_RULES])
    for form in (text, orjson.dumps(text)):
        assert sorted(hs.Match(form)) == sorted(re2_set.Match(form) or [])


def test_gate_databases_are_cached_and_a_bad_cache_is_compiled_past(tmp_path):
    """The compiled Hyperscan gates are saved in $REPLAY_CACHE_DIR by the first process and loaded by
    the next (same answers); a corrupt cache file is compiled past, never trusted."""
    import subprocess
    import sys

    pytest.importorskip("hyperscan")
    code = (
        "import sys; from replay.capture import redact as R; "
        "print(type(R._GATES).__name__, sorted(R._GATES.Match(b'key sk-abcdefghij1234567890XYZ and Bearer abcdefghijk12345')), "
        "sorted(R._LINE_GATES.Match(b'x \\\\u0041')))"
    )
    env = {**os.environ, "REPLAY_CACHE_DIR": str(tmp_path), "REPLAY_GATES": ""}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    files = sorted(tmp_path.glob("gates-*.hsdb"))
    assert len(files) == 3 and all(f.stat().st_size > 1000 for f in files)  # text, line and span gates
    assert first.split() == ["_HyperscanGates", "[1,", "5]", "[13]"]  # bearer and sk; the escape id (len(_KEY_RULES))
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert again == first
    for f in files:
        f.write_bytes(b"not a database")
    broken = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert broken == first and all(f.stat().st_size > 1000 for f in files)  # rebuilt and saved again
