r"""BoTorch users' flows with ``PairwiseLaplaceGP`` beside BoTorch's ``PairwiseGP``, in one process.

Parts (``--part``, default all but ``crossover``):

* ``tutorial``: BoTorch's ``preference_bo`` tutorial with only the model import swapped
  (the flow of ``tests/test_botorch_tutorials.py``): Kendall tau of the fitted model on 1,000
  test designs (50 designs, 100 comparisons, data seed ``s``) and the EUBO loop's best observed
  value after 5, 10, ... queries (trial seed ``s``, the tutorial's ``optimize_acqf`` budget:
  3 restarts, 512 raw samples, on its float32 bounds), for seeds ``0..--seeds-1``; mean and
  standard error over seeds, and the seconds each model's runs took (ratio PairwiseGP / ours).
  Models: ``PairwiseGP``; ``PairwiseLaplaceGP`` with its default kernel; and with the
  ``--variant`` kernels (``lognormal``: ``make_covar_module``, the LogNormal(log 10, 1.5)
  outputscale prior the loop uses; ``pairwisegp``: ``default_covar_module``, PairwiseGP's).
* ``fit``: ``fit_gpytorch_mll`` on 500 designs and 1,500 random pairs (Branin-like utility,
  probit answers), ``--repeats`` data sets, median seconds of each model and their ratio.
* ``eubo``: BoTorch's generic EUBO loop, ``optimize_acqf(AnalyticExpectedUtilityOfBestOption)``
  then a new model and ``fit_gpytorch_mll`` per query, from 20 designs / 30 pairs in 4-D
  (the tutorial's utility), ``--queries`` queries; seconds per query and ratio.
* ``crossover``: our ``fit_gpytorch_mll`` and a 256 x 2 batched posterior at growing ``n``
  (``m = 3 n``), on one intra-op thread and on two (``model_threads``): where two threads
  start to pay.

``--threads 1`` runs every model (``PairwiseGP`` too) on one intra-op thread, for quality
figures on a busy machine. ``--load 2`` starts two busy background processes
(``python -c "while True: pass"``) before the timed parts and stops them afterwards, so that
"under load" is a controlled condition; every table prints ``/proc/loadavg`` next to it.
Timings are only comparable within one run.

Run::

    python -m benchmarks.botorch_parity --part tutorial --seeds 10
    python -m benchmarks.botorch_parity --part fit eubo
    python -m benchmarks.botorch_parity --part fit eubo --load 2
    python -m benchmarks.botorch_parity --part crossover

Leave torch's thread count at its default (``torch.set_num_threads`` breaks ``PairwiseGP``'s
batched posteriors on some CPU builds); the model changes threads per call where it needs to.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP
from botorch.models.pairwise_gp import PairwiseLaplaceMarginalLogLikelihood
from botorch.models.transforms.input import Normalize
from botorch.optim import optimize_acqf

from botorch_pref import LaplaceEvidence, PairwiseLaplaceGP
from botorch_pref.models.kernels import default_covar_module, make_covar_module
from botorch_pref.runtime import entry_threads, model_threads
from tests.test_botorch_tutorials import preference_bo_fit, preference_bo_loop

ANCHOR = (PairwiseGP, PairwiseLaplaceMarginalLogLikelihood)
KERNELS = {"lognormal": make_covar_module, "pairwisegp": default_covar_module}


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return "loadavg " + " ".join(f.read().split()[:3])
    except OSError:
        return "loadavg n/a"


@contextmanager
def background_load(processes: int) -> Iterator[None]:
    """``processes`` busy Python processes for the duration of the block."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        if procs:
            time.sleep(2.0)
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()


def with_kernel(name: str) -> Callable:
    """``PairwiseLaplaceGP`` with the kernel ``name`` (the tutorial passes X, C, a transform)."""

    def build(X, comparisons, input_transform=None):
        kernel = KERNELS[name](X.shape[-1], dtype=X.dtype)
        return PairwiseLaplaceGP(
            X, comparisons, covar_module=kernel, input_transform=input_transform
        )

    return build


def mean_se(values: list[float]) -> str:
    m = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return f"{m:.3f} ± {se:.3f}"


