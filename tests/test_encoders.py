"""Reference encoders (mistral-common, openai-harmony, a checkpoint's encoding function) and --date.

Every render here is a real library render: mistral-common's ``encode_chat_completion`` on the
tokenizers it ships, openai-harmony on the o200k vocabulary rebuilt offline from quicktok-v1, and
transformers' ``render_jinja_template`` for chat templates.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.runspec import AuditConfig
from replay.stages.render import render_exchange, tokens_differing
from replay.render.base import RenderError
from replay.render.chat_template import ChatTemplateRenderer
from replay.render.encoder import EncoderRenderer
from replay.render.specs import DEFAULT_DATE, renderer_from_spec
from replay.tools import get_serializer

pytest.importorskip("mistral_common")
pytest.importorskip("openai_harmony")
pytest.importorskip("quicktok")

runner = CliRunner()
FIXTURE = Path(__file__).parent / "data" / "encoding_fixture.py"
PARAMS = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
READ = {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": PARAMS}}
EDIT_NO_DESC = {"type": "function", "function": {"name": "edit", "parameters": PARAMS}}
WRITE_STRICT = {"type": "function", "function": {"name": "write", "description": "Write a file", "parameters": PARAMS, "strict": True}}
MESSAGES = [{"role": "system", "content": "You edit files."}, {"role": "user", "content": "Fix a.py"}]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    """Harmony's rebuilt vocabulary goes to a per-session cache folder, never the user's."""
    monkeypatch.setenv("REPLAY_CACHE", str(tmp_path_factory.getbasetemp() / "replay-cache"))
    monkeypatch.delenv("TIKTOKEN_ENCODINGS_BASE", raising=False)


def exchange(xid: str, tools: list | None, messages: list | None = None, **kw) -> dict:
    req = {"model": "m", "messages": messages or MESSAGES}
    if tools is not None:
        req["tools"] = tools
    return {"exchange_id": xid, "route": "chat.completions", "request_json": json.dumps(req), "server_prompt": None, **kw}


def serializers(old: str, new: str, ref: str) -> dict:
    return {"old": get_serializer(old), "new": get_serializer(new), "reference": get_serializer(ref)}


# ------------------------------------------------------------------------------------ mistral-common


def _direct(version_file: str, messages: list, tools: list):
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    import mistral_common

    tok = MistralTokenizer.from_file(str(Path(mistral_common.__file__).parent / "data" / version_file))
    return tok.encode_chat_completion(ChatCompletionRequest.from_openai(messages, tools))


@pytest.mark.parametrize(("version", "file"), [("v7", "mistral_instruct_tokenizer_241114.model.v7"), ("tekken", "tekken_240718.json")])
def test_mistral_common_renders_as_the_library(version: str, file: str) -> None:
    tools = [READ, EDIT_NO_DESC, WRITE_STRICT]
    r = renderer_from_spec(f"mistral-common:{version}")
    text, ids = r.render_ids(MESSAGES, copy.deepcopy(tools))
    direct = _direct(file, MESSAGES, copy.deepcopy(tools))
    assert ids == direct.tokens
    # the library's text writes SentencePiece pieces (▁ for a space); ours is the decoded prompt
    assert text == direct.text.replace("\u2581", " ")
    assert r.name == f"mistral-common:{version}"
    # strict is never rendered, a missing description is ""
    assert "strict" not in text
    assert '"name": "edit", "description": ""' in text
    assert '"name": "write", "description": "Write a file", "parameters": ' in text
    # the text tokenizes back to the encoder's ids (special tokens recognised)
    assert r.tokenizer.ids(text) == ids


def test_mistral_common_errors_are_render_errors() -> None:
    r = renderer_from_spec("mistral-common:tekken")
    # a null description is read as "" by mistral-common itself
    null_desc = {"type": "function", "function": {"name": "edit", "description": None, "parameters": PARAMS}}
    assert '"name": "edit", "description": ""' in r.render(MESSAGES, [null_desc])
    # a call id Mistral's protocol refuses: the library's exception becomes the side's RenderError
    msgs = MESSAGES + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "agent-01_0", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "agent-01_0", "content": "x"},
    ]
    with pytest.raises(RenderError, match="mistral-common: .*Tool call id"):
        r.render(msgs, [READ])


def test_mistral_unknown_version_is_refused() -> None:
    with pytest.raises(ValueError, match="not one of v1, v2, v3, v7, tekken"):
        renderer_from_spec("mistral-common:v99")


def _mistral_template(version: str) -> str:
    chat_templates = pytest.importorskip("mistral_common.integrations.chat_templates.chat_templates")
    from replay.render.mistral import mistral_tokenizer_file

    return chat_templates.convert_tokenizer_to_chat_template(mistral_tokenizer_file(version), use_special_token_variables=False)


@pytest.mark.parametrize("version", ["v7", "tekken"])
def test_chat_template_vs_encoder_counts_token_differences(version: str) -> None:
    """Mistral's generated chat template (old/new) against mistral-common (reference), by token ids.

    m1: `read` with a description and no strict: client-fields renders it token-identical to the
    encoder; model-dump adds "strict": null (and nothing else) to the template's tool JSON.
    m2: `edit` without description: the template leaves the key out, the encoder writes "".
    """
    enc = renderer_from_spec(f"mistral-common:{version}")
    cfg = AuditConfig(renderer=ChatTemplateRenderer(_mistral_template(version), name="chat-template:mistral"), reference_renderer=enc)
    sers = serializers("model-dump", "client-fields", "as-sent")

    rows = {r["side"]: r for r in render_exchange(exchange("m1", [READ]), cfg, sers)}
    assert all(r.get("error") is None for r in rows.values())
    ref_text, ref_ids = enc.render_ids(MESSAGES, [READ])
    assert rows["reference"]["prompt_tokens"] == len(ref_ids)
    assert rows["reference"]["renderer"] == enc.name and rows["new"]["renderer"] == "chat-template:mistral"
    # client-fields: same ids as the encoder
    assert rows["new"]["prompt_ids_sha256"] == rows["reference"]["prompt_ids_sha256"]
    assert rows["new"]["tokens_differing"] == 0 and rows["new"]["prompt_tokens"] == len(ref_ids)
    # model-dump: the leaked `"strict": null` (and `"description"` kept) diverge
    old_text = cfg.renderer.render(MESSAGES, [get_serializer("model-dump")(READ)])
    assert '"strict": null' in old_text
    old_ids = enc.tokenizer.ids(old_text)
    assert rows["old"]["prompt_ids_sha256"] != rows["reference"]["prompt_ids_sha256"]
    assert rows["old"]["prompt_tokens"] == len(old_ids)
    assert rows["old"]["tokens_differing"] == tokens_differing(old_ids, ref_ids)
    # the change is one inserted member: the prompt grows by its 5 tokens, and the differing span
    # is 7 tokens on the old side (its edges tokenize differently from the reference's, measured)
    assert old_text.replace(', "strict": null', "") == cfg.renderer.render(MESSAGES, [READ])
    assert len(old_ids) - len(ref_ids) == len(enc.tokenizer.ids(', "strict": null')) == 5
    assert rows["old"]["tokens_differing"] == 7

    rows = {r["side"]: r for r in render_exchange(exchange("m2", [EDIT_NO_DESC]), cfg, sers)}
    assert rows["new"]["prompt_ids_sha256"] != rows["reference"]["prompt_ids_sha256"]
    assert rows["new"]["tokens_differing"] > 0
    assert '"description": ""' in enc.render(MESSAGES, [EDIT_NO_DESC])


def test_planted_strict_null_serializer_diverges_from_mistral_common(tmp_path: Path) -> None:
    """A serializer that leaks `strict: null` (client-fields plus the null) must diverge from the
    mistral-common reference even when the template is Mistral's own."""
    plugin = tmp_path / "leaky.py"
    plugin.write_text(
        "from replay.tools import client_fields\n"
        "def leaky(tool):\n"
        "    out = client_fields(tool)\n"
        "    out['function']['strict'] = out['function'].get('strict')\n"
        "    return out\n",
        encoding="utf-8",
    )
    enc = renderer_from_spec("mistral-common:tekken")
    cfg = AuditConfig(renderer=ChatTemplateRenderer(_mistral_template("tekken")), reference_renderer=enc)
    sers = {"old": get_serializer("client-fields"), "new": get_serializer(f"{plugin}:leaky"), "reference": get_serializer("as-sent")}
    rows = {r["side"]: r for r in render_exchange(exchange("m1", [READ]), cfg, sers)}
    assert rows["old"]["tokens_differing"] == 0
    assert rows["new"]["prompt_ids_sha256"] != rows["reference"]["prompt_ids_sha256"]
    assert rows["new"]["tokens_differing"] > 0
    assert rows["new"]["leaked_nulls"] == [{"tool_index": 0, "path": "$.function.strict"}]


