"""Defaults shared by the command-line entry points (``botorch-pref demo``, ``session``, ``lfpl``).

Threads. torch's CPU build runs its intra-op parallelism on an OpenMP team whose idle threads
busy-wait ("spin") after each parallel region unless ``OMP_WAIT_POLICY=PASSIVE`` was set before
the OpenMP runtime started, that is before ``torch`` was imported; ``botorch_pref`` imports torch
on import, so an entry point can no longer set it. The preference loop and LFPL training run
many small kernels; on cores shared with other processes, spinning threads compete with the one
doing the work and slow it down several times over, while splitting kernels this small gains
little. What an entry point can still do is not start a team at all: with one intra-op thread
every kernel runs on the calling thread. :func:`entry_threads` applies that default to a block
of work and restores torch's setting afterwards; it leaves the setting alone when the user chose
one (``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` in the environment, ``OMP_WAIT_POLICY=PASSIVE``,
or an explicit ``threads``) and off the CPU.

Sub-commands. :func:`add_command` registers a sub-command of the ``botorch-pref`` parser with its
one-line help and its description, the same way for every command.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = [
    "USER_SETTINGS",
    "add_command",
    "default_threads",
    "entry_threads",
    "nonnegative_int",
    "positive_int",
]

#: Environment variables by which a user chooses the thread count.
USER_SETTINGS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def default_threads(device: torch.device | str | None = None) -> int | None:
    """The intra-op thread count an entry point should use, or ``None`` to leave torch's.

    Args:
        device: The device of the work; only CPU work is affected.

    Returns:
        ``1`` on the CPU unless the user set a thread count or a passive wait policy in the
        environment; ``None`` otherwise.
    """
    if device is not None and torch.device(device).type != "cpu":
        return None
    if any(os.environ.get(name) for name in USER_SETTINGS):
        return None
    if os.environ.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE":
        return None
    return 1


@contextmanager
def entry_threads(
    threads: int | str | None = "auto", device: torch.device | str | None = None
) -> Iterator[int]:
    """Run a block with the entry points' thread default, restoring torch's count afterwards.

    Args:
        threads: ``"auto"`` (:func:`default_threads`), a positive number of threads, or
            ``None`` to leave torch's setting alone.
        device: The device of the work (``"auto"`` changes nothing off the CPU).

    Yields:
        The intra-op thread count in effect inside the block.

    Raises:
        TypeError: For a ``threads`` that is not ``"auto"``, ``None`` or an integer.
        ValueError: For fewer than one thread.
    """
    if threads == "auto":
        threads = default_threads(device)
    elif threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int):
            raise TypeError(f"threads must be 'auto', None or an int, got {threads!r}.")
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}.")
    previous = torch.get_num_threads()
    if threads is None or threads == previous:
        yield previous
        return
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(previous)


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


def positive_int(text: str) -> int:
    """An ``argparse`` type: the integer ``text`` names, which must be at least 1.

    Raises:
        argparse.ArgumentTypeError: ``text`` is not an integer, or is below 1.
    """
    return _int_at_least(text, 1)


def nonnegative_int(text: str) -> int:
    """An ``argparse`` type: the integer ``text`` names, which must be at least 0 (a seed).

    Raises:
        argparse.ArgumentTypeError: ``text`` is not an integer, or is negative.
    """
    return _int_at_least(text, 0)


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
    return value
