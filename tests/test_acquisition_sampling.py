"""qEUBO on a batched model with one seed per member: each member sees its own base samples,
those BoTorch's ``SobolQMCNormalSampler`` draws for the member's model alone."""

from __future__ import annotations

import pytest
import torch
from botorch.acquisition.preference import qExpectedUtilityOfBestOption
from botorch.sampling.normal import SobolQMCNormalSampler
from botorch.utils.sampling import draw_sobol_normal_samples
from gpytorch.kernels import MaternKernel, ScaleKernel

from botorch_pref import PairwiseLaplaceGP
from botorch_pref.acquisition import (
    LaplaceQEUBO,
    MemberSobolSampler,
    make_qeubo,
    member_sobol_normal,
)
from botorch_pref.loop.replications import run_replications
from botorch_pref.models.kernels import make_covar_module

DT = torch.float64
SEEDS = [11, 4, 29]


def _members(kernel: str) -> tuple[PairwiseLaplaceGP, list[PairwiseLaplaceGP]]:
    """A 3-member batched model and each member's model alone (same data, hyperparameters)."""
    g = torch.Generator().manual_seed(7)
    Xs = [torch.rand(12, 3, generator=g, dtype=DT) for _ in SEEDS]
    C = torch.stack([torch.arange(0, 12, 2), torch.arange(1, 12, 2)], -1)
    Cs = [C if i != 1 else C.flip(-1) for i in range(len(SEEDS))]
    ls = torch.tensor([[0.3, 0.5, 0.8], [0.6, 0.2, 0.4], [0.9, 0.7, 0.3]], dtype=DT)
    os = torch.tensor([2.0, 8.0, 4.0], dtype=DT)

    def kern(batch: torch.Size):
        if kernel == "matern12":  # not fused: BoTorch's qEUBO class
            return ScaleKernel(
                MaternKernel(0.5, ard_num_dims=3, batch_shape=batch), batch_shape=batch
            )
        return make_covar_module(3, batch_shape=batch, base_kernel=kernel)

    k = kern(torch.Size([len(SEEDS)]))
    k.base_kernel.lengthscale, k.outputscale = ls.unsqueeze(-2), os
    batch = PairwiseLaplaceGP(torch.stack(Xs), torch.stack(Cs), covar_module=k)
    singles = []
    for i, (X, Ci) in enumerate(zip(Xs, Cs, strict=True)):
        ki = kern(torch.Size())
        ki.base_kernel.lengthscale, ki.outputscale = ls[i : i + 1], os[i]
        singles.append(PairwiseLaplaceGP(X, Ci, covar_module=ki))
    return batch, singles


def _botorch_qeubo(model: PairwiseLaplaceGP, seed: int):
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([64]), seed=seed)
    return qExpectedUtilityOfBestOption(pref_model=model, sampler=sampler)


@pytest.mark.parametrize("kernel", ["rbf", "matern32", "matern12"])
@pytest.mark.parametrize("q", [2, 3])
def test_each_member_sees_the_base_samples_it_would_see_alone(kernel, q):
    batch, singles = _members(kernel)
    acqf = make_qeubo(batch, num_samples=64, seed=SEEDS)
    assert isinstance(acqf, LaplaceQEUBO) == (kernel != "matern12")
    Z = torch.rand(5, len(SEEDS), q, 3, generator=torch.Generator().manual_seed(1), dtype=DT)
    values = acqf(Z)  # 5 x R
    for r, (single, seed) in enumerate(zip(singles, SEEDS, strict=True)):
        # the reference: BoTorch's own qEUBO and sampler on the member's model alone
        torch.testing.assert_close(values[:, r], _botorch_qeubo(single, seed)(Z[:, r]))
    # with one shared seed every member would see member 0's samples: other values
    shared = make_qeubo(batch, num_samples=64, seed=SEEDS[0])(Z)
    torch.testing.assert_close(shared[:, 0], values[:, 0])
    assert not torch.allclose(shared[:, 1:], values[:, 1:])
    # no t-batch beyond the members
    torch.testing.assert_close(acqf(Z[0]), values[0])


def test_member_sobol_normal_stacks_each_seeds_draws():
    z = member_sobol_normal([3, 5], 16, 4, dtype=torch.float32, device=torch.device("cpu"))
    assert z.shape == (16, 2, 4) and z.dtype == torch.float32
    for r, s in enumerate([3, 5]):
        torch.testing.assert_close(z[:, r], draw_sobol_normal_samples(4, 16, seed=s))


def test_bad_member_seeds_are_refused():
    batch, singles = _members("rbf")
    with pytest.raises(ValueError, match="one seed per member"):
        make_qeubo(batch, seed=SEEDS[:2])
    with pytest.raises(ValueError, match="one seed per member"):
        make_qeubo(singles[0], seed=SEEDS)
    for bad in ([1, 2.5, 3], [1, "2", 3], [1, None, 3]):
        with pytest.raises(ValueError, match="integers"):
            make_qeubo(batch, seed=bad)
    with pytest.raises(ValueError, match="at least one seed"):
        MemberSobolSampler(torch.Size([8]), seeds=[])
    # BoTorch's class: the sampler checks the posterior's members
    matern, _ = _members("matern12")
    Z = torch.rand(4, 3, 2, 3, dtype=DT)  # three members
    with pytest.raises(ValueError, match="last dimension must index the 2 members"):
        make_qeubo(matern, num_samples=8, seed=[1, 2])(Z)


def test_a_batched_member_asks_what_it_asks_next_to_other_members():
    """Member seeded 6 asks the same qEUBO queries whichever member shares its batch."""
    kw = {"n_replications": 2, "n_queries": 2, "n_initial": 2, "q": 3, "scale": 0.1}
    a = run_replications("branin", "qeubo", seed=5, **kw)  # members seeded 5 and 6
    b = run_replications("branin", "qeubo", seed=6, **kw)  # members seeded 6 and 7
    torch.testing.assert_close(a.queries[1], b.queries[0], rtol=0.0, atol=1e-6)
    assert not torch.allclose(a.queries[0, 2:], a.queries[1, 2:])
