"""The stream checks (name-repeat, call-id, finish-reason, the served gate, `improved`) end to end
on samples/: the checks added with the SDK assembly and the one judge (issue 10).

Each new check is shown by a planted faulty plugin (``file.py:Class``, written by the tests into a
temporary folder), a subclass of the built-in Hermes parser with one fault:

- ``RepeatName``: sends each call as an opening delta with its name and a second delta with the
  name again and the arguments (the OpenAI SDK concatenates the names: the client calls ``readread``);
- ``ChangeId``: sends each call as an opening delta with one id and the arguments with another (the
  SDK concatenates the ids);
- ``CloseTruncated``: at ``finish()``, closes a ``<tool_call>`` block the model never finished
  (the capture ended with ``length``) and sends it as a call with the arguments it invents (shown
  on two of the agent's turns cut short as ``max_tokens`` cuts them: turn 2 inside its call's
  ``command`` string, turn 7 mid-word; the server sent what it held as content, with ``finish_reason: length``);
- ``DropLast`` / ``DropLastIfLong``: hold the call deltas and drop the last call's, under every
  chunking / only when more than 20 deltas were fed (a partial fix: ``improved``).

Every expected count is derived from how the samples are written (samples/make_samples.py): the
coding agent's 7 turns on Qwen3 (Hermes), 6 with a call (turn 3 with two), the served faults
planted in turns 4, 5 and 6 (so the old side's replay does not reproduce them: ``unreliable``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.parsers.hermes import HermesParser
from replay.verdicts import FAIL_ON_EXIT, FailOnError, parse_fail_on

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
AGENT = SAMPLES / "coding-agent.jsonl"
CHUNKINGS = "recorded,whole,char,fixed-3,fixed-13"

PLUGINS = '''
import json
from replay.parsers.base import CallDelta, StreamDelta
from replay.parsers.hermes import HermesParser


class RepeatName(HermesParser):
    def _fix(self, d):
        calls = []
        for c in d.calls:  # the name on an opening delta, and again with the arguments
            calls += [CallDelta(c.index, c.name, ""), CallDelta(c.index, c.name, c.arguments)] if c.name is not None else [c]
        return StreamDelta(content=d.content, reasoning=d.reasoning, calls=calls)

    def feed(self, delta):
        return self._fix(super().feed(delta))

    def finish(self):
        return self._fix(super().finish())


class ChangeId(HermesParser):
    def _fix(self, d):
        calls = []
        for c in d.calls:  # an opening delta with one id, the arguments with another
            if c.name is not None:
                calls += [CallDelta(c.index, c.name, "", id=f"call_{c.index}_a"), CallDelta(c.index, None, c.arguments, id=f"call_{c.index}_b")]
            else:
                calls.append(c)
        return StreamDelta(content=d.content, reasoning=d.reasoning, calls=calls)

    def feed(self, delta):
        return self._fix(super().feed(delta))

    def finish(self):
        return self._fix(super().finish())


def _close(text):
    stack, in_str, esc = [], False, False
    for ch in text:
        if in_str:
            esc, in_str = (False, True) if esc else (ch == "\\\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    return text + ('"' if in_str else "") + "".join(reversed(stack))


class CloseTruncated(HermesParser):
    def __init__(self, tools=None, **kw):
        super().__init__(tools, **kw)
        self._next = 0

    def feed(self, delta):
        d = super().feed(delta)
        self._next = max([self._next] + [c.index + 1 for c in d.calls])
        return d

    def finish(self):
        d = super().finish()
        head, sep, rest = d.content.partition("<tool_call>")
        if sep and "</tool_call>" not in rest:
            obj = json.loads(_close(rest.strip()))
            args = json.dumps(obj.get("arguments", {}), ensure_ascii=False)
            return StreamDelta(content=head, reasoning=d.reasoning, calls=[*d.calls, CallDelta(self._next, obj["name"], args)])
        return d


class DropLast(HermesParser):
    limit = 0

    def __init__(self, tools=None, **kw):
        super().__init__(tools, **kw)
        self._held, self._fed = [], 0

    def feed(self, delta):
        self._fed += 1
        d = super().feed(delta)
        self._held.extend(d.calls)
        return StreamDelta(content=d.content, reasoning=d.reasoning)

    def finish(self):
        d = super().finish()
        held = self._held + list(d.calls)
        gone = max((c.index for c in held), default=None) if self._fed > self.limit else None
        return StreamDelta(content=d.content, reasoning=d.reasoning, calls=[c for c in held if c.index != gone])


class DropLastIfLong(DropLast):
    limit = 20


class OwnStop(HermesParser):
    """As a framework adapter reports its framework's own finish_reason: on what finish()
    returns (here `stop` on every stream, as a server that says stop while it sent calls)."""

    def finish(self):
        d = super().finish()
        d.finish_reason = "stop"
        return d
'''

COLUMNS = ("fixed", "improved", "broken", "same-ok", "still-wrong", "changed-wrong", "unreliable", "wrong")


@pytest.fixture(scope="module")
def plugins(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("plugins") / "planted.py"
    p.write_text(PLUGINS, encoding="utf-8")
    return p


def audit(capture: Path, out: Path, *args: str, code: int = 0) -> dict[str, dict]:
    result = runner.invoke(app, ["audit", str(capture), "--out", str(out), "--quiet", "--chunkings", CHUNKINGS, *args])
    assert result.exit_code == code, result.output
    return verdicts(out)


def verdicts(run: Path) -> dict[str, dict]:
    result = runner.invoke(app, ["query", "verdicts", "--run", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {r["check"]: r for r in json.loads(result.output)}
    for check, r in rows.items():  # every exchange is in exactly one column
        assert sum(r[c] or 0 for c in COLUMNS) == r["exchanges"], (check, r)
    return rows


def query_json(run: Path, *args: str) -> list[dict]:
    result = runner.invoke(app, ["query", *args, "--run", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def row(**counts: int) -> dict:
    out = {c: 0 for c in COLUMNS if c != "wrong"}
    out.update({k.replace("_", "-"): v for k, v in counts.items()})
    return out


def side(r: dict) -> dict:
    return {c: r[c] for c in COLUMNS if c != "wrong"}


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


# what the coding agent's samples are, from how they are written
AGENT_LINES = lines(AGENT)
REF_CALLS = {x["id"]: len(HermesParser().parse(x["server"]["output_text"]).calls) for x in AGENT_LINES}
UNFAITHFUL = {"agent-04", "agent-05", "agent-06"}  # the served faults planted in turns 4, 5, 6
WITH_CALLS = {x for x, n in REF_CALLS.items() if n}
RELIABLE_WITH_CALLS = len(WITH_CALLS - UNFAITHFUL)
N = len(AGENT_LINES)
STREAM_ROWS = ("replay-error", "client-error", "dropped-call", "non-json-join", "argument-mismatch", "content-leak",
               "name-repeat", "call-id", "finish-reason", "streaming-fault", "semantic-diff")


def _cut(line: dict, at: int, xid: str) -> dict:
    """A sample line as if ``max_tokens`` had cut its completion at char ``at``: the raw completion,
    its recorded steps cut there, and a served stream of that text as content, ending ``length``."""
    text = line["server"]["output_text"][:at]
    steps, n = [], 0
    for s in line["server"]["steps"]:
        if n >= at:
            break
        steps.append(s[: at - n])
        n += len(steps[-1])
    chunk = lambda delta, fr=None: json.dumps({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": fr}]})
    stream = [chunk({"role": "assistant", "content": ""})] + [chunk({"content": text[i : i + 12]}) for i in range(0, len(text), 12)]
    return {**line, "id": xid, "server": {"output_text": text, "steps": steps}, "stream": [*stream, chunk({}, "length"), "[DONE]"]}


@pytest.fixture(scope="module")
def truncated(tmp_path_factory) -> Path:
    by = {x["id"]: x for x in AGENT_LINES}
    t2, t7 = by["agent-02"]["server"]["output_text"], by["agent-07"]["server"]["output_text"]
    cut = [_cut(by["agent-02"], t2.index("tests/test_config") + 5, "trunc-02"), _cut(by["agent-07"], len(t7) - 9, "trunc-07")]
    path = tmp_path_factory.mktemp("trunc") / "truncated.jsonl"
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in cut), encoding="utf-8")
    return path


def test_the_samples_have_the_shapes_the_counts_rely_on(truncated):
    assert REF_CALLS == {"agent-01": 1, "agent-02": 1, "agent-03": 2, "agent-04": 1, "agent-05": 1, "agent-06": 1, "agent-07": 0}
    assert (N, RELIABLE_WITH_CALLS) == (7, 3)
    trunc = lines(truncated)
    assert [x["id"] for x in trunc] == ["trunc-02", "trunc-07"]
    assert all("".join(x["server"]["steps"]) == x["server"]["output_text"] for x in trunc)
    assert "<tool_call>" in trunc[0]["server"]["output_text"] and "</tool_call>" not in trunc[0]["server"]["output_text"]
    assert [HermesParser().parse(x["server"]["output_text"]).calls for x in trunc] == [(), ()]


def test_built_in_parsers_on_the_agent_samples(tmp_path):
    got = audit(AGENT, tmp_path / "r")
    for check in STREAM_ROWS:
        assert side(got[check]) == row(same_ok=N - len(UNFAITHFUL), unreliable=len(UNFAITHFUL)), check
    # served rows, from the captured streams and the one response body alone
    served = {k: (r["same-ok"], r["wrong"], r["exchanges"]) for k, r in got.items() if k.startswith("served:")}
    assert served == {
        "served:client-error": (6, 0, 6),
        "served:name-repeat": (6, 0, 6),
        "served:call-id": (7, 0, 7),
        "served:index-fault": (6, 0, 6),
        "served:non-json-join": (5, 2, 7),  # turn 4 streamed empty arguments, turn 5 raw text before the JSON
        "served:content-leak": (7, 0, 7),
        "served:finish-reason": (7, 0, 7),
    }


def test_name_repeat_planted(plugins, tmp_path):
    got = audit(AGENT, tmp_path / "r", "--new-parser", f"{plugins}:RepeatName")
    faulty = row(broken=RELIABLE_WITH_CALLS, same_ok=N - len(WITH_CALLS), unreliable=len(UNFAITHFUL))
    assert side(got["name-repeat"]) == faulty
    assert side(got["argument-mismatch"]) == faulty  # the client calls "readread": not the reference's call
    assert side(got["streaming-fault"]) == faulty  # nor its own whole-text parse's
    for check in set(STREAM_ROWS) - {"name-repeat", "argument-mismatch", "streaming-fault"}:
        assert side(got[check]) == row(same_ok=N - len(UNFAITHFUL), unreliable=len(UNFAITHFUL)), check
    calls = query_json(tmp_path / "r", "--sql", "SELECT name, names_sent FROM calls WHERE side = 'new' AND chunking = 'char' AND exchange_id = 'agent-01'")
    assert calls == [{"name": "readread", "names_sent": 2}]
    # the gate
    res = runner.invoke(app, ["report", "--run", str(tmp_path / "r"), "--fail-on", "name-repeat:broken>2"])
    assert res.exit_code == FAIL_ON_EXIT and "name-repeat has 3 broken exchanges (limit 2)" in res.output
    assert runner.invoke(app, ["report", "--run", str(tmp_path / "r"), "--fail-on", "name-repeat:broken>3"]).exit_code == 0


def test_call_id_planted(plugins, tmp_path):
    got = audit(AGENT, tmp_path / "r", "--new-parser", f"{plugins}:ChangeId")
    assert side(got["call-id"]) == row(broken=RELIABLE_WITH_CALLS, same_ok=N - len(WITH_CALLS), unreliable=len(UNFAITHFUL))
    for check in set(STREAM_ROWS) - {"call-id"}:  # an id is no part of the call's name or arguments
        assert side(got[check]) == row(same_ok=N - len(UNFAITHFUL), unreliable=len(UNFAITHFUL)), check
    ids = query_json(tmp_path / "r", "--sql", "SELECT id, id_fault FROM calls WHERE side = 'new' AND chunking = 'whole' AND exchange_id = 'agent-02'")
    assert ids == [{"id": "call_0_acall_0_b", "id_fault": True}]  # concatenated, as the SDK does
    old = query_json(tmp_path / "r", "--sql", "SELECT DISTINCT id FROM calls WHERE side = 'old' AND chunking <> 'parse' AND exchange_id = 'agent-03' ORDER BY id")
    assert old == [{"id": "call_0"}, {"id": "call_1"}]  # the serving layer's ids for a parser without its own


def test_finish_reason_planted_closes_a_truncated_call(plugins, truncated, tmp_path):
    base = audit(truncated, tmp_path / "base")
    for check in STREAM_ROWS:
        assert side(base[check]) == row(same_ok=2), check
    finish = query_json(tmp_path / "base", "--sql", "SELECT DISTINCT finish_reason FROM streams WHERE side <> 'reference'")
    assert finish == [{"finish_reason": "length"}]  # a truncated capture replays as truncated
    assert (base["served:content-leak"]["wrong"], base["served:finish-reason"]["wrong"]) == (1, 0)  # the server sent the block as content
    got = audit(truncated, tmp_path / "r", "--new-parser", f"{plugins}:CloseTruncated")
    faulty = row(broken=1, same_ok=1)
    assert side(got["finish-reason"]) == faulty
    assert side(got["argument-mismatch"]) == faulty  # a call the reference does not have
    assert side(got["streaming-fault"]) == faulty
    for check in set(STREAM_ROWS) - {"finish-reason", "argument-mismatch", "streaming-fault"}:
        assert side(got[check]) == row(same_ok=2), check
    invented = query_json(tmp_path / "r", "--sql", "SELECT arguments FROM calls WHERE side = 'new' AND chunking = 'whole'")
    assert [json.loads(c["arguments"]) for c in invented] == [{"command": "pytest -q tests"}]


@pytest.mark.parametrize("where", ["in process", "worker"])
def test_finish_reason_of_the_side_itself_in_process_and_in_a_worker(plugins, tmp_path, where):
    """A side's own finish_reason (what its finish() reports, as a framework adapter does) reaches
    the verdicts the same whether the side runs here or in a worker process (``--new-python``):
    every reliable exchange with calls is broken on finish-reason, nothing else changes."""
    import sys

    worker = ["--new-python", sys.executable] if where == "worker" else []
    got = audit(AGENT, tmp_path / "r", "--new-parser", f"{plugins}:OwnStop", *worker)
    assert side(got["finish-reason"]) == row(broken=RELIABLE_WITH_CALLS, same_ok=N - len(WITH_CALLS), unreliable=len(UNFAITHFUL))
    for check in set(STREAM_ROWS) - {"finish-reason"}:
        assert side(got[check]) == row(same_ok=N - len(UNFAITHFUL), unreliable=len(UNFAITHFUL)), check
    reasons = query_json(tmp_path / "r", "--sql", "SELECT side, exchange_id, list(DISTINCT finish_reason) AS r FROM streams "
                         "WHERE side IN ('old', 'new') AND chunking <> 'parse' GROUP BY ALL")
    got_reasons = {(r["side"], r["exchange_id"]): r["r"] for r in reasons}
    assert len(got_reasons) == 2 * N
    for x in REF_CALLS:  # the new side's own `stop` on every replay; the old side's rule: tool_calls iff calls
        assert got_reasons[("new", x)] == ["stop"]
        assert got_reasons[("old", x)] == ["tool_calls" if x in WITH_CALLS else "stop"], x
    if where == "worker":
        assert json.loads((tmp_path / "r" / "run.json").read_text())["sides"]["new"]["python"] == sys.executable


def test_served_gate(tmp_path):
    run = tmp_path / "r"
    audit(AGENT, run)
    res = runner.invoke(app, ["report", "--run", str(run), "--fail-on", "served:non-json-join>1"])
    assert res.exit_code == FAIL_ON_EXIT and "served:non-json-join is wrong on 2 exchanges (limit 1)" in res.output
    assert runner.invoke(app, ["report", "--run", str(run), "--fail-on", "served:non-json-join>2"]).exit_code == 0
    assert runner.invoke(app, ["report", "--run", str(run), "--fail-on", "served:name-repeat"]).exit_code == 0
    assert parse_fail_on("served:call-id>3").check == "served:call-id"
    with pytest.raises(FailOnError, match="unknown served check"):
        parse_fail_on("served:nope>1")


def test_improved_is_a_partial_fix_and_verdict_exchanges_shows_old_to_new(plugins, tmp_path):
    # the agent's turns without what was served (no fidelity to judge: nothing unreliable)
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps({k: v for k, v in x.items() if k not in ("stream", "response")}) + "\n" for x in AGENT_LINES), encoding="utf-8")
    got = audit(bare, tmp_path / "r", "--old-parser", f"{plugins}:DropLast", "--new-parser", f"{plugins}:DropLastIfLong")
    assert side(got["dropped-call"]) == row(improved=len(WITH_CALLS), same_ok=N - len(WITH_CALLS))
    rows = {r["exchange_id"]: r for r in query_json(tmp_path / "r", "verdict_exchanges") if r["check"] == "dropped-call"}
    assert {x: r["verdict"] for x, r in rows.items()} == {x: "improved" for x in WITH_CALLS}
    # old fails under every streamed chunking; new only where more than 20 deltas were fed
    assert rows["agent-02"]["failing_chunkings"] == "char, fixed-13, fixed-3, recorded, whole -> char, fixed-3, recorded"
    # the same fault on both sides: still-wrong, not improved
    same = audit(bare, tmp_path / "s", "--old-parser", f"{plugins}:DropLast", "--new-parser", f"{plugins}:DropLast")
    assert side(same["dropped-call"]) == row(still_wrong=len(WITH_CALLS), same_ok=N - len(WITH_CALLS))
