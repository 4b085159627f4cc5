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

The model holds its data (validated by :mod:`botorch_pref.models.data`), the kernel
hyperparameters, and a :class:`~botorch_pref.models.mode.LaplaceMode`: the Laplace engine of the
data (pairs take the diagonal-curvature pair engine, other answers the block engine) with the
mode and factors cached once per data set and hyperparameter values. It speaks BoTorch's
``Model`` interface (prediction: :class:`~botorch_pref.models.posterior.LaplacePosteriorMixin`)
so that every BoTorch acquisition function, ``fit_gpytorch_mll`` (with
:class:`~botorch_pref.models.evidence.LaplaceEvidence`) and ``fantasize`` work on it. It is a
drop-in for :class:`botorch.models.PairwiseGP`: same constructor, same data conventions, same
scale convention for the probit noise, BoTorch's likelihoods and ``RankingDataset`` accepted
(:mod:`botorch_pref.models.compat`).

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

from typing import Any

import torch
from botorch.models.model import FantasizeMixin, Model
from botorch.models.transforms.input import InputTransform
from botorch.utils.datasets import SupervisedDataset
from gpytorch.kernels import Kernel
from gpytorch.means import ConstantMean
from gpytorch.models import GP
from torch import Tensor

from botorch_pref.data.preferences import PreferenceData, PreferenceDataError
from botorch_pref.inference.engine import LaplaceEngine, LaplaceFactors
from botorch_pref.inference.newton import Form, fit_tolerance
from botorch_pref.likelihoods import PairwiseLikelihood
from botorch_pref.models.compat import as_likelihood, ranking_dataset_inputs
from botorch_pref.models.data import (
    PreferenceInputError,
    build_engine,
    check_inference,
    check_solver_options,
    check_unchanged,
    expand_comparisons,
    validate_training_data,
)
from botorch_pref.models.fantasy import FantasyMixin
from botorch_pref.models.fitting import FitMixin
from botorch_pref.models.kernels import (
    default_covar_module,
    make_covar_module,
)
from botorch_pref.models.mode import LaplaceMode, ModeKey
from botorch_pref.models.posterior import LaplacePosteriorMixin, problem_size
from botorch_pref.runtime import with_problem_threads

__all__ = [
    "PairwiseLaplaceGP",
    "PreferenceDataError",
    "PreferenceInputError",
    "default_covar_module",
    "make_covar_module",
]


