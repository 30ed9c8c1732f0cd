"""The render stage for one exchange: each side's preparer, tool serializer and renderer -> ``renders`` rows.

A side (old, new, reference) renders a captured request in three steps, each its own component:

1. **prepare** (:mod:`replay.prepare`, ``--old-preparer`` ...): the request body -> the chat
   messages and tool declarations the server hands ``apply_chat_template`` (default ``vllm``);
   the content format (strings or part lists) is the server's choice for the side's template;
2. **serialize** (:mod:`replay.tools`, ``--old-serializer`` ...): each tool declaration -> the
   dict the template sees;
3. **render** (:mod:`replay.render`): a chat template (``--old-chat-template``, or one chosen by
   the served model name from ``--chat-template 'PATTERN=FILE'`` routes), ``json-tools``, or an
   encoder (``--old-renderer``, ``--reference-encoder``).

**Leaked nulls** are judged twice. ``leaked_nulls`` / ``schemas_with_leaked_null`` are the
serializer's: nulls in the serialized tools at paths where the client's declaration (Chat
Completions form, :func:`replay.prepare.openai_tools`) has none. ``leak_in_prompt`` says whether
they reach the model: the side's prompt is rendered once more with the leaked keys removed, and
the leak counts in the prompt columns only when that prompt differs (a template that renders no
tools, or only their names, carries no leak). The variant is rendered only when a leak exists, and
its outcome is cached per (renderer, serialized tool list) for the run: the tool block a template
writes does not depend on the conversation.

A template that calls ``raise_exception`` (Mistral's tool-call id check, Gemma 2's "System role
not supported") fails with ``rejected by the template: <its message>``, as a server returns it;
a preparer's HTTP 400 fails with ``rejected by the <server> preparer: <message>``.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import orjson

from replay import exactjson
from replay.prepare import PrepareError, get_preparer, openai_tools
from replay.render.base import RenderError, count_tokens
from replay.tools import _suffix, leaked_nulls

SIDES = ("old", "new", "reference")

__all__ = ["ModelRoutes", "RenderPlan", "render_plan", "render_rows", "strip_paths", "pair_tools", "prepared_tools"]


@dataclass
class ModelRoutes:
    """Per-model renderers of a mixed capture: ``routes`` = ``[(pattern, renderer, tokenizer or
    None)]`` matched in order against the served model name with :func:`fnmatch.fnmatchcase`
    (``Qwen/Qwen3*``); an exchange no pattern matches gets ``fallback`` (``json-tools`` unless a
    plain ``--chat-template FILE`` was given too). ``name`` is ``routes``; rows carry the chosen
    renderer's own name."""

    routes: list[tuple[str, Any, Any]]
    fallback: Any
    fallback_tokenizer: Any = None
    name: str = "routes"

    def for_model(self, model: str | None) -> tuple[Any, Any]:
        """``(renderer, tokenizer or None)`` for a served model name."""
        for pattern, renderer, tok in self.routes:
            if model is not None and fnmatch.fnmatchcase(model, pattern):
                return renderer, tok
        return self.fallback, self.fallback_tokenizer


@dataclass
class RenderPlan:
    """The resolved render components of a run: ``renderers`` and ``preparers`` by side, and the
    cache of leak-in-prompt decisions (``{(renderer name, tools JSON, stripped JSON): bool}``)."""

    renderers: dict[str, Any]
    preparers: dict[str, Any]
    leak_cache: dict[tuple[str, bytes, bytes], bool] = field(default_factory=dict)


