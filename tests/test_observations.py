"""PreferenceData, the general Laplace engine and PairwiseLaplaceGP on choices, rankings, ties."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from scipy.optimize import minimize

from botorch_pref import (
    Choice,
    LaplaceEvidence,
    ObservationKind,
    PairwiseLaplaceGP,
    PairwiseLogit,
    PairwiseProbit,
    PreferenceData,
    PreferenceDataError,
    Ranking,
)
from botorch_pref.inference import (
    BlockEngine,
    ObservationStructure,
    PairEngine,
    build_observations,
    merge_pairs,
    predictive_terms,
)

from .helpers import random_comparisons

DT = torch.float64


def rbf(X, lengthscale=0.4, outputscale=2.0):
    sq = ((X.unsqueeze(-2) - X.unsqueeze(-3)) ** 2).sum(-1)
    return outputscale * torch.exp(-0.5 * sq / lengthscale**2)


def mixed_data(with_ties: bool = False) -> PreferenceData:
    data = PreferenceData.from_comparisons(torch.tensor([[0, 1], [2, 3], [4, 0]]))
    if with_ties:
        return data.add_tie(1, 5).add_tie(6, 7).add_comparison(7, 2)
    data.add_choice([1, 2, 5, 6], chosen=5)
    data.add_ranking([0, 3, 6, 7], order=[7, 0, 6, 3])
    data.add_ranking([1, 4, 5, 8, 9], order=[9, 1], top_k=2)
    return data


# ----------------------------------------------------------------- container
def test_container_layout():
    data = mixed_data()
    assert data.options.tolist() == [
        [0, 1, -1, -1, -1],
        [2, 3, -1, -1, -1],
        [4, 0, -1, -1, -1],
        [5, 1, 2, 6, -1],
        [7, 0, 6, 3, -1],
        [9, 1, 4, 5, 8],
    ]
    K = ObservationKind
    assert data.kind.tolist() == [K.PAIR, K.PAIR, K.PAIR, K.CHOICE, K.RANKING, K.RANKING]
    assert data.n_stages.tolist() == [1, 1, 1, 1, 3, 2]
    assert not data.is_pairwise and len(data) == 6
    # normalisation: a choice of two and a ranking of two are pairs, a top-1 ranking a choice
    d = PreferenceData().add_choice([3, 4], chosen=4).add_ranking([1, 2], order=[2, 1])
    assert d.is_pairwise and d.as_comparisons().tolist() == [[4, 3], [2, 1]]
    d = PreferenceData().add_ranking([1, 2, 3], order=[2], top_k=1)
    assert d.kind.tolist() == [K.CHOICE]
    tie = PreferenceData().add_tie(2, 5)
    assert tie.kind.tolist() == [K.TIE] and tie.n_stages.tolist() == [0]
    joined = PreferenceData.cat([tie, data])
    assert joined.max_options == 5 and joined.options[0].tolist() == [2, 5, -1, -1, -1]
    assert (tie + data) == joined
    assert data.shift(10).options[0, :2].tolist() == [10, 11]
    assert data.shift(10).options[0, 2] == -1
    # a negative shift that would move a design onto the padding value (-1) is refused
    choice = PreferenceData().add_choice([1, 2, 3, 0], chosen=1)
    with pytest.raises(PreferenceDataError, match=r"shift\(-1\) would make design index 0"):
        choice.shift(-1)
    assert choice.shift(0) == choice
    assert data.to("cpu") is data or data.to("cpu") == data


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda d: d.add_choice([1, 2, 3], chosen=4), "not one of the options"),
        (lambda d: d.add_choice([1, 1, 3], chosen=1), "more than once"),
        (lambda d: d.add_choice([1], chosen=1), "at least two"),
        (lambda d: d.add_ranking([1, 2, 3], order=[4]), "not in options"),
        (lambda d: d.add_ranking([1, 2, 3], order=[1, 2], top_k=3), "top_k"),
        (lambda d: d.add_tie(2, 2), "more than once"),
        (lambda d: d.add_comparison(-1, 2), "non-negative"),
        (lambda d: d.add_choice([0.5, 1], chosen=1), "integer"),
        (lambda d: d.add_choice([4, 5, 6], chosen=5.7), "chosen must be an integer, got 5.7"),
        (lambda d: d.add_choice([0, 1, 2], chosen=True), "chosen must be an integer, got True"),
        (lambda d: d.add_ranking([1, 2, 3], order=[1, 2], top_k=1.5), "top_k must be an integer"),
    ],
)
def test_container_errors(build, match):
    with pytest.raises(PreferenceDataError, match=match):
        build(PreferenceData())


def test_container_tensor_errors():
    with pytest.raises(PreferenceDataError, match="kind is required"):
        PreferenceData(torch.tensor([[0, 1, 2]]))
    with pytest.raises(PreferenceDataError, match="exactly two"):
        PreferenceData(torch.tensor([[0, 1, 2]]), kind=torch.tensor([ObservationKind.TIE]))
    with pytest.raises(PreferenceDataError, match="then -1 padding"):
        PreferenceData(torch.tensor([[0, -1, 2]]), kind=torch.tensor([ObservationKind.CHOICE]))
    with pytest.raises(PreferenceDataError, match="n_stages out of range"):
        PreferenceData(
            torch.tensor([[0, 1, 2]]),
            kind=torch.tensor([ObservationKind.RANKING]),
            n_stages=torch.tensor([3]),
        )
    with pytest.raises(PreferenceDataError, match=r"\[0, 4\]"):
        PairwiseLaplaceGP(torch.rand(5, 2, dtype=DT), mixed_data(), likelihood=Ranking())
    with pytest.raises(PreferenceDataError, match="answer"):
        PairwiseLaplaceGP(torch.rand(5, 2, dtype=DT), PreferenceData(), likelihood=Ranking())


# -------------------------------------------------------------------- engine
def _structure(data: PreferenceData) -> ObservationStructure:
    flat = data.reshape(1)
    return build_observations(flat.options, flat.kind, flat.n_stages)


def _engine(lik, s: ObservationStructure) -> BlockEngine:
    return BlockEngine(lik, s, n=int(s.rows.max()) + 1)


def _brute_force(lik, data: PreferenceData, K: torch.Tensor):
    """Maximise Psi = log p(D | f) - f^T K^-1 f / 2 with SciPy L-BFGS and an explicit K^-1."""
    s = _structure(data)
    Kinv = torch.linalg.inv(K[0])
    rows = s.rows[0]

    def psi(f):
        d = (f[rows[:, 0]] - f[rows[:, 1]]).unsqueeze(0)
        return _engine(lik, s).terms(d)[0][0] - 0.5 * f @ Kinv @ f

    def fun(x):
        f = torch.tensor(x, dtype=DT, requires_grad=True)
        val = -psi(f)
        (g,) = torch.autograd.grad(val, f)
        return float(val.detach()), g.numpy()

    res = minimize(
        fun,
        np.zeros(K.shape[-1]),
        jac=True,
        method="L-BFGS-B",
        tol=1e-14,
        options={"maxiter": 5000, "gtol": 1e-11},
    )
    f = torch.tensor(res.x, dtype=DT)
    # polish with dense Newton steps on the autograd gradient and Hessian (K^-1 is
    # ill-conditioned, so L-BFGS alone stops a few 1e-6 short)
    for _ in range(5):
        grad = torch.autograd.functional.jacobian(psi, f)
        hess = torch.autograd.functional.hessian(psi, f)
        f = f - torch.linalg.solve(hess, grad)
    hess = torch.autograd.functional.hessian(psi, f)
    W = -hess - Kinv  # the likelihood's curvature
    return f, psi(f).detach(), W


@pytest.mark.parametrize("form", ["comparison", "design"])
@pytest.mark.parametrize("ties", [False, True])
def test_mode_and_evidence_match_brute_force(form, ties):
    X = torch.rand(10, 2, dtype=DT, generator=torch.Generator().manual_seed(0))
    K = rbf(X).unsqueeze(0)
    data = mixed_data(with_ties=ties)
    lik = PairwiseProbit(tie_threshold=0.6) if ties else Ranking(0.8)
    s = _structure(data)
    mode = _engine(lik, s).find_mode(K, form=form)
    assert bool(mode.converged.all()) and mode.form == form
    f_ref, psi_ref, W = _brute_force(lik, data, K)
    torch.testing.assert_close(mode.f[0], f_ref, atol=1e-6, rtol=0)
    log_z, f = _engine(lik, s).evidence_with_gradients(K, mode)
    ref = psi_ref - 0.5 * torch.logdet(torch.eye(10, dtype=DT) + K[0] @ W)
    torch.testing.assert_close(log_z[0].detach(), ref, atol=1e-7, rtol=0)
    torch.testing.assert_close(f.detach(), mode.f, atol=1e-9, rtol=0)
    # posterior covariance at the designs: (K^-1 + W)^-1
    factors = _engine(lik, s).laplace_factors(K, mode)
    _, V = predictive_terms(factors, K)
    cov = K[0] - V[0].T @ V[0]
    ref_cov = torch.linalg.inv(torch.linalg.inv(K[0]) + W)
    torch.testing.assert_close(cov, ref_cov, atol=1e-7, rtol=1e-6)
    mean, _ = predictive_terms(factors, K)
    torch.testing.assert_close(mean[0], mode.f[0], atol=1e-9, rtol=0)


@pytest.mark.parametrize("lik", [PairwiseProbit(), PairwiseLogit()], ids=["probit", "logit"])
def test_general_engine_on_pairs_equals_pairwise_engine(lik):
    X, C = random_comparisons(12, 20, seed=0)
    K = rbf(X).unsqueeze(0)
    s_pair = PairEngine(lik, merge_pairs(C.unsqueeze(0), 12), 12)
    s_obs = _structure(PreferenceData.from_comparisons(C))
    for form in ("comparison", "design"):
        m1 = s_pair.find_mode(K, form=form)
        m2 = _engine(lik, s_obs).find_mode(K, form=form)
        torch.testing.assert_close(m1.f, m2.f, atol=1e-10, rtol=0)
        e1 = s_pair.evidence_with_gradients(K, m1)[0]
        e2 = _engine(lik, s_obs).evidence_with_gradients(K, m2)[0]
        torch.testing.assert_close(e1, e2)


def test_choice_of_two_equals_pairwise_logit_model():
    X, C = random_comparisons(10, 15, seed=1)
    data = PreferenceData()
    for w, l_ in C.tolist():
        data.add_choice([l_, w], chosen=w)
    a = PairwiseLaplaceGP(X, C, likelihood=PairwiseLogit())
    b = PairwiseLaplaceGP(X, data, likelihood=Choice())
    assert isinstance(b.engine, PairEngine)  # the pair engine
    assert torch.equal(a.utility, b.utility)
    assert torch.equal(a.laplace_evidence(), b.laplace_evidence())
    Xt = torch.rand(4, 2, dtype=DT)
    assert torch.equal(a.posterior(Xt).variance, b.posterior(Xt).variance)


# --------------------------------------------------------------------- model
def _fd_check(model, names):
    model.laplace_evidence()
    params = dict(model.named_parameters())
    value = model.laplace_evidence().sum()
    grads = torch.autograd.grad(value, [params[n] for n in names])
    for name, grad in zip(names, grads, strict=True):
        p = params[name]
        eps = 1e-5
        with torch.no_grad():
            p.add_(eps)
            up = model.laplace_evidence().sum()
            p.sub_(2 * eps)
            down = model.laplace_evidence().sum()
            p.add_(eps)
        torch.testing.assert_close(grad.sum(), (up - down) / (2 * eps), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("form", ["comparison", "design"])
def test_evidence_gradient_matches_finite_differences(form):
    X = torch.rand(10, 2, dtype=DT, generator=torch.Generator().manual_seed(2))
    data = mixed_data(with_ties=True)
    model = PairwiseLaplaceGP(
        X, data, likelihood=PairwiseLogit(tie_threshold=0.4), form=form, tol=1e-12
    )
    model.covar_module.base_kernel.lengthscale = torch.tensor([[0.3, 0.5]], dtype=DT)
    model.covar_module.outputscale = torch.tensor(3.0, dtype=DT)
    _fd_check(
        model,
        [
            "likelihood.raw_tie_threshold",
            "covar_module.raw_outputscale",
            "covar_module.base_kernel.raw_lengthscale",
        ],
    )
    model2 = PairwiseLaplaceGP(X, mixed_data(), likelihood=Ranking(), form=form, tol=1e-12)
    _fd_check(model2, ["covar_module.raw_outputscale", "covar_module.base_kernel.raw_lengthscale"])


def _tie_data(theta: float, seed: int) -> tuple[torch.Tensor, PreferenceData]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(30, 1, generator=g, dtype=DT)
    u = 3 * torch.sin(5 * X[:, 0])
    data = PreferenceData()
    for _ in range(120):
        i, j = torch.randperm(30, generator=g)[:2].tolist()
        diff = float(u[i] - u[j] + 0.5 * torch.randn((), generator=g, dtype=DT))
        if abs(diff) <= theta:
            data.add_tie(i, j)
        elif diff > 0:
            data.add_comparison(i, j)
        else:
            data.add_comparison(j, i)
    return X, data


def test_many_ties_fit_a_larger_threshold():
    fitted = []
    for theta in (0.0, 1.0):
        X, data = _tie_data(theta, seed=5)
        model = PairwiseLaplaceGP(X, data, likelihood=PairwiseProbit(0.5, tie_threshold=0.3))
        fit_gpytorch_mll(LaplaceEvidence(model.likelihood, model))
        fitted.append(float(model.likelihood.tie_threshold))
    assert ObservationKind.TIE in _tie_data(1.0, 5)[1].kinds_present
    assert fitted[1] > 2 * fitted[0]
    assert 0.5 < fitted[1] < 2.0


def test_unsupported_kind_raises_naming_it():
    X = torch.rand(10, 2, dtype=DT)
    with pytest.raises(PreferenceDataError, match="PairwiseProbit cannot model CHOICE"):
        PairwiseLaplaceGP(X, mixed_data())
    with pytest.raises(PreferenceDataError, match="cannot model TIE"):
        PairwiseLaplaceGP(X, mixed_data(with_ties=True), likelihood=PairwiseLogit())


def test_pairwise_preference_data_takes_the_pairwise_path():
    X, C = random_comparisons(10, 15, seed=3)
    a = PairwiseLaplaceGP(X, C)
    b = PairwiseLaplaceGP(X, PreferenceData.from_comparisons(C))
    assert torch.equal(a.utility, b.utility) and torch.equal(b.comparisons, C)
    assert b.preference_data == PreferenceData.from_comparisons(C)


def test_set_train_data_and_condition_on_observations():
    g = torch.Generator().manual_seed(4)
    X = torch.rand(10, 2, dtype=DT, generator=g)
    model = PairwiseLaplaceGP(X, mixed_data(), likelihood=Ranking())
    Xn = torch.rand(3, 2, dtype=DT, generator=g)
    Y = torch.tensor([[0, 1], [2, 0]])
    cond = model.condition_on_observations(Xn, Y)
    ref_data = mixed_data().extend(PreferenceData.from_comparisons(Y + 10))
    fresh = PairwiseLaplaceGP(torch.cat([X, Xn]), ref_data, likelihood=Ranking())
    assert cond.comparisons == ref_data
    torch.testing.assert_close(cond.utility, fresh.utility, atol=1e-8, rtol=0)
    # fantasize-style batch of Y
    Yb = torch.tensor([[[0, 1]], [[1, 0]]])
    condb = model.condition_on_observations(Xn[:2].expand(2, 2, 2), Yb)
    assert condb.batch_shape == torch.Size([2])
    assert not torch.allclose(condb.utility[0], condb.utility[1])
    # set_train_data with different data
    model.set_train_data(X, mixed_data().add_choice([0, 8, 9], chosen=8))
    fresh = PairwiseLaplaceGP(X, mixed_data().add_choice([0, 8, 9], chosen=8), likelihood=Ranking())
    torch.testing.assert_close(model.utility, fresh.utility, atol=1e-8, rtol=0)


def test_batched_general_data_equal_separate_models():
    g = torch.Generator().manual_seed(6)
    X = torch.rand(2, 10, 2, dtype=DT, generator=g)
    d0, d1 = (
        mixed_data(),
        PreferenceData.from_comparisons(torch.tensor([[3, 4]])).add_choice([5, 6, 7], chosen=7),
    )
    # pad d1 to d0's size with padding rows
    pad = PreferenceData(torch.full((len(d0) - len(d1), 2), -1))
    d1p = PreferenceData.cat([d1, pad])
    batch = PreferenceData(
        torch.stack([d0.options, _widen(d1p, 5)]),
        torch.stack([d0.kind, d1p.kind]),
        torch.stack([d0.n_stages, d1p.n_stages]),
    )
    model = PairwiseLaplaceGP(X, batch, likelihood=Ranking())
    Xt = torch.rand(4, 2, dtype=DT, generator=g)
    post = model.posterior(Xt.expand(2, 4, 2))
    for b, d in enumerate((d0, d1)):
        single = PairwiseLaplaceGP(X[b], d, likelihood=Ranking())
        p = single.posterior(Xt)
        torch.testing.assert_close(post.mean[b], p.mean, atol=1e-8, rtol=0)
        torch.testing.assert_close(post.variance[b], p.variance, atol=1e-8, rtol=0)
        torch.testing.assert_close(model.laplace_evidence()[b], single.laplace_evidence())


def _widen(d: PreferenceData, Q: int) -> torch.Tensor:
    o = d.options
    return torch.cat([o, o.new_full((o.shape[0], Q - o.shape[1]), -1)], -1)


def test_float32_model():
    X = torch.rand(10, 2, generator=torch.Generator().manual_seed(7))
    m32 = PairwiseLaplaceGP(X, mixed_data(), likelihood=Ranking())
    m64 = PairwiseLaplaceGP(X.double(), mixed_data(), likelihood=Ranking())
    assert m32.utility.dtype == torch.float32
    torch.testing.assert_close(m32.utility.double(), m64.utility, atol=1e-4, rtol=1e-4)
    ties = PairwiseLaplaceGP(X, mixed_data(True), likelihood=PairwiseProbit(tie_threshold=0.5))
    post = ties.posterior(torch.rand(3, 2))
    assert post.mean.dtype == torch.float32 and bool(torch.isfinite(post.variance).all())
    assert torch.isfinite(ties.laplace_evidence()).all()
