"""Ax's preference-exploration generator with PairwiseLaplaceGP and BoTorch's preference
acquisitions: the model itself in the surrogate (not a one-member ModelList), so analytic EUBO
and qLogNEI work as with Ax's own PairwiseGP adapter."""

from __future__ import annotations

import pytest
import torch

ax = pytest.importorskip("ax")

from ax.adapter.torch import TorchAdapter  # noqa: E402
from ax.generators.torch.botorch_modular.generator import BoTorchGenerator  # noqa: E402
from botorch.acquisition.logei import qLogNoisyExpectedImprovement  # noqa: E402
from botorch.acquisition.preference import (  # noqa: E402
    AnalyticExpectedUtilityOfBestOption,
    qExpectedUtilityOfBestOption,
)
from botorch.models.model import ModelList  # noqa: E402

from botorch_pref import PairwiseLaplaceGP  # noqa: E402
from botorch_pref.integrations.ax import (  # noqa: E402
    PreferenceSurrogate,
    get_preference_adapter,
    get_preference_model,
    preference_surrogate_spec,
)

from .test_ax import FAST_GEN, OUTCOMES, pe_experiment  # noqa: E402

# Ax and BoTorch warn about their own internals on every fit; the tests check behaviour.
pytestmark = pytest.mark.usefixtures("quiet_warnings")


@pytest.mark.parametrize(
    "acqf_class, n, options",
    [
        (AnalyticExpectedUtilityOfBestOption, 2, {"sequential": False}),
        (qLogNoisyExpectedImprovement, 2, {}),
        (qExpectedUtilityOfBestOption, 3, {}),
    ],
)
def test_preference_generator_runs_botorch_preference_acquisitions(acqf_class, n, options):
    """Ax's own test_pairwise_preference_generator cases, with our model."""
    pe = pe_experiment(n_pairs=6)
    adapter = get_preference_adapter(pe, pe.lookup_data(), botorch_acqf_class=acqf_class)
    model = adapter.generator.surrogate.model
    assert isinstance(model, PairwiseLaplaceGP) and model is get_preference_model(adapter)
    gen_options = {"optimizer_kwargs": {**FAST_GEN["optimizer_kwargs"], **options}}
    torch.manual_seed(0)
    arms = adapter.gen(n=n, model_gen_options=gen_options).arms
    assert len(arms) == n
    assert isinstance(adapter.generator._acquisition.acqf, acqf_class)
    for arm in arms:
        assert set(arm.parameters) == set(OUTCOMES)
        assert all(0.0 <= v <= 2.0 for v in arm.parameters.values())


def test_a_bare_surrogate_spec_leaves_ax_model_list_on_preference_data():
    """Why the surrogate exists: Ax's own Surrogate wraps the one preference model in a
    ModelList whenever metric_to_model_configs is set."""
    pe = pe_experiment(n_pairs=4)
    ours = get_preference_adapter(pe, pe.lookup_data())
    bare = TorchAdapter(
        experiment=pe,
        search_space=pe.search_space,
        data=pe.lookup_data(),
        optimization_config=ours._optimization_config,
        fit_tracking_metrics=False,
        generator=BoTorchGenerator(surrogate_spec=preference_surrogate_spec()),
        transforms=[],
    )
    assert isinstance(bare.generator.surrogate.model, ModelList)
    assert isinstance(ours.generator.surrogate, PreferenceSurrogate)
    assert isinstance(ours.generator.surrogate.model, PairwiseLaplaceGP)


def test_state_dict_of_the_bare_model_is_loaded():
    """Ax refits with the model's state dict (cross-validation: refit=False); the bare model's
    keys are mapped to the list's, so the fitted hyperparameters are kept, not reset."""
    pe = pe_experiment(n_pairs=6)
    adapter = get_preference_adapter(pe, pe.lookup_data())
    surrogate = adapter.generator.surrogate
    fitted = surrogate.model.covar_module.outputscale.detach().clone()
    datasets = list(surrogate.training_data)
    surrogate.fit(
        datasets,
        adapter.generator.search_space_digest,
        state_dict=surrogate.model.state_dict(),
        refit=False,
    )
    assert isinstance(surrogate.model, PairwiseLaplaceGP)
    torch.testing.assert_close(surrogate.model.covar_module.outputscale.detach(), fitted)
    assert not torch.allclose(fitted, torch.tensor(10.0, dtype=fitted.dtype))  # not the initial