def part_tutorial(args: argparse.Namespace) -> None:
    ours = (PairwiseLaplaceGP, LaplaceEvidence)
    models = {"PairwiseGP": ANCHOR, "ours (default)": ours}
    for name in args.variant:
        models[f"ours ({name} kernel)"] = (with_kernel(name), LaplaceEvidence)
    taus = {k: [] for k in models}
    curves = {k: [] for k in models}
    seconds = dict.fromkeys(models, 0.0)
    diffs = {k: [] for k in models}
    for seed in range(args.seeds):
        for name, (model_cls, mll_cls) in models.items():
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                taus[name].append(preference_bo_fit(model_cls, mll_cls, seed=seed))
                best = preference_bo_loop(
                    model_cls,
                    mll_cls,
                    trials=[seed],
                    num_batches=args.batches,
                    raw_samples=512,
                    algos=("EUBO",),
                )
            seconds[name] += time.perf_counter() - start
            curves[name].append(best["EUBO"][0])
        for name in models:
            diffs[name].append(taus[name][-1] - taus["PairwiseGP"][-1])
        print(f"  seed {seed} done ({loadavg()})", flush=True)
    marks = [k for k in (5, 10, 20, 30) if k <= args.batches]
    header = ["model", "Kendall tau", "tau - PairwiseGP's"]
    header += [f"best after {k}" for k in marks] + ["seconds", "PairwiseGP s / s"]
    rows = []
    for name in models:
        row = [name, mean_se(taus[name]), mean_se(diffs[name])]
        row += [mean_se([c[k] for c in curves[name]]) for k in marks]
        row += [f"{seconds[name]:.1f}", f"{seconds['PairwiseGP'] / seconds[name]:.2f}"]
        rows.append(row)
    print(
        f"\npreference_bo tutorial flow, {args.seeds} seeds, EUBO, {args.batches} queries, "
        f"mean ± standard error over seeds ({loadavg()})\n"
    )
    print(table(header, rows))


