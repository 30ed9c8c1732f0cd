"""Tool serializers, null paths and leaked nulls (replay/tools.py)."""

from __future__ import annotations

import copy
from typing import Any, Literal, Optional

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypo import examples

from replay.plugins import PluginError
from replay.tools import (
    SERIALIZERS,
    ToolDeclarationError,
    UnknownSerializerError,
    describe_tool,
    get_serializer,
    leaked_nulls,
    null_paths,
)

PARAMS = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
PARAMS_DEFAULT_NULL = {
    "type": "object",
    "properties": {"path": {"type": "string", "default": None}},
}

# client tool declarations, exactly as sent
CASES: dict[str, dict] = {
    "name-only": {"type": "function", "function": {"name": "ls"}},
    "no-strict": {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": PARAMS}},
    "strict-true": {
        "type": "function",
        "function": {"name": "read", "description": "Read a file", "parameters": PARAMS, "strict": True},
    },
    "strict-false": {
        "type": "function",
        "function": {"strict": False, "name": "read", "description": "Read a file", "parameters": PARAMS},
    },
    "default-null": {
        "type": "function",
        "function": {"name": "read", "description": "Read a file", "parameters": PARAMS_DEFAULT_NULL},
    },
    "no-parameters": {"type": "function", "function": {"name": "now", "description": "Current time", "strict": True}},
}

# expected output per (serializer, case), written out literally (key order matters)
EXPECTED: dict[str, dict[str, dict]] = {
    "model-dump": {
        "name-only": {
            "type": "function",
            "function": {"name": "ls", "description": None, "parameters": None, "strict": None},
        },
        "no-strict": {
            "type": "function",
            "function": {"name": "read", "description": "Read a file", "parameters": PARAMS, "strict": None},
        },
        "strict-true": {
            "type": "function",
            "function": {"name": "read", "description": "Read a file", "parameters": PARAMS, "strict": True},
        },
        "strict-false": {
            "type": "function",
            "function": {"name": "read", "description": "Read a file", "parameters": PARAMS, "strict": False},
        },
        "default-null": {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string", "default": None}}},
                "strict": None,
            },
        },
        "no-parameters": {
            "type": "function",
            "function": {"name": "now", "description": "Current time", "parameters": None, "strict": True},
        },
    },
    "exclude-none": {
        "name-only": {"type": "function", "function": {"name": "ls"}},
        "no-strict": {
            "type": "function",
            "function": {"name": "read", "description": "Read a file", "parameters": PARAMS},
        },
        "strict-true": {
            "type": "function",
            "function": {"name": "read", "description": "Read a file", "parameters": PARAMS, "strict": True},
        },
        "strict-false": {
            "type": "function",
            "function": {"name": "read", "description": "Read a file", "parameters": PARAMS, "strict": False},
        },
        "default-null": {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string", "default": None}}},
            },
        },
        "no-parameters": {
            "type": "function",
            "function": {"name": "now", "description": "Current time", "strict": True},
        },
    },
    "client-fields": {
        "name-only": {"type": "function", "function": {"name": "ls", "parameters": None}},
        "no-strict": {
            "type": "function",
            "function": {"name": "read", "description": "Read a file", "parameters": PARAMS},
        },
        "strict-true": {
            "type": "function",
            "function": {"name": "read", "description": "Read a file", "parameters": PARAMS, "strict": True},
        },
        "strict-false": {
            "type": "function",
            "function": {"name": "read", "description": "Read a file", "parameters": PARAMS, "strict": False},
        },
        "default-null": {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string", "default": None}}},
            },
        },
        "no-parameters": {
            "type": "function",
            "function": {"name": "now", "description": "Current time", "parameters": None, "strict": True},
        },
    },
    "as-sent": {
        "name-only": {"type": "function", "function": {"name": "ls"}},
        "no-strict": {
            "type": "function",
            "function": {"name": "read", "description": "Read a file", "parameters": PARAMS},
        },
        "strict-true": {
            "type": "function",
            "function": {"name": "read", "description": "Read a file", "parameters": PARAMS, "strict": True},
        },
        # as sent: `strict` stays first
        "strict-false": {
            "type": "function",
            "function": {"strict": False, "name": "read", "description": "Read a file", "parameters": PARAMS},
        },
        "default-null": {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string", "default": None}}},
            },
        },
        "no-parameters": {
            "type": "function",
            "function": {"name": "now", "description": "Current time", "strict": True},
        },
    },
}

