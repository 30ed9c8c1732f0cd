"""Schema-aware typing of parameter values that a model writes as text.

Families whose calls carry each parameter as raw text (Qwen3-Coder and Seed-OSS
``<parameter=k>v</parameter>``, GLM-4.5+ ``<arg_key>k</arg_key><arg_value>v</arg_value>``,
MiniMax-M2 ``<parameter name="k">v</parameter>``, DSML ``string="false"``) need the request's tool
declarations to decide whether ``1`` is the integer 1 or the string ``"1"``. The rule here follows
what vLLM's and SGLang's parsers for those families do (``_convert_param_value`` and its
relatives), written once for all of them:

- the declared type is read from ``parameters.properties[name].type`` of the called tool (the
  first entry when it is a list of types; ``anyOf``/``oneOf`` take their first branch's type);
- ``string`` (or any type that is not one of those below): the text as is;
- ``integer``: ``int(text)`` when the stripped text is an integer literal, else the text;
- ``number``: an integer literal stays an int, else ``float(text)`` when finite, else the text;
- ``boolean``: ``true``/``false`` (any case) become booleans, else the text;
- ``null``: ``null``/``none`` (any case) become None, else the text;
- ``object`` / ``array``: ``json.loads(text)`` when it gives that JSON kind, else the text;
- an undeclared parameter (or tool, or no tools given): ``json.loads(text)`` when the stripped
  text is a JSON value (``NaN``/``Infinity`` are not), else the text (vLLM's fallback).

Where the text is decoded as JSON (undeclared, ``object``, ``array``) and it is one JSON value
nested deeper than :data:`~replay.parsers._jsonscan.MAX_DEPTH`, the result is
:data:`~replay.parsers._jsonscan.TOO_DEEP`: the families then make the call no call (the rule of
:mod:`replay.parsers._jsonscan`), each by its own rule for malformed blocks.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from replay.parsers._jsonscan import TOO_DEEP, decode_at, skip_ws

_INT = re.compile(r"[-+]?\d+\Z")


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constants)


def _loads(text: str) -> Any:
    """``json.loads`` that rejects ``NaN`` / ``Infinity`` (Python accepts them; JSON does not);
    :data:`~replay.parsers._jsonscan.TOO_DEEP` for a value nested too deeply. Raises
    ``ValueError`` when ``text`` is not one JSON value (JSON whitespace around it)."""
    value, k = decode_at(text, skip_ws(text, 0), _DECODER)
    if skip_ws(text, k) != len(text):
        raise ValueError("extra data after the JSON value")
    return value


def declared_types(tools: list[dict[str, Any]] | None) -> dict[str, dict[str, str]]:
    """``{tool name: {parameter name: declared JSON type}}`` from OpenAI-form tool declarations
    (anything malformed is skipped)."""
    out: dict[str, dict[str, str]] = {}
    for tool in tools or ():
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        props = (fn.get("parameters") or {}).get("properties") if isinstance(fn.get("parameters"), dict) else None
        types: dict[str, str] = {}
        if isinstance(props, dict):
            for pname, schema in props.items():
                t = _type_of(schema)
                if t is not None:
                    types[pname] = t
        out[fn["name"]] = types
    return out


def _type_of(schema: Any) -> str | None:
    if not isinstance(schema, dict):
        return None
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), t[0] if t else None)
    if t is None:
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                return _type_of(branches[0])
    return t if isinstance(t, str) else None


def convert_value(text: str, declared: str | None) -> Any:
    """The JSON value for a parameter's raw ``text`` given its ``declared`` type (None when
    undeclared), under the module's rule; :data:`~replay.parsers._jsonscan.TOO_DEEP` when it is
    decoded as JSON and nested too deeply."""
    s = text.strip()
    if declared is None:
        try:
            return _loads(s)
        except ValueError:
            return text
    if declared == "string":
        return text
    if declared == "integer":
        return int(s) if _INT.match(s) else text
    if declared == "number":
        if _INT.match(s):
            return int(s)
        try:
            value = float(s)
        except ValueError:
            return text
        return value if math.isfinite(value) else text
    if declared == "boolean":
        return {"true": True, "false": False}.get(s.lower(), text)
    if declared == "null":
        return None if s.lower() in ("null", "none") else text
    if declared in ("object", "array"):
        try:
            value = _loads(s)
        except ValueError:
            return text
        if value is TOO_DEEP:
            return value
        ok = isinstance(value, dict) if declared == "object" else isinstance(value, list)
        return value if ok else text
    return text
