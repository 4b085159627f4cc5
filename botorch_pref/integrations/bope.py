r"""Bayesian optimisation with preference exploration (BOPE) with any pairwise preference model.

BOPE (Lin et al., 2022; BoTorch's ``bope`` tutorial) optimises an expensive experiment
:math:`f: \mathcal X \to \mathbb R^k` whose outcome vectors :math:`y = f(x)` a decision maker
judges by an unknown utility :math:`g(y)`. It alternates two stages:

* **Preference exploration (PE)**: a multi-output outcome model :math:`\hat f` (here a
  ``SingleTaskGP`` over all ``k`` outcomes) is frozen at one posterior draw
  (``FixedSingleSampleModel``), and EUBO with ``outcome_model=`` that draw picks a pair of
  designs whose *predicted outcome vectors* the decision maker compares. The preference model
  (``PairwiseGP`` or :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP`, fitted by its
  evidence) is a utility over outcome vectors.
* **Experimentation**: ``qNoisyExpectedImprovement`` / ``qLogNoisyExpectedImprovement`` on the
  outcome model with ``LearnedObjective(pref_model=...)`` picks the next design to run.

:func:`run_bope` runs both stages with a given preference-model class, so that the same flow can
run with ``PairwiseGP`` and with :class:`PairwiseLaplaceGP` side by side on the same seeds
(``tests/test_bope.py``, ``benchmarks/bope.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch
from botorch.acquisition import (
    LearnedObjective,
    qLogNoisyExpectedImprovement,
    qNoisyExpectedImprovement,
)
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP, SingleTaskGP
from botorch.models.deterministic import FixedSingleSampleModel
from botorch.models.model import Model
from botorch.models.pairwise_gp import PairwiseLaplaceMarginalLogLikelihood
from botorch.models.transforms.input import Normalize
from botorch.models.transforms.outcome import Standardize
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from botorch.utils.sampling import draw_sobol_samples
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor

from botorch_pref.checks import whole_number
from botorch_pref.models.evidence import LaplaceEvidence
from botorch_pref.models.pairwise import PairwiseLaplaceGP

__all__ = [
    "BOPEResult",
    "fit_outcome_model",
    "fit_preference_model",
    "initial_designs",
    "run_bope",
]

EXPERIMENT_ACQFS = {"qNEI": qNoisyExpectedImprovement, "qLogNEI": qLogNoisyExpectedImprovement}


@dataclass
class BOPEResult:
    """What a BOPE run did.

    Attributes:
        X: ``n x d`` designs run (initial ones first).
        Y: ``n x k`` their outcome vectors.
        pe_Y: ``p x k`` outcome vectors shown to the decision maker.
        comparisons: ``c x 2`` answers ``(winner, loser)`` indexing ``pe_Y``.
        pref_model: The last fitted preference model.
        outcome_model: The outcome model of the last experimentation iteration.
        best_utility: The true utility of the best design run, after each experimentation
            iteration (``[initial, after 1, ...]``).
        recommended_utility: The true utility of the design that BOPE recommends at the end:
            among the designs run, the one whose predicted outcome vector (outcome-model mean)
            the preference model ranks highest.
        pe_utility: The true utility of the outcome vector the preference model ranks highest
            among those it has seen, after each PE iteration.
        seconds: Wall seconds per stage (``"pe"``: preference exploration including its model
            fits, ``"experiment"``: the experimentation stage including outcome-model fits).
    """

    X: Tensor
    Y: Tensor
    pe_Y: Tensor
    comparisons: Tensor
    pref_model: Model
    outcome_model: Model
    best_utility: list[float] = field(default_factory=list)
    recommended_utility: float = float("nan")
    pe_utility: list[float] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def fit_outcome_model(X: Tensor, Y: Tensor, maxiter: int = 200) -> SingleTaskGP:
    """A multi-output ``SingleTaskGP`` over all outcomes, fitted by its exact marginal likelihood.

    Args:
        X: ``n x d`` designs in the unit cube.
        Y: ``n x k`` outcome vectors.
        maxiter: L-BFGS iterations of the fit.

    Returns:
        The fitted model.
    """
    model = SingleTaskGP(
        X, Y, input_transform=Normalize(d=X.shape[-1]), outcome_transform=Standardize(m=Y.shape[-1])
    )
    fit_gpytorch_mll(
        ExactMarginalLogLikelihood(model.likelihood, model),
        optimizer_kwargs={"options": {"maxiter": maxiter}},
    )
    return model


def fit_preference_model(
    Y: Tensor, comparisons: Tensor, model_cls: type[Model] = PairwiseLaplaceGP
) -> Model:
    """A preference model over outcome vectors, fitted by its Laplace evidence.

    Args:
        Y: ``p x k`` outcome vectors.
        comparisons: ``c x 2`` answers ``(winner, loser)`` indexing ``Y``.
        model_cls: ``PairwiseLaplaceGP`` (fitted with :class:`LaplaceEvidence`) or BoTorch's
            ``PairwiseGP`` (fitted with ``PairwiseLaplaceMarginalLogLikelihood``), or a
            subclass of either.

    Returns:
        The fitted model, with a learned ``Normalize`` input transform (as in the tutorial).
    """
    if not isinstance(model_cls, type):
        raise TypeError(f"model_cls must be a class, got {model_cls!r}.")
    if issubclass(model_cls, PairwiseLaplaceGP):
        mll_cls = LaplaceEvidence
    elif issubclass(model_cls, PairwiseGP):
        mll_cls = PairwiseLaplaceMarginalLogLikelihood
    else:
        raise TypeError(f"model_cls must be PairwiseLaplaceGP or PairwiseGP, got {model_cls}.")
    model = model_cls(Y, comparisons, input_transform=Normalize(d=Y.shape[-1]))
    fit_gpytorch_mll(mll_cls(model.likelihood, model))
    return model


def initial_designs(
    problem: Callable[[Tensor], Tensor], dim: int, n_initial: int, seed: int
) -> tuple[Tensor, Tensor]:
    """The initial experiments of :func:`run_bope`: ``n_initial`` scrambled Sobol designs.

    Args:
        problem: Maps ``n x dim`` designs in the unit cube to ``n x k`` outcome vectors.
        dim: Input dimension.
        n_initial: Number of designs.
        seed: Sobol seed.

    Returns:
        ``(X, Y)``: ``n_initial x dim`` float64 designs and their outcome vectors.
    """
    bounds = torch.stack([torch.zeros(dim), torch.ones(dim)]).double()
    X = draw_sobol_samples(bounds, n=n_initial, q=1, seed=seed).squeeze(-2)
    return X, problem(X)


def _answer(utility: Callable[[Tensor], Tensor], Y_pair: Tensor, offset: int) -> Tensor:
    u = utility(Y_pair)
    winner = int(u[1] > u[0])
    return torch.tensor([[offset + winner, offset + 1 - winner]])


def run_bope(
    problem: Callable[[Tensor], Tensor],
    utility: Callable[[Tensor], Tensor],
    dim: int,
    model_cls: type[Model] = PairwiseLaplaceGP,
    *,
    seed: int = 0,
    n_initial: int = 8,
    n_initial_pairs: int = 2,
    n_pe: int = 4,
    experiment_acqfs: tuple[str, ...] = ("qNEI", "qLogNEI"),
    num_restarts: int = 2,
    raw_samples: int = 64,
    mc_samples: int = 16,
    pref_samples: int = 4,
    acqf_maxiter: int = 50,
    outcome_model: SingleTaskGP | None = None,
) -> BOPEResult:
    """One BOPE run: initial experiments, PE with EUBO, experimentation with a learned objective.

    Every random choice (initial designs, the outcome-model draw, acquisition restarts) is
    seeded from ``seed``, so runs with different ``model_cls`` see the same initial data.
    Answers are noiseless (the decision maker compares true utilities).

    Args:
        problem: Maps ``n x dim`` designs in the unit cube to ``n x k`` outcome vectors.
        utility: Maps ``... x k`` outcome vectors to ``...`` utilities.
        dim: Input dimension.
        model_cls: The preference model class (see :func:`fit_preference_model`).
        seed: Seed of the run.
        n_initial: Initial designs (Sobol).
        n_initial_pairs: Initial comparisons, between outcome-model predictions at random
            designs.
        n_pe: Preference-exploration iterations (one EUBO pair each).
        experiment_acqfs: One experimentation iteration per entry, ``"qNEI"`` or ``"qLogNEI"``,
            each with ``LearnedObjective(pref_model=...)``.
        num_restarts: ``optimize_acqf`` restarts.
        raw_samples: ``optimize_acqf`` raw samples.
        mc_samples: Outcome-model MC samples of the experimentation acquisition.
        pref_samples: Preference-model samples per outcome sample in ``LearnedObjective``.
        acqf_maxiter: L-BFGS iterations per ``optimize_acqf`` call.
        outcome_model: The outcome model fitted to the initial designs (from
            :func:`fit_outcome_model` on the same ``seed``), to share one fit between runs;
            ``None`` fits it here.

    Returns:
        A :class:`BOPEResult`.

    Raises:
        TypeError: If ``experiment_acqfs`` is a bare string rather than a sequence of names.
        ValueError: If ``n_initial < 2``, ``n_initial_pairs < 1`` or ``n_pe < 0``, if one of
            them is not an integer, or for an unknown experimentation acquisition.
    """
    n_initial, n_initial_pairs, n_pe = _check_options(
        n_initial, n_initial_pairs, n_pe, experiment_acqfs
    )
    torch.manual_seed(seed)
    maximize = partial(
        optimize_acqf,
        bounds=torch.stack([torch.zeros(dim), torch.ones(dim)]).double(),
        num_restarts=num_restarts,
        raw_samples=raw_samples,
        options={"maxiter": acqf_maxiter},
    )
    X, Y = initial_designs(problem, dim, n_initial, seed)
    t0 = time.perf_counter()
    if outcome_model is None:
        outcome_model = fit_outcome_model(X, Y)
    pe = _explore_preferences(
        outcome_model, utility, model_cls, dim, n_initial_pairs, n_pe, maximize
    )
    t1 = time.perf_counter()
    run = _experiment(
        problem,
        utility,
        _Experiments(X, Y, outcome_model, [float(utility(Y).max())]),
        pe.pref_model,
        experiment_acqfs,
        maximize,
        mc_samples=mc_samples,
        pref_samples=pref_samples,
    )
    t2 = time.perf_counter()
    return _result(utility, pe, run, {"pe": t1 - t0, "experiment": t2 - t1})


def _check_options(
    n_initial: int, n_initial_pairs: int, n_pe: int, experiment_acqfs: tuple[str, ...]
) -> tuple[int, int, int]:
    """Reject the run sizes and experimentation acquisitions :func:`run_bope` cannot use.

    Args:
        n_initial: Initial designs, an integer ``>= 2``.
        n_initial_pairs: Initial comparisons, an integer ``>= 1``.
        n_pe: Preference-exploration iterations, an integer ``>= 0``.
        experiment_acqfs: A sequence of names in :data:`EXPERIMENT_ACQFS`.

    Returns:
        ``(n_initial, n_initial_pairs, n_pe)`` as ints (an integral float such as ``8.0`` is
        an integer).

    Raises:
        TypeError: If ``experiment_acqfs`` is a bare string.
        ValueError: If a size is not an integer of its least value, or a name is unknown.
    """
    sizes = (
        whole_number(n_initial, "n_initial", 2),
        whole_number(n_initial_pairs, "n_initial_pairs", 1),
        whole_number(n_pe, "n_pe", 0),
    )
    if isinstance(experiment_acqfs, str):
        raise TypeError(
            "experiment_acqfs must be a sequence of names, one experimentation iteration each "
            f"(such as ({experiment_acqfs!r},)), not the bare string {experiment_acqfs!r}."
        )
    unknown = set(experiment_acqfs) - set(EXPERIMENT_ACQFS)
    if unknown:
        raise ValueError(f"experiment_acqfs must be among {sorted(EXPERIMENT_ACQFS)}: {unknown}.")
    return sizes


@dataclass
class _Exploration:
    """The preference-exploration stage's answers and model."""

    Y: Tensor  # p x k outcome vectors shown to the decision maker
    comparisons: Tensor  # c x 2 answers indexing Y
    pref_model: Model
    utility: list[float] = field(default_factory=list)  # of the top-ranked Y, per PE iteration

    def add(self, Y_pair: Tensor, answer: Tensor, model_cls: type[Model]) -> None:
        """Record one answered pair and refit the preference model."""
        self.comparisons = torch.cat([self.comparisons, answer])
        self.Y = torch.cat([self.Y, Y_pair])
        self.pref_model = fit_preference_model(self.Y, self.comparisons, model_cls)


