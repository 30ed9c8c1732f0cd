"""Schema-aware typing of parameter values that a model writes as text.

Families whose calls carry each parameter as raw text (Qwen3-Coder and Seed-OSS
``<parameter=k>v</parameter>``, GLM-4.5+ ``<arg_key>k</arg_key><arg_value>v</arg_value>``,
MiniMax-M2 ``<parameter name="k">v</parameter>``, DSML ``string="false"``) need the request's tool
declarations to decide whether ``1`` is the integer 1 or the string ``"1"``. The rule here follows
what vLLM's and SGLang's parsers for those families do (``_convert_param_value`` and its
relatives), written once for all of them:

- the declared type is read from ``parameters.properties[name].type`` of the called tool (the
  first non-``null`` entry when it is a list of types; ``anyOf``/``oneOf`` take their first
  branch's type), stripped and lower-cased;
- the text ``null`` (any case, surrounding whitespace ignored) is None *whatever the declared
  type* (vLLM and SGLang test for it before looking at the type; so does TensorRT-LLM), so a None
  that an encoder wrote as ``null`` round-trips;
- ``string``, ``str``, ``text``, ``varchar``, ``char``, ``enum``: the text as is;
- a type name starting with ``int``, ``uint``, ``long``, ``short`` or ``unsigned`` (``integer``,
  ``int64``, ``uint32`` ...): ``int(text)`` when the stripped text is an integer literal, else the
  text;
- starting with ``num`` or ``float`` (``number``, ``float``, ``numeric`` ...): an integer literal
  stays an int, else ``float(text)`` when finite, else the text;
- starting with ``bool``, or ``binary``: ``true``/``false`` (any case) become booleans, else the
  text (vLLM turns any other text into ``False``; keeping the model's text lets the audit show it);
- ``null``: ``none`` (any case) is None too, else the text;
- any other declared type (``object``, ``array``, ``dict``, ``list``, ``any``, an unknown name):
  ``json.loads(text)`` when the stripped text is a JSON value, else ``ast.literal_eval`` of it when
  it is a Python literal whose value is JSON-shaped (tuples become arrays; sets, bytes, complex
  numbers, non-string keys and non-finite floats are not), else the text (the vLLM/SGLang order);
- an undeclared parameter (or tool, or no tools given): ``json.loads(text)`` when the stripped
  text is a JSON value (``NaN``/``Infinity`` are not), else the text.

The whole-text parse and the streaming parser of every family that types by schema call
:func:`convert_value` on the same raw text, so the two paths type alike by construction.

Where the text is decoded as JSON (undeclared, ``object``, ``array``) and it is one JSON value
nested deeper than :data:`~replay.parsers._jsonscan.MAX_DEPTH`, the result is
:data:`~replay.parsers._jsonscan.TOO_DEEP`: the families then make the call no call (the rule of
:mod:`replay.parsers._jsonscan`), each by its own rule for malformed blocks.
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

from replay.parsers._jsonscan import MAX_DEPTH, TOO_DEEP, decode_at, skip_ws

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


_STRING_TYPES = frozenset(("string", "str", "text", "varchar", "char", "enum"))
_INT_PREFIXES = ("int", "uint", "long", "short", "unsigned")
_NUM_PREFIXES = ("num", "float")


def _kind(declared: str) -> str:
    """The conversion a declared type name selects: ``string``, ``integer``, ``number``,
    ``boolean``, ``null`` or ``other`` (the prefix rules of the module docstring)."""
    t = declared.strip().lower()
    if t in _STRING_TYPES:
        return "string"
    if t.startswith(_INT_PREFIXES):
        return "integer"
    if t.startswith(_NUM_PREFIXES):
        return "number"
    if t.startswith("bool") or t == "binary":
        return "boolean"
    if t == "null":
        return "null"
    return "other"


def _json_shaped(value: Any, depth: int = 0) -> Any:
    """``value`` (from ``ast.literal_eval``) as a JSON value: tuples become lists; raises
    ValueError for anything with no JSON form (sets, bytes, complex, non-string keys, NaN/inf);
    :data:`~replay.parsers._jsonscan.TOO_DEEP` past the depth limit."""
    if depth > MAX_DEPTH:
        return TOO_DEEP
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("non-finite float")
        return value
    if isinstance(value, (list, tuple)):
        items = [_json_shaped(v, depth + 1) for v in value]
        return TOO_DEEP if any(v is TOO_DEEP for v in items) else items
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("non-string key")
        out = {k: _json_shaped(v, depth + 1) for k, v in value.items()}
        return TOO_DEEP if any(v is TOO_DEEP for v in out.values()) else out
    raise ValueError(f"{type(value).__name__} has no JSON form")


def _literal(s: str) -> Any:
    """The JSON form of the Python literal ``s``; raises ValueError when it is none."""
    try:
        value = ast.literal_eval(s)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as e:
        raise ValueError(str(e)) from None
    return _json_shaped(value)


def convert_value(text: str, declared: str | None) -> Any:
    """The JSON value for a parameter's raw ``text`` given its ``declared`` type name (None when
    undeclared), under the module's rule (vLLM/SGLang ``_convert_param_value``);
    :data:`~replay.parsers._jsonscan.TOO_DEEP` when it is decoded as JSON or a literal nested too
    deeply. Never raises."""
    s = text.strip()
    if s.lower() == "null":
        return None
    if declared is None:
        try:
            return _loads(s)
        except ValueError:
            return text
    kind = _kind(declared)
    if kind == "string":
        return text
    if kind == "integer":
        return int(s) if _INT.match(s) else text
    if kind == "number":
        if _INT.match(s):
            return int(s)
        try:
            value = float(s)
        except ValueError:
            return text
        return value if math.isfinite(value) else text
    if kind == "boolean":
        return {"true": True, "false": False}.get(s.lower(), text)
    if kind == "null":
        return None if s.lower() == "none" else text
    for decode in (_loads, _literal):
        try:
            return decode(s)
        except ValueError:
            continue
    return text