def test_tokens_differing() -> None:
    assert tokens_differing([1, 2, 3], [1, 2, 3]) == 0
    assert tokens_differing([1, 2, 9, 9, 3], [1, 2, 3]) == 2  # insertion
    assert tokens_differing([1, 3], [1, 2, 2, 3]) == 2  # deletion: the reference's span
    assert tokens_differing([1, 7, 3], [1, 8, 3]) == 1  # substitution
    assert tokens_differing([1, 1], [1]) == 1  # prefix and suffix do not overlap
    assert tokens_differing([], [4, 5]) == 2


# ------------------------------------------------------------------------------------ Harmony


def test_harmony_vocabulary_is_rebuilt_offline_byte_identical(tmp_path: Path) -> None:
    import inspect

    import tiktoken_ext.openai_public as public

    from replay.render.harmony import harmony_vocab_dir

    folder = harmony_vocab_dir(tmp_path / "tk")
    data = (folder / "o200k_base.tiktoken").read_bytes()
    expected = re.search(r'o200k_base\.tiktoken",\s*expected_hash="([0-9a-f]{64})"', inspect.getsource(public)).group(1)
    assert hashlib.sha256(data).hexdigest() == expected
    assert data.count(b"\n") == 199_998


def _harmony_direct(tools: list, date: str | None) -> list[int]:
    from openai_harmony import (
        Conversation,
        DeveloperContent,
        HarmonyEncodingName,
        Message,
        ReasoningEffort,
        Role,
        SystemContent,
        ToolDescription,
        load_harmony_encoding,
    )

    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    system = SystemContent.new().with_reasoning_effort(ReasoningEffort.MEDIUM)
    if date:
        system = system.with_conversation_start_date(date)
    dev = DeveloperContent.new().with_instructions("You edit files.").with_function_tools(
        [ToolDescription.new(t["name"], t["description"], parameters=t.get("parameters")) for t in tools]
    )
    conv = Conversation.from_messages(
        [
            Message.from_role_and_content(Role.SYSTEM, system),
            Message.from_role_and_content(Role.DEVELOPER, dev),
            Message.from_role_and_content(Role.USER, "Fix a.py"),
        ]
    )
    return list(enc.render_conversation_for_completion(conv, Role.ASSISTANT))


