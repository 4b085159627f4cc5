r"""Many simulated users at once: PBO replications in lockstep on the loop's own core.

:func:`run_replications` runs ``R`` replications of the PBO protocol of one strategy on one
problem together. A simulated user with a utility :math:`f` on the unit cube answers each query
with noise (Gumbel: a logit choice; probit: Gaussian noise on each option's utility), its scale
calibrated so that two designs from the top 1% of :math:`10^6` random designs are answered
wrongly ``error_rate`` of the time. The initial queries are random, then the strategy's
acquisition takes over; after every answer the recommendation is the compared design with the
highest posterior mean, scored by its simple regret :math:`f^\star - f(x^\star)`.

Replication ``i`` is member ``i`` of one :class:`~botorch_pref.loop.state.LoopState` -- the core
that :class:`~botorch_pref.loop.PreferenceOptimizer` runs with one member -- seeded
``seed + i``, with a :class:`~botorch_pref.users.SimulatedUser` seeded ``seed + i`` (common
random numbers across strategies: the same initial queries and the same noise stream). So the
settings and their defaults are the optimiser's (:class:`~botorch_pref.loop.config.LoopConfig`),
and:

* with ``backend="sequential"`` each replication *is* the run of ``PreferenceOptimizer(seed =
  seed + i)`` answered by that user, query for query;
* with ``backend="batched"`` (the default) all replications share one batched model, fitted and
  optimised by batched L-BFGS-B (:mod:`~botorch_pref.loop.backends`): the initial (and, for
  ``strategy="random"``, every) query and its answer are exactly the sequential run's, the
  acquisition queries agree with it in distribution.

Graded answers and ratings (``answers="graded", levels=k`` and/or ``ratings=k``, the
optimiser's settings) are answered by :class:`~botorch_pref.graded_users.GradedUser` s: grade
thresholds at quantiles of the utility gaps of pairs of top-1% designs, the pairs the answer
noise is calibrated on (:func:`~botorch_pref.graded_users.calibrate_grades` with
``among="top"``; gaps of random pairs are orders of magnitude wider than those of the designs
an optimiser compares late, on Branin 22 against 0.1, and would make nearly every late answer
"about the same"), rating cut points at quantiles of the utility of random designs
(:func:`~botorch_pref.graded_users.calibrate_ratings`). The direction of a graded answer is the
binary user's own draw (the same noise stream, so a graded run and a binary run of one seed see
the same answer noise for direction), its strength the number of thresholds below the perceived
difference (with extra strength noise for ``grade_noise > 1``), and each option's rating the
number of cut points below its perceived utility. They need
``backend="sequential"``: the graded thresholds and rating cut points of the likelihood are
shared parameters, not one per member, so the batched fitter cannot hold them (a
``ValueError`` says so).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from botorch_pref.checks import nonnegative_real
from botorch_pref.graded_users import GradedUser, calibrate_grades, calibrate_ratings
from botorch_pref.loop.answers import Answer, AnswerFormat, graded_answer
from botorch_pref.loop.config import LoopConfig, nonnegative_int, positive_int
from botorch_pref.loop.policy import STRATEGIES, QueryPolicy, configure
from botorch_pref.loop.state import LoopState
from botorch_pref.runtime import problem_threads
from botorch_pref.test_functions import Utility, get_utility
from botorch_pref.users import SimulatedUser, calibrate_noise

__all__ = [
    "BATCHED_STRATEGIES",
    "REGRET_FLOOR",
    "ReplicationResults",
    "log10_regret",
    "run_replications",
]

#: The strategies :func:`run_replications` runs (all of the loop's).
BATCHED_STRATEGIES = STRATEGIES
#: Regrets are clipped below at this value before ``log10`` (a run that found the optimum
#: exactly would otherwise give minus infinity).
REGRET_FLOOR = 1e-12


def log10_regret(regret: Tensor | float | Sequence[float]) -> Tensor:
    """``log10`` of regrets floored at :data:`REGRET_FLOOR` (a zero regret reads -12).

    The one floored logarithm of the package's regret figures: the replications' curves, the
    benchmarks' tables and plots.

    Args:
        regret: Regrets: a tensor (any shape, dtype and device kept), a number or a (nested)
            sequence of numbers (read as float64). Values below the floor (a design at the
            optimum, or one whose rounding gives a tiny negative regret) read -12; NaN stays
            NaN.

    Returns:
        A tensor of ``regret``'s shape.
    """
    if not torch.is_tensor(regret):
        regret = torch.as_tensor(regret, dtype=torch.float64)
    return regret.clamp_min(REGRET_FLOOR).log10()


@dataclass
class ReplicationResults:
    """Results of :func:`run_replications`.

    Attributes:
        problem: The utility's name.
        strategy: The strategy.
        q: Options per query.
        answers: ``"choice"`` or ``"pairs"`` (how ``q > 2`` answers were modelled).
        n_initial: Random queries before the acquisition took over.
        seeds: The seed of each replication (its optimiser's and its user's).
        regret: ``R x T`` simple regret of the recommendation after each of the ``T`` answers.
        regret_compared: ``R x T`` simple regret of the best design compared so far after each
            answer: what a recommender that knew the utility would pick among the same
            designs. It is at most ``regret``; the gap between the two is what the model's
            ranking of the compared designs loses, the rest is what the questions found.
        best_x: ``R x T x d`` recommended design after each answer (the compared design with
            the highest posterior mean).
        queries: ``R x T x q x d`` queries, in the unit cube.
        winners: ``R x T`` index of the preferred option of each query (``-1`` for "no
            preference", see ``tie_band`` of :func:`run_replications`).
        seconds: ``T`` wall seconds per step (all replications together: query, answers,
            model update, recommendation).
        device: Device the model ran on.
        fits: The number of steps with a hyperparameter fit.
        backend: ``"batched"`` or ``"sequential"``.
        config: The settings every replication ran with (the seed is replication 0's).
        policy: The query policy every replication ran with.
        anywhere_after: The acquisition-query counts after which the posterior-mean maximiser
            over the box was also recommended (``best(among="anywhere")``).
        regret_anywhere: ``R x len(anywhere_after)`` simple regret of those recommendations.
    """

    problem: str
    strategy: str
    q: int
    answers: str
    n_initial: int
    seeds: list[int]
    regret: Tensor
    regret_compared: Tensor
    best_x: Tensor
    queries: Tensor
    winners: Tensor
    seconds: Tensor
    device: str = "cpu"
    fits: int = field(default=0)
    backend: str = "batched"
    config: LoopConfig | None = None
    policy: QueryPolicy | None = None
    anywhere_after: tuple[int, ...] = ()
    regret_anywhere: Tensor | None = None

    @property
    def n_replications(self) -> int:
        """Number of replications ``R``."""
        return self.regret.shape[0]

    def log_regret(self) -> Tensor:
        """``R x T`` log10 regret (a zero regret is reported as ``log10(1e-12)``)."""
        return log10_regret(self.regret)

    def log_regret_compared(self) -> Tensor:
        """``R x T`` log10 regret of the best design compared so far (see ``regret_compared``)."""
        return log10_regret(self.regret_compared)

    def log_regret_after(self, k: int) -> Tensor:
        """``R`` log10 regrets after ``k`` acquisition queries (``k = 0``: after the initial).

        Raises:
            ValueError: For a ``k`` that is not a count (``-1`` is not the last: use
                :meth:`log_regret`), or one past the runs' answers.
        """
        i = self.n_initial + nonnegative_int(k, "k") - 1
        if not 0 <= i < self.regret.shape[1]:
            raise ValueError(f"no answer {i + 1}: the runs have {self.regret.shape[1]} answers.")
        return self.log_regret()[:, i]

    def log_regret_anywhere(self) -> Tensor:
        """``R x len(anywhere_after)`` log10 regret of the posterior-mean maximisers."""
        if self.regret_anywhere is None:
            raise ValueError("no recommendations anywhere: pass anywhere_after to the run.")
        return log10_regret(self.regret_anywhere)


@problem_threads()
def run_replications(
    problem: str | Utility,
    strategy: str | None = None,
    n_replications: int = 8,
    n_queries: int = 50,
    q: int = 2,
    *,
    noise: str = "gumbel",
    scale: float | None = None,
    error_rate: float = 0.2,
    seed: int = 0,
    backend: str = "batched",
    anywhere_after: Sequence[int] = (),
    tie_band: float = 0.0,
    grade_noise: float = 1.0,
    policy: QueryPolicy | None = None,
    **settings,
) -> ReplicationResults:
    r"""Run ``n_replications`` PBO replications of one strategy together.

    Args:
        problem: A utility to maximise on the unit cube, or its name for
            :func:`~botorch_pref.test_functions.get_utility`.
        strategy: ``"eubo"`` (default), ``"qeubo"``, ``"champion-challenger"`` or ``"random"``:
            the query policy :func:`~botorch_pref.loop.policy.strategy_policy` builds; not with
            ``policy``.
        n_replications: Number of replications ``R``.
        n_queries: Acquisition queries after the initial ones.
        q: Options per query (``"eubo"`` and ``"champion-challenger"`` need ``q = 2``).
        noise: The simulated users' noise, ``"gumbel"`` or ``"probit"``.
        scale: The noise scale; default: calibrated to ``error_rate`` wrong answers on top-1%
            pairs (:func:`~botorch_pref.users.calibrate_noise`, seeded).
        error_rate: Target error rate when ``scale`` is not given.
        seed: Replication ``i`` uses ``seed + i`` for its optimiser and its user.
        backend: ``"batched"`` (one batched model) or ``"sequential"`` (one model per
            replication, exactly the optimiser's run).
        anywhere_after: Acquisition-query counts (each in ``[0, n_queries]``) after which each
            replication's posterior-mean maximiser over the box is recommended too
            (``best(among="anywhere")``, the qEUBO paper's recommendation) and scored in
            ``regret_anywhere``; the loop's own recommendation stays the compared design.
        tie_band: The users answer "no preference" to a pair whose perceived utilities differ
            by less than ``tie_band`` times their noise scale
            (:meth:`~botorch_pref.users.SimulatedUser.answer_pair`; needs ``ties=True``);
            0 (default): never. Graded users answer "about the same" on the middle level of
            their scale instead.
        grade_noise: For graded answers, the ratio (``>= 1``) of the noise on a grade's
            strength to the noise on its direction (1: both read from one perceived
            difference; 2: a person whose grades are noisier than their direction).
        policy: A :class:`~botorch_pref.loop.policy.QueryPolicy` of one's own.
        **settings: Other settings of the run (:data:`~botorch_pref.loop.policy.SETTINGS`:
            ``model``, ``answers``, ``levels``, ``ratings``, ``ties``, ``refit_every``,
            ``num_restarts``, ``device``, ``dtype``, ... and without ``policy``
            ``n_initial``, ``local_every``, ...), with the same defaults as the optimiser's.
            The PBO protocol's ``n_initial`` is :math:`4 d`.

    Returns:
        The :class:`ReplicationResults`.

    Raises:
        ValueError: For bad settings, graded answers or ratings with ``backend="batched"``,
            or ``tie_band`` with graded answers.
    """
    utility = get_utility(problem) if isinstance(problem, str) else problem
    R = positive_int(n_replications, "n_replications")
    T_acq = nonnegative_int(n_queries, "n_queries")
    seed = nonnegative_int(seed, "seed")
    config, policy = configure(utility.dim, strategy, q, policy, {**settings, "seed": seed})
    after = _anywhere_after(anywhere_after, T_acq, policy.n_initial)
    band = nonnegative_real(tie_band, "tie_band")
    _check_answers(config, band, backend)
    form = config.answers
    seeds = [seed + i for i in range(R)]
    bounds = torch.zeros(2, utility.dim, **config.tkwargs)
    bounds[1] = 1.0
    state = LoopState(config, bounds, seeds, backend, policy)
    if scale is None:
        scale = calibrate_noise(utility, error_rate, noise=noise, seed=0)
    users = _users(utility, noise, scale, seeds, form, grade_noise)
    trace = _simulate(state, users, utility, policy.n_initial + T_acq, after, band * scale)
    return ReplicationResults(
        problem=getattr(utility, "name", type(utility).__name__),
        strategy=policy.strategy,
        q=q,
        answers=config.answers.mode,
        n_initial=policy.n_initial,
        seeds=seeds,
        **trace,
        device=str(config.device),
        fits=state.n_refits,
        backend=backend,
        config=state.config,
        policy=policy,
        anywhere_after=after,
    )


def _anywhere_after(anywhere_after: Sequence[int], T_acq: int, n_initial: int) -> tuple[int, ...]:
    """The checked ``anywhere_after`` counts of :func:`run_replications`."""
    after = tuple(nonnegative_int(k, "anywhere_after") for k in anywhere_after)
    if any(not 0 <= k <= T_acq for k in after) or len(set(after)) != len(after):
        raise ValueError(
            f"anywhere_after must hold distinct counts in [0, {T_acq}], got {list(anywhere_after)}."
        )
    if n_initial == 0 and 0 in after:
        raise ValueError(
            "anywhere_after counts acquisition queries after the initial ones; with n_initial=0 "
            "the count 0 comes before any answer, so there is nothing to recommend from."
        )
    return after


def _check_answers(config: LoopConfig, band: float, backend: str) -> None:
    """Refuse simulated answers the run cannot give (:func:`run_replications`'s ``Raises``)."""
    form = config.answers
    if band > 0 and (not config.ties or form.graded):
        raise ValueError(
            "tie_band > 0 gives 'no preference' answers to binary comparisons: they need "
            "ties=True (graded users answer 'about the same' on their scale's middle level)."
        )
    if not form.binary and backend == "batched":
        raise ValueError(
            "graded answers and ratings run with backend='sequential': the batched back end "
            "fits one set of hyperparameters per member and the likelihood's thresholds are "
            "shared."
        )


def _users(
    utility: Utility,
    noise: str,
    scale: float,
    seeds: list[int],
    form: AnswerFormat,
    grade_noise: float,
) -> list[SimulatedUser]:
    """One user per replication, seeded ``seeds[i]``, answering in the run's format."""
    thresholds = cuts = None
    if form.graded:
        thresholds = calibrate_grades(utility, form.levels, seed=0, among="top")
    if form.ratings is not None:
        cuts = calibrate_ratings(utility, form.ratings, seed=0)
    if form.binary:
        return [SimulatedUser(utility, noise=noise, scale=scale, seed=s) for s in seeds]
    grading = {
        "grade_thresholds": thresholds,
        "rating_cut_points": cuts,
        "grade_noise": grade_noise,
    }
    return [GradedUser(utility, noise=noise, scale=scale, seed=s, **grading) for s in seeds]


def _answer(
    user: SimulatedUser | GradedUser, X: Tensor, form: AnswerFormat, tie_band: float
) -> Answer:
    """A simulated user's answer to query ``X`` in the run's answer format."""
    strength = None
    if form.graded:  # the level of option 0 against option 1
        winner, strength = graded_answer(int(user.grade(X)), form.levels)
        winner = -1 if winner is None else winner
    elif tie_band > 0:
        winner = int(user.answer_pair(X, tie_band))
    else:
        winner = int(user.choose(X))
    ratings = None if form.ratings is None else tuple(user.rate(X).tolist())
    if winner < 0:
        return Answer("tie", ratings=ratings)
    return Answer("winner", winner, strength=strength, ratings=ratings)


def _simulate(
    state: LoopState,
    users: list[SimulatedUser],
    utility: Utility,
    T: int,
    anywhere_after: tuple[int, ...] = (),
    tie_band: float = 0.0,
) -> dict[str, Tensor]:
    """Advance every member ``T`` queries, each answered by its user; what was seen.

    After the acquisition-query counts in ``anywhere_after`` the posterior-mean maximisers
    over the box are scored too. With a ``tie_band`` (utility units) the users answer pairs
    with "no preference" inside it.
    """
    R, d, cfg = state.n_members, utility.dim, state.config
    regret = torch.empty(R, T, dtype=torch.float64)
    asked = torch.empty(R, T, dtype=torch.float64)  # the best option of each query
    best_x = torch.empty(R, T, d, dtype=cfg.dtype)
    queries = torch.empty(R, T, cfg.q, d, dtype=cfg.dtype)
    winners = torch.empty(R, T, dtype=torch.long)
    seconds = torch.empty(T, dtype=torch.float64)
    anywhere = torch.empty(R, len(anywhere_after), dtype=torch.float64)
    for k in range(T):
        t0 = time.perf_counter()
        X = state.propose()
        queries[:, k] = X.cpu()
        answers = [_answer(users[r], queries[r, k], cfg.answers, tie_band) for r in range(R)]
        winners[:, k] = torch.tensor([-1 if a.winner is None else a.winner for a in answers])
        state.record_answers(list(X), answers)
        best_x[:, k] = state.recommend().cpu()
        regret[:, k] = utility.regret(best_x[:, k].to(torch.float64))
        options = queries[:, k].reshape(R * cfg.q, d).to(torch.float64)
        asked[:, k] = utility.regret(options).reshape(R, cfg.q).amin(-1)
        seconds[k] = time.perf_counter() - t0
        if k + 1 - state.policy.n_initial in anywhere_after:
            x = state.recommend_anywhere().cpu().to(torch.float64)
            anywhere[:, anywhere_after.index(k + 1 - state.policy.n_initial)] = utility.regret(x)
    return {
        "regret_anywhere": anywhere if anywhere_after else None,
        "regret": regret,
        "regret_compared": asked.cummin(dim=1).values,
        "best_x": best_x,
        "queries": queries,
        "winners": winners,
        "seconds": seconds,
    }
