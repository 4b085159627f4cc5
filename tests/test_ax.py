"""PairwiseLaplaceGP in Ax (the ``[ax]`` extra), side by side with Ax's default PairwiseGP.

Preference exploration on a preference experiment (Ax picks qEUBO), and BOPE in Ax: a main
experiment with a ``PreferenceOptimizationConfig`` whose preference profile is a
``PE_EXPERIMENT`` auxiliary experiment; the PE stage runs qEUBO with ``pref_model=`` our model
over the outcome model, the experimentation stage qLogNEI with ``LearnedObjective`` over it.
"""

from __future__ import annotations

import pytest
import torch

ax = pytest.importorskip("ax")

from ax.adapter.cross_validation import cross_validate  # noqa: E402
from ax.adapter.torch import TorchAdapter  # noqa: E402
from ax.core.auxiliary import AuxiliaryExperiment, AuxiliaryExperimentPurpose  # noqa: E402
from ax.core.experiment import Experiment  # noqa: E402
from ax.core.metric import Metric  # noqa: E402
from ax.core.objective import MultiObjective, Objective  # noqa: E402
from ax.core.observation import ObservationFeatures  # noqa: E402
from ax.core.optimization_config import PreferenceOptimizationConfig  # noqa: E402
from ax.core.parameter import ParameterType, RangeParameter  # noqa: E402
from ax.core.search_space import SearchSpace  # noqa: E402
from ax.exceptions.core import DataRequiredError  # noqa: E402
from ax.generators.torch.botorch_modular.generator import BoTorchGenerator  # noqa: E402
from ax.generators.torch.botorch_modular.surrogate import ModelConfig, SurrogateSpec  # noqa: E402
from ax.generators.torch.botorch_modular.utils import fit_botorch_model  # noqa: E402
from ax.utils.preference import preference_utils  # noqa: E402
from botorch.acquisition import LearnedObjective  # noqa: E402
from botorch.acquisition.preference import qExpectedUtilityOfBestOption  # noqa: E402
from botorch.exceptions.errors import UnsupportedError  # noqa: E402
from botorch.models import PairwiseGP  # noqa: E402
from botorch.models.deterministic import FixedSingleSampleModel  # noqa: E402
from gpytorch.mlls import ExactMarginalLogLikelihood, LeaveOneOutPseudoLikelihood  # noqa: E402

from botorch_pref import LaplaceEvidence, PairwiseLaplaceGP  # noqa: E402
from botorch_pref.integrations.ax import (  # noqa: E402
    PREFERENCE_METRIC,
    add_comparison,
    get_preference_adapter,
    get_preference_model,
    preference_model_config,
    preference_surrogate_spec,
)

OUTCOMES = ["y1", "y2"]
INPUTS = ["x1", "x2", "x3"]
FAST_GEN = {"optimizer_kwargs": {"num_restarts": 2, "raw_samples": 64, "options": {"maxiter": 30}}}


# Ax and BoTorch warn about their own internals on every fit; the tests check behaviour.
pytestmark = pytest.mark.usefixtures("quiet_warnings")


def utility(y: dict[str, float]) -> float:
    """The decision maker: minus the L1 distance of the outcome vector to (0.5, 0.5)."""
    return -abs(y["y1"] - 0.5) - abs(y["y2"] - 0.5)


def outcomes(x: dict[str, float]) -> dict[str, float]:
    v = torch.tensor([x[n] for n in INPUTS], dtype=torch.float64)
    return {"y1": float(v.sum() / 1.5), "y2": float((1 - v).pow(2).sum())}


def answer(experiment: Experiment, a: dict[str, float], b: dict[str, float]) -> None:
    winner, loser = (a, b) if utility(a) > utility(b) else (b, a)
    add_comparison(experiment, winner, loser)


def pe_experiment(n_pairs: int = 5, seed: int = 0) -> Experiment:
    """A preference experiment over outcome vectors in [0, 2]^2 with random answered pairs."""
    space = SearchSpace([RangeParameter(n, ParameterType.FLOAT, 0.0, 2.0) for n in OUTCOMES])
    experiment = Experiment(name="pe", search_space=space, is_test=True)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(n_pairs):
        v = (2 * torch.rand(4, generator=gen, dtype=torch.float64)).tolist()
        answer(
            experiment,
            dict(zip(OUTCOMES, v[:2], strict=True)),
            dict(zip(OUTCOMES, v[2:], strict=True)),
        )
    return experiment


