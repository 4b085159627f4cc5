"""The ``botorch-pref`` command line.

:data:`COMMANDS` lists the sub-commands once: each gets its parser from
:func:`botorch_pref.runtime.add_command`, and the module that runs it fills that parser in with
its ``add_arguments(parser)`` (imported only when the parser is built, so ``serve`` is listed
even without the ``[web]`` extra).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from botorch_pref.runtime import add_command

__all__ = ["COMMANDS", "build_parser", "main"]

#: The sub-commands: ``(name, module with add_arguments, one line for the list, --help text)``.
COMMANDS = (
    (
        "lfpl",
        "botorch_pref.lfpl.cli",
        "latent-feature Plackett-Luce models",
        "Latent-feature Plackett-Luce (LFPL) models for rankings of dyads.",
    ),
    (
        "session",
        "botorch_pref.sessions.cli",
        "run preference sessions with people (stored in SQLite)",
        "Create, run, inspect and export preferential-BO sessions with people. "
        "Every answer is saved before the next query is generated.",
    ),
    (
        "demo",
        "botorch_pref.demo",
        "preferential BO against a simulated user (regret table and figure)",
        "Run preferential BO against a simulated user whose answers are noisy, "
        "print the regret of the recommendation after every query and write a figure.",
    ),
    (
        "serve",
        "botorch_pref.web.cli",
        "answer sessions in a browser (needs the [web] extra)",
        "Serve the sessions of a database as web pages: one answer link per "
        "session, an admin page to create sessions, see results and export.",
    ),
)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every sub-command of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="botorch-pref",
        description="Preferential Bayesian optimisation and preference models.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module, help_line, description in COMMANDS:
        command = add_command(sub, name, help=help_line, description=description)
        importlib.import_module(module).add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``botorch-pref`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as err:
        print(f"botorch-pref: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: the shell's convention, without a traceback
        print("\nbotorch-pref: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
