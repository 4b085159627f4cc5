"""Settings for evaluating acquisition functions many times on small batches."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import gpytorch

__all__ = ["lean_kernels"]


@contextmanager
def lean_kernels() -> Iterator[None]:
    """GPyTorch settings for acquisition optimisation: eager kernels, no debug shape checks.

    ``optimize_acqf`` evaluates an acquisition function (and its gradient) one to two hundred
    times per query on small batches (``restarts x q x d``). There GPyTorch's per-call
    bookkeeping, not arithmetic, dominates: each kernel matrix is wrapped in a
    ``LazyEvaluatedKernelTensor`` whose shape is re-derived and re-checked on every call.
    Inside this context kernels are evaluated eagerly
    (``gpytorch.settings.lazily_evaluate_kernels(False)``) and debug-mode shape checks are off
    (``gpytorch.settings.debug(False)``). Values and gradients are unchanged; only the
    bookkeeping goes. Use it around ``optimize_acqf`` (or any loop of acquisition evaluations)
    whose inputs have the model's dimension.

    Example:
        >>> with lean_kernels():
        ...     candidate, value = optimize_acqf(acqf, bounds, q=2, num_restarts=4,
        ...                                      raw_samples=256)
    """
    with ExitStack() as stack:
        stack.enter_context(gpytorch.settings.lazily_evaluate_kernels(False))
        stack.enter_context(gpytorch.settings.debug(False))
        yield
