"""The ``replay`` command line: options in, one library call, output out.

Every command is a thin layer over the library (:mod:`replay.audit`, :mod:`replay.capture`,
:mod:`replay.stages`, :mod:`replay.runner`, :mod:`replay.sql`, :mod:`replay.report`). Exit codes: 0 done, 1 a query
error or a spec that does not load (a plugin, an interpreter, a template), or a run folder another
command is writing (:class:`replay.runner.runfolder.RunLock`), 2 bad usage, before any
work and in one line naming the option and what it accepts (a value not of the option's form:
``--replay-timeout abc``, ``--chunkings ""``, ``--capture-format xml``, ``--date 2026-13-45``, a
bad ``--fail-on``; an existing run in ``--out`` without ``--force``), 3 a ``--fail-on`` condition
held (:data:`replay.verdicts.FAIL_ON_EXIT`). Help is click's plain layout, wrapped at the
terminal's width (rich's panels cut long words with "…" at 80 columns). 130: interrupted (Ctrl-C,
SIGTERM), in one line naming the stage.

One module per command group: :mod:`replay.cli.audit`, :mod:`replay.cli.ingest`,
:mod:`replay.cli.stages` (``render``, ``stream``), :mod:`replay.cli.runs` (``query``, ``show``,
``report``, ``formats``), :mod:`replay.cli.matrix`, :mod:`replay.cli.repro`, over :mod:`replay.cli.app` (the Typer app, consoles, help layout),
:mod:`replay.cli.options` (every option declared once) and :mod:`replay.cli.common` (helpers).
The console script is ``replay.cli:app``.
"""

from __future__ import annotations

import os

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # before anything imports transformers

from replay.cli.app import _GroupedHelp, _OneLineErrors, app, console, err, escape  # noqa: E402,F401
# the commands register on `app` as their modules are imported, in the order `replay --help` lists them
from replay.cli import audit, ingest, stages, runs, matrix, repro  # noqa: E402,F401

__all__ = ["app"]