def bope_experiment(pe: Experiment, n_initial: int = 5) -> tuple[Experiment, AuxiliaryExperiment]:
    """The main experiment: designs in [0, 1]^3, outcomes y1, y2, preference profile ``pe``
    (the auxiliary experiment holds a snapshot of ``pe``'s data: refresh its ``data``)."""
    config = PreferenceOptimizationConfig(
        objective=MultiObjective([Objective(metric=Metric(n), minimize=False) for n in OUTCOMES]),
        preference_profile_name=pe.name,
    )
    space = SearchSpace([RangeParameter(n, ParameterType.FLOAT, 0.0, 1.0) for n in INPUTS])
    experiment = Experiment(name="main", search_space=space, optimization_config=config)
    gen = torch.Generator().manual_seed(1)
    for _ in range(n_initial):
        run(experiment, dict(zip(INPUTS, torch.rand(3, generator=gen).tolist(), strict=True)))
    aux = AuxiliaryExperiment(experiment=pe)
    experiment.add_auxiliary_experiment(
        purpose=AuxiliaryExperimentPurpose.PE_EXPERIMENT, auxiliary_experiment=aux
    )
    return experiment, aux


def run(experiment: Experiment, x: dict[str, float]) -> None:
    from ax.core import Arm, GeneratorRun

    trial = experiment.new_batch_trial(generator_run=GeneratorRun([Arm(parameters=x)]))
    y = outcomes(x)
    trial.attach_batch_trial_data(
        raw_data={trial.arms[0].name: {k: (v, 0.0) for k, v in y.items()}}
    )
    trial.mark_running(no_runner_required=True)
    trial.mark_completed()


def predicted_utility(adapter: TorchAdapter, points: list[dict[str, float]]) -> torch.Tensor:
    mean, _ = adapter.predict([ObservationFeatures(parameters=p) for p in points])
    return torch.tensor(mean[PREFERENCE_METRIC])


# ------------------------------------------------------------- preference exploration
def test_preference_adapter_builds_and_fits_our_model_side_by_side_with_ax_default():
    pe = pe_experiment(n_pairs=8)
    ours = get_preference_adapter(pe, pe.lookup_data())
    default = preference_utils.get_preference_adapter(pe, pe.lookup_data())
    model, ref = get_preference_model(ours), get_preference_model(default)
    assert isinstance(model, PairwiseLaplaceGP) and type(ref) is PairwiseGP
    assert model.comparisons.shape == (8, 2)
    # both rank held-out outcome vectors alike, and like the decision maker
    gen = torch.Generator().manual_seed(5)
    points = [
        dict(zip(OUTCOMES, (2 * torch.rand(2, generator=gen)).tolist(), strict=True))
        for _ in range(12)
    ]
    truth = torch.tensor([utility(p) for p in points])
    mine, theirs = predicted_utility(ours, points), predicted_utility(default, points)

    def agreement(a: torch.Tensor, b: torch.Tensor) -> float:
        sa, sb = torch.sign(a[:, None] - a[None]), torch.sign(b[:, None] - b[None])
        off = ~torch.eye(len(a), dtype=torch.bool)
        return float((sa == sb)[off].double().mean())

    assert agreement(mine, theirs) > 0.8
    assert agreement(mine, truth) >= agreement(theirs, truth) - 0.05


def test_preference_exploration_loop_in_ax_matches_default():
    """Rounds of qEUBO pairs from each adapter, answered by the same decision maker: the best
    outcome vector found with our model is no worse than with Ax's default PairwiseGP."""
    best = {}
    for name in ("ours", "default"):
        pe = pe_experiment(n_pairs=4, seed=2)
        for r in range(3):
            data = pe.lookup_data()
            if name == "ours":
                adapter = get_preference_adapter(pe, data)
            else:
                adapter = preference_utils.get_preference_adapter(pe, data)
            torch.manual_seed(r)
            arms = adapter.gen(n=2, model_gen_options=FAST_GEN).arms
            assert len(arms) == 2
            answer(pe, arms[0].parameters, arms[1].parameters)
        assert (name == "ours") == isinstance(get_preference_model(adapter), PairwiseLaplaceGP)
        best[name] = max(utility(a.parameters) for a in pe.arms_by_name.values())
    assert best["ours"] >= best["default"] - 0.05, best


