"""BoTorch's preference_bo tutorial loop with PairwiseLaplaceGP swapped in for PairwiseGP.

The loop follows the tutorial: a weighted-sum utility on the unit cube, noisy comparisons of
the initial designs, a preference model with a ``Normalize`` input transform fitted by its
Laplace evidence, then rounds of EUBO (analytic, ``q = 2``) or qEUBO whose pair is compared
and appended. Both models run the same rounds from the same data and seeds.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from botorch.acquisition.preference import (
    AnalyticExpectedUtilityOfBestOption,
    qExpectedUtilityOfBestOption,
)
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP
from botorch.models.pairwise_gp import PairwiseLaplaceMarginalLogLikelihood
from botorch.models.transforms.input import Normalize
from botorch.optim import optimize_acqf

from botorch_pref import LaplaceEvidence, PairwiseLaplaceGP

DIM = 4
BOUNDS = torch.stack([torch.zeros(DIM), torch.ones(DIM)]).double()
NOISE = 0.1
# The best option of this utility is worth sum_i sqrt(i) = 6.15 (initial bests 4.5-5.6). "No
# worse" allows this much for a tie broken differently by two models that are both right.
SLACK = 0.05


def utility(X: torch.Tensor) -> torch.Tensor:
    """The tutorial's utility: a weighted sum, weight sqrt(i) on input i (1-based)."""
    return (X * torch.sqrt(torch.arange(X.shape[-1], dtype=X.dtype) + 1)).sum(-1)


def compare(X: torch.Tensor, pairs: list[tuple[int, int]], gen: torch.Generator) -> torch.Tensor:
    """Noisy answers (utility plus N(0, NOISE^2) per option) about the given index pairs."""
    u = utility(X)
    rows = []
    for i, j in pairs:
        noisy = u[[i, j]] + NOISE * torch.randn(2, dtype=X.dtype, generator=gen)
        rows.append([i, j] if noisy[0] > noisy[1] else [j, i])
    return torch.tensor(rows)


def fit(model_cls, X: torch.Tensor, C: torch.Tensor):
    model = model_cls(X, C, input_transform=Normalize(d=DIM, bounds=BOUNDS))
    mll_cls = (
        LaplaceEvidence if model_cls is PairwiseLaplaceGP else PairwiseLaplaceMarginalLogLikelihood
    )
    fit_gpytorch_mll(mll_cls(model.likelihood, model))
    return model


def run_loop(model_cls, acqf_name: str, seed: int, rounds: int = 4) -> list[float]:
    """The tutorial's loop; returns the best true utility among the designs after each round."""
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(6, DIM, dtype=torch.float64, generator=gen)
    pairs = list(itertools.combinations(range(6), 2))
    chosen = torch.randperm(len(pairs), generator=gen)[:8].tolist()
    C = compare(X, [pairs[k] for k in chosen], gen)
    best = [float(utility(X).max())]
    for r in range(rounds):
        model = fit(model_cls, X, C)
        if acqf_name == "EUBO":
            acqf = AnalyticExpectedUtilityOfBestOption(pref_model=model)
        else:
            acqf = qExpectedUtilityOfBestOption(pref_model=model)
        torch.manual_seed(1000 * seed + r)
        next_X, _ = optimize_acqf(
            acqf, bounds=BOUNDS, q=2, num_restarts=2, raw_samples=64, options={"maxiter": 50}
        )
        n = X.shape[0]
        X = torch.cat([X, next_X.detach()])
        C = torch.cat([C, compare(X, [(n, n + 1)], gen)])
        best.append(float(utility(X).max()))
    return best


@pytest.mark.slow
@pytest.mark.parametrize("acqf_name", ["EUBO", "qEUBO"])
def test_preference_bo_tutorial_loop_matches_pairwise_gp(acqf_name):
    """Over seeds 0-2 the best utility found after 4 rounds is no worse than PairwiseGP's on
    average (per seed, when written: EUBO ours 5.83 / 5.75 / 6.11, PairwiseGP 5.25 / 6.15 /
    6.15; qEUBO ours 5.83 / 5.76 / 6.11, PairwiseGP 5.24 / 6.10 / 6.15)."""
    finals = {PairwiseLaplaceGP: [], PairwiseGP: []}
    for seed in range(3):
        ours = run_loop(PairwiseLaplaceGP, acqf_name, seed)
        ref = run_loop(PairwiseGP, acqf_name, seed)
        assert ours[0] == ref[0]  # the same initial data
        assert ours[-1] > ours[0] and ref[-1] > ref[0]  # both loops improve on the initial designs
        finals[PairwiseLaplaceGP].append(ours[-1])
        finals[PairwiseGP].append(ref[-1])
    mean_ours = sum(finals[PairwiseLaplaceGP]) / 3
    mean_ref = sum(finals[PairwiseGP]) / 3
    assert mean_ours >= mean_ref - SLACK, finals