def render_plan(cfg: Any) -> RenderPlan:
    """The :class:`RenderPlan` of an :class:`replay.runspec.AuditConfig`, built once and kept on
    it (``cfg._render_plan``). Side renderers default to ``cfg.renderer``; preparers to
    :data:`replay.prepare.DEFAULT_PREPARER`. Raises the spec errors of
    :func:`replay.prepare.get_preparer`."""
    plan = getattr(cfg, "_render_plan", None)
    if plan is None:
        base = cfg.renderer
        renderers = {
            "old": getattr(cfg, "old_renderer", None) or base,
            "new": getattr(cfg, "new_renderer", None) or base,
            "reference": cfg.reference_renderer or base,
        }
        preparers = {side: get_preparer(getattr(cfg, f"{side}_preparer", None)) for side in SIDES}
        plan = RenderPlan(renderers, preparers)
        cfg._render_plan = plan
    return plan


def prepared_tools(cfg: Any, side: str, route: str | None, request: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The tool declarations ``side``'s preparer hands its serializer (what an out-of-process
    side is sent to serialize); the client's (:func:`replay.prepare.openai_tools`) when the
    preparer rejects the request (that side's row then carries the rejection)."""
    try:
        return render_plan(cfg).preparers[side].prepare(route, request, "string").tools
    except Exception:  # noqa: BLE001 - render_rows records the preparer's error on the row
        return openai_tools(route, request.get("tools"))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def strip_paths(value: Any, paths: set[str], root: str = "$") -> Any:
    """A copy of a JSON value without the object members whose JSON path (the :mod:`replay.tools`
    path syntax) is in ``paths``; list items are kept (removing one would shift the others)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            p = root + _suffix(str(k))
            if p in paths:
                continue
            out[k] = strip_paths(v, paths, p)
        return out
    if isinstance(value, list):
        return [strip_paths(v, paths, f"{root}[{i}]") for i, v in enumerate(value)]
    return value


def pair_tools(client: list[Any] | None, prepared: list[Any] | None) -> list[tuple[Any, Any]]:
    """``(client declaration, prepared declaration)`` pairs: by position when the preparer kept the
    count, else by function name (a converter that dropped server tools)."""
    client, prepared = client or [], prepared or []
    if len(client) == len(prepared):
        return list(zip(client, prepared))

    def name(t: Any) -> Any:
        fn = t.get("function", t) if isinstance(t, dict) else None
        return fn.get("name") if isinstance(fn, dict) else None

    by_name = {name(t): t for t in client}
    return [(by_name.get(name(p), {}), p) for p in prepared]


def _call(renderer: Any, messages: list[dict[str, Any]], tools: Any, flat_retry: bool) -> tuple[str, list[int] | None]:
    """``(prompt, ids or None)``; with ``flat_retry`` a failed render is tried once more with each
    tool's ``function`` object alone (SGLang's fallback)."""
    try:
        if hasattr(renderer, "render_ids"):
            return renderer.render_ids(messages, tools)
        return renderer.render(messages, tools), None
    except RenderError:
        if not (flat_retry and tools):
            raise
        flat = [t["function"] if isinstance(t, dict) and "function" in t else t for t in tools]
        if hasattr(renderer, "render_ids"):
            return renderer.render_ids(messages, flat)
        return renderer.render(messages, flat), None



#: Distinct tool lists kept per process (serialized forms, and prompts of renderers that read only the tools).
LRU_SIZE = 512


class _LRU(OrderedDict):
    """A dict that keeps its ``size`` most recently used entries (:meth:`get` / :meth:`put`)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get(self, key: Any, default: Any = None) -> Any:  # type: ignore[override]
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def put(self, key: Any, value: Any) -> None:
        self[key] = value
        if len(self) > self.size:
            self.popitem(last=False)


_SERIALIZED = _LRU(LRU_SIZE)  # (serializer spec, serializer, _tools_digest) -> _tool_facts, or the error
_STRIPPED = _LRU(LRU_SIZE)  # (serialized JSON, leaked paths) -> (the list without them, its JSON)
_PROMPTS = _LRU(LRU_SIZE)  # (renderer, is reference, tokenizer, serialized JSON) -> prompt facts (tools-only renderers)


