"""The ``botorch-pref`` command line.

:data:`COMMANDS` lists the sub-commands once: each gets its parser from
:func:`botorch_pref.runtime.add_command`, and the module that runs it fills that parser in with
its ``add_arguments(parser)`` (imported only when the parser is built, so ``serve`` is listed
even without the ``[web]`` extra). Every parser, sub-commands' included, formats its help with
:class:`DefaultsHelpFormatter`, so each option's ``--help`` line shows its default.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterator, Sequence

from botorch_pref.runtime import add_command

__all__ = ["COMMANDS", "DefaultsHelpFormatter", "build_parser", "main"]

#: The sub-commands: ``(name, module with add_arguments, one line for the list, --help text)``.
COMMANDS = (
    (
        "lfpl",
        "botorch_pref.lfpl.lfpl_command",
        "latent-feature Plackett-Luce models",
        "Latent-feature Plackett-Luce (LFPL) models for rankings of dyads.",
    ),
    (
        "session",
        "botorch_pref.sessions.session_command",
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
        "botorch_pref.web.serve_command",
        "answer sessions in a browser (needs the [web] extra)",
        "Serve the sessions of a database as web pages: one answer link per "
        "session, an admin page to create sessions, see results and export.",
    ),
)


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Help that ends each option's line with its default, as ``(default: 8000)``.

    Unlike ``argparse.ArgumentDefaultsHelpFormatter`` it says nothing for an option whose
    default is ``None``, ``False`` or empty (a flag that is off, or a setting whose default the
    help text explains), nor where the help text already names its default; an
    ``--x/--no-x`` switch shows the spelling that is in force. :func:`build_parser` gives an
    option without a help text one, so that its default shows too.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = _default_text(action)
        if default is None or "(default" in text:
            return text
        return f"{text} (default: {default})".strip()


def _default_text(action: argparse.Action) -> str | None:
    """How an option's default reads in its help, or ``None`` if it has none worth saying."""
    default = action.default
    if isinstance(action, argparse.BooleanOptionalAction) and isinstance(default, bool):
        return action.option_strings[0 if default else 1]
    if (
        not action.option_strings
        or default is None
        or default is False
        or default is argparse.SUPPRESS
        or (isinstance(default, (list, tuple, dict, str)) and not default)
    ):
        return None
    return "%(default)s"


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and, recursively, the parsers of its sub-commands."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


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
    for each in _parsers(parser):
        each.formatter_class = DefaultsHelpFormatter
        for action in each._actions:  # argparse prints no help line for a help of None
            default = _default_text(action)
            if action.help is None and default is not None:
                action.help = f"(default: {default})"
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
