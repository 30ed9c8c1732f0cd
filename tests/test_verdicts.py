"""Verdicts, --fail-on, replay fidelity and content leaks, on captures written here.

The planted parsers are plugins (``file.py:Class``) written by the tests into a temporary folder,
each a subclass of the built-in Hermes parser with one fault:

- ``DropLast``: holds the call deltas and, at ``finish()``, sends all but the last call's;
- ``DropFirst``: the same, dropping the first call (one call: the same outcome as DropLast);
- ``RawFirst``: sends ``raw: `` (model text) before the JSON on each call's first delta;
- ``LeakEnd``: at ``finish()`` adds ``</tool_call>`` to the content when it streamed a call.

Every expected count is derived independently of the SQL: from the reference whole-text parse of
each capture line (``HermesParser().parse``), or from how the capture lines are written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from replay.cli import app
from replay.parsers.hermes import HermesParser
from replay.mask import redact_text, redact_tool
from replay.verdicts import FAIL_ON_EXIT, FailOnError, markup_leak, parse_fail_on

runner = CliRunner()
MODEL = "Qwen/Qwen3-8B"
CHUNKINGS = "recorded,whole,char,fixed-3,fixed-13"
TOOLS = [
    {"type": "function", "function": {"name": "read", "description": "Read a file.", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}, "strict": False}},
    {"type": "function", "function": {"name": "bash", "description": "Run a command.", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}}, "strict": False}},
]

PLUGINS = '''
from replay.parsers.base import CallDelta, StreamDelta
from replay.parsers.hermes import HermesParser


class DropLast(HermesParser):
    pick = max

    def __init__(self, tools=None, **kw):
        super().__init__(tools, **kw)
        self._held = []

    def feed(self, delta):
        d = super().feed(delta)
        self._held.extend(d.calls)
        return StreamDelta(content=d.content, reasoning=d.reasoning)

    def finish(self):
        d = super().finish()
        held = self._held + list(d.calls)
        gone = type(self).pick((c.index for c in held), default=None)
        return StreamDelta(content=d.content, reasoning=d.reasoning, calls=[c for c in held if c.index != gone])


class DropFirst(DropLast):
    pick = min


class RawFirst(HermesParser):
    def _fix(self, d):
        calls = [CallDelta(c.index, c.name, "raw: " + c.arguments) if c.name is not None else c for c in d.calls]
        return StreamDelta(content=d.content, reasoning=d.reasoning, calls=calls)

    def feed(self, delta):
        return self._fix(super().feed(delta))

    def finish(self):
        return self._fix(super().finish())


class Boom(HermesParser):
    def feed(self, delta):
        raise RuntimeError("planted")


class Raises(HermesParser):
    def parse(self, text):
        raise RuntimeError("planted")

    def feed(self, delta):
        raise RuntimeError("planted")


class LeakEnd(HermesParser):
    def __init__(self, tools=None, **kw):
        super().__init__(tools, **kw)
        self._called = False

    def feed(self, delta):
        d = super().feed(delta)
        self._called = self._called or bool(d.calls)
        return d

    def finish(self):
        d = super().finish()
        if self._called or d.calls:
            d.content += "</tool_call>"
        return d
'''


def call(name: str, args: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


#: Raw completions in Hermes syntax: no call, one, two, three, malformed, text around calls.
OUTPUTS = [
    "",
    "Nothing to do here.",
    call("read", {"path": "a.py"}),
    "Let me look.\n" + call("read", {"path": "a.py"}) + "\n" + call("bash", {"command": "ls -la"}),
    call("read", {"path": "x"}) + call("read", {"path": "y"}) + call("bash", {"command": "pwd"}),
    "<tool_call>\n{not json at all}\n</tool_call>",  # the reference itself leaves this markup in content
    call("read", {"path": "é/ü.py", "n": [1, 2.5, {"x": None}]}),
    "Before. " + call("bash", {"command": "echo '</tool_call>'"}) + " after.",
    "<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"b.py\"}}",  # stream stopped before the end marker
]


def steps_of(text: str) -> list[str]:
    """Recorded steps: markers whole, the rest in 4-char pieces."""
    out, i = [], 0
    while i < len(text):
        for m in ("<tool_call>", "</tool_call>"):
            if text.startswith(m, i):
                out.append(m)
                i += len(m)
                break
        else:
            out.append(text[i : i + 4])
            i += 4
    return out


def write_lines(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    return path


def request(tools=TOOLS) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": "fix the bug in a.py"}], "tools": tools}


@pytest.fixture(scope="module")
def stream_capture(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cap")
    lines = []
    for i, text in enumerate(OUTPUTS):
        server = {"output_text": text}
        if i % 2 == 0:
            server["steps"] = steps_of(text)
        lines.append({"id": f"x{i}", "route": "chat.completions", "model": MODEL, "request": request(), "server": server})
    return write_lines(d / "stream.jsonl", lines)


@pytest.fixture(scope="module")
def plugins(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("plugins") / "faulty_parsers.py"
    p.write_text(PLUGINS, encoding="utf-8")
    return p


def calls_in(text: str) -> int:
    return len(HermesParser().parse(text).calls)


AFFECTED = sum(1 for t in OUTPUTS if calls_in(t) > 0)  # exchanges whose whole-text parse has a call
ONE_CALL = sum(1 for t in OUTPUTS if calls_in(t) == 1)
MANY_CALLS = sum(1 for t in OUTPUTS if calls_in(t) > 1)


def audit(capture: Path, out: Path, *args: str) -> dict[str, dict]:
    result = runner.invoke(app, ["audit", str(capture), "--out", str(out), "--quiet", "--chunkings", CHUNKINGS, *args])
    assert result.exit_code == 0, result.output
    return verdicts(out)


def verdicts(run: Path) -> dict[str, dict]:
    result = runner.invoke(app, ["query", "verdicts", "--run", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    return {r["check"]: r for r in json.loads(result.output)}


def query_json(run: Path, *args: str) -> list[dict]:
    result = runner.invoke(app, ["query", *args, "--run", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


STREAM_CHECKS = ("replay-error", "dropped-call", "non-json-join", "argument-mismatch", "content-leak")
#: The checks added with the SDK assembly and the self-consistency judgment (issue 10).
NEW_CHECKS = ("client-error", "name-repeat", "call-id", "finish-reason", "streaming-fault", "semantic-diff")
ALL_CHECKS = ("null-leak", "prompt-divergence", "render-failure", "replay-error", "client-error", "dropped-call", "non-json-join",
              "argument-mismatch", "content-leak", "name-repeat", "call-id", "finish-reason", "streaming-fault", "semantic-diff")
SERVED_ROWS = ("served:client-error", "served:name-repeat", "served:call-id", "served:index-fault", "served:non-json-join",
               "served:content-leak", "served:finish-reason")
COLUMNS = ("fixed", "improved", "broken", "same-ok", "still-wrong", "changed-wrong", "unreliable")
ZERO = {"fixed": 0, "improved": 0, "broken": 0, "still-wrong": 0, "changed-wrong": 0, "unreliable": 0}


def only(row: dict) -> dict:
    return {k: row[k] for k in COLUMNS}


def test_the_capture_has_the_shapes_the_counts_rely_on():
    assert [calls_in(t) for t in OUTPUTS] == [0, 0, 1, 2, 3, 0, 1, 1, 1]
    assert (AFFECTED, ONE_CALL, MANY_CALLS) == (6, 4, 2)


def test_verdict_table_has_a_row_per_check_and_its_columns(stream_capture, tmp_path):
    got = audit(stream_capture, tmp_path / "r")
    assert list(got) == [*ALL_CHECKS, *SERVED_ROWS]
    first = next(iter(got.values()))
    assert list(first) == ["check", *COLUMNS, "wrong", "exchanges", "not-judged"]
    # the built-in parser on both sides: every stream check same-ok on every exchange
    for check in STREAM_CHECKS + NEW_CHECKS:
        assert only(got[check]) == {**ZERO, "same-ok": len(OUTPUTS)}, check
    # nothing was served in this capture: no served row judges anything (null counts, not 0)
    for row in SERVED_ROWS:
        assert (got[row]["same-ok"], got[row]["wrong"], got[row]["exchanges"]) == (None, None, 0), row


@pytest.mark.parametrize(
    "plugin, check",
    [("DropLast", "dropped-call"), ("RawFirst", "non-json-join"), ("LeakEnd", "content-leak")],
)
def test_planted_faulty_parser_old_is_fixed_and_new_is_broken(stream_capture, plugins, tmp_path, plugin, check):
    spec = f"{plugins}:{plugin}"
    fixed = audit(stream_capture, tmp_path / "fixed", "--old-parser", spec)
    assert only(fixed[check]) == {**ZERO, "fixed": AFFECTED, "same-ok": len(OUTPUTS) - AFFECTED}
    # a fault of the streaming path: the stream differs from the side's own whole-text parse too
    assert only(fixed["streaming-fault"]) == {**ZERO, "fixed": AFFECTED, "same-ok": len(OUTPUTS) - AFFECTED}
    for other in STREAM_CHECKS + NEW_CHECKS:
        if other not in (check, "streaming-fault"):
            assert only(fixed[other]) == {**ZERO, "same-ok": len(OUTPUTS)}, other
    broken = audit(stream_capture, tmp_path / "broken", "--new-parser", spec)
    assert only(broken[check]) == {**ZERO, "broken": AFFECTED, "same-ok": len(OUTPUTS) - AFFECTED}
    assert only(broken["streaming-fault"]) == {**ZERO, "broken": AFFECTED, "same-ok": len(OUTPUTS) - AFFECTED}
    assert only(broken["semantic-diff"]) == {**ZERO, "same-ok": len(OUTPUTS)}  # the whole-text parse is inherited
    # the drill-down lists exactly the affected exchanges, each with a streamed smallest failing chunking
    rows = [r for r in query_json(tmp_path / "broken", "verdict_exchanges") if r["check"] == check]
    assert sorted(r["exchange_id"] for r in rows) == sorted(f"x{i}" for i, t in enumerate(OUTPUTS) if calls_in(t))
    assert all(r["verdict"] == "broken" and r["old_failing"] == 0 for r in rows)
    # the whole-text parse is inherited (right): it never fails, so a streamed chunking is smallest
    assert {r["smallest_failing_chunking"] for r in rows} == {"whole"}
    assert {r["smallest_failing_deltas"] for r in rows} == {1}


def test_still_wrong_and_changed_wrong(stream_capture, plugins, tmp_path):
    """DropLast vs DropFirst: the same missing call when there is one call (still-wrong), another
    missing call when there are several (changed-wrong); DropLast on both sides: still-wrong."""
    got = audit(stream_capture, tmp_path / "a", "--old-parser", f"{plugins}:DropLast", "--new-parser", f"{plugins}:DropFirst")
    assert only(got["dropped-call"]) == {**ZERO, "still-wrong": ONE_CALL, "changed-wrong": MANY_CALLS, "same-ok": len(OUTPUTS) - AFFECTED}
    # per chunking (view verdict_pairs): a streamed chunking of a many-call exchange is changed-wrong,
    # of a one-call exchange still-wrong; the inherited whole-text parse is right on both sides
    pairs = query_json(tmp_path / "a", "--sql", "SELECT exchange_id, chunking, verdict FROM verdict_pairs WHERE \"check\" = 'dropped-call'")
    by = {(r["exchange_id"], r["chunking"]): r["verdict"] for r in pairs}
    for i, text in enumerate(OUTPUTS):
        n = calls_in(text)
        for chunking in ("whole", "char", "fixed-3", "fixed-13") + (("recorded",) if i % 2 == 0 else ()):
            assert by[(f"x{i}", chunking)] == ("same-ok" if n == 0 else "still-wrong" if n == 1 else "changed-wrong"), (i, chunking)
        assert by[(f"x{i}", "parse")] == "same-ok"
    assert len(by) == len(OUTPUTS) * 5 + (len(OUTPUTS) + 1) // 2
    got = audit(stream_capture, tmp_path / "b", "--old-parser", f"{plugins}:DropLast", "--new-parser", f"{plugins}:DropLast")
    assert only(got["dropped-call"]) == {**ZERO, "still-wrong": AFFECTED, "same-ok": len(OUTPUTS) - AFFECTED}
    # two faults at once: one check fixed, another broken, on the same exchanges
    got = audit(stream_capture, tmp_path / "c", "--old-parser", f"{plugins}:DropLast", "--new-parser", f"{plugins}:RawFirst")
    assert (got["dropped-call"]["fixed"], got["non-json-join"]["broken"]) == (AFFECTED, AFFECTED)


#: smallest_failures as first written, over every (exchange, check, chunking) pair: the oracle of
#: the query, which reads each exchange's first failing chunking from verdicts_by_exchange instead.
PAIRWISE_SMALLEST = """
WITH bad AS (SELECT * FROM verdicts_by_exchange WHERE verdict IN ('broken', 'still-wrong')),
counts AS (SELECT "check", count(*) FILTER (WHERE verdict = 'broken') AS broken,
                  count(*) FILTER (WHERE verdict = 'still-wrong') AS still_wrong FROM bad GROUP BY "check"),
