r"""Many simulated users at once: PBO replications in lockstep, as one batched computation.

:func:`run_replications` runs ``R`` replications of the PBO protocol (DESIGN.md section 4) of one
strategy on one problem together. Replication ``i`` is the run that
:class:`~botorch_pref.loop.PreferenceOptimizer` with ``seed = seed + i`` and a
:class:`~botorch_pref.users.SimulatedUser` with ``seed = seed + i`` would make (the protocol of
``benchmarks/pbo.py``); all replications advance one query at a time:

* one batched :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` (``batch_shape = (R,)``)
  holds every replication's data; replications that reused a design hold fewer designs and are
  padded (see the model's ``comparisons`` argument), so nothing in the numerical path loops over
  replications;
* hyperparameters are independent per replication and refitted on the loop's schedule by one
  batched L-BFGS-B run (:func:`botorch_pref.optim.fit_evidence_batched`);
* the acquisition functions of all replications are maximised by one batched multi-start
  optimiser (:func:`botorch_pref.optim.optimize_acqf_batched`);
* each replication's simulated user answers from its own random stream, so the answers are the
  common random numbers of the sequential benchmark.

What is exactly the sequential run: the initial (and, for ``strategy="random"``, every) query,
the users' answers to the same queries, the data, and the model's mode for the same
hyperparameters. What is equal in distribution only: the acquisition optimiser's raw samples and
restarts (seeded per replication and query, but drawn differently from ``optimize_acqf``), and the
hyperparameter fit (per-member L-BFGS-B in one batched run instead of ``fit_gpytorch_mll``, whose
retries draw random starts): so the acquisition queries of the two are statistically alike but
not bitwise equal.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import torch
from linear_operator.utils.errors import NotPSDError
from torch import Tensor

from botorch_pref.acquisition import ChampionChallenger, make_eubo, make_qeubo
from botorch_pref.acquisition.settings import lean_kernels
from botorch_pref.data.preferences import PreferenceData
from botorch_pref.likelihoods import Choice, ObservationKind
from botorch_pref.loop import acquisition_effort
from botorch_pref.loop.seeding import Stream, derived_seed
from botorch_pref.models.pairwise import PairwiseLaplaceGP, make_covar_module
from botorch_pref.optim import fit_evidence_batched, optimize_acqf_batched
from botorch_pref.test_functions import Utility, get_utility
from botorch_pref.users import SimulatedUser, calibrate_noise

__all__ = ["BATCHED_STRATEGIES", "ReplicationResults", "run_replications"]

BATCHED_STRATEGIES = ("eubo", "qeubo", "champion-challenger", "random")
REGRET_FLOOR = 1e-12


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
        best_x: ``R x T x d`` recommended design after each answer (the compared design with
            the highest posterior mean).
        queries: ``R x T x q x d`` queries, in the unit cube.
        winners: ``R x T`` index of the preferred option of each query.
        seconds: ``T`` wall seconds per step (all replications together: query, answers,
            model update, recommendation).
        device: Device the model ran on.
    """

    problem: str
    strategy: str
    q: int
    answers: str
    n_initial: int
    seeds: list[int]
    regret: Tensor
    best_x: Tensor
    queries: Tensor
    winners: Tensor
    seconds: Tensor
    device: str = "cpu"
    fits: int = field(default=0)

    @property
    def n_replications(self) -> int:
        """Number of replications ``R``."""
        return self.regret.shape[0]

    def log_regret(self) -> Tensor:
        """``R x T`` log10 regret (a zero regret is reported as ``log10(1e-12)``)."""
        return self.regret.clamp_min(REGRET_FLOOR).log10()

    def log_regret_after(self, k: int) -> Tensor:
        """``R`` log10 regrets after ``k`` acquisition queries (``k = 0``: after the initial)."""
        i = self.n_initial + k - 1
        if not 0 <= i < self.regret.shape[1]:
            raise ValueError(f"no answer {i + 1}: the runs have {self.regret.shape[1]} answers.")
        return self.log_regret()[:, i]