# ------------------------------------------------------------------------- BOPE in Ax
def test_bope_in_ax_uses_our_model_in_both_stages():
    pe = pe_experiment(n_pairs=5)
    main, aux = bope_experiment(pe)
    # preference exploration: qEUBO over the outcome model with pref_model=ours
    pref_model = get_preference_model(get_preference_adapter(pe, pe.lookup_data()))
    pe_adapter = TorchAdapter(
        experiment=main,
        data=main.lookup_data(),
        generator=BoTorchGenerator(
            surrogate_spec=preference_surrogate_spec(),
            botorch_acqf_class=qExpectedUtilityOfBestOption,
            botorch_acqf_options={"pref_model": pref_model},
        ),
    )
    torch.manual_seed(0)
    arms = pe_adapter.gen(n=2, model_gen_options=FAST_GEN).arms
    acqf = pe_adapter.generator._acquisition.acqf
    assert isinstance(acqf, qExpectedUtilityOfBestOption) and acqf.model is pref_model
    assert isinstance(acqf.outcome_model, FixedSingleSampleModel)
    mean, _ = pe_adapter.predict([ObservationFeatures(parameters=a.parameters) for a in arms])
    shown = [{n: float(mean[n][i]) for n in OUTCOMES} for i in range(2)]
    n_before = len(pe.trials)
    answer(pe, *shown)
    assert len(pe.trials) == n_before + 1
    aux.data = pe.lookup_data()  # the profile's snapshot of the answers
    # experimentation: Ax's qLogNEI with LearnedObjective over the refitted preference model
    exp_adapter = TorchAdapter(
        experiment=main,
        data=main.lookup_data(),
        generator=BoTorchGenerator(surrogate_spec=preference_surrogate_spec()),
    )
    learned = get_preference_model(exp_adapter)
    assert isinstance(learned, PairwiseLaplaceGP) and learned.comparisons.shape[0] == 6
    torch.manual_seed(0)
    candidate = exp_adapter.gen(n=1, model_gen_options=FAST_GEN).arms[0]
    objective = exp_adapter.generator._acquisition.acqf.objective
    assert isinstance(objective, LearnedObjective) and objective.pref_model is learned
    assert set(candidate.parameters) == set(INPUTS)
    # Ax's cross-validation refits with a state dict that leaves the preference model out
    # (an empty one for it): PairwiseGP's non-strict default, which ours shares
    folds = cross_validate(exp_adapter)
    assert len(folds) == len(main.arms_by_name) == 5  # leave-one-out over the designs run


# ----------------------------------------------------------------- registration, configs
def test_fit_botorch_model_is_registered_and_reads_ax_default_mll_as_evidence():
    X = torch.rand(8, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    C = torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7], [1, 2]])
    model = PairwiseLaplaceGP(X, C)
    before = float(LaplaceEvidence(model.likelihood, model)())
    fit_botorch_model(model, mll_class=ExactMarginalLogLikelihood)  # Ax's default for others
    assert float(LaplaceEvidence(model.likelihood, model)()) > before
    fit_botorch_model(model, mll_class=LaplaceEvidence)
    with pytest.raises(UnsupportedError, match="LaplaceEvidence"):
        fit_botorch_model(model, mll_class=LeaveOneOutPseudoLikelihood)


def test_model_configs_alone_do_not_reach_preference_data():
    """Where Ax cannot take a custom preference model: ``SurrogateSpec.model_configs`` is not
    used for preference data (Surrogate.fit falls back to ModelConfig(), i.e. PairwiseGP), and
    Ax's own get_preference_adapter always builds PairwiseGP. metric_to_model_configs works."""
    pe = pe_experiment(n_pairs=4)
    adapter = TorchAdapter(
        experiment=pe,
        search_space=pe.search_space,
        data=pe.lookup_data(),
        optimization_config=get_preference_adapter(pe, pe.lookup_data())._optimization_config,
        fit_tracking_metrics=False,
        generator=BoTorchGenerator(
            surrogate_spec=SurrogateSpec(model_configs=[preference_model_config()])
        ),
        transforms=[],
    )
    assert type(get_preference_model(adapter)) is PairwiseGP
    default = preference_utils.get_preference_adapter(pe, pe.lookup_data())
    assert type(get_preference_model(default)) is PairwiseGP


def test_bad_input_is_rejected_and_leaves_the_experiment_unchanged():
    pe = pe_experiment(n_pairs=2)
    n = len(pe.trials)
    with pytest.raises(ValueError, match="exactly the parameters"):
        add_comparison(pe, {"y1": 0.1}, {"y1": 0.2, "y2": 0.3})
    with pytest.raises(ValueError, match="outside"):
        add_comparison(pe, {"y1": 5.0, "y2": 0.1}, {"y1": 0.2, "y2": 0.3})
    with pytest.raises(ValueError, match="same design"):
        add_comparison(pe, {"y1": 0.2, "y2": 0.3}, {"y1": 0.2, "y2": 0.3})
    assert len(pe.trials) == n
    empty = Experiment(name="e", search_space=pe.search_space, is_test=True)
    with pytest.raises(DataRequiredError):
        get_preference_adapter(empty, empty.lookup_data())
    with pytest.raises(ValueError, match="model_config"):
        preference_surrogate_spec(metric_to_model_configs={PREFERENCE_METRIC: [ModelConfig()]})
