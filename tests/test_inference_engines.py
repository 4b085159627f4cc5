"""The damped-Newton driver, warm starts and the engine interface against independent references."""

from __future__ import annotations

import pytest
import torch

from botorch_pref import PairwiseLaplaceGP, PairwiseLogit, PairwiseProbit, PreferenceData, Ranking
from botorch_pref.inference import (
    BlockEngine,
    NewtonState,
    PairEngine,
    WarmStart,
    build_observations,
    damped_newton,
    merge_pairs,
)
from botorch_pref.inference.engine import cholesky_of_system

from .helpers import random_comparisons

DT = torch.float64


def rbf(X: torch.Tensor, lengthscale: float = 0.4, outputscale: float = 2.0) -> torch.Tensor:
    sq = ((X.unsqueeze(-2) - X.unsqueeze(-3)) ** 2).sum(-1)
    return outputscale * torch.exp(-0.5 * sq / lengthscale**2)


def test_damped_newton_backtracks_on_a_one_dimensional_concave_objective():
    # Psi(x) = -sqrt(1 + x^2): concave, maximum at 0; the full Newton step x -> -x^3 overshoots
    # (and diverges) from |x| > 1, so only the backtracking line search can converge from x = 3.
    def state(coef: torch.Tensor) -> NewtonState:
        psi = -torch.sqrt(1 + coef[:, 0] ** 2)
        return NewtonState(coef, coef, psi, torch.zeros_like(psi))

    def step(s: NewtonState) -> tuple[torch.Tensor, torch.Tensor]:
        x = s.coef
        delta = -(x**3) - x  # to the Newton iterate -x^3
        gradient = -x / torch.sqrt(1 + x**2)
        return delta, (gradient * delta).sum(-1)

    starts = [state(torch.tensor([[3.0], [0.5]], dtype=DT))]
    _, f, iterations, converged = damped_newton(
        state, step, lambda c: c, starts, tol=1e-12, max_iter=100, max_halvings=30
    )
    assert bool(converged.all())
    torch.testing.assert_close(f, torch.zeros(2, 1, dtype=DT), atol=1e-12, rtol=0)
    assert iterations < 100
    # each member starts from its best candidate: a worse start is ignored
    worse = state(torch.tensor([[50.0], [40.0]], dtype=DT))
    _, _, it_two, _ = damped_newton(
        state, step, lambda c: c, [worse, *starts], tol=1e-12, max_iter=100, max_halvings=30
    )
    assert it_two == iterations


def _parabola(rounding=lambda x: torch.zeros_like(x), offset: float = -10.0):
    """``Psi(x) = offset - (x - 1)^2 - rounding(x)``, the error of Psi's computed value written
    out, and its exact Newton step with the decrement ``Psi'(x) * step``."""

    def state(coef: torch.Tensor) -> NewtonState:
        x = coef[:, 0]
        psi = offset - (x - 1.0) ** 2 - rounding(x)
        return NewtonState(coef, coef, psi, torch.zeros_like(psi))

    def step(s: NewtonState, delta: torch.Tensor | None = None):
        delta = 1.0 - s.coef if delta is None else delta
        return delta, (2.0 * (1.0 - s.coef) * delta).sum(-1)

    return state, step


def _newton(state, step, start: float, dtype: torch.dtype, tol: float, max_iter: int):
    starts = [state(torch.full((1, 1), start, dtype=dtype))]
    return damped_newton(
        state, step, lambda c: c, starts, tol=tol, max_iter=max_iter, max_halvings=30
    )


def test_a_step_halved_to_nothing_is_not_convergence():
    # A Newton step that always points away from the maximum (a solve spoilt by rounding): every
    # full step is worse, so the line search halves it to ~1e-9, which moves x by less than
    # tol; x = 0 is still not the mode and must not be reported as it, whether the step's
    # decrement (gradient times step) comes out negative or positive.
    state, exact = _parabola(offset=0.0)

    def away(s: NewtonState) -> tuple[torch.Tensor, torch.Tensor]:
        return exact(s, -torch.ones_like(s.coef))

    def away_positive_decrement(s: NewtonState) -> tuple[torch.Tensor, torch.Tensor]:
        delta, decrement = away(s)
        return delta, decrement.abs()

    for step in (away, away_positive_decrement):
        _, f, iterations, converged = _newton(state, step, 0.0, DT, tol=1e-9, max_iter=5)
        assert not bool(converged.any())
        assert iterations == 5
        assert float(f.abs().max()) < 1e-6  # it never moved: the answer is "not converged"