class _CachedError(Exception):
    """A serializer's failure on a tool list, kept in :data:`_SERIALIZED` and raised again for
    the next request that sends the same list; its text is the row's ``error`` as it was."""


def _tool_facts(pairs: list[tuple[Any, Any]], serialized: Any) -> tuple[Any, list[dict[str, Any]], list[set[str]], int, bytes]:
    """``(serialized, leaked nulls, leaked paths per tool, schemas with a leaked null, serialized
    JSON)`` of one side's serialized tools (:func:`replay.tools.leaked_nulls` per tool, against
    the client's declaration of each pair)."""
    leaks: list[dict[str, Any]] = []
    leak_paths: list[set[str]] = []
    leaking = 0
    for i, ((c, _), s) in enumerate(zip(pairs, serialized or ())):
        paths = leaked_nulls(c, s)
        leaks.extend({"tool_index": i, "path": p} for p in paths)
        leak_paths.append(set(paths))
        leaking += bool(paths)
    return serialized, leaks, leak_paths, leaking, exactjson.dumps(serialized)


_DIGESTS = _LRU(LRU_SIZE)  # (route, tools_json) -> _tools_digest of a client list handed on as it is


def _tools_digest(client_tools: Any, prepared_tools: Any, shared: tuple[Any, str | None] | None = None) -> bytes | None:
    """The cache key of one exchange's tool declarations: the client's and the prepared
    declarations as orjson writes them (key order kept), the bytes themselves (an exact key: a
    dict compares them on a hash match). When the preparer handed on the client's own
    declaration objects (vLLM's, SGLang's Chat Completions path: :func:`replay.prepare.openai_tools`
    keeps each dict), the list is written once, behind a marker byte no JSON text starts with.
    None when they cannot be written.

    ``shared``: ``(route, tools_json)`` when the request's tools are the shared decode of that
    text (:func:`replay.stages.rows.decode_request`): the client list is then the same for every
    exchange with that key, and a list handed on as it is is written once per process
    (:data:`_DIGESTS`)."""
    try:
        if prepared_tools is client_tools or (
            type(prepared_tools) is list and type(client_tools) is list and len(prepared_tools) == len(client_tools)
            and all(p is c for p, c in zip(prepared_tools, client_tools))
        ):
            if shared is None or shared[1] is None:
                return b"=" + exactjson.dumps(client_tools)
            got = _DIGESTS.get(shared)
            if got is None:
                got = b"=" + exactjson.dumps(client_tools)
                _DIGESTS.put(shared, got)
            return got
        return exactjson.dumps([client_tools, prepared_tools])
    except (TypeError, orjson.JSONEncodeError):
        return None


def _serialize_once(
    spec: str, serializer: Callable, client_tools: Any, prepared_tools: Any, digest: bytes | None = None
) -> tuple[Any, list[dict[str, Any]], list[set[str]], int, bytes]:
    """:func:`_tool_facts` of ``serializer`` on the prepared tools, once per distinct tool list in
    this process: an LRU (:data:`LRU_SIZE`) keyed by the serializer spec, the serializer and the
    declarations' content (:func:`_tools_digest`: the JSON bytes, an exact key); agents send the
    same tools in every request. Raises what the serializer raised
    (the first time; a :class:`_CachedError` with the same row text after). ``digest``: the
    list's :func:`_tools_digest` when the caller has it (one per exchange and prepared list)."""
    if digest is None:
        digest = _tools_digest(client_tools, prepared_tools)
    key = (spec, serializer, digest) if digest is not None else None
    got = _SERIALIZED.get(key) if key is not None else None
    if got is None:
        try:
            pairs = pair_tools(client_tools, prepared_tools)
            got = _tool_facts(pairs, [serializer(p) for _, p in pairs] if pairs else None)
        except Exception as exc:
            if key is not None:
                kind = "" if isinstance(exc, RenderError) else f"{type(exc).__name__}: "
                _SERIALIZED.put(key, _CachedError(f"{kind}{exc}"))
            raise
        if key is not None:
            _SERIALIZED.put(key, got)
    if isinstance(got, _CachedError):
        raise _CachedError(str(got))
    return got


