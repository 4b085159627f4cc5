r"""The suite's anchor: BoTorch's own PBO pipeline, written with BoTorch's classes.

One run of the qEUBO protocol with ``botorch.models.PairwiseGP``,
``PairwiseLaplaceMarginalLogLikelihood`` and ``fit_gpytorch_mll`` after every answer from the
end of the initial design on, and BoTorch's acquisition: ``AnalyticExpectedUtilityOfBestOption``
(``"eubo"``, a pair) or ``qExpectedUtilityOfBestOption`` (``"qeubo"``, ``q`` options, 128
scrambled-Sobol base samples), maximised by ``optimize_acqf`` with :math:`d q` restarts and
:math:`30 d q` raw samples on the unit cube. The recommendation after each answer is the compared
design with the highest posterior mean. BoTorch's champion-challenger (``"champion-challenger"``)
is its EUBO with the previous winner as one option
(``AnalyticExpectedUtilityOfBestOption(previous_winner=...)``, the BOPE paper's "EUBO with the
previous winner"): the query pairs the current recommendation with the one point ``x`` that
maximises :math:`E[\max(g(x), g(c))]` under the joint posterior, found with :math:`d`
restarts and :math:`30 d` raw samples. For a fixed champion this is the challenger of the
product's joint champion-challenger acquisition (:math:`E[\max(g(x), g(c))] = \mu(c) +
E[(g(x) - g(c))^+]`).

Common random numbers with the product's loop: the initial queries are drawn by
:func:`botorch_pref.loop.seeding.uniform` from the run's seed (the loop's own draws), the user is
a :class:`~botorch_pref.users.SimulatedUser` seeded with the run's seed and asked once per query
(the same noise stream), and the model, its fit and the optimiser draw from torch's and numpy's
generators seeded per query by :func:`~botorch_pref.loop.backends.seeded`, as the loop's
sequential back end does (``PairwiseGP`` perturbs the start of its mode search with numpy's
global generator), so a run replays exactly.

Each run is cached as JSON under ``benchmarks/out/anchor/`` (git-ignored), keyed by problem,
strategy, ``q``, seed, number of queries and the user's scale, so a rerun of the suite is free.
``python -m benchmarks.suite_anchor PROBLEM STRATEGY SEED...`` fills the cache.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import torch
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    qExpectedUtilityOfBestOption,
)
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler

from botorch_pref.loop.backends import seeded
from botorch_pref.loop.seeding import Stream, derived_seed, uniform
from botorch_pref.runtime import entry_threads
from botorch_pref.test_functions import get_utility, utility_name
from botorch_pref.users import SimulatedUser, calibrate_noise

CACHE = Path(__file__).resolve().parent / "out" / "anchor"
ANCHOR_STRATEGIES = ("eubo", "qeubo", "champion-challenger")
CPU = torch.device("cpu")


def cache_path(problem: str, strategy: str, q: int, seed: int, queries: int, scale: float) -> Path:
    """Where the run with these settings is cached."""
    return CACHE / f"{problem}-{strategy}-q{q}-n{queries}-s{scale:.6g}-seed{seed}.json"


def _acquisition(model: PairwiseGP, strategy: str, q: int, seed: int, champion: torch.Tensor):
    """``(acqf, q_opt, fixed)``: the acquisition, the points it places, and the options fixed
    in front of them (the champion for champion-challenger, else none)."""
    none = champion[:0]
    if strategy == "eubo":
        return AnalyticExpectedUtilityOfBestOption(pref_model=model), 2, none
    if strategy == "champion-challenger":
        acqf = AnalyticExpectedUtilityOfBestOption(pref_model=model, previous_winner=champion)
        return acqf, 1, champion
    sampler = SobolQMCNormalSampler(torch.Size([128]), seed=seed)
    return qExpectedUtilityOfBestOption(pref_model=model, sampler=sampler), q, none


def run_anchor(problem: str, strategy: str, seed: int, queries: int = 50, q: int = 2,
               scale: float | None = None) -> dict:  # fmt: skip
    """One run of BoTorch's pipeline (cached); its regret after every answer and its timing.

    Returns:
        ``{"regret": [...], "regret_compared": [...], "seconds": [...], "n_initial": ...,
        "recommended": [...], "designs": [...]}``: the regret after each answer from the last
        initial one on (``n_initial - 1`` entries of ``None`` before it), the same for the best
        design compared by then, the wall seconds of each acquisition query (acquisition,
        answer, fit, recommendation), the recommended design (unit cube) after each answer from
        the last initial one on, and every design asked, ``q`` per query in the order asked, so
        that where a run ends can be studied without rerunning it. Runs cached before a field
        was recorded lack it.
    """
    if strategy not in ANCHOR_STRATEGIES:
        raise ValueError(f"BoTorch's pipeline has {ANCHOR_STRATEGIES}, not {strategy!r}.")
    utility = get_utility(problem)
    if scale is None:
        scale = calibrate_noise(utility, 0.2, noise="gumbel", seed=0)
    path = cache_path(problem, strategy, q, seed, queries, scale)
    if path.exists():
        return json.loads(path.read_text())
    d, n0 = utility.dim, 4 * utility.dim
    user = SimulatedUser(utility, noise="gumbel", scale=scale, seed=seed)
    unit = torch.stack([torch.zeros(d), torch.ones(d)]).double()
    X = torch.empty(0, d, dtype=torch.float64)
    comps = torch.empty(0, 2, dtype=torch.long)
    regret: list[float | None] = [None] * (n0 - 1)
    compared: list[float | None] = [None] * (n0 - 1)
    seconds: list[float] = []
    recommended: list[list[float]] = []
    model = champion = None
    best_asked = math.inf
    for k in range(n0 + queries):
        t0 = time.perf_counter()
        if k < n0:
            query = uniform(q, d, seed, k, Stream.RANDOM)
        else:
            acqf, q_opt, fixed = _acquisition(
                model, strategy, q, derived_seed(seed, k, Stream.ACQF) % 2**31, champion
            )
            with seeded(seed, k, Stream.ACQF, CPU), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                query, _ = optimize_acqf(
                    acqf, unit, q=q_opt, num_restarts=d * q_opt, raw_samples=30 * d * q_opt
                )
            query = torch.cat([fixed, query.detach()])
        winner = int(user.choose(query))
        idx = torch.arange(len(X), len(X) + q)
        comps = torch.cat(
            [comps, torch.stack([idx[winner].expand(q - 1), idx[idx != idx[winner]]], -1)]
        )
        X = torch.cat([X, query])
        best_asked = min(best_asked, float(utility.regret(query).min()))
        if k >= n0 - 1:
            with seeded(seed, k + 1, Stream.FIT, CPU), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = PairwiseGP(X, comps)
                mll = PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model)
                fit_gpytorch_mll(mll)
                with torch.no_grad():
                    mean = model.posterior(X).mean.reshape(-1)
            champion = X[int(mean.argmax())].unsqueeze(0)
            recommended.append(champion[0].tolist())
            regret.append(float(utility.regret(champion[0])))
            compared.append(best_asked)
        if k >= n0:
            seconds.append(time.perf_counter() - t0)
    result = {"problem": problem, "strategy": strategy, "q": q, "seed": seed, "scale": scale,
              "n_initial": n0, "regret": regret, "regret_compared": compared,
              "seconds": seconds, "recommended": recommended,
              "designs": X.tolist()}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return result


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line: ``PROBLEM STRATEGY SEED...``, each checked before any run starts."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.suite_anchor",
        description="Runs BoTorch's PBO pipeline on the suite's protocol and caches each run "
        f"under {CACHE}.",
    )
    parser.add_argument("problem", type=utility_name, help="a utility's name, e.g. hartmann6")
    parser.add_argument("strategy", choices=ANCHOR_STRATEGIES)
    parser.add_argument("seeds", type=_seed, nargs="+", metavar="SEED")
    return parser.parse_args(argv)


def _seed(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"a seed is a non-negative integer, not {text!r}")
    return int(text)


def main(argv: list[str]) -> int:
    """``PROBLEM STRATEGY SEED...``: fill the cache, one line per run."""
    args = parse_args(argv)
    # One intra-op thread unless the environment says otherwise: two of these processes
    # filling the cache side by side with torch's default threads ran several times slower.
    with entry_threads():
        for s in args.seeds:
            t0 = time.perf_counter()
            r = run_anchor(args.problem, args.strategy, s)
            print(f"{args.problem} {args.strategy} seed {s}: regret {r['regret'][-1]:.3g}, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