def test_harmony_renders_as_the_library() -> None:
    r = renderer_from_spec("harmony", date=datetime.date(2026, 1, 1))
    tools = [READ, get_serializer("empty-description")(EDIT_NO_DESC)]
    text, ids = r.render_ids(MESSAGES, tools)
    assert ids == _harmony_direct([{**READ["function"]}, {"name": "edit", "description": "", "parameters": PARAMS}], "2026-01-01")
    assert "Current date: 2026-01-01" in text
    assert "// Read a file\ntype read = " in text
    # description "": the tool renders without a comment line
    assert "\n\ntype edit = " in text and "//  \ntype edit" not in text
    assert r.tokenizer.ids(text) == ids


def test_harmony_none_description_fails_the_side_and_empty_renders() -> None:
    """model-dump passes description None: that side's row is a render failure (Harmony's
    ValidationError); empty-description passes "": it renders; as-sent of a tool without the
    key passes None too."""
    h = renderer_from_spec("harmony")
    cfg = AuditConfig(renderer=h, reference_renderer=h)
    rows = {r["side"]: r for r in render_exchange(exchange("g2", [EDIT_NO_DESC]), cfg, serializers("model-dump", "empty-description", "as-sent"))}
    assert "ValidationError" in rows["old"]["error"] and "description" in rows["old"]["error"]
    assert rows["old"].get("prompt_sha256") is None
    assert rows["new"].get("error") is None and rows["new"]["prompt_tokens"] > 0
    assert "ValidationError" in rows["reference"]["error"]
    # with a description every side renders, and identically (Harmony never writes strict)
    rows = {r["side"]: r for r in render_exchange(exchange("g1", [READ]), cfg, serializers("model-dump", "empty-description", "as-sent"))}
    assert all(r.get("error") is None for r in rows.values())
    assert len({r["prompt_ids_sha256"] for r in rows.values()}) == 1
    assert {r["tokens_differing"] for r in rows.values()} == {0}


