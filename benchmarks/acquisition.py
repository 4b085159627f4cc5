r"""Acquisition benchmark: one value-and-gradient evaluation, the unit ``optimize_acqf`` repeats.

For each number of compared designs ``n`` (default 50, 100, 150: the sizes an EUBO run on
Hartmann-6 passes through) the data are ``n`` uniform designs in the unit cube and ``n / 2``
disjoint pairs answered by a probit user (scale 0.2) on ``--problem`` (default Hartmann-6).
Three evaluations of the same acquisition run side by side in one process on the same
candidates, a ``12 x q x d`` batch (12 restarts of ``optimize_acqf``), value and ``backward``:

* ``fused``: what :func:`botorch_pref.acquisition.make_eubo` / ``make_qeubo`` return for
  ``PairwiseLaplaceGP`` (``LaplaceEUBO``, ``LaplaceQEUBO``);
* ``BoTorch on ours``: BoTorch's ``AnalyticExpectedUtilityOfBestOption`` /
  ``qExpectedUtilityOfBestOption`` on the same ``PairwiseLaplaceGP``;
* ``BoTorch on PairwiseGP``: the same classes on ``botorch.models.PairwiseGP`` with the same data
  and the same hyperparameters (outputscale and lengthscales copied from ours).

Champion-challenger (``ChampionChallenger(log=True)`` on ``12 x 1 x d`` challengers of the
compared design with the highest posterior mean, as the loop uses it) is fused inside the class
itself; its middle column sends it through ``model.posterior`` with an identity posterior
transform. qEUBO uses 256 scrambled-Sobol samples (twice the loop's default of 128). All three
run inside the loop's ``lean_kernels`` context, as ``PreferenceOptimizer`` evaluates them. Each
time is the median of ``--repeats`` blocks of 50 evaluations after a warm-up, the three columns'
blocks alternating. The table also gives the largest absolute difference between the fused values
and BoTorch's on our model (they should agree to rounding).

Example::

    OMP_WAIT_POLICY=PASSIVE python -m benchmarks.acquisition
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from botorch.acquisition.objective import ScalarizedPosteriorTransform
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    qExpectedUtilityOfBestOption,
)
from botorch.models import PairwiseGP
from botorch.sampling.normal import SobolQMCNormalSampler

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.acquisition import (
    ChampionChallenger,
    champion,
    lean_kernels,
    make_eubo,
    make_qeubo,
)
from botorch_pref.runtime import positive_int
from botorch_pref.test_functions import get_utility, utility_name
from botorch_pref.users import SimulatedUser

MC_SAMPLES = 256
RESTARTS = 12


def _models(problem: str, n: int, seed: int) -> tuple[PairwiseLaplaceGP, PairwiseGP]:
    utility = get_utility(problem)
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, utility.dim, generator=g, dtype=torch.float64)
    user = SimulatedUser(utility, noise="probit", scale=0.2, seed=seed)
    rows = []
    for i in range(0, n - 1, 2):
        w = int(user.choose(X[i : i + 2]))
        rows.append((i + w, i + 1 - w))  # (winner, loser)
    C = torch.tensor(rows)
    ours = PairwiseLaplaceGP(X, C)
    pgp = PairwiseGP(X, C)
    with torch.no_grad():
        pgp.covar_module.outputscale = ours.covar_module.outputscale
        pgp.covar_module.base_kernel.lengthscale = ours.covar_module.base_kernel.lengthscale
    pgp.set_train_data(X, C, update_model=True)
    ours.eval()
    pgp.eval()
    return ours, pgp


def _time(acqfs, Z: torch.Tensor, repeats: int, block: int = 50) -> list[float]:
    """Median seconds per value-and-gradient evaluation of each of ``acqfs``.

    The blocks of the acquisitions alternate, so that a change in the machine's load reaches
    all of them alike.
    """
    for acqf in acqfs:
        for _ in range(3):
            acqf(Z).sum().backward()
    times = [[] for _ in acqfs]
    for _ in range(repeats):
        for acqf, out in zip(acqfs, times, strict=True):
            t0 = time.perf_counter()
            for _ in range(block):
                acqf(Z).sum().backward()
            out.append((time.perf_counter() - t0) / block)
    return [statistics.median(out) for out in times]


def _acquisitions(kind: str, ours, pgp):
    if kind == "champion-challenger":
        # the fused path is taken without a posterior transform; an identity transform sends
        # the same acquisition through model.posterior (BoTorch's objects)
        identity = ScalarizedPosteriorTransform(weights=torch.ones(1, dtype=torch.float64))
        c = champion(ours)
        return (
            ChampionChallenger(ours, c, log=True),
            ChampionChallenger(ours, c, log=True, posterior_transform=identity),
            ChampionChallenger(pgp, c, log=True),
        )
    if kind == "EUBO":
        return (
            make_eubo(ours),
            AnalyticExpectedUtilityOfBestOption(pref_model=ours),
            AnalyticExpectedUtilityOfBestOption(pref_model=pgp),
        )

    def sampler():
        return SobolQMCNormalSampler(sample_shape=torch.Size([MC_SAMPLES]), seed=1)

    return (
        make_qeubo(ours, MC_SAMPLES, seed=1),
        qExpectedUtilityOfBestOption(pref_model=ours, sampler=sampler()),
        qExpectedUtilityOfBestOption(pref_model=pgp, sampler=sampler()),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 150])
    parser.add_argument(
        "--problem", type=utility_name, default="hartmann6", help="utility of the simulated answers"
    )
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(
        f"{args.problem}: value + gradient of {RESTARTS} x q x d candidates; "
        f"torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads",
        flush=True,
    )
    print(
        "| acquisition | n | fused ms | BoTorch on ours ms | BoTorch on PairwiseGP ms "
        "| fused vs BoTorch on ours | fused vs PairwiseGP | max abs value difference |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        ours, pgp = _models(args.problem, n, args.seed)
        d = ours.datapoints.shape[-1]
        for kind, q in (
            ("EUBO", 2),
            ("qEUBO q=2", 2),
            ("qEUBO q=4", 4),
            ("champion-challenger", 1),
        ):
            g = torch.Generator().manual_seed(args.seed + n + q)
            Z = torch.rand(RESTARTS, q, d, generator=g, dtype=torch.float64)
            Z.requires_grad_(True)
            fused, on_ours, on_pgp = _acquisitions(kind.split()[0], ours, pgp)
            with lean_kernels():
                with torch.no_grad():
                    diff = float((fused(Z) - on_ours(Z)).abs().max())
                t = [s * 1e3 for s in _time((fused, on_ours, on_pgp), Z, args.repeats)]
            print(
                f"| {kind} | {n} | {t[0]:.2f} | {t[1]:.2f} | {t[2]:.2f} | {t[1] / t[0]:.1f}x "
                f"| {t[2] / t[0]:.1f}x | {diff:.1e} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
