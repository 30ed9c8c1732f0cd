"""Virtualenvs holding real releases of serving frameworks, built once and cached.

Used by the tests that audit real releases (``tests/test_engines_sglang.py``,
``tests/test_engines_vllm.py``) and runnable by hand::

    python tests/engines.py sglang==0.5.4 sglang==0.5.23     # prints each venv's python

The cache folder is ``$REPLAY_ENGINES_CACHE`` (default ``~/.cache/replay-engines``); a venv for
``sglang==0.5.4`` lives in ``<cache>/sglang-0.5.4``. A venv is built in a temporary folder beside
it, checked (the framework's parsers import), marked complete and renamed into place in one step,
under a file lock: a half-built venv is never reused, and two test processes never build the same
one at once. A folder without the completion mark (a build killed during its rename window cannot
leave one: rename is atomic) is removed and rebuilt.

The SGLang and transformers venvs are built with ``uv pip install`` (the test extra's ``uv``),
pip's own installer when uv is missing; vLLM's always with pip (:func:`_uv`). How each framework
installs without a GPU is in ``../shared/docs/real-engines.md``:

- SGLang: ``--no-deps sglang==X`` plus the dozen small packages its tool parsers import (about
  440 MB per venv); no torch, the adapter stubs what would import it.
- SGLang's render path (``sglang-render==X``, for ``renderer=sglang:MODEL_DIR``): the same, plus
  fastapi, jsonschema, jinja2 and the transformers release that SGLang release pins; no torch.
- vLLM's render path (``vllm-render==X``, for ``renderer=vllm:MODEL_DIR``): the vLLM venv plus
  ``llguidance`` (``--no-deps``), with ``transformers<5`` for a release whose tokenizer code
  predates transformers 5 (0.11: :func:`_vllm_transformers`).
- transformers (a render environment for ``--old-render-in python``): ``transformers==X`` with
  its dependencies, jinja2 and orjson (about 260 MB per venv).
- vLLM: ``--no-deps vllm==X`` plus torch 2.13.0 (the CPU build pip finds on this machine's disk;
  elsewhere pip downloads it) and about 25 small packages (about 2.2 GB per venv).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: What SGLang's tool parsers import, besides sglang itself (installed with ``--no-deps``).
SGLANG_DEPS = (
    "pydantic",
    "orjson",
    "partial_json_parser",
    "numpy",
    "psutil",
    "pybase64",
    "requests",
    "msgspec",
    "openai",
    "IPython",
    "tqdm",
    "regex",
)

#: What SGLang's chat render path imports besides its tool parsers' needs (``sglang-render==X``: the
#: venv of ``renderer=sglang:MODEL_DIR``); transformers is pinned to the release's own requirement.
SGLANG_RENDER_DEPS = ("fastapi", "jsonschema", "jinja2")

#: What vLLM's tool parsers import on CPU, besides vllm itself (``--no-deps``) and torch.
VLLM_DEPS = (
    "transformers",
    "pydantic",
    "partial_json_parser",
    "regex",
    "openai",
    "msgspec",
    "orjson",
    "numpy",
    "cbor2",
    "psutil",
    "pyzmq",
    "aiohttp",
    "requests",
    "openai_harmony",
    "fastapi",
    "pillow",
    "pybase64",
    "cachetools",
    "prometheus_client",
    "cloudpickle",
    "uvloop",
    "py-cpuinfo",
    "ijson",
    "mistral-common",
    "sentencepiece",
    "tiktoken",
    "blake3",
    "gguf",
    "einops",
    "setproctitle",
)

#: The marker file a complete venv holds (its content: the requirement it was built for).
DONE = "replay-engine-ok"


class EngineBuildError(RuntimeError):
    """A venv could not be built: the message names the requirement and pip's last output."""


def cache_dir() -> Path:
    """The cache folder: ``$REPLAY_ENGINES_CACHE`` or ``~/.cache/replay-engines`` (created)."""
    root = Path(os.environ.get("REPLAY_ENGINES_CACHE") or Path.home() / ".cache" / "replay-engines")
    root.mkdir(parents=True, exist_ok=True)
    return root


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise EngineBuildError(f"{what}: {' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}")


