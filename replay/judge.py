"""One judge: the per-row facts of the re-stream stage, computed where the rows are made.

The re-stream stage (:mod:`replay.stages.stream`) replays each side's tool parser; this module turns
what a side got into its ``streams`` and ``calls`` rows (:data:`replay.tables.STREAMS`,
:data:`replay.tables.CALLS`), with every fact the verdicts need already computed, so that the SQL
(``queries/_verdict_pairs.sql``) only counts. Per row (a side's whole-text parse, chunking
``parse``, or one streamed chunking):

- against the **reference** (the reference parser's whole-text parse): each call's
  ``matches_whole`` (same name, same JSON value of the arguments), ``content_leak`` (markup the
  reference does not leave), ``differs_from_reference`` (content, reasoning or calls differ);
- against the side's **own whole-text parse** (the invariant of the upstream tool-parser test
  suites: streamed == that parser's own whole-text parse): ``differs_from_own_parse`` on
  streamed rows, each call's ``matches_own_parse``. A row that differs from its own parse is a
  *streaming fault*; a parse row that differs from the reference is a *semantic difference*;
- as the **client** holds it (:mod:`replay.assemble`, the SDK's own assembly): ``client_error``
  (the SDK raised on the stream: the client has no message, so the row has no calls and no
  content), ``name_repeats`` (calls whose name came in more than one delta), ``id_faults`` and
  each call's ``id_fault`` (no id, an id sent in more than one delta, or another call's id);
- ``finish_reason`` as the side reports it and ``finish_fault``: a finish_reason other than what
  the row's own calls imply (``tool_calls`` when it has calls, ``stop`` otherwise), or, for a
  capture that ended with ``length`` (truncated), anything but ``length``, or a *closed* call
  (arguments a complete JSON object) the reference parse of the truncated text does not have:
  arguments the side invented to close a call the model never finished.
"""

from __future__ import annotations

from typing import Any

from replay.checks import json_object  # the one JSON-object rule (re-exported: replay.judge.json_object)
from replay.stream import ChunkingError, json_key
from replay.verdicts import markup_leak

__all__ = ["judge_side", "reference_rows", "expected_finish", "same_result", "json_object"]


def expected_finish(n_calls: int, truncated: bool) -> str:
    """The finish_reason a row with ``n_calls`` calls should report: ``length`` for a truncated
    capture, else ``tool_calls`` with calls and ``stop`` without (vLLM/SGLang serving layers)."""
    return "length" if truncated else ("tool_calls" if n_calls else "stop")


def _key(text: str | None) -> Any:
    k = json_key(text)
    return ("json", k) if k is not None else ("text", text)


class _Memo:
    """Per-exchange caches of what the judge computes from an argument text: :func:`json_key`,
    :func:`_key` and whether it is a JSON object. The same texts come back under every chunking and
    on both sides (a streamed call's joined arguments are almost always its whole-text parse's), so
    each distinct text is decoded once per exchange instead of once per row and comparison."""

    __slots__ = ("keys", "objects")

    def __init__(self) -> None:
        self.keys: dict[Any, Any] = {}
        self.objects: dict[Any, bool] = {}

    def json_key(self, text: str | None) -> Any:
        try:
            return self.keys[text]
        except KeyError:
            k = self.keys[text] = json_key(text)
            return k
        except TypeError:  # not hashable: not a text (a plugin's odd result)
            return json_key(text)

    def key(self, text: str | None) -> Any:
        k = self.json_key(text)
        return ("json", k) if k is not None else ("text", text)

    def json_object(self, text: str | None) -> bool:
        try:
            return self.objects[text]
        except KeyError:
            ok = self.objects[text] = json_object(text)
            return ok
        except TypeError:
            return json_object(text)


def _memo(plan: Any) -> _Memo:
    """The plan's :class:`_Memo` (made at the first use; a plan built by hand gets one too)."""
    memo = getattr(plan, "_judge_memo", None)
    if memo is None:
        memo = _Memo()
        try:
            plan._judge_memo = memo
        except AttributeError:  # a plan type without a __dict__
            pass
    return memo