candidates AS (
    SELECT p."check", p.exchange_id, b.verdict, p.chunking, p.new_deltas AS deltas,
           row_number() OVER (PARTITION BY p."check"
                              ORDER BY p.chunking IN ('parse', 'render'), p.new_deltas, b.verdict = 'still-wrong', p.exchange_id, p.chunking) AS rank
    FROM verdict_pairs p JOIN bad b USING (exchange_id, "check")
    WHERE p.new_wrong
)
SELECT c."check", n.broken, n.still_wrong, c.exchange_id, c.verdict, c.chunking, c.deltas
FROM candidates c JOIN counts n USING ("check") WHERE c.rank = 1 ORDER BY c."check"
"""


def test_smallest_failures_is_the_first_failing_pair(stream_capture, plugins, tmp_path):
    """Per check, the exemplar of smallest_failures is the first of all (exchange, chunking) pairs
    where the new side fails on a broken or still-wrong exchange (streamed chunkings before the
    whole-text parse, fewest deltas, broken before still-wrong, then exchange id): the same row as
    the pairwise query over verdict_pairs, on runs with broken (new drops a call, leaks markup) and
    still-wrong exchanges (both drop the same call) under four chunkings whose delta counts differ by exchange."""
    for name, args in (("broken", ("--new-parser", f"{plugins}:DropFirst")),
                       ("still", ("--old-parser", f"{plugins}:DropLast", "--new-parser", f"{plugins}:DropFirst")),
                       ("leak", ("--old-parser", f"{plugins}:DropLast", "--new-parser", f"{plugins}:LeakEnd"))):
        run = tmp_path / name
        # no `whole` (1 delta on every exchange): the exchanges' smallest failing chunkings differ
        result = runner.invoke(app, ["audit", str(stream_capture), "--out", str(run), "--quiet", "--chunkings", "recorded,char,fixed-3,fixed-13", *args])
        assert result.exit_code == 0, result.output
        want = query_json(run, "--sql", PAIRWISE_SMALLEST)
        got = sorted(query_json(run, "smallest_failures"), key=lambda r: r["check"])
        assert got == want and len(got) >= 1, name
        assert all(r["chunking"] not in ("parse", "render") and r["deltas"] > 0 for r in got), name


#: verdicts_by_exchange's per-exchange lists and firsts as one aggregate over every pair of
#: verdict_pairs (as first written): the oracle of the view, which takes them from the wrong pairs only.
PAIRWISE_BY_EXCHANGE = """
SELECT exchange_id, "check",
       coalesce(list_sort(list(chunking) FILTER (WHERE old_wrong)), []) AS old_failing_chunkings,
       coalesce(list_sort(list(chunking) FILTER (WHERE new_wrong)), []) AS new_failing_chunkings,
       CASE WHEN bool_or(new_wrong)
            THEN first(chunking ORDER BY chunking IN ('parse', 'render'), new_deltas, chunking) FILTER (WHERE new_wrong)
            ELSE first(chunking ORDER BY chunking IN ('parse', 'render'), old_deltas, chunking) FILTER (WHERE old_wrong) END AS smallest_failing_chunking,
       CASE WHEN bool_or(new_wrong)
            THEN first(new_deltas ORDER BY chunking IN ('parse', 'render'), new_deltas, chunking) FILTER (WHERE new_wrong)
            ELSE first(old_deltas ORDER BY chunking IN ('parse', 'render'), old_deltas, chunking) FILTER (WHERE old_wrong) END AS smallest_failing_deltas,
       count(*) AS chunkings_judged