def test_newton_stops_where_no_step_can_raise_the_objective_in_its_dtype():
    # float32 at the mode: the full step's rounding noise moves f by more than tol, but the
    # gain it predicts (half the Newton decrement) lies below the rounding of Psi; that is
    # convergence, not 100 iterations of noise.
    state, exact = _parabola()
    calls = []

    def noisy(s: NewtonState) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append(None)
        return exact(s, (1.0 - s.coef) + (-1) ** len(calls) * 1e-4)

    _, f, iterations, converged = _newton(state, noisy, 0.0, torch.float32, 2e-5, 100)
    assert bool(converged.all()) and iterations < 5
    assert abs(float(f[0, 0]) - 1.0) < 1e-3


def test_newton_stops_at_the_floor_where_rounding_rejects_every_step():
    # float32: within 2e-3 of the maximum the computed Psi is off by more than the true gain,
    # so the line search rejects every step into that band; the steps' gains lie within Psi's
    # rounding, which is the dtype's floor, not a failure.
    state, exact = _parabola(lambda x: 1e-4 * ((x - 1.0).abs() < 2e-3).float())
    _, f, iterations, converged = _newton(state, exact, 1.0 - 3.2e-3, torch.float32, 2e-5, 20)
    assert bool(converged.all()) and iterations < 20
    assert abs(float(f[0, 0]) - 1.0) < 3.2e-3


def test_a_step_below_the_rounding_of_psi_is_taken_not_backtracked():
    # The exact step's gain (1e-6) is below Psi's rounding (1.2e-7 * 10), and rounding makes its
    # computed Psi lower: the line search cannot judge such a step, so it is taken whole, and
    # the iteration ends at the maximum.
    state, exact = _parabola(lambda x: 1e-5 * (x >= 1.0).float())
    _, f, _, converged = _newton(state, exact, 1.0 - 1e-3, torch.float32, 2e-5, 20)
    assert bool(converged.all())
    assert abs(float(f[0, 0]) - 1.0) < 1e-6


def test_the_newton_step_and_decrement_against_finite_differences():
    # The engine's step solves (K^-1 + W) dF = grad Psi from the gradient, and its decrement is
    # grad Psi . dF. Checked in both forms against central differences of Psi along the step
    # (the directional derivative is the decrement) and against the step's own definition
    # (from the iterate formed from c at the same point, the previous formula).
    for m, form in ((12, "comparison"), (30, "design")):
        X, C = random_comparisons(8, m, seed=5)
        engine = PairEngine.from_comparisons(PairwiseProbit(), C.unsqueeze(0), 8, DT)
        maps = engine._newton_map(rbf(X).unsqueeze(0), form)
        coef = torch.randn(1, engine.num_rows if form == "comparison" else 8, dtype=DT,
                           generator=torch.Generator().manual_seed(1))  # fmt: skip
        current = maps.state(coef)
        step, decrement = maps.step(current)
        h = 1e-6
        slope = (maps.state(coef + h * step).psi - maps.state(coef - h * step).psi) / (2 * h)
        torch.testing.assert_close(decrement, slope, rtol=1e-6, atol=1e-8)
        assert float(decrement) > 0
        # one step from the differences alone lands on the same iterate
        torch.testing.assert_close(coef + step, maps.start(current.d), rtol=1e-9, atol=1e-9)


