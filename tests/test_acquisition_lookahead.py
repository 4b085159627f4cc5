"""The one-step lookahead on the recommendation, against Monte-Carlo references, and in the loop."""

from __future__ import annotations

import math

import pytest
import torch
from botorch.models import PairwiseGP
from botorch.models.likelihoods.pairwise import PairwiseLogitLikelihood

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.acquisition import LookaheadBestCompared, answer_update, probit_scale
from botorch_pref.acquisition.local import LocalBox, near_boundary
from botorch_pref.likelihoods import PairwiseLogit
from botorch_pref.loop import Local, Lookahead, LoopState, PreferenceOptimizer
from botorch_pref.loop.answers import Answer
from botorch_pref.loop.policy import DEFAULT_LOOKAHEAD_EVERY, configure
from botorch_pref.models.factories import laplace_model
from botorch_pref.models.pairwise import make_covar_module

DT = torch.float64
BRANIN_BOX = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], dtype=DT)


def _model(kernel: str = "matern32", n: int = 12, d: int = 2) -> PairwiseLaplaceGP:
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, d, generator=g, dtype=DT)
    f = -((X - 0.6) ** 2).sum(-1) + 0.2 * torch.sin(5 * X[:, 0])
    C = torch.tensor([[i, i + 1] if f[i] > f[i + 1] else [i + 1, i] for i in range(n - 1)])
    model = PairwiseLaplaceGP(X, C, covar_module=make_covar_module(d, base_kernel=kernel))
    model.covar_module.outputscale = 2.0
    model.covar_module.base_kernel.lengthscale = 0.3
    return model.eval()


def _mc_conditional_means(mean, cov, scale, n=1_000_000, seed=0):
    """E[g | first wins], E[g | first loses] and P(first wins) by weighting joint samples."""
    g = torch.Generator().manual_seed(seed)
    L = torch.linalg.cholesky(cov)
    f = mean + torch.randn(n, mean.shape[-1], generator=g, dtype=DT) @ L.T
    w = torch.special.ndtr((f[:, 0] - f[:, 1]) / scale)
    first = (w[:, None] * f).mean(0) / w.mean()
    second = ((1 - w)[:, None] * f).mean(0) / (1 - w).mean()
    return w.mean(), first, second


def test_answer_update_is_the_exact_conditional_mean():
    g = torch.Generator().manual_seed(1)
    A = torch.randn(5, 5, generator=g, dtype=DT)
    cov = A @ A.T / 5 + 0.1 * torch.eye(5, dtype=DT)
    mean = torch.randn(5, generator=g, dtype=DT)
    p, q, first, second = answer_update(mean, cov, 1.3)
    p_mc, first_mc, second_mc = _mc_conditional_means(mean, cov, 1.3)
    assert abs(float(p - p_mc)) < 2e-3 and abs(float(p + q - 1)) < 1e-12
    assert torch.allclose(first, first_mc, atol=5e-3)
    assert torch.allclose(second, second_mc, atol=5e-3)


def test_the_updated_means_average_back_and_the_value_bounds_the_best_mean():
    model = _model()
    compared = model.datapoints[:6]
    acqf = LookaheadBestCompared(model, compared)
    X = torch.rand(64, 2, 2, generator=torch.Generator().manual_seed(2), dtype=DT)
    Y = torch.cat([X, compared.expand(64, 6, 2)], dim=-2)
    post = model.posterior(Y)
    mean, cov = post.mean.squeeze(-1), post.distribution.covariance_matrix
    p, q, first, second = answer_update(mean, cov, acqf.noise_scale)
    assert torch.allclose(p[:, None] * first + q[:, None] * second, mean, atol=1e-10)
    with torch.no_grad():
        value = acqf(X)
    assert bool((value >= mean.amax(-1) - 1e-10).all())


@pytest.mark.parametrize("kernel", ["rbf", "matern32", "matern52"])
def test_the_value_matches_monte_carlo_and_the_posterior_path(kernel):
    model = _model(kernel)
    compared = model.datapoints[[1, 4, 7]]
    acqf = LookaheadBestCompared(model, compared)  # moments from the model's factors
    X = torch.rand(3, 2, 2, generator=torch.Generator().manual_seed(3), dtype=DT)
    with torch.no_grad():
        value = acqf(X)
        for b in range(3):
            post = model.posterior(torch.cat([X[b], compared]))
            mean, cov = post.mean.squeeze(-1), post.distribution.covariance_matrix
            p, first, second = _mc_conditional_means(mean, cov, acqf.noise_scale, seed=b)
            reference = p * first.max() + (1 - p) * second.max()
            assert abs(float(value[b] - reference)) < 1e-2, (b, value[b], reference)
            # the same formula on GPyTorch's posterior: equal to rounding
            p, q, first, second = answer_update(mean, cov, acqf.noise_scale)
            exact = p * first.max() + q * second.max()
            assert abs(float(value[b] - exact)) < 1e-10, (b, value[b], exact)


