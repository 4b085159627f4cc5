"""Tests for botorch_pref.test_functions, against formulas written out independently here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from botorch_pref.test_functions import (
    Ackley,
    Alpine1,
    Branin,
    Embedded,
    Hartmann,
    Levy,
    TwoBump,
    Utility,
    get_utility,
    list_utilities,
)

NAMES = [
    "branin",
    "branin-standardized",
    "hartmann3",
    "hartmann6",
    "ackley6",
    "alpine1-7",
    "levy",
    "two-bump",
    "hartmann6-in-20",
]
SMOOTH = ["branin", "branin-standardized", "hartmann3", "hartmann6", "levy", "two-bump"]


def _rand(n: int, d: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


# ---- independent numpy references (textbook formulas, original domains) ----------------------


def _branin_np(x: np.ndarray) -> np.ndarray:
    z1, z2 = -5.0 + 15.0 * x[:, 0], 15.0 * x[:, 1]
    b, c, r, s, t = 5.1 / (4 * np.pi**2), 5 / np.pi, 6.0, 10.0, 1 / (8 * np.pi)
    return -((z2 - b * z1**2 + c * z1 - r) ** 2 + s * (1 - t) * np.cos(z1) + s)


_H6_A = np.array(
    [
        [10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14],
    ]
)
_H6_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
)
_H_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def _hartmann6_np(x: np.ndarray) -> np.ndarray:
    inner = ((x[:, None, :] - _H6_P[None]) ** 2 * _H6_A[None]).sum(-1)
    return (_H_ALPHA * np.exp(-inner)).sum(-1)


def _ackley_np(x: np.ndarray) -> np.ndarray:
    z = 4.0 * x - 2.0
    d = z.shape[1]
    return (
        20 * np.exp(-0.2 * np.sqrt((z**2).sum(1) / d))
        + np.exp(np.cos(2 * np.pi * z).sum(1) / d)
        - 20
        - np.e
    )


def _alpine1_np(x: np.ndarray) -> np.ndarray:
    z = 20.0 * x - 10.0
    return -np.abs(z * np.sin(z) + 0.1 * z).sum(1)


def _levy_np(x: np.ndarray) -> np.ndarray:
    w = 1 + (20.0 * x - 10.0 - 1) / 4
    head = np.sin(np.pi * w[:, 0]) ** 2
    mid = ((w[:, :-1] - 1) ** 2 * (1 + 10 * np.sin(np.pi * w[:, :-1] + 1) ** 2)).sum(1)
    tail = (w[:, -1] - 1) ** 2 * (1 + np.sin(2 * np.pi * w[:, -1]) ** 2)
    return -(head + mid + tail)


def _two_bump_np(x: np.ndarray) -> np.ndarray:
    x = x[:, 0]
    return np.exp(-((x - 0.7) ** 2) / (2 * 0.06**2)) + 0.75 * np.exp(
        -((x - 0.25) ** 2) / (2 * 0.12**2)
    )


@pytest.mark.parametrize(
    ("utility", "reference"),
    [
        (Branin(), _branin_np),
        (Branin(standardize=True), lambda x: (_branin_np(x) + 54.8104) / 51.9496),
        (Hartmann(6), _hartmann6_np),
        (Ackley(6), _ackley_np),
        (Ackley(3), _ackley_np),
        (Alpine1(7), _alpine1_np),
        (Levy(2), _levy_np),
        (Levy(4), _levy_np),
        (TwoBump(), _two_bump_np),
    ],
    ids=lambda v: getattr(v, "name", ""),
)
def test_values_match_independent_formulas(utility: Utility, reference) -> None:
    X = _rand(500, utility.dim, seed=1)
    np.testing.assert_allclose(utility(X).numpy(), reference(X.numpy()), rtol=1e-12, atol=1e-12)


def test_published_optima() -> None:
    # Hartmann-6: 3.32237 at the published location; Branin: 0.397887 at its three minimisers.
    h6 = Hartmann(6)
    x = torch.tensor([0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573], dtype=torch.float64)
    assert h6(x).item() == pytest.approx(3.32237, abs=1e-5)
    assert h6.optimal_value == pytest.approx(3.32236801141551, abs=1e-12)
    h3 = Hartmann(3)
    x3 = torch.tensor([0.114614, 0.555649, 0.852547], dtype=torch.float64)
    assert h3(x3).item() == pytest.approx(3.86278, abs=1e-5)
    br = Branin()
    Z = torch.tensor([[-math.pi, 12.275], [math.pi, 2.275], [9.42478, 2.475]], dtype=torch.float64)
    X = (Z - torch.tensor([-5.0, 0.0], dtype=torch.float64)) / 15.0
    np.testing.assert_allclose(br(X).numpy(), -0.397887, atol=1e-6)
    assert br.optimizers.shape == (3, 2)
    np.testing.assert_allclose(br(br.optimizers).numpy(), br.optimal_value, atol=1e-13)


@pytest.mark.parametrize("name", NAMES)
def test_optimum_is_attained_and_not_beaten(name: str) -> None:
    f = get_utility(name)
    assert f.name == name or name == "levy"
    x_opt = f.optimizer
    assert x_opt is not None and x_opt.shape == (f.dim,)
    assert bool(((x_opt >= 0) & (x_opt <= 1)).all())
    scale = max(1.0, abs(f.optimal_value))
    assert f(x_opt).item() == pytest.approx(f.optimal_value, abs=1e-12 * scale)
    X = _rand(10**5, f.dim, seed=2)
    y = f(X)
    assert y.max().item() <= f.optimal_value + 1e-12 * scale
    # Small perturbations around the optimiser never do better (valid at kinks too).
    g = torch.Generator().manual_seed(3)
    for radius in (1e-2, 1e-4, 1e-6):
        dX = radius * (2 * torch.rand(2000, f.dim, dtype=torch.float64, generator=g) - 1)
        Xp = (x_opt + dX).clamp(0, 1)
        assert f(Xp).max().item() <= f.optimal_value + 1e-12 * scale
    r = f.regret(X)
    assert bool((r >= 0).all())
    torch.testing.assert_close(r, f.optimal_value - y)


@pytest.mark.parametrize("name", SMOOTH)
def test_local_optimiser_cannot_improve(name: str) -> None:
    f = get_utility(name)

    def neg(x: np.ndarray) -> tuple[float, np.ndarray]:
        X = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        y = -f(X)
        (grad,) = torch.autograd.grad(y, X)
        return y.item(), grad.numpy()

    for x0 in f.optimizers:
        res = minimize(neg, x0.numpy(), jac=True, method="L-BFGS-B", bounds=[(0, 1)] * f.dim)
        assert -res.fun <= f.optimal_value + 1e-10


def test_two_bump_global_and_local() -> None:
    f = TwoBump()
    grid = torch.linspace(0, 1, 10**6 + 1, dtype=torch.float64).unsqueeze(-1)
    y = f(grid)
    assert y.max().item() == pytest.approx(f.optimal_value, abs=1e-8)
    assert f.optimizer.item() == pytest.approx(grid[y.argmax()].item(), abs=2e-6)
    # A second, lower local maximum: the best grid value on [0, 0.5] is the local one.
    left = grid[:, 0] <= 0.5
    assert y[left].max().item() == pytest.approx(f.local_optimal_value, abs=1e-8)
    assert 0.5 < f.local_optimal_value < f.optimal_value - 0.2
    assert 0.65 < f.optimizer.item() < 0.75 and 0.2 < f.local_optimizer.item() < 0.3
    # Both are stationary points (central finite differences).
    for x in (f.optimizer.item(), f.local_optimizer.item()):
        h = 1e-6
        X = torch.tensor([[x - h], [x + h]], dtype=torch.float64)
        fm, fp = f(X).tolist()
        assert abs(fp - fm) / (2 * h) < 1e-6


def test_embedded_ignores_inactive_inputs() -> None:
    base = Hartmann(6)
    f = Embedded(base, 20, seed=7)
    assert f.dim == 20 and len(f.active_dims) == 6 and len(f.inactive_dims) == 14
    assert sorted(f.active_dims + f.inactive_dims) == list(range(20))
    X = _rand(300, 20, seed=4)
    X2 = X.clone()
    X2[:, f.inactive_dims] = _rand(300, 14, seed=5)
    torch.testing.assert_close(f(X), f(X2), rtol=0, atol=0)
    torch.testing.assert_close(f(X), base(X[:, f.active_dims]), rtol=0, atol=0)
    # Changing an active input does change the value.
    X3 = X.clone()
    X3[:, f.active_dims[0]] = 1 - X3[:, f.active_dims[0]]
    assert not torch.allclose(f(X), f(X3))
    # The seed decides the positions reproducibly; the default is the first base.dim inputs.
    assert Embedded(base, 20, seed=7).active_dims == f.active_dims
    assert Embedded(base, 20, seed=8).active_dims != f.active_dims
    assert Embedded(base, 20).active_dims == list(range(6))
    g = Embedded(base, 20, active_dims=[19, 0, 5, 7, 11, 3])
    Xa = torch.zeros(1, 20, dtype=torch.float64)
    Xa[0, [19, 0, 5, 7, 11, 3]] = base.optimizer
    assert g(Xa).item() == pytest.approx(base.optimal_value, abs=1e-12)
    torch.testing.assert_close(g.optimizer[g.active_dims], base.optimizer)
    assert bool((g.optimizer[g.inactive_dims] == 0.5).all())
    assert get_utility("hartmann6-in-20", seed=7).active_dims == f.active_dims


def test_embedded_bad_arguments() -> None:
    base = Branin()
    with pytest.raises(ValueError, match="dim"):
        Embedded(base, 1)
    with pytest.raises(ValueError, match="distinct"):
        Embedded(base, 5, active_dims=[1, 1])
    with pytest.raises(ValueError, match="distinct"):
        Embedded(base, 5, active_dims=[1])
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        Embedded(base, 5, active_dims=[1, 5])
    with pytest.raises(ValueError, match="at most one"):
        Embedded(base, 5, active_dims=[0, 1], seed=0)


def test_shapes_dtype_and_gradients() -> None:
    f = Hartmann(6)
    X = _rand(24, 6, seed=6).reshape(2, 3, 4, 6)
    assert f(X).shape == (2, 3, 4)
    assert f(X[0, 0, 0]).shape == ()
    y32 = f(X.float())
    assert y32.dtype == torch.float32
    torch.testing.assert_close(y32.double(), f(X), rtol=1e-5, atol=1e-5)
    # A float32 call leaves the float64 constants intact.
    assert f(f.optimizer).item() == f.optimal_value
    Xg = X.clone().requires_grad_(True)
    f(Xg).sum().backward()
    assert Xg.grad is not None and torch.isfinite(Xg.grad).all()
    assert f(torch.empty(0, 6, dtype=torch.float64)).shape == (0,)


def test_regret_tolerance_and_wrong_optimum() -> None:
    f = Levy(2)
    assert 0.0 <= f.regret(f.optimizer).item() < 1e-15
    # A value above the stated optimum by less than the tolerance is clamped to a regret of 0.
    a = Ackley(6)
    a.optimal_value = a(a.optimizer).item() - 1e-9
    assert a.regret(a.optimizer).item() == 0.0
    bad = Hartmann(6)
    bad.optimal_value = 3.0  # below the true maximum: must not be hidden by clamping
    with pytest.raises(RuntimeError, match="optimum is wrong"):
        bad.regret(bad.optimizers)


def test_bad_inputs_raise() -> None:
    f = Hartmann(6)
    with pytest.raises(ValueError, match=r"\.\.\. x 6"):
        f(torch.rand(5, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match="unit cube"):
        f(torch.full((2, 6), 1.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="unit cube"):
        f(torch.full((2, 6), -0.1, dtype=torch.float64))
    with pytest.raises(ValueError, match="floating"):
        f(torch.ones(2, 6, dtype=torch.long))
    with pytest.raises(TypeError):
        f(np.zeros((2, 6)))
    with pytest.raises(ValueError, match="dim 3 or 6"):
        Hartmann(4)
    # Rounding overshoot within 1e-6 is accepted and clamped.
    assert torch.isfinite(f(torch.full((1, 6), 1 + 1e-9, dtype=torch.float64))).all()


def test_registry() -> None:
    for name in NAMES:
        f = get_utility(name)
        assert isinstance(f, Utility)
        assert get_utility(f.name).name == f.name
    assert get_utility("levy", dim=5).dim == 5
    assert get_utility("LEVY5").name == "levy5"
    assert get_utility("ackley3").dim == 3
    assert get_utility("alpine1-2").dim == 2
    e = get_utility("branin-in-5", seed=1)
    assert isinstance(e, Embedded) and e.dim == 5 and e.name == "branin-in-5"
    assert get_utility("two-bump-in-3").dim == 3
    with pytest.raises(ValueError, match="Unknown utility 'rosenbrock'") as info:
        get_utility("rosenbrock")
    for name in list_utilities():
        assert name in str(info.value)
    with pytest.raises(ValueError, match="Unknown utility"):
        get_utility("nothing-in-20")


def test_utility_name_is_an_argparse_type():
    import argparse

    from botorch_pref.test_functions import utility_name

    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", type=utility_name)
    assert parser.parse_args(["--problem", "hartmann3-in-10"]).problem == "hartmann3-in-10"
    with pytest.raises(argparse.ArgumentTypeError, match="Unknown utility 'nosuch'"):
        utility_name("nosuch")


def test_bad_dimensions_are_value_errors() -> None:
    import argparse

    from botorch_pref.test_functions import utility_name

    # A zero dimension in a name is an unknown utility for argparse, not a crash.
    for name in ("ackley0", "levy0", "alpine1-0"):
        with pytest.raises(ValueError, match="dim"):
            get_utility(name)
        with pytest.raises(argparse.ArgumentTypeError, match="dim"):
            utility_name(name)
    for cls in (Ackley, Levy, Alpine1):
        for dim in (0, -2, 2.5):
            with pytest.raises(ValueError, match="dim must be a positive integer"):
                cls(dim)
    assert Ackley(2.0).dim == 2 and Alpine1(1).dim == 1


def test_a_dim_keyword_must_agree_with_the_dimension_in_the_name() -> None:
    # get_utility("ackley6", dim=3) used to fail with "got multiple values for keyword 'dim'".
    cases = [
        ("ackley6", 6),
        ("hartmann3", 3),
        ("alpine1-7", 7),
        ("ackley4", 4),
        ("levy3", 3),
        ("alpine1-2", 2),
        ("hartmann6-in-20", 20),
        ("branin-in-5", 5),
    ]
    for name, dim in cases:
        other = 5 if dim == 3 else 3
        with pytest.raises(ValueError, match=rf"'{name}' fixes dim = {dim}; got dim={other}\."):
            get_utility(name, dim=other)
        f = get_utility(name, dim=dim)  # the same dimension is accepted
        assert f.dim == dim and f.name == get_utility(name).name
    # names without a dimension still take one
    assert get_utility("levy", dim=4).dim == 4
