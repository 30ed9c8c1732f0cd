"""A framework's own render path as a side's renderer: ``renderer=sglang:MODEL_DIR``, ``vllm:MODEL_DIR``.

Such a renderer takes the whole captured request (``renders_requests``) and does the framework's
own request preparation, tool serialization and template application in the side's interpreter
(:mod:`replay.adapters.sglang_render`); the side's ``preparer`` and ``serializer`` are then not
used. :func:`framework_row` fills that side's ``renders`` row as :func:`replay.render.exchange.render_rows`
fills it for a built-in renderer, from what the framework returned:

- ``leaked_nulls`` / ``schemas_with_leaked_null``: :func:`replay.tools.leaked_nulls` of each tool the
  framework handed its template (in the Chat Completions declaration shape,
  :func:`as_declarations`) against the client's declaration;
- ``leak_in_prompt``: the prompt rendered once more with those keys removed from the tools
  (the framework's template call repeated with the stripped tools) differs from the prompt;
- ``prompt_sha256`` / ``prompt_chars`` / ``prompt_tokens``: the framework's prompt text and its own
  token ids (their count); ``prompt_ids_sha256`` of those ids when the run compares token ids.

The framework's name and release are the row's ``renderer`` (``sglang-0.5.23``); ``serializer`` and
``preparer`` say ``sglang`` (the framework did both).
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable

from replay.render.base import RenderError

#: Renderer spec prefixes that name a framework's render path (:func:`replay.render.specs.framework_renderer`).
FRAMEWORKS = ("sglang", "vllm")



def as_declarations(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The tools a framework handed its template, each in the Chat Completions declaration shape
    (``{"type": "function", "function": {...}}``) the client's declarations are compared in: a bare
    function object (SGLang 0.5.4's ``item.function.model_dump()``) is wrapped; None stays None."""
    if tools is None:
        return None
    return [t if isinstance(t, dict) and "function" in t else {"type": "function", "function": t} for t in tools]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def framework_row(
    renderer: Any,
    ex: dict[str, Any],
    request: dict[str, Any],
    client_tools: list[Any] | None,
    row: dict[str, Any],
    *,
    id_tok: Any = None,
    ids_sha: Callable[[list[int] | None], str | None] = lambda ids: None,
    prompts: dict[str, str] | None = None,
) -> list[int] | None:
    """Fill ``row`` (a ``renders`` row holding ``exchange_id``/``side``/``n_tools``) from one
    :meth:`render_request` of ``renderer`` on ``request`` (the captured body, a dict) and return
    the prompt token ids for the run's token-id comparison (None when the run compares none).
    ``client_tools``: the client's declarations (:func:`replay.prepare.openai_tools`). A render
    failure is the row's ``error`` (never raises). ``prompts``: when given, the prompt text is put
    there under the row's side (``replay show``, a worker asked for the text)."""
    from replay.render.exchange import strip_paths
    from replay.tools import leaked_nulls

    row["serializer"] = row["preparer"] = renderer.name.split("-")[0]
    try:
        prompt, ids, tools = renderer.render_request(ex.get("route"), request)
        row["renderer"] = renderer.name
        if prompts is not None:
            prompts[row["side"]] = prompt
        seen = as_declarations(tools)
        leaks: list[dict[str, Any]] = []
        leaking = 0
        from replay.render.exchange import pair_tools

        paths_per_tool = []
        for i, (c, s) in enumerate(pair_tools(client_tools, seen)):
            paths = leaked_nulls(c, s)
            leaks.extend({"tool_index": i, "path": p} for p in paths)
            paths_per_tool.append(set(paths))
            leaking += bool(paths)
        row["leaked_nulls"] = leaks
        row["schemas_with_leaked_null"] = leaking
        sha = _sha(prompt)
        row.update(prompt_sha256=sha, prompt_chars=len(prompt), prompt_tokens=len(ids),
                   prompt_ids_sha256=ids_sha(ids) if id_tok is not None else None)
        if leaks:
            flat = tools is not None and tools is not seen and any(t is not s for t, s in zip(tools, seen or ()))
            stripped = [strip_paths(s, p) for s, p in zip(seen or (), paths_per_tool)]
            if flat:  # the framework handed bare function objects: strip in that shape
                stripped = [t.get("function", t) for t in stripped]
            try:
                row["leak_in_prompt"] = _sha(renderer.render_tools_variant(stripped)) != sha
            except Exception:  # noqa: BLE001 - without the leaked keys the template fails: the leak changes the outcome
                row["leak_in_prompt"] = True
        return ids if id_tok is not None else None
    except RenderError as exc:
        row["error"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - the adapter could not drive the release
        row["error"] = f"{type(exc).__name__}: {exc}"
    return None


def framework_side_error(values: dict[str, str]) -> str | None:
    """Why a side value (``{key: value}`` of :mod:`replay.side`) cannot use its framework renderer,
    or None: ``renderer=sglang:DIR``/``vllm:DIR`` renders in an interpreter that has the framework,
    so it needs ``python=INTERPRETER,render_in=python`` unless this interpreter has it. Checked when
    the side value is parsed, before any work (the rule of ``replay.adapters``: a framework runs in
    its own venv)."""
    import importlib.util

    name = (values.get("renderer") or "").split(":", 1)[0].strip()
    if name not in FRAMEWORKS or values.get("render_in") == "python":
        return None
    if importlib.util.find_spec(name) is not None:
        return None
    return (f"renderer={values['renderer']} renders with {name} in the side's own interpreter, and {name} is not "
            f"installed here: give python=INTERPRETER,render_in=python (a venv with {name}, e.g. python tests/engines.py {name}-render==X)")


def framework_labels(con: Any) -> dict[str, str]:
    """``{side: renderer name}`` (``{"old": "sglang-0.5.4"}``) for each side whose ``renders`` rows a
    framework's own path made (their ``serializer`` is the framework's name, :data:`FRAMEWORKS`):
    the name report sentences give that side in place of the run's serializer option, which such
    a side does not use. ``con``: a DuckDB connection with the run's ``renders`` view
    (:func:`replay.sql.connect`); ``{}`` when there is none or no such side."""
    marks = ", ".join(f"'{f}'" for f in FRAMEWORKS)
    try:
        got = con.execute(
            f"SELECT side, min(renderer) FROM renders WHERE serializer IN ({marks}) AND error IS NULL GROUP BY side"
        ).fetchall()
    except Exception:  # noqa: BLE001 - a run without a renders table (ingest only)
        return {}
    return {side: name for side, name in got if name}


__all__ = ["FRAMEWORKS", "as_declarations", "framework_row", "framework_labels", "framework_side_error"]