def same_result(content: str, reasoning: str, calls: list[tuple[str | None, str | None]], other: Any) -> bool:
    """True when ``content``, ``reasoning`` and ``calls`` (``(name, arguments)`` in order) are the
    same as the ParseResult-shaped ``other``'s: content and reasoning equal as text, the same
    number of calls, each with the same name and the same JSON value of the arguments (text that
    is not JSON compared as text)."""
    if content != (other.content or "") or (reasoning or "") != (getattr(other, "reasoning", "") or ""):
        return False
    theirs = list(other.calls)
    if len(calls) != len(theirs):
        return False
    return all(n == t.name and _key(a) == _key(t.arguments) for (n, a), t in zip(calls, theirs))


def reference_rows(plan: Any, whole: Any, parser_name: str, markers: Any) -> None:
    """Append the reference side's ``parse`` row and its calls to ``plan`` (a
    :class:`replay.stages.stream.StreamPlan`) from its whole-text parse ``whole``, and keep the
    reference's calls and content on the plan for :func:`judge_side`."""
    memo = _memo(plan)
    xid = plan.xid
    plan.ref_calls = list(whole.calls)
    plan.ref_content = whole.content
    n_whole = len(plan.ref_calls)
    plan.streams.append(
        {
            "exchange_id": xid,
            "side": "reference",
            "parser": parser_name,
            "chunking": "parse",
            "n_deltas": 0,
            "calls_streamed": n_whole,
            "calls_whole": n_whole,
            "content": whole.content,
            "reasoning": whole.reasoning,
            "reasoning_open": plan.ro,
            "finish_reason": expected_finish(n_whole, plan.truncated),
            "content_leak": markup_leak(whole.content, None, markers),
            "name_repeats": 0,
            "id_faults": 0,
            "finish_fault": False,
            "differs_from_reference": False,
        }
    )
    for i, c in enumerate(plan.ref_calls):
        plan.calls.append(
            {
                "exchange_id": xid,
                "side": "reference",
                "chunking": "parse",
                "index": i,
                "name": c.name,
                "arguments": c.arguments,
                "arguments_json_ok": memo.json_object(c.arguments),
                "matches_whole": True,
                "names_sent": 1,
                "id_fault": False,
            }
        )


def _id_faults(calls: list[Any]) -> list[bool]:
    seen: dict[str, int] = {}
    for c in calls:
        if c.id:
            seen[c.id] = seen.get(c.id, 0) + 1
    return [not c.id or len(c.ids_sent) > 1 or seen.get(c.id, 0) > 1 for c in calls]