def test_the_gradient_matches_finite_differences():
    model = _model()
    acqf = LookaheadBestCompared(model, model.datapoints[:5])
    X = torch.rand(4, 2, 2, generator=torch.Generator().manual_seed(4), dtype=DT)
    X.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda Z: acqf(Z), (X,), eps=1e-6, atol=1e-5)


def test_probit_scales_of_the_likelihoods():
    X = torch.rand(6, 2, generator=torch.Generator().manual_seed(5), dtype=DT)
    C = torch.tensor([[0, 1], [2, 3], [4, 5]])
    assert probit_scale(_model()) == pytest.approx(math.sqrt(2.0))
    logit = PairwiseLaplaceGP(X, C, likelihood=PairwiseLogit(scale=2.0))
    assert probit_scale(logit) == pytest.approx(2.0 * math.sqrt(8 / math.pi))
    assert probit_scale(PairwiseGP(X, C)) == pytest.approx(math.sqrt(2.0))
    gp = PairwiseGP(X, C, likelihood=PairwiseLogitLikelihood())
    assert probit_scale(gp) == pytest.approx(math.sqrt(8 / math.pi))


def test_botorch_pairwisegp_takes_the_posterior_path():
    X = torch.rand(8, 2, generator=torch.Generator().manual_seed(6), dtype=DT)
    C = torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7]])
    gp = PairwiseGP(X, C).eval()
    acqf = LookaheadBestCompared(gp, X[:3])
    pairs = torch.rand(5, 2, 2, generator=torch.Generator().manual_seed(7), dtype=DT)
    value = acqf(pairs)
    assert value.shape == (5,)
    post = gp.posterior(torch.cat([pairs[0], X[:3]]))
    p, q, first, second = answer_update(
        post.mean.squeeze(-1), post.distribution.covariance_matrix, math.sqrt(2.0)
    )
    assert float(value[0]) == pytest.approx(float(p * first.max() + q * second.max()), abs=1e-8)


def test_bad_arguments_raise():
    model = _model()
    with pytest.raises(ValueError, match="compared"):
        LookaheadBestCompared(model, model.datapoints[0])
    with pytest.raises(ValueError, match="compared"):
        LookaheadBestCompared(model, model.datapoints[:0])
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="noise_scale"):
            LookaheadBestCompared(model, model.datapoints[:2], noise_scale=bad)
    with pytest.raises(ValueError, match="noise_scale"):
        probit_scale(object())
    with pytest.raises(ValueError, match="n >= 2"):
        answer_update(torch.zeros(1, dtype=DT), torch.eye(1, dtype=DT), 1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lookahead_every": -1},
        {"lookahead_every": 1.5},
        {"lookahead_every": 2, "strategy": "random"},
        {"lookahead_every": 2, "strategy": "qeubo", "q": 3},
        {"lookahead_every": 2, "answers": "choice"},
    ],
)
def test_bad_lookahead_settings_raise(kwargs):
    with pytest.raises(ValueError, match="lookahead_every"):
        _policy(**kwargs)


def _policy(strategy: str | None = None, q: int = 2, **settings):
    return configure(2, strategy, q, None, settings)[1]


def _due(policy, kind, n: int) -> list[int]:
    return [k for k in range(n) if any(isinstance(s, kind) for s in policy.due(k))]


def test_the_lookahead_schedule_counts_acquisition_queries():
    assert _due(_policy(n_initial=4, lookahead_every=3), Lookahead, 14) == [6, 9, 12]
    assert _due(_policy(n_initial=4, lookahead_every=0), Lookahead, 14) == []


