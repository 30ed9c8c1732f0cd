"""The forms of a side spec, and loading a user's object named as ``module:attr`` or
``path/to/file.py:attr``.

Used for every side a user can plug in (``--old-parser``, ``--new-serializer`` ...), through the
one resolver :mod:`replay.resolve`. A plugin is code: it runs only when the user names it. This
module imports nothing of ``replay``: every other module may use it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any


class PluginError(ValueError):
    """A plugin spec that cannot be loaded: the message names the spec and the cause."""


def is_plugin_spec(spec: str) -> bool:
    """True when ``spec`` names a plugin (contains ``:``) rather than a built-in name."""
    return ":" in spec


#: Shorthand prefixes of a serving framework's own tool parser (``sglang/qwen25``) -> the module of
#: :mod:`replay.adapters` that resolves the name in that framework's registry.
FRAMEWORK_PREFIXES: dict[str, str] = {"sglang/": "sglang", "vllm/": "vllm", "trtllm/": "trtllm"}


def is_framework_spec(spec: str) -> bool:
    """True when ``spec`` is a framework shorthand (``sglang/qwen25``, ``vllm/hermes``,
    ``trtllm/qwen3``): one of :data:`FRAMEWORK_PREFIXES` followed by a name."""
    return any(spec.startswith(p) and len(spec) > len(p) for p in FRAMEWORK_PREFIXES)


def load_object(spec: str) -> Any:
    """Import and return the object that ``spec`` names.

    ``spec``: ``package.module:attr`` (imported from ``sys.path``) or ``path/to/file.py:attr``
    (loaded from that file; relative paths are taken from the current directory). ``attr`` may be
    dotted (``module:Class.method``).

    Raises :class:`PluginError` when the module or file cannot be imported or lacks the attribute.
    """
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise PluginError(f"{spec!r}: expected 'module:attr' or 'path/to/file.py:attr'")
    try:
        if target.endswith(".py") or "/" in target or "\\" in target:
            path = Path(target).expanduser().resolve()
            if not path.is_file():
                raise PluginError(f"{spec!r}: no file {path}")
            mod_name = f"replay_plugin_{abs(hash(str(path)))}"
            module = sys.modules.get(mod_name)
            if module is None:
                loader_spec = importlib.util.spec_from_file_location(mod_name, path)
                if loader_spec is None or loader_spec.loader is None:
                    raise PluginError(f"{spec!r}: cannot load {path}")
                module = importlib.util.module_from_spec(loader_spec)
                sys.modules[mod_name] = module
                loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except PluginError:
        raise
    except Exception as exc:  # the user's module failed to import: say which and why
        raise PluginError(f"{spec!r}: importing {target} failed: {exc!r}") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise PluginError(f"{spec!r}: {target} has no attribute {attr!r}") from exc
    return obj
