r"""float32 against float64: the Laplace mode and evidence over a grid of prior-to-noise ratios.

For each outputscale (prior scale) and probit ``noise_std`` of the grid, with and without a tie
threshold (of three noise scales), ``--datasets`` random one-dimensional data sets (12 designs,
30 random answers, a lengthscale of 0.05 so that the designs are nearly independent) are fitted
at fixed hyperparameters in float64 and in float32, with the default (automatically chosen)
Newton form. Each cell reports, over the data sets:

* ``|f32 - f64|``: the largest difference of the posterior modes, relative to ``max(1, max |f64|)``;
* ``evidence``: the largest difference of the Laplace evidences (nats);
* ``warned``: data sets whose float32 mode search warned that Newton did not converge;
* ``failed``: data sets where float32 raised (the Laplace system is indefinite by rounding).

``--loop`` instead runs ``run_replications`` (Hartmann-6, EUBO, the defaults) in float32 and
counts the Newton searches, their iterations and the convergence warnings.

Run::

    .venv/bin/python -m benchmarks.float32
    .venv/bin/python -m benchmarks.float32 --loop --replications 8 --queries 30
"""

from __future__ import annotations

import argparse
import collections
import warnings

import torch

from botorch_pref import PairwiseLaplaceGP, PairwiseProbit
from botorch_pref.inference import engine
from botorch_pref.loop import run_replications
from botorch_pref.runtime import entry_threads, positive_int

SCALES = (1.0, 10.0, 100.0, 1000.0)
NOISES = (1.0, 0.1, 0.03, 0.01)


def fit(X, C, scale: float, noise: float, ties: bool, dtype: torch.dtype):
    """``(mode, evidence, warned)`` at fixed hyperparameters in ``dtype``."""
    lik = PairwiseProbit(noise_std=noise, tie_threshold=3 * noise if ties else None,
                         tie_threshold_prior=False)  # fmt: skip
    model = PairwiseLaplaceGP(X, C, likelihood=lik)
    model.covar_module.base_kernel.lengthscale = 0.05
    model.covar_module.outputscale = scale
    model.to(dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mode = model.utility.detach().double()
        evidence = float(model.laplace_evidence().detach())
    return mode, evidence, any("converge" in str(w.message) for w in caught)


def grid(datasets: int) -> None:
    print("| ties | outputscale | noise_std | max |f32 - f64| | max evidence error | warned | "
          "failed |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for ties in (False, True):
        for scale in SCALES:
            for noise in NOISES:
                err_f, err_e, warned, failed = 0.0, 0.0, 0, 0
                for seed in range(datasets):
                    g = torch.Generator().manual_seed(seed)
                    X = torch.rand(12, 1, generator=g, dtype=torch.float64)
                    C = torch.randint(0, 12, (30, 2), generator=g)
                    C = C[C[:, 0] != C[:, 1]]
                    f64, e64, _ = fit(X, C, scale, noise, ties, torch.float64)
                    try:
                        f32, e32, w32 = fit(X, C, scale, noise, ties, torch.float32)
                    except torch.linalg.LinAlgError:
                        failed += 1
                        continue
                    scale_f = f64.abs().max().clamp_min(1.0)
                    err_f = max(err_f, float((f32 - f64).abs().max() / scale_f))
                    err_e = max(err_e, abs(e32 - e64))
                    warned += int(w32)
                print(f"| {'yes' if ties else 'no'} | {scale:g} | {noise:g} | {err_f:.1e} | "
                      f"{err_e:.1e} | {warned} | {failed} |", flush=True)  # fmt: skip


def loop(replications: int, queries: int) -> None:
    counts: collections.Counter = collections.Counter()
    find_mode = engine.LaplaceEngine.find_mode

    def counted(self, *args, **kwargs):
        result = find_mode(self, *args, **kwargs)
        counts[result.iterations] += 1
        return result

    engine.LaplaceEngine.find_mode = counted
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run_replications("hartmann6", n_replications=replications, n_queries=queries,
                             seed=0, dtype=torch.float32)  # fmt: skip
    finally:
        engine.LaplaceEngine.find_mode = find_mode
    warned = sum("did not converge" in str(w.message) for w in caught)
    print(f"float32 loop (Hartmann-6, EUBO, {replications} replications, {queries} queries): "
          f"{sum(counts.values())} mode searches, {warned} convergence warnings; iterations: "
          + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=positive_int, default=5, help="data sets per cell")
    parser.add_argument("--loop", action="store_true", help="count Newton work in a float32 loop")
    parser.add_argument("--replications", type=positive_int, default=8)
    parser.add_argument("--queries", type=positive_int, default=30)
    args = parser.parse_args()
    with entry_threads():
        loop(args.replications, args.queries) if args.loop else grid(args.datasets)


if __name__ == "__main__":
    main()