@pytest.mark.parametrize(
    ("kwargs", "every"),
    [
        ({}, DEFAULT_LOOKAHEAD_EVERY),
        ({"strategy": "qeubo", "q": 2}, DEFAULT_LOOKAHEAD_EVERY),
        ({"model": "pairwisegp"}, DEFAULT_LOOKAHEAD_EVERY),
        ({"ties": True}, DEFAULT_LOOKAHEAD_EVERY),
        ({"strategy": "champion-challenger"}, 0),
        ({"strategy": "qeubo", "q": 3}, 0),
        ({"strategy": "random"}, 0),
        ({"answers": "choice"}, 0),
        ({"model": laplace_model}, 0),
    ],
)
def test_the_default_lookahead_schedule(kwargs, every):
    """EUBO and qEUBO pairs of built-in models ask lookahead queries by default; strategies and
    answers that cannot (or need not) ask them resolve to 0 instead of raising."""
    assert _policy(**kwargs).settings["lookahead_every"] == every


def test_the_default_optimiser_asks_every_third_query_by_lookahead():
    """With the defaults, EUBO's interior runs ask a lookahead pair at acquisition queries 3, 6,
    9 and EUBO's pair at the others; champion-challenger asks none."""
    for strategy, expected in (("eubo", {2, 5, 8}), ("champion-challenger", set())):
        opt = PreferenceOptimizer(BRANIN_BOX, strategy, n_initial=4, local_every=0, seed=4)
        asked = set()
        for k in range(13):
            if k >= 4 and isinstance(opt.acquisition_function()[0], LookaheadBestCompared):
                asked.add(k - 4)
            X = opt.ask()
            utility = -((X - torch.tensor((2.5, 7.5), dtype=DT)) ** 2).sum(-1)
            opt.tell(X, winner=int(utility.argmax()))
        assert asked == expected


def _better_than_random_pairs(acqf, pair_unit, seed):
    """The asked pair scores above 95% of 256 random pairs of the unit square (the value is a
    maximum of smooth pieces: the optimiser's restarts need not find the best of them), and at
    least as high as every pair of two compared designs (the optimiser starts from those)."""
    U = torch.rand(256, 2, 2, generator=torch.Generator().manual_seed(seed), dtype=DT)
    with torch.no_grad():
        asked = float(acqf(pair_unit.unsqueeze(0)))
        best_pair = float(acqf(acqf.compared_pairs()).max())
        return asked >= float(acqf(U).quantile(0.95)) and asked >= best_pair - 1e-12


@pytest.mark.parametrize("strategy", ["eubo", "champion-challenger"])
@pytest.mark.parametrize("peak", [(9.9, 2.5), (2.5, 7.5)])
def test_a_due_lookahead_query_maximises_the_lookahead_unless_a_local_one_is_due(strategy, peak):
    opt = PreferenceOptimizer(BRANIN_BOX, strategy, n_initial=4, lookahead_every=2, seed=1)
    kinds = []
    for k in range(14):
        if k >= 4:
            acqf = opt.acquisition_function()[0]
            champion = opt.to_unit(opt.best().x).unsqueeze(0)
            due = _due(opt.policy, Local, k + 1)[-1:] == [k]
            local = due and bool(near_boundary(champion, 0.05))
            assert isinstance(acqf, LookaheadBestCompared) == (k % 2 == 1 and not local)
            assert isinstance(acqf, LocalBox) == local
            kinds.append("local" if local else "lookahead" if k % 2 else "global")
        X = opt.ask()
        if kinds and kinds[-1] == "lookahead":
            assert _better_than_random_pairs(acqf, opt.to_unit(X), k)
        utility = -((X - torch.tensor(peak, dtype=DT)) ** 2).sum(-1)
        opt.tell(X, winner=int(utility.argmax()))
    # around the edge peak the due queries end local, around the interior one lookahead
    assert kinds[-1] == ("local" if peak[0] > 9.5 else "lookahead")