def _install_plan(requirement: str) -> tuple[list[list[str]], str]:
    """The pip argument lists for ``requirement`` and a Python line that checks the venv."""
    name = requirement.split("==")[0].strip().lower()
    if name == "sglang-render":  # SGLang's render path: its tool parsers' deps, jinja2, fastapi and its pinned transformers
        release = requirement.split("==", 1)[1].strip()
        return (
            [["--no-deps", f"sglang=={release}"], [*SGLANG_DEPS, *SGLANG_RENDER_DEPS, _pinned_transformers]],
            "import importlib.util as u; assert u.find_spec('sglang') and u.find_spec('transformers') and u.find_spec('jinja2')",
        )
    if name == "sglang":
        return (
            [["--no-deps", requirement], list(SGLANG_DEPS)],
            "import importlib.util as u; assert u.find_spec('sglang') and u.find_spec('partial_json_parser')",
        )
    if name == "vllm-render":  # vLLM's render path (renderer=vllm:MODEL_DIR): the parser venv plus llguidance
        plan, check = _install_plan("vllm==" + requirement.split("==", 1)[1].strip())
        return ([*plan, [_vllm_transformers], ["--no-deps", "llguidance"]],
                check + "; assert u.find_spec('llguidance')")
    if name == "vllm":
        return (
            [
                ["--no-deps", requirement],
                ["torch==2.13.0"],  # the CPU build this machine keeps on disk (pip's find-links)
                list(VLLM_DEPS),
                ["--no-deps", "xgrammar", "apache-tvm-ffi"],
            ],
            "import importlib.util as u, torch; "
            "assert u.find_spec('vllm.tool_parsers') or u.find_spec('vllm.entrypoints.openai.tool_parsers')",
        )
    if name == "transformers":
        return (
            [[requirement, "jinja2", "orjson"]],
            "import jinja2, orjson, tokenizers; from transformers.utils.chat_template_utils import render_jinja_template",
        )
    raise EngineBuildError(f"no install plan for {requirement!r} (known: sglang==X, sglang-render==X, vllm==X, vllm-render==X, transformers==X)")


def _pinned_transformers(python: Path) -> str:
    """``transformers==V`` as the sglang installed in ``python``'s venv requires it (its
    ``Requires-Dist``), or ``transformers`` when it pins none."""
    code = ("from importlib.metadata import requires\n"
            "print(next((r.split(';')[0].replace(' ', '') for r in requires('sglang') or [] "
            "if r.replace(' ', '').startswith('transformers==')), 'transformers'))")
    got = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return got.stdout.strip() or "transformers"


def _vllm_transformers(python: Path) -> str:
    """``transformers<5`` when the vllm installed in ``python``'s venv reads tokenizer attributes
    transformers 5 removed (``all_special_tokens_extended`` in its
    ``vllm/transformers_utils/tokenizer.py``: 0.11, released before transformers 5, whose
    ``get_cached_tokenizer`` then fails on every tokenizer), else ``transformers`` (what
    :data:`VLLM_DEPS` installed). vLLM's own ``Requires-Dist`` (``transformers>=4.55.2`` in 0.11)
    has no upper bound, so pip would take a release that the render path cannot load."""
    code = ("import importlib.util as u, pathlib\n"
            "src = pathlib.Path(u.find_spec('vllm').origin).parent / 'transformers_utils' / 'tokenizer.py'\n"
            "print('transformers<5' if src.is_file() and 'all_special_tokens_extended' in src.read_text() else 'transformers')")
    got = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return got.stdout.strip() or "transformers"


def _uv(requirement: str) -> str | None:
    """The ``uv`` binary of the test extra's ``uv`` package, for every plan but vLLM's (whose torch
    is the CPU build that pip's configured ``find-links`` folder holds on these machines, and which
    uv, reading no pip configuration, would take from the index as a multi-GB CUDA build); None
    without uv, and pip builds the venv."""
    if requirement.split("==")[0].strip().lower() in ("vllm", "vllm-render"):
        return None
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        return find_uv_bin()
    except FileNotFoundError:
        return None


def engine_python(requirement: str, *, root: Path | None = None) -> Path:
    """The ``bin/python`` of a venv holding ``requirement`` (``sglang==0.5.4``), built if needed.

    ``root``: the cache folder (default :func:`cache_dir`). The venv is built with the running
    interpreter's ``venv`` module and pip from the package index. Raises
    :class:`EngineBuildError` when a step fails (no network, no such release).
    """
    root = root or cache_dir()
    folder = root / requirement.replace("==", "-")
    python = folder / "bin" / "python"
    if (folder / DONE).is_file():
        return python
    with open(root / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / DONE).is_file():  # another process built it while we waited
            return python
        if folder.exists():  # no completion mark: an interrupted build; never reuse it
            shutil.rmtree(folder)
        for stale in root.glob(f"{folder.name}.building-*"):  # left by a killed build; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        tmp = root / f"{folder.name}.building-{os.getpid()}"
        try:
            plan, check = _install_plan(requirement)
            uv = _uv(requirement)
            if uv is not None:  # uv installs the same requirements from the same index, several times faster than pip
                _run([sys.executable, "-m", "venv", "--without-pip", str(tmp)], f"venv for {requirement}")
                pip = [uv, "pip", "install", "--quiet", "--python", str(tmp / "bin" / "python")]
            else:
                _run([sys.executable, "-m", "venv", str(tmp)], f"venv for {requirement}")
                pip = [str(tmp / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
            for args in plan:
                args = [a(tmp / "bin" / "python") if callable(a) else a for a in args]
                _run(pip + args, f"installing {requirement}")
            _run([str(tmp / "bin" / "python"), "-c", check], f"checking {requirement}")
            (tmp / DONE).write_text(requirement + "\n")
            os.rename(tmp, folder)  # a venv's python finds its prefix from pyvenv.cfg: renaming is safe
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return python


if __name__ == "__main__":
    for req in sys.argv[1:] or ["sglang==0.5.4", "sglang==0.5.23"]:
        print(engine_python(req))