# ------------------------------------------------------------------------------------ a checkpoint's encoder


def test_encoder_by_path_attaches_tools_to_the_system_message() -> None:
    r = renderer_from_spec(f"{FIXTURE}:encode_messages")
    msgs = copy.deepcopy(MESSAGES)
    text = r.render(msgs, [READ, EDIT_NO_DESC])
    assert msgs == MESSAGES  # the caller's messages are not modified
    assert text == (
        "<|bos|>[SYS]You edit files.[TOOLS]"
        '{"name": "read", "description": "Read a file", "parameters": ' + json.dumps(PARAMS) + "}\n"
        '{"name": "edit", "description": "", "parameters": ' + json.dumps(PARAMS) + "}"
        "[/TOOLS][/SYS][U]Fix a.py[/U][A]"
    )
    # no system message: an empty one carries the tools; thinking_mode got "chat"
    text = r.render([{"role": "user", "content": "hi"}], [READ])
    assert text.startswith("<|bos|>[SYS][TOOLS]{") and text.endswith("[U]hi[/U][A]")
    # an encoder error is a render error of that side
    with pytest.raises(RenderError, match="unknown role"):
        r.render([{"role": "tool", "content": "x"}], None)


def test_encoder_with_tools_argument_and_ids() -> None:
    a = EncoderRenderer(f"{FIXTURE}:encode_with_tools")
    b = EncoderRenderer(f"{FIXTURE}:encode_messages")
    assert a.render(MESSAGES, [READ]) == b.render(MESSAGES, [READ])
    c = EncoderRenderer(f"{FIXTURE}:encode_ids")
    text, ids = c.render_ids(MESSAGES, [READ])
    assert text == b.render(MESSAGES, [READ]) and ids == list(text.encode("utf-8"))


def test_encoder_reference_never_renders_strict() -> None:
    cfg = AuditConfig(renderer=EncoderRenderer(f"{FIXTURE}:encode_messages"), reference_renderer=EncoderRenderer(f"{FIXTURE}:encode_messages"))
    rows = {r["side"]: r for r in render_exchange(exchange("e1", [WRITE_STRICT]), cfg, serializers("model-dump", "client-fields", "as-sent"))}
    # this encoder drops strict: all three sides render one prompt
    assert len({r["prompt_sha256"] for r in rows.values()}) == 1
    assert rows["old"]["schemas_with_leaked_null"] == 0 and rows["new"]["prompt_ids_sha256"] is None


# ------------------------------------------------------------------------------------ --date

DATE_TEMPLATE = (
    "{{ bos_token }}Today is {{ strftime_now('%d %B %Y') }} ({{ date_string | default('no date_string') }}).\n"
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    "{% if tools %}{% for t in tools %}{{ t.function | tojson }}\n{% endfor %}{% endif %}assistant:"
)


def test_date_pins_strftime_now_and_date_string() -> None:
    a = ChatTemplateRenderer(DATE_TEMPLATE, date=datetime.date(2025, 3, 4))
    b = ChatTemplateRenderer(DATE_TEMPLATE, date=DEFAULT_DATE)
    assert a.render([{"role": "user", "content": "hi"}], None) == "Today is 04 March 2025 (04 Mar 2025).\nuser: hi\nassistant:"
    assert b.render([{"role": "user", "content": "hi"}], None) == "Today is 01 January 2026 (01 Jan 2026).\nuser: hi\nassistant:"
    # one template, two dates: each renderer renders its own (the compiled template is shared)
    assert a.render([], None).startswith("Today is 04 March 2025")
    # no date: transformers' clock
    today = datetime.date.today().strftime("%d %B %Y")
    assert ChatTemplateRenderer(DATE_TEMPLATE).render([], None).startswith(f"Today is {today} (no date_string)")


def _write_captures(folder: Path, lines: list[dict]) -> Path:
    path = folder / "captures.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _renders(run: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(run / "renders.parquet").to_pylist()


