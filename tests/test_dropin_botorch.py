"""BoTorch users' flows on PairwiseLaplaceGP: standard samplers in ``fantasize``, compiled
posteriors, and ``PairwiseGP``'s own kernel and priors."""

from __future__ import annotations

import pytest
import torch
from botorch.acquisition import qKnowledgeGradient
from botorch.sampling.normal import IIDNormalSampler, SobolQMCNormalSampler
from botorch.sampling.pairwise_samplers import (
    PairwiseIIDNormalSampler,
    PairwiseSobolQMCNormalSampler,
)
from botorch.sampling.stochastic_samplers import StochasticSampler

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.models.compat import as_pairwise_sampler
from botorch_pref.models.data import PreferenceInputError, validate_test_points

from .helpers import random_comparisons


@pytest.fixture(scope="module")
def model():
    return PairwiseLaplaceGP(*random_comparisons(12, 20, seed=5))


@pytest.mark.parametrize(
    "standard, pairwise",
    [
        (SobolQMCNormalSampler, PairwiseSobolQMCNormalSampler),
        (IIDNormalSampler, PairwiseIIDNormalSampler),
    ],
)
def test_fantasize_with_a_standard_sampler_draws_comparisons(model, standard, pairwise):
    """A standard sampler gives the fantasy model its pairwise counterpart would (same shape,
    same seed), where PairwiseGP fails on real-valued fantasies."""
    Xnew = torch.rand(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    got = model.fantasize(Xnew, sampler=standard(sample_shape=torch.Size([4]), seed=7))
    want = model.fantasize(Xnew, sampler=pairwise(sample_shape=torch.Size([4]), seed=7))
    assert got.batch_shape == torch.Size([4]) and got.n == model.n + 3
    torch.testing.assert_close(got.comparisons, want.comparisons)
    torch.testing.assert_close(got.utility, want.utility)
    assert model.n == 12  # the model itself is unchanged


def test_as_pairwise_sampler_keeps_pairwise_and_unknown_samplers():
    sampler = PairwiseSobolQMCNormalSampler(sample_shape=torch.Size([2]), seed=0)
    assert as_pairwise_sampler(sampler) is sampler
    other = StochasticSampler(sample_shape=torch.Size([2]))
    assert as_pairwise_sampler(other) is other
    converted = as_pairwise_sampler(SobolQMCNormalSampler(torch.Size([5]), seed=3))
    assert isinstance(converted, PairwiseSobolQMCNormalSampler)
    assert converted.sample_shape == torch.Size([5]) and converted.seed == 3


def test_fantasize_with_another_sampler_names_the_pairwise_sampler(model):
    """A sampler of utilities that has no pairwise counterpart gets an error that says what to
    use instead."""
    Xnew = torch.rand(2, 2, dtype=torch.float64)
    with pytest.raises(PreferenceInputError, match="PairwiseSobolQMCNormalSampler"):
        model.fantasize(Xnew, sampler=StochasticSampler(sample_shape=torch.Size([2])))
    with pytest.raises(PreferenceInputError, match="PairwiseSobolQMCNormalSampler"):
        model.condition_on_observations(Xnew, torch.tensor([[0.3], [1.2]], dtype=torch.float64))


def test_knowledge_gradient_runs_with_its_default_sampler(model):
    """qKnowledgeGradient builds a plain SobolQMCNormalSampler; with q = 2 it now works."""
    torch.manual_seed(0)
    acqf = qKnowledgeGradient(model, num_fantasies=3)
    X = torch.rand(2, 2 + 3, 2, dtype=torch.float64)  # 2 q-batches of q = 2 and 3 fantasies
    value = acqf(X)
    assert value.shape == (2,) and bool(torch.isfinite(value).all())


def test_test_point_validation_does_not_break_a_compiled_graph():
    """The finiteness check reads a value back (a graph break in torch.compile); inside a
    compiled region it is skipped, so the validation compiles to one graph."""
    X = torch.rand(4, 3, 2)
    explain = torch._dynamo.explain(lambda X: validate_test_points(X, 2, torch.float64) * 2)(X)
    assert explain.graph_break_count == 0, explain.break_reasons
    assert explain.graph_count == 1
    Xnan = X.clone()
    Xnan[0, 0, 0] = float("nan")
    with pytest.raises(PreferenceInputError, match="NaN"):  # outside compile: still checked
        validate_test_points(Xnan, 2, torch.float64)


def test_pairwise_gps_own_kernel_fits_on_many_data_sets():
    """PairwiseLaplaceGP(X, C, covar_module=PairwiseGP(X, C).covar_module) fits without a
    ModelFittingError or an optimiser warning; the outputscale stays in its box prior's
    [0.01, 100] (the MAP often lies on the upper edge with consistent answers, where the box's
    steep tail used to stall L-BFGS)."""
    import warnings

    from botorch.fit import fit_gpytorch_mll
    from botorch.models import PairwiseGP

    from botorch_pref import LaplaceEvidence

    at_edge = 0
    for seed in range(12):
        d = 2 + seed % 3
        X, C = random_comparisons(30, 60, d=d, noise=0.1, seed=seed)
        model = PairwiseLaplaceGP(X, C, covar_module=PairwiseGP(X, C).covar_module)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an L-BFGS failure warns before it raises
            fit_gpytorch_mll(LaplaceEvidence(model.likelihood, model))
        scale = float(model.covar_module.outputscale)
        assert 0.01 - 1e-9 <= scale <= 100 + 1e-6, (seed, scale)
        at_edge += scale > 99.99
        assert bool(torch.isfinite(model.posterior(X[:3]).mean).all())
    assert at_edge >= 3  # the case the bounds exist for occurred


def test_box_prior_bounds_name_the_raw_outputscale():
    from botorch.models import PairwiseGP

    from botorch_pref.models.kernels import box_prior_bounds, make_covar_module

    X, C = random_comparisons(10, 12, seed=0)
    kernel = PairwiseGP(X, C).covar_module
    ((name, (low, high)),) = box_prior_bounds(kernel, prefix="model.covar_module.").items()
    assert name == "model.covar_module.raw_outputscale"
    constraint = kernel.raw_outputscale_constraint
    values = constraint.transform(torch.tensor([low, high], dtype=torch.float64))
    torch.testing.assert_close(values, torch.tensor([0.01, 100.0], dtype=torch.float64))
    assert box_prior_bounds(make_covar_module(2)) == {}  # the LogNormal prior: no bounds


def test_default_kernel_is_pairwise_gps_and_the_loop_keeps_its_own():
    """The model class's default kernel is PairwiseGP's (same priors, constraints, initial
    values); the loop's factory passes its LogNormal-prior kernel explicitly."""
    from botorch.models import PairwiseGP
    from gpytorch.priors import LogNormalPrior, SmoothedBoxPrior

    from botorch_pref.models.factories import laplace_model

    X, C = random_comparisons(10, 12, d=3, seed=0)
    ours, ref = PairwiseLaplaceGP(X, C).covar_module, PairwiseGP(X, C).covar_module
    assert isinstance(ours.outputscale_prior, SmoothedBoxPrior)
    mine, theirs = ours.state_dict(), ref.state_dict()
    assert mine.keys() == theirs.keys()
    for key in mine:
        torch.testing.assert_close(mine[key], theirs[key])
    for name in ("raw_outputscale_constraint", "base_kernel.raw_lengthscale_constraint"):
        a, b = ours.get_submodule(name), ref.get_submodule(name)
        assert type(a) is type(b) and a.enforced == b.enforced
    loop_model, _ = laplace_model(X, C)
    assert isinstance(loop_model.covar_module.outputscale_prior, LogNormalPrior)
