r"""An ask/tell preferential Bayesian optimiser.

:class:`PreferenceOptimizer` runs the loop of preferential BO for a person (or a simulated user)
who can only say which of :math:`q` designs they prefer:

1. :meth:`~PreferenceOptimizer.ask` returns the next query, a ``q x d`` tensor of designs in the
   user's units (within ``bounds``);
2. :meth:`~PreferenceOptimizer.tell` records the answer (the index of the preferred option, or a
   full ranking), refits the preference GP when the schedule says so, and updates its posterior;
3. :meth:`~PreferenceOptimizer.best` recommends the compared design with the highest posterior
   mean of the utility :math:`g`,

.. math::

    x^\star = \arg\max_{x_i \in \mathcal{D}} \mu(x_i),

where :math:`\mathcal D` is the set of designs compared so far (the qEUBO protocol's
recommendation: it never recommends a design nobody has looked at).

Conventions and defaults (the reasons are in the :class:`PreferenceOptimizer` docstring):

* Inputs are normalised to the unit cube through ``bounds``; the model, the acquisition and its
  optimisation never see user units.
* A design that has been compared before (a row *exactly* equal to an earlier one, e.g. the
  champion that champion-challenger re-proposes) is reused, not duplicated: its answers attach to
  the same datapoint.
* A ``q > 2`` answer is recorded as the winner beating each other option, a full ranking as the
  ``q - 1`` consecutive pairs. These rows are not independent comparisons; the pairwise
  likelihood treats them as if they were until a proper choice likelihood exists.
* All randomness (initial and random queries, ``optimize_acqf``'s raw samples, qEUBO's base
  samples, fit restarts) is drawn from seeds derived from ``(seed, query number)``, so the same
  seed and the same answers give the same run, and the state after
  :meth:`PreferenceOptimizer.replay` of a history is the state of the run that produced it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from copy import deepcopy
from typing import Any, NamedTuple

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.exceptions.errors import ModelFittingError
from botorch.exceptions.warnings import OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood
from botorch.models.model import Model
from botorch.optim import optimize_acqf
from botorch.utils.transforms import normalize, unnormalize
from gpytorch.kernels import ScaleKernel
from gpytorch.mlls import MarginalLogLikelihood
from gpytorch.priors import SmoothedBoxPrior
from linear_operator.utils.errors import NotPSDError
from torch import Tensor

from botorch_pref.acquisition import ChampionChallenger, make_eubo, make_qeubo
from botorch_pref.acquisition.settings import lean_kernels
from botorch_pref.data.preferences import PreferenceData
from botorch_pref.likelihoods import PairwiseLikelihood, PairwiseProbit, Ranking
from botorch_pref.loop.answers import (
    InvalidAnswerError,
    as_index,
    encode_answer,
    validate_answer,
)
from botorch_pref.loop.seeding import Stream, derived_seed, uniform
from botorch_pref.mlls import LaplaceEvidence
from botorch_pref.models.pairwise import PairwiseLaplaceGP, make_covar_module

__all__ = [
    "MODEL_FACTORIES",
    "STRATEGIES",
    "Hyperparameters",
    "ModelFactory",
    "PreferenceOptimizer",
    "QueryRecord",
    "Recommendation",
    "acquisition_effort",
    "box_covar_module",
    "laplace_box_model",
    "laplace_model",
    "pairwisegp_model",
]

STRATEGIES = ("eubo", "qeubo", "champion-challenger", "random")

#: A model factory maps unit-cube ``datapoints`` (``n x d``) and ``comparisons`` (``m x 2``) to a
#: model and the marginal log-likelihood that ``fit_gpytorch_mll`` maximises for it.
ModelFactory = Callable[[Tensor, Tensor], tuple[Model, MarginalLogLikelihood]]

# Caps on optimize_acqf's effort (see PreferenceOptimizer's docstring).
_MIN_RESTARTS, _MAX_RESTARTS = 4, 10
_MIN_RAW, _MAX_RAW = 128, 512


def acquisition_effort(d: int, q_opt: int) -> tuple[int, int]:
    """Default ``optimize_acqf`` restarts and raw samples for ``q_opt`` points in ``d`` dims.

    BoTorch's PBO pipeline uses :math:`d q` restarts and :math:`30 d q` raw samples; these are
    clipped to ``[4, 10]`` and ``[128, 512]`` (see :class:`PreferenceOptimizer`).
    """
    restarts = min(max(d * q_opt, _MIN_RESTARTS), _MAX_RESTARTS)
    return restarts, min(max(30 * d * q_opt, _MIN_RAW), _MAX_RAW)


def _outputscale(kernel: ScaleKernel) -> Tensor:
    return kernel.outputscale


def _set_outputscale(kernel: ScaleKernel, value: Tensor) -> None:
    kernel._set_outputscale(value)


def box_covar_module(dim: int, dtype: torch.dtype = torch.float64) -> ScaleKernel:
    r"""The default kernel with ``PairwiseGP``'s flat outputscale prior (an opt-in variant).

    :func:`~botorch_pref.models.pairwise.make_covar_module`'s kernel (ARD RBF, PairwiseGP's
    Gamma(2.4, 2.7) lengthscale prior, log-parametrised constraints) with the outputscale prior
    :math:`\text{LogNormal}(\log 10, 1.5)` replaced by BoTorch ``PairwiseGP``'s smoothed box on
    :math:`[0.01, 100]`, so that inside the box the evidence alone sets the outputscale (the
    utility's variance in units of the answer noise). ``model="laplace-box"`` uses it.

    Why it exists: GPyTorch's MAP fit adds ``prior.log_prob(outputscale)``, the density *in the
    outputscale*, and the LogNormal's density peaks at :math:`10 e^{-1.5^2} \approx 1.05`, not at
    its median 10: above 1.05 it pulls the fit down, by 0.5-0.9 nats per unit of
    :math:`\log` outputscale between 3 and 8. On the answers of an EUBO run on Hartmann-6
    (qEUBO protocol, 34-74 answers) the default kernel's fit stayed at 1.5-4.4 where
    ``PairwiseGP`` and this kernel reached 4.7-8.8 (at 34 and 74 answers the Laplace evidence
    alone preferred the larger values), the main difference between the two models' posteriors
    there.

    Why it is not the loop's default: with few answers the flat prior lets the evidence drive
    the outputscale to the box's edges (to 0.01 after one to four answers, or to 100), exactly
    as it does for ``PairwiseGP``. On Branin with 4 random and 8 EUBO queries (the test in
    ``tests/test_loop.py``) that gave mean regret 8.2 (``PairwiseGP`` 10.5) against 1.6 for the
    default kernel; on Hartmann-6 after 50 EUBO queries the difference was within the noise of
    the benchmark (``benchmarks/RESULTS.md``). The box's steep edges also stall L-BFGS now and
    then (the optimiser then keeps the previous hyperparameters, with a warning).

    Args:
        dim: Input dimension.
        dtype: Dtype of the hyperparameters.

    Returns:
        The kernel.
    """
    kernel = make_covar_module(dim, dtype=dtype)
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
) -> tuple[Model, MarginalLogLikelihood]:
    """:class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with its Laplace evidence.

    Args:
        datapoints: ``n x d`` unit-cube designs.
        comparisons: ``m x 2`` (winner, loser) rows, or a
            :class:`~botorch_pref.data.PreferenceData` of mixed answers.
        likelihood: The likelihood (default: the model's probit).
        covar_module: The kernel (default: the model's default kernel).

    Returns:
        ``(model, mll)``.
    """
    model = PairwiseLaplaceGP(
        datapoints, comparisons, likelihood=likelihood, covar_module=covar_module
    )
    return model, LaplaceEvidence(model.likelihood, model)


def laplace_box_model(
    datapoints: Tensor,
    comparisons: Tensor | PreferenceData,
    likelihood: PairwiseLikelihood | None = None,
) -> tuple[Model, MarginalLogLikelihood]:
    """:func:`laplace_model` with :func:`box_covar_module` (``PairwiseGP``'s outputscale prior).

    Args:
        datapoints: ``n x d`` unit-cube designs.
        comparisons: ``m x 2`` (winner, loser) rows, or a
            :class:`~botorch_pref.data.PreferenceData` of mixed answers.
        likelihood: The likelihood (default: the model's probit).

    Returns:
        ``(model, mll)``.
    """
    kernel = box_covar_module(datapoints.shape[-1], dtype=datapoints.dtype)
    return laplace_model(datapoints, comparisons, likelihood, covar_module=kernel)


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


MODEL_FACTORIES: dict[str, ModelFactory] = {
    "laplace": laplace_model,
    "laplace-box": laplace_box_model,
    "pairwisegp": pairwisegp_model,
}


class Recommendation(NamedTuple):
    """The recommended design and the model's belief about its utility.

    Attributes:
        x: The design, a ``d`` tensor in user units.
        mean: Posterior mean of its utility :math:`\\mu(x)`.
        std: Posterior standard deviation of its utility. Utilities are identified only up to a
            common shift, so this includes the prior's uncertainty about the overall level.
        index: Its row in :attr:`PreferenceOptimizer.datapoints`.
    """

    x: Tensor
    mean: float
    std: float
    index: int


class QueryRecord(NamedTuple):
    """One answered query.

    Attributes:
        query: The ``q x d`` options in user units.
        winner: The index of the preferred option (``None`` for "no preference").
        ranking: The full ranking (best first) when one was given, else ``None``.
        tie: ``True`` for a "no preference" answer.
    """

    query: Tensor
    winner: int | None
    ranking: tuple[int, ...] | None = None
    tie: bool = False


class Hyperparameters(NamedTuple):
    """A model's fitted hyperparameters and the number of answers they were fitted at.

    Storing them next to the answers lets a run be rebuilt without refitting
    (:meth:`PreferenceOptimizer.sync`): the answers up to ``n_answers`` are recorded without
    fits, these values are loaded, and the answers after them are recorded as usual.

    Attributes:
        values: The model's parameters by name (unconstrained, as ``named_parameters`` gives).
        n_answers: The number of answered queries at the fit.
    """

    values: dict[str, Tensor]
    n_answers: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (float64 values, shapes kept)."""
        return {
            "n_answers": int(self.n_answers),
            "values": {
                name: {
                    "shape": list(v.shape),
                    "data": v.detach().double().cpu().reshape(-1).tolist(),
                }
                for name, v in self.values.items()
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hyperparameters:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: For a malformed dictionary.
        """
        try:
            n = as_index(data["n_answers"], "n_answers")
            values = {
                str(name): torch.tensor(v["data"], dtype=torch.float64).reshape(v["shape"])
                for name, v in dict(data["values"]).items()
            }
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"not a stored set of hyperparameters: {err!r}") from None
        if n < 1 or not all(bool(torch.isfinite(v).all()) for v in values.values()):
            raise ValueError("stored hyperparameters need n_answers >= 1 and finite values.")
        return cls(values, n)


class PreferenceOptimizer:
    r"""Ask/tell preferential Bayesian optimisation on a box.

    Example:
        >>> bounds = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], dtype=torch.float64)
        >>> opt = PreferenceOptimizer(bounds, strategy="eubo", seed=0)
        >>> for _ in range(20):
        ...     X = opt.ask()                    # 2 x 2, inside bounds
        ...     opt.tell(X, winner=user(X))      # index of the preferred row
        >>> opt.best().x

    Strategies (``strategy``):

    * ``"eubo"``: BoTorch's analytic EUBO, :math:`E[\max(g(x_1), g(x_2))]`, maximised jointly
      over the pair (``q = 2``).
    * ``"qeubo"``: Monte-Carlo qEUBO, :math:`E[\max_i g(x_i)]`, for any ``q >= 2``.
    * ``"champion-challenger"``: the champion (the compared design with the highest posterior
      mean) against the challenger maximising :math:`E[(g(x) - g(c))^+]` under the joint
      posterior (:class:`~botorch_pref.acquisition.ChampionChallenger`; ``q = 2``). The champion
      is an earlier datapoint, so each such query adds one new design.
    * ``"random"``: ``q`` uniform designs, the baseline.

    Defaults and why:

    * ``n_initial = min(4 d, 20)`` random queries: the PBO protocol's ``4 d`` (enough spread for
      the first lengthscale fits), capped so that a person is not asked 80 random questions in
      20 dimensions. Pass ``n_initial=4 * d`` to follow the protocol exactly.
    * Refits: after every answer for the first ``refit_all_until = 30`` answers (the
      hyperparameters move most while data are few), then after every ``refit_every = 5``-th.
      In between, the model keeps its hyperparameters and only ``set_train_data`` runs
      (a warm-started mode update). Refits start from the current hyperparameters (the model and
      its kernel are kept across answers), so they take few L-BFGS iterations.
    * ``optimize_acqf`` effort: BoTorch's PBO pipeline uses :math:`d q` restarts and
      :math:`30 d q` raw samples (:math:`q` the number of points optimised jointly: 2 for EUBO
      and qEUBO pairs, 1 for the challenger); here these are clipped to ``[4, 10]`` restarts and
      ``[128, 512]`` raw samples, which keeps an ``ask`` around a second in 6-D on a loaded
      2-core CPU, and gives low dimensions enough starts to find the global maximum of the
      (multi-modal) acquisition.
    * ``mc_samples = 128`` scrambled-Sobol samples for qEUBO.

    Args:
        bounds: ``2 x d`` lower and upper bounds of the designs, in the user's units.
        strategy: One of ``"eubo"``, ``"qeubo"``, ``"champion-challenger"``, ``"random"``.
        q: Options per query (2 for EUBO and champion-challenger).
        n_initial: Random queries before the acquisition takes over (default above).
        model: ``"laplace"`` (:class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP`),
            ``"laplace-box"`` (the same with ``PairwiseGP``'s outputscale prior,
            :func:`box_covar_module`), ``"pairwisegp"`` (BoTorch's ``PairwiseGP``) or a
            :data:`ModelFactory`.
        refit_every: After ``refit_all_until`` answers, refit hyperparameters every this many.
        refit_all_until: Refit after every answer up to this many answers.
        num_restarts: ``optimize_acqf`` restarts (default: :math:`d q` clipped to [4, 10]).
        raw_samples: ``optimize_acqf`` raw samples (default: :math:`30 d q` clipped to
            [128, 512]).
        mc_samples: qEUBO's quasi-Monte-Carlo samples.
        answers: How an answer about ``q > 2`` options enters the model: ``"choice"`` (the
            person picked the best of ``q``: a multinomial-logit choice, and a full ranking a
            Plackett-Luce ranking, with the :class:`~botorch_pref.likelihoods.Ranking`
            likelihood) or ``"pairs"`` (the winner beating each other option, a ranking its
            consecutive pairs, with the probit pair likelihood: the rows are then treated as
            independent although they are not). ``"auto"``: ``"choice"`` when ``q > 2``, else
            ``"pairs"``.
        ties: Accept "no preference" answers to pairs (``tell(query, tie=True)``): the pair
            likelihood becomes ordinal, :class:`~botorch_pref.likelihoods.PairwiseProbit` with
            a tie threshold fitted by the evidence. Needs ``answers="pairs"``.
        champion_variant: ``"joint"`` or ``"marginal"`` (Brochu's EI), for champion-challenger.
        device: Device of the model and of every tensor returned (default: ``bounds``'s).
        dtype: Floating dtype of the model and of every tensor returned (default float64).
        seed: Seed of all randomness; ``None`` draws one from torch's global generator (see
            :attr:`seed`).
    """

    def __init__(
        self,
        bounds: Tensor | Sequence[Sequence[float]],
        strategy: str = "eubo",
        q: int = 2,
        *,
        n_initial: int | None = None,
        model: str | ModelFactory = "laplace",
        refit_every: int = 5,
        refit_all_until: int = 30,
        num_restarts: int | None = None,
        raw_samples: int | None = None,
        mc_samples: int = 128,
        answers: str = "auto",
        ties: bool = False,
        champion_variant: str = "joint",
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float64,
        seed: int | None = None,
    ) -> None:
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}.")
        if device is None:
            device = bounds.device if torch.is_tensor(bounds) else torch.device("cpu")
        self._tkwargs: dict[str, Any] = {"device": torch.device(device), "dtype": dtype}
        self._bounds = self._check_bounds(bounds)
        d = self.dim
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}.")
        self.strategy = strategy
        self.q = self._positive_int(q, "q")
        if self.q < 2:
            raise ValueError(f"A query needs q >= 2 options, got q = {q}.")
        if strategy in ("eubo", "champion-challenger") and self.q != 2:
            raise ValueError(
                f"strategy {strategy!r} asks about pairs (q = 2); use 'qeubo' or 'random' "
                f"for q = {q}."
            )
        self.n_initial = (
            min(4 * d, 20) if n_initial is None else self._nonnegative_int(n_initial, "n_initial")
        )
        if isinstance(model, str):
            if model not in MODEL_FACTORIES:
                raise ValueError(
                    f"model must be one of {', '.join(MODEL_FACTORIES)} or a factory; "
                    f"got {model!r}."
                )
            self._factory = MODEL_FACTORIES[model]
            self.model_name = model
        elif callable(model):
            self._factory = model
            self.model_name = getattr(model, "__name__", type(model).__name__)
        else:
            raise ValueError(f"model must be a name or a factory callable, got {model!r}.")
        self.refit_every = self._positive_int(refit_every, "refit_every")
        self.refit_all_until = self._nonnegative_int(refit_all_until, "refit_all_until")
        default_restarts, default_raw = acquisition_effort(
            d, 1 if strategy == "champion-challenger" else self.q
        )
        self.num_restarts = (
            default_restarts
            if num_restarts is None
            else self._positive_int(num_restarts, "num_restarts")
        )
        self.raw_samples = (
            default_raw if raw_samples is None else self._positive_int(raw_samples, "raw_samples")
        )
        self.mc_samples = self._positive_int(mc_samples, "mc_samples")
        if answers not in ("auto", "choice", "pairs"):
            raise ValueError(f"answers must be 'auto', 'choice' or 'pairs', got {answers!r}.")
        self.answers = ("choice" if self.q > 2 else "pairs") if answers == "auto" else answers
        self.ties = bool(ties)
        if self.ties and self.answers == "choice":
            raise ValueError(
                "ties=True needs answers='pairs': no tie model is defined for choices among "
                "more than two options."
            )
        self._likelihood: PairwiseLikelihood | None = None
        if self.answers == "choice":
            self._likelihood = Ranking()
        elif self.ties:
            self._likelihood = PairwiseProbit(tie_threshold=0.5)
        if self._likelihood is not None and self.model_name == "pairwisegp":
            raise ValueError(
                "model='pairwisegp' models pairs only; use answers='pairs' and ties=False, "
                "or model='laplace'."
            )
        if champion_variant not in ("joint", "marginal"):
            raise ValueError(
                f"champion_variant must be 'joint' or 'marginal', got {champion_variant!r}."
            )
        self.champion_variant = champion_variant
        if seed is None:
            seed = int(torch.randint(0, 2**62, (1,)).item())
        self.seed = self._nonnegative_int(seed, "seed")

        self._X_user = torch.empty(0, d, **self._tkwargs)
        self._X_unit = torch.empty(0, d, **self._tkwargs)
        self._data = PreferenceData().to(self._tkwargs["device"])
        self._history: list[QueryRecord] = []
        self._pending: Tensor | None = None
        self._model: Model | None = None
        self._mll: MarginalLogLikelihood | None = None
        self.n_refits = 0
        self._fitted_at = 0

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _positive_int(value: Any, name: str) -> int:
        value = as_index(value, name)
        if value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value}.")
        return value

    @staticmethod
    def _nonnegative_int(value: Any, name: str) -> int:
        value = as_index(value, name)
        if value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value}.")
        return value

    def _check_bounds(self, bounds: Tensor | Sequence[Sequence[float]]) -> Tensor:
        b = torch.as_tensor(bounds).to(**self._tkwargs)
        if b.dim() != 2 or b.shape[0] != 2 or b.shape[1] < 1:
            raise ValueError(
                f"bounds must be a 2 x d tensor (lower, upper), got shape {tuple(b.shape)}."
            )
        if not bool(torch.isfinite(b).all()):
            raise ValueError("bounds must be finite.")
        if not bool((b[1] > b[0]).all()):
            raise ValueError("bounds must satisfy lower < upper in every dimension.")
        return b

    def _as_query(self, query: Tensor | Sequence[Sequence[float]]) -> Tensor:
        """Validate a query (``q' x d``, ``q' >= 2``, finite, distinct rows, inside bounds)."""
        try:
            X = query if torch.is_tensor(query) else torch.as_tensor(query, dtype=self.dtype)
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"query must be a q x d array of numbers: {err}") from None
        if not (X.is_floating_point() or X.dtype in (torch.int32, torch.int64)):
            raise ValueError(f"query must hold real numbers, got dtype {X.dtype}.")
        X = X.to(**self._tkwargs)
        if X.dim() != 2 or X.shape[-1] != self.dim or X.shape[0] < 2:
            raise ValueError(
                f"query must have shape q x {self.dim} with q >= 2, got {tuple(X.shape)}."
            )
        if not bool(torch.isfinite(X).all()):
            raise ValueError("query contains NaN or infinite values.")
        lower, upper = self._bounds
        slack = 1e-9 * (upper - lower)
        if bool((X < lower - slack).any() or (X > upper + slack).any()):
            raise ValueError("query has designs outside bounds.")
        same = (X.unsqueeze(0) == X.unsqueeze(1)).all(-1)
        if bool(same.triu(1).any()):
            raise ValueError("query repeats a design: its options must be distinct.")
        return X

    def _model_data(self, data: PreferenceData) -> Tensor | PreferenceData:
        """What the model is given: ``m x 2`` rows for pairs (the fast path), else ``data``."""
        return data.as_comparisons() if data.is_pairwise else data

    # -------------------------------------------------------------- properties
    @property
    def bounds(self) -> Tensor:
        """The ``2 x d`` bounds in user units."""
        return self._bounds.clone()

    @property
    def dim(self) -> int:
        """The design dimension :math:`d`."""
        return self._bounds.shape[-1]

    @property
    def device(self) -> torch.device:
        return self._tkwargs["device"]

    @property
    def dtype(self) -> torch.dtype:
        return self._tkwargs["dtype"]

    @property
    def datapoints(self) -> Tensor:
        """The ``n x d`` distinct designs compared so far, in user units."""
        return self._X_user.clone()

    @property
    def comparisons(self) -> Tensor:
        """The ``m x 2`` (winner, loser) rows indexing :attr:`datapoints`.

        Raises:
            ValueError: If the answers hold choices, rankings or ties (see
                :attr:`preference_data`).
        """
        if not self._data.is_pairwise:
            raise ValueError(
                "the answers hold choices, rankings or ties, not only pairs: use preference_data."
            )
        return self._data.as_comparisons()

    @property
    def preference_data(self) -> PreferenceData:
        """Every answer as observations over :attr:`datapoints` (a copy)."""
        return PreferenceData.cat([self._data])

    @property
    def n_queries(self) -> int:
        """The number of answered queries."""
        return len(self._history)

    @property
    def history(self) -> list[QueryRecord]:
        """The answered queries in order (a copy); :meth:`replay` rebuilds the state from it."""
        return [r._replace(query=r.query.clone()) for r in self._history]

    @property
    def pending(self) -> Tensor | None:
        """The query :meth:`ask` returned and that awaits its answer, or ``None``."""
        return None if self._pending is None else self._pending.clone()

    @property
    def model(self) -> Model | None:
        """The preference model on unit-cube inputs (``None`` before the first answer)."""
        return self._model

    @property
    def mll(self) -> MarginalLogLikelihood | None:
        """The marginal log-likelihood the hyperparameters are fitted with."""
        return self._mll

    @property
    def hyperparameters(self) -> Hyperparameters | None:
        """The model's hyperparameters and the answer count of their last fit (``None`` before).

        Store them with the answers to rebuild the run later without refitting
        (:meth:`sync`, :meth:`replay`).
        """
        if self._model is None or self._fitted_at == 0:
            return None
        values = {name: p.detach().clone() for name, p in self._model.named_parameters()}
        return Hyperparameters(values, self._fitted_at)

    def to_unit(self, X: Tensor) -> Tensor:
        """Map designs from user units to the unit cube."""
        return normalize(X.to(**self._tkwargs), self._bounds)

    def from_unit(self, X: Tensor) -> Tensor:
        """Map designs from the unit cube to user units."""
        return unnormalize(X.to(**self._tkwargs), self._bounds)

    # --------------------------------------------------------------- randomness
    @contextmanager
    def _seeded(self, k: int, stream: int) -> Iterator[None]:
        """Fork torch's global generators and seed them for query ``k`` and ``stream``."""
        device = self.device
        devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(derived_seed(self.seed, k, stream))
            yield

    def _random_unit(self, n: int, k: int, stream: int) -> Tensor:
        return uniform(n, self.dim, self.seed, k, stream, dtype=self.dtype, device=self.device)

    # ---------------------------------------------------------------------- ask
    def ask(self) -> Tensor:
        """The next query: a ``q x d`` tensor of distinct designs inside ``bounds``.

        Until it is answered with :meth:`tell`, repeated calls return the same query.

        Returns:
            The query in user units.
        """
        if self._pending is not None:
            return self._pending.clone()
        k = self.n_queries
        if k < self.n_initial or self.strategy == "random" or self._model is None:
            X = self.from_unit(self._random_unit(self.q, k, Stream.RANDOM))
        else:
            X = self._acquire(k)
        X = self._repair_duplicates(X, k)
        self._pending = X
        return X.clone()

    def _acquire(self, k: int) -> Tensor:
        """Optimise the acquisition function for query ``k``; the query in user units."""
        acqf, q_opt, champion = self.acquisition_function(k)
        unit = torch.zeros(2, self.dim, **self._tkwargs)
        unit[1] = 1.0
        with self._seeded(k, Stream.ACQF), warnings.catch_warnings(), lean_kernels():
            warnings.simplefilter("ignore", OptimizationWarning)
            candidates, _ = optimize_acqf(
                acqf,
                bounds=unit,
                q=q_opt,
                num_restarts=self.num_restarts,
                raw_samples=self.raw_samples,
            )
        X = self.from_unit(candidates.detach().reshape(q_opt, self.dim).clamp(0.0, 1.0))
        if champion is not None:
            X = torch.cat([self._X_user[champion].unsqueeze(0), X], dim=0)
        return X

    def acquisition_function(
        self, k: int | None = None
    ) -> tuple[AcquisitionFunction, int, int | None]:
        """The acquisition function :meth:`ask` optimises on the unit cube.

        Args:
            k: The query number (seeds qEUBO's base samples); default :attr:`n_queries`.

        Returns:
            ``(acqf, q_opt, champion)``: the acquisition function, the number of points it
            takes, and for champion-challenger the champion's row in :attr:`datapoints`
            (else ``None``).
        """
        if self._model is None:
            raise ValueError("No answers yet: the acquisition needs a model.")
        if self.strategy not in ("eubo", "qeubo", "champion-challenger"):
            raise ValueError(f"strategy {self.strategy!r} has no acquisition function.")
        k = self.n_queries if k is None else k
        if self.strategy == "eubo":
            return make_eubo(self._model), 2, None
        if self.strategy == "qeubo":
            seed = derived_seed(self.seed, k, Stream.ACQF) % 2**31
            return make_qeubo(self._model, self.mc_samples, seed=seed), self.q, None
        mean, _ = self._posterior_at(self._X_unit)
        idx = int(mean.argmax())
        acqf = ChampionChallenger(
            self._model, self._X_unit[idx], variant=self.champion_variant, log=True
        )
        return acqf, 1, idx

    def _repair_duplicates(self, X: Tensor, k: int) -> Tensor:
        """Replace a repeated option (it would compare a design with itself) by a random one."""
        same = (X.unsqueeze(0) == X.unsqueeze(1)).all(-1).triu(1)
        if not bool(same.any()):
            return X
        dup = same.any(0)
        X = X.clone()
        X[dup] = self.from_unit(self._random_unit(int(dup.sum()), k, Stream.REPAIR))
        return X

    # --------------------------------------------------------------------- tell
    def tell(
        self,
        query: Tensor,
        winner: int | None = None,
        *,
        ranking: Sequence[int] | Tensor | None = None,
        tie: bool = False,
    ) -> None:
        """Record the answer to the query :meth:`ask` returned.

        Answers to other queries (designs a person brought themselves, answers replayed from
        storage) go through :meth:`add_comparison`.

        Args:
            query: The ``q x d`` query, exactly as :meth:`ask` returned it.
            winner: The index of the preferred option.
            ranking: A full ranking of the options, best first (a permutation of ``0..q-1``):
                a Plackett-Luce ranking with ``answers="choice"``, else the ``q - 1``
                consecutive pairs.
            tie: "No preference" between the two options (needs ``ties=True``).

        Raises:
            ValueError: Without a pending query, for a different query, or for a bad answer;
                the optimiser's state is then unchanged.
        """
        if self._pending is None:
            raise ValueError(
                "tell() without a pending query: call ask() first, or use add_comparison() to "
                "record an answer to any query."
            )
        X = self._as_query(query)
        if X.shape != self._pending.shape or not torch.equal(X, self._pending):
            raise ValueError(
                "query differs from the one ask() returned; use add_comparison() to record "
                "an answer to another query."
            )
        self._record(X, winner, ranking, tie)

    def add_comparison(
        self,
        query: Tensor | Sequence[Sequence[float]],
        winner: int | None = None,
        *,
        ranking: Sequence[int] | Tensor | None = None,
        tie: bool = False,
    ) -> None:
        """Record the answer to any query of ``q' >= 2`` distinct designs inside ``bounds``.

        This is :meth:`tell` without the check that the query came from :meth:`ask`. It
        counts as a query (the refit schedule and the seeds advance), and a pending query from
        :meth:`ask` that differs from ``query`` is discarded (the next :meth:`ask` makes a new
        one).

        Args:
            query: A ``q' x d`` tensor (or nested sequence) in user units.
            winner: The index of the preferred option.
            ranking: A full ranking of the options, best first.
            tie: "No preference" between two options (needs ``ties=True``).

        Raises:
            ValueError: For a bad query or answer; the optimiser's state is then unchanged.
        """
        X = self._as_query(query)
        self._record(X, winner, ranking, tie)

    def _match_rows(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """Indices of the rows of ``X`` among the datapoints, appending new ones.

        Returns:
            ``(index, new_rows)``: a ``q'`` long tensor of datapoint indices and the rows of
            ``X`` that are new, in order.
        """
        n = self._X_user.shape[0]
        index = torch.empty(X.shape[0], dtype=torch.long, device=self.device)
        new_rows = []
        for i, x in enumerate(X):
            hit = (self._X_user == x).all(-1).nonzero() if n else torch.empty(0)
            if hit.numel():
                index[i] = int(hit[0])
            else:
                index[i] = n + len(new_rows)
                new_rows.append(x)
        new = torch.stack(new_rows) if new_rows else X[:0]
        return index, new

    def _record(
        self, X: Tensor, winner: Any | None, ranking: Any | None, tie: bool, refit: bool = True
    ) -> None:
        """Validate the answer, update data and model atomically, append to the history."""
        answer = validate_answer(X.shape[0], winner, ranking, tie=tie, ties=self.ties)
        index, new_rows = self._match_rows(X)
        X_user = torch.cat([self._X_user, new_rows])
        X_unit = torch.cat([self._X_unit, self.to_unit(new_rows).clamp(0.0, 1.0)])
        obs = encode_answer(index.tolist(), answer, self.answers).to(self.device)
        data = PreferenceData.cat([self._data, obs])
        k = self.n_queries + 1
        fit = refit and (self._model is None or self._refit_due(k))
        self._update_model(X_unit, data, refit=fit, k=k)
        self._X_user, self._X_unit, self._data = X_user, X_unit, data
        rank = answer.ranking
        self._history.append(QueryRecord(X.clone(), answer.winner, rank, answer.kind == "tie"))
        self._pending = None
        if fit:
            self._fitted_at = k

    def _refit_due(self, k: int) -> bool:
        """Whether to refit the hyperparameters after the ``k``-th answer."""
        return k <= self.refit_all_until or k % self.refit_every == 0

    def _update_model(self, X_unit: Tensor, data: PreferenceData, refit: bool, k: int) -> None:
        """Give the model the new data (building it on the first answer), then maybe refit.

        On an exception the model is restored to its previous data and hyperparameters.
        """
        C = self._model_data(data)
        if self._model is None:
            if self._likelihood is None:
                model, mll = self._factory(X_unit, C)
            else:
                model, mll = self._factory(X_unit, C, likelihood=deepcopy(self._likelihood))
            model.to(**self._tkwargs)
            self._model, self._mll = model, mll
            try:
                if refit:
                    self._fit(k)
                self._sync(X_unit)
            except BaseException:
                self._model = self._mll = None
                raise
            return
        state = {name: v.clone() for name, v in self._model.state_dict().items()}
        try:
            self._model.set_train_data(X_unit, C, update_model=True)
            if refit:
                self._fit(k)
        except BaseException:
            self._model.load_state_dict(state)
            self._model.set_train_data(
                self._X_unit, self._model_data(self._data), update_model=True
            )
            self._sync(self._X_unit)
            raise
        self._sync(X_unit)

    def _fit(self, k: int) -> None:
        """Refit the hyperparameters from their current values (seeded restarts).

        A fit that fails -- every attempt of ``fit_gpytorch_mll`` fails, or a custom kernel's
        hyperparameters run into a numerically singular covariance -- keeps the previous
        hyperparameters with a warning: the answer is recorded either way.
        """
        state = {name: v.clone() for name, v in self._mll.state_dict().items()}
        with self._seeded(k, Stream.FIT):
            try:
                fit_gpytorch_mll(self._mll)
            except (ModelFittingError, NotPSDError, torch.linalg.LinAlgError) as err:
                self._mll.load_state_dict(state)
                warnings.warn(
                    f"Hyperparameter fit failed after query {k} ({err}); keeping the previous "
                    "hyperparameters.",
                    RuntimeWarning,
                    stacklevel=4,
                )
        self._model.eval()
        self.n_refits += 1

    def _sync(self, X_unit: Tensor) -> None:
        """Bring the model's cached posterior up to date with its data and hyperparameters.

        L-BFGS may stop at hyperparameters other than the last ones it evaluated, and the model
        then refreshes its mode lazily, on the next posterior call. Doing it here, not inside
        whichever call comes next, makes the state a function of the answers alone (a replayed
        history that never calls :meth:`ask` reaches the same state to the last bit).
        """
        with torch.no_grad():
            self._model.posterior(X_unit[:1])

    # --------------------------------------------------------------------- best
    def _posterior_at(self, X_unit: Tensor) -> tuple[Tensor, Tensor]:
        """Marginal posterior means and standard deviations at unit-cube designs."""
        with torch.no_grad():
            post = self._model.posterior(X_unit.unsqueeze(-2))
            mean = post.mean.reshape(-1)
            std = post.variance.reshape(-1).clamp_min(0.0).sqrt()
        return mean, std

    def predict(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """Posterior mean and standard deviation of the utility at designs in user units.

        Args:
            X: ``n x d`` designs in user units.

        Returns:
            Two ``n`` tensors.
        """
        if self._model is None:
            raise ValueError("No answers yet: nothing to predict from.")
        X = torch.as_tensor(X).to(**self._tkwargs)
        if X.dim() != 2 or X.shape[-1] != self.dim:
            raise ValueError(f"X must have shape n x {self.dim}, got {tuple(X.shape)}.")
        return self._posterior_at(self.to_unit(X))

    def best(self) -> Recommendation:
        """The compared design with the highest posterior mean.

        Returns:
            A :class:`Recommendation` (design in user units, posterior mean and std, index).
        """
        if self._model is None:
            raise ValueError("No answers yet: there is nothing to recommend.")
        mean, std = self._posterior_at(self._X_unit)
        idx = int(mean.argmax())
        return Recommendation(self._X_user[idx].clone(), float(mean[idx]), float(std[idx]), idx)

    # ------------------------------------------------------------------- replay
    def sync(
        self,
        records: Sequence[QueryRecord | tuple[Any, ...]],
        *,
        hyperparameters: Hyperparameters | None = None,
    ) -> int:
        """Bring the optimiser to the state after ``records``, the answered queries in order.

        When the optimiser's :attr:`history` is a prefix of ``records`` (same queries and
        answers), only the new records are added; otherwise the optimiser is reset and rebuilds
        from the first record. So a caller that keeps the answers elsewhere (a session
        database) hands the full list each time and pays only for what is new.

        With ``hyperparameters`` (as :attr:`hyperparameters` returned them in the run that made
        ``records``), the records up to ``hyperparameters.n_answers`` that are added are
        recorded without fitting, those values are loaded there, and later records refit on
        the usual schedule: the state is the run's (the same data, hyperparameters and next
        :meth:`ask`) without the cost of its fits. They are ignored when the optimiser already
        holds more answers than ``n_answers``, or ``records`` hold fewer.

        Args:
            records: :class:`QueryRecord` s, or tuples ``(query, winner)``,
                ``(query, winner, ranking)`` or ``(query, None, None, True)`` (a tie).
            hyperparameters: Stored hyperparameters of this run.

        Returns:
            The number of records added.

        Raises:
            InvalidAnswerError: For a malformed record or answer (records before it are kept).
            ValueError: For a malformed query, or hyperparameters that do not fit the model.
        """
        records = [_as_record(i, r) for i, r in enumerate(records)]
        n = self.n_queries
        if n > len(records) or any(
            not _same_record(a, b) for a, b in zip(self._history, records[:n], strict=False)
        ):
            self._reset()
            n = 0
        h = hyperparameters
        if h is not None and not (n <= h.n_answers <= len(records)):
            h = None
        for k, (query, winner, ranking, tie) in enumerate(records[n:], start=n + 1):
            X = self._as_query(query)
            self._record(X, winner, ranking, tie, refit=h is None or k > h.n_answers)
            if h is not None and k == h.n_answers:
                self._load_hyperparameters(h)
        return len(records) - n

    def _reset(self) -> None:
        """Forget every answer (the settings and the seed stay)."""
        d = self.dim
        self._X_user = torch.empty(0, d, **self._tkwargs)
        self._X_unit = torch.empty(0, d, **self._tkwargs)
        self._data = PreferenceData().to(self.device)
        self._history = []
        self._pending = None
        self._model = self._mll = None
        self.n_refits = 0
        self._fitted_at = 0

    def _load_hyperparameters(self, h: Hyperparameters) -> None:
        """Load stored hyperparameters into the model and bring its posterior up to date."""
        params = dict(self._model.named_parameters())
        if set(params) != set(h.values) or any(
            params[name].shape != v.shape for name, v in h.values.items()
        ):
            raise ValueError(
                "stored hyperparameters do not fit this model: expected "
                f"{ {k: tuple(p.shape) for k, p in params.items()} }, got "
                f"{ {k: tuple(v.shape) for k, v in h.values.items()} }."
            )
        with torch.no_grad():
            for name, v in h.values.items():
                params[name].copy_(v.to(params[name]))
        self._model.eval()
        self._fitted_at = h.n_answers
        self._sync(self._X_unit)

    @classmethod
    def replay(
        cls,
        records: Iterable[QueryRecord | tuple[Any, ...]],
        bounds: Tensor | Sequence[Sequence[float]],
        *,
        hyperparameters: Hyperparameters | None = None,
        **kwargs: Any,
    ) -> PreferenceOptimizer:
        """Rebuild an optimiser from answered queries, in order.

        With the same constructor arguments (``seed`` included) and the :attr:`history` of a
        run, the result has the run's data, hyperparameters and next :meth:`ask`; with the
        run's :attr:`hyperparameters` it gets there without refitting (see :meth:`sync`).

        Args:
            records: As for :meth:`sync`.
            bounds: As for the constructor.
            hyperparameters: Stored hyperparameters of the run (optional).
            **kwargs: Other constructor arguments.

        Returns:
            The optimiser.
        """
        opt = cls(bounds, **kwargs)
        opt.sync(list(records), hyperparameters=hyperparameters)
        return opt


def _as_record(i: int, record: Any) -> QueryRecord:
    """A :class:`QueryRecord` from a record or a tuple (see :meth:`PreferenceOptimizer.sync`)."""
    if not isinstance(record, tuple) or len(record) not in (2, 3, 4):
        raise InvalidAnswerError(
            f"record {i} must be (query, winner), (query, winner, ranking) or "
            f"(query, None, None, tie), got {record!r}."
        )
    query, winner, *rest = record
    ranking = rest[0] if rest else None
    tie = bool(rest[1]) if len(rest) > 1 else False
    if ranking is not None or tie:
        winner = None
    if ranking is not None:
        ranking = tuple(ranking.reshape(-1).tolist() if torch.is_tensor(ranking) else ranking)
    return QueryRecord(query, winner, ranking, tie)


def _same_record(held: QueryRecord, given: QueryRecord) -> bool:
    """Whether a held record is the given one (same query values and answer)."""
    q = torch.as_tensor(given.query, dtype=held.query.dtype).to(held.query.device)
    answer = (held.winner, held.ranking, held.tie)
    if given.ranking is not None:
        return (
            q.shape == held.query.shape
            and torch.equal(q, held.query)
            and answer[1:]
            == (
                tuple(given.ranking),
                False,
            )
        )
    return (
        q.shape == held.query.shape
        and torch.equal(q, held.query)
        and answer == (None if given.tie else given.winner, None, bool(given.tie))
    )