def render_rows(
    ex: dict[str, Any],
    cfg: Any,
    serializers: dict[str, Callable],
    pre: dict[str, Any] | None = None,
    *,
    ids_plan: tuple[Any, str | None] = (None, None),
    ids_sha: Callable[[list[int] | None], str | None] = lambda ids: None,
    tokens_differing: Callable[[list[int], list[int]], int] | None = None,
    prompts: dict[str, str] | None = None,
    sides: tuple[str, ...] = SIDES,
) -> list[dict[str, Any]]:
    """The ``renders`` rows of one exchange: one per side (old, new, reference), plus ``served``
    when the server logged its prompt and the old side renders with a chat template (or a
    reference encoder is set).

    ``ex``: an exchanges row (``exchange_id``, ``route``, ``request_json``, ``server_prompt``;
    ``model`` and ``server_prompt_token_ids`` when present). ``serializers``: ``{side: callable}``;
    ``pre``: ``{side: serialized tools | None | WorkerError}`` for sides serialized out of process
    (each serialized what its preparer made of the declarations, :func:`prepared_tools`). ``ids_plan``: ``(tokenizer,
    vocabulary)`` of a token-id comparison (:func:`replay.stages.render._ids_plan`). ``prompts``: when
    given, each side's prompt text is put there by side (``replay show`` re-renders one exchange;
    the stage keeps only hashes). ``sides``: the sides to render (an out-of-process side's worker
    renders its own alone: no ``served`` row then). ``pre[side]`` may also be a
    :class:`replay.remote.RemoteRender`: that side's row as its worker rendered it, taken as is
    (plus this run's token-id comparison). Never raises: a side's failure is its row's ``error``.
    """
    from replay.remote import RemoteRender, WorkerError

    plan = render_plan(cfg)
    xid = ex["exchange_id"]
    model = ex.get("model")
    chosen: dict[str, tuple[Any, Any]] = {}
    for side in SIDES:
        r = plan.renderers[side]
        chosen[side] = r.for_model(model) if hasattr(r, "for_model") else (r, cfg.tokenizer)
    ref_renderer = chosen["reference"][0]
    specs = cfg.serializer_specs()
    try:
        request = ex["_request"] if "_request" in ex else exactjson.loads(ex["request_json"])  # decoded once per stage
        if not isinstance(request, dict):
            raise ValueError("request is not a JSON object")
        client_tools = openai_tools(ex.get("route"), request.get("tools"))
    except Exception as exc:  # request unusable for every side
        return [
            {"exchange_id": xid, "renderer": chosen[s][0].name, "side": s, "serializer": specs[s], "error": f"{type(exc).__name__}: {exc}"}
            for s in sides
        ]
    id_tok, ref_vocab = ids_plan
    tools_only = prompts is None and all(getattr(chosen[s][0], "tools_only", False) for s in sides)
    tools_key = ex.get("_tools_key")  # the request's tools are the shared decode of this text (replay.stages.rows.decode_request)
    done: dict[tuple[Any, ...], dict[str, Any]] = {}
    prepared_cache: dict[tuple[str, str], Any] = {}
    digests: dict[int, bytes | None] = {}  # id(prepared tools) -> _tools_digest, once per exchange
    ref_ids: list[int] | None = None
    side_ids: dict[str, list[int]] = {}
    counted: dict[tuple[int, str], int | None] = {}  # (tokenizer, prompt SHA-256) -> prompt_tokens, this exchange
    rows = []
    for side in sides:
        renderer, tok = chosen[side]
        remote = pre.get(side) if pre is not None else None
        if isinstance(remote, RemoteRender):  # rendered by the side's worker, in its interpreter
            row, ids = remote.finish(xid, side, id_tok, ids_sha, is_reference=renderer is ref_renderer)
            if prompts is not None:
                prompts[side] = remote.prompt
            if ids is not None:
                side_ids[side] = ids
            rows.append(row)
            continue
        if getattr(renderer, "renders_requests", False):  # a framework's own path: request -> prompt (replay.render.framework)
            row = {"exchange_id": xid, "renderer": renderer.name, "side": side, "n_tools": len(client_tools or ())}
            ids = renderer.fill_row(ex, request, client_tools, row, id_tok=id_tok, ids_sha=ids_sha, prompts=prompts)
            if ids is not None:
                side_ids[side] = ids
            rows.append(row)
            continue
        preparer = plan.preparers[side]
        row: dict[str, Any] = {"exchange_id": xid, "renderer": renderer.name, "side": side, "serializer": specs[side],
                               "preparer": preparer.name, "n_tools": len(client_tools or ())}
        try:
            fmt = preparer.content_format(getattr(renderer, "template", None))
            pkey = (preparer.name, fmt)
            if pkey not in prepared_cache:
                try:
                    # every side's renderer reads the tools alone: a preparer that can say its
                    # outcome without building the messages (replay.prepare.vllm) skips them
                    quick = getattr(preparer, "prepare_tools", None) if tools_only else None
                    got = quick(ex.get("route"), request, fmt) if quick is not None else None
                    prepared_cache[pkey] = got if got is not None else preparer.prepare(ex.get("route"), request, fmt)
                except PrepareError as exc:
                    prepared_cache[pkey] = RenderError(f"rejected by the {preparer.name} preparer: {exc}")
                except Exception as exc:  # a plugin preparer's bug
                    prepared_cache[pkey] = RenderError(f"preparer {preparer.name}: {type(exc).__name__}: {exc}")
            prepared = prepared_cache[pkey]
            if isinstance(prepared, Exception):
                raise prepared
            if pre is not None and side in pre:
                serialized = pre[side]
                if isinstance(serialized, WorkerError):
                    raise serialized
                serialized, leaks, leak_paths, leaking_tools, tools_json = _tool_facts(pair_tools(client_tools, prepared.tools), serialized)
            else:
                if id(prepared.tools) not in digests:
                    digests[id(prepared.tools)] = _tools_digest(client_tools, prepared.tools, (ex.get("route"), tools_key))
                serialized, leaks, leak_paths, leaking_tools, tools_json = _serialize_once(
                    specs[side], serializers[side], client_tools, prepared.tools, digests[id(prepared.tools)]
                )
            row["leaked_nulls"] = leaks
            row["schemas_with_leaked_null"] = leaking_tools
            key = (renderer.name, pkey, tools_json)
            shared = (id(renderer), renderer is ref_renderer, id(tok), tools_json) if getattr(renderer, "tools_only", False) else None
            if key not in done and shared is not None and shared in _PROMPTS:
                done[key] = _PROMPTS.get(shared)
            if key not in done:
                prompt, ids = _call(renderer, prepared.messages, serialized, prepared.flat_tools_retry)
                if ids is not None and not (id_tok is None or getattr(renderer, "vocab", None) == ref_vocab):
                    ids = None
                if ids is None and id_tok is not None:
                    ids = id_tok.ids(prompt)
                sha = _sha(prompt)
                if ids is None:  # a prompt byte-equal to another side's is counted once
                    ckey = (id(tok), sha)
                    if ckey not in counted:
                        counted[ckey] = _tokens(tok, prompt, None, renderer is ref_renderer)
                    n_tokens = counted[ckey]
                else:
                    # a server's own ids are its prompt's tokens (replay.render.http_tokenize), not --tokenizer's count
                    n_tokens = _tokens(tok, prompt, ids, renderer is ref_renderer or getattr(renderer, "counts_own_ids", False))
                done[key] = {
                    "prompt_sha256": sha,
                    "prompt_chars": len(prompt),
                    "prompt_tokens": n_tokens,
                    "prompt_ids_sha256": ids_sha(ids) if id_tok is not None else None,
                    "_ids": ids if id_tok is not None else None,
                    "_prompt": prompt if prompts is not None else None,
                }
                if shared is not None:
                    _PROMPTS.put(shared, done[key])
            facts = dict(done[key])
            ids = facts.pop("_ids")
            if prompts is not None:
                prompts[side] = facts.pop("_prompt")
            else:
                facts.pop("_prompt")
            row.update(facts)
            if leaks:
                skey = (tools_json, tuple(tuple(sorted(p)) for p in leak_paths))
                got = _STRIPPED.get(skey)
                if got is None:  # once per distinct serialized list and leaks in this process
                    stripped_list = [strip_paths(s, p) for s, p in zip(serialized or (), leak_paths)]
                    got = (stripped_list, exactjson.dumps(stripped_list))
                    _STRIPPED.put(skey, got)
                stripped, stripped_json = got
                lkey = (renderer.name, tools_json, stripped_json)
                if lkey not in plan.leak_cache:
                    try:
                        variant, _ = _call(renderer, prepared.messages, stripped, prepared.flat_tools_retry)
                        plan.leak_cache[lkey] = _sha(variant) != row["prompt_sha256"]
                    except Exception:  # noqa: BLE001 - without the leaked keys the template fails: the leak changes the outcome
                        plan.leak_cache[lkey] = True
                row["leak_in_prompt"] = plan.leak_cache[lkey]
            if ids is not None:
                side_ids[side] = ids
                if side == "reference":
                    ref_ids = ids
        except Exception as exc:  # preparer, serializer (ToolDeclarationError, plugin bug) or RenderError
            kind = "" if isinstance(exc, (RenderError, WorkerError, _CachedError)) else f"{type(exc).__name__}: "
            row["error"] = f"{kind}{exc}"
        rows.append(row)
    old_renderer = chosen["old"][0]
    prompt = ex.get("server_prompt")
    if tuple(sides) == SIDES and prompt is not None and (old_renderer.name.startswith("chat-template") or cfg.reference_renderer is not None):
        ids = None
        if id_tok is not None:
            logged = ex.get("server_prompt_token_ids")
            try:
                ids = list(logged) if logged is not None else id_tok.ids(prompt)
            except Exception:  # noqa: BLE001 - a tokenizer that fails here (a server's): the served prompt is compared by its text
                ids = None
            if ids is not None:
                side_ids["served"] = ids
        tok = chosen["old"][1]
        sha = _sha(prompt)
        if ids is None and tok is not None and (id(tok), sha) not in counted:  # the served prompt is often a side's
            counted[(id(tok), sha)] = count_tokens(tok, prompt)
        rows.append(
            {
                "exchange_id": xid,
                "renderer": old_renderer.name,
                "side": "served",
                "serializer": None,
                "n_tools": len(client_tools or ()),
                "prompt_sha256": sha,
                "prompt_chars": len(prompt),
                "prompt_tokens": len(ids) if ids is not None else counted[(id(tok), sha)] if tok is not None else None,
                "prompt_ids_sha256": ids_sha(ids),
            }
        )
    if ref_ids is not None and tokens_differing is not None:
        for row in rows:
            ids = side_ids.get(row["side"])
            if ids is not None:
                row["tokens_differing"] = tokens_differing(ids, ref_ids)
    return rows


def _tokens(tokenizer: Any, prompt: str, ids: list[int] | None, is_reference: bool) -> int | None:
    """``prompt_tokens``: the compared ids' count when there are, the reference encoder's own ids
    count, else the side's tokenizer's count (None without one)."""
    if ids is not None and (is_reference or tokenizer is None):
        return len(ids)
    return count_tokens(tokenizer, prompt) if tokenizer is not None else None