def test_cli_date_default_is_pinned_and_recorded(tmp_path: Path) -> None:
    tmpl = tmp_path / "dated.jinja"
    tmpl.write_text(DATE_TEMPLATE, encoding="utf-8")
    cap = _write_captures(tmp_path, [{"id": "d1", "route": "chat.completions", "request": {"model": "x", "messages": [{"role": "user", "content": "hi"}]}}])
    shas = []
    for name, extra in (("a", []), ("b", []), ("c", ["--date", "2025-03-04"])):
        res = runner.invoke(app, ["audit", str(cap), "--out", str(tmp_path / name), "--chat-template", str(tmpl), "-q", *extra])
        assert res.exit_code == 0, res.output
        shas.append({r["side"]: r["prompt_sha256"] for r in _renders(tmp_path / name)}["reference"])
    expected = "Today is 01 January 2026 (01 Jan 2026).\nuser: hi\nassistant:"
    assert shas[0] == shas[1] == hashlib.sha256(expected.encode()).hexdigest()
    assert shas[2] == hashlib.sha256(expected.replace("01 January 2026 (01 Jan 2026)", "04 March 2025 (04 Mar 2025)").encode()).hexdigest()
    assert json.loads((tmp_path / "a" / "run.json").read_text())["options"]["date"] == "2026-01-01"
    assert json.loads((tmp_path / "c" / "run.json").read_text())["options"]["date"] == "2025-03-04"
    bad = runner.invoke(app, ["audit", str(cap), "--out", str(tmp_path / "d"), "--date", "01/02/2026", "-q"])
    assert bad.exit_code == 2 and "YYYY-MM-DD" in bad.output


# ------------------------------------------------------------------------------------ end to end

MISTRAL = "mistralai/Mistral-Small-3.2-24B-Instruct-2506"
GPT_OSS = "openai/gpt-oss-20b"