# empty-description: client-fields, a missing description written as "" (the Harmony fix)
EXPECTED["empty-description"] = {
    **copy.deepcopy(EXPECTED["client-fields"]),
    "name-only": {"type": "function", "function": {"name": "ls", "description": "", "parameters": None}},
}

# request-fields: name, description, parameters as sent (what Harmony and mistral-common read), in that order
EXPECTED["request-fields"] = {
    "name-only": {"type": "function", "function": {"name": "ls"}},
    "no-strict": {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": PARAMS}},
    "strict-true": {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": PARAMS}},
    "strict-false": {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": PARAMS}},
    "default-null": {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": PARAMS_DEFAULT_NULL}},
    "no-parameters": {"type": "function", "function": {"name": "now", "description": "Current time"}},
}

EXPECTED_LEAKS: dict[str, dict[str, list[str]]] = {
    "model-dump": {
        "name-only": ["$.function.description", "$.function.parameters", "$.function.strict"],
        "no-strict": ["$.function.strict"],
        "strict-true": [],
        "strict-false": [],
        "default-null": ["$.function.strict"],
        "no-parameters": ["$.function.parameters"],
    },
    "exclude-none": {case: [] for case in CASES},
    "client-fields": {
        "name-only": ["$.function.parameters"],
        "no-strict": [],
        "strict-true": [],
        "strict-false": [],
        "default-null": [],
        "no-parameters": ["$.function.parameters"],
    },
    "as-sent": {case: [] for case in CASES},
}
EXPECTED_LEAKS["empty-description"] = EXPECTED_LEAKS["client-fields"]
EXPECTED_LEAKS["request-fields"] = {case: [] for case in CASES}


def _ordered(d: Any) -> bytes:
    """orjson bytes keep key order: equal bytes means equal values *and* equal key order."""
    return orjson.dumps(d)


@pytest.mark.parametrize("serializer", list(SERIALIZERS))
@pytest.mark.parametrize("case", list(CASES))
def test_serializer_matrix(serializer: str, case: str) -> None:
    tool = copy.deepcopy(CASES[case])
    before = _ordered(tool)
    out = get_serializer(serializer)(tool)
    expected = EXPECTED[serializer][case]
    assert out == expected
    assert _ordered(out) == _ordered(expected)  # key order, nested too
    assert list(out.items())[0][0] == "type"
    assert _ordered(tool) == before  # the client's tool is not modified
    assert leaked_nulls(CASES[case], out) == EXPECTED_LEAKS[serializer][case]


@pytest.mark.parametrize("serializer", list(SERIALIZERS))
def test_serializer_returns_fresh_objects(serializer: str) -> None:
    tool = copy.deepcopy(CASES["default-null"])
    out = SERIALIZERS[serializer](tool)
    out["function"]["parameters"]["properties"]["path"]["default"] = "changed"
    assert tool["function"]["parameters"]["properties"]["path"]["default"] is None


def test_model_dump_extras_and_client_nulls() -> None:
    tool = {"function": {"x_extra": None, "name": "f", "strict": None}, "type": "function", "cache": {"a": None}}
    assert _ordered(SERIALIZERS["model-dump"](tool)) == _ordered(
        {
            "type": "function",
            "function": {"name": "f", "description": None, "parameters": None, "strict": None, "x_extra": None},
            "cache": {"a": None},
        }
    )
    # exclude_none drops model-level nulls, extras included, but not nulls inside extra values
    assert _ordered(SERIALIZERS["exclude-none"](tool)) == _ordered(
        {"type": "function", "function": {"name": "f"}, "cache": {"a": None}}
    )
    assert _ordered(SERIALIZERS["client-fields"](tool)) == _ordered(
        {"type": "function", "function": {"name": "f", "parameters": None, "x_extra": None}, "cache": {"a": None}}
    )
    # the client wrote strict: null and x_extra: null: not leaks; description/parameters are
    assert leaked_nulls(tool, SERIALIZERS["model-dump"](tool)) == ["$.function.description", "$.function.parameters"]


def test_model_dump_type_default_and_lax_bool() -> None:
    out = SERIALIZERS["model-dump"]({"function": {"name": "f", "strict": "true"}})
    assert _ordered(out) == _ordered(
        {"type": "function", "function": {"name": "f", "description": None, "parameters": None, "strict": True}}
    )


@pytest.mark.parametrize(
    "tool, message",
    [
        ({"type": "function"}, "no 'function'"),
        ({"type": "function", "function": "ls"}, "'function' must be a JSON object"),
        ({"type": "function", "function": {"description": "x"}}, "no 'name'"),
        ({"type": "function", "function": {"name": 3}}, "'name' must be a string"),
        ([], "must be a JSON object"),
    ],
)
@pytest.mark.parametrize("serializer", list(SERIALIZERS))
def test_malformed_tools_raise(serializer: str, tool: Any, message: str) -> None:
    with pytest.raises(ToolDeclarationError, match=message):
        SERIALIZERS[serializer](tool)


@pytest.mark.parametrize(
    "function, message",
    [
        ({"name": "f", "description": 3}, "'description' must be a string"),
        ({"name": "f", "parameters": []}, "'parameters' must be an object"),
        ({"name": "f", "strict": "maybe"}, "'strict' must be a boolean"),
    ],
)
@pytest.mark.parametrize("serializer", ["model-dump", "exclude-none", "client-fields"])
def test_model_validation_errors(serializer: str, function: dict, message: str) -> None:
    with pytest.raises(ToolDeclarationError, match=message):
        SERIALIZERS[serializer]({"type": "function", "function": function})
    with pytest.raises(ToolDeclarationError, match="'type' must be 'function'"):
        SERIALIZERS[serializer]({"type": "web_search", "function": {"name": "f"}})


# --------------------------------------------------------------------------- agreement with pydantic


def _pydantic_models():
    from pydantic import BaseModel, ConfigDict

    class FunctionDefinition(BaseModel):
        model_config = ConfigDict(extra="allow")
        name: str
        description: Optional[str] = None
        parameters: Optional[dict[str, Any]] = None
        strict: Optional[bool] = None

    class ChatCompletionToolsParam(BaseModel):
        model_config = ConfigDict(extra="allow")
        type: Literal["function"] = "function"
        function: FunctionDefinition

    return ChatCompletionToolsParam


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=3))
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=8,
)
_absent = object()
field_value = {
    "description": st.one_of(st.just(_absent), st.none(), st.text(max_size=3)),
    "parameters": st.one_of(st.just(_absent), st.none(), st.dictionaries(st.text(max_size=3), json_value, max_size=3)),
    "strict": st.one_of(st.just(_absent), st.none(), st.booleans()),
}


@st.composite
def tools(draw):
    fn: dict[str, Any] = {}
    keys = draw(st.permutations(["name", "description", "parameters", "strict", "x_extra"]))
    for k in keys:
        if k == "name":
            fn["name"] = draw(st.text(max_size=4))
        elif k == "x_extra":
            v = draw(st.one_of(st.just(_absent), json_value))
            if v is not _absent:
                fn["x_extra"] = v
        else:
            v = draw(field_value[k])
            if v is not _absent:
                fn[k] = v
    tool: dict[str, Any] = {"function": fn}
    if draw(st.booleans()):
        tool = {"type": "function", **tool}
    if draw(st.booleans()):
        tool["x_top"] = draw(json_value)
    return tool


@settings(max_examples=examples(300), deadline=None)
@given(tools())
def test_builtins_match_pydantic(tool: dict) -> None:
    model = _pydantic_models().model_validate(tool)
    assert _ordered(SERIALIZERS["model-dump"](tool)) == _ordered(model.model_dump())
    assert _ordered(SERIALIZERS["exclude-none"](tool)) == _ordered(model.model_dump(exclude_none=True))
    dumped = model.model_dump()
    dumped["function"] = {k: v for k, v in dumped["function"].items() if not (k in ("description", "strict") and v is None)}
    assert _ordered(SERIALIZERS["client-fields"](tool)) == _ordered(dumped)
    # as-sent and exclude-none never leak; every leak is a null the client did not write
    assert leaked_nulls(tool, SERIALIZERS["as-sent"](tool)) == []
    assert leaked_nulls(tool, SERIALIZERS["exclude-none"](tool)) == []
    client = set(null_paths(tool))
    assert not set(leaked_nulls(tool, SERIALIZERS["model-dump"](tool))) & client


# --------------------------------------------------------------------------- null paths


def test_null_paths_examples() -> None:
    assert null_paths(None) == ["$"]
    assert null_paths({"a": 1, "b": [1, 2]}) == []
    assert null_paths(CASES["default-null"]) == ["$.function.parameters.properties.path.default"]
    assert null_paths({"x": [1, None, {"y": None}], "a b": None, "x.y": {"_k9": None}, "9": None, "": None}) == [
        "$.x[1]",
        "$.x[2].y",
        '$["a b"]',
        '$["x.y"]._k9',
        '$["9"]',
        '$[""]',
    ]
    assert null_paths([None, [None]], root="$.tools") == ["$.tools[0]", "$.tools[1][0]"]
    assert null_paths({'q"uote': None}) == ['$["q\\"uote"]']


def test_null_paths_deep_value_does_not_recurse() -> None:
    deep: Any = None
    for _ in range(5000):
        deep = {"a": deep}
    assert null_paths(deep) == ["$" + ".a" * 5000]


def test_leaked_nulls_client_written_null_is_not_a_leak() -> None:
    client = {"type": "function", "function": {"name": "f", "strict": None, "parameters": PARAMS_DEFAULT_NULL}}
    served = SERIALIZERS["model-dump"](client)
    # strict: null and the default: null were written by the client; description was not
    assert leaked_nulls(client, served) == ["$.function.description"]
    # a null where the client had a value is a leak too
    assert leaked_nulls({"a": 1}, {"a": None, "b": None}) == ["$.a", "$.b"]
    assert leaked_nulls({"a": [None]}, {"a": [None, None]}) == ["$.a[1]"]


def test_describe_tool() -> None:
    assert describe_tool(CASES["name-only"]) == {
        "type": "function",
        "name": "ls",
        "has_description": False,
        "has_parameters": False,
        "has_strict": False,
        "strict": None,
        "client_null_paths": [],
    }
    assert describe_tool({"type": "function", "function": {"name": "f", "strict": None, "description": None}}) == {
        "type": "function",
        "name": "f",
        "has_description": True,
        "has_parameters": False,
        "has_strict": True,
        "strict": None,
        "client_null_paths": ["$.function.strict", "$.function.description"],
    }
    d = describe_tool(CASES["default-null"])
    assert (d["has_parameters"], d["strict"], d["client_null_paths"]) == (
        True,
        None,
        ["$.function.parameters.properties.path.default"],
    )
    assert describe_tool(CASES["strict-false"])["strict"] is False
    assert describe_tool({"type": "function", "function": {"name": "f", "strict": "yes"}})["strict"] is None
    # flat forms: Responses API and Anthropic Messages
    assert describe_tool({"type": "function", "name": "g", "parameters": {}, "strict": True})["name"] == "g"
    anth = describe_tool({"name": "h", "description": "d", "input_schema": {"type": "object"}})
    assert (anth["type"], anth["name"], anth["has_parameters"], anth["has_description"]) == (None, "h", True, True)


# --------------------------------------------------------------------------- registry and plugins


def test_get_serializer_builtin_and_unknown() -> None:
    assert get_serializer("as-sent") is SERIALIZERS["as-sent"]
    with pytest.raises(UnknownSerializerError) as err:
        get_serializer("model_dump2")
    for name in SERIALIZERS:
        assert name in str(err.value)
    assert isinstance(err.value, ValueError)


def test_get_serializer_plugin_file(tmp_path) -> None:
    plugin = tmp_path / "my_serializer.py"
    plugin.write_text(
        "def harmony(tool):\n"
        "    fn = dict(tool['function'])\n"
        "    fn.setdefault('description', '')\n"
        "    return {'type': 'function', 'function': fn}\n"
        "NOT_CALLABLE = 3\n"
    )
    fn = get_serializer(f"{plugin}:harmony")
    assert fn(CASES["name-only"]) == {"type": "function", "function": {"name": "ls", "description": ""}}
    with pytest.raises(UnknownSerializerError, match="not callable"):
        get_serializer(f"{plugin}:NOT_CALLABLE")
    with pytest.raises(PluginError, match="no attribute"):
        get_serializer(f"{plugin}:missing")
    with pytest.raises(PluginError, match="no file"):
        get_serializer(f"{tmp_path / 'absent.py'}:f")


def test_get_serializer_plugin_module() -> None:
    assert get_serializer("replay.tools:exclude_none") is SERIALIZERS["exclude-none"]