FROM verdict_pairs GROUP BY ALL ORDER BY ALL
"""


def test_verdicts_by_exchange_lists_match_every_pair(stream_capture, plugins, tmp_path):
    """verdicts_by_exchange aggregates its failing-chunking lists and smallest failing chunking
    from the pairs where a side is wrong; they equal one aggregate over every pair of
    verdict_pairs on runs where old alone fails (fixed), new alone (broken), or both (still-wrong,
    changed-wrong), under four chunkings whose delta counts differ."""
    cols = 'exchange_id, "check", old_failing_chunkings, new_failing_chunkings, smallest_failing_chunking, smallest_failing_deltas, chunkings_judged'
    for name, args in (("fixed", ("--old-parser", f"{plugins}:DropLast")),
                       ("broken", ("--new-parser", f"{plugins}:DropFirst")),
                       ("both", ("--old-parser", f"{plugins}:DropLast", "--new-parser", f"{plugins}:DropFirst"))):
        run = tmp_path / name
        result = runner.invoke(app, ["audit", str(stream_capture), "--out", str(run), "--quiet", "--chunkings", "recorded,char,fixed-3,fixed-13", *args])
        assert result.exit_code == 0, result.output
        want = query_json(run, "--sql", PAIRWISE_BY_EXCHANGE)
        got = query_json(run, "--sql", f"SELECT {cols} FROM verdicts_by_exchange ORDER BY ALL")
        assert got == want, name
        sides = {"fixed": ("old",), "broken": ("new",), "both": ("old", "new")}[name]
        for side in sides:  # the lists the run exercises are not empty
            assert any(r[f"{side}_failing_chunkings"] for r in got if r["check"] == "dropped-call"), (name, side)


def test_a_parser_that_always_raises_is_not_judged_on_the_other_stream_checks(stream_capture, plugins, tmp_path):
    """An old parser that raises in its whole-text parse and under every chunking: replay-error
    judges it (fixed on every exchange); no other stream check has an old result to judge, so each
    counts every exchange as not-judged with the reason, and every row still sums to `exchanges`."""
    got = audit(stream_capture, tmp_path / "r", "--old-parser", f"{plugins}:Raises")
    n = len(OUTPUTS)
    assert {**only(got["replay-error"]), "not-judged": got["replay-error"]["not-judged"]} == {**ZERO, "fixed": n, "same-ok": 0, "not-judged": 0}
    # the empty completion feeds no delta: its streamed chunkings only call finish(), which does not
    # raise, so the checks judged on streamed chunkings judge it (same-ok); the two that read the
    # side's own whole-text parse (streaming-fault, semantic-diff) cannot
    empty = sum(1 for t in OUTPUTS if t == "")
    assert empty == 1
    for check in NEW_CHECKS + tuple(c for c in STREAM_CHECKS if c != "replay-error"):
        ok = 0 if check in ("streaming-fault", "semantic-diff") else empty
        assert {**only(got[check]), "not-judged": got[check]["not-judged"], "exchanges": got[check]["exchanges"]} == {
            **ZERO, "same-ok": ok, "not-judged": n - ok, "exchanges": n}, check
    for check in ("null-leak", "prompt-divergence", "render-failure"):  # the render checks do not read the parser
        assert (got[check]["not-judged"], got[check]["exchanges"]) == (0, n), check
    rows = [r for r in query_json(tmp_path / "r", "verdict_exchanges") if r["verdict"] == "not-judged"]
    assert len(rows) == n * (len(NEW_CHECKS) + len(STREAM_CHECKS) - 1) - empty * (len(NEW_CHECKS) + len(STREAM_CHECKS) - 1 - 2)
    assert {r["reason"] for r in rows} == {"old parser raised: RuntimeError: planted"}
    # the same parser on the new side: the same exchanges, "new parser raised"
    got = audit(stream_capture, tmp_path / "n", "--new-parser", f"{plugins}:Raises")
    assert (got["replay-error"]["broken"], got["dropped-call"]["not-judged"], got["dropped-call"]["exchanges"]) == (n, n - empty, n)
    rows = [r for r in query_json(tmp_path / "n", "verdict_exchanges") if r["verdict"] == "not-judged"]
    assert {r["reason"] for r in rows} == {"new parser raised: RuntimeError: planted"}


def test_content_leak_counts_only_markup_beyond_the_reference(stream_capture, plugins, tmp_path):
    audit(stream_capture, tmp_path / "r", "--new-parser", f"{plugins}:LeakEnd")
    rows = pq.read_table(tmp_path / "r" / "streams.parquet").to_pylist()
    ref = {r["exchange_id"]: r for r in rows if r["side"] == "reference"}
    # the reference keeps the malformed block (x5) and the stopped one (x8, no end marker: it is a call) as ...
    assert {x for x, r in ref.items() if r["content_leak"]} == {"x5"}
    # ... and the built-in side leaving the same markup is not a leak
    assert not any(r["content_leak"] for r in rows if r["side"] == "old")
    assert {r["exchange_id"] for r in rows if r["side"] == "new" and r["content_leak"]} == {f"x{i}" for i, t in enumerate(OUTPUTS) if calls_in(t)}


def test_markup_leak_rule():
    markers = ("<tool_call>", "</tool_call>")
    assert markup_leak("a <tool_call> b", None, markers)
    assert not markup_leak("a <tool_call> b", "a <tool_call> b", markers)
    assert markup_leak("<tool_call><tool_call>", "<tool_call>", markers)
    assert not markup_leak("", "x", markers) and not markup_leak(None, None, markers)
    assert markup_leak("[TOOL_CALLS]x", "", ("[TOOL_CALLS]",))


# ------------------------------------------------------------------------------- null leaks
def tool(name: str, *, description: bool = True, parameters: bool = True, strict: bool | None = True) -> dict:
    fn: dict = {"name": name}
    if description:
        fn["description"] = f"The {name} tool."
    if parameters:
        fn["parameters"] = {"type": "object", "properties": {"q": {"type": "string"}}}
    if strict is not None:
        fn["strict"] = strict
    return {"type": "function", "function": fn}


#: (tools of the request, expected leak with model-dump / client-fields / exclude-none)
NULL_CASES = [
    ([tool("a")], (False, False, False)),
    ([tool("a"), tool("b", strict=False)], (False, False, False)),
    ([tool("a")], (False, False, False)),
    ([tool("a", strict=None)], (True, False, False)),  # model-dump writes strict: null
    ([tool("a"), tool("b", strict=None)], (True, False, False)),
    ([tool("a", description=False)], (True, False, False)),  # description: null
    ([tool("a", description=False, parameters=False, strict=None)], (True, True, False)),  # client-fields: parameters: null
    (None, (False, False, False)),  # no tools
]


@pytest.fixture(scope="module")
def null_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("nulls")
    lines = []
    for i, (tools, _) in enumerate(NULL_CASES):
        req = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        if tools is not None:
            req["tools"] = tools
        lines.append({"id": f"n{i}", "route": "chat.completions", "request": req})
    cap = write_lines(d / "nulls.jsonl", lines)
    out = d / "run"
    result = runner.invoke(app, ["ingest", str(cap), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    return out


SER = ("model-dump", "client-fields", "exclude-none")


@pytest.mark.parametrize("old, new", [(a, b) for a in SER for b in SER])
def test_null_leak_verdicts_by_serializer(null_run, old, new):
    result = runner.invoke(app, ["render", "--run", str(null_run), "--old-serializer", old, "--new-serializer", new, "--quiet"])
    assert result.exit_code == 0, result.output
    o, n = SER.index(old), SER.index(new)
    expected = {**ZERO, "same-ok": 0}
    for _, leaks in NULL_CASES:
        lo, ln = leaks[o], leaks[n]
        if not lo and not ln:
            expected["same-ok"] += 1
        elif lo and not ln:
            expected["fixed"] += 1
        elif ln and not lo:
            expected["broken"] += 1
        elif old == new or (lo, ln) == (True, True) and {old, new} != {"model-dump", "client-fields"}:
            expected["still-wrong"] += 1
        elif (old, new) == ("model-dump", "client-fields"):  # model-dump leaks strict/description/parameters,
            expected["improved"] += 1  # client-fields only parameters: a strict subset of the leaked paths
        else:
            expected["changed-wrong"] += 1
    assert only(verdicts(null_run)["null-leak"]) == expected


def test_null_leak_exact_counts_model_dump_vs_client_fields(null_run):
    result = runner.invoke(app, ["render", "--run", str(null_run), "--quiet"])  # defaults: model-dump -> client-fields
    assert result.exit_code == 0, result.output
    assert only(verdicts(null_run)["null-leak"]) == {**ZERO, "fixed": 3, "same-ok": 4, "improved": 1}


# ------------------------------------------------------------------------------- --fail-on
def test_fail_on_exit_codes(stream_capture, plugins, tmp_path):
    run = tmp_path / "r"
    audit(stream_capture, run, "--new-parser", f"{plugins}:DropLast")

    def report(*gates: str) -> tuple[int, str]:
        res = runner.invoke(app, ["report", "--run", str(run), *[a for g in gates for a in ("--fail-on", g)]])
        return res.exit_code, res.output

    code, out = report("broken")
    assert code == FAIL_ON_EXIT == 3 and f"dropped-call has {AFFECTED} broken exchanges (limit 0)" in out
    assert report(f"dropped-call:broken>{AFFECTED}")[0] == 0
    assert report(f"dropped-call:broken>{AFFECTED - 1}")[0] == 3
    assert report("non-json-join:broken", "still-wrong", "changed-wrong")[0] == 0
    code, out = report("non-json-join:broken", "dropped-call:broken>2")
    tripped = [line for line in out.splitlines() if line.startswith("failed:")]
    assert code == 3 and tripped == [f"failed: --fail-on dropped-call:broken>2: dropped-call has {AFFECTED} broken exchanges (limit 2)"]
    assert report("fixed")[0] == 0  # TOOLS are complete: no serializer leaks a null; the parsers fix nothing
    assert report(f"same-ok>{len(OUTPUTS) - 1}")[0] == 3 and report(f"same-ok>{len(OUTPUTS)}")[0] == 0
    for bad in ("nope:broken", "dropped-call:great", "broken>", "dropped-call:broken>-1", ""):
        code, out = report(bad)
        assert code == 2 and "--fail-on" in out, bad
    # audit takes it too, and checks it before doing any work
    res = runner.invoke(app, ["audit", str(stream_capture), "--out", str(tmp_path / "never"), "--quiet", "--fail-on", "x:y:z"])
    assert res.exit_code == 2 and not (tmp_path / "never").exists()
    res = runner.invoke(
        app, ["audit", str(stream_capture), "--out", str(tmp_path / "a"), "--quiet", "--chunkings", "whole",
              "--old-parser", f"{plugins}:RawFirst", "--fail-on", "non-json-join:fixed>5"]
    )
    assert res.exit_code == 3 and f"non-json-join has {AFFECTED} fixed" in res.output


def test_parse_fail_on():
    g = parse_fail_on(" null-leak:still-wrong>10 ")
    assert (g.check, g.verdict, g.limit) == ("null-leak", "still-wrong", 10)
    assert (parse_fail_on("broken").check, parse_fail_on("broken").limit) == (None, 0)
    with pytest.raises(FailOnError):
        parse_fail_on("null-leak:broken>=1")


# ------------------------------------------------------------------------------- report, exemplars
def test_report_leads_with_verdicts_and_a_redacted_exemplar(stream_capture, plugins, tmp_path):
    run = tmp_path / "r"
    audit(stream_capture, run, "--new-parser", f"{plugins}:DropLast")
    text = (run / "report.md").read_text(encoding="utf-8")
    assert text.splitlines()[2] == "## Verdicts"
    assert f"| dropped-call | 0 | 0 | {AFFECTED} | {len(OUTPUTS) - AFFECTED} | 0 | 0 | 0 | – | {len(OUTPUTS)} |" in text
    assert f"### dropped-call: {AFFECTED} broken, 0 still wrong" in text
    assert "smallest failing chunking `whole` (1 delta)" in text
    doc = json.loads((run / "exemplars" / "dropped-call.json").read_text(encoding="utf-8"))
    assert doc["verdict"] == "broken" and doc["chunking"] == "whole" and doc["redacted"] is True
    assert doc["exchange_id"] == "x2"  # fewest deltas, then the first exchange id
    assert doc["tool_names"] == ["bash", "read"]
    assert doc["completion"] == '<tool_call>\n{"name": "read", "arguments": {"path": "x.xx"}}\n</tool_call>'
    assert doc["delta_texts"] == [doc["completion"]]
    assert [c["name"] for c in doc["expected"]["calls"]] == ["read"] and doc["got_new"]["calls"] == []
    assert doc["got_new"]["finish_reason"] == "stop"
    assert "a.py" not in json.dumps(doc) and "a.py" not in text.split("## Summary")[0]
    res = runner.invoke(app, ["report", "--run", str(run), "--exemplar-text"])
    assert res.exit_code == 0
    doc = json.loads((run / "exemplars" / "dropped-call.json").read_text(encoding="utf-8"))
    assert doc["redacted"] is False and '"a.py"' in doc["completion"]


def test_render_exemplar_masks_descriptions_only(null_run, tmp_path):
    result = runner.invoke(app, ["render", "--run", str(null_run), "--new-serializer", "model-dump", "--quiet"])
    assert result.exit_code == 0, result.output
    leaking = sum(1 for _, leaks in NULL_CASES if leaks[0])
    assert (verdicts(null_run)["null-leak"]["still-wrong"]) == leaking
    doc = json.loads((null_run / "exemplars" / "null-leak.json").read_text(encoding="utf-8"))
    assert doc["exchange_id"] == "n3" and doc["chunking"] == "render" and doc["verdict"] == "still-wrong"
    assert doc["tools"] == [{"type": "function", "function": {"name": "a", "description": "xxx a xxxx.",  # the tool name a is kept
                             "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]
    assert doc["old"]["leaked_nulls"] == doc["new"]["leaked_nulls"] == ["0 $.function.strict"]
    assert doc["reference"]["leaked_nulls"] == []
    assert redact_tool({"enum": ["Paris", 3], "name": "city"}, {"city"}) == {"enum": ["xxxxx", 3], "name": "city"}


def test_redact_text_keeps_shape_names_and_markers():
    text = 'Hi Zoë!\n<tool_call>\n{"name": "read", "arguments": {"path": "a/b.py", "n": 12.5e3, "s": "\\u00e9\\n"}}\n</tool_call>'
    red = redact_text(text, keep={"read", "path"}, markers=("<tool_call>", "</tool_call>"))
    assert len(red) == len(text)
    assert red == 'xx xxx!\n<tool_call>\n{"name": "read", "arguments": {"path": "x/x.xx", "x": 10.1e1, "x": "\\u0078\\n"}}\n</tool_call>'
    body = red.split("<tool_call>\n")[1].split("\n</tool_call>")[0]
    assert json.loads(body)["name"] == "read"


# ------------------------------------------------------------------------------- fidelity
def chunk(delta: dict, finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def served(content: str, calls: list[tuple[str, str]], finish: str) -> list:
    out = [chunk({"role": "assistant", "content": ""})]
    if content:
        out.append(chunk({"content": content}))
    for i, (name, args) in enumerate(calls):
        out.append(chunk({"tool_calls": [{"index": i, "id": f"call_{i}_zz", "type": "function", "function": {"name": name, "arguments": ""}}]}))
        for k in range(0, len(args), 5):
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[k : k + 5]}}]}))
    out.append(chunk({}, finish))
    return out + ["[DONE]"]


def test_fidelity_and_unreliable_verdicts(tmp_path):
    raw = "Hi\n" + '<tool_call>\n{"name": "read", "arguments": {"b": 1, "a": [2, 3]}}\n</tool_call>'
    cases = [
        # (id, served content, served calls, finish, with steps, reproduced)
        ("f1", "Hi", [("read", '{"a": [2,3], "b": 1.0}')], "tool_calls", True, True),  # key order, spacing, 1.0, ids
        ("f2", "Hi", [("read", '{"a": [2, 3], "b": 2}')], "tool_calls", False, False),  # other value
        ("f3", "Hi", [], "stop", True, False),  # the call never reached the client
        ("f4", "Hello", [("read", '{"b": 1, "a": [2, 3]}')], "tool_calls", False, False),  # other content
        ("f5", "  Hi \n", [("read", '{"b": 1, "a": [2, 3]}')], "tool_calls", True, True),  # whitespace at the ends
        ("f6", "Hi", [("read", '{"b": 1, "a": [2, 3]}')], "length", False, True),  # length is not compared
    ]
    lines = []
    for xid, content, calls, finish, with_steps, _ in cases:
        server = {"output_text": raw, **({"steps": steps_of(raw)} if with_steps else {})}
        lines.append({"id": xid, "route": "chat.completions", "model": MODEL, "request": {**request(), "stream": True},
                      "stream": served(content, calls, finish), "server": server})
    lines.append({"id": "f7", "route": "chat.completions", "model": MODEL, "request": request(), "server": {"output_text": raw}})
    cap = write_lines(tmp_path / "fid.jsonl", lines)
    res = runner.invoke(app, ["ingest", str(cap), "--out", str(tmp_path / "i"), "--quiet"])
    assert res.exit_code == 0 and query_json(tmp_path / "i", "fidelity")[0]["exchanges_compared"] == 0  # nothing replayed yet
    run = tmp_path / "r"
    got = audit(cap, run)
    assert query_json(run, "fidelity") == [
        {"exchanges_compared": 6, "reproduced": 3, "not_reproduced": 3, "calls_differ": 2, "content_differs": 1,
         "finish_reason_differs": 1, "replay_errors": 0}
    ]
    per = {r["exchange_id"]: r for r in query_json(run, "--sql", "SELECT * FROM fidelity_exchanges")}
    assert {x: r["faithful"] for x, r in per.items()} == {c[0]: c[5] for c in cases}
    assert {x: r["replay_chunking"] for x, r in per.items()} == {c[0]: "recorded" if c[4] else "parse" for c in cases}
    for check in STREAM_CHECKS:  # each exchange in one column: the 3 unreliable ones are in no other
        assert got[check]["unreliable"] == 3 and got[check]["same-ok"] == 4 and got[check]["exchanges"] == 7, check
    for check in ("null-leak", "prompt-divergence", "render-failure"):
        assert got[check]["unreliable"] == 0, check
    text = (run / "report.md").read_text(encoding="utf-8")
    assert "did not reproduce what was served on 3 of 6 exchanges" in text
    # an old parser that raises while streaming: the recorded replays (f1, f3, f5) are errors, the
    # whole-text parses (f2, f4, f6) are compared as before; steps that do not join fall back to the parse
    lines[-1]["id"], lines[-1]["server"]["steps"] = "f8", ["no", "pe"]
    lines[-1]["response"] = {"choices": [{"message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}]}
    cap = write_lines(tmp_path / "fid2.jsonl", lines)
    plugin = tmp_path / "boom.py"
    plugin.write_text(PLUGINS, encoding="utf-8")
    got = audit(cap, tmp_path / "b", "--old-parser", f"{plugin}:Boom")
    assert query_json(tmp_path / "b", "fidelity") == [
        # f2 and f8 (its call was not served) differ in calls, f4 in content, f8 in finish_reason; f6 reproduced
        {"exchanges_compared": 7, "reproduced": 1, "not_reproduced": 6, "calls_differ": 2, "content_differs": 1,
         "finish_reason_differs": 1, "replay_errors": 3}
    ]
    per = {r["exchange_id"]: r for r in query_json(tmp_path / "b", "--sql", "SELECT * FROM fidelity_exchanges")}
    assert per["f8"]["replay_chunking"] == "parse" and not per["f8"]["faithful"]  # the call was not served
    assert only(got["replay-error"]) == {**ZERO, "fixed": 1, "same-ok": 0, "unreliable": 6}
