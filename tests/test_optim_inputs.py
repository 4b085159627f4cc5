"""Argument checks of the batched optimisers in botorch_pref.optim."""

from __future__ import annotations

import pytest
import torch

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.acquisition import make_eubo
from botorch_pref.models.pairwise import make_covar_module
from botorch_pref.optim import minimize_batched, optimize_acqf_batched

DT = torch.float64


def _quadratic(x: torch.Tensor) -> torch.Tensor:
    return ((x - 0.3) ** 2).sum(-1)


def test_minimize_batched_rejects_non_finite_or_empty_starts() -> None:
    # A NaN start used to come back as NaN variables, against the "always finite" promise.
    x0 = torch.full((3, 2), 0.5, dtype=DT)
    x0[1, 0] = float("nan")
    with pytest.raises(ValueError, match=r"x0 must be finite.*\[1\]"):
        minimize_batched(_quadratic, x0, (0.0, 1.0))
    x0[1, 0] = float("inf")
    with pytest.raises(ValueError, match="x0 must be finite"):
        minimize_batched(_quadratic, x0, (0.0, 1.0))
    with pytest.raises(ValueError, match="x0 must be N x P"):
        minimize_batched(_quadratic, torch.empty(0, 2, dtype=DT), (0.0, 1.0))
    x, _ = minimize_batched(_quadratic, torch.full((2, 2), 0.9, dtype=DT), (0.0, 1.0))
    torch.testing.assert_close(x, torch.full((2, 2), 0.3, dtype=DT), atol=1e-6, rtol=0)


@pytest.fixture(scope="module")
def eubo_of_two_members():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(2, 8, 2, generator=g, dtype=DT)
    C = torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7], [1, 2]]).expand(2, -1, -1)
    kernel = make_covar_module(2, batch_shape=torch.Size([2]))
    return make_eubo(PairwiseLaplaceGP(X, C, covar_module=kernel))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_restarts": 0}, "num_restarts"),
        ({"raw_samples": 0}, "raw_samples"),
        ({"raw_batch_limit": 0}, "raw_batch_limit"),
        ({"q": 0}, "q must be"),
        ({"dim": 1.5}, "dim must be"),
        ({"batch_size": 1, "seeds": [0]}, r"batch_size .*\(2,\)"),
        ({"batch_size": 3, "seeds": [0, 1, 2]}, r"batch_size .*\(2,\)"),
    ],
)
def test_optimize_acqf_batched_names_the_bad_argument(
    eubo_of_two_members, changes: dict, message: str
) -> None:
    kwargs = {"num_restarts": 2, "raw_samples": 8, "seeds": [0, 1]}
    args = {"batch_size": 2, "q": 2, "dim": 2}
    for key in list(changes):
        (args if key in args else kwargs)[key] = changes[key]
    with pytest.raises(ValueError, match=message):
        optimize_acqf_batched(
            eubo_of_two_members, args["batch_size"], args["q"], args["dim"], **kwargs
        )


def test_optimize_acqf_batched_values_share_the_candidates_dtype(eubo_of_two_members) -> None:
    # dtype=float32 on a float64 model used to give float32 candidates but float64 values.
    kwargs = {"num_restarts": 2, "raw_samples": 8, "seeds": [0, 1], "maxiter": 5}
    cand, values = optimize_acqf_batched(
        eubo_of_two_members, 2, 2, 2, dtype=torch.float32, **kwargs
    )
    assert cand.dtype == torch.float32 and values.dtype == torch.float32
    with torch.no_grad():
        at_cand = eubo_of_two_members(cand.unsqueeze(0)).squeeze(0)  # r=1 x b -> b
    torch.testing.assert_close(values, at_cand.to(torch.float32))
    # float64, the default, is unchanged: both float64
    cand64, values64 = optimize_acqf_batched(eubo_of_two_members, 2, 2, 2, **kwargs)
    assert cand64.dtype == values64.dtype == torch.float64


def _narrow_peak(X: torch.Tensor) -> torch.Tensor:
    """``r x b x q x d -> r x b``: a bump of width 0.01 at 0.77 in every coordinate, flat (to
    the last bit) everywhere a random start lands."""
    return torch.exp(-((X - 0.77) ** 2).sum((-2, -1)) / (2 * 0.01**2))


def test_optimize_acqf_batched_starts_from_the_initial_candidates_too() -> None:
    kwargs = {"num_restarts": 2, "raw_samples": 16, "seeds": [0, 1]}
    _, values = optimize_acqf_batched(_narrow_peak, 2, 1, 3, **kwargs)
    assert bool((values < 1e-6).all())  # random starts never see the bump
    initial = torch.rand(2, 5, 1, 3, generator=torch.Generator().manual_seed(0), dtype=DT)
    initial[1, 3] = 0.765  # member 1 is offered a start on the bump's flank, member 0 is not
    cand, values = optimize_acqf_batched(_narrow_peak, 2, 1, 3, initial=initial, **kwargs)
    assert float(values[0]) < 1e-6
    torch.testing.assert_close(cand[1], torch.full((1, 3), 0.77, dtype=DT), atol=1e-4, rtol=0)
    # no candidates (m = 0) is the same as none
    empty = optimize_acqf_batched(_narrow_peak, 2, 1, 3, initial=initial[:, :0], **kwargs)
    torch.testing.assert_close(empty, optimize_acqf_batched(_narrow_peak, 2, 1, 3, **kwargs))


@pytest.mark.parametrize(
    ("initial", "message"),
    [
        (torch.full((1, 4, 1, 3), 0.5, dtype=DT), r"2 x m x 1 x 3"),
        (torch.full((2, 4, 2, 3), 0.5, dtype=DT), r"2 x m x 1 x 3"),
        (torch.full((2, 4, 3), 0.5, dtype=DT), r"2 x m x 1 x 3"),
        ([[[[0.5, 0.5, 0.5]]]] * 2, r"got list"),
        (torch.full((2, 4, 1, 3), 1.5, dtype=DT), "unit cube"),
        (torch.full((2, 4, 1, 3), float("nan"), dtype=DT), "unit cube"),
    ],
)
def test_optimize_acqf_batched_rejects_bad_initial_candidates(initial, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        optimize_acqf_batched(
            _narrow_peak, 2, 1, 3, num_restarts=2, raw_samples=4, seeds=[0, 1], initial=initial
        )
