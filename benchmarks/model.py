r"""Model benchmark: BoTorch ``PairwiseGP`` against ``PairwiseLaplaceGP`` on the same data.

Both models run side by side in one process on identical data, seeds and test points. For each
problem (default: Branin, d = 2, and Hartmann-6, d = 6) and each size ``(n, m)`` (default
(50, 100), (200, 600), (500, 1500), (1000, 500)) the data are:

* ``n`` designs drawn uniformly from the unit cube;
* ``m`` random pairs of two distinct designs (a pair may repeat);
* probit answers: the utility is standardised to zero mean and unit standard deviation over the
  ``n`` random designs, and each answer compares the standardised utilities of its two designs
  after adding independent N(0, 0.1^2) noise to each (``botorch_pref.users.SimulatedUser`` with
  ``noise="probit", scale=0.1``), so a pair whose utilities differ by 0.1 standard deviations is
  answered wrongly about 24% of the time.

The anchor is ``botorch.models.PairwiseGP`` fitted with ``PairwiseLaplaceMarginalLogLikelihood``;
the model under test is ``botorch_pref.PairwiseLaplaceGP`` fitted with ``LaplaceEvidence``. Each
model uses its own default kernel and priors. Stages (seconds; the table also gives the ratio
anchor / ours, above 1 when ours is faster):

* ``construct``: the model constructor, which finds the posterior mode at the initial
  hyperparameters;
* ``fit``: the ``fit_gpytorch_mll`` call alone (building the mll object is not timed);
* ``posterior 1000x1xd``: 1000 marginal posteriors, ``model.posterior(X)`` with ``X`` of shape
  1000 x 1 x d, reading ``.mean`` and ``.variance`` (the BoTorch way to ask for 1000 marginals;
  a 1000 x d ``X`` would ask for one 1000 x 1000 joint);
* ``posterior 1000x2xd``: 1000 batched pair posteriors, ``X`` of shape 1000 x 2 x d, reading
  ``.mean`` and ``.distribution.covariance_matrix``;
* ``EUBO fwd+bwd``: ``AnalyticExpectedUtilityOfBestOption(pref_model=model)`` on 1000 pairs
  (``X`` 1000 x 2 x d with ``requires_grad``), then ``.sum().backward()``.

The posterior and EUBO stages run once as a warm-up (which also builds any cached factors) and
are then timed with ``time.perf_counter`` (the median of up to 5 calls, fewer when a call takes
over a second); on CUDA the device is synchronised before each clock read. The construct and fit
stages are timed once per seed. Every timing is the median over ``--repeats`` seeds.

Quality: Kendall tau (``scipy.stats.kendalltau``) between the fitted posterior mean and the true
utility on 1000 uniform test points, and the final value of each model's fitting objective (log
evidence plus hyperparameter log-priors). The two objectives use different priors and
``PairwiseGP`` clamps its log-posterior term, so evidence values are comparable only roughly.

``--priors`` instead compares two lengthscale priors of ``PairwiseLaplaceGP``
(``make_covar_module(d, lengthscale_prior="gamma" | "dim_scaled")``) on Branin (2-D) and on
Hartmann-6 hidden in 20-D (``hartmann6-in-20``: inputs 0-5 relevant, 6-19 ignored), for
(n, m) = (50, 100) and (100, 300), reporting Kendall tau on 1000 test points, fit seconds and
the median fitted lengthscale of the relevant and the ignored inputs.

Failures of either model (an exception in any stage) are caught and shown in the table cell as
``failed: reason``.

Run (``OMP_WAIT_POLICY=PASSIVE`` avoids OpenMP busy-waiting on a shared machine)::

    .venv/bin/python -m benchmarks.model                    # or: make bench-model
    .venv/bin/python -m benchmarks.model --sizes 50,100 200,600 --repeats 3
    .venv/bin/python -m benchmarks.model --problems branin --skip-anchor-above 500
    .venv/bin/python -m benchmarks.model --dtype float32 --device cuda --json results.json
    .venv/bin/python -m benchmarks.model --priors

Leave torch's thread count at its default: on some CPU builds ``torch.set_num_threads`` makes
``PairwiseGP``'s batched posteriors fail with an LU error.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import warnings
from typing import Any

import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP
from botorch.models.pairwise_gp import PairwiseLaplaceMarginalLogLikelihood
from scipy.stats import kendalltau

from benchmarks.model_report import (
    cell,
    clock,
    environment_lines,
    failed,
    failure_reason,
    summarise,
    table,
    time_cell,
    timed_warm,
)
from botorch_pref import LaplaceEvidence, PairwiseLaplaceGP
from botorch_pref.models.pairwise import make_covar_module
from botorch_pref.test_functions import get_utility, utility_name
from botorch_pref.users import SimulatedUser

DEFAULT_SIZES = [(50, 100), (200, 600), (500, 1500), (1000, 500)]
DEFAULT_PROBLEMS = ["branin", "hartmann6"]
PRIOR_SIZES = [(50, 100), (100, 300)]
PRIOR_PROBLEMS = ["branin", "hartmann6-in-20"]
NOISE_SCALE = 0.1
N_TEST = 1000
N_QUERY = 1000

MODELS = ("PairwiseGP", "PairwiseLaplaceGP")
TIMED_STAGES = [
    ("construct", "construct (s)"),
    ("fit", "fit_gpytorch_mll (s)"),
    ("post_1", "posterior 1000x1xd (s)"),
    ("post_2", "posterior 1000x2xd (s)"),
    ("eubo", "EUBO fwd+bwd 1000x2xd (s)"),
]
QUALITY_STAGES = [("tau", "Kendall tau"), ("evidence", "final mll value")]


# --------------------------------------------------------------------------- data


def make_data(
    problem: str, n: int, m: int, seed: int, dtype: torch.dtype, device: torch.device
) -> dict[str, Any]:
    """Designs, comparisons and test points for one problem, size and seed.

    Everything is drawn in float64 on the CPU from a seeded generator (so the data do not depend
    on ``dtype`` or ``device``) and then moved.
    """
    utility = get_utility(problem)
    d = utility.dim
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=gen, dtype=torch.float64)
    first = torch.randint(n, (m,), generator=gen)
    other = (first + torch.randint(1, n, (m,), generator=gen)) % n  # distinct from first
    pairs = torch.stack([first, other], dim=-1)
    f_train = utility(X)
    mu, sd = f_train.mean(), f_train.std()

    def standardised(Z: torch.Tensor) -> torch.Tensor:
        return (utility(Z) - mu) / sd

    user = SimulatedUser(standardised, noise="probit", scale=NOISE_SCALE, seed=seed + 7919)
    rows = user.compare(X[pairs])  # indices into X[pairs].reshape(-1, d)
    comparisons = pairs.reshape(-1)[rows]
    X_test = torch.rand(N_TEST, d, generator=gen, dtype=torch.float64)
    X_1 = torch.rand(N_QUERY, 1, d, generator=gen, dtype=torch.float64)
    X_2 = torch.rand(N_QUERY, 2, d, generator=gen, dtype=torch.float64)
    return {
        "utility": utility,
        "d": d,
        "X": X.to(device=device, dtype=dtype),
        "comparisons": comparisons.to(device=device),
        "X_test": X_test.to(device=device, dtype=dtype),
        "f_test": utility(X_test).numpy(),
        "X_1": X_1.to(device=device, dtype=dtype),
        "X_2": X_2.to(device=device, dtype=dtype),
    }


# ------------------------------------------------------------------------- models


def _build(kind: str, X: torch.Tensor, C: torch.Tensor, covar_module: Any = None):
    if kind == "PairwiseGP":
        return PairwiseGP(X, C)
    return PairwiseLaplaceGP(X, C, covar_module=covar_module)


def _mll(kind: str, model: Any):
    if kind == "PairwiseGP":
        return PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model)
    return LaplaceEvidence(model.likelihood, model)


def _evidence(kind: str, mll: Any) -> float:
    """The fitting objective (log evidence plus log-priors) at the current hyperparameters."""
    model = mll.model
    with torch.no_grad():
        if kind == "PairwiseGP":
            model.train()
            try:
                value = mll(model(*model.train_inputs), model.train_targets)
            finally:
                model.eval()
        else:
            value = mll()
    return float(value.sum())


def _posterior_mean(model: Any, X: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.posterior(X).mean.reshape(-1)


def run_model(
    kind: str, data: dict[str, Any], seed: int, device: torch.device
) -> tuple[dict[str, Any], list[str]]:
    """All stages for one model on one data set: stage -> value or ``("failed", reason)``."""
    res: dict[str, Any] = {}
    X, C = data["X"], data["comparisons"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            t, model = clock(lambda: _build(kind, X, C), device)
            res["construct"] = t
        except Exception as err:
            reason = failure_reason(err)
            for key, _ in TIMED_STAGES + QUALITY_STAGES:
                res[key] = ("failed", reason)
            return res, _messages(caught)

        mll = _mll(kind, model)
        torch.manual_seed(seed)  # fit_gpytorch_mll's retries draw from the priors
        try:
            res["fit"], _ = clock(lambda: fit_gpytorch_mll(mll), device)
        except Exception as err:
            res["fit"] = ("failed", failure_reason(err))
        model.eval()

        def post_1() -> None:
            post = model.posterior(data["X_1"])
            post.mean, post.variance  # noqa: B018

        def post_2() -> None:
            post = model.posterior(data["X_2"])
            post.mean, post.distribution.covariance_matrix  # noqa: B018

        def eubo() -> None:
            acqf = AnalyticExpectedUtilityOfBestOption(pref_model=model)
            Xq = data["X_2"].clone().requires_grad_(True)
            acqf(Xq).sum().backward()

        for key, fn in (("post_1", post_1), ("post_2", post_2), ("eubo", eubo)):
            try:
                res[key] = timed_warm(fn, device)
            except Exception as err:
                res[key] = ("failed", failure_reason(err))
        try:
            mean = _posterior_mean(model, data["X_test"]).cpu().double().numpy()
            res["tau"] = float(kendalltau(mean, data["f_test"]).statistic)
        except Exception as err:
            res["tau"] = ("failed", failure_reason(err))
        try:
            res["evidence"] = _evidence(kind, mll)
        except Exception as err:
            res["evidence"] = ("failed", failure_reason(err))
    return res, _messages(caught)


def _messages(caught: list[warnings.WarningMessage]) -> list[str]:
    return [f"{w.category.__name__}: {' '.join(str(w.message).split())[:100]}" for w in caught]


def process_warmup(device: torch.device, dtype: torch.dtype) -> None:
    """Run every stage once on a tiny problem, so that one-off costs of the process (lazy
    imports, library initialisation) are not charged to the first timed model."""
    data = make_data("branin", 12, 20, seed=12345, dtype=dtype, device=device)
    for kind in MODELS:
        run_model(kind, data, seed=0, device=device)


def header_lines(args: argparse.Namespace, device: torch.device) -> list[str]:
    return [
        *environment_lines(args.dtype, device),
        f"- median over {args.repeats} seed(s); answers: probit noise sigma={NOISE_SCALE} on the "
        "utility standardised over the n designs",
    ]


# --------------------------------------------------------------------------- runs


def run_speed(args: argparse.Namespace, device: torch.device, dtype: torch.dtype) -> dict:
    sizes = args.sizes or DEFAULT_SIZES
    problems = args.problems or DEFAULT_PROBLEMS
    results: dict[str, Any] = {"mode": "speed", "cells": []}
    for problem in problems:
        d = get_utility(problem).dim
        rows: list[list[str]] = []
        warn_notes: dict[str, set[str]] = {k: set() for k in MODELS}
        for n, m in sizes:
            kinds = [k for k in MODELS if not (k == "PairwiseGP" and _skip_anchor(args, n))]
            per_kind: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
            for rep in range(args.repeats):
                data = make_data(problem, n, m, seed=rep, dtype=dtype, device=device)
                for kind in kinds:
                    res, seen = run_model(kind, data, seed=rep, device=device)
                    per_kind[kind].append(res)
                    warn_notes[kind].update(seen)
            summary = {
                kind: {
                    key: summarise([r[key] for r in per_kind[kind]])
                    for key, _ in TIMED_STAGES + QUALITY_STAGES
                }
                for kind in kinds
            }
            results["cells"].append(
                {
                    "problem": problem,
                    "d": d,
                    "n": n,
                    "m": m,
                    "summary": summary,
                    "raw": {
                        k: [
                            {kk: (list(vv) if failed(vv) else vv) for kk, vv in r.items()}
                            for r in v
                        ]
                        for k, v in per_kind.items()
                    },
                }
            )
            for key, label in TIMED_STAGES + QUALITY_STAGES:
                a = summary.get("PairwiseGP", {}).get(key)
                o = summary["PairwiseLaplaceGP"][key]
                if key in dict(TIMED_STAGES):
                    a_txt, o_txt = time_cell(a), time_cell(o)
                    if a and o and a["median"] is not None and o["median"] and o["median"] > 0:
                        ratio = f"{a['median'] / o['median']:.2f}"
                    else:
                        ratio = "-"
                else:
                    fmt = ".3f" if key == "tau" else ".2f"
                    a_txt, o_txt, ratio = cell(a, fmt), cell(o, fmt), "-"
                rows.append([str(n), str(m), label, a_txt, o_txt, ratio])
            print(f"  done {problem} n={n} m={m}", flush=True)
        print(f"\n### {problem} (d={d})\n")
        print(table(["n", "m", "stage", "PairwiseGP", "PairwiseLaplaceGP", "anchor/ours"], rows))
        for kind in MODELS:
            if warn_notes[kind]:
                print(f"\nWarnings from {kind} ({problem}):")
                for w in sorted(warn_notes[kind])[:8]:
                    print(f"  - {w}")
        print(flush=True)
    return results


def _skip_anchor(args: argparse.Namespace, n: int) -> bool:
    return args.skip_anchor_above is not None and n > args.skip_anchor_above


def _fit_with_prior(
    data: dict[str, Any], prior: str, seed: int, device: torch.device
) -> tuple[float, float, torch.Tensor]:
    """Fit PairwiseLaplaceGP with one lengthscale prior: (Kendall tau, fit s, lengthscales)."""
    X = data["X"]
    covar = make_covar_module(X.shape[-1], lengthscale_prior=prior, dtype=X.dtype)
    model = PairwiseLaplaceGP(X, data["comparisons"], covar_module=covar)
    mll = LaplaceEvidence(model.likelihood, model)
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, _ = clock(lambda: fit_gpytorch_mll(mll), device)
    model.eval()
    mean = _posterior_mean(model, data["X_test"]).cpu().double().numpy()
    tau = float(kendalltau(mean, data["f_test"]).statistic)
    return tau, t, model.covar_module.base_kernel.lengthscale.detach().reshape(-1).cpu()


def run_priors(args: argparse.Namespace, device: torch.device, dtype: torch.dtype) -> dict:
    sizes = args.sizes or PRIOR_SIZES
    problems = args.problems or PRIOR_PROBLEMS
    results: dict[str, Any] = {"mode": "priors", "cells": []}
    rows: list[list[str]] = []
    for problem in problems:
        utility = get_utility(problem)
        d = utility.dim
        active = list(getattr(utility, "active_dims", range(d)))
        inactive = [i for i in range(d) if i not in active]
        for n, m in sizes:
            for prior in ("gamma", "dim_scaled"):
                taus, fits, ls_on, ls_off = [], [], [], []
                for rep in range(args.repeats):
                    data = make_data(problem, n, m, seed=rep, dtype=dtype, device=device)
                    try:
                        tau, t, ls = _fit_with_prior(data, prior, rep, device)
                        taus.append(tau)
                        fits.append(t)
                        ls_on.append(float(ls[active].median()))
                        ls_off.append(float(ls[inactive].median()) if inactive else math.nan)
                    except Exception as err:
                        taus.append(("failed", failure_reason(err)))
                        fits.append(("failed", failure_reason(err)))
                s_tau, s_fit = summarise(taus), summarise(fits)
                on = statistics.median(ls_on) if ls_on else math.nan
                off = statistics.median(ls_off) if ls_off else math.nan
                rows.append(
                    [
                        f"{problem} (d={d})",
                        str(n),
                        str(m),
                        prior,
                        cell(s_tau, ".3f"),
                        time_cell(s_fit),
                        f"{on:.3g}",
                        "-" if math.isnan(off) else f"{off:.3g}",
                    ]
                )
                results["cells"].append(
                    {
                        "problem": problem,
                        "d": d,
                        "n": n,
                        "m": m,
                        "prior": prior,
                        "tau": s_tau,
                        "fit_s": s_fit,
                        "median_ls_relevant": on,
                        "median_ls_ignored": off,
                    }
                )
                print(f"  done {problem} n={n} m={m} {prior}", flush=True)
    print("\n### PairwiseLaplaceGP lengthscale priors\n")
    print(
        table(
            [
                "problem",
                "n",
                "m",
                "lengthscale prior",
                "Kendall tau",
                "fit (s)",
                "ls relevant",
                "ls ignored",
            ],
            rows,
        )
    )
    print(
        "\nls relevant / ls ignored: median fitted lengthscale over the relevant / ignored inputs."
    )
    return results


# --------------------------------------------------------------------------- main


def _size(text: str) -> tuple[int, int]:
    try:
        n, m = (int(v) for v in text.replace("x", ",").split(","))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected n,m (e.g. 50,100), got {text!r}") from err
    if n < 2 or m < 1:
        raise argparse.ArgumentTypeError(f"need n >= 2 and m >= 1, got {text!r}")
    return n, m


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="PairwiseGP vs PairwiseLaplaceGP: construct, fit, posteriors, EUBO, tau.",
    )
    p.add_argument(
        "--sizes",
        nargs="+",
        type=_size,
        default=None,
        metavar="N,M",
        help="(n designs, m comparisons) pairs, e.g. --sizes 50,100 200,600 "
        "(default: 50,100 200,600 500,1500 1000,500; with --priors 50,100 100,300)",
    )
    p.add_argument(
        "--problems",
        nargs="+",
        type=utility_name,
        default=None,
        help="utility names for get_utility (default: branin hartmann6; "
        "with --priors: branin hartmann6-in-20)",
    )
    p.add_argument("--repeats", type=int, default=3, help="seeds per cell (median reported)")
    p.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument(
        "--skip-anchor-above",
        type=int,
        default=None,
        metavar="N",
        help="skip PairwiseGP for n > N (it is slow at large n)",
    )
    p.add_argument("--json", default=None, metavar="PATH", help="save the results as JSON")
    p.add_argument(
        "--priors",
        action="store_true",
        help="compare PairwiseLaplaceGP's 'gamma' and 'dim_scaled' lengthscale priors",
    )
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda requested but CUDA is not available")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    title = "lengthscale priors" if args.priors else "PairwiseGP vs PairwiseLaplaceGP"
    print(f"## botorch-pref model benchmark: {title}\n")
    head = header_lines(args, device)
    print("\n".join(head), flush=True)
    process_warmup(device, dtype)
    if args.priors:
        results = run_priors(args, device, dtype)
    else:
        results = run_speed(args, device, dtype)
    if args.json:
        results["header"] = head
        results["args"] = {k: v for k, v in vars(args).items()}
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2, default=str)
        print(f"\nsaved {args.json}")


if __name__ == "__main__":
    main()
