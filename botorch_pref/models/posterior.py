r"""The posterior of the Laplace preference GP, as BoTorch's ``Model`` interface.

:class:`LaplacePosteriorMixin` gives a model that exposes its Laplace posterior factors
(:meth:`~botorch_pref.models.pairwise.PairwiseLaplaceGP.predictive_factors`) the rest of
BoTorch's and GPyTorch's prediction interface: ``forward`` (the joint Gaussian at transformed
designs), ``posterior`` (a ``GPyTorchPosterior`` at untransformed designs, with input and
posterior transforms) and :meth:`~LaplacePosteriorMixin.preference_probability`. At test designs
:math:`X_*` the posterior is

.. math::

    \mu(X_*) = c + k(X_*, X)\,\hat\alpha, \qquad
    \Sigma(X_*) = K_{**} - k(X_*, X)\,(K + W^{-1})^{-1}\,k(X, X_*),

computed from the cached factors by :func:`~botorch_pref.models.prediction.laplace_predict`; the
constant :math:`c` is the prior mean (``mean_module``, frozen at zero as in ``PairwiseGP``: the
likelihood sees utility differences only, so it shifts the posterior mean and nothing else).
Without data the posterior is the prior.

The host class provides ``datapoints``, ``_has_data()``, ``predictive_factors()``,
``covar_module``, ``mean_module``, ``likelihood`` and BoTorch's ``transform_inputs``.
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.posteriors.gpytorch import GPyTorchPosterior
from botorch.posteriors.posterior import Posterior
from gpytorch.distributions import MultivariateNormal
from linear_operator.operators import DenseLinearOperator
from torch import Tensor
from torch.nn import Module

from botorch_pref.models.data import PreferenceInputError, validate_test_points
from botorch_pref.models.prediction import laplace_predict
from botorch_pref.runtime import problem_threads, threaded_backward, with_problem_threads

__all__ = ["LaplacePosteriorMixin", "prior_constant", "problem_size"]


def problem_size(model: Any) -> tuple[int, torch.device | None]:
    """``(n, device)`` of a model's problem, for :func:`~botorch_pref.runtime.problem_threads`:
    its number of designs and their device (``0, None`` without data)."""
    if not model._has_data():
        return 0, None
    return model.n, model.datapoints.device


def prior_constant(mean_module: Module) -> Tensor:
    """The prior mean's constant, shaped to add to ``... x q`` means: a scalar, or one per
    batch member (``batch_shape x 1``) for a batched ``ConstantMean``.

    Args:
        mean_module: The model's ``ConstantMean``.

    Returns:
        The constant (with its autograd graph).
    """
    c = mean_module.constant
    return c.unsqueeze(-1) if c.dim() > 0 else c


class LaplacePosteriorMixin:
    """BoTorch's posterior interface for a model with cached Laplace factors.

    Mixed into :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` (before ``Model``,
    whose abstract ``posterior`` it implements).
    """

    def _predict(self, X: Tensor, full_cov: bool = True) -> tuple[Tensor, Tensor]:
        """Posterior (or prior) mean and covariance at ``X`` (``... x q x d``, transformed)."""
        # The likelihood sees utility differences only, so with the prior mean c (PairwiseGP's
        # ConstantMean, frozen at zero) the posterior is the zero-mean one shifted by c.
        c = prior_constant(self.mean_module)
        if not self._has_data():
            K = self.covar_module(X).to_dense()
            mean = torch.zeros(K.shape[:-1], dtype=X.dtype, device=X.device)
            return mean + c, K
        train_X, factors = self.predictive_factors()  # brings the mode up to date first
        # The backward pass (an acquisition optimiser's gradient in X) runs under the model's
        # thread setting as the forward pass does (threaded_backward).
        mean, cov = threaded_backward(
            lambda Z: laplace_predict(self.covar_module, train_X, factors, Z, full_cov),
            (X,),
            list(self.covar_module.parameters()),
            lambda: problem_threads(*problem_size(self)),
        )
        return mean + c, cov

    def forward(self, X: Tensor) -> MultivariateNormal:
        """The Laplace posterior (prior without data) at transformed inputs ``X``.

        In training mode, as ``PairwiseGP``: only the (untransformed) training datapoints are
        accepted (``model(*model.train_inputs)``), and a prior-only model raises; both raise
        ``RuntimeError``. Use :meth:`posterior` (or ``eval()``) to predict elsewhere.
        """
        if self.training:
            if not self._has_data():
                raise RuntimeError(
                    "datapoints and comparisons cannot be None in training mode. Call .eval() "
                    "for prior predictions, or call .set_train_data() to add training data."
                )
            if not self._is_training_input(X):
                raise RuntimeError(
                    "Must train on training data: in training mode the model can only be "
                    "called on its training datapoints (model(*model.train_inputs)); call "
                    ".eval() or use .posterior() to predict elsewhere."
                )
            X = self.transform_inputs(self.datapoints)
        mean, cov = self._predict(X)
        # A lazy covariance: nothing is factored until a sample or a log-density needs it.
        return MultivariateNormal(mean, DenseLinearOperator(cov))

    def _is_training_input(self, X: Tensor) -> bool:
        D = self.datapoints
        return X is D or (
            torch.is_tensor(X) and X.shape == D.shape and X.dtype == D.dtype and torch.equal(X, D)
        )

    def _model_dtype(self) -> torch.dtype | None:
        """The dtype the model computes in: its data's, or its hyperparameters' without data."""
        if self._has_data():
            return self.datapoints.dtype
        return next((p.dtype for p in self.covar_module.parameters()), None)

    @with_problem_threads(problem_size)
    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: Any | None = None,
        **kwargs: Any,
    ) -> Posterior:
        r"""Joint Laplace posterior of the utility at ``X``.

        Args:
            X: ``(batch_shape) x q x d`` designs (untransformed). Floating designs of another
                precision than the model's are cast to it, as ``PairwiseGP`` does.
            output_indices: Must be ``None`` or ``[0]`` (one output).
            observation_noise: Ignored: the answer noise acts on comparisons, not on utilities
                (use :meth:`preference_probability` for answer probabilities).
            posterior_transform: An optional BoTorch posterior transform.

        Returns:
            A :class:`~botorch.posteriors.gpytorch.GPyTorchPosterior` with the full joint
            ``q x q`` covariance, differentiable in ``X``. On a small problem it is computed
            on one intra-op thread (:func:`~botorch_pref.runtime.problem_threads`; the setting
            is :func:`~botorch_pref.runtime.set_model_threads`).

        Raises:
            PreferenceInputError: for integer, boolean or complex ``X``, NaN or infinite
                values (checked outside ``torch.compile`` regions only), or another input
                dimension.
        """
        if output_indices is not None and list(output_indices) != [0]:
            raise ValueError("PairwiseLaplaceGP has a single output; output_indices must be [0].")
        dim = self.datapoints.shape[-1] if self._has_data() else None
        X = validate_test_points(X, dim, self._model_dtype())
        if self.training:
            self.eval()
        Xt = self.transform_inputs(X)
        posterior = GPyTorchPosterior(self(Xt))
        if posterior_transform is not None:  # with X, as BoTorch's models (and PairwiseGP)
            return posterior_transform(posterior=posterior, X=X)
        return posterior

    def preference_probability(self, X1: Tensor, X2: Tensor) -> Tensor:
        r"""Posterior probability that ``X1`` beats ``X2``, from their joint posterior.

        .. math::

            P(x_1 \succ x_2) = E[\sigma((g(x_1) - g(x_2)) / s)], \quad
            g(x_1) - g(x_2) \sim N(\mu_1 - \mu_2, v_1 + v_2 - 2 c_{12}),

        which for the probit likelihood is :math:`\Phi((\mu_1 - \mu_2)/\sqrt{s^2 + v_1 + v_2 -
        2 c_{12}})`.

        Args:
            X1: ``... x d`` designs.
            X2: ``... x d`` designs, broadcastable with ``X1``.

        Returns:
            A ``...`` tensor of probabilities.

        Raises:
            PreferenceInputError: When ``X1`` and ``X2`` do not broadcast (and for what
                :meth:`posterior` refuses: NaN, integer designs, another ``d``).
        """
        try:
            X1, X2 = torch.broadcast_tensors(X1, X2)
        except RuntimeError:
            raise PreferenceInputError(
                f"X1 {tuple(X1.shape)} and X2 {tuple(X2.shape)} must have broadcastable shapes."
            ) from None
        post = self.posterior(torch.stack([X1, X2], dim=-2))
        mean = post.mean.squeeze(-1)
        cov = post.distribution.covariance_matrix
        var = cov[..., 0, 0] + cov[..., 1, 1] - 2 * cov[..., 0, 1]
        delta = mean[..., 0] - mean[..., 1]
        # The likelihood's per-member settings (a batched tie threshold) lead its tensors; the
        # posterior's batch members trail any batch of the test points.
        k = len(self.batch_shape)
        members, leading = list(range(delta.dim() - k, delta.dim())), list(range(k))
        p = self.likelihood.predictive_probability(
            delta.movedim(members, leading), var.movedim(members, leading)
        )
        return p.movedim(leading, members)