def test_batched_members_each_maximise_their_own_lookahead():
    state = LoopState.build(
        BRANIN_BOX,
        "eubo",
        n_initial=3,
        lookahead_every=1,
        local_every=0,
        seed=0,
        seeds=[0, 1, 2],
        backend="batched",
    )
    peaks = torch.tensor([[2.0, 12.0], [2.5, 7.5], [-3.0, 3.0]], dtype=DT)
    for k in range(7):
        if k >= 3:
            acqf = state.acquisition(state.groups[0], k)[0]
            assert isinstance(acqf, LookaheadBestCompared)
            for r in range(3):  # each member's compared set: its top designs by posterior mean
                top = state.means([r])[0].argmax()
                assert bool((acqf.compared[r] == state.record.X_unit[r, top]).all(-1).any())
        X = state.propose()
        if k >= 3:
            U = torch.rand(256, 3, 2, 2, generator=torch.Generator().manual_seed(k), dtype=DT)
            unit = (X - BRANIN_BOX[0]) / (BRANIN_BOX[1] - BRANIN_BOX[0])
            with torch.no_grad():  # one value per member: 1 x 3, and 256 x 3 random pairs
                asked = acqf(unit.unsqueeze(0))[0]
                assert bool((asked >= acqf(U).quantile(0.95, 0)).all())
                pairs = acqf.compared_pairs().transpose(0, 1)  # m x 3 x 2 x 2
                assert bool((asked >= acqf(pairs).amax(0) - 1e-12).all())
                post = acqf.model.posterior(torch.cat([unit, acqf.compared], dim=-2))
                p, q, first, second = answer_update(
                    post.mean.squeeze(-1), post.distribution.covariance_matrix, acqf.noise_scale
                )
                exact = p * first.amax(-1) + q * second.amax(-1)  # each member's own posterior
                assert torch.allclose(asked, exact, atol=1e-9)
        winners = [int((-((x - p) ** 2).sum(-1)).argmax()) for x, p in zip(X, peaks, strict=True)]
        state.record_answers(list(X), [Answer("winner", w) for w in winners])


def test_lookahead_queries_in_float32_stay_float32_and_replay():
    def run():
        opt = PreferenceOptimizer(
            BRANIN_BOX.float(), n_initial=3, lookahead_every=1, dtype=torch.float32, seed=2
        )
        for _ in range(7):
            X = opt.ask()
            assert X.dtype == torch.float32 and bool(torch.isfinite(X).all())
            assert bool(((X >= BRANIN_BOX[0].float()) & (X <= BRANIN_BOX[1].float())).all())
            opt.tell(X, winner=int((-((X - torch.tensor([2.5, 7.5])) ** 2).sum(-1)).argmax()))
        return opt.datapoints

    assert torch.equal(run(), run())  # seeded: the same answers give the same questions


def test_compared_pairs_are_every_pair_of_two_compared_designs():
    model = _model()
    designs = model.datapoints[:4]
    pairs = LookaheadBestCompared(model, designs).compared_pairs()
    expected = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert pairs.shape == (6, 2, 2)
    for pair, (i, j) in zip(pairs, expected, strict=True):
        assert torch.equal(pair, torch.stack([designs[i], designs[j]]))
    assert LookaheadBestCompared(model, designs[:1]).compared_pairs().shape == (0, 2, 2)
    batched = torch.stack([designs, designs.flip(0)])  # one set per member: 2 x 4 x d
    pairs = LookaheadBestCompared(model, batched).compared_pairs()
    assert pairs.shape == (2, 6, 2, 2)
    assert torch.equal(pairs[1, 0], torch.stack([designs[3], designs[2]]))


@pytest.mark.parametrize(("backend", "seeds"), [("batched", [0, 1]), ("sequential", [0])])
def test_a_lookahead_query_is_at_least_as_good_as_every_pair_of_compared_designs(backend, seeds):
    # In six dimensions a few random starts rarely come near a pair of two given designs; the
    # optimiser starts from those pairs too, so the asked pair is at least as good as the best.
    d = 6
    box = torch.stack([torch.zeros(d, dtype=DT), torch.ones(d, dtype=DT)])
    state = LoopState.build(
        box,
        n_initial=12,
        lookahead_every=1,
        local_every=0,
        num_restarts=2,
        raw_samples=16,
        seeds=seeds,
        backend=backend,
    )
    for k in range(18):
        if k >= 12:
            acqf = state.acquisition(state.groups[0], k)[0]
            assert isinstance(acqf, LookaheadBestCompared)
        X = state.propose()
        if k >= 12:
            pairs = acqf.compared_pairs()  # (members x) 66 x 2 x d
            with torch.no_grad():
                if backend == "batched":
                    asked, best = acqf(X.unsqueeze(0))[0], acqf(pairs.transpose(0, 1)).amax(0)
                else:
                    asked, best = acqf(X), acqf(pairs).amax(0)
            assert bool((asked >= best - 1e-12).all())
        winners = [int((-((x - 0.3) ** 2).sum(-1)).argmax()) for x in X]
        state.record_answers(list(X), [Answer("winner", w) for w in winners])
