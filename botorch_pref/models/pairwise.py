r"""The Laplace pairwise-preference Gaussian process, a BoTorch model.

:class:`PairwiseLaplaceGP` is Chu & Ghahramani's (2005) preference GP: a zero-mean GP prior on a
latent utility :math:`g`, a likelihood for "design v beat design u" (and for choices, rankings
and ties), and the Laplace approximation of the posterior at its mode. With utilities
:math:`f = g(X)` at the designs, :math:`f \sim N(0, K)`, the mode :math:`\hat f` maximises
:math:`\Psi(f) = \log p(\mathcal D \mid f) - f^\top K^{-1} f / 2` and the posterior is
approximated by :math:`N(\hat f, (K^{-1} + W)^{-1})` with :math:`W = -\nabla^2 \log p` at the
mode. At test designs :math:`X_*`,

.. math::

    \mu(X_*) = k(X_*, X)\,\hat\alpha, \qquad
    \Sigma(X_*) = K_{**} - k(X_*, X)\,(K + W^{-1})^{-1}\,k(X, X_*),

with :math:`\hat f = K\hat\alpha` (computed without any inverse, see
:mod:`botorch_pref.inference.engine`).

The model holds a Laplace engine for its data (:func:`botorch_pref.models.data.build_engine`:
pairs take the diagonal-curvature pair engine, other answers the block engine), the kernel
hyperparameters and the factors cached once per data set and hyperparameter values, and speaks
BoTorch's ``Model`` interface so that every BoTorch acquisition function, ``fit_gpytorch_mll``
(with :class:`~botorch_pref.models.evidence.LaplaceEvidence`) and ``fantasize`` work on it. It is
a drop-in for :class:`botorch.models.PairwiseGP`: same constructor, same data conventions, same
scale convention for the probit noise.

Differences from ``PairwiseGP`` (all deliberate):

* The mode is found by damped Newton in torch on the data's device and dtype (no SciPy, no host
  round-trip), in the smaller of the comparison-space and design-space systems, with repeated
  pairs merged and warm starts across hyperparameter and data updates.
* The probit hazard :math:`\phi(z)/\Phi(z)` is exact (``PairwiseGP`` clamps ``z`` at +-3), so
  strongly consistent answers are weighted correctly.
* Factors are cached once per data set and hyperparameter values: a posterior call is kernel
  evaluations and one batched matrix product.
* The prior mean is ``mean_module``, a ``ConstantMean`` frozen at zero as in ``PairwiseGP``;
  answers see utility differences only, so a constant :math:`c` shifts the posterior mean by
  :math:`c` and nothing else: utilities are identified only up to a shift, see
  :func:`botorch_pref.diagnostics.relative_posterior`.

The full list of deliberate differences is the README's "Differences from PairwiseGP".
"""

from __future__ import annotations

import warnings
from copy import deepcopy
from typing import Any

import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.models.likelihoods.pairwise import (
    PairwiseLogitLikelihood,
    PairwiseProbitLikelihood,
)
from botorch.models.model import FantasizeMixin, Model
from botorch.models.transforms.input import InputTransform
from botorch.posteriors.gpytorch import GPyTorchPosterior
from botorch.posteriors.posterior import Posterior
from botorch.utils.datasets import RankingDataset, SupervisedDataset
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import Kernel
from gpytorch.means import ConstantMean
from gpytorch.models import GP
from linear_operator.operators import DenseLinearOperator
from torch import Tensor

from botorch_pref.data.preferences import PreferenceData, PreferenceDataError
from botorch_pref.inference.engine import LaplaceEngine, LaplaceFactors, ModeResult, WarmStart
from botorch_pref.inference.newton import Form, default_tolerance, fit_tolerance
from botorch_pref.likelihoods import PairwiseLikelihood, PairwiseLogit, PairwiseProbit
from botorch_pref.models.data import (
    PreferenceInputError,
    append_comparisons,
    build_engine,
    expand_comparisons,
    validate_fantasy_comparisons,
    validate_test_points,
    validate_training_data,
)
from botorch_pref.models.kernels import default_covar_module, make_covar_module
from botorch_pref.models.prediction import laplace_predict

__all__ = [
    "PairwiseLaplaceGP",
    "PreferenceDataError",
    "PreferenceInputError",
    "default_covar_module",
    "make_covar_module",
]


