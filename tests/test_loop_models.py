"""Model factories of the loop (botorch_pref.models.factories) and models plugged into it."""

from __future__ import annotations

import pytest
import torch
from botorch.models import PairwiseGP

from botorch_pref import PairwiseLaplaceGP, PreferenceOptimizer
from botorch_pref.loop import laplace_box_model, laplace_model
from botorch_pref.models.factories import MODEL_FACTORIES

DT = torch.float64
BOUNDS = torch.tensor([[-5.0, 100.0, 0.0], [10.0, 300.0, 1e-3]], dtype=DT)


def _run(opt: PreferenceOptimizer, n: int) -> None:
    for _ in range(n):
        X = opt.ask()
        opt.tell(X, int((opt.to_unit(X) - 0.4).square().sum(-1).argmin()))


def test_pluggable_models():
    opt = PreferenceOptimizer(BOUNDS, strategy="eubo", n_initial=1, model="pairwisegp", seed=11)
    _run(opt, 2)
    assert isinstance(opt.model, PairwiseGP)
    assert opt.best().x.shape == (3,)
    calls = []

    def factory(X, C):
        calls.append(X.shape)
        return laplace_model(X, C)

    opt = PreferenceOptimizer(BOUNDS, strategy="random", model=factory, seed=11)
    _run(opt, 2)
    assert calls == [torch.Size([2, 3])]  # built once, then updated with set_train_data
    assert isinstance(opt.model, PairwiseLaplaceGP)


def test_pairwisegp_runs_replay_and_leave_numpy_global_generator_alone():
    # PairwiseGP starts its mode search from numpy's global generator: a seeded run must still
    # replay exactly, and the loop must not move the caller's numpy stream.
    np = pytest.importorskip("numpy")

    def queries() -> torch.Tensor:
        opt = PreferenceOptimizer(BOUNDS, n_initial=2, model="pairwisegp", seed=3)
        asked = []
        for _ in range(7):
            X = opt.ask()
            asked.append(X)
            opt.tell(X, int(opt.to_unit(X)[:, 0].argmax()))
        return torch.stack(asked)

    np.random.seed(0)
    first = queries()
    after_first = np.random.random()
    np.random.seed(0)
    np.random.random()  # a different caller state: the run must not depend on it
    second = queries()
    np.random.seed(0)
    assert np.random.random() == after_first  # the run drew nothing from the caller's stream
    assert torch.equal(first, second)


def test_box_kernel_outputscale_prior_is_flat_where_the_default_pulls_down():
    from botorch_pref.loop import box_covar_module
    from botorch_pref.models.kernels import make_covar_module

    grid = torch.logspace(-1, 2.5, 701, dtype=DT)

    def log_prior(kernel):
        """The log prior density the MLL adds, along the grid of outputscales."""
        prior, closure = next(
            (p, c) for name, _, p, c, _ in kernel.named_priors() if name == "outputscale_prior"
        )
        values = []
        with torch.no_grad():
            for v in grid:
                kernel.outputscale = v
                values.append(float(prior.log_prob(closure(kernel)).sum()))
        return torch.tensor(values, dtype=DT)

    loop = log_prior(box_covar_module(2))
    inside = (grid > 0.1) & (grid < 90)
    assert float(loop[inside].max() - loop[inside].min()) < 1e-6  # the evidence decides
    assert float(loop[grid > 150].max()) < float(loop[inside].min()) - 1.0
    # The default kernel's LogNormal(log 10, 1.5) density peaks at 10 exp(-1.5^2) ~ 1.05 and
    # costs half a nat between outputscales 1.5 and 5.
    default = log_prior(make_covar_module(2))
    assert float(grid[default.argmax()]) == pytest.approx(1.054, rel=0.02)
    at = lambda v: float(default[(grid - v).abs().argmin()])  # noqa: E731
    assert at(1.5) - at(5.0) > 0.4


def test_box_model_fits_a_larger_outputscale_to_consistent_answers():
    from botorch.fit import fit_gpytorch_mll

    g = torch.Generator().manual_seed(3)
    X = torch.rand(60, 2, dtype=DT, generator=g)
    f = 4.0 * torch.sin(3.0 * X[:, 0]) + 3.0 * X[:, 1] ** 2
    pairs = torch.arange(60).reshape(30, 2)
    p_first = torch.sigmoid((f[pairs[:, 0]] - f[pairs[:, 1]]) / 0.6)
    first = torch.rand(30, dtype=DT, generator=g) < p_first
    C = torch.where(first.unsqueeze(-1), pairs, pairs.flip(-1))
    model, mll = laplace_box_model(X, C)
    fit_gpytorch_mll(mll)
    default, default_mll = laplace_model(X, C)  # the loop's default: the LogNormal prior
    fit_gpytorch_mll(default_mll)
    loop_os = model.covar_module.outputscale.item()
    default_os = default.covar_module.outputscale.item()
    assert loop_os > 1.5 * default_os, (loop_os, default_os)


def test_laplace_factories_give_batched_data_one_set_of_hyperparameters_per_member():
    X = torch.rand(3, 5, 2, dtype=DT, generator=torch.Generator().manual_seed(0))
    C = torch.tensor([[0, 1], [2, 3]]).expand(3, 2, 2)
    for name in ("laplace", "laplace-box"):
        model, _ = MODEL_FACTORIES[name](X, C)
        assert model.covar_module.outputscale.shape == (3,)
        # one log-prior per member (the batched fit needs it)
        priors = [p.log_prob(f(m)).shape for _, m, p, f, _ in model.named_priors()]
        assert all(shape[0] == 3 for shape in priors), priors
        assert model.covar_module.base_kernel.lengthscale.shape == (3, 1, 2)


@pytest.mark.parametrize("name", ["laplace", "laplace-box"])
def test_laplace_factories_build_the_requested_kernel_and_lengthscale_prior(name):
    from gpytorch.kernels import MaternKernel, RBFKernel
    from gpytorch.priors import LogNormalPrior

    X = torch.rand(5, 2, dtype=DT, generator=torch.Generator().manual_seed(0))
    C = torch.tensor([[0, 1], [2, 3]])
    model, _ = MODEL_FACTORIES[name](X, C, base_kernel="matern32", lengthscale_prior="dim_scaled")
    base = model.covar_module.base_kernel
    assert isinstance(base, MaternKernel) and base.nu == 1.5
    assert isinstance(base.lengthscale_prior, LogNormalPrior)
    model, _ = MODEL_FACTORIES[name](X, C)
    assert type(model.covar_module.base_kernel) is RBFKernel
    with pytest.raises(ValueError, match="base_kernel"):
        MODEL_FACTORIES[name](X, C, base_kernel="linear")
