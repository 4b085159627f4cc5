r"""How BoTorch's ``fit_gpytorch_mll`` fits the preference GP.

``fit_gpytorch_mll(mll)`` hands a model that has a ``custom_fit`` method its arguments;
:meth:`FitMixin.custom_fit` runs BoTorch's own routine with two additions: the model's thread
setting (:func:`~botorch_pref.runtime.problem_threads`) around the whole fit, forward and
backward passes included, and L-BFGS-B bounds that hold an outputscale with a smoothed box
prior inside its box (:func:`~botorch_pref.models.kernels.box_prior_bounds`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from botorch.fit import _fit_fallback
from gpytorch.mlls import MarginalLogLikelihood
from torch import Tensor

from botorch_pref.models.kernels import box_prior_bounds
from botorch_pref.models.posterior import problem_size
from botorch_pref.runtime import with_problem_threads

__all__ = ["FitMixin"]


class FitMixin:
    """``custom_fit`` for a preference GP (mixed in before BoTorch's ``Model``)."""

    @with_problem_threads(problem_size)
    def custom_fit(
        self,
        mll: MarginalLogLikelihood,
        closure: Callable[[], tuple[Tensor, Sequence[Tensor | None]]] | None = None,
        closure_kwargs: dict[str, Any] | None = None,
        optimizer_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> MarginalLogLikelihood:
        """``fit_gpytorch_mll(mll)`` for this model: BoTorch's default fit, thread-aware.

        ``fit_gpytorch_mll`` hands a model with a ``custom_fit`` its arguments; this one runs
        BoTorch's own routine (L-BFGS-B on the MAP objective, retries on failure, the same
        options) with the model's thread setting: on a small problem, forward and backward
        passes run on one intra-op thread (:func:`~botorch_pref.runtime.problem_threads`,
        setting :func:`~botorch_pref.runtime.set_model_threads`).

        An outputscale with a ``SmoothedBoxPrior`` (``PairwiseGP``'s default kernel) is held
        inside its box by L-BFGS-B's bounds, where the prior is flat
        (:func:`~botorch_pref.models.kernels.box_prior_bounds`): the box's steep tails would
        otherwise stall the line search when the evidence peaks on the box's edge. Bounds the
        caller passes in ``optimizer_kwargs`` take precedence.

        Args:
            mll: The objective, e.g. :class:`~botorch_pref.models.evidence.LaplaceEvidence`.
            closure: As ``fit_gpytorch_mll``.
            closure_kwargs: As ``fit_gpytorch_mll``.
            optimizer_kwargs: As ``fit_gpytorch_mll``.
            kwargs: As ``fit_gpytorch_mll`` (``optimizer``, ``max_attempts``, ...).

        Returns:
            ``mll``, in eval mode when the fit succeeded.
        """
        box = box_prior_bounds(self, prefix="model.")
        if box and "optimizer" not in kwargs:  # BoTorch's default, L-BFGS-B, takes bounds
            optimizer_kwargs = dict(optimizer_kwargs or {})
            optimizer_kwargs["bounds"] = {**box, **(optimizer_kwargs.get("bounds") or {})}
        return _fit_fallback(
            mll,
            closure=closure,
            closure_kwargs=closure_kwargs,
            optimizer_kwargs=optimizer_kwargs,
            **kwargs,
        )
