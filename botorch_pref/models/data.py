r"""Training data of the preference GP: validation, the engine for the data, appending answers.

The model takes designs ``X`` (``batch_shape x n x d``) and either pairwise comparisons
(``batch_shape x m x 2`` rows ``(winner, loser)``, ``(-1, -1)`` padding) or a
:class:`~botorch_pref.data.PreferenceData` with choices, rankings and ties. Pairs, however they
are given, go to the :class:`~botorch_pref.inference.pairs.PairEngine` (diagonal curvature,
repeated pairs merged); other data go to the
:class:`~botorch_pref.inference.blocks.BlockEngine` (one curvature block per observation).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from botorch_pref.checks import whole_number
from botorch_pref.data.preferences import PreferenceData, PreferenceDataError, as_index_tensor
from botorch_pref.inference.engine import LaplaceEngine
from botorch_pref.inference.pairs import PairEngine
from botorch_pref.inference.select import engine_for_data
from botorch_pref.likelihoods import PairwiseLikelihood, PairwiseProbit

__all__ = [
    "PreferenceInputError",
    "append_comparisons",
    "build_engine",
    "check_solver_options",
    "check_unchanged",
    "expand_comparisons",
    "validate_comparisons",
    "validate_datapoints",
    "validate_fantasy_comparisons",
    "validate_test_points",
    "validate_training_data",
]

Comparisons = Tensor | PreferenceData


class PreferenceInputError(PreferenceDataError, RuntimeError):
    """Bad input to the preference model: malformed designs, comparisons or test points.

    A :class:`~botorch_pref.data.PreferenceDataError` (so a ``ValueError`` and BoTorch's
    ``InputDataError``) that is also a ``RuntimeError``, the class ``PairwiseGP`` raises for
    non-pairwise observations and mismatched shapes: code written against either catches it.
    """


def validate_datapoints(datapoints: Tensor) -> None:
    """Check that ``datapoints`` is a finite float ``(batch x) n x d`` tensor with n >= 2.

    Raises:
        PreferenceInputError: naming the problem.
    """
    if not torch.is_tensor(datapoints):
        raise PreferenceInputError("datapoints must be a torch tensor.")
    if datapoints.dtype not in (torch.float32, torch.float64):
        raise PreferenceInputError(
            f"datapoints must be float32 or float64, got {datapoints.dtype}."
        )
    if datapoints.dim() < 2:
        raise PreferenceInputError(
            f"datapoints must have shape (batch x) n x d, got {tuple(datapoints.shape)}."
        )
    if datapoints.shape[-2] < 2 or datapoints.shape[-1] < 1:
        raise PreferenceInputError(
            f"datapoints must hold at least 2 designs of dimension >= 1, got shape "
            f"{tuple(datapoints.shape)}."
        )
    if not bool(torch.isfinite(datapoints).all()):
        raise PreferenceInputError("datapoints contain NaN or infinite values.")


def validate_comparisons(comparisons: Tensor, n: int) -> Tensor:
    """Check ``(batch x) m x 2`` (winner, loser) rows among ``n`` designs; return them as long.

    Raises:
        PreferenceInputError: naming the problem.
    """
    if comparisons.dim() < 2 or comparisons.shape[-1] != 2:
        raise PreferenceInputError(
            "comparisons must have shape (batch x) m x 2 of (winner, loser) rows, got "
            f"{tuple(comparisons.shape)}."
        )
    if comparisons.shape[-2] == 0:
        raise PreferenceInputError("comparisons is empty: a model needs at least one answer.")
    try:
        comparisons = as_index_tensor(comparisons, "comparisons")
    except PreferenceDataError as err:
        raise PreferenceInputError(str(err)) from err
    padding = (comparisons == -1).all(-1)
    real = comparisons[~padding]
    if real.numel() == 0:
        raise PreferenceInputError("comparisons hold only padding rows (-1, -1): no answer at all.")
    low, high = int(real.min()), int(real.max())
    if low < 0 or high >= n:
        raise PreferenceInputError(
            f"comparison indices must lie in [0, {n - 1}] (n = {n} datapoints); found "
            f"{low if low < 0 else high} (only whole rows (-1, -1) may mark padding)."
        )
    same = (comparisons[..., 0] == comparisons[..., 1]) & ~padding
    if bool(same.any()):
        rows = same.nonzero()[:3].tolist()
        raise PreferenceInputError(
            f"a comparison compares a design with itself (winner == loser) at {rows}."
        )
    return comparisons


def validate_training_data(
    datapoints: Tensor, comparisons: Comparisons, likelihood: PairwiseLikelihood
) -> tuple[Tensor, Comparisons, torch.Size]:
    """Validate designs and answers; return them with their common batch shape.

    :class:`PreferenceData` holding pairs only comes back as its ``m x 2`` tensor, so that
    pairwise data always take the pair engine.

    Args:
        datapoints: ``batch_shape x n x d`` designs.
        comparisons: Comparisons or :class:`PreferenceData`.
        likelihood: The model's likelihood (it must model every observation kind present).

    Returns:
        ``(datapoints, comparisons, batch_shape)``; comparisons as a long tensor or as
        :class:`PreferenceData`.

    Raises:
        PreferenceInputError: naming the problem.
    """
    if isinstance(comparisons, PreferenceData) and comparisons.is_pairwise:
        comparisons = comparisons.as_comparisons()
    if not torch.is_tensor(datapoints) or not (
        torch.is_tensor(comparisons) or isinstance(comparisons, PreferenceData)
    ):
        raise PreferenceInputError(
            "datapoints must be a torch tensor and comparisons a tensor or PreferenceData."
        )
    validate_datapoints(datapoints)
    n = datapoints.shape[-2]
    if isinstance(comparisons, PreferenceData):
        try:
            comparisons.validate(n)
            likelihood.check_kinds(comparisons.kinds_present)
        except ValueError as err:
            raise PreferenceInputError(str(err)) from err
        data_batch, what = comparisons.batch_shape, "the preference data"
    else:
        comparisons = validate_comparisons(comparisons, n)
        data_batch, what = comparisons.shape[:-2], "comparisons"
    try:
        batch = torch.broadcast_shapes(datapoints.shape[:-2], data_batch)
    except RuntimeError as err:
        raise PreferenceInputError(
            f"batch shapes of datapoints {tuple(datapoints.shape[:-2])} and {what} "
            f"{tuple(data_batch)} do not broadcast."
        ) from err
    return datapoints, comparisons, batch


def validate_test_points(X: Tensor, dim: int | None, dtype: torch.dtype | None = None) -> Tensor:
    """Check test designs ``(batch x) q x d`` and cast floating points to the model's dtype.

    As ``PairwiseGP`` (which evaluates ``transform_inputs(X).to(train_X)``), floating test
    points of another precision (float32 points for a float64 model, as BoTorch's tutorials
    build bounds with ``torch.zeros(d)``) are cast to ``dtype``; the cast is differentiable, so
    gradients reach ``X`` in its own dtype. Integer, boolean and complex points are refused: an
    index tensor or a complex design is almost surely a mistake, not a design.

    The finiteness check reads a value back from the tensor, which would split a
    ``torch.compile`` graph; inside a compiled region (``torch.compiler.is_compiling()``) it is
    skipped, and NaN test points then give NaN predictions instead of an error.

    Args:
        X: The test designs.
        dim: The model's input dimension, or ``None`` (prior-only model).
        dtype: The model's dtype, or ``None`` to keep ``X``'s.

    Returns:
        ``X``, cast to ``dtype`` when that differs.

    Raises:
        PreferenceInputError: (a ``ValueError`` and a ``RuntimeError``) naming the problem:
            not a tensor, fewer than two dimensions, another input dimension, a non-floating
            dtype, NaN or infinite values.
    """
    if not torch.is_tensor(X):
        raise PreferenceInputError(f"X must be a tensor, got {type(X)}.")
    if X.dim() < 2:
        raise PreferenceInputError(f"X must have shape (batch x) q x d, got {tuple(X.shape)}.")
    if not X.is_floating_point():
        raise PreferenceInputError(
            f"X must hold real floating-point designs, got dtype {X.dtype}: cast it with "
            f"X.to({dtype or torch.float64}) if these are designs."
        )
    if dim is not None and X.shape[-1] != dim:
        raise PreferenceInputError(f"X has {X.shape[-1]} input dimensions, the model has {dim}.")
    if not torch.compiler.is_compiling() and not bool(torch.isfinite(X).all()):
        raise PreferenceInputError("X contains NaN or infinite values.")
    if dtype is not None and X.dtype != dtype:
        X = X.to(dtype)
    return X


def validate_fantasy_comparisons(Y: Tensor, n_new: int | None = None) -> None:
    """Check comparisons ``batch x m x 2`` among new designs (``condition_on_observations``).

    Args:
        Y: The comparisons, indexing the new designs from 0.
        n_new: The number of new designs, when known: every index must lie in ``[0, n_new)``.

    Raises:
        PreferenceInputError: (a ``ValueError`` and a ``RuntimeError``, which ``PairwiseGP``
            raises here) naming the problem.
    """
    if not torch.is_tensor(Y):
        raise PreferenceInputError(f"Y must be a tensor of comparisons, got {type(Y)}.")
    hint = (
        " Real-valued Y comes from fantasize with a sampler of utilities: give fantasize "
        "botorch.sampling.pairwise_samplers.PairwiseSobolQMCNormalSampler, which draws "
        "comparisons."
    )
    if Y.is_floating_point() and not bool((Y == Y.round()).all()):
        raise PreferenceInputError("Y must hold integer comparisons (winner, loser)." + hint)
    if Y.dim() < 2 or Y.shape[-1] != 2:
        raise PreferenceInputError(
            "Conditioning on non-pairwise comparison observations: Y must have shape "
            f"batch x m x 2, got {tuple(Y.shape)}." + hint
        )
    if n_new is not None and Y.numel() > 0:
        low, high = int(Y.min()), int(Y.max())
        if low < 0 or high >= n_new:
            bad = low if low < 0 else high
            raise PreferenceInputError(
                f"Y indexes the {n_new} new designs (rows of X) from 0, got index {bad}."
            )


def expand_comparisons(comparisons: Comparisons, batch: torch.Size, device) -> Comparisons:
    """Broadcast comparisons (or :class:`PreferenceData`) to ``batch`` on ``device``."""
    if isinstance(comparisons, PreferenceData):
        return comparisons.to(device).expand(*batch)
    return comparisons.to(device).expand(*batch, *comparisons.shape[-2:])


def check_unchanged(
    old_datapoints: Tensor | None,
    old_targets: Tensor | None,
    datapoints: Tensor,
    comparisons: Comparisons,
    batch: torch.Size,
) -> None:
    """``set_train_data(..., strict=True)``: shapes, dtypes and devices must not change.

    Args:
        old_datapoints: The model's designs (``None`` for a prior-only model).
        old_targets: The model's ``train_targets`` (comparisons, or the options of its
            :class:`PreferenceData`).
        datapoints: The new, validated designs.
        comparisons: The new, validated comparisons or :class:`PreferenceData`.
        batch: Their common batch shape.

    Raises:
        PreferenceInputError: naming what would change (a prior-only model has nothing to
            match and always raises).
    """
    new_X = datapoints.expand(*batch, *datapoints.shape[-2:])
    new_C = expand_comparisons(comparisons, batch, datapoints.device)
    if isinstance(new_C, PreferenceData):
        new_C = new_C.options
    for what, new, old in (("inputs", new_X, old_datapoints), ("targets", new_C, old_targets)):
        for attr in ("shape", "dtype", "device"):
            expected, found = getattr(old, attr, None), getattr(new, attr)
            if expected != found:
                raise PreferenceInputError(
                    f"Cannot modify {attr} of {what} (expected {expected}, found {found}) "
                    "with strict=True."
                )


def build_engine(
    likelihood: PairwiseLikelihood, datapoints: Tensor, comparisons: Comparisons
) -> LaplaceEngine:
    """The Laplace engine of validated, broadcast data (flat batch).

    Args:
        likelihood: The model's likelihood.
        datapoints: ``batch_shape x n x d`` designs.
        comparisons: ``batch_shape x m x 2`` comparisons or :class:`PreferenceData` of the
            same batch shape.

    Returns:
        A :class:`~botorch_pref.inference.pairs.PairEngine` for comparisons, a
        :class:`~botorch_pref.inference.blocks.BlockEngine` for general data.
    """
    n = datapoints.shape[-2]
    if isinstance(comparisons, PreferenceData):
        return engine_for_data(likelihood, comparisons.reshape(-1), n, datapoints.dtype)
    flat = comparisons.reshape(-1, *comparisons.shape[-2:])
    return PairEngine.from_comparisons(likelihood, flat, n, dtype=datapoints.dtype)


def append_comparisons(
    comparisons: Comparisons, Y: Tensor, offset: int, batch: torch.Size
) -> Comparisons:
    """Comparisons ``Y`` among new designs appended after ``offset`` existing ones.

    Args:
        comparisons: The existing comparisons or :class:`PreferenceData`.
        Y: ``batch x m' x 2`` comparisons indexing the new designs from 0.
        offset: Number of existing designs (added to ``Y``).
        batch: The common batch shape.

    Returns:
        The joined data, of the existing data's type, with batch shape ``batch``.
    """
    Y = Y.long()
    if isinstance(comparisons, PreferenceData):
        old = comparisons.expand(*batch)
        new = PreferenceData.from_comparisons(Y.to(old.device).expand(*batch, *Y.shape[-2:]))
        return PreferenceData.cat([old, new.shift(offset)])
    old = comparisons.expand(*batch, *comparisons.shape[-2:])
    return torch.cat([old, Y.to(old.device).expand(*batch, *Y.shape[-2:]) + offset], dim=-2)


def check_solver_options(tol: Any, max_iter: Any) -> tuple[float | None, int]:
    """The Newton options of a model, checked: ``tol`` ``None`` or finite and ``>= 0``,
    ``max_iter`` an integer ``>= 1``.

    Args:
        tol: The stopping tolerance, or ``None`` for the dtype's default.
        max_iter: The most Newton iterations per mode search.

    Returns:
        ``(tol, max_iter)`` as a float (or ``None``) and an int.

    Raises:
        ValueError: For anything else (no iteration at all would return the starting point as
            the mode).
    """
    iterations = whole_number(max_iter, "max_iter", 1)
    if tol is None:
        return None, iterations
    try:
        value = float(tol)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"tol must be None or a finite number >= 0, got {tol!r}.")
    return value, iterations


#: The posterior approximations of the model: the Laplace approximation at the mode, or
#: expectation propagation started from it (probit pairs only, :mod:`botorch_pref.inference.ep`).
INFERENCES = ("laplace", "ep")


def check_inference(inference: Any, likelihood: PairwiseLikelihood) -> str:
    """A model's posterior approximation, checked against its likelihood.

    EP's sites are probit pairs' and ties' (:mod:`botorch_pref.inference.ep`); other likelihoods
    (and so data with choices or rankings, which need them) take the Laplace approximation.

    Args:
        inference: ``"laplace"`` or ``"ep"``.
        likelihood: The model's likelihood.

    Returns:
        ``inference``.

    Raises:
        ValueError: For another name.
        PreferenceInputError: For ``"ep"`` with another likelihood than the probit.
    """
    if not isinstance(inference, str) or inference not in INFERENCES:
        raise ValueError(f"inference must be one of {', '.join(INFERENCES)}, got {inference!r}.")
    if inference == "ep" and not isinstance(likelihood, PairwiseProbit):
        raise PreferenceInputError(
            "inference='ep' needs the probit pair likelihood (PairwiseProbit, with or without "
            f"a tie_threshold), got {type(likelihood).__name__}; use inference='laplace'."
        )
    return inference
