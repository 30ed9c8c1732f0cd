"""Errors shared by the spec resolvers (serializers, tool parsers, preparers, renderers)."""

from __future__ import annotations


class OptionError(ValueError):
    """An option value the library rejects before any work (``--chunkings token`` without a
    tokenizer, a name that is no built-in): the CLI reports it as a usage error (exit 2)."""


class UnknownNameError(OptionError):
    """A side spec that names no built-in and is not shaped as a plugin (``module:attr`` or
    ``file.py:attr``): a bad option value, which the CLI reports as a usage error (exit 2) before
    any work. A plugin spec that is well formed but fails to load is not this error (exit 1)."""