def _random_queries(seeds: list[int], k: int, stream: int, q: int, d: int, dtype) -> Tensor:
    """``R x q x d`` uniform designs from each replication's derived seed for query ``k``."""
    return torch.stack(
        [
            torch.rand(
                q,
                d,
                generator=torch.Generator().manual_seed(derived_seed(s, k, stream)),
                dtype=dtype,
            )
            for s in seeds
        ]
    )


def _repair(X: Tensor, seeds: list[int], k: int) -> Tensor:
    """Replace repeated options of a query by random designs (as the sequential loop does)."""
    same = (X.unsqueeze(-3) == X.unsqueeze(-2)).all(-1).triu(1)  # R x q x q
    dup = same.any(-2)
    if not bool(dup.any()):
        return X
    X = X.clone()
    for r in dup.any(-1).nonzero().flatten().tolist():
        count = int(dup[r].sum())
        g = torch.Generator().manual_seed(derived_seed(seeds[r], k, Stream.REPAIR))
        X[r, dup[r]] = torch.rand(count, X.shape[-1], generator=g, dtype=X.dtype).to(X.device)
    return X


class _Data:
    """Per-replication designs (deduplicated, exactly as the sequential loop) and answers.

    Each answer is kept both as pairs (the winner beating every other option) and as an option
    row, winner first (a choice among ``q``).
    """

    def __init__(self, R: int, d: int, dtype: torch.dtype, device: torch.device) -> None:
        self.X = [torch.empty(0, d, dtype=dtype, device=device) for _ in range(R)]
        self.C: list[list[tuple[int, int]]] = [[] for _ in range(R)]
        self.choices: list[list[list[int]]] = [[] for _ in range(R)]

    def add(self, r: int, query: Tensor, winner: int) -> None:
        X = self.X[r]
        index = []
        new = []
        for x in query:
            hit = (X == x).all(-1).nonzero()
            if hit.numel():
                index.append(int(hit[0]))
            else:
                index.append(X.shape[0] + len(new))
                new.append(x)
        if new:
            self.X[r] = torch.cat([X, torch.stack(new)])
        self.C[r].extend((index[winner], index[j]) for j in range(len(index)) if j != winner)
        self.choices[r].append([index[winner]] + [i for j, i in enumerate(index) if j != winner])

    def padded(self) -> tuple[Tensor, Tensor, Tensor]:
        """``R x n x d`` designs (padding repeats the first), ``R x m x 2`` answers, mask."""
        n = max(X.shape[0] for X in self.X)
        device = self.X[0].device
        Xs = [torch.cat([X, X[:1].expand(n - X.shape[0], -1)]) for X in self.X]
        m = max(len(c) for c in self.C)
        Cs = [
            torch.tensor(c + [(-1, -1)] * (m - len(c)), dtype=torch.long, device=device)
            for c in self.C
        ]
        real = torch.stack([torch.arange(n, device=device) < X.shape[0] for X in self.X])
        return torch.stack(Xs), torch.stack(Cs), real

    def choice_data(self) -> PreferenceData:
        """The answers as choices (``R x m x q``, winner first; every replication has ``m``)."""
        options = torch.tensor(self.choices, dtype=torch.long, device=self.X[0].device)
        kind = torch.full(options.shape[:-1], int(ObservationKind.CHOICE), device=options.device)
        return PreferenceData(options, kind)


def _refit(model: PairwiseLaplaceGP, answers: int) -> None:
    """Refit every member; if the batched fit fails numerically, keep the previous values.

    As :class:`~botorch_pref.loop.PreferenceOptimizer` does, a failed fit warns instead of
    ending the run: every member keeps its previous hyperparameters.
    """
    state = {name: v.clone() for name, v in model.state_dict().items()}
    try:
        fit_evidence_batched(model)
    except (NotPSDError, torch.linalg.LinAlgError) as err:
        model.load_state_dict(state)
        model.eval()
        warnings.warn(
            f"Hyperparameter fit failed after {answers} answers ({err}); keeping the previous "
            "hyperparameters.",
            RuntimeWarning,
            stacklevel=3,
        )


