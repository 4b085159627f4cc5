"""Thread settings of the model, the loop and the command-line entry points; sub-commands.

Threads. torch's CPU build runs its intra-op parallelism on an OpenMP team whose idle threads
busy-wait ("spin") after each parallel region unless ``OMP_WAIT_POLICY=PASSIVE`` was set before
the OpenMP runtime started, that is before ``torch`` was imported; ``botorch_pref`` imports torch
on import, so neither an entry point nor the library can set it any more. The preference GP's
fit, Newton solves and posteriors on small problems, and the loop around them, run many small
kernels; on cores shared with other processes, spinning threads compete with the one doing the
work and slow it down several times over, while splitting kernels this small gains nothing.
What can still be done is not to start a team at all: with one intra-op thread every kernel
runs on the calling thread.

* :func:`problem_threads` is what the model (``fit_gpytorch_mll``, the Newton solves,
  ``posterior``) and the loop (``PreferenceOptimizer.ask`` / ``tell``, ``run_replications``)
  apply around their work: one intra-op thread for a problem of at most
  :data:`SMALL_PROBLEM_DESIGNS` designs, torch's setting for larger ones, restored after the
  call. The setting is :func:`set_model_threads` (process-wide) or :func:`model_threads` (a
  block): ``"auto"`` (the default), a number of threads for every problem, or ``None`` to
  leave torch's setting alone.
* :func:`entry_threads` applies one thread to a whole command (``botorch-pref demo``, LFPL
  training, benchmarks) and restores the setting afterwards; for the whole process by
  default, since a command's work may run in threads of its own (LFPL prepares batches in one).

Both leave the setting alone when the user chose one (``OMP_NUM_THREADS`` or
``MKL_NUM_THREADS`` in the environment, or ``OMP_WAIT_POLICY=PASSIVE``; see
:func:`default_threads`) and off the CPU.

How the count is changed (:func:`intra_op_threads`). For the model and the loop, where torch
follows OpenMP's per-thread setting (its default state, as long as nobody called
``torch.set_num_threads``), the count is changed for the calling thread only, with OpenMP's
``omp_set_num_threads`` and MKL's thread-local ``MKL_Set_Num_Threads_Local``, and restored the
same way: other Python threads are not affected, and torch stays in its default state.
Calling ``torch.set_num_threads`` instead would switch torch, for the rest of the process, to
an explicit count that every OpenMP worker re-applies to MKL; with two or more threads that
makes MKL's batched LU inside torch's parallel loops fail (seen with torch 2.13's CPU build and
BoTorch's ``PairwiseGP``: "Pivots given to lu_solve must all be greater or equal to 1" on
batched posteriors). Where torch holds an explicit count already, or the OpenMP runtime cannot
be reached, ``torch.set_num_threads`` is used and the previous count restored.

Sub-commands. :func:`add_command` registers a sub-command of the ``botorch-pref`` parser with its
one-line help and its description, the same way for every command.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import torch
from torch import Tensor

__all__ = [
    "SMALL_PROBLEM_DESIGNS",
    "USER_SETTINGS",
    "add_command",
    "default_threads",
    "entry_threads",
    "get_model_threads",
    "intra_op_threads",
    "model_threads",
    "nonnegative_int",
    "positive_int",
    "problem_threads",
    "set_model_threads",
    "threaded_backward",
    "with_problem_threads",
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


def _check_threads(threads: Any) -> int | str | None:
    """``threads`` if it is ``"auto"``, ``None`` or a positive int; otherwise raise."""
    if threads == "auto" or threads is None:
        return threads
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise TypeError(f"threads must be 'auto', None or an int, got {threads!r}.")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}.")
    return threads


@functools.cache
def _thread_local_controls() -> tuple[Callable[[int], Any], Callable[[int], int] | None] | None:
    """OpenMP's ``omp_set_num_threads`` and MKL's ``MKL_Set_Num_Threads_Local`` as loaded by
    torch (``None`` where the OpenMP runtime cannot be reached; MKL's may be missing)."""
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        omp_set = lib.omp_set_num_threads
    except (OSError, AttributeError):
        return None
    omp_set.argtypes, omp_set.restype = [ctypes.c_int], None
    mkl_local = getattr(lib, "MKL_Set_Num_Threads_Local", None)
    if mkl_local is not None:
        mkl_local.argtypes, mkl_local.restype = [ctypes.c_int], ctypes.c_int
    return omp_set, mkl_local


def intra_op_threads(threads: int, per_thread: bool = True) -> Callable[[], None]:
    """Set the intra-op thread count; return what restores it.

    Args:
        threads: The number of threads, at least 1.
        per_thread: For the calling thread only, through OpenMP and MKL, where torch follows
            OpenMP's setting (module docstring); otherwise, and with ``False``, for the whole
            process through ``torch.set_num_threads`` (what a command wants when its work
            spawns threads of its own).

    Returns:
        A function of no arguments that restores the previous count.
    """
    previous = torch.get_num_threads()  # also runs torch's per-thread initialisation first
    if threads == previous:
        return lambda: None
    controls = _thread_local_controls() if per_thread else None
    if controls is not None:
        omp_set, mkl_local = controls
        omp_set(threads)
        if torch.get_num_threads() == threads:  # torch follows OpenMP's per-thread setting
            mkl_previous = mkl_local(threads) if mkl_local is not None else None

            def restore() -> None:
                omp_set(previous)
                if mkl_local is not None:
                    mkl_local(mkl_previous)

            return restore
        omp_set(previous)  # torch holds an explicit count: change that one
    torch.set_num_threads(threads)
    return lambda: torch.set_num_threads(previous)


@contextmanager
def entry_threads(
    threads: int | str | None = "auto",
    device: torch.device | str | None = None,
    per_thread: bool = False,
) -> Iterator[int]:
    """Run a block with the entry points' thread default, restoring torch's count afterwards.

    Args:
        threads: ``"auto"`` (:func:`default_threads`), a positive number of threads, or
            ``None`` to leave torch's setting alone.
        device: The device of the work (``"auto"`` changes nothing off the CPU).
        per_thread: Change the calling thread's count only (:func:`intra_op_threads`); the
            default changes the whole process's, for commands whose work spawns threads.

    Yields:
        The intra-op thread count in effect inside the block.

    Raises:
        TypeError: For a ``threads`` that is not ``"auto"``, ``None`` or an integer.
        ValueError: For fewer than one thread.
    """
    threads = _check_threads(threads)
    if threads == "auto":
        threads = default_threads(device)
    if threads is None:
        yield torch.get_num_threads()
        return
    restore = intra_op_threads(threads, per_thread)
    try:
        yield threads
    finally:
        restore()


#: The largest problem (number of designs) that :func:`problem_threads` runs on one intra-op
#: thread under the ``"auto"`` setting: the largest size measured, at which one thread was
#: still faster than two (``benchmarks/botorch_parity.py --part crossover``: our
#: ``fit_gpytorch_mll`` and a 256 x 2 batched posterior at n = 100 ... 1500 designs, m = 3n,
#: on the shared 2-core machine, where one thread was faster at every size measured).
SMALL_PROBLEM_DESIGNS = 1500

_MODEL_THREADS: list[int | str | None] = ["auto"]


def get_model_threads() -> int | str | None:
    """The model's and the loop's thread setting (:func:`set_model_threads`)."""
    return _MODEL_THREADS[0]


def set_model_threads(threads: int | str | None) -> None:
    """Choose the intra-op threads of the model's and the loop's work, for the whole process.

    Args:
        threads: ``"auto"`` (default: one thread for problems of at most
            :data:`SMALL_PROBLEM_DESIGNS` designs on the CPU unless the user chose a thread
            count in the environment, torch's setting otherwise), a positive number of threads
            for every problem, or ``None`` to leave torch's setting alone.

    Raises:
        TypeError: For a ``threads`` that is not ``"auto"``, ``None`` or an integer.
        ValueError: For fewer than one thread.
    """
    _MODEL_THREADS[0] = _check_threads(threads)


@contextmanager
def model_threads(threads: int | str | None) -> Iterator[None]:
    """:func:`set_model_threads` for a block of code, restored afterwards.

    Example:
        >>> with model_threads(None):  # torch's own threads for this fit
        ...     fit_gpytorch_mll(mll)
    """
    previous = get_model_threads()
    set_model_threads(threads)
    try:
        yield
    finally:
        _MODEL_THREADS[0] = previous


@contextmanager
def problem_threads(
    n: int | None = None, device: torch.device | str | None = None
) -> Iterator[int]:
    """The model's and the loop's thread setting applied to a problem of ``n`` designs.

    Args:
        n: The number of designs, or ``None`` for a problem known to be small (the loop's).
        device: The device of the work (nothing changes off the CPU).

    Yields:
        The intra-op thread count in effect inside the block.
    """
    threads = get_model_threads()
    if threads == "auto":
        small = n is None or n <= SMALL_PROBLEM_DESIGNS
        threads = default_threads(device) if small else None
    elif device is not None and torch.device(device).type != "cpu":
        threads = None
    with entry_threads(threads, device, per_thread=True) as count:
        yield count


F = TypeVar("F", bound=Callable[..., Any])


def with_problem_threads(size: Callable[[Any], tuple[int | None, Any]]) -> Callable[[F], F]:
    """Decorate a method so that it runs under :func:`problem_threads`.

    Args:
        size: Maps the method's ``self`` to ``(n, device)`` of its problem.

    Returns:
        The decorator.
    """

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            with problem_threads(*size(self)):
                return method(self, *args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


class _ThreadedBackward(torch.autograd.Function):
    """Identity on the outputs of a graph built inside ``forward``; ``backward`` runs that
    graph's backward pass under a thread setting (:func:`threaded_backward`)."""

    @staticmethod
    def forward(ctx: Any, fn: Callable, threads: Callable, n_in: int, *inputs: Tensor) -> Any:
        leaves = [x.detach().requires_grad_(x.requires_grad) for x in inputs[:n_in]]
        with torch.enable_grad():
            outputs = fn(*leaves)
        ctx.graph = (outputs, leaves + list(inputs[n_in:]), threads)
        return tuple(out.detach() for out in outputs)

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple[Tensor | None, ...]:
        outputs, inputs, threads = ctx.graph
        pairs = [(o, g) for o, g in zip(outputs, grads, strict=True) if o.requires_grad]
        wanted = [x for x in inputs if x.requires_grad]
        found: tuple[Tensor | None, ...] = ()
        if pairs and wanted:
            with threads():
                found = torch.autograd.grad(
                    [o for o, _ in pairs],
                    wanted,
                    [g for _, g in pairs],
                    allow_unused=True,
                    create_graph=torch.is_grad_enabled(),
                )
        by_input = iter(found)
        return (None, None, None, *(next(by_input) if x.requires_grad else None for x in inputs))


def threaded_backward(
    fn: Callable[..., tuple[Tensor, ...]],
    inputs: tuple[Tensor, ...],
    params: list[Tensor],
    threads: Callable[[], Any],
) -> tuple[Tensor, ...]:
    """``fn(*inputs)``, whose backward pass runs under the context ``threads()``.

    A context such as :func:`problem_threads` around a forward computation does not reach its
    backward pass, which autograd runs later, on the thread that asks for the gradient (BoTorch's
    acquisition optimiser, say), with that thread's setting. This wraps ``fn``'s graph in one
    autograd node that applies ``threads()`` while it runs that graph's backward pass, so that
    a model's posterior is differentiated under the model's thread setting, too. Gradients
    reach ``inputs`` and the tensors ``params`` (e.g. hyperparameters) that ``fn`` uses as they
    would without the wrapper. Without autograd (``torch.no_grad``, or nothing that requires a
    gradient), and inside a ``torch.compile`` region, ``fn`` is called as it is.

    Args:
        fn: Maps ``inputs`` to a tuple of tensors.
        inputs: ``fn``'s arguments.
        params: Other tensors ``fn`` reads (leaves whose gradients are wanted).
        threads: Returns the context manager to run the backward pass in.

    Returns:
        ``fn(*inputs)``.
    """
    tracked = [t for t in (*inputs, *params) if t.requires_grad]
    if not torch.is_grad_enabled() or not tracked or torch.compiler.is_compiling():
        return fn(*inputs)
    return _ThreadedBackward.apply(fn, threads, len(inputs), *inputs, *params)


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