def _explore_preferences(
    outcome_model: Model,
    utility: Callable[[Tensor], Tensor],
    model_cls: type[Model],
    dim: int,
    n_initial_pairs: int,
    n_pe: int,
    maximize: Callable[..., tuple[Tensor, Tensor]],
) -> _Exploration:
    """Preference exploration: initial pairs at random designs, then ``n_pe`` EUBO pairs.

    The initial pairs compare the outcome model's predicted outcomes at random designs; each EUBO
    pair is chosen against one posterior draw of the outcome model.
    """
    X_pairs = torch.rand(2 * n_initial_pairs, dim, dtype=torch.float64)
    with torch.no_grad():
        Y = outcome_model.posterior(X_pairs).mean
    comparisons = torch.cat(
        [_answer(utility, Y[2 * i : 2 * i + 2], 2 * i) for i in range(n_initial_pairs)]
    )
    pe = _Exploration(Y, comparisons, fit_preference_model(Y, comparisons, model_cls))
    for _ in range(n_pe):
        draw = FixedSingleSampleModel(model=outcome_model)
        acqf = AnalyticExpectedUtilityOfBestOption(pref_model=pe.pref_model, outcome_model=draw)
        cand_X, _ = maximize(acqf, q=2)
        with torch.no_grad():
            cand_Y = draw(cand_X)
        pe.add(cand_Y, _answer(utility, cand_Y, pe.Y.shape[0]), model_cls)
        with torch.no_grad():
            ranked = pe.pref_model.posterior(pe.Y).mean.squeeze(-1)
        pe.utility.append(float(utility(pe.Y[ranked.argmax()])))
    return pe


