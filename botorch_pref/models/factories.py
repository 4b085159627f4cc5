r"""Model factories: how the preference loop builds a model and the objective it is fitted by.

A :data:`ModelFactory` maps unit-cube ``datapoints`` (``batch x n x d``) and the answers
(``batch x m x 2`` (winner, loser) rows, or a :class:`~botorch_pref.data.PreferenceData` of
choices, rankings and ties) to a model and the marginal log-likelihood whose maximum a posteriori
value the hyperparameter fit seeks. :data:`MODEL_FACTORIES` names the ones the loop offers:

* ``"laplace"``: :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with its Laplace
  evidence :class:`~botorch_pref.models.evidence.LaplaceEvidence`;
* ``"laplace-box"``: the same with ``PairwiseGP``'s flat outputscale prior
  (:func:`box_covar_module`);
* ``"pairwisegp"``: BoTorch's :class:`~botorch.models.PairwiseGP` (pairs only).

For batched ``datapoints`` (``b x n x d``) the Laplace factories give every member its own
hyperparameters (a kernel with ``batch_shape = (b,)``), so that members are independent problems.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from botorch.models import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood
from botorch.models.model import Model
from gpytorch.kernels import ScaleKernel
from gpytorch.mlls import MarginalLogLikelihood
from gpytorch.priors import SmoothedBoxPrior
from torch import Tensor

from botorch_pref.data.preferences import PreferenceData
from botorch_pref.likelihoods import PairwiseLikelihood
from botorch_pref.models.evidence import LaplaceEvidence
from botorch_pref.models.pairwise import PairwiseLaplaceGP, make_covar_module

__all__ = [
    "MODEL_FACTORIES",
    "ModelFactory",
    "box_covar_module",
    "laplace_box_model",
    "laplace_model",
    "pairwisegp_model",
]

#: A model factory maps unit-cube ``datapoints`` (``n x d``) and ``comparisons`` (``m x 2``) to a
#: model and the marginal log-likelihood that ``fit_gpytorch_mll`` maximises for it.
ModelFactory = Callable[[Tensor, Tensor], tuple[Model, MarginalLogLikelihood]]


def _outputscale(kernel: ScaleKernel) -> Tensor:
    # A trailing dimension of one: SmoothedBoxPrior sums its log-density over the last
    # dimension, which must not be the members' batch dimension.
    return kernel.outputscale.unsqueeze(-1)


def _set_outputscale(kernel: ScaleKernel, value: Tensor) -> None:
    kernel.initialize(outputscale=value.squeeze(-1))


def box_covar_module(
    dim: int,
    dtype: torch.dtype = torch.float64,
    batch_shape: torch.Size = torch.Size(),
    lengthscale_prior: str = "gamma",
    base_kernel: str = "rbf",
) -> ScaleKernel:
    r"""The default kernel with ``PairwiseGP``'s flat outputscale prior (an opt-in variant).

    :func:`~botorch_pref.models.pairwise.make_covar_module`'s kernel (ARD RBF, PairwiseGP's
    Gamma(2.4, 2.7) lengthscale prior, log-parametrised constraints) with the outputscale prior
    :math:`\text{LogNormal}(\log 10, 1.5)` replaced by BoTorch ``PairwiseGP``'s smoothed box on
    :math:`[0.01, 100]`, so that inside the box the evidence alone sets the outputscale (the
    utility's variance in units of the answer noise). ``model="laplace-box"`` uses it.

    Why it exists: GPyTorch's MAP fit adds ``prior.log_prob(outputscale)``, the density *in the
    outputscale*, and the LogNormal's density peaks at :math:`10 e^{-1.5^2} \approx 1.05`, not at
    its median 10: above 1.05 it pulls the fit down, by 0.5-0.9 nats per unit of
    :math:`\log` outputscale between 3 and 8. On many answers from a good optimiser, where the
    evidence prefers a large outputscale, the default kernel therefore fits a smaller one than
    ``PairwiseGP`` does.

    Why it is not the loop's default: with few answers the flat prior lets the evidence drive
    the outputscale to the box's edges (to 0.01 after one to four answers, or to 100), exactly
    as it does for ``PairwiseGP`` (``fit_gpytorch_mll`` holds it inside the box with L-BFGS-B
    bounds, :func:`~botorch_pref.models.kernels.box_prior_bounds`, where the box's steep edges
    used to stall L-BFGS).

    Args:
        dim: Input dimension.
        dtype: Dtype of the hyperparameters.
        batch_shape: Batch shape of the hyperparameters (one set per batch member).
        lengthscale_prior: ``"gamma"`` or ``"dim_scaled"`` (see
            :func:`~botorch_pref.models.kernels.make_covar_module`).
        base_kernel: ``"rbf"``, ``"matern52"`` or ``"matern32"``.

    Returns:
        The kernel.
    """
    kernel = make_covar_module(
        dim, lengthscale_prior, batch_shape=batch_shape, dtype=dtype, base_kernel=base_kernel
    )
    kernel.register_prior(
        "outputscale_prior",
        SmoothedBoxPrior(1e-2, 1e2),
        _outputscale,
        _set_outputscale,
    )
    return kernel.to(dtype=dtype)


def laplace_model(
    datapoints: Tensor,
    comparisons: Tensor | PreferenceData,
    likelihood: PairwiseLikelihood | None = None,
    covar_module: ScaleKernel | None = None,
    lengthscale_prior: str = "gamma",
    base_kernel: str = "rbf",
    inference: str = "laplace",
) -> tuple[Model, MarginalLogLikelihood]:
    """:class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with its Laplace evidence.

    Args:
        datapoints: ``n x d`` unit-cube designs, or ``b x n x d`` for ``b`` independent members.
        comparisons: ``(b x) m x 2`` (winner, loser) rows, or a
            :class:`~botorch_pref.data.PreferenceData` of mixed answers.
        likelihood: The likelihood (default: the model's probit).
        covar_module: The kernel (default: :func:`~botorch_pref.models.kernels.make_covar_module`
            with ``lengthscale_prior``, one set of hyperparameters per member for batched
            ``datapoints``: the loop's LogNormal outputscale prior, passed explicitly, since
            the model class's own default is ``PairwiseGP``'s kernel).
        lengthscale_prior: The default kernel's lengthscale prior, ``"gamma"`` or
            ``"dim_scaled"`` (ignored when ``covar_module`` is given).
        base_kernel: The default kernel's base kernel, ``"rbf"``, ``"matern52"`` or
            ``"matern32"`` (ignored when ``covar_module`` is given).
        inference: The posterior approximation, ``"laplace"`` or ``"ep"`` (the model's
            evidence is then EP's).

    Returns:
        ``(model, mll)``.
    """
    batch_shape = datapoints.shape[:-2]
    if covar_module is None:  # the loop's kernel, not the model class's default (PairwiseGP's)
        covar_module = make_covar_module(
            datapoints.shape[-1],
            lengthscale_prior,
            batch_shape=batch_shape,
            dtype=datapoints.dtype,
            base_kernel=base_kernel,
        ).to(datapoints.device)
    if len(batch_shape) > 0 and likelihood is not None and likelihood.has_ties:
        likelihood.batch_tie_threshold(batch_shape)  # independent members: one threshold each
    model = PairwiseLaplaceGP(
        datapoints, comparisons, likelihood, covar_module=covar_module, inference=inference
    )
    return model, LaplaceEvidence(model.likelihood, model)


def laplace_box_model(
    datapoints: Tensor,
    comparisons: Tensor | PreferenceData,
    likelihood: PairwiseLikelihood | None = None,
    lengthscale_prior: str = "gamma",
    base_kernel: str = "rbf",
    inference: str = "laplace",
) -> tuple[Model, MarginalLogLikelihood]:
    """:func:`laplace_model` with :func:`box_covar_module` (``PairwiseGP``'s outputscale prior).

    Args:
        datapoints: ``(b x) n x d`` unit-cube designs.
        comparisons: ``(b x) m x 2`` (winner, loser) rows, or a
            :class:`~botorch_pref.data.PreferenceData` of mixed answers.
        likelihood: The likelihood (default: the model's probit).
        lengthscale_prior: ``"gamma"`` or ``"dim_scaled"``.
        base_kernel: ``"rbf"``, ``"matern52"`` or ``"matern32"``.
        inference: ``"laplace"`` or ``"ep"``.

    Returns:
        ``(model, mll)``.
    """
    kernel = box_covar_module(
        datapoints.shape[-1],
        dtype=datapoints.dtype,
        batch_shape=datapoints.shape[:-2],
        lengthscale_prior=lengthscale_prior,
        base_kernel=base_kernel,
    )
    return laplace_model(
        datapoints, comparisons, likelihood, covar_module=kernel, inference=inference
    )


def pairwisegp_model(
    datapoints: Tensor, comparisons: Tensor
) -> tuple[Model, MarginalLogLikelihood]:
    """BoTorch's :class:`~botorch.models.PairwiseGP` with its Laplace marginal log-likelihood.

    Args:
        datapoints: ``n x d`` unit-cube designs.
        comparisons: ``m x 2`` (winner, loser) rows.

    Returns:
        ``(model, mll)``.
    """
    model = PairwiseGP(datapoints, comparisons)
    return model, PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model)


#: The model factories by name, as ``PreferenceOptimizer(model=...)`` and the benchmarks take
#: them: ``"laplace"``, ``"laplace-box"`` and ``"pairwisegp"``.
MODEL_FACTORIES: dict[str, ModelFactory] = {
    "laplace": laplace_model,
    "laplace-box": laplace_box_model,
    "pairwisegp": pairwisegp_model,
}
