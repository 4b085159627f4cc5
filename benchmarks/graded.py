"""The cost of graded answers against binary answers about the same pairs, side by side.

For random designs and pairs (a seeded synthetic utility), the same pairs are answered once as
binary comparisons and once on a 5-level graded scale; the script times a cold mode search
(``find_mode``), an evidence evaluation with its gradient, and a whole ``fit_gpytorch_mll``, for
both, alternating them so machine load hits both alike, and prints medians and the ratio
graded / binary with ``/proc/loadavg``. ``--loop PROBLEM ...`` times the loop instead: seconds
per query (ask and tell with its refits) of :func:`~botorch_pref.loop.run_replications` with
binary answers and with 5-level graded answers (the loop's defaults for each), one replication
each on the same seeds, alternated in one process.

    python -m benchmarks.graded [--sizes 50:100 200:600] [--repeats 5]
    python -m benchmarks.graded --loop branin hartmann6 [--seeds 3] [--queries 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from botorch.fit import fit_gpytorch_mll

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.data import PreferenceData
from botorch_pref.loop import run_replications
from botorch_pref.models.evidence import LaplaceEvidence


def answers(n: int, m: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, PreferenceData]:
    """Designs, binary answers and 5-level graded answers about the same ``m`` random pairs."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=torch.float64)
    u = -((X - 0.35) ** 2).sum(-1) * 6.0 + torch.sin(5 * X).sum(-1)
    i = torch.randint(n, (m,), generator=g)
    j = (i + torch.randint(1, n, (m,), generator=g)) % n
    delta = u[i] - u[j] + 0.5 * torch.randn(m, generator=g, dtype=torch.float64)
    binary = torch.stack([torch.where(delta > 0, i, j), torch.where(delta > 0, j, i)], -1)
    cuts = delta.abs().quantile(torch.tensor([0.3, 0.7], dtype=torch.float64))
    levels = torch.bucketize(delta, torch.cat([-cuts.flip(0), cuts]))
    graded = PreferenceData(
        torch.stack([i, j], -1),
        torch.full((m,), 4),
        torch.zeros(m, dtype=torch.long),
        levels,
        graded_levels=5,
    )
    return X, binary, graded


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(n: int, m: int, repeats: int) -> dict[str, tuple[float, float]]:
    """Median seconds ``(binary, graded)`` of a mode search, an evidence gradient and a fit
    (graded answers fit more hyperparameters, the thresholds, so their fits may take more
    evaluations)."""
    X, binary, graded = answers(n, m)
    steps = ("mode", "evidence", "fit")
    times: dict[str, list[list[float]]] = {step: [[], []] for step in steps}
    for _ in range(repeats):
        for slot, data in enumerate((binary, graded)):
            model = PairwiseLaplaceGP(X, data)
            K = model.covar_module(X).to_dense().detach().unsqueeze(0)
            times["mode"][slot].append(_timed(lambda m=model, K=K: m.engine.find_mode(K)))

            def evidence(model=model) -> None:
                model._mode.snapshot = None  # find the mode again: the evidence's full cost
                model.laplace_evidence().sum().backward()

            times["evidence"][slot].append(_timed(evidence))
            fresh = PairwiseLaplaceGP(X, data)
            mll = LaplaceEvidence(fresh.likelihood, fresh)
            times["fit"][slot].append(_timed(lambda mll=mll: fit_gpytorch_mll(mll)))
    return {k: (statistics.median(b), statistics.median(g)) for k, (b, g) in times.items()}


def loop_seconds(problem: str, seeds: int, queries: int) -> tuple[float, float]:
    """Mean seconds per acquisition query ``(binary, graded)`` of the loop on ``problem``: one
    sequential replication per seed and answer format, alternated."""
    totals = [0.0, 0.0]
    for seed in range(seeds):
        for slot, settings in enumerate(({}, {"answers": "graded", "levels": 5})):
            result = run_replications(
                problem, "eubo", 1, queries, seed=seed, backend="sequential", **settings
            )
            totals[slot] += float(result.seconds[result.n_initial :].mean()) / seeds
    return totals[0], totals[1]


def loadavg() -> str:
    """The first three fields of ``/proc/loadavg``."""
    with open("/proc/loadavg", encoding="ascii") as fh:
        return " ".join(fh.read().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["50:100", "200:600"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--loop", nargs="+", metavar="PROBLEM", help="time the loop instead")
    parser.add_argument("--seeds", type=int, default=3, help="--loop: seeds per problem")
    parser.add_argument("--queries", type=int, default=30, help="--loop: acquisition queries")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    if args.loop:
        print("| problem | binary (s/query) | graded (s/query) | graded / binary | loadavg |")
        print("|---|---|---|---|---|")
        for problem in args.loop:
            b, g = loop_seconds(problem, args.seeds, args.queries)
            print(f"| {problem} | {b:.3f} | {g:.3f} | {g / b:.2f} | {loadavg()} |", flush=True)
        return
    print("| n | m | step | binary (s) | graded (s) | graded / binary | loadavg |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes:
        n, m = (int(v) for v in size.split(":"))
        result = measure(n, m, args.repeats)
        load = loadavg()
        for step, (b, g) in result.items():
            print(f"| {n} | {m} | {step} | {b:.4f} | {g:.4f} | {g / b:.2f} | {load} |")


if __name__ == "__main__":
    main()
