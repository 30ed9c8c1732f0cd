"""Tool serializers and the null-path scanner.

A *tool serializer* turns one tool declaration, exactly as the client sent it (OpenAI Chat
Completions form ``{"type": "function", "function": {"name": ..., ...}}``), into the dict a
renderer (chat template, JSON-of-tools) sees. The built-in serializers reproduce behaviours found
in serving stacks (see each function's docstring); a user adds their own as ``module:attr`` or
``path/to/file.py:attr`` (:func:`get_serializer`).

A *leaked null* is a null in the serialized tool at a JSON path where the client's declaration has
no null (:func:`leaked_nulls`): a null the client wrote itself (``"default": null`` inside
``parameters``) is not a leak.

JSON paths are written in the JSONPath dot form used by every table of a run: ``$`` is the tool
itself, ``$.function.strict`` an object member, ``$.x[2]`` an array item (0-based), and a key
that is not an identifier (``[A-Za-z_][A-Za-z0-9_]*``) is written as a JSON string in brackets:
``$["a b"]``, ``$["x.y"]``.
"""

from __future__ import annotations

from replay.errors import UnknownNameError

import copy
import functools
import re
from typing import Any, Callable

try:  # orjson is optional here: the worker process may run in a venv without it
    import orjson
except ImportError:  # pragma: no cover - exercised in the worker's bare venv
    orjson = None  # type: ignore[assignment]
import json

from replay.resolve import resolve_spec

__all__ = [
    "SERIALIZERS",
    "Serializer",
    "ToolDeclarationError",
    "UnknownSerializerError",
    "as_sent",
    "client_fields",
    "describe_tool",
    "empty_description",
    "exclude_none",
    "get_serializer",
    "leaked_nulls",
    "model_dump",
    "null_paths",
    "request_fields",
]

#: A tool serializer: the client's tool declaration (a JSON object as a dict) -> the dict the
#: renderer sees. It must not modify its argument.
Serializer = Callable[[dict], dict]


class ToolDeclarationError(ValueError):
    """A tool declaration a built-in serializer cannot accept (the request model would reject it).

    The message says what is wrong: ``function`` missing or not an object, ``name`` missing or not
    a string, a field of the wrong type, or ``type`` other than ``"function"``.
    """


class UnknownSerializerError(ValueError):
    """A serializer spec that is neither a built-in name nor a ``module:attr`` plugin spec.

    The message lists the built-in names.
    """


# --------------------------------------------------------------------------- null paths

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@functools.lru_cache(maxsize=4096)
def _suffix(key: str) -> str:
    """Path suffix of member ``key``: ``.key`` or ``["key"]`` (keys repeat a lot: cached)."""
    if _IDENT.match(key):
        return "." + key
    text = orjson.dumps(key).decode() if orjson is not None else json.dumps(key, ensure_ascii=False)
    return "[" + text + "]"


def null_paths(obj: Any, root: str = "$") -> list[str]:
    """JSON paths of every null (``None``) in a JSON value, in document order (depth first).

    ``obj``: a value as decoded from JSON (dict, list, str, int, float, bool, None); dict keys are
    strings. ``root``: the path of ``obj`` itself (``"$"``). Returns ``[]`` when there is no null,
    ``[root]`` when ``obj`` is itself ``None``. Path syntax: see the module docstring
    (``$.function.strict``, ``$.x[2]``, ``$["a b"]``). Iterative, so arbitrarily deep values do
    not hit Python's recursion limit. Raises nothing for JSON values; a non-string dict key is
    written with ``str(key)``.
    """
    if obj is None:
        return [root]
    out: list[str] = []
    # containers being walked: (path, iterator over (key or index, value), is a dict)
    stack: list[tuple[str, Any, bool]] = []
    if isinstance(obj, dict):
        stack.append((root, iter(obj.items()), True))
    elif isinstance(obj, (list, tuple)):
        stack.append((root, iter(enumerate(obj)), False))
    while stack:
        path, it, is_dict = stack[-1]
        for key, value in it:
            if value is None:
                out.append(path + (_suffix(str(key)) if is_dict else f"[{key}]"))
            elif isinstance(value, dict):
                if value:
                    stack.append((path + (_suffix(str(key)) if is_dict else f"[{key}]"), iter(value.items()), True))
                    break
            elif isinstance(value, (list, tuple)):
                if value:
                    stack.append((path + (_suffix(str(key)) if is_dict else f"[{key}]"), iter(enumerate(value)), False))
                    break
        else:
            stack.pop()
    return out


