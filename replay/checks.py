"""The registry of checks: each check declared once, and the JSON-object rule they share.

Every check of the verdict table is one :class:`Check` in :data:`REGISTRY`: its name, its row
order, its scope (``render``: judged per side on ``renders``; ``stream``: per side and chunking on
``streams`` / ``calls``; ``served``: on what clients received, the ``served_*`` columns of
``exchanges``), the per-row facts it reads (columns the stages compute, :mod:`replay.judge` and
:mod:`replay.capture.served`), its predicate as SQL and its report sentence. Everything else
reads this list:

- :func:`replay.sql.connect` registers it as the table ``checks(name, ord, scope, facts,
  sentence)``, which ``queries/*.sql`` join to instead of listing check names, and expands the
  predicates into the views (:func:`expand_sql`: ``{{checks:render}}``, ``{{checks:stream}}``,
  ``{{checks:served_applies}}``, ``{{checks:served_wrong}}``);
- :mod:`replay.verdicts` derives ``CHECKS``, ``SERVED_CHECKS`` and ``CHECK_TABLE`` (``--fail-on``
  parsing, the report's charts, the unjudged-gate warning) from it.

Adding a check is one entry here (and its facts in the stage that computes them) and one test.

The JSON rule (:func:`json_object`) is the one predicate ``non-json-join`` (replay sides,
``calls.arguments_json_ok``) and ``served:non-json-join`` (``exchanges.served_non_json_calls``)
both use.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["Check", "REGISTRY", "by_scope", "names", "json_object", "expand_sql", "table"]

SCOPES = ("render", "stream", "served")


@dataclass(frozen=True)
class Check:
    """One check of the verdict table.

    ``name``: the row's ``check`` value (``served:NAME`` for the served scope); ``ord``: its row
    order; ``scope``: ``render`` | ``stream`` | ``served``; ``facts``: the ``table.column`` facts
    its predicate reads; ``sentence``: what a wrong row means, in the words of the report.

    Predicates are DuckDB SQL. ``render`` and ``stream`` checks are judged per side row of the view
    ``verdict_pairs`` (``queries/_verdict_pairs.sql``, alias ``r``: the side's ``renders`` row with
    ``ref`` the reference's, or the side's ``rows`` CTE row): ``applies`` (the row is judged),
    ``wrong``, ``outcome`` (two wrong sides with another outcome are ``changed-wrong``) and
    ``items`` (a list a strict subset of which is ``improved``; null for most). ``served`` checks
    are judged per ``exchanges`` row (alias ``e``): ``applies`` and ``wrong``.
    """

    name: str
    ord: int
    scope: str
    facts: tuple[str, ...]
    sentence: str
    applies: str
    wrong: str
    outcome: str = "NULL::VARCHAR"
    items: str = "NULL::VARCHAR[]"
    explained: bool = False  # report.md's verdict section spells out its sentence


_NOT_PARSE = "NOT r.raised AND r.chunking <> 'parse'"

#: Every check, in the verdict table's row order.
REGISTRY: tuple[Check, ...] = (
    # ---------------------------------------------------------------- render (chunking `render`)
    Check("null-leak", 0, "render", ("renders.leak_in_prompt", "renders.leaked_nulls"),
          "the side's prompt carries a null the client never sent",
          applies="r.error IS NULL", wrong="coalesce(r.leak_in_prompt, len(r.leaked_nulls) > 0)",
          outcome="r.leaked::VARCHAR", items="r.leaked"),
    # by token ids when both prompts have them (a reference encoder's, a server's: prompt_ids_sha256),
    # as queries/divergent_prompts.sql compares them; else by text
    Check("prompt-divergence", 1, "render", ("renders.prompt_sha256", "renders.prompt_ids_sha256"),
          "the side's prompt differs from the reference's",
          applies="r.error IS NULL AND ref.prompt_sha256 IS NOT NULL",
          wrong="CASE WHEN r.prompt_ids_sha256 IS NOT NULL AND ref.prompt_ids_sha256 IS NOT NULL "
                "THEN r.prompt_ids_sha256 <> ref.prompt_ids_sha256 ELSE r.prompt_sha256 IS DISTINCT FROM ref.prompt_sha256 END",
          outcome="coalesce(r.prompt_ids_sha256, r.prompt_sha256)"),
    Check("render-failure", 2, "render", ("renders.error",),
          "the side could not serialize or render the request",
          applies="true", wrong="r.error IS NOT NULL", outcome="r.error"),
    # ------------------------------------------------------- stream (per chunking, `parse` too)
    Check("replay-error", 3, "stream", ("streams.error",),
          "the side's parser raised (or timed out)",
          applies="true", wrong="r.raised", outcome="r.error"),
    Check("client-error", 4, "stream", ("streams.client_error",),
          "the client SDK raised on the side's stream",
          applies=_NOT_PARSE, wrong="r.client_error IS NOT NULL", outcome="r.client_error"),
    Check("dropped-call", 5, "stream", ("calls.index", "streams.finish_reason"),
          "a call of the reference parse is missing",
          applies="NOT r.raised", wrong="len(r.missing) > 0",
          outcome="r.missing::VARCHAR || ' ' || coalesce(r.finish_reason, '')"),
    Check("non-json-join", 6, "stream", ("calls.arguments_json_ok",),
          "a call's joined arguments are not a JSON object",
          applies="NOT r.raised", wrong="len(coalesce(r.bad_json, [])) > 0", outcome="r.bad_json::VARCHAR"),
    Check("argument-mismatch", 7, "stream", ("calls.arguments_json_ok", "calls.matches_whole"),
          "a call's arguments parse but differ from the reference",
          applies="NOT r.raised", wrong="len(coalesce(r.mismatched, [])) > 0", outcome="r.mismatched::VARCHAR"),
    Check("content-leak", 8, "stream", ("streams.content_leak",),
          "call markup in the content beyond what the reference leaves",
          applies="NOT r.raised", wrong="r.content_leak", outcome="r.content"),
    Check("name-repeat", 9, "stream", ("streams.name_repeats", "calls.names_sent"),
          "a call's name came in more than one delta",
          applies=_NOT_PARSE, wrong="r.name_repeats > 0", outcome="r.repeated::VARCHAR"),
    Check("call-id", 10, "stream", ("streams.id_faults", "calls.id_fault"),
          "a call's id is missing, sent twice, or another call's",
          applies=_NOT_PARSE, wrong="r.id_faults > 0", outcome="r.bad_ids::VARCHAR"),
    Check("finish-reason", 11, "stream", ("streams.finish_fault",),
          "the side's finish_reason is not what its calls imply",
          applies="NOT r.raised", wrong="r.finish_fault",
          outcome="coalesce(r.finish_reason, '') || ' ' || r.calls_key"),
    Check("streaming-fault", 12, "stream", ("streams.differs_from_own_parse",),
          "a side's stream differs from its own whole-text parse",
          applies="NOT r.raised AND r.chunking <> 'parse' AND r.differs_from_own_parse IS NOT NULL",
          wrong="coalesce(r.differs_from_own_parse, false)", outcome="r.content_key || ' ' || r.calls_key",
          explained=True),
    Check("semantic-diff", 13, "stream", ("streams.differs_from_reference",),
          "its whole-text parse differs from the reference's",
          applies="NOT r.raised AND r.chunking = 'parse'", wrong="r.differs_from_reference",
          outcome="r.content_key || ' ' || r.calls_key", explained=True),
    # ------------------------------------------------------- served (from the captures alone)
    Check("served:client-error", 100, "served", ("exchanges.served_chunks", "exchanges.served_client_error"),
          "the client SDK raised on the served stream",
          applies="e.served_chunks IS NOT NULL", wrong="e.served_client_error IS NOT NULL"),
    Check("served:name-repeat", 101, "served", ("exchanges.served_name_repeats",),
          "a call name was sent again for one index",
          applies="e.served_name_repeats IS NOT NULL", wrong="e.served_name_repeats > 0"),
    Check("served:call-id", 102, "served", ("exchanges.served_id_faults",),
          "a served call's id is missing, sent twice, or another call's",
          applies="e.served_id_faults IS NOT NULL", wrong="e.served_id_faults > 0"),
    Check("served:index-fault", 103, "served", ("exchanges.served_index_faults",),
          "a call index skips or goes back, or a fragment has no open call",
          applies="e.served_index_faults IS NOT NULL", wrong="e.served_index_faults > 0"),
    Check("served:non-json-join", 104, "served", ("exchanges.served_non_json_calls",),
          "a served call's joined arguments are not a JSON object",
          applies="e.served_non_json_calls IS NOT NULL", wrong="e.served_non_json_calls > 0"),
    Check("served:content-leak", 105, "served", ("exchanges.served_non_json_calls", "exchanges.served_markup"),
          "call markup of the model's family in the served content",
          applies="e.served_non_json_calls IS NOT NULL", wrong="e.served_markup IS NOT NULL"),
    Check("served:finish-reason", 106, "served", ("exchanges.served_stop_with_calls", "exchanges.served_finish_reason"),
          "finish_reason stop (end_turn) with calls, or tool_calls without any",
          applies="e.served_stop_with_calls IS NOT NULL",
          wrong="e.served_stop_with_calls OR (e.served_finish_reason = 'tool_calls' AND len(coalesce(e.served_tool_calls, [])) = 0)"),
)


def by_scope(*scopes: str) -> tuple[Check, ...]:
    """The checks of the given scopes (``render``, ``stream``, ``served``), in row order.
    Raises ValueError for an unknown scope."""
    bad = [s for s in scopes if s not in SCOPES]
    if bad:
        raise ValueError(f"unknown check scope {bad[0]!r}; scopes: {', '.join(SCOPES)}")
    return tuple(c for c in REGISTRY if c.scope in scopes)


def names(*scopes: str) -> tuple[str, ...]:
    """The names of the checks of the given scopes (all when none), in row order."""
    return tuple(c.name for c in (by_scope(*scopes) if scopes else REGISTRY))


def table() -> Any:
    """The registry as a pyarrow Table ``(name, ord, scope, facts, sentence)``, one row per check
    in row order: what :func:`replay.sql.connect` registers as the view ``checks``."""
    import pyarrow as pa

    return pa.table({
        "name": [c.name for c in REGISTRY],
        "ord": pa.array([c.ord for c in REGISTRY], pa.int32()),
        "scope": [c.scope for c in REGISTRY],
        "facts": [list(c.facts) for c in REGISTRY],
        "sentence": [c.sentence for c in REGISTRY],
    })


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _structs(scope: str) -> str:
    return "[" + ",\n            ".join(
        f"struct_pack(c := {_quote(c.name)}, applies := {c.applies}, wrong := {c.wrong}, "
        f"outcome := {c.outcome}, items := {c.items})"
        for c in by_scope(scope)
    ) + "]"


def _served_case(attr: str) -> str:
    whens = " ".join(f"WHEN {_quote(c.name)} THEN {getattr(c, attr)}" for c in by_scope("served"))
    return f"CASE k.check_name {whens} END"


_SNIPPETS = {
    "render": lambda: _structs("render"),
    "stream": lambda: _structs("stream"),
    "served_applies": lambda: _served_case("applies"),
    "served_wrong": lambda: _served_case("wrong"),
}
_MARK = re.compile(r"\{\{checks:(\w+)\}\}")


def expand_sql(text: str) -> str:
    """``text`` (a ``queries/*.sql`` file) with each ``{{checks:KIND}}`` replaced by the registry's
    predicates: ``render`` / ``stream``: the list of ``struct_pack(c, applies, wrong, outcome,
    items)`` of that scope's checks over the side row ``r``; ``served_applies`` /
    ``served_wrong``: a ``CASE k.check_name`` over the served checks' predicates on ``e``.
    Raises ValueError naming an unknown KIND."""

    def sub(m: re.Match) -> str:
        kind = m.group(1)
        if kind not in _SNIPPETS:
            raise ValueError(f"unknown {{{{checks:{kind}}}}} in SQL; known: {', '.join(_SNIPPETS)}")
        return _SNIPPETS[kind]()

    return _MARK.sub(sub, text)


# ------------------------------------------------------------------------------------ JSON rule
def json_object(text: str | None) -> bool:
    """True when ``text`` (a call's joined arguments) is a JSON object; False for None, a non-str,
    or anything else. The one rule of ``non-json-join`` and ``served:non-json-join``.

    The rule is what a client does with the arguments the SDK hands it: the OpenAI Python SDK
    concatenates the argument fragments and leaves parsing to the caller, whose ``json.loads``
    (and JavaScript's ``JSON.parse``) accept any RFC 8259 JSON text, so: a lone-surrogate escape
    (``"\\ud800"``) is valid (RFC 8259 section 8.2 allows it; orjson refuses it, so orjson alone
    is not the rule); integers of any size are valid (section 6); duplicate keys are valid (the
    last wins, section 4); whitespace around the value is valid; ``NaN``, ``Infinity``, trailing
    text after the value and a leading byte-order mark are not (``JSON.parse`` and RFC 8259 refuse
    them; Python's ``json.loads`` accepts NaN/Infinity only as an extension, and rejects a BOM).
    orjson reads the common case; the stdlib reads what orjson refuses.
    """
    if not isinstance(text, str):
        return False
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        pass
    try:
        return isinstance(json.loads(text, parse_constant=_reject), dict)
    except ValueError:  # JSONDecodeError, and _reject's
        return False


def _reject(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