def run_replications(
    problem: str | Utility,
    strategy: str = "eubo",
    n_replications: int = 8,
    n_queries: int = 50,
    q: int = 2,
    *,
    answers: str = "auto",
    noise: str = "gumbel",
    scale: float | None = None,
    error_rate: float = 0.2,
    n_initial: int | None = None,
    seed: int = 0,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float64,
    refit_every: int = 5,
    refit_all_until: int = 30,
    num_restarts: int | None = None,
    raw_samples: int | None = None,
    mc_samples: int = 256,
) -> ReplicationResults:
    r"""Run ``n_replications`` PBO replications of one strategy together, as one batched model.

    Args:
        problem: A utility to maximise on the unit cube, or its name for
            :func:`~botorch_pref.test_functions.get_utility`.
        strategy: ``"eubo"`` (BoTorch's analytic EUBO on pairs), ``"qeubo"`` (Monte-Carlo
            qEUBO on ``q`` options), ``"champion-challenger"`` (each replication's champion
            against its challenger, :class:`~botorch_pref.acquisition.ChampionChallenger`) or
            ``"random"``.
        n_replications: Number of replications ``R``.
        n_queries: Acquisition queries after the initial ones.
        q: Options per query (``"eubo"`` needs ``q = 2``).
        answers: How a ``q > 2`` answer enters the model: ``"choice"`` (a choice among ``q``
            with the multinomial-logit :class:`~botorch_pref.likelihoods.Choice` likelihood) or
            ``"pairs"`` (the winner beating each other option, as independent probit pairs);
            ``"auto"`` is ``"choice"`` for ``q > 2`` and pairs for ``q = 2``.
        noise: The simulated users' noise, ``"gumbel"`` or ``"probit"``.
        scale: The noise scale; default: calibrated to ``error_rate`` wrong answers on top-1%
            pairs (:func:`~botorch_pref.users.calibrate_noise`, seeded).
        error_rate: Target error rate when ``scale`` is not given.
        n_initial: Random initial queries (default ``4 d``, the protocol).
        seed: Replication ``i`` uses ``seed + i`` for its optimiser and its user.
        device: Device of the model and the acquisition (default CPU).
        dtype: Dtype of the designs and the model.
        refit_every: After ``refit_all_until`` answers, refit the hyperparameters every this
            many answers (as :class:`~botorch_pref.loop.PreferenceOptimizer`).
        refit_all_until: Refit after every answer up to this many answers.
        num_restarts: Restarts per replication (default as the sequential loop: ``d q'`` in
            [4, 10], ``q'`` the candidate size).
        raw_samples: Raw samples per replication (default ``30 d q'`` in [128, 512]).
        mc_samples: Monte-Carlo samples of qEUBO.

    Returns:
        The :class:`ReplicationResults`.
    """
    utility = get_utility(problem) if isinstance(problem, str) else problem
    if strategy not in BATCHED_STRATEGIES:
        raise ValueError(f"strategy must be one of {BATCHED_STRATEGIES}, got {strategy!r}.")
    if strategy in ("eubo", "champion-challenger") and q != 2:
        raise ValueError(f"strategy {strategy!r} compares pairs (q = 2), got q = {q}.")
    R, T_acq = int(n_replications), int(n_queries)
    if R < 1 or T_acq < 0 or q < 2:
        raise ValueError(
            f"need n_replications >= 1, n_queries >= 0 and q >= 2; got {R}, {T_acq}, {q}."
        )
    if answers not in ("auto", "choice", "pairs"):
        raise ValueError(f"answers must be 'auto', 'choice' or 'pairs', got {answers!r}.")
    use_choice = q > 2 and answers != "pairs"
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}.")
    d = utility.dim
    n_init = 4 * d if n_initial is None else int(n_initial)
    device = torch.device(device) if device is not None else torch.device("cpu")
    if scale is None:
        scale = calibrate_noise(utility, error_rate, noise=noise, seed=0)
    seeds = [int(seed) + i for i in range(R)]
    users = [SimulatedUser(utility, noise=noise, scale=scale, seed=s) for s in seeds]
    q_opt = {"eubo": 2, "champion-challenger": 1}.get(strategy, q)
    restarts, raw = acquisition_effort(d, q_opt)
    restarts = num_restarts or restarts
    raw = raw_samples or raw

    T = n_init + T_acq
    data = _Data(R, d, dtype, device)
    model: PairwiseLaplaceGP | None = None
    regret = torch.empty(R, T, dtype=torch.float64)
    best_x = torch.empty(R, T, d, dtype=dtype)
    queries = torch.empty(R, T, q, d, dtype=dtype)
    winners = torch.empty(R, T, dtype=torch.long)
    seconds = torch.empty(T, dtype=torch.float64)
    fits = 0
    for k in range(T):
        t0 = time.perf_counter()
        if k < n_init or strategy == "random" or model is None:
            X = _random_queries(seeds, k, Stream.RANDOM, q, d, dtype).to(device)
        else:
            champions = None
            if strategy == "eubo":
                acqf = make_eubo(model)
            elif strategy == "champion-challenger":
                # each replication's champion: its compared design with the highest mean
                designs, _, known = data.padded()
                with torch.no_grad():
                    best = model.utility.masked_fill(~known, -math.inf).argmax(-1)
                champions = designs[torch.arange(R, device=device), best]
                acqf = ChampionChallenger(model, champions, log=True)
            else:
                acqf = make_qeubo(
                    model, mc_samples, seed=derived_seed(seed, k, Stream.ACQF) % 2**31
                )
            with lean_kernels():  # as the sequential loop's optimize_acqf
                X, _ = optimize_acqf_batched(
                    acqf,
                    R,
                    q_opt,
                    d,
                    num_restarts=restarts,
                    raw_samples=raw,
                    seeds=[derived_seed(s, k, Stream.ACQF) for s in seeds],
                    dtype=dtype,
                    device=device,
                )
            X = X.detach()
            if champions is not None:
                X = torch.cat([champions.unsqueeze(-2), X], dim=-2)
        X = _repair(X, seeds, k)
        X_cpu = X.cpu()
        for r in range(R):
            w = int(users[r].choose(X_cpu[r]))
            winners[r, k] = w
            data.add(r, X[r], w)
        queries[:, k] = X_cpu
        Xp, C, real = data.padded()
        observations = data.choice_data() if use_choice else C
        if model is None:
            kernel = make_covar_module(d, batch_shape=torch.Size([R]), dtype=dtype)
            model = PairwiseLaplaceGP(
                Xp,
                observations,
                likelihood=Choice() if use_choice else None,
                covar_module=kernel.to(device),
            )
        else:
            model.set_train_data(Xp, observations, update_model=True)
        answers = k + 1
        if answers <= refit_all_until or answers % refit_every == 0:
            _refit(model, answers)
            fits += 1
        with torch.no_grad():
            mean = model.utility.masked_fill(~real, -math.inf)
            idx = mean.argmax(-1)
            rec = Xp[torch.arange(R, device=device), idx]
        best_x[:, k] = rec.cpu()
        regret[:, k] = utility.regret(rec.cpu().to(torch.float64))
        seconds[k] = time.perf_counter() - t0
    return ReplicationResults(
        problem=getattr(utility, "name", type(utility).__name__),
        strategy=strategy,
        q=q,
        answers="choice" if use_choice else "pairs",
        n_initial=n_init,
        seeds=seeds,
        regret=regret,
        best_x=best_x,
        queries=queries,
        winners=winners,
        seconds=seconds,
        device=str(device),
        fits=fits,
    )
