"""PairwiseLaplaceGP as a drop-in for BoTorch's PairwiseGP (issue #15).

Each test states the ``PairwiseGP`` behaviour it pins and, where that is meaningful, runs both
models side by side on the same data.
"""

from __future__ import annotations

import pytest
import torch
from botorch.exceptions.errors import UnsupportedError
from botorch.fit import fit_gpytorch_mll
from botorch.models import PairwiseGP
from botorch.models.likelihoods.pairwise import (
    PairwiseLogitLikelihood,
    PairwiseProbitLikelihood,
)
from botorch.models.pairwise_gp import PairwiseLaplaceMarginalLogLikelihood
from botorch.utils.containers import DenseContainer, SliceContainer
from botorch.utils.datasets import RankingDataset, SupervisedDataset
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.means import ConstantMean

from botorch_pref import LaplaceEvidence, PairwiseLaplaceGP, PreferenceDataError
from botorch_pref.likelihoods import PairwiseLogit, PairwiseProbit
from botorch_pref.models.pairwise import PreferenceInputError

from .helpers import random_comparisons


def small_data() -> tuple[torch.Tensor, torch.Tensor]:
    """The issue's reproduction data."""
    X = torch.rand(4, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return X, torch.tensor([[0, 1], [2, 3], [0, 3]])


def plain_kernel(d: int, batch_shape: torch.Size = torch.Size()) -> ScaleKernel:
    """A kernel without priors and moderate hyperparameters (far from PairwiseGP's clamp)."""
    k = ScaleKernel(RBFKernel(ard_num_dims=d, batch_shape=batch_shape), batch_shape=batch_shape)
    k = k.double()
    k.base_kernel.lengthscale = 0.4
    k.outputscale = 1.5
    return k


def assert_same_posterior(ours: PairwiseLaplaceGP, ref: PairwiseGP, Xt: torch.Tensor) -> None:
    po, pr = ours.posterior(Xt), ref.posterior(Xt)
    torch.testing.assert_close(po.mean, pr.mean, atol=2e-4, rtol=1e-3)
    torch.testing.assert_close(po.covariance_matrix, pr.covariance_matrix, atol=2e-4, rtol=1e-3)


# ----------------------------------------------------------------- 1. likelihoods
@pytest.mark.parametrize(
    ("botorch_cls", "ours_cls"),
    [(PairwiseProbitLikelihood, PairwiseProbit), (PairwiseLogitLikelihood, PairwiseLogit)],
)
def test_botorch_likelihood_objects_are_accepted(botorch_cls, ours_cls):
    """PairwiseGP takes BoTorch's probit and logit likelihoods: so do we, same link and scale."""
    X, C = random_comparisons(12, 20, seed=1)
    ours = PairwiseLaplaceGP(X, C, likelihood=botorch_cls(), covar_module=plain_kernel(2))
    ref = PairwiseGP(X, C, likelihood=botorch_cls(), covar_module=plain_kernel(2), jitter=1e-12)
    assert type(ours.likelihood) is ours_cls
    Xt = torch.rand(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    assert_same_posterior(ours, ref, Xt)
    # the converted likelihood is the model's own, so BoTorch-style MLL construction works
    mll = LaplaceEvidence(ours.likelihood, ours)
    assert torch.isfinite(mll())


def test_other_likelihood_objects_are_rejected():
    X, C = small_data()
    with pytest.raises(TypeError, match="likelihood"):
        PairwiseLaplaceGP(X, C, likelihood=torch.nn.Identity())


# ----------------------------------------------------------------- 2. prior-only
@pytest.mark.parametrize("args", ["none_none", "X_none", "none_C"])
def test_prior_only_model_with_default_kernel(args):
    """PairwiseGP(None, None), (X, None) and (None, C) are prior-only with the default kernel,
    one lengthscale shared by all inputs (no data fixes the dimension)."""
    X, C = small_data()
    inputs = {"none_none": (None, None), "X_none": (X, None), "none_C": (None, C)}[args]
    ours, ref = PairwiseLaplaceGP(*inputs), PairwiseGP(*inputs)
    for model in (ours, ref):
        assert model.datapoints is None
        assert len(model.train_inputs) == 0 and model.train_targets is None
        assert model.batch_shape == torch.Size()
        assert model.covar_module.base_kernel.lengthscale.shape == torch.Size([1, 1])
    Xt = torch.rand(3, 5, dtype=torch.float64)  # any input dimension
    post = ours.posterior(Xt)
    torch.testing.assert_close(post.mean, torch.zeros(3, 1, dtype=torch.float64))
    torch.testing.assert_close(
        post.covariance_matrix, ours.covar_module(Xt).to_dense().detach(), atol=1e-12, rtol=0
    )
    assert ref.posterior(Xt).mean.shape == post.mean.shape


def test_prior_only_model_takes_data_later():
    """PairwiseGP accepts data later through set_train_data or condition_on_observations."""
    X, C = random_comparisons(10, 15, seed=3)
    ours, ref = PairwiseLaplaceGP(None, None), PairwiseGP(None, None)
    ours.set_train_data(X, C)
    ref.set_train_data(X, C)
    for model in (ours, ref):
        torch.testing.assert_close(model.datapoints, X)
        assert model.posterior(X[:3]).mean.shape == torch.Size([3, 1])
    # the same as a model built with the data, same (shared-lengthscale) kernel
    direct = PairwiseLaplaceGP(X, C, covar_module=PairwiseLaplaceGP(None, None).covar_module)
    torch.testing.assert_close(ours.posterior(X).mean, direct.posterior(X).mean)
    # and through condition_on_observations, which leaves the prior-only model alone
    prior = PairwiseLaplaceGP(None, None)
    cond = prior.condition_on_observations(X, C)
    assert prior.datapoints is None
    torch.testing.assert_close(cond.posterior(X).mean, direct.posterior(X).mean)
    assert PairwiseGP(None, None).condition_on_observations(X, C).datapoints.shape == X.shape


def test_prior_only_float32_data_casts_the_default_kernel():
    """PairwiseGP moves its kernel to the data's dtype when data arrive (model.to(datapoints))."""
    X, C = random_comparisons(8, 10, seed=4, dtype=torch.float32)
    model = PairwiseLaplaceGP(None, None)
    model.set_train_data(X, C)
    assert model.covar_module.outputscale.dtype == torch.float32
    assert model.posterior(X).mean.dtype == torch.float32


# ----------------------------------------------------------------- 3. construct_inputs
def ranking_dataset(X: torch.Tensor, C: torch.Tensor, flip: torch.Tensor) -> RankingDataset:
    """Pairs as a RankingDataset; ``flip`` lists the rows stored loser first."""
    indices = torch.where(flip[:, None], C.flip(-1), C)
    ranks = torch.where(flip[:, None], torch.tensor([1, 0]), torch.tensor([0, 1]))
    return RankingDataset(
        X=SliceContainer(values=X, indices=indices, event_shape=torch.Size([2 * X.shape[-1]])),
        Y=DenseContainer(values=ranks, event_shape=torch.Size([2])),
        feature_names=[f"x{i}" for i in range(X.shape[-1])],
        outcome_names=["pairwise_pref_query"],
    )


def test_construct_inputs_from_ranking_dataset():
    """PairwiseGP.construct_inputs maps a RankingDataset to datapoints and comparisons."""
    X, C = random_comparisons(10, 12, seed=5)
    flip = torch.arange(12) % 3 == 0
    dataset = ranking_dataset(X, C, flip)
    ours, ref = PairwiseLaplaceGP.construct_inputs(dataset), PairwiseGP.construct_inputs(dataset)
    assert set(ours) == {"datapoints", "comparisons"} == set(ref)
    torch.testing.assert_close(ours["datapoints"], ref["datapoints"])
    torch.testing.assert_close(ours["comparisons"], ref["comparisons"])
    torch.testing.assert_close(ours["comparisons"], C)
    model = PairwiseLaplaceGP(**ours)
    torch.testing.assert_close(model.comparisons, C)
    # constructor options pass through; unknown ones are refused by name
    assert PairwiseLaplaceGP.construct_inputs(dataset, form="design")["form"] == "design"
    with pytest.raises(UnsupportedError, match="categorical_features"):
        PairwiseLaplaceGP.construct_inputs(dataset, categorical_features=[0])


def test_construct_inputs_rejects_supervised_dataset():
    """PairwiseGP.construct_inputs raises UnsupportedError for a plain SupervisedDataset."""
    X = torch.rand(5, 2, dtype=torch.float64)
    dataset = SupervisedDataset(
        X=X, Y=X.sum(-1, keepdim=True), feature_names=["a", "b"], outcome_names=["y"]
    )
    for cls in (PairwiseGP, PairwiseLaplaceGP):
        with pytest.raises(UnsupportedError, match="RankingDataset"):
            cls.construct_inputs(dataset)


def test_construct_inputs_rejects_ties_and_longer_rankings():
    """A tie (equal ranks) would become a self-comparison in PairwiseGP; we refuse it."""
    X, C = random_comparisons(6, 4, seed=6)
    dataset = ranking_dataset(X, C, torch.zeros(4, dtype=torch.bool))
    dataset.Y[0] = torch.tensor([0, 0])
    with pytest.raises(UnsupportedError, match="tie"):
        PairwiseLaplaceGP.construct_inputs(dataset)
    triples = RankingDataset(
        X=SliceContainer(
            values=X, indices=torch.tensor([[0, 1, 2], [3, 4, 5]]), event_shape=torch.Size([6])
        ),
        Y=DenseContainer(values=torch.tensor([[0, 1, 2], [2, 0, 1]]), event_shape=torch.Size([3])),
        feature_names=["a", "b"],
        outcome_names=["r"],
    )
    with pytest.raises(UnsupportedError, match="pairs"):
        PairwiseLaplaceGP.construct_inputs(triples)


# ----------------------------------------------------------------- 4. batched default kernel
def test_default_kernel_has_the_batch_shape():
    """PairwiseGP's default kernel for b x n x d data: lengthscale b x 1 x d, outputscale b."""
    X = torch.rand(3, 6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    C = torch.tensor([[0, 1], [2, 3], [4, 5], [1, 2]]).expand(3, -1, -1)
    ours, ref = PairwiseLaplaceGP(X, C), PairwiseGP(X, C)
    for model in (ours, ref):
        assert model.covar_module.base_kernel.raw_lengthscale.shape == torch.Size([3, 1, 2])
        assert model.covar_module.raw_outputscale.shape == torch.Size([3])


def test_batch_members_have_their_own_hyperparameters_and_load_alone():
    """A member's state dict of a batched model loads (strictly) into a non-batched model, and
    both give that member's posterior (PairwiseGP's state dicts have the same shapes)."""
    b = 3
    data = [random_comparisons(8, 12, seed=10 + i) for i in range(b)]
    X = torch.stack([x for x, _ in data])
    C = torch.stack([c for _, c in data])
    batched = PairwiseLaplaceGP(X, C)
    fit_gpytorch_mll(LaplaceEvidence(batched.likelihood, batched))
    ls = batched.covar_module.base_kernel.lengthscale.detach()
    assert not torch.allclose(ls[0], ls[1])  # fitted per member
    Xt = torch.rand(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    batch_mean = batched.posterior(Xt.expand(b, -1, -1)).mean
    for i in range(b):
        member = {
            k: (v[i] if k.endswith(("raw_lengthscale", "raw_outputscale")) else v)
            for k, v in batched.state_dict().items()
        }
        single = PairwiseLaplaceGP(X[i], C[i])
        single.load_state_dict(member, strict=True)
        torch.testing.assert_close(single.posterior(Xt).mean, batch_mean[i], atol=1e-6, rtol=1e-5)
    ref_member = {
        k: (v[0] if k.endswith(("raw_lengthscale", "raw_outputscale")) else v)
        for k, v in PairwiseGP(X, C).state_dict().items()
    }
    PairwiseGP(X[0], C[0]).load_state_dict(ref_member)  # the PairwiseGP behaviour we match


def test_load_state_dict_default_is_not_strict_and_strict_is_supported():
    """PairwiseGP.load_state_dict defaults to strict=False (an empty or partial state dict
    loads nothing, as Ax's BOPE cross-validation passes) and refuses strict=True; ours
    defaults alike and supports strict=True."""
    X, C = small_data()
    ours, ref = PairwiseLaplaceGP(X, C), PairwiseGP(X, C)
    ref.load_state_dict({})
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    ours.load_state_dict({})
    for k, v in ours.state_dict().items():
        torch.testing.assert_close(v, before[k])
    with pytest.raises(UnsupportedError):
        ref.load_state_dict(ref.state_dict(), strict=True)
    with pytest.raises(RuntimeError, match="Missing key"):
        ours.load_state_dict({}, strict=True)
    other = PairwiseLaplaceGP(X, C)
    with torch.no_grad():
        other.covar_module.outputscale = 3.0
    ours.load_state_dict(other.state_dict(), strict=True)
    torch.testing.assert_close(ours.posterior(X).mean, other.posterior(X).mean)


# ----------------------------------------------------------------- 5. mean_module
def test_mean_module_is_a_constant_mean_fixed_at_zero():
    """PairwiseGP has mean_module = ConstantMean() at 0 with requires_grad False."""
    X, C = small_data()
    for model in (PairwiseLaplaceGP(X, C), PairwiseGP(X, C), PairwiseLaplaceGP(None, None)):
        assert isinstance(model.mean_module, ConstantMean)
        assert float(model.mean_module.constant) == 0.0
        assert not any(p.requires_grad for p in model.mean_module.parameters())


def test_mean_module_constant_shifts_the_posterior_mean_only():
    """The likelihood sees differences only, so a prior constant c shifts the posterior by c."""
    X, C = random_comparisons(10, 15, seed=9)
    model = PairwiseLaplaceGP(X, C)
    Xt = torch.rand(4, 2, dtype=torch.float64)
    before = model.posterior(Xt)
    with torch.no_grad():
        model.mean_module.constant.fill_(2.5)
    after = model.posterior(Xt)
    torch.testing.assert_close(after.mean, before.mean + 2.5)
    torch.testing.assert_close(after.covariance_matrix, before.covariance_matrix)
    # the parameter is frozen: fitting leaves it alone
    fit_gpytorch_mll(LaplaceEvidence(model.likelihood, model))
    assert float(model.mean_module.constant) == 2.5


# ----------------------------------------------------------------- 6. training-mode guards
def test_training_mode_call_on_other_inputs_raises():
    """PairwiseGP in training mode raises RuntimeError unless called on its training data."""
    X, C = random_comparisons(8, 10, seed=11)
    for model in (PairwiseLaplaceGP(X, C), PairwiseGP(X, C)):
        model.train()
        with pytest.raises(RuntimeError, match="training data"):
            model(X[:3].clone())
        out = model(*model.train_inputs)  # the training data is fine
        assert out.mean.shape[-1] == model.datapoints.shape[-2]


def test_training_mode_call_on_training_data_is_the_laplace_posterior():
    X, C = random_comparisons(8, 10, seed=11)
    model = PairwiseLaplaceGP(X, C)
    model.train()
    out = model(*model.train_inputs)
    torch.testing.assert_close(out.mean, model.utility)
    model.eval()
    torch.testing.assert_close(out.mean, model.posterior(X).mean.squeeze(-1))


def test_training_mode_prior_only_call_raises():
    """PairwiseGP raises RuntimeError when a prior-only model is called in training mode."""
    Xt = torch.rand(3, 2, dtype=torch.float64)
    for model in (PairwiseLaplaceGP(None, None), PairwiseGP(None, None)):
        model.train()
        with pytest.raises(RuntimeError, match="training mode"):
            model(Xt)
        model.eval()
        assert model(Xt).mean.shape == torch.Size([3])


def test_evidence_checks_its_arguments_are_the_training_data():
    """PairwiseLaplaceMarginalLogLikelihood raises RuntimeError on other comparisons."""
    X, C = random_comparisons(8, 10, seed=12)
    other = C[:5].clone()
    ours, ref = PairwiseLaplaceGP(X, C), PairwiseGP(X, C)
    for model, mll_cls in ((ours, LaplaceEvidence), (ref, PairwiseLaplaceMarginalLogLikelihood)):
        mll = mll_cls(model.likelihood, model)
        model.train()
        output = model(*model.train_inputs)
        with pytest.raises(RuntimeError, match="training data"):
            mll(output, other)
        value = mll(output, model.train_targets)
        assert torch.isfinite(value)
    mll = LaplaceEvidence(ours.likelihood, ours)
    torch.testing.assert_close(mll(ours(*ours.train_inputs), ours.train_targets), mll())
    with pytest.raises(RuntimeError, match="training data"):  # an output at other points
        mll(ours.eval()(X[:3]), ours.train_targets)


# ----------------------------------------------------------------- 7. set_train_data strict
def test_set_train_data_strict_checks_shapes():
    """PairwiseGP.set_train_data(strict=True) raises RuntimeError on a new shape, dtype or
    device; the model is left unchanged."""
    X, C = small_data()
    for model in (PairwiseLaplaceGP(X, C), PairwiseGP(X, C)):
        before = model.posterior(X).mean.clone()
        with pytest.raises(RuntimeError, match="Cannot modify shape of inputs"):
            model.set_train_data(X[None], C[None], strict=True)
        with pytest.raises(RuntimeError, match="Cannot modify shape of targets"):
            model.set_train_data(X, C[:2], strict=True)
        with pytest.raises(RuntimeError, match="Cannot modify dtype of inputs"):
            model.set_train_data(X.float(), C, strict=True)
        torch.testing.assert_close(model.posterior(X).mean, before)
        assert model.datapoints.shape == X.shape
    model = PairwiseLaplaceGP(X, C)
    model.set_train_data(X.flip(0), C, strict=True)  # same shapes: fine
    torch.testing.assert_close(model.datapoints, X.flip(0))


def test_set_train_data_strict_on_a_prior_only_model_raises():
    """PairwiseGP has no data to match, so strict=True raises; without strict the data go in."""
    X, C = small_data()
    for model in (PairwiseLaplaceGP(None, None), PairwiseGP(None, None)):
        # PairwiseGP names the first of {shape, dtype, device} in set order (hash-seeded)
        with pytest.raises(RuntimeError, match=r"Cannot modify (shape|dtype|device) of inputs"):
            model.set_train_data(X, C, strict=True)
        assert model.datapoints is None
        model.set_train_data(X, C)
        assert model.datapoints.shape == X.shape


# ----------------------------------------------------------------- 8. exception types
def test_bad_comparisons_raise_an_error_both_kinds_of_caller_catch():
    """PairwiseGP raises RuntimeError for non-pairwise Y in condition_on_observations; ours is a
    PreferenceInputError, which is a RuntimeError and a ValueError (PreferenceDataError)."""
    X, C = small_data()
    Xn = torch.rand(2, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError):
        PairwiseGP(X, C).condition_on_observations(Xn, C[..., 0])
    model = PairwiseLaplaceGP(X, C)
    for exc in (RuntimeError, ValueError, PreferenceDataError, PreferenceInputError):
        with pytest.raises(exc):
            model.condition_on_observations(Xn, C[..., 0])
    with pytest.raises(RuntimeError, match="must lie in"):
        PairwiseLaplaceGP(X, torch.tensor([[0, 9]]))
    with pytest.raises(RuntimeError, match="must lie in"):
        model.set_train_data(X, torch.tensor([[0, 9]]))
    torch.testing.assert_close(model.comparisons, C)


# ----------------------------------------------------------------- 9. mixed dtypes
def test_test_points_of_another_float_dtype_are_cast_as_pairwise_gp():
    """PairwiseGP casts test points to its training dtype; so does the model (float32 bounds
    built with torch.zeros(d), as BoTorch's tutorials do, must work on a float64 model)."""
    X, C = random_comparisons(8, 10, seed=13, dtype=torch.float32)
    model32 = PairwiseLaplaceGP(X, C)
    model64 = PairwiseLaplaceGP(X.double(), C)
    ref = PairwiseGP(X.double(), C)
    Xt = torch.rand(3, 4, 2, generator=torch.Generator().manual_seed(0))
    for model, dtype in ((model64, torch.float64), (model32, torch.float32)):
        other = Xt.double() if dtype == torch.float32 else Xt
        post, same = model.posterior(other), model.posterior(Xt.to(dtype))
        assert post.mean.dtype == dtype
        torch.testing.assert_close(post.mean, same.mean)
        torch.testing.assert_close(post.variance, same.variance)
    assert ref.posterior(Xt).mean.dtype == torch.float64  # BoTorch's behaviour, matched
    # the cast is differentiable: gradients reach float32 points through a float64 model
    Xg = Xt.clone().requires_grad_(True)
    model64.posterior(Xg).mean.sum().backward()
    assert Xg.grad is not None and Xg.grad.dtype == torch.float32
    prior = PairwiseLaplaceGP(None, None)  # float64 default kernel
    assert prior.posterior(Xt).mean.dtype == torch.float64


def test_non_float_or_non_finite_test_points_raise_a_clear_error():
    """Integer, boolean and complex points are refused (not cast), as are NaN and infinity."""
    X, C = random_comparisons(8, 10, seed=13)
    model = PairwiseLaplaceGP(X, C)
    for bad in (
        torch.ones(3, 2, dtype=torch.long),
        torch.ones(3, 2, dtype=torch.bool),
        torch.ones(3, 2, dtype=torch.complex128),
    ):
        with pytest.raises(PreferenceInputError, match=f"real floating-point.*{bad.dtype}"):
            model.posterior(bad)
    for value in (float("nan"), float("inf")):
        Xb = torch.rand(3, 2, dtype=torch.float32)
        Xb[1, 0] = value
        with pytest.raises(PreferenceInputError, match="NaN or infinite"):
            model.posterior(Xb)
    with pytest.raises(PreferenceInputError, match="input dimensions"):
        model.posterior(torch.rand(3, 5))


# ----------------------------------------------------------------- found on the way: dim
def test_dim_as_pairwise_gp_for_botorch_eubo_input_constructors():
    """PairwiseGP.dim is the input dimension (None without data); BoTorch's EUBO input
    constructors read pref_model.dim to draw the outcome model's fixed sample (BOPE in Ax)."""
    from botorch.acquisition.input_constructors import get_acqf_input_constructor
    from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
    from botorch.models import SingleTaskGP

    Y, C = random_comparisons(8, 10, seed=14)  # outcome vectors in 2-D
    for cls in (PairwiseLaplaceGP, PairwiseGP):
        assert cls(Y, C).dim == 2
        assert cls(None, None).dim is None
    X = torch.rand(6, 3, dtype=torch.float64)
    outcome_model = SingleTaskGP(X, torch.rand(6, 2, dtype=torch.float64))
    constructor = get_acqf_input_constructor(AnalyticExpectedUtilityOfBestOption)
    inputs = constructor(model=outcome_model, pref_model=PairwiseLaplaceGP(Y, C))
    acqf = AnalyticExpectedUtilityOfBestOption(**inputs)
    assert acqf(torch.rand(4, 2, 3, dtype=torch.float64)).shape == (4,)


def test_posterior_transform_gets_the_test_points():
    """PairwiseGP calls posterior_transform(posterior=..., X=X), as BoTorch's models do."""
    from botorch.acquisition.objective import PosteriorTransform

    class Recording(PosteriorTransform):
        scalarize = True

        def evaluate(self, Y, X=None):
            return Y

        def forward(self, posterior, X=None):
            self.X = X
            return posterior

    X, C = small_data()
    Xt = torch.rand(3, 2, dtype=torch.float64)
    for model in (PairwiseLaplaceGP(X, C), PairwiseGP(X, C)):
        transform = Recording()
        model.posterior(Xt, posterior_transform=transform)
        assert transform.X is Xt


@pytest.mark.parametrize("shape", [(0, 2), (0, 3, 2), (4, 0, 2)])
def test_posterior_at_no_test_points_is_empty_like_pairwise_gp(shape):
    X, C = small_data()
    ours = PairwiseLaplaceGP(X, C, covar_module=plain_kernel(2))
    ref = PairwiseGP(X, C, covar_module=plain_kernel(2))
    Xt = torch.rand(*shape, dtype=torch.float64)
    po, pr = ours.posterior(Xt), ref.posterior(Xt)
    assert po.mean.shape == pr.mean.shape == (*shape[:-1], 1)
    assert po.variance.shape == pr.variance.shape
