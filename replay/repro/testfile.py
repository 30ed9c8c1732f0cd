"""Writing the shrunk case as a standalone pytest file, in the style of the framework's own
tool-parser suite, and proving it: run in the broken side's interpreter it fails, in the fixed
side's it passes.

Styles (:func:`style_of`, from the side's parser spec):

- ``sglang``: as SGLang's ``test/registered/function_call/test_function_call_parser.py`` is
  written: a ``unittest.TestCase`` whose ``setUp`` builds ``Tool(type="function",
  function=Function(...))`` and the detector class (the one ``--tool-call-parser NAME`` selects,
  imported from its own module); one test feeds each delta to ``parse_streaming_increment(delta,
  tools)`` and joins the streamed calls by ``tool_index``, one runs ``detect_and_parse(text,
  tools)``; both assert the expected names and ``json.loads`` of the arguments.
- ``vllm``: as vLLM's ``tests/tool_parsers/test_*_tool_parser.py``: ``pytestmark =
  pytest.mark.cpu_test``, the parser class from ``ToolParserManager.get_tool_parser(NAME)`` built
  on a tokenizer (and the request's tools, in releases whose ``ToolParser`` takes them), a
  ``ChatCompletionRequest`` with the request's tools, the deltas fed to
  ``extract_tool_calls_streaming(previous_text, current_text, delta_text, ...)`` with each
  delta's token ids, the last finished as the server finishes it where the release's ``Parser``
  does (0.33: ``get_remaining_unstreamed_args()`` appended, an engine-based parser's
  ``finish_streaming()``; vLLM ``parser/abstract_parser.py``), and the whole text to
  ``extract_tool_calls``; calls asserted by
  ``function.name`` and ``json.loads`` of ``function.arguments``. The tokenizer is built in the
  file, offline (:data:`_VLLM_TOKENIZER`): vLLM's parsers look their markers' ids up in
  ``get_vocab()``, and a model name would be a download.
- ``protocol``: a built-in or plugin parser, through replay's parser protocol
  (``replay.stream.replay_stream`` and ``parse``; docs/parsers-and-serializers.md).

The expected calls are the reference parser's whole-text parse of the shrunk completion (what the
audit judged the side against); ``content-leak`` also asserts that no family marker is left in
the streamed content.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.repro.judge import ReproError

__all__ = ["Expected", "style_of", "write_test", "Proof", "run_test", "framework_facts", "vllm_facts"]


@dataclass(frozen=True)
class Expected:
    """What the test asserts: ``calls`` as ``(name, arguments as a JSON value, or the text when it
    is not JSON)``, ``content`` (the reference's), ``markers`` (none may be left in the streamed
    content when ``no_markup``), ``whole`` (the check is the whole-text parse's: the file tests
    ``detect_and_parse`` / ``extract_tool_calls`` / ``parse``; else the streamed deltas, which is
    what the audit judged: a test of both would fail on a side whose whole-text parse has another
    fault than the one shrunk)."""

    calls: tuple[tuple[str, Any], ...]
    content: str
    markers: tuple[str, ...]
    no_markup: bool
    whole: bool = False  # the check judges the whole-text parse (semantic-diff): test that, not the stream


def style_of(parser_spec: str | None) -> str:
    """``sglang``, ``vllm`` or ``protocol`` for a side's parser spec (None: the built-in)."""
    if parser_spec and parser_spec.startswith("sglang/"):
        return "sglang"
    if parser_spec and parser_spec.startswith("vllm/"):
        return "vllm"
    return "protocol"


def _py(value: Any) -> str:
    """``value`` as Python source (JSON-shaped data: dicts, lists, strings, numbers, bools, None)."""
    return repr(value)