class PairwiseLaplaceGP(Model, GP, FantasizeMixin):
    r"""Preference GP with a pairwise likelihood and the Laplace approximation.

    Prior :math:`g \sim GP(0, k)`; an answer ``(v, u)`` ("v beat u") has probability
    :math:`F((g(x_v) - g(x_u)) / s)` (:mod:`botorch_pref.likelihoods`); the posterior is the
    Laplace approximation at the mode (module docstring).

    Example:
        >>> X = torch.rand(10, 2, dtype=torch.float64)
        >>> comparisons = torch.tensor([[0, 1], [2, 1], [3, 4]])
        >>> model = PairwiseLaplaceGP(X, comparisons)
        >>> fit_gpytorch_mll(LaplaceEvidence(model.likelihood, model))
        >>> model.posterior(torch.rand(5, 2, dtype=torch.float64)).mean

    Args:
        datapoints: ``batch_shape x n x d`` designs, or ``None`` for a prior-only model (as in
            ``PairwiseGP``, the model is prior-only when either argument is ``None``; data can
            come later through :meth:`set_train_data` or :meth:`condition_on_observations`).
        comparisons: ``batch_shape x m x 2`` integer rows ``(winner, loser)`` indexing
            ``datapoints``, or ``None`` for a prior-only model. Rows ``(-1, -1)`` are padding:
            with them (and any finite designs that no comparison refers to as padding of
            ``datapoints``) the members of a batch can hold data sets of different sizes. Padding
            changes no member's posterior or evidence. Or a
            :class:`~botorch_pref.data.PreferenceData` with choices among ``q`` options,
            rankings and ties as well as pairs: a q-option answer is recorded as
            ``data.add_choice(option_indices, chosen=index)`` (or ``add_ranking(options,
            order)``), a "no preference" answer as ``data.add_tie(i, j)``, all indexing the
            rows of ``datapoints``. Pair-only ``PreferenceData`` takes exactly the pair engine
            (:mod:`botorch_pref.inference.pairs`); other data take the block engine
            (:mod:`botorch_pref.inference.blocks`).
        likelihood: A :class:`~botorch_pref.likelihoods.PairwiseLikelihood`; default
            :class:`~botorch_pref.likelihoods.PairwiseProbit` (``P = Phi(delta / sqrt 2)``).
            It must model every observation kind in the data: ties need a ``tie_threshold``,
            choices :class:`~botorch_pref.likelihoods.Choice`, rankings
            :class:`~botorch_pref.likelihoods.Ranking` (otherwise a ``PreferenceInputError``
            names the kind). BoTorch's ``PairwiseProbitLikelihood`` and
            ``PairwiseLogitLikelihood`` are accepted and taken as ``PairwiseProbit()`` and
            ``PairwiseLogit()`` (same links and scales); ``model.likelihood`` is then ours.
        covar_module: A kernel; default :func:`default_covar_module` with the data's batch
            shape (lengthscales ``batch_shape x 1 x d``, outputscale ``batch_shape``, as
            ``PairwiseGP``), or with one shared lengthscale for a prior-only model.
        input_transform: An optional BoTorch input transform, applied to datapoints and to test
            points.
        form: ``"comparison"`` or ``"design"`` to force a Newton form; ``None`` chooses the
            smaller system.
        tol: Newton stopping tolerance (dtype-aware default).
        max_iter: Maximum Newton iterations.
    """

    _num_outputs = 1

    def __init__(
        self,
        datapoints: Tensor | None,
        comparisons: Tensor | PreferenceData | None,
        likelihood: PairwiseLikelihood | None = None,
        covar_module: Kernel | None = None,
        input_transform: InputTransform | None = None,
        *,
        form: Form | None = None,
        tol: float | None = None,
        max_iter: int = 100,
    ) -> None:
        super().__init__()
        likelihood = _as_likelihood(likelihood)
        if form not in (None, "comparison", "design"):
            raise ValueError(f"form must be None, 'comparison' or 'design', got {form!r}.")
        self.likelihood = likelihood
        self._form = form
        self._tol = tol
        self._max_iter = int(max_iter)
        self._datapoints: Tensor | None = None
        self._comparisons: Tensor | PreferenceData | None = None
        self._engine: LaplaceEngine | None = None
        self._reset_state()
        self._warm: WarmStart | None = None  # what the next mode search may start from
        self.train_inputs: tuple[Tensor, ...] = ()  # as PairwiseGP without data
        self.train_targets: Tensor | None = None
        if datapoints is None or comparisons is None:
            datapoints = None  # prior-only, as PairwiseGP; data may come with set_train_data
        else:
            self._set_data(*validate_training_data(datapoints, comparisons, likelihood))
        dtype = datapoints.dtype if datapoints is not None else torch.float64
        if covar_module is None:
            dim = None  # without data: one shared lengthscale, as PairwiseGP
            if datapoints is not None:
                dim = datapoints.shape[-1]
                if input_transform is not None:
                    with torch.no_grad():
                        dim = input_transform.to(datapoints)(datapoints[..., :2, :]).shape[-1]
            covar_module = default_covar_module(dim, batch_shape=self.batch_shape, dtype=dtype)
        self.covar_module = covar_module
        # PairwiseGP's prior mean: a constant frozen at zero (see _predict for its effect)
        self.mean_module = ConstantMean().to(dtype)
        for param in self.mean_module.parameters():
            param.requires_grad_(False)
        if input_transform is not None:
            self.input_transform = input_transform
        if datapoints is not None:
            self.to(dtype=datapoints.dtype, device=datapoints.device)
            self._update_mode()

    # ------------------------------------------------------------------ data
    def _reset_state(self) -> None:
        self._mode: ModeResult | None = None
        self._factors: LaplaceFactors | None = None
        self._snapshot: Tensor | None = None
        self._train_X: Tensor | None = None  # transformed datapoints
        self._loose = False  # mode found at the looser fitting tolerance
        self._K: Tensor | None = None  # flat-batch prior covariance at the mode's hyperparameters

    def _set_data(
        self, datapoints: Tensor, comparisons: Tensor | PreferenceData, batch: torch.Size
    ) -> None:
        """Store validated data broadcast to ``batch`` and build their engine."""
        datapoints = datapoints.expand(*batch, *datapoints.shape[-2:])
        comparisons = expand_comparisons(comparisons, batch, datapoints.device)
        old_engine, old_mode = self._engine, self._mode
        self._datapoints, self._comparisons = datapoints, comparisons
        self.train_inputs = (datapoints,)
        is_data = isinstance(comparisons, PreferenceData)
        self.train_targets = comparisons.options if is_data else comparisons
        self._reset_state()
        self._engine = build_engine(self.likelihood, datapoints, comparisons)
        self._warm = None
        if old_engine is not None and old_mode is not None:
            self._warm = old_engine.warm_start(old_mode, datapoints.shape[-2])

    @property
    def engine(self) -> LaplaceEngine | None:
        """The Laplace engine of the data (``None`` without data).

        A :class:`~botorch_pref.inference.pairs.PairEngine` for pairwise comparisons, a
        :class:`~botorch_pref.inference.blocks.BlockEngine` for choices, rankings and ties.
        """
        if self._engine is not None:
            self._engine.likelihood = self.likelihood  # follow a replaced likelihood
        return self._engine

    def set_train_data(
        self,
        datapoints: Tensor | None = None,
        comparisons: Tensor | None = None,
        strict: bool = False,
        update_model: bool = True,
    ) -> None:
        """Replace the data; the mode is warm-started from the previous one.

        Warm starts reuse the previous pair coefficients for pairs with the same indices, which
        is exact when designs are appended (as :meth:`condition_on_observations` does) and
        harmless otherwise (a start worse than zero is discarded).

        Args:
            datapoints: ``batch_shape x n x d`` designs (``None`` keeps the current ones).
            comparisons: ``batch_shape x m x 2`` comparisons or a
                :class:`~botorch_pref.data.PreferenceData` (``None`` keeps the current ones).
            strict: As in ``PairwiseGP`` (and GPyTorch's ``ExactGP``): the new data must have
                the shapes, dtypes and devices of the current ones (after broadcasting the
                batch shapes), otherwise a :class:`PreferenceInputError` (a ``RuntimeError``)
                says which; a prior-only model has no data to match and always raises.
            update_model: Find the new mode now (otherwise on first use).

        A model given data of another dtype or device moves its hyperparameters there, as
        ``PairwiseGP`` does (``model.to(datapoints)``). Invalid data raise
        :class:`PreferenceInputError` and leave the model unchanged.
        """
        if datapoints is None and comparisons is None:
            return
        datapoints = self._datapoints if datapoints is None else datapoints
        comparisons = self._comparisons if comparisons is None else comparisons
        if datapoints is None or comparisons is None:
            raise PreferenceInputError("set_train_data needs both datapoints and comparisons.")
        validated = validate_training_data(datapoints, comparisons, self.likelihood)
        if strict:
            self._check_strict(*validated)
        datapoints = validated[0]
        self._set_data(*validated)
        moved = [
            p
            for p in self.parameters()
            if (p.dtype, p.device) != (datapoints.dtype, datapoints.device)
        ]
        if moved:
            self.to(dtype=datapoints.dtype, device=datapoints.device)
            self._warm = None  # a start of another dtype or device
        if update_model:
            self._update_mode()

    def _check_strict(
        self, datapoints: Tensor, comparisons: Tensor | PreferenceData, batch: torch.Size
    ) -> None:
        """``set_train_data(..., strict=True)``: shapes, dtypes and devices must not change."""
        new_X = datapoints.expand(*batch, *datapoints.shape[-2:])
        new_C = expand_comparisons(comparisons, batch, datapoints.device)
        if isinstance(new_C, PreferenceData):
            new_C = new_C.options
        old_X = self._datapoints
        old_C = self.train_targets
        for what, new, old in (("inputs", new_X, old_X), ("targets", new_C, old_C)):
            for attr in ("shape", "dtype", "device"):
                expected, found = getattr(old, attr, None), getattr(new, attr)
                if expected != found:
                    raise PreferenceInputError(
                        f"Cannot modify {attr} of {what} (expected {expected}, found {found}) "
                        "with strict=True."
                    )

    def _set_transformed_inputs(self) -> None:
        """Inputs are transformed on the fly; the stored datapoints stay untransformed."""

    def _revert_to_original_inputs(self) -> None:
        """Inputs are transformed on the fly; nothing to revert."""

    def _has_data(self) -> bool:
        return self._datapoints is not None

    @property
    def datapoints(self) -> Tensor | None:
        """The ``batch_shape x n x d`` designs (untransformed)."""
        return self._datapoints

    @property
    def comparisons(self) -> Tensor | PreferenceData | None:
        """The ``batch_shape x m x 2`` comparisons (winner, loser) as a long tensor.

        For data with choices, rankings or ties, the :class:`~botorch_pref.data.PreferenceData`.
        """
        return self._comparisons

    @property
    def preference_data(self) -> PreferenceData | None:
        """The data as a :class:`~botorch_pref.data.PreferenceData` (pairs included)."""
        if self._comparisons is None or isinstance(self._comparisons, PreferenceData):
            return self._comparisons
        return PreferenceData.from_comparisons(self._comparisons)

    @property
    def num_outputs(self) -> int:
        return 1

    @property
    def batch_shape(self) -> torch.Size:
        """The batch shape of the data (and so of the model)."""
        if self._datapoints is None:
            return torch.Size()
        return self._datapoints.shape[:-2]

    @property
    def dim(self) -> int | None:
        """Input dimension of the datapoints (``None`` without data), as ``PairwiseGP.dim``;
        BoTorch's EUBO input constructors read it to draw the outcome model's fixed sample."""
        return None if self._datapoints is None else self._datapoints.shape[-1]

    @property
    def n(self) -> int:
        """Number of designs."""
        return 0 if self._datapoints is None else self._datapoints.shape[-2]

    @property
    def utility(self) -> Tensor:
        """The posterior mode :math:`\\hat f` at the datapoints, ``batch_shape x n``."""
        self._ensure_current()
        return self._mode.f.reshape(*self.batch_shape, self.n)

    @property
    def newton_iterations(self) -> int:
        """Newton iterations of the last mode search."""
        self._ensure_current()
        return self._mode.iterations

    @property
    def newton_form(self) -> str:
        """The Newton form in use, ``"comparison"`` or ``"design"``."""
        self._ensure_current()
        return self._mode.form

    # ------------------------------------------------------------- numerics
    def _hyper_snapshot(self) -> Tensor:
        params = [p.detach().reshape(-1) for p in self.parameters()]
        if not params:
            return torch.zeros(0)
        return torch.cat(params).clone()

    def _flat_K(self, X: Tensor) -> Tensor:
        """Prior covariance of transformed training inputs, flat batch ``B x n x n``."""
        K = self.covar_module(X).to_dense()
        K = K.expand(*self.batch_shape, *K.shape[-2:])
        return K.reshape(-1, *K.shape[-2:])

    def _transformed_train_inputs(self) -> Tensor:
        return self.transform_inputs(self._datapoints)

    def _update_mode(self, tol: float | None = None) -> None:
        """Find the mode for the current data and hyperparameter values (no autograd)."""
        with torch.no_grad():
            X = self._transformed_train_inputs()
            K = self._flat_K(X)
        self._set_mode(K, X, tol=tol)

    def _set_mode(self, K: Tensor, X: Tensor, tol: float | None = None) -> None:
        tol = tol if tol is not None else self._tol
        beta0 = self._warm_beta()
        d0 = self._mode.d if self._mode is not None else None
        mode = self.engine.find_mode(
            K,
            beta0,
            d0=d0,
            form=self._form,
            tol=tol,
            max_iter=self._max_iter,
        )
        if not bool(mode.converged.all()):
            warnings.warn(
                f"Newton did not converge in {self._max_iter} iterations; the mode may be "
                "inaccurate (consider float64 or different hyperparameters).",
                RuntimeWarning,
                stacklevel=3,
            )
        self._mode = mode
        self._K = K
        self._factors = None  # factored lazily, on the first posterior call
        self._train_X = X.detach().expand(*self.batch_shape, *X.shape[-2:])
        self._snapshot = self._hyper_snapshot()
        self._warm = None
        self._loose = tol is not None and tol > default_tolerance(K.dtype)

    def _warm_beta(self) -> Tensor | None:
        if self._mode is not None:  # same data, new hyperparameters
            return self._mode.beta
        if self._warm is None:
            return None
        return self.engine.warm_beta(self._warm)

    def _ensure_current(self) -> None:
        if not self._has_data():
            raise RuntimeError("The model has no data.")
        if self._mode is None or self._loose or not _same(self._snapshot, self._hyper_snapshot()):
            self._update_mode()

    def laplace_evidence(self) -> Tensor:
        r"""Laplace evidence :math:`\log Z` per batch member, differentiable in hyperparameters.

        Finds the mode without autograd (warm-started), then takes one Newton step with autograd
        from it (see :meth:`botorch_pref.inference.engine.LaplaceEngine.evidence_with_gradients`).

        Returns:
            A ``batch_shape`` tensor.
        """
        if not self._has_data():
            raise RuntimeError("The evidence of a prior-only model is undefined.")
        X = self._transformed_train_inputs()
        K = self._flat_K(X)
        # A looser tolerance suffices here: the Newton step below squares the mode's error, and
        # the first posterior call polishes the mode to the full tolerance.
        self._set_mode(K.detach(), X, tol=self._tol or fit_tolerance(K.dtype))
        log_z, _ = self.engine.evidence_with_gradients(K, self._mode)
        return log_z.reshape(self.batch_shape)

    # -------------------------------------------------------------- predict
    def _current_factors(self) -> LaplaceFactors:
        """The posterior factors for the current data and hyperparameters (formed lazily)."""
        self._ensure_current()
        if self._factors is None:
            self._factors = self.engine.laplace_factors(self._K, self._mode)
        return self._factors

    def predictive_factors(self) -> tuple[Tensor, LaplaceFactors]:
        r"""Transformed training inputs and posterior factors, for fused acquisition code.

        The predictive mean at transformed inputs :math:`x` is :math:`k(x, X)\,\alpha` and the
        covariance :math:`k(x, x') - (M k(X, x))^\top M k(X, x')`
        (:class:`~botorch_pref.inference.engine.LaplaceFactors`). Both are detached: they
        follow the hyperparameters' current values, not their gradients.

        Returns:
            ``(train_X, factors)``: ``batch_shape x n x d`` inputs and factors with a flat
            batch dimension (``prod(batch_shape)``, 1 for an unbatched model).
        """
        if not self._has_data():
            raise RuntimeError("The model has no data.")
        factors = self._current_factors()
        return self._train_X, factors

    def _predict(self, X: Tensor, full_cov: bool = True) -> tuple[Tensor, Tensor]:
        """Posterior (or prior) mean and covariance at ``X`` (``... x q x d``, transformed)."""
        # The likelihood sees utility differences only, so with the prior mean c (PairwiseGP's
        # ConstantMean, frozen at zero) the posterior is the zero-mean one shifted by c.
        c = self.mean_module.constant
        if not self._has_data():
            K = self.covar_module(X).to_dense()
            mean = torch.zeros(K.shape[:-1], dtype=X.dtype, device=X.device)
            return mean + c, K
        factors = self._current_factors()  # brings the mode up to date first
        mean, cov = laplace_predict(self.covar_module, self._train_X, factors, X, full_cov)
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
            X = self._transformed_train_inputs()
        mean, cov = self._predict(X)
        # A lazy covariance: nothing is factored until a sample or a log-density needs it.
        return MultivariateNormal(mean, DenseLinearOperator(cov))

    def _is_training_input(self, X: Tensor) -> bool:
        D = self._datapoints
        return X is D or (
            torch.is_tensor(X) and X.shape == D.shape and X.dtype == D.dtype and torch.equal(X, D)
        )

    def _model_dtype(self) -> torch.dtype | None:
        """The dtype the model computes in: its data's, or its hyperparameters' without data."""
        if self._has_data():
            return self._datapoints.dtype
        return next((p.dtype for p in self.covar_module.parameters()), None)

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
            X: ``(batch_shape) x q x d`` designs (untransformed).
            output_indices: Must be ``None`` or ``[0]`` (one output).
            observation_noise: Ignored: the answer noise acts on comparisons, not on utilities
                (use :meth:`preference_probability` for answer probabilities).
            posterior_transform: An optional BoTorch posterior transform.

        Returns:
            A :class:`~botorch.posteriors.gpytorch.GPyTorchPosterior` with the full joint
            ``q x q`` covariance, differentiable in ``X``.

        Raises:
            PreferenceInputError: if ``X`` has another dtype than the model (no silent cast:
                cast ``X`` or the model first).
        """
        if output_indices is not None and list(output_indices) != [0]:
            raise ValueError("PairwiseLaplaceGP has a single output; output_indices must be [0].")
        dim = self._datapoints.shape[-1] if self._has_data() else None
        validate_test_points(X, dim, self._model_dtype())
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
        """
        X1, X2 = torch.broadcast_tensors(X1, X2)
        post = self.posterior(torch.stack([X1, X2], dim=-2))
        mean = post.mean.squeeze(-1)
        cov = post.distribution.covariance_matrix
        var = cov[..., 0, 0] + cov[..., 1, 1] - 2 * cov[..., 0, 1]
        return self.likelihood.predictive_probability(mean[..., 0] - mean[..., 1], var)

    # ------------------------------------------------------------ fantasize
    def condition_on_observations(self, X: Tensor, Y: Tensor, **kwargs: Any) -> Model:
        r"""A new model with designs ``X`` appended and comparisons ``Y`` among them.

        As in ``PairwiseGP``, ``Y`` holds integer comparisons (``batch x m' x 2``) that index the
        rows of ``X``; they are shifted past the existing datapoints. The new model is
        warm-started from this one's mode.

        Args:
            X: ``batch_shape x n' x d`` new designs (untransformed).
            Y: ``batch_shape x m' x 2`` comparisons among the rows of ``X``.

        Returns:
            The conditioned (deep-copied) model.

        Raises:
            PreferenceInputError: (a ``ValueError`` and a ``RuntimeError``) for non-pairwise
                or invalid ``Y``; this model is left unchanged.
        """
        validate_fantasy_comparisons(Y)
        new_model = deepcopy(self)
        if not self._has_data():
            new_model.set_train_data(X, Y, update_model=True)
            return new_model
        batch = torch.broadcast_shapes(Y.shape[:-2], X.shape[:-2], self.batch_shape)
        old_X = self._datapoints.expand(*batch, *self._datapoints.shape[-2:])
        new_X = torch.cat([old_X, X.to(old_X).expand(*batch, *X.shape[-2:])], dim=-2)
        new_C = append_comparisons(self._comparisons, Y, self.n, batch)
        # warm start: old rows keep their indices, broadcast over the new batch
        self._ensure_current()
        warm = self.engine.warm_start(self._mode, new_X.shape[-2])
        new_model._mode = None
        new_model._engine = None
        new_model.set_train_data(new_X, new_C, update_model=False)
        new_model._warm = warm.expand(self.batch_shape, batch)
        new_model._update_mode()
        return new_model

    @classmethod
    def construct_inputs(cls, training_data: SupervisedDataset, **kwargs: Any) -> dict[str, Any]:
        r"""Constructor inputs from a ``RankingDataset``, as ``PairwiseGP.construct_inputs``.

        Each ranked pair ``indices = (i, j)`` with ranks ``r`` (0 = preferred) becomes the
        comparison ``(indices[r_0], indices[r_1])`` (BoTorch's ``gather``), so a pair stored
        loser first is turned around. This is the route by which BoTorch's and Ax's input
        constructors build a preference model from data.

        Args:
            training_data: A ``RankingDataset`` of pairs (``SliceContainer`` ``X`` of designs
                and index pairs, ``m x 2`` ranks ``Y``).
            kwargs: Constructor options passed through: ``form``, ``tol``, ``max_iter``.

        Returns:
            ``{"datapoints": n x d, "comparisons": m x 2, **kwargs}``.

        Raises:
            UnsupportedError: for a dataset that is not a ``RankingDataset`` (as
                ``PairwiseGP``), rankings of more than two options or ties (which
                ``PairwiseGP`` would turn into wrong comparisons), and unknown options (e.g.
                ``categorical_features``).
        """
        if not isinstance(training_data, RankingDataset):
            raise UnsupportedError(
                "Only `RankingDataset` is supported for `PairwiseLaplaceGP` (as for "
                f"`PairwiseGP`). Received {type(training_data)}."
            )
        unknown = sorted(set(kwargs) - {"form", "tol", "max_iter"})
        if unknown:
            raise UnsupportedError(
                f"PairwiseLaplaceGP.construct_inputs does not take {unknown}; besides the "
                "dataset it passes through form, tol and max_iter."
            )
        indices, ranks = training_data._X.indices, training_data.Y.long()
        if indices.shape[-1] != 2:
            raise UnsupportedError(
                f"The RankingDataset ranks {indices.shape[-1]} options at a time; "
                "construct_inputs takes pairs (give longer rankings as PreferenceData with the "
                "Ranking likelihood)."
            )
        if bool((ranks[..., 0] == ranks[..., 1]).any()):
            raise UnsupportedError(
                "The RankingDataset holds a tie (equal ranks); construct_inputs takes strict "
                "pairs (record ties with PreferenceData.add_tie and a tie_threshold likelihood)."
            )
        comparisons = torch.gather(indices, -1, ranks)
        return {"datapoints": training_data._X.values, "comparisons": comparisons, **kwargs}

    def load_state_dict(self, state_dict: dict, strict: bool = False, assign: bool = False):
        """Load hyperparameters; the mode is recomputed on next use.

        The default ``strict=False`` is ``PairwiseGP``'s (Ax relies on it: its cross-validation
        of a BOPE experiment hands the preference model an empty state dict); sizes must match
        either way. Unlike ``PairwiseGP``, ``strict=True`` is supported: then every key must
        match.
        """
        result = super().load_state_dict(state_dict, strict=strict, assign=assign)
        self._snapshot = None
        return result


def _as_likelihood(likelihood: Any) -> PairwiseLikelihood:
    """Our likelihood for ``likelihood``: BoTorch's probit and logit become ours (same link and
    scale: ``Phi(delta / sqrt 2)`` and ``sigmoid(delta)``)."""
    if likelihood is None:
        return PairwiseProbit()
    if isinstance(likelihood, PairwiseLikelihood):
        return likelihood
    if type(likelihood) is PairwiseProbitLikelihood:
        return PairwiseProbit()
    if type(likelihood) is PairwiseLogitLikelihood:
        return PairwiseLogit()
    raise TypeError(
        "likelihood must be a botorch_pref PairwiseLikelihood, or BoTorch's "
        "PairwiseProbitLikelihood or PairwiseLogitLikelihood (taken as PairwiseProbit() and "
        f"PairwiseLogit()); got {type(likelihood)}."
    )


def _same(a: Tensor | None, b: Tensor) -> bool:
    return a is not None and a.shape == b.shape and a.device == b.device and torch.equal(a, b)