def random_data(n: int, m: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` uniform designs and ``m`` probit answers (noise 0.1) on a Branin-like utility."""
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=gen, dtype=torch.float64)
    u = -((X - 0.3) ** 2).sum(-1) * 4 + torch.sin(6 * X[:, 0])
    i = torch.randint(n, (m,), generator=gen)
    j = (i + torch.randint(1, n, (m,), generator=gen)) % n
    noise = 0.1 * torch.randn(m, 2, generator=gen, dtype=torch.float64)
    win = torch.where(u[i] + noise[:, 0] > u[j] + noise[:, 1], i, j)
    return X, torch.stack([win, torch.where(win == i, j, i)], -1)


def fit_seconds(model_cls, mll_cls, X, C) -> float:
    model = model_cls(X, C)
    mll = mll_cls(model.likelihood, model)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_gpytorch_mll(mll)
    return time.perf_counter() - start


def part_fit(args: argparse.Namespace) -> None:
    times = {"PairwiseGP": [], "ours": []}
    for seed in range(args.repeats):
        X, C = random_data(500, 1500, 2, seed)
        times["ours"].append(fit_seconds(PairwiseLaplaceGP, LaplaceEvidence, X, C))
        times["PairwiseGP"].append(fit_seconds(*ANCHOR, X, C))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"\nfit_gpytorch_mll, n=500, m=1500, d=2, median of {args.repeats} "
        f"(load {args.load} busy processes; {loadavg()})\n"
    )
    print(
        table(
            ["PairwiseGP s", "ours s", "ratio"],
            [
                [
                    f"{med['PairwiseGP']:.2f}",
                    f"{med['ours']:.3f}",
                    f"{med['PairwiseGP'] / med['ours']:.1f}x",
                ]
            ],
        )
    )


def eubo_loop(model_cls, mll_cls, queries: int, seed: int) -> float:
    """Seconds per query of BoTorch's generic EUBO loop."""
    dim = 4
    gen = torch.Generator().manual_seed(seed)
    weights = torch.sqrt(torch.arange(dim, dtype=torch.float64) + 1)
    X = torch.rand(20, dim, generator=gen, dtype=torch.float64)
    i = torch.randint(20, (30,), generator=gen)
    j = (i + torch.randint(1, 20, (30,), generator=gen)) % 20
    u = X @ weights
    C = torch.stack([torch.where(u[i] > u[j], i, j), torch.where(u[i] > u[j], j, i)], -1)
    bounds = torch.stack([torch.zeros(dim), torch.ones(dim)]).double()
    torch.manual_seed(seed)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(queries):
            model = model_cls(X, C, input_transform=Normalize(d=dim))
            fit_gpytorch_mll(mll_cls(model.likelihood, model))
            acqf = AnalyticExpectedUtilityOfBestOption(pref_model=model)
            next_X, _ = optimize_acqf(acqf, bounds=bounds, q=2, num_restarts=3, raw_samples=512)
            n = X.shape[0]
            X = torch.cat([X, next_X.detach()])
            un = X[n:] @ weights
            C = torch.cat([C, torch.tensor([[n, n + 1]] if un[0] > un[1] else [[n + 1, n]])])
    return (time.perf_counter() - start) / queries


def part_eubo(args: argparse.Namespace) -> None:
    times = {"PairwiseGP": [], "ours": []}
    for seed in range(args.repeats):
        times["ours"].append(eubo_loop(PairwiseLaplaceGP, LaplaceEvidence, args.queries, seed))
        times["PairwiseGP"].append(eubo_loop(*ANCHOR, args.queries, seed))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"\nBoTorch's EUBO loop (optimize_acqf + fit_gpytorch_mll per query), d=4, from 20 "
        f"designs, {args.queries} queries, median of {args.repeats} "
        f"(load {args.load} busy processes; {loadavg()})\n"
    )
    print(
        table(
            ["PairwiseGP s/query", "ours s/query", "ratio"],
            [
                [
                    f"{med['PairwiseGP']:.3f}",
                    f"{med['ours']:.3f}",
                    f"{med['PairwiseGP'] / med['ours']:.1f}x",
                ]
            ],
        )
    )


def part_crossover(args: argparse.Namespace) -> None:
    rows = []
    for n in args.sizes:
        X, C = random_data(n, 3 * n, 2, 0)
        Xt = torch.rand(256, 2, 2, dtype=torch.float64)
        cells = [str(n)]
        for threads in (1, 2):
            fits, posts = [], []
            for _ in range(args.repeats):
                with model_threads(threads):
                    fits.append(fit_seconds(PairwiseLaplaceGP, LaplaceEvidence, X, C))
                    model = PairwiseLaplaceGP(X, C)
                    model.posterior(Xt)  # factors
                    start = time.perf_counter()
                    _ = model.posterior(Xt).distribution.covariance_matrix
                    posts.append(time.perf_counter() - start)
            cells += [f"{statistics.median(fits):.3f}", f"{statistics.median(posts) * 1e3:.1f}"]
        rows.append(cells)
        print(f"  n={n} done ({loadavg()})", flush=True)
    print(
        f"\nOne intra-op thread against two, our model, m = 3n, median of {args.repeats} "
        f"(load {args.load} busy processes; {loadavg()})\n"
    )
    print(table(["n", "fit s (1)", "posterior ms (1)", "fit s (2)", "posterior ms (2)"], rows))


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


PARTS = {"tutorial": part_tutorial, "fit": part_fit, "eubo": part_eubo, "crossover": part_crossover}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--part", nargs="+", choices=sorted(PARTS), default=["tutorial", "fit", "eubo"]
    )
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument(
        "--variant", nargs="*", choices=sorted(KERNELS), default=["lognormal", "pairwisegp"]
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 250, 500, 1000, 2000])
    parser.add_argument("--load", type=int, default=0, help="busy background processes")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="run every model on this many intra-op threads (default: torch's; the quality "
        "figures do not depend on it, the timings do)",
    )
    args = parser.parse_args(argv)
    print(
        f"torch {torch.__version__}, {os.cpu_count()} CPUs, {torch.get_num_threads()} threads; "
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; {loadavg()}"
    )
    with background_load(args.load), entry_threads(args.threads, per_thread=True):
        for part in args.part:
            PARTS[part](args)


if __name__ == "__main__":
    main()