_SGLANG_IMPORT = '''
def _import_function_call_without_torch():
    """SGLang's package ``__init__`` imports the serving runtime (torch, aiohttp); its
    ``function_call`` package does not need it. Where torch is missing, ``sglang`` and
    ``sglang.srt`` are bare packages over the installed folders, and ``xgrammar`` (structural-tag
    types only) a stub."""
    import importlib.abc
    import importlib.machinery
    import importlib.util
    import os
    import sys
    import types

    if importlib.util.find_spec("torch") is not None or "sglang" in sys.modules:
        return
    root = list(importlib.util.find_spec("sglang").submodule_search_locations)[0]
    for name, path in (("sglang", root), ("sglang.srt", os.path.join(root, "srt"))):
        mod = types.ModuleType(name)
        mod.__path__ = [path]
        sys.modules[name] = mod
    if importlib.util.find_spec("xgrammar") is None:

        class _Stub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
            def find_spec(self, name, path=None, target=None):
                if name == "xgrammar" or name.startswith("xgrammar."):
                    return importlib.machinery.ModuleSpec(name, self, is_package=True)
                return None

            def create_module(self, spec):
                return None

            def exec_module(self, module):
                import pydantic

                module.__path__ = []

                def attr(name):
                    if name[:1].isupper():
                        model = type(name, (pydantic.BaseModel,), {"model_config": pydantic.ConfigDict(extra="allow", arbitrary_types_allowed=True)})
                        setattr(module, name, model)
                        return model
                    raise AttributeError(name)

                module.__getattr__ = attr

        sys.meta_path.insert(0, _Stub())


_import_function_call_without_torch()
'''


def _header(case: dict[str, Any]) -> str:
    lines = [
        f"Repro of {case['check']} on exchange {case['exchange_id']} (written by `replay repro`).",
        "",
        f"Broken: {case['broken']}. Fixed: {case['fixed']}.",
        f"Shrunk from {case['sizes']['chars'][0]} to {case['sizes']['chars'][1]} chars, "
        f"{case['sizes']['deltas'][0]} to {case['sizes']['deltas'][1]} deltas, "
        f"{case['sizes']['tools'][0]} to {case['sizes']['tools'][1]} tools.",
    ]
    if case.get("masked"):
        lines.append("User text masked (letters x, digits 1 and 0); names, markers and call syntax as captured.")
    return '"""' + "\n".join(lines) + '\n"""\n'