def leaked_nulls(client_tool: Any, serialized: Any) -> list[str]:
    """JSON paths of the nulls in ``serialized`` that the client did not write.

    ``client_tool``: the declaration as the client sent it; ``serialized``: what a serializer made
    of it. Returns, in document order of ``serialized``, every path of :func:`null_paths`
    (``serialized``) where ``client_tool`` has no null at that same path (the path is absent there,
    or holds a non-null value). A null the client wrote is not a leak (DESIGN.md, "leaked null").
    """
    client = set(null_paths(client_tool))
    return [p for p in null_paths(serialized) if p not in client]


# --------------------------------------------------------------------------- validation

#: Strings pydantic v2 accepts for a ``bool`` field in lax mode (compared lower-cased).
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


def _lax_bool(value: Any, where: str) -> bool | None:
    """Validate ``Optional[bool]`` as pydantic v2 does in lax mode (``1``, ``"true"`` ... coerce)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        low = value.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise ToolDeclarationError(f"{where} must be a boolean or null, got {value!r:.80}")


def _check_shape(tool: Any) -> dict:
    """Check the part every built-in needs: ``tool`` an object whose ``function`` is an object with
    a string ``name``. Returns ``tool["function"]``; raises :class:`ToolDeclarationError`."""
    if not isinstance(tool, dict):
        raise ToolDeclarationError(f"tool must be a JSON object, got {type(tool).__name__}")
    if "function" not in tool:
        raise ToolDeclarationError("tool has no 'function' object")
    fn = tool["function"]
    if not isinstance(fn, dict):
        raise ToolDeclarationError(f"tool 'function' must be a JSON object, got {type(fn).__name__}")
    if "name" not in fn:
        raise ToolDeclarationError("tool function has no 'name'")
    if not isinstance(fn["name"], str):
        raise ToolDeclarationError(f"tool function 'name' must be a string, got {type(fn['name']).__name__}")
    return fn


def _validate_model(tool: Any) -> tuple[dict, dict]:
    """Validate ``tool`` as the request model ``ChatCompletionToolsParam`` would.

    Model (vLLM / SGLang protocol classes, pydantic v2, ``extra="allow"``)::

        class FunctionDefinition(BaseModel):
            name: str
            description: Optional[str] = None
            parameters: Optional[dict[str, Any]] = None
            strict: Optional[bool] = None

        class ChatCompletionToolsParam(BaseModel):
            type: Literal["function"] = "function"
            function: FunctionDefinition

    Returns ``(tool_fields, function_fields)``: ordered dicts in model order (declared fields,
    then the client's extra keys in the client's order), every declared field present (``None``
    when unset), values validated (``strict`` coerced as pydantic's lax ``bool``). Raises
    :class:`ToolDeclarationError` where pydantic would raise a ``ValidationError``.
    """
    fn = _check_shape(tool)
    ttype = tool.get("type", "function")
    if ttype != "function":
        raise ToolDeclarationError(f"tool 'type' must be 'function', got {ttype!r:.80}")
    desc = fn.get("description")
    if desc is not None and not isinstance(desc, str):
        raise ToolDeclarationError(f"tool function 'description' must be a string or null, got {type(desc).__name__}")
    params = fn.get("parameters")
    if params is not None and not isinstance(params, dict):
        raise ToolDeclarationError(f"tool function 'parameters' must be an object or null, got {type(params).__name__}")
    strict = _lax_bool(fn.get("strict"), "tool function 'strict'")
    f_out: dict = {"name": fn["name"], "description": desc, "parameters": copy.deepcopy(params), "strict": strict}
    for k, v in fn.items():
        if k not in f_out:
            f_out[k] = copy.deepcopy(v)
    t_out: dict = {"type": "function", "function": f_out}
    for k, v in tool.items():
        if k not in t_out:
            t_out[k] = copy.deepcopy(v)
    return t_out, f_out


# --------------------------------------------------------------------------- serializers


def model_dump(tool: dict) -> dict:
    """``model-dump``: pydantic ``ChatCompletionToolsParam.model_validate(tool).model_dump()``.

    Reproduces vLLM / SGLang, whose OpenAI-compatible front ends validate ``tools`` into
    ``ChatCompletionToolsParam`` and hand ``[t.model_dump() for t in request.tools]`` to the chat
    template: every optional function field the client left unset (``description``,
    ``parameters``, ``strict``) is written as null. Key order is model order: ``type``,
    ``function`` {``name``, ``description``, ``parameters``, ``strict``, then the client's extra
    keys}, then the client's extra tool keys; ``type`` defaults to ``"function"``. Nulls inside
    ``parameters`` and in extra keys are kept. Returns a new dict (no sharing with ``tool``).

    Raises :class:`ToolDeclarationError` where the model's validation fails (see
    :func:`_validate_model`).
    """
    out, _ = _validate_model(tool)
    return out


def exclude_none(tool: dict) -> dict:
    """``exclude-none``: ``ChatCompletionToolsParam.model_validate(tool).model_dump(exclude_none=True)``.

    Reproduces a front end that dumps the request model with ``exclude_none=True`` (a common fix
    for ``strict: null`` leaks): every field of the two *models* whose value is ``None`` is dropped,
    whether unset or sent as null, ``parameters`` included, and so are the client's extra keys whose
    value is null (pydantic v2 treats extras like fields here). Values inside a
    ``dict[str, Any]`` field (``parameters``) and inside extra keys are not models: their nulls are
    untouched (checked against pydantic 2.x). Key order as :func:`model_dump`.

    Raises :class:`ToolDeclarationError` as :func:`model_dump`.
    """
    t_out, f_out = _validate_model(tool)
    t_out["function"] = {k: v for k, v in f_out.items() if v is not None}
    return {k: v for k, v in t_out.items() if v is not None}


def client_fields(tool: dict) -> dict:
    """``client-fields``: :func:`model_dump`, then ``description`` and ``strict`` dropped when null.

    Reproduces front ends that build the template's tool dict from the request model but only pass
    ``description`` / ``strict`` when set (the shape of the narrow fixes made after ``strict: null``
    reached prompts), while ``parameters`` is always passed: null when the client sent none.
    Unset *or* null ``description``/``strict`` are both dropped (the model cannot tell them apart).
    Nulls inside ``parameters`` and in extra keys are untouched. Key order as :func:`model_dump`.

    Raises :class:`ToolDeclarationError` as :func:`model_dump`.
    """
    out, f_out = _validate_model(tool)
    out["function"] = {
        k: v for k, v in f_out.items() if not (k in ("description", "strict") and v is None)
    }
    return out


def empty_description(tool: dict) -> dict:
    """``empty-description``: :func:`client_fields`, with an unset or null ``description`` written as ``""``.

    Reproduces the fix gpt-oss front ends made for Harmony, whose ``ToolDescription`` requires a
    string description (``None`` is a validation error, the HTTP 400 of a tool declared without
    description): the description is passed as ``description or ""``. mistral-common does the same
    for Mistral models. Raises :class:`ToolDeclarationError` as :func:`model_dump`.
    """
    out = client_fields(tool)
    fn = out["function"]
    if fn.get("description") is None:
        out["function"] = {"name": fn["name"], "description": "", **{k: v for k, v in fn.items() if k != "name"}}
    return out


def as_sent(tool: dict) -> dict:
    """``as-sent``: a deep copy of the client's declaration, keys and nulls exactly as sent.

    Reproduces gateways and proxies that forward the client's JSON to the renderer untouched.
    Only the shape is checked (an object with a ``function`` object holding a string ``name``);
    raises :class:`ToolDeclarationError` otherwise.
    """
    _check_shape(tool)
    return copy.deepcopy(tool)


def request_fields(tool: dict) -> dict:
    """``request-fields``: only ``name``, ``description`` and ``parameters``, as the client sent them.

    The fields a model is trained to read (absent stays absent, a null the client wrote
    stays); ``strict`` and every other request-only key (``type`` is kept as ``"function"``) are
    dropped.

    What Harmony (``ToolDescription.new(name, description, parameters)``), mistral-common
    (``Function(name, description, parameters)``) and most checkpoints' own encoders read of a tool;
    as ``--reference-serializer`` it judges a change that stops printing ``strict`` (vLLM #52741)
    as a fix. Raises :class:`ToolDeclarationError` for a declaration without a ``function`` object
    holding a string ``name``.
    """
    fn = _check_shape(tool)
    return {"type": "function", "function": {k: copy.deepcopy(fn[k]) for k in ("name", "description", "parameters") if k in fn}}


#: Built-in serializers by name (the names accepted by ``--old-serializer`` / ``--new-serializer``).
SERIALIZERS: dict[str, Serializer] = {
    "model-dump": model_dump,
    "exclude-none": exclude_none,
    "client-fields": client_fields,
    "as-sent": as_sent,
    "empty-description": empty_description,
    "request-fields": request_fields,
}


def _checked(spec: str, fn: Serializer) -> Serializer:
    """``fn`` with its result checked: a plugin serializer that returns anything but a dict raises
    ``TypeError`` (recorded on that request's ``renders`` row) instead of rendering garbage."""

    def serializer(tool: dict) -> dict:
        out = fn(tool)
        if not isinstance(out, dict):
            raise TypeError(f"serializer {spec} returned {type(out).__name__}, expected a dict (the tool declaration the renderer sees)")
        return out

    serializer.__name__ = getattr(fn, "__name__", "serializer")
    serializer.__doc__ = fn.__doc__
    return serializer


def get_serializer(spec: str) -> Serializer:
    """Return the serializer that ``spec`` names.

    ``spec``: a built-in name (a key of :data:`SERIALIZERS`), or a plugin spec ``module:attr`` /
    ``path/to/file.py:attr`` loaded with :func:`replay.plugins.load_object` (the object must be
    callable ``fn(tool: dict) -> dict``).

    Raises :class:`UnknownSerializerError` for an unknown built-in name (listing the built-ins),
    :class:`replay.plugins.PluginError` when a plugin cannot be loaded, and
    :class:`UnknownSerializerError` when the loaded object is not callable. A plugin's result is
    checked on each call: not a dict raises ``TypeError``.
    """
    return resolve_spec(
        spec,
        builtin=SERIALIZERS.get,
        plugin=_plugin_serializer,
        unknown=lambda s: _UnknownSerializerName(
            f"unknown serializer {s!r}: built-ins are {', '.join(SERIALIZERS)}; "
            "or give a plugin as 'module:attr' or 'path/to/file.py:attr'"
        ),
    )


def _plugin_serializer(spec: str, obj: Any) -> Serializer:
    """A loaded plugin object as a serializer (its results checked on each call)."""
    if not callable(obj):
        raise UnknownSerializerError(f"{spec!r}: {type(obj).__name__} object is not callable")
    return obj if obj in SERIALIZERS.values() else _checked(spec, obj)


# --------------------------------------------------------------------------- TOOLS row


def describe_tool(tool: Any, *, scan_nulls: bool = True) -> dict:
    """The derived columns of a ``tools`` row (:data:`replay.tables.TOOLS`) for one declaration.

    ``tool``: the declaration as sent. The function fields are read from ``tool["function"]`` when
    that is an object (Chat Completions form), else from ``tool`` itself (the flat form of the
    Responses API and of Anthropic Messages, where ``input_schema`` counts as parameters).

    Returns ``{"type", "name", "has_description", "has_parameters", "has_strict", "strict",
    "client_null_paths"}``: ``type``/``name`` the string values (None when absent or not strings);
    ``has_*`` True when the key is present, whatever its value (null included); ``strict`` the
    value when it is a bool, else None (absent, null, or another type); ``client_null_paths`` =
    :func:`null_paths` (``tool``), or ``[]`` without scanning when ``scan_nulls`` is False (the
    caller knows there is no null, e.g. the JSON text has no ``null``). Never raises for JSON
    input; a non-object ``tool`` gives all fields empty except ``client_null_paths``.
    """
    if not isinstance(tool, dict):
        return {
            "type": None,
            "name": None,
            "has_description": False,
            "has_parameters": False,
            "has_strict": False,
            "strict": None,
            "client_null_paths": null_paths(tool),
        }
    fn = tool.get("function")
    if not isinstance(fn, dict):
        fn = tool
    ttype = tool.get("type")
    name = fn.get("name")
    strict = fn.get("strict")
    return {
        "type": ttype if isinstance(ttype, str) else None,
        "name": name if isinstance(name, str) else None,
        "has_description": "description" in fn,
        "has_parameters": "parameters" in fn or "input_schema" in fn,
        "has_strict": "strict" in fn,
        "strict": strict if isinstance(strict, bool) else None,
        "client_null_paths": null_paths(tool) if scan_nulls else [],
    }


class _UnknownSerializerName(UnknownSerializerError, UnknownNameError):
    """A serializer spec naming no built-in and shaped as no plugin (a usage error)."""
