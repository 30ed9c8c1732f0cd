"""Errors shared by the spec resolvers (serializers, tool parsers, preparers, renderers)."""

from __future__ import annotations


class UsageError(ValueError):
    """A bad option value, found before any work: the CLI reports it as a usage error (exit 2)
    with the one-line message, which names the option."""


class UnknownNameError(UsageError):
    """A side spec that names no built-in and is not shaped as a plugin (``module:attr`` or
    ``file.py:attr``): a bad option value, which the CLI reports as a usage error (exit 2) before
    any work. A plugin spec that is well formed but fails to load is not this error (exit 1)."""