class PairwiseLaplaceGP(FitMixin, FantasyMixin, LaplacePosteriorMixin, Model, GP, FantasizeMixin):
    r"""Preference GP with a pairwise likelihood and the Laplace approximation.

    Prior :math:`g \sim GP(0, k)`; an answer ``(v, u)`` ("v beat u") has probability
    :math:`F((g(x_v) - g(x_u)) / s)` (:mod:`botorch_pref.likelihoods`); the posterior is the
    Laplace approximation at the mode (module docstring). Predictions (``posterior``,
    ``forward``, ``preference_probability``) are those of
    :class:`~botorch_pref.models.posterior.LaplacePosteriorMixin`, fantasies
    (``condition_on_observations``, ``fantasize``) those of
    :class:`~botorch_pref.models.fantasy.FantasyMixin`.

    Its defaults (a scaled ARD RBF kernel, the Laplace approximation) are ``PairwiseGP``'s, so
    that it is a drop-in on BoTorch's own flows; the loop's model factory passes a Matern 3/2
    kernel and expectation propagation instead, because they asked better questions there
    (:mod:`botorch_pref.loop.config`).

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
        inference: ``"laplace"`` (the Laplace approximation at the mode) or ``"ep"``:
            expectation propagation started from it (:mod:`botorch_pref.inference.ep`), for
            probit pairs; its posterior and evidence replace the Laplace ones.
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
        inference: str = "laplace",
    ) -> None:
        super().__init__()
        likelihood = as_likelihood(likelihood)
        self._inference = check_inference(inference, likelihood)
        if form not in (None, "comparison", "design"):
            raise ValueError(f"form must be None, 'comparison' or 'design', got {form!r}.")
        self.likelihood = likelihood
        self._form = form
        self._tol, self._max_iter = check_solver_options(tol, max_iter)
        self._datapoints: Tensor | None = None
        self._comparisons: Tensor | PreferenceData | None = None
        self._mode: LaplaceMode | None = None  # the data's engine, mode and factors
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

    def _apply(self, fn: Any, recurse: bool = True) -> PairwiseLaplaceGP:
        """``model.to(...)``, ``.double()``, ``.cuda()``: the data move with the parameters.

        The designs take the parameters' new dtype and device, the comparisons their device,
        and the mode is found again on next use (torch's own ``_apply`` moves only parameters
        and buffers, which would leave the data behind).
        """
        super()._apply(fn, recurse)
        old = self._datapoints
        if old is not None:
            new = fn(old)
            if new.dtype != old.dtype or new.device != old.device:
                self._mode = None  # no warm start across dtypes or devices
                self._set_data(new, self._comparisons, self.batch_shape)
        return self

    # ------------------------------------------------------------------ data
    def _set_data(
        self, datapoints: Tensor, comparisons: Tensor | PreferenceData, batch: torch.Size
    ) -> None:
        """Store validated data broadcast to ``batch`` and build their engine."""
        datapoints = datapoints.expand(*batch, *datapoints.shape[-2:])
        comparisons = expand_comparisons(comparisons, batch, datapoints.device)
        warm = self._mode.warm_start(datapoints.shape[-2]) if self._mode is not None else None
        self._datapoints, self._comparisons = datapoints, comparisons
        self.train_inputs = (datapoints,)
        is_data = isinstance(comparisons, PreferenceData)
        self.train_targets = comparisons.options if is_data else comparisons
        engine = build_engine(self.likelihood, datapoints, comparisons)
        self._mode = LaplaceMode(
            engine,
            form=self._form,
            tol=self._tol,
            max_iter=self._max_iter,
            warm=warm,
            inference=self._inference,
        )

    @property
    def engine(self) -> LaplaceEngine | None:
        """The Laplace engine of the data (``None`` without data).

        A :class:`~botorch_pref.inference.pairs.PairEngine` for pairwise comparisons, a
        :class:`~botorch_pref.inference.blocks.BlockEngine` for choices, rankings and ties.
        """
        return None if self._mode is None else self._laplace().engine

    def _laplace(self) -> LaplaceMode:
        """The data's engine, mode and factors; the engine follows a replaced likelihood."""
        if self._inference == "ep":
            check_inference("ep", self.likelihood)
        self._mode.engine.likelihood = self.likelihood
        return self._mode

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
            check_unchanged(self._datapoints, self.train_targets, *validated)
        datapoints = validated[0]
        self._set_data(*validated)
        moved = [
            p
            for p in self.parameters()
            if (p.dtype, p.device) != (datapoints.dtype, datapoints.device)
        ]
        if moved:
            self.to(dtype=datapoints.dtype, device=datapoints.device)
            self._mode.warm = None  # a start of another dtype or device
        if update_model:
            self._update_mode()

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
    def inference(self) -> str:
        """The posterior approximation, ``"laplace"`` or ``"ep"``."""
        return self._inference

    @property
    def utility(self) -> Tensor:
        """The posterior mode :math:`\\hat f` at the datapoints (with ``inference="ep"``, EP's
        posterior mean), ``batch_shape x n``."""
        self._ensure_current()
        return self._laplace().utility().reshape(*self.batch_shape, self.n)

    @property
    def newton_iterations(self) -> int:
        """Newton iterations of the last mode search."""
        self._ensure_current()
        return self._mode.result.iterations

    @property
    def newton_form(self) -> str:
        """The Newton form in use, ``"comparison"`` or ``"design"``."""
        self._ensure_current()
        return self._mode.result.form

    # ------------------------------------------------------------- numerics
    def _hyper_snapshot(self) -> ModeKey:
        return ModeKey.of(self)

    def _flat_K(self, X: Tensor) -> Tensor:
        """Prior covariance of transformed training inputs, flat batch ``B x n x n``."""
        K = self.covar_module(X).to_dense()
        K = K.expand(*self.batch_shape, *K.shape[-2:])
        return K.reshape(-1, *K.shape[-2:])

    def _transformed_train_inputs(self) -> Tensor:
        return self.transform_inputs(self._datapoints)

    @with_problem_threads(problem_size)
    def _update_mode(self, tol: float | None = None) -> None:
        """Find the mode for the current data and hyperparameter values (no autograd)."""
        with torch.no_grad():
            X = self._transformed_train_inputs()
            K = self._flat_K(X)
        self._find_mode(K, X, tol=tol)

    def _find_mode(self, K: Tensor, X: Tensor, tol: float | None = None) -> None:
        X = X.detach().expand(*self.batch_shape, *X.shape[-2:])
        self._laplace().find(K, X, self._hyper_snapshot(), tol=tol)

    def _ensure_current(self) -> None:
        if not self._has_data():
            raise RuntimeError("The model has no data.")
        if not self._mode.is_current(self._hyper_snapshot()):
            self._update_mode()

    @with_problem_threads(problem_size)
    def laplace_evidence(self) -> Tensor:
        r"""Laplace evidence :math:`\log Z` per batch member, differentiable in hyperparameters.

        Finds the mode without autograd (warm-started), then takes one Newton step with autograd
        from it (see :meth:`botorch_pref.inference.engine.LaplaceEngine.evidence_with_gradients`).
        With ``inference="ep"``, EP's evidence instead (:meth:`LaplaceMode.evidence`).

        Returns:
            A ``batch_shape`` tensor.
        """
        if not self._has_data():
            raise RuntimeError("The evidence of a prior-only model is undefined.")
        X = self._transformed_train_inputs()
        K = self._flat_K(X)
        # A looser tolerance suffices here: the Newton step below squares the mode's error, and
        # the first posterior call polishes the mode to the full tolerance.
        if self._laplace().needs_mode():
            self._find_mode(K.detach(), X, tol=self._tol or fit_tolerance(K.dtype))
        return self._laplace().evidence(K).reshape(self.batch_shape)

    # -------------------------------------------------------------- predict
    def _current_factors(self) -> LaplaceFactors:
        """The posterior factors for the current data and hyperparameters (formed lazily)."""
        self._ensure_current()
        return self._laplace().factors()

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
        return self._mode.train_X, factors

    @classmethod
    def construct_inputs(cls, training_data: SupervisedDataset, **kwargs: Any) -> dict[str, Any]:
        r"""Constructor inputs from a ``RankingDataset``, as ``PairwiseGP.construct_inputs``.

        This is the route by which BoTorch's and Ax's input constructors build a preference
        model from data; see :func:`~botorch_pref.models.compat.ranking_dataset_inputs` (each
        ranked pair becomes a ``(winner, loser)`` comparison; ties, longer rankings, other
        datasets and unknown options raise ``UnsupportedError``).

        Args:
            training_data: A ``RankingDataset`` of pairs.
            kwargs: Constructor options passed through: ``form``, ``tol``, ``max_iter``.

        Returns:
            ``{"datapoints": n x d, "comparisons": m x 2, **kwargs}``.
        """
        return ranking_dataset_inputs(training_data, **kwargs)

    def load_state_dict(self, state_dict: dict, strict: bool = False, assign: bool = False):
        """Load hyperparameters; the mode is recomputed on next use.

        The default ``strict=False`` is ``PairwiseGP``'s (Ax relies on it: its cross-validation
        of a BOPE experiment hands the preference model an empty state dict); sizes must match
        either way. Unlike ``PairwiseGP``, ``strict=True`` is supported: then every key must
        match.
        """
        result = super().load_state_dict(state_dict, strict=strict, assign=assign)
        if self._mode is not None:
            self._mode.snapshot = None
        return result