def write_test(path: Path, style: str, case: dict[str, Any], expected: Expected) -> Path:
    """Write the test file of ``style`` for ``case`` (keys: ``check``, ``exchange_id``,
    ``broken``, ``fixed``, ``sizes``, ``masked``, ``deltas``, ``tools``, ``parser``: the
    framework's parser name or the protocol spec, for ``sglang`` ``detector_module`` and
    ``detector_class``, for ``vllm`` ``model`` and ``special_tokens``: the markers the file's
    offline tokenizer holds as special tokens) to ``path``; returns it. Raises ValueError for an
    unknown style."""
    deltas = list(case["deltas"])
    tools = list(case["tools"])
    exp = [[n, a] for n, a in expected.calls]
    if style == "sglang":
        body = _sglang(case, deltas, tools, exp, expected)
    elif style == "vllm":
        body = _vllm(case, deltas, tools, exp, expected)
    elif style == "protocol":
        body = _protocol(case, deltas, tools, exp, expected)
    else:
        raise ValueError(f"unknown test style {style!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_header(case) + body, encoding="utf-8")
    return path


def _arguments_helper() -> str:
    return '''

def _arguments(text):
    try:
        return json.loads(text)
    except ValueError:
        return text
'''


def _sglang(case: dict[str, Any], deltas: list[str], tools: list[dict[str, Any]], exp: list[Any], expected: Expected) -> str:
    cls, mod = case["detector_class"], case["detector_module"]
    tool_src = ",\n".join(
        f"            Tool(type=\"function\", function=Function(**{_py(t.get('function') or {})}))" for t in tools
    )
    leak = ""
    if expected.no_markup:
        leak = f"\n        for marker in {_py(list(expected.markers))}:\n            self.assertNotIn(marker, normal_text)"
    if expected.whole:
        whole_leak = f"\n        normal_text = result.normal_text or \"\"{leak}" if leak else ""
        test = f"""
    def test_whole_text_calls(self):
        result = self.detector.detect_and_parse(TEXT, self.tools)
        self.assertEqual([[c.name, _arguments(c.parameters)] for c in result.calls], EXPECTED_CALLS){whole_leak}
"""
    else:
        test = f"""
    def test_streaming_calls(self):
        calls = {{}}
        normal_text = ""
        for delta in DELTAS:
            result = self.detector.parse_streaming_increment(delta, self.tools)
            normal_text += result.normal_text or ""
            for item in result.calls:
                call = calls.setdefault(item.tool_index, {{"name": "", "parameters": ""}})
                call["name"] += item.name or ""
                call["parameters"] += item.parameters or ""
        got = [[c["name"], _arguments(c["parameters"])] for _, c in sorted(calls.items())]
        self.assertEqual(got, EXPECTED_CALLS){leak}
"""
    return f'''
import json
import unittest
{_SGLANG_IMPORT}
from sglang.srt.entrypoints.openai.protocol import Function, Tool
from {mod} import {cls}

DELTAS = {_py(deltas)}
TEXT = "".join(DELTAS)
EXPECTED_CALLS = {_py(exp)}
{_arguments_helper()}

class Test{cls}Repro(unittest.TestCase):
    def setUp(self):
        self.tools = [
{tool_src}
        ]
        self.detector = {cls}()
{test}

if __name__ == "__main__":
    unittest.main()
'''


def _vllm(case: dict[str, Any], deltas: list[str], tools: list[dict[str, Any]], exp: list[Any], expected: Expected) -> str:
    leak = ""
    if expected.no_markup:
        leak = f"\n    for marker in {_py(list(expected.markers))}:\n        assert marker not in content"
    if expected.whole:
        whole_leak = f"\n    content = info.content or \"\"{leak}" if leak else ""
        test = f"""
def test_whole_text_calls(parser):
    info = parser.extract_tool_calls(TEXT, request=_request())
    assert [[tc.function.name, _arguments(tc.function.arguments)] for tc in info.tool_calls] == EXPECTED_CALLS{whole_leak}
"""
    else:
        test = f"""
def test_streaming_calls(parser, tokenizer):
    request = _request()
    calls, content, previous, previous_ids = {{}}, "", "", []
    for step, delta in enumerate(DELTAS):
        current = previous + delta
        delta_ids = _ids(tokenizer, delta)
        message = parser.extract_tool_calls_streaming(
            previous_text=previous, current_text=current, delta_text=delta,
            previous_token_ids=previous_ids, current_token_ids=previous_ids + delta_ids,
            delta_token_ids=delta_ids, request=request,
        )
        previous, previous_ids = current, previous_ids + delta_ids
        if step == len(DELTAS) - 1:
            message = _finishing_step(parser, message)
        if message is None:
            continue
        content += message.content or ""
        for tc in message.tool_calls or []:
            call = calls.setdefault(tc.index, {{"name": "", "arguments": ""}})
            if tc.function is not None:
                call["name"] += tc.function.name or ""
                call["arguments"] += tc.function.arguments or ""
    got = [[c["name"], _arguments(c["arguments"])] for _, c in sorted(calls.items())]
    assert got == EXPECTED_CALLS{leak}
"""
    return f'''
import inspect
import json
import os

import pytest

try:
    from vllm.tool_parsers import ToolParserManager
except ImportError:  # releases before the tool_parsers package moved
    from vllm.entrypoints.openai.tool_parsers import ToolParserManager
try:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
except ImportError:
    from vllm.entrypoints.openai.protocol import ChatCompletionRequest

pytestmark = pytest.mark.cpu_test

PARSER = {_py(case["parser"])}
MODEL = {_py(case.get("model") or "")}
SPECIAL_TOKENS = {_py(list(case.get("special_tokens") or ()))}
TOOLS = {_py(tools)}
DELTAS = {_py(deltas)}
TEXT = "".join(DELTAS)
EXPECTED_CALLS = {_py(exp)}
{_arguments_helper()}
{_VLLM_TOKENIZER}

@pytest.fixture(scope="module")
def tokenizer():
    return _offline_tokenizer()


@pytest.fixture
def parser(tokenizer):
    cls = ToolParserManager.get_tool_parser(PARSER)
    if "tools" in inspect.signature(cls.__init__).parameters:  # later releases take the request's tools
        return cls(tokenizer, _request().tools)
    return cls(tokenizer)


def _request():
    return ChatCompletionRequest(model=MODEL, messages=[{{"role": "user", "content": ""}}], tools=TOOLS, tool_choice="auto")


def _finishing_step(parser, message):
    """The last delta as the server finishes it, in releases whose Parser does so
    (Parser.finalize_generation, then _flush_engine_parsers): the arguments parsed but not yet
    streamed appended to the last tool call, then an engine-based parser's finish_streaming()."""
    remaining = getattr(parser, "get_remaining_unstreamed_args", None)
    if callable(remaining) and message is not None and message.tool_calls and message.tool_calls[-1].function:
        last = message.tool_calls[-1].function
        last.arguments = (last.arguments or "") + remaining()
    finish = getattr(parser, "finish_streaming", None)
    if getattr(parser, "engine_based_streaming", False) and callable(finish):
        flush = finish()
        if flush is not None and message is None:
            message = flush
        elif flush is not None:
            message.content = (message.content or "") + (flush.content or "")
            message.tool_calls = list(message.tool_calls or []) + list(flush.tool_calls or [])
    return message


def _ids(tokenizer, text):
    return list(tokenizer.encode(text, add_special_tokens=False)) if text else []

{test}'''


#: The tokenizer a vLLM-style test file builds (no download): the model's own when
#: ``$REPLAY_VLLM_TOKENIZER`` names one on disk, else byte-level BPE without merges (each byte one
#: id; ``tokenizers``' own ``ByteLevel`` alphabet) with the family's markers added as special
#: tokens, as :func:`replay.adapters.vllm.marker_tokenizer` builds it: vLLM's parsers look their
#: markers' ids up in ``get_vocab()`` and in the token-id lists.
_VLLM_TOKENIZER = '''
def _offline_tokenizer():
    """The model's tokenizer when $REPLAY_VLLM_TOKENIZER names one on disk (a tokenizer.json or a
    folder), else a byte-level tokenizer holding SPECIAL_TOKENS, each one id: built here, nothing
    is downloaded."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = os.environ.get("REPLAY_VLLM_TOKENIZER")
    if path and path.endswith(".json"):
        return PreTrainedTokenizerFast(tokenizer_file=path)
    if path:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(sorted(alphabet))}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    fast.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS})
    return fast
'''


def _protocol(case: dict[str, Any], deltas: list[str], tools: list[dict[str, Any]], exp: list[Any], expected: Expected) -> str:
    leak = ""
    if expected.no_markup:
        leak = f"\n    for marker in {_py(list(expected.markers))}:\n        assert marker not in got.content"
    if expected.whole:
        whole_leak = leak.replace("got.content", "result.content")
        test = f"""
def test_whole_text_calls():
    result = new_parser(get_parser(PARSER), TOOLS).parse(TEXT)
    assert [[c.name, _arguments(c.arguments)] for c in result.calls] == EXPECTED_CALLS{whole_leak}
"""
    else:
        test = f"""
def test_streaming_calls():
    got = replay_stream(get_parser(PARSER), TOOLS, DELTAS)
    assert [[c.name, _arguments(c.arguments)] for c in got.calls] == EXPECTED_CALLS{leak}
"""
    return f'''
import json

from replay.parsers import get_parser
from replay.stream import new_parser, replay_stream

PARSER = {_py(case["parser"])}
TOOLS = {_py(tools)}
DELTAS = {_py(deltas)}
TEXT = "".join(DELTAS)
EXPECTED_CALLS = {_py(exp)}
{_arguments_helper()}
{test}'''


# --- the side's framework, asked in its own interpreter -----------------------------------------

_FACTS = r'''
import json, sys
from replay.adapters import sglang as s
cls = s._fcp().ToolCallParserEnum[sys.argv[1]]
print(json.dumps({"module": cls.__module__, "class": cls.__name__, "version": s._version()}))
'''


def framework_facts(python: str | None, parser_spec: str, pythonpath: tuple[str, ...] = ()) -> dict[str, str]:
    """For an ``sglang/NAME`` side: the detector's ``module`` and ``class`` and the release
    (``version``), read in the side's interpreter. Raises :class:`ReproError` when it fails."""
    name = parser_spec.split("/", 1)[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*pythonpath, str(Path(__file__).resolve().parents[2])])}
    proc = subprocess.run([python or sys.executable, "-c", _FACTS, name], capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise ReproError(f"cannot read SGLang's detector for {parser_spec} in {python or sys.executable}: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


_VLLM_FACTS = r'''
import json
from importlib.metadata import version
print(json.dumps({"version": version("vllm")}))
'''


def vllm_facts(python: str | None, parser_spec: str, pythonpath: tuple[str, ...] = ()) -> dict[str, str]:
    """For a ``vllm/NAME`` side: the vLLM release installed in the side's interpreter
    (``{"framework": "vLLM", "version": ...}``, from the package metadata, without importing vLLM),
    so that the test file and the report name the release, as for SGLang. Raises
    :class:`ReproError` when vLLM is not installed there."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath)}
    proc = subprocess.run([python or sys.executable, "-c", _VLLM_FACTS], capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise ReproError(f"cannot read the vLLM release for {parser_spec} in {python or sys.executable}: {proc.stderr.strip()[-500:]}")
    return {"framework": "vLLM", **json.loads(proc.stdout.strip().splitlines()[-1])}


@dataclass(frozen=True)
class Proof:
    """One run of a test file: the interpreter, pytest's exit code, tests run, failed and
    errored (from its JUnit XML), and the last lines of its output."""

    python: str
    returncode: int
    tests: int
    failures: int
    errors: int
    output: str

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and self.tests > 0 and self.failures == 0 and self.errors == 0

    @property
    def failed(self) -> bool:
        """Failed by an assertion (not by an import or collection error)."""
        return self.tests > 0 and self.failures > 0 and self.errors == 0

    def word(self) -> str:
        if self.passed:
            return f"passes ({self.tests} tests)"
        if self.failed:
            return f"fails ({self.failures} of {self.tests} tests)"
        return f"errors (exit {self.returncode}, {self.errors} errors)"


def _pytest_only_path() -> str:
    """A folder holding only pytest and what it imports (links to this interpreter's copies), so a
    framework venv without pytest runs the test with nothing else of ours on its path."""
    import importlib.util

    folder = Path(tempfile.gettempdir()) / f"replay-repro-pytest-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    for mod in ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py"):
        spec = importlib.util.find_spec(mod)
        if spec is None or spec.origin is None:
            continue
        src = Path(spec.origin).parent if spec.submodule_search_locations else Path(spec.origin)
        dst = folder / src.name
        if not dst.exists():
            dst.symlink_to(src)
    return str(folder)


def run_test(path: Path, python: str | None, *, with_replay: bool = False, pythonpath: tuple[str, ...] = (), timeout: float = 300) -> Proof:
    """Run the test file ``path`` with pytest in ``python`` (None: this interpreter), with only
    pytest added to its path (and this ``replay`` package when ``with_replay``: the protocol
    style). Returns the :class:`Proof`. pytest runs in ``path``'s folder: a relative ``path``,
    ``python`` or ``pythonpath`` entry is taken from the current directory first (made absolute,
    symlinks kept: a venv's ``bin/python`` is one)."""
    path = Path(path).absolute()
    exe = str(Path(python).absolute()) if python and os.sep in python else (python or sys.executable)
    paths = [str(Path(p).absolute()) for p in pythonpath]
    if with_replay:
        paths.append(str(Path(__file__).resolve().parents[2]))
    paths.append(_pytest_only_path())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONDONTWRITEBYTECODE": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        proc = subprocess.run(
            [exe, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", str(path.parent), f"--junitxml={xml}", str(path)],
            capture_output=True, text=True, env=env, cwd=str(path.parent), timeout=timeout,
        )
        tests = failures = errors = 0
        if xml.is_file():
            root = ET.parse(xml).getroot()
            for suite in root.iter("testsuite"):
                tests += int(suite.get("tests", 0))
                failures += int(suite.get("failures", 0))
                errors += int(suite.get("errors", 0))
    out = (proc.stdout + proc.stderr).strip().splitlines()
    return Proof(exe, proc.returncode, tests, failures, errors, "\n".join(out[-15:]))