def test_pair_warm_start_moves_coefficients_to_the_same_pairs():
    n = 6
    old = PairEngine(PairwiseProbit(), merge_pairs(torch.tensor([[[0, 1], [3, 2]]]), n), n)
    beta = torch.tensor([[0.5, -2.0]], dtype=DT)  # pairs (0, 1) and (2, 3)
    warm = WarmStart(PairEngine, old.warm_key(n), beta)
    new = PairEngine(PairwiseProbit(), merge_pairs(torch.tensor([[[5, 4], [2, 3], [1, 0]]]), n), n)
    # new pairs sorted: (0, 1), (2, 3), (4, 5)
    torch.testing.assert_close(new.warm_beta(warm), torch.tensor([[0.5, -2.0, 0.0]], dtype=DT))
    # a warm start of another engine type is not used
    data = PreferenceData.from_comparisons(torch.tensor([[0, 1]])).add_choice([2, 3, 4], 3)
    flat = data.reshape(1)
    block = BlockEngine(Ranking(), build_observations(flat.options, flat.kind, flat.n_stages), n)
    assert block.warm_beta(warm) is None


def test_warm_start_broadcasts_over_a_new_batch():
    beta = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    warm = WarmStart(PairEngine, torch.tensor([[1, 2], [3, 4]]), beta)
    out = warm.expand(torch.Size([2]), torch.Size([3, 2]))
    assert out.key.shape == (6, 2)
    torch.testing.assert_close(out.beta, torch.tensor([[1.0, 2.0], [3.0, 4.0]]).repeat(3, 1))


def test_appended_answers_reach_the_cold_start_mode_in_fewer_iterations():
    X, C = random_comparisons(20, 40, seed=3)
    model = PairwiseLaplaceGP(X[:16], C[(C < 16).all(-1)], likelihood=PairwiseLogit())
    new_X = X[16:]
    new_C = torch.tensor([[0, 1], [2, 3], [1, 2]])
    warm = model.condition_on_observations(new_X, new_C)
    cold = PairwiseLaplaceGP(
        warm.datapoints,
        warm.comparisons,
        likelihood=PairwiseLogit(),
        covar_module=model.covar_module,
    )
    torch.testing.assert_close(warm.utility, cold.utility, atol=1e-8, rtol=0)
    assert warm.newton_iterations <= cold.newton_iterations


def test_engine_follows_the_data_kind():
    X = torch.rand(6, 2, dtype=DT, generator=torch.Generator().manual_seed(0))
    pairs = PairwiseLaplaceGP(X, torch.tensor([[0, 1], [2, 3]]))
    assert isinstance(pairs.engine, PairEngine)
    data = PreferenceData.from_comparisons(torch.tensor([[0, 1]])).add_ranking([2, 3, 4], [4, 2, 3])
    ranked = PairwiseLaplaceGP(X, data, likelihood=Ranking())
    assert isinstance(ranked.engine, BlockEngine)
    # the block engine on the same K agrees with the dense Laplace mode condition f = K A^T h
    K = rbf(X).unsqueeze(0)
    engine = ranked.engine
    mode = engine.find_mode(K)
    _, h, _ = engine.terms(mode.d)
    rows = engine.rows[0]
    A = torch.zeros(rows.shape[0], 6, dtype=DT)
    A[torch.arange(rows.shape[0]), rows[:, 0]] += 1
    A[torch.arange(rows.shape[0]), rows[:, 1]] -= 1
    torch.testing.assert_close(mode.f[0], K[0] @ A.T @ h[0], atol=1e-9, rtol=0)


def test_a_failed_laplace_system_names_its_cause_and_a_remedy_for_its_dtype():
    indefinite = torch.tensor([[[1.0, 2.0], [2.0, 1.0]]], dtype=DT)
    with pytest.raises(torch.linalg.LinAlgError, match="by rounding") as info:
        cholesky_of_system(indefinite)
    assert "Use a smaller outputscale" in str(info.value)
    assert "Use float64" not in str(info.value)  # already float64: the remedy is the scale
    with pytest.raises(torch.linalg.LinAlgError, match=r"float32.*Use float64, or a smaller"):
        cholesky_of_system(indefinite.float())
    overflowed = torch.eye(2, dtype=DT).unsqueeze(0).clone()
    overflowed[0, 1, 1] = float("nan")
    with pytest.raises(torch.linalg.LinAlgError, match="non-finite entries") as info:
        cholesky_of_system(overflowed)
    assert "by rounding" not in str(info.value)
    good = torch.tensor([[[2.0, 1.0], [1.0, 2.0]]], dtype=DT)
    L = cholesky_of_system(good)
    assert torch.allclose(L @ L.mT, good)
