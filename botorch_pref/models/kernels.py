r"""Default kernels of the preference GP: a scaled ARD RBF kernel with weakly informative priors.

The utility :math:`g` has the prior :math:`g \sim GP(0, k)` with

.. math::

    k(x, x') = \sigma_g^2 \exp\Big(-\tfrac12 \sum_{i=1}^d (x_i - x'_i)^2 / \ell_i^2\Big).

In the probit convention (:class:`~botorch_pref.likelihoods.PairwiseProbit`, answer noise of
unit standard deviation per option) the outputscale :math:`\sigma_g^2` is the utility's variance
in units of the answer noise: two unrelated designs are answered correctly with probability
:math:`1 - \arctan(\sigma_g^{-1})/\pi`.

Two sets of priors:

* :func:`default_covar_module`, the model class's default, is BoTorch ``PairwiseGP``'s
  kernel: a drop-in must do at least as well as ``PairwiseGP`` on
  BoTorch's own flows, and on BoTorch's ``preference_bo`` tutorial these priors rank test
  designs better than the LogNormal outputscale prior below
  (``benchmarks/botorch_parity.py --part tutorial``).
* :func:`make_covar_module` (LogNormal(log 10, 1.5) outputscale prior, both hyperparameters
  constrained to ``value = 1e-4 + exp(raw)`` so that L-BFGS steps in log scale) is what the
  preference loop's model factory uses: it keeps the outputscale off the box's edges after
  few answers, which the loop's question quality depends on. Measured effects of these choices
  are in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import math

import torch
from gpytorch.constraints import GreaterThan, Interval
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel
from gpytorch.priors import GammaPrior, LogNormalPrior, SmoothedBoxPrior
from torch.nn import Module

__all__ = [
    "BASE_KERNELS",
    "box_prior_bounds",
    "default_covar_module",
    "make_covar_module",
]

#: The base kernels :func:`make_covar_module` offers: the RBF kernel and the Matern kernels of
#: smoothness 5/2 and 3/2 (sample paths twice and once differentiable).
BASE_KERNELS = ("rbf", "matern52", "matern32")


def default_covar_module(
    dim: int | None,
    batch_shape: torch.Size = torch.Size(),
    dtype: torch.dtype = torch.float64,
) -> ScaleKernel:
    r"""The model class's default kernel: BoTorch ``PairwiseGP``'s, as its constructor builds it.

    * A scaled ARD RBF kernel.
    * Lengthscales: :math:`\text{Gamma}(2.4, 2.7)` (mode 0.52 on unit-cube inputs), bounded
      below by 1e-4 (untransformed), started at the mode.
    * Outputscale: a ``SmoothedBoxPrior`` on [0.01, 100], flat inside so that the evidence
      alone sets the utility's variance (in units of the answer noise), constrained to
      [0.005, 200], started at 1. With consistent answers the evidence keeps rising with the
      outputscale and the fit ends on the box's edge; the model's fit holds it inside the box
      with L-BFGS-B bounds (:func:`box_prior_bounds`).

    Why: on BoTorch's ``preference_bo`` tutorial (10 seeds,
    ``benchmarks/botorch_parity.py --part tutorial``) these priors halve the gap to
    ``PairwiseGP``'s Kendall tau left by the LogNormal(log 10, 1.5) outputscale prior of
    :func:`make_covar_module` (whose MAP density peaks at 1.05). The preference loop keeps
    :func:`make_covar_module` (:func:`~botorch_pref.models.factories.laplace_model`).

    What remains of the gap (Kendall tau 0.004 below ``PairwiseGP``'s) is a difference of
    likelihood, not of fit: BoTorch's ``PairwiseProbitLikelihood`` clamps the standardised
    difference :math:`z = \delta/\sqrt 2` to :math:`[-3, 3]`, so its data term saturates for
    well separated pairs while their curvature stays that of :math:`z = 3`; its evidence then
    peaks at smaller outputscales (25-80 on the tutorial's data, where this model's exact probit
    evidence rises to the box's edge), and its mode differs at equal hyperparameters.

    Args:
        dim: Input dimension (one lengthscale each), or ``None`` for one shared lengthscale.
        batch_shape: Batch shape of the hyperparameters.
        dtype: Dtype of the hyperparameters.

    Returns:
        The kernel.
    """
    os_lb, os_ub = 1e-2, 1e2
    base = RBFKernel(
        batch_shape=batch_shape,
        ard_num_dims=dim,
        lengthscale_prior=GammaPrior(concentration=2.4, rate=2.7),
        lengthscale_constraint=GreaterThan(1e-4, transform=None, initial_value=(2.4 - 1) / 2.7),
    )
    return ScaleKernel(
        base,
        batch_shape=batch_shape,
        outputscale_prior=SmoothedBoxPrior(a=os_lb, b=os_ub),
        outputscale_constraint=Interval(os_lb * 0.5, os_ub * 2.0, initial_value=1.0),
    ).to(dtype)


def _lengthscale_prior(name: str, dim: int | None) -> tuple[GammaPrior | LogNormalPrior, float]:
    """The lengthscale prior called ``name`` and its mode (the initial value)."""
    if name == "gamma":
        return GammaPrior(concentration=2.4, rate=2.7), (2.4 - 1) / 2.7
    if name == "dim_scaled":
        if dim is None:
            raise ValueError("lengthscale_prior='dim_scaled' needs the input dimension.")
        loc = math.sqrt(2) + math.log(dim) / 2
        return LogNormalPrior(loc, math.sqrt(3)), math.exp(loc - 3)
    raise ValueError(f"lengthscale_prior must be 'gamma' or 'dim_scaled', got {name!r}.")


def make_covar_module(
    dim: int | None,
    lengthscale_prior: str = "gamma",
    batch_shape: torch.Size = torch.Size(),
    dtype: torch.dtype = torch.float64,
    base_kernel: str = "rbf",
) -> ScaleKernel:
    r"""The preference loop's kernel: a scaled ARD kernel with a LogNormal outputscale prior.

    * Lengthscales: ``lengthscale_prior`` (default ``PairwiseGP``'s Gamma(2.4, 2.7)), bounded
      below by 1e-4, started at the prior's mode.
    * Outputscale: :math:`\text{LogNormal}(\log 10, 1.5)`, bounded below by 1e-4, initial
      value 10 (the prior's median). The median 10 says "two unrelated designs are answered
      correctly about 90% of the time" (:math:`1 - \arctan(10^{-1/2})/\pi`), and the 95%
      range (0.5 to 190) runs from "answers are nearly random" to "answers are nearly
      noiseless". A MAP fit adds the prior's density *in the outputscale*, whose mode is
      :math:`10 e^{-1.5^2} \approx 1.05`, not the median, so the prior pulls fitted
      outputscales down compared with the evidence alone; after few answers that keeps the
      loop's model off the extremes a flat box allows.
    * Both are optimised in log scale (module docstring).

    ``base_kernel="rbf"`` is the module's :math:`k`; ``"matern52"`` and ``"matern32"`` replace
    the squared exponential by the Matern correlation of smoothness :math:`\nu = 5/2` or
    :math:`3/2` in the same scaled distance :math:`r^2 = \sum_i (x_i - x'_i)^2 / \ell_i^2`,
    with the same priors and constraints. A rougher kernel trusts its interpolation less far
    from the data, which matters when the utility's peak is much narrower than its range.

    Args:
        dim: Input dimension (one lengthscale each), or ``None`` for one lengthscale shared by
            all inputs (what a prior-only model without data uses, as ``PairwiseGP`` does).
        lengthscale_prior: ``"gamma"`` (``PairwiseGP``'s Gamma(2.4, 2.7), the default) or
            ``"dim_scaled"`` (LogNormal(sqrt 2 + log(d) / 2, sqrt 3), BoTorch's dimension-scaled
            prior, whose median lengthscale grows like sqrt(d)).
        batch_shape: Batch shape of the hyperparameters.
        dtype: Dtype of the hyperparameters.
        base_kernel: ``"rbf"`` (default), ``"matern52"`` or ``"matern32"``.

    Returns:
        The kernel.
    """
    if base_kernel not in BASE_KERNELS:
        raise ValueError(
            f"base_kernel must be one of {', '.join(BASE_KERNELS)}, got {base_kernel!r}."
        )
    ls_prior, ls_init = _lengthscale_prior(lengthscale_prior, dim)
    log_scale = {"transform": torch.exp, "inv_transform": torch.log}
    kwargs = {
        "batch_shape": batch_shape,
        "ard_num_dims": dim,
        "lengthscale_prior": ls_prior,
        "lengthscale_constraint": GreaterThan(1e-4, initial_value=ls_init, **log_scale),
    }
    if base_kernel == "rbf":
        base = RBFKernel(**kwargs)
    else:
        base = MaternKernel(nu={"matern52": 2.5, "matern32": 1.5}[base_kernel], **kwargs)
    return ScaleKernel(
        base,
        batch_shape=batch_shape,
        outputscale_prior=LogNormalPrior(math.log(10.0), 1.5),
        outputscale_constraint=GreaterThan(1e-4, initial_value=10.0, **log_scale),
    ).to(dtype)  # GPyTorch kernels ignore a dtype keyword


def box_prior_bounds(module: Module, prefix: str = "") -> dict[str, tuple[float, float]]:
    r"""L-BFGS-B bounds that hold outputscales with a smoothed box prior inside their box.

    ``PairwiseGP``'s default kernel puts a ``SmoothedBoxPrior(a, b)`` on the outputscale: flat
    on :math:`[a, b]`, with Gaussian tails of standard deviation ``sigma`` (0.01) outside. With
    consistent answers the exact Laplace evidence keeps rising with the outputscale, so its
    maximum a posteriori value lies on the box's upper edge, where the tail's curvature
    (:math:`\sigma^{-2} = 10^4`) is many orders above the evidence's and L-BFGS's line search
    stalls ("ABNORMAL"). As the prior is flat inside the box and all but zero outside, the MAP
    problem is the evidence maximised over the box itself: these bounds (on the raw parameter,
    through the constraint's inverse transform) make L-BFGS-B enforce exactly that.

    Args:
        module: The model (or a kernel).
        prefix: Prepended to the parameter names, e.g. ``"model."`` for an MLL's parameters.

    Returns:
        ``{name of raw_outputscale: (lower, upper)}`` for every ``ScaleKernel`` whose
        ``outputscale_prior`` is a ``SmoothedBoxPrior`` (empty when there is none).
    """
    bounds = {}
    for name, kernel in module.named_modules():
        prior = getattr(kernel, "outputscale_prior", None)
        if not isinstance(kernel, ScaleKernel) or not isinstance(prior, SmoothedBoxPrior):
            continue
        constraint = kernel.raw_outputscale_constraint
        ends = []
        for end in (prior.a, prior.b):
            end = end.detach().reshape(-1)[:1].to(kernel.raw_outputscale)
            low, high = constraint.lower_bound.to(end), constraint.upper_bound.to(end)
            raw = constraint.inverse_transform(torch.minimum(torch.maximum(end, low), high))
            ends.append(float(raw) if bool(torch.isfinite(raw)) else None)
        key = f"{prefix}{name}.raw_outputscale" if name else f"{prefix}raw_outputscale"
        bounds[key] = tuple(ends)
    return bounds
