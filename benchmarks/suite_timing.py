"""Seconds per query of BoTorch's PBO pipeline and of the product's optimiser, side by side.

Both run the qEUBO protocol's first 6 acquisition queries (EUBO, d q restarts, 30 d q raw
samples) on the same seeds in one process, one after the other, so that the machine's load
affects both alike: ``python -m benchmarks.suite_timing``. ``--queries N`` runs ``N``
acquisition queries instead (the median then covers the later queries too, whose models hold
more answers): ``python -m benchmarks.suite_timing --queries 50``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

from benchmarks import suite_anchor
from botorch_pref import PreferenceOptimizer
from botorch_pref.runtime import positive_int
from botorch_pref.test_functions import get_utility
from botorch_pref.users import SimulatedUser, calibrate_noise

QUERIES = 6


def ours(problem: str, seed: int, scale: float, queries: int = QUERIES) -> float:
    """Median seconds of an acquisition query (ask, tell, best) of ``PreferenceOptimizer``."""
    f = get_utility(problem)
    d = f.dim
    user = SimulatedUser(f, "gumbel", scale, seed=seed)
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).double()
    opt = PreferenceOptimizer(
        bounds, n_initial=4 * d, seed=seed, num_restarts=2 * d, raw_samples=60 * d
    )
    secs = []
    for _ in range(4 * d + queries):
        t0 = time.perf_counter()
        X = opt.ask()
        opt.tell(X, int(user.choose(X)))
        opt.best()
        secs.append(time.perf_counter() - t0)
    return statistics.median(secs[4 * d :])


def main(argv: list[str]) -> int:
    """Print one line per problem and seed (``--queries N``: acquisition queries per run)."""
    parser = argparse.ArgumentParser(description="Seconds per query, BoTorch's pipeline and ours.")
    parser.add_argument("--queries", type=positive_int, default=QUERIES)
    queries = parser.parse_args(argv).queries
    warnings.filterwarnings("ignore")
    suite_anchor.CACHE = Path(__file__).resolve().parent / "out" / "anchor-timing"
    for problem in ("hartmann6", "branin"):
        scale = calibrate_noise(get_utility(problem), 0.2, noise="gumbel", seed=0)
        for seed in (100, 101):
            for path in suite_anchor.CACHE.glob("*"):
                path.unlink()
            run = suite_anchor.run_anchor(problem, "eubo", seed, queries=queries, scale=scale)
            theirs = statistics.median(run["seconds"])
            mine = ours(problem, seed, scale, queries)
            ratio = theirs / mine
            line = f"s/query BoTorch's pipeline {theirs:.2f}, ours {mine:.2f}, ratio {ratio:.1f}"
            print(f"{problem} seed {seed}: {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