def judge_side(plan: Any, side: str, pname: str, chunks: list[tuple[str, Any]], rep: Any) -> None:
    """Append one side's ``streams`` and ``calls`` rows for a planned exchange to ``plan``: the
    parse row, then a row per chunking, with the facts of the module docstring.

    ``chunks``: ``[(chunking, deltas or ChunkingError), ...]``; ``rep``: the side's
    :class:`replay.stages.stream.SideReplay` (its parse: a ParseResult or the error text; per chunking
    an :class:`replay.stream.Assembled`, the error text, or None for a chunking not cut)."""
    xid = plan.xid
    memo = _memo(plan)
    n_whole = len(plan.ref_calls)
    if len(plan.ref_keys) != n_whole:  # the reference's argument keys, once per exchange
        plan.ref_keys = [memo.json_key(c.arguments) for c in plan.ref_calls]
    ref_calls, ref_keys, truncated = plan.ref_calls, plan.ref_keys, plan.truncated
    ref_content, ref_reasoning = plan.ref_content, plan.ref_reasoning or ""
    ref_pairs = [(c.name, memo.key(c.arguments)) for c in ref_calls]
    leak_markers = tuple(plan.sides.reference.markers) if plan.sides is not None else ()
    own = rep.parse if not isinstance(rep.parse, str) else None
    own_calls = list(own.calls) if own is not None else []
    own_keys = [memo.key(c.arguments) for c in own_calls]
    if own is not None:
        own_content, own_reasoning = own.content or "", getattr(own, "reasoning", "") or ""
        own_pairs = list(zip((c.name for c in own_calls), own_keys))
    key = memo.key
    # the side's own parse is the reference's (the same parser, parsed once): a row differs from
    # its own parse exactly when it differs from the reference (the same texts and pairs)
    own_is_ref = own is not None and own is getattr(plan, "ref_parse", None)

    def same(content: str, reasoning: str, pairs: list[tuple[Any, Any]], o_content: str, o_reasoning: str, o_pairs: list[tuple[Any, Any]]) -> bool:
        # same_result() with the other side's (name, _key(arguments)) computed once
        if content != o_content or reasoning != o_reasoning or len(pairs) != len(o_pairs):
            return False
        return all(n == on and key(a) == ok for (n, a), (on, ok) in zip(pairs, o_pairs))

    def judge(chunking: str, n_deltas: int, got: Any, streamed: bool, lengths: list[int] | None = None) -> None:
        """``got``: an Assembled (streamed) or a ParseResult (the side's whole-text parse);
        ``lengths``: each delta's length in chars (streamed rows)."""
        error = getattr(got, "error", None) if streamed else None
        if error:  # the client SDK raised: no message reached the client
            content, reasoning, calls = None, "", []
        else:
            content, reasoning = got.content, getattr(got, "reasoning", "") or ""
            calls = list(got.calls)
        pairs = [(c.name, c.arguments) for c in calls]
        if streamed:
            names = [c.names_sent for c in calls]
            idf = _id_faults(calls)
            finish = None if error else got.finish_reason
        else:
            names = [1] * len(calls)
            idf = [False] * len(calls)
            finish = expected_finish(len(calls), truncated)
        invented = False
        rows = []
        for k, (name, args) in enumerate(pairs):
            pos, c_obj = k, calls[k]
            if streamed:  # the client's list position (replay.assemble); a hand-made Assembled may say otherwise
                pos = c_obj.index
            ref = ref_calls[pos] if 0 <= pos < n_whole else None
            rkey = ref_keys[pos] if ref is not None else None
            json_ok = memo.json_object(args)
            matches = rkey is not None and ref.name == name and memo.json_key(args) == rkey
            invented = invented or (truncated and json_ok and not matches)
            rows.append(
                {
                    "exchange_id": xid,
                    "side": side,
                    "chunking": chunking,
                    "index": pos,
                    "id": getattr(c_obj, "id", None) if streamed else None,
                    "name": name,
                    "arguments": args,
                    "arguments_json_ok": json_ok,
                    "matches_whole": matches,
                    "matches_own_parse": (
                        None if own is None else 0 <= pos < len(own_calls) and own_calls[pos].name == name and own_keys[pos] == key(args)
                    ),
                    "names_sent": names[k],
                    "id_fault": idf[k],
                }
            )
        plan.calls.extend(rows)
        text = content or ""
        differs = not same(text, reasoning, pairs, ref_content or "", ref_reasoning, ref_pairs)
        plan.streams.append(
            {
                "exchange_id": xid,
                "side": side,
                "parser": pname,
                "chunking": chunking,
                "n_deltas": n_deltas,
                "delta_lengths": lengths,
                "calls_streamed": len(pairs),
                "calls_whole": n_whole,
                "content": content,
                "reasoning": reasoning,
                "reasoning_open": plan.ro,
                "finish_reason": finish,
                "content_leak": markup_leak(content, ref_content, leak_markers),
                "client_error": error,
                "name_repeats": sum(1 for n in names if n > 1),
                "id_faults": sum(idf),
                "finish_fault": not error and (finish != expected_finish(len(pairs), truncated) or invented),
                "differs_from_reference": differs,
                "differs_from_own_parse": (
                    None if own is None else bool(error) or (differs if own_is_ref else not same(text, reasoning, pairs, own_content, own_reasoning, own_pairs))
                )
                if streamed
                else None,
            }
        )

    res = rep.parse
    if isinstance(res, str):
        plan.streams.append({"exchange_id": xid, "side": side, "parser": pname, "chunking": "parse", "error": res})
    else:
        judge("parse", 0, res, streamed=False)
    for (chunking, deltas), got in zip(chunks, rep.streams):
        if isinstance(deltas, ChunkingError):
            plan.streams.append({"exchange_id": xid, "side": side, "parser": pname, "chunking": chunking, "error": f"chunking: {deltas}"})
        elif isinstance(got, str):
            plan.streams.append(
                {"exchange_id": xid, "side": side, "parser": pname, "chunking": chunking, "n_deltas": len(deltas), "delta_lengths": [len(d) for d in deltas], "error": got}
            )
        else:
            judge(chunking, len(deltas), got, streamed=True, lengths=[len(d) for d in deltas])
