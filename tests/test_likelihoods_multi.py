"""Choice, ranking and tie likelihoods against Monte Carlo, autograd and each other."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from botorch_pref.lfpl.plackett_luce import plackett_luce_nll
from botorch_pref.likelihoods import (
    Choice,
    ObservationKind,
    PairwiseLogit,
    PairwiseProbit,
    Ranking,
)

DT = torch.float64
PAIR, CHOICE, RANKING, TIE = (int(k) for k in list(ObservationKind)[:4])


def _obs(lik, delta, kind, stages, valid):
    return lik.observation_derivatives(delta, kind, stages, valid)


def _single(lik, utilities, kind, stages):
    """Log-probability of one observation whose options (best first) have ``utilities``."""
    u = torch.as_tensor(utilities, dtype=DT)
    delta = (u[0] - u[1:]).reshape(1, 1, -1)
    valid = torch.ones(1, 1, len(u), dtype=torch.bool)
    return _obs(lik, delta, torch.tensor([[kind]]), torch.tensor([[stages]]), valid)[0][0, 0]


def test_choice_matches_gumbel_monte_carlo():
    g = torch.Generator().manual_seed(0)
    u = torch.tensor([0.3, -0.2, 0.9, 0.0], dtype=DT)
    s = 0.7
    n = 400_000
    gumbel = -torch.log(-torch.log(torch.rand(n, 4, generator=g, dtype=DT)))
    picks = torch.argmax(u + s * gumbel, dim=-1)
    lik = Choice(scale=s)
    for c in range(4):
        order = [c] + [j for j in range(4) if j != c]
        p = float(torch.exp(_single(lik, u[order], CHOICE, 1)))
        freq = float((picks == c).to(DT).mean())
        assert abs(p - freq) < 4 * math.sqrt(p * (1 - p) / n)


def test_ranking_matches_gumbel_monte_carlo_and_product_of_choices():
    g = torch.Generator().manual_seed(1)
    u = torch.tensor([0.5, -0.4, 0.1], dtype=DT)
    s = 1.3
    n = 300_000
    gumbel = -torch.log(-torch.log(torch.rand(n, 3, generator=g, dtype=DT)))
    ranks = torch.argsort(u + s * gumbel, dim=-1, descending=True)
    lik, choice = Ranking(scale=s), Choice(scale=s)
    for perm in itertools.permutations(range(3)):
        log_p = _single(lik, u[list(perm)], RANKING, 2)
        p = float(torch.exp(log_p))
        freq = float((ranks == torch.tensor(perm)).all(-1).to(DT).mean())
        assert abs(p - freq) < 4 * math.sqrt(p * (1 - p) / n)
        # product of choices among the remaining options (the last choice is a pair)
        first = _single(choice, u[list(perm)], CHOICE, 1)
        second = PairwiseLogit(s).log_prob(u[perm[1]] - u[perm[2]])
        torch.testing.assert_close(log_p, first + second)
    # top-1 ranking == choice; top-2 of 4 == product of its two stages
    u4 = torch.tensor([0.2, 1.0, -0.5, 0.3], dtype=DT)
    torch.testing.assert_close(_single(lik, u4, RANKING, 1), _single(choice, u4, CHOICE, 1))
    top2 = _single(lik, u4, RANKING, 2)
    torch.testing.assert_close(
        top2, _single(choice, u4, CHOICE, 1) + _single(choice, u4[1:], CHOICE, 1)
    )


def test_ranking_equals_lfpl_plackett_luce():
    g = torch.Generator().manual_seed(2)
    u = torch.randn(6, 5, generator=g, dtype=DT)
    stages = torch.tensor([4, 3, 2, 1, 4, 2])
    lik = Ranking(scale=1.0)
    delta = (u[:, :1] - u[:, 1:]).unsqueeze(0)
    valid = torch.ones(1, 6, 5, dtype=torch.bool)
    kind = torch.full((1, 6), RANKING)
    log_p = _obs(lik, delta, kind, stages.unsqueeze(0), valid)[0][0]
    nll = plackett_luce_nll(u, top_k=stages, reduction="none")
    torch.testing.assert_close(log_p, -nll)


@pytest.mark.parametrize("lik_cls", [PairwiseProbit, PairwiseLogit])
def test_tie_probabilities_match_monte_carlo(lik_cls):
    g = torch.Generator().manual_seed(3)
    theta = 0.6
    lik = lik_cls(0.8, tie_threshold=theta)
    n = 400_000
    for delta in (-1.0, 0.0, 0.3, 2.0):
        if lik_cls is PairwiseProbit:  # N(0, sigma^2) on each option
            noise = 0.8 * (torch.randn(n, generator=g, dtype=DT) - torch.randn(n, generator=g))
        else:  # Gumbel on each option: their difference is logistic with scale s
            uu = torch.rand(n, generator=g, dtype=DT)
            noise = 0.8 * torch.log(uu / (1 - uu))
        perceived = delta + noise
        d = torch.tensor(delta, dtype=DT)
        for event, log_p in (
            (perceived.abs() <= theta, lik.tie_derivatives(d)[0]),
            (perceived > theta, lik.log_prob(d)),
            (perceived < -theta, lik.log_prob(-d)),
        ):
            p = float(torch.exp(log_p.detach()))
            freq = float(event.to(DT).mean())
            assert abs(p - freq) < 4 * math.sqrt(p * (1 - p) / n) + 1e-12


@pytest.mark.parametrize(
    "lik", [PairwiseProbit(0.7, tie_threshold=0.5), PairwiseLogit(1.5, tie_threshold=0.3)]
)
def test_tie_derivatives_match_autograd_and_are_stable(lik):
    delta = torch.linspace(-12.0, 12.0, 48, dtype=DT, requires_grad=True)  # avoids delta = 0
    _, grad, neg_hess = lik.tie_derivatives(delta.detach())
    ref = lik.tie_derivatives(delta)[0]
    (g,) = torch.autograd.grad(ref.sum(), delta, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), delta)
    torch.testing.assert_close(grad, g.detach())
    torch.testing.assert_close(neg_hess, -h, atol=1e-9, rtol=1e-6)
    assert bool((neg_hess >= 0).all())
    # finite differences at 0 (autograd through |delta| has a kink there)
    eps = 1e-4
    z = torch.tensor([-eps, 0.0, eps], dtype=DT)
    lp = lik.tie_derivatives(z)[0]
    fd = -(lp[0] - 2 * lp[1] + lp[2]) / eps**2
    torch.testing.assert_close(lik.tie_derivatives(z)[2][1], fd, atol=1e-5, rtol=1e-5)
    # far tails: finite and the curvature bounded
    far = torch.tensor([-1e3, -60.0, 60.0, 1e3], dtype=DT)
    for t in lik.tie_derivatives(far):
        assert bool(torch.isfinite(t).all())


def test_tie_threshold_is_differentiable():
    lik = PairwiseProbit(tie_threshold=0.4)
    delta = torch.tensor([-0.7, 0.1, 1.5], dtype=DT)
    raw = lik.raw_tie_threshold
    out = lik.tie_derivatives(delta)
    grads = [torch.autograd.grad(t.sum(), raw, retain_graph=True)[0] for t in out]
    eps = 1e-6
    with torch.no_grad():
        raw.add_(eps)
        up = lik.tie_derivatives(delta)
        raw.sub_(2 * eps)
        down = lik.tie_derivatives(delta)
        raw.add_(eps)
    for gr, u, d in zip(grads, up, down, strict=True):
        torch.testing.assert_close(gr, ((u - d) / (2 * eps)).sum(), atol=1e-6, rtol=1e-5)


def _mixed(lik_kinds):
    g = torch.Generator().manual_seed(4)
    delta = torch.randn(2, 5, 3, generator=g, dtype=DT)
    valid = torch.ones(2, 5, 4, dtype=torch.bool)
    valid[:, 0, 2:] = False  # a pair
    valid[:, 1, 3:] = False  # a choice among 3
    valid[1, 4] = False  # padding observation
    valid[:, 3, 2:] = False  # a tie or a pair
    delta = torch.where(valid[..., 1:], delta, torch.zeros_like(delta))
    kind = torch.tensor([[PAIR, CHOICE, RANKING, lik_kinds, RANKING]] * 2)
    stages = torch.tensor([[1, 1, 2, 1, 3]] * 2)
    return delta, kind, stages, valid


@pytest.mark.parametrize("second", [PAIR, TIE])
def test_observation_blocks_match_autograd(second):
    if second == TIE:
        lik = PairwiseProbit(tie_threshold=0.5)
        delta, kind, stages, valid = _mixed(TIE)
        keep = (kind == PAIR) | (kind == TIE)
        kind = torch.where(keep, kind, TIE)
        valid = valid.clone()
        valid[:, :, 2:] = False
        delta = torch.where(valid[..., 1:], delta, torch.zeros_like(delta))
        stages = torch.where(kind == TIE, 0, 1)
    else:
        lik = Ranking(0.9)
        delta, kind, stages, valid = _mixed(PAIR)
    log_p, grad, H = lik.observation_derivatives(delta, kind, stages, valid)

    def total(d):
        return lik.observation_derivatives(d, kind, stages, valid)[0].sum()

    J = torch.autograd.functional.jacobian(total, delta)
    torch.testing.assert_close(grad, J)
    full = torch.autograd.functional.hessian(total, delta).reshape(30, 30)
    torch.testing.assert_close(torch.block_diag(*H.reshape(10, 3, 3)), -full)
    assert float(torch.linalg.eigvalsh(H).min()) > -1e-12  # PSD blocks
    assert float(log_p[1, 4]) == 0.0 and float(H[1, 4].abs().sum()) == 0.0  # padding


def test_unsupported_kinds_name_the_kind():
    delta, kind, stages, valid = _mixed(TIE)
    with pytest.raises(ValueError, match="PairwiseProbit cannot model CHOICE"):
        PairwiseProbit().observation_derivatives(delta, kind, stages, valid)
    with pytest.raises(ValueError, match="Choice cannot model RANKING"):
        Choice().check_kinds([PAIR, RANKING])
    with pytest.raises(ValueError, match=r"cannot model TIE.*tie_threshold"):
        PairwiseLogit().check_kinds([TIE])
    with pytest.raises(ValueError, match="tie_threshold must be a positive"):
        PairwiseProbit(tie_threshold=-1.0)


def test_choice_of_two_is_pairwise_logit_and_threshold_none_changes_nothing():
    delta = torch.linspace(-5, 5, 11, dtype=DT)
    for a, b in zip(
        Choice(1.7).derivatives(delta), PairwiseLogit(1.7).derivatives(delta), strict=True
    ):
        assert torch.equal(a, b)
    u = torch.stack([delta, torch.zeros_like(delta)], -1)
    ch = torch.stack([_single(Choice(1.7), row, CHOICE, 1) for row in u])
    torch.testing.assert_close(ch, PairwiseLogit(1.7).log_prob(delta))
    assert list(PairwiseProbit().parameters()) == []


def test_threshold_shifts_win_probability():
    lik = PairwiseLogit(1.0, tie_threshold=0.5)
    delta = torch.tensor([0.2, 1.0], dtype=DT)
    torch.testing.assert_close(lik.log_prob(delta), torch.nn.functional.logsigmoid(delta - 0.5))
    probit = PairwiseProbit(tie_threshold=0.5)
    p = probit.predictive_probability(delta, torch.zeros_like(delta))
    torch.testing.assert_close(p, torch.special.ndtr((delta - 0.5) / math.sqrt(2)))


def test_float32_observation_derivatives():
    delta, kind, stages, valid = _mixed(PAIR)
    lik = Ranking()
    out32 = lik.observation_derivatives(delta.float(), kind, stages, valid)
    out64 = lik.observation_derivatives(delta, kind, stages, valid)
    for a, b in zip(out32, out64, strict=True):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a.double(), b, atol=1e-5, rtol=1e-5)
    tie = PairwiseProbit(tie_threshold=0.5).to(torch.float32)
    out = tie.tie_derivatives(torch.tensor([-30.0, 0.0, 3.0]))
    assert all(t.dtype == torch.float32 and bool(torch.isfinite(t).all()) for t in out)
