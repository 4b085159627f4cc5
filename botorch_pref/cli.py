"""The ``botorch-pref`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="botorch-pref",
        description="Preferential Bayesian optimisation and preference models.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    from botorch_pref.lfpl.cli import register as register_lfpl

    register_lfpl(sub)
    from botorch_pref.sessions.cli import register as register_sessions

    register_sessions(sub)
    from botorch_pref.demo import register as register_demo

    register_demo(sub)
    from botorch_pref.web.cli import register as register_web

    register_web(sub)
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