def _query(run: Path, name: str) -> list[dict]:
    res = runner.invoke(app, ["query", name, "--run", str(run), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_cli_audit_mistral_with_reference_encoder(tmp_path: Path) -> None:
    """Mistral's generated v7 template (old model-dump, new client-fields) against mistral-common:v7.

    m1 `read` (description, no strict): old leaks strict null, new equals the encoder.
    m2 `edit` (no description): old leaks description/strict null; new leaves description out,
    the encoder writes "": both diverge. m3 no tools: all equal. m4 `write` (strict: true):
    the template writes strict, the encoder never does: both diverge.
    The server logged m1's and m3's prompts (see below).
    """
    tmpl = tmp_path / "mistral_v7.jinja"
    tmpl.write_text(_mistral_template("v7"), encoding="utf-8")
    reqs = [
        ("m1", MESSAGES, [READ]),
        ("m2", [{"role": "user", "content": "Fix it"}], [EDIT_NO_DESC]),
        ("m3", [{"role": "user", "content": "Hello"}], None),
        ("m4", [{"role": "user", "content": "Write b.py"}], [WRITE_STRICT]),
    ]
    enc = renderer_from_spec("mistral-common:v7")
    lines = []
    for xid, msgs, tools in reqs:
        req = {"model": MISTRAL, "messages": msgs}
        if tools:
            req["tools"] = tools
        lines.append({"id": xid, "route": "chat.completions", "request": req})
    # the server's logged prompts: m1 exactly the encoder's ids; m3 the same text, but with
    # "[INST]" tokenized as plain text (a special token not recognised): equal text, other ids
    text1, ids1 = enc.render_ids(MESSAGES, [READ])
    lines[0]["server"] = {"prompt": text1, "prompt_token_ids": ids1}
    text3, ids3 = enc.render_ids([{"role": "user", "content": "Hello"}], None)
    inst = enc.tokenizer.specials["[INST]"]
    split = [t for i in ids3 for t in (enc.tokenizer.raw.encode("[INST]", bos=False, eos=False) if i == inst else [i])]
    assert split != ids3
    lines[2]["server"] = {"prompt": text3, "prompt_token_ids": split}
    cap = _write_captures(tmp_path, lines)
    run = tmp_path / "run"
    res = runner.invoke(
        app, ["audit", str(cap), "--out", str(run), "--chat-template", str(tmpl), "--reference-encoder", "mistral-common:v7", "-q"]
    )
    assert res.exit_code == 0, res.output
    assert "Against the reference encoder `mistral-common:v7`" in res.output
    by = {r["side"]: r for r in _query(run, "summary")}
    assert by["old"]["prompts_diverged_from_reference"] == 3
    assert by["new"]["prompts_diverged_from_reference"] == 2
    assert (by["old"]["render_failures"], by["new"]["render_failures"], by["reference"]["render_failures"]) == (0, 0, 0)
    # served: compared by token ids, so m3's equal text with other ids diverges and m1 does not
    assert by["served"]["prompts_diverged_from_reference"] == 1
    div = {r["comparison"]: r for r in _query(run, "divergent_prompts")}
    assert (div["served vs reference"]["prompts_compared"], div["served vs reference"]["prompts_diverged"]) == (2, 1)
    assert (div["new vs reference"]["prompts_compared"], div["new vs reference"]["prompts_diverged"]) == (4, 2)
    rows = {(r["exchange_id"], r["side"]): r for r in _renders(run)}
    assert rows[("m1", "new")]["tokens_differing"] == 0 and rows[("m3", "old")]["tokens_differing"] == 0
    assert rows[("m3", "served")]["prompt_sha256"] == rows[("m3", "reference")]["prompt_sha256"]
    assert rows[("m3", "served")]["tokens_differing"] == len(split) - len(ids3) + 1
    assert div["new vs reference"]["tokens_differing_total"] == rows[("m2", "new")]["tokens_differing"] + rows[("m4", "new")]["tokens_differing"] > 0
    assert rows[("m1", "reference")]["prompt_tokens"] == len(enc.render_ids(MESSAGES, [READ])[1])
    meta = json.loads((run / "run.json").read_text())
    assert meta["options"]["reference_encoder"] == "mistral-common:v7"


def test_cli_audit_gpt_oss_with_harmony(tmp_path: Path) -> None:
    """gpt-oss requests through Harmony on every side: model-dump (old) passes description None for
    the tool declared without one and fails that request; empty-description (new) renders it; the
    reference (as-sent: the key is absent, so None) fails it too."""
    weather = {"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": PARAMS}}
    clock = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
    lines = [
        {"id": "g1", "route": "chat.completions", "request": {"model": GPT_OSS, "messages": MESSAGES, "tools": [weather]}},
        {"id": "g2", "route": "chat.completions", "request": {"model": GPT_OSS, "messages": [{"role": "user", "content": "Time?"}], "tools": [clock]}},
        {"id": "g3", "route": "chat.completions", "request": {"model": GPT_OSS, "messages": [{"role": "user", "content": "Hi"}]}},
    ]
    cap = _write_captures(tmp_path, lines)
    run = tmp_path / "run"
    res = runner.invoke(
        app,
        ["audit", str(cap), "--out", str(run), "--renderer", "harmony", "--reference-encoder", "harmony", "--new-serializer", "empty-description", "-q"],
    )
    assert res.exit_code == 0, res.output
    by = {r["side"]: r for r in _query(run, "summary")}
    assert (by["old"]["render_failures"], by["new"]["render_failures"], by["reference"]["render_failures"]) == (1, 0, 1)
    assert (by["old"]["prompts_diverged_from_reference"], by["new"]["prompts_diverged_from_reference"]) == (0, 0)
    rows = {(r["exchange_id"], r["side"]): r for r in _renders(run)}
    assert "ValidationError" in rows[("g2", "old")]["error"]
    assert rows[("g2", "new")]["error"] is None
    assert rows[("g1", "old")]["prompt_ids_sha256"] == rows[("g1", "reference")]["prompt_ids_sha256"]


def test_cli_reference_encoder_file_of_our_own(tmp_path: Path) -> None:
    cap = _write_captures(
        tmp_path, [{"id": "e1", "route": "chat.completions", "request": {"model": "x", "messages": MESSAGES, "tools": [WRITE_STRICT]}}]
    )
    run = tmp_path / "run"
    res = runner.invoke(app, ["audit", str(cap), "--out", str(run), "--reference-encoder", f"{FIXTURE}:encode_messages", "-q"])
    assert res.exit_code == 0, res.output
    rows = {r["side"]: r for r in _renders(run)}
    expected = EncoderRenderer(f"{FIXTURE}:encode_messages").render(MESSAGES, [WRITE_STRICT])
    assert rows["reference"]["prompt_sha256"] == hashlib.sha256(expected.encode()).hexdigest()
    assert rows["reference"]["renderer"] == f"encoder:{FIXTURE}:encode_messages"
    assert rows["old"]["renderer"] == "json-tools"
    bad = runner.invoke(app, ["audit", str(cap), "--out", str(tmp_path / "r2"), "--reference-encoder", f"{FIXTURE}:nope", "-q"])
    assert bad.exit_code == 1 and "has no attribute" in bad.output