@dataclass
class _Experiments:
    """The designs run, their outcomes, the last outcome model and the best utility so far."""

    X: Tensor
    Y: Tensor
    outcome_model: Model
    best_utility: list[float]


def _experiment(
    problem: Callable[[Tensor], Tensor],
    utility: Callable[[Tensor], Tensor],
    run: _Experiments,
    pref_model: Model,
    experiment_acqfs: tuple[str, ...],
    maximize: Callable[..., tuple[Tensor, Tensor]],
    *,
    mc_samples: int,
    pref_samples: int,
) -> _Experiments:
    """Experimentation: one design per entry of ``experiment_acqfs``, refitting in between.

    Each acquisition maximises the learned objective (``pref_samples`` preference samples per
    outcome sample, ``mc_samples`` outcome samples), with samplers drawn afresh each time.
    """
    for i, name in enumerate(experiment_acqfs):
        acqf = EXPERIMENT_ACQFS[name](
            model=run.outcome_model,
            objective=LearnedObjective(
                pref_model=pref_model, sample_shape=torch.Size([pref_samples])
            ),
            X_baseline=run.X,
            sampler=SobolQMCNormalSampler(sample_shape=torch.Size([mc_samples])),
            prune_baseline=True,
            cache_root=False,
        )
        cand_X, _ = maximize(acqf, q=1)
        run.X = torch.cat([run.X, cand_X])
        run.Y = torch.cat([run.Y, problem(cand_X)])
        run.best_utility.append(float(utility(run.Y).max()))
        if i + 1 < len(experiment_acqfs):
            run.outcome_model = fit_outcome_model(run.X, run.Y)
    return run


def _result(
    utility: Callable[[Tensor], Tensor],
    pe: _Exploration,
    run: _Experiments,
    seconds: dict[str, float],
) -> BOPEResult:
    """The run's record, with the recommendation: among the designs run, the one whose predicted
    outcome vector (outcome-model mean) the preference model ranks highest."""
    with torch.no_grad():
        predicted = run.outcome_model.posterior(run.X).mean
        score = pe.pref_model.posterior(predicted).mean.squeeze(-1)
    return BOPEResult(
        X=run.X,
        Y=run.Y,
        pe_Y=pe.Y,
        comparisons=pe.comparisons,
        pref_model=pe.pref_model,
        outcome_model=run.outcome_model,
        best_utility=run.best_utility,
        recommended_utility=float(utility(run.Y[score.argmax()])),
        pe_utility=pe.utility,
        seconds=seconds,
    )
