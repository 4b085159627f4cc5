r"""How far the Laplace posterior is from the exact one on the suite's own runs.

The loop's model approximates the posterior of the latent utility :math:`f` at the compared
designs by a Gaussian at its mode (Laplace). Expectation propagation or any other better
approximation can only pay where that Gaussian is far from the exact posterior

.. math::

    p(f \mid \mathcal D) \propto \mathcal N(f; m, K) \prod_{(w, l)} \Phi\big((f_w - f_l) / s\big).

This script runs the product's loop (:func:`~botorch_pref.loop.run_replications`, the suite's
protocol: a Gumbel user wrong on 20% of top-1% pairs, :math:`4d` random queries, EUBO), and
after the given numbers of answers refits each run's model on its answers (the loop's MAP
hyperparameters), then samples the exact posterior with those hyperparameters by elliptical
slice sampling (Murray, Adams & MacKay, 2010), which needs only the prior's Cholesky factor and
the log-likelihood. It prints per answer count, averaged over the runs:

* the correlation of the two posterior means at the compared designs;
* the median ratio of the Laplace variance to the exact one;
* how often both recommend the same design (the compared design with the highest mean);
* exact minus Laplace log10 regret of that recommendation, paired by run, with its standard
  error.

``python -m benchmarks.posterior_check --problem hartmann6 --seed 16 --answers 34 54 74``
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable

import torch
from torch import Tensor

from botorch_pref.loop import LoopConfig, run_replications
from botorch_pref.loop.backends import SequentialBackend
from botorch_pref.loop.replications import log10_regret
from botorch_pref.runtime import entry_threads, positive_int
from botorch_pref.test_functions import get_utility, utility_name


def elliptical_slice(
    log_likelihood: Callable[[Tensor], Tensor],
    mean: Tensor,
    chol: Tensor,
    start: Tensor,
    n_samples: int,
    *,
    burn: int = 0,
    thin: int = 1,
    generator: torch.Generator | None = None,
) -> Tensor:
    r"""Samples of :math:`p(f) \propto \mathcal N(f; \text{mean}, LL^\top) \exp(\ell(f))`.

    Elliptical slice sampling: from :math:`f`, draw :math:`\nu \sim \mathcal N(0, LL^\top)`,
    a level :math:`\log y = \ell(f) + \log u` and an angle :math:`\theta \sim U[0, 2\pi)`
    with the bracket :math:`[\theta - 2\pi, \theta]`; until
    :math:`f' = (f - m)\cos\theta + \nu \sin\theta + m` has :math:`\ell(f') > \log y`, shrink
    the bracket to the side of :math:`\theta` that holds 0 and draw :math:`\theta` in it again.
    Every step moves; there is nothing to tune.

    Args:
        log_likelihood: :math:`\ell`, a scalar tensor for an ``n`` vector.
        mean: The prior mean (``n``).
        chol: The prior covariance's lower Cholesky factor (``n x n``).
        start: The chain's first state (``n``).
        n_samples: Samples kept.
        burn: Steps discarded first.
        thin: Steps per kept sample.
        generator: The random generator.

    Returns:
        ``n_samples x n`` samples.
    """
    f, ll = start.clone(), log_likelihood(start)
    kept: list[Tensor] = []
    for step in range(burn + n_samples * thin):
        nu = chol @ torch.randn(f.shape[-1], generator=generator, dtype=f.dtype)
        level = ll + math.log(float(torch.rand((), generator=generator, dtype=torch.float64)))
        theta = float(torch.rand((), generator=generator, dtype=torch.float64)) * 2 * math.pi
        lo, hi = theta - 2 * math.pi, theta
        while True:
            proposal = (f - mean) * math.cos(theta) + nu * math.sin(theta) + mean
            value = log_likelihood(proposal)
            if value > level:
                f, ll = proposal, value
                break
            lo, hi = (theta, hi) if theta < 0 else (lo, theta)
            theta = float(torch.rand((), generator=generator, dtype=torch.float64)) * (hi - lo) + lo
        if step >= burn and (step - burn) % thin == thin - 1:
            kept.append(f)
    return torch.stack(kept)


def compare(queries: Tensor, winners: Tensor, utility, k: int, samples: int, seed: int) -> dict:
    """One run's Laplace and exact posteriors after its first ``k`` answers (pairs)."""
    d = queries.shape[-1]
    X = queries[:k].reshape(-1, d).to(torch.float64)
    win = 2 * torch.arange(k) + winners[:k].long()
    lose = 2 * torch.arange(k) + 1 - winners[:k].long()
    config = LoopConfig(d)  # (winner, loser) rows: what the loop gives its model for pairs
    model, mll = config.model(X, torch.stack([win, lose], -1), **config.model_kwargs())
    SequentialBackend(config).fit(mll, [seed], k)
    model.eval()
    with torch.no_grad():
        post = model.posterior(X)
        mean_l, var_l = post.mean.squeeze(-1), post.variance.squeeze(-1)
        K = model.covar_module(X).to_dense()
        chol = torch.linalg.cholesky(K + 1e-6 * torch.eye(X.shape[0], dtype=X.dtype))
        prior_mean = model.mean_module(X)

        def log_likelihood(f: Tensor) -> Tensor:
            return model.likelihood.log_prob(f[win] - f[lose]).sum()

        g = torch.Generator().manual_seed(seed)
        S = elliptical_slice(
            log_likelihood, prior_mean, chol, mean_l, samples, burn=samples, thin=5, generator=g
        )
    mean_e, var_e = S.mean(0), S.var(0)
    regret = utility.regret(X[torch.stack([mean_l.argmax(), mean_e.argmax()])])
    log_l, log_e = log10_regret(regret).tolist()
    return {
        "corr": float(torch.corrcoef(torch.stack([mean_l, mean_e]))[0, 1]),
        "var_ratio": float((var_l / var_e).median()),
        "same": bool(mean_l.argmax() == mean_e.argmax()),
        "diff": log_e - log_l,
    }


def main(argv: list[str]) -> int:
    """Run the loop, then compare the posteriors; one line per answer count."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problem", type=utility_name, default="hartmann6")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--replications", type=positive_int, default=16)
    parser.add_argument("--answers", type=positive_int, nargs="+", default=[34, 54, 74])
    parser.add_argument("--samples", type=positive_int, default=4000, help="kept per chain")
    args = parser.parse_args(argv)
    utility = get_utility(args.problem)
    n_initial = 4 * utility.dim
    if min(args.answers) <= n_initial:
        parser.error(f"--answers must exceed the {n_initial} initial queries.")
    with entry_threads():
        _report(args, utility, n_initial)
    return 0


def _report(args: argparse.Namespace, utility, n_initial: int) -> None:
    res = run_replications(
        args.problem,
        "eubo",
        args.replications,
        max(args.answers) - n_initial,
        seed=args.seed,
        n_initial=n_initial,
    )
    print(f"{args.problem}, seeds {args.seed}-{args.seed + args.replications - 1}, EUBO")
    for k in args.answers:
        rows = [
            compare(res.queries[r], res.winners[r], utility, k, args.samples, args.seed + r)
            for r in range(args.replications)
        ]
        diffs = [row["diff"] for row in rows]
        se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else math.nan
        print(
            f"{k} answers: mean correlation {statistics.fmean(r['corr'] for r in rows):.4f}, "
            f"variance ratio Laplace/exact {statistics.fmean(r['var_ratio'] for r in rows):.2f}, "
            f"same recommendation {sum(r['same'] for r in rows)}/{len(rows)}, "
            f"exact - Laplace log10 regret {statistics.fmean(diffs):+.3f} +- {se:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
