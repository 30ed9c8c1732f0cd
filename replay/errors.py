"""Errors shared by the spec resolvers (serializers, tool parsers, preparers, renderers)."""

from __future__ import annotations


class UnknownNameError(ValueError):
    """A side spec that names no built-in and is not shaped as a plugin (``module:attr`` or
    ``file.py:attr``): a bad option value, which the CLI reports as a usage error (exit 2) before
    any work. A plugin spec that is well formed but fails to load is not this error (exit 1)."""
