"""Edge cases of PreferenceData's input checks and of the probit tie likelihood's far tail."""

from __future__ import annotations

import mpmath  # a dependency of gpytorch
import numpy as np
import pytest
import torch

from botorch_pref.data.preferences import PreferenceData, PreferenceDataError
from botorch_pref.likelihoods import ObservationKind, PairwiseProbit


@pytest.mark.parametrize(
    "build",
    [
        lambda d: d.add_comparison(True, False),
        lambda d: d.add_tie(False, 3),
        lambda d: d.add_choice(torch.tensor([True, False]), chosen=1),
        lambda d: d.add_choice([0, 1, 2], chosen=np.True_),
        lambda d: d.add_choice([0, 1, 2], chosen=torch.tensor(True)),
        lambda d: d.add_ranking([0, 1, 2], order=np.array([True, False])),
    ],
)
def test_booleans_are_not_design_indices(build):
    """True/False are refused as design indices, as ``as_index_tensor`` and ``chosen`` do."""
    data = PreferenceData()
    with pytest.raises(PreferenceDataError, match="integer"):
        build(data)
    assert len(data) == 0


def test_non_integer_kind_stages_and_offset_are_refused():
    """Fractional or boolean kinds, stages and shift offsets are not truncated silently."""
    three = torch.tensor([[0, 1, 2]])
    with pytest.raises(PreferenceDataError, match="kind"):
        PreferenceData(three, kind=torch.tensor([1.6]))  # would be read as CHOICE
    with pytest.raises(PreferenceDataError, match="kind"):
        PreferenceData(torch.tensor([[0, 1]]), kind=torch.tensor([False]))
    with pytest.raises(PreferenceDataError, match="n_stages"):
        PreferenceData(three, kind=torch.tensor([2]), n_stages=torch.tensor([1.5]))
    # whole numbers in a floating tensor are still fine
    ok = PreferenceData(three, kind=torch.tensor([2.0]), n_stages=torch.tensor([2.0]))
    assert ok.kind.tolist() == [ObservationKind.RANKING] and ok.n_stages.tolist() == [2]
    pairs = PreferenceData.from_comparisons(torch.tensor([[0, 1]]))
    for offset in (1.7, True):
        with pytest.raises(PreferenceDataError, match="offset"):
            pairs.shift(offset)
    assert pairs.shift(2.0).options.tolist() == [[2, 3]]


def test_tie_threshold_setter_names_a_bad_value_and_keeps_the_old_one():
    lik = PairwiseProbit(tie_threshold=0.5)
    for bad in (-1.0, 0.0, float("nan"), float("inf"), torch.tensor([0.3, -0.2])):
        with pytest.raises(ValueError, match="tie_threshold must be positive"):
            lik.tie_threshold = bad
        assert float(lik.tie_threshold.detach()) == pytest.approx(0.5)
    lik.tie_threshold = 0.8
    assert float(lik.tie_threshold.detach()) == pytest.approx(0.8)


def _probit_tie_reference(delta: float, theta: float, s: float) -> tuple[float, float, float]:
    """log P(tie) and its first and negative second derivatives at 80 digits (mpmath)."""
    with mpmath.workdps(80):
        th, sc = mpmath.mpf(theta), mpmath.mpf(s)

        def log_tie(d):
            return mpmath.log(mpmath.ncdf((th - d) / sc) - mpmath.ncdf((-th - d) / sc))

        d = mpmath.mpf(abs(delta))  # P(tie) is even in delta; this side keeps the digits
        sign = -1.0 if delta < 0 else 1.0
        return (
            float(log_tie(d)),
            sign * float(mpmath.diff(log_tie, d)),
            float(-mpmath.diff(log_tie, d, 2)),
        )


@pytest.mark.parametrize(("dtype", "rtol"), [(torch.float64, 1e-8), (torch.float32, 2e-4)])
def test_probit_tie_derivatives_in_the_far_tail_match_high_precision(dtype, rtol):
    """Large utility differences: the tie's slope and curvature stay accurate (the curvature
    tends to 1 / s^2, like a pair's), in float32 as in float64."""
    lik = PairwiseProbit(0.7, tie_threshold=0.5).to(dtype)
    theta, s = float(lik.tie_threshold.detach()), lik.scale
    deltas = [0.3, -2.0, 8.0, -15.0, 20.0, 45.0, -100.0, 300.0, -3000.0, 1e4]
    with torch.no_grad():
        got = lik.tie_derivatives(torch.tensor(deltas, dtype=dtype))
    assert all(t.dtype == dtype for t in got)
    for i, delta in enumerate(deltas):
        want = _probit_tie_reference(delta, theta, s)
        for name, g, w in zip(("log_p", "grad", "neg_hess"), got, want, strict=True):
            assert float(g[i]) == pytest.approx(w, rel=rtol), (delta, name)
