"""Helpers shared by the command-line entry points (``botorch-pref demo``, ``session``, ``lfpl``).

* :func:`add_command`: register a sub-command of the ``botorch-pref`` parser, with its one-line
  help and its description, the same way for every command.
* :func:`passive_openmp`: ask OpenMP runtimes started from here on (worker processes, a
  sub-command that spawns Python) to sleep rather than spin while waiting; on a shared machine
  spinning threads slow small computations down many times over. An OpenMP runtime reads the
  setting when it loads, so for the current process set ``OMP_WAIT_POLICY=PASSIVE`` before
  starting Python.
"""

from __future__ import annotations

import argparse
import os

__all__ = ["add_command", "passive_openmp"]


def add_command(
    subparsers: argparse._SubParsersAction, name: str, *, help: str, description: str
) -> argparse.ArgumentParser:
    """Add the sub-command ``name`` to the ``botorch-pref`` parser.

    Args:
        subparsers: The sub-parsers object of the ``botorch-pref`` parser.
        name: The command's name.
        help: One line for the command list.
        description: The command's own ``--help`` text.

    Returns:
        The command's parser, to add arguments to.
    """
    return subparsers.add_parser(name, help=help, description=description)


def passive_openmp() -> str:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` for OpenMP runtimes loaded later, unless it is set.

    Returns:
        The policy in force for them.
    """
    return os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
