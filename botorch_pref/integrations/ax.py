r"""PairwiseLaplaceGP in Ax's modular BoTorch generator (the optional extra ``[ax]``).

How Ax (1.3) builds its preference model. Pairwise answers live in an experiment whose single
metric is ``Keys.PAIRWISE_PREFERENCE_QUERY`` (``"pairwise_pref_query"``): every trial is a
batch of two arms, the preferred one with value 1. ``TorchAdapter`` turns them into a
``RankingDataset`` (``ax.adapter.adapter_utils.prep_pairwise_data``), and the modular
``Surrogate`` builds one BoTorch model per dataset:

1. ``Surrogate.fit`` picks the ``ModelConfig``: for a ``RankingDataset`` only
   ``SurrogateSpec.metric_to_model_configs["pairwise_pref_query"]`` counts, otherwise it falls
   back to a default ``ModelConfig()`` (``SurrogateSpec.model_configs`` is *not* used for
   preference data);
2. ``choose_model_class`` takes ``PairwiseGP`` when no class is given, and
   ``copy_model_config_with_default_values`` gives ``PairwiseLaplaceMarginalLogLikelihood`` to
   ``PairwiseGP`` only (any other class gets ``ExactMarginalLogLikelihood``);
3. ``submodel_input_constructor`` calls ``model_class.construct_inputs(training_data=dataset,
   **model_options)`` and adds the submodules (input transforms, ``likelihood``,
   ``covar_module``) named in the config;
4. ``fit_botorch_model`` (a dispatcher on the model class, registered for ``GPyTorchModel`` and
   ``PairwiseGP`` only) fits the model with ``mll_class(likelihood=..., model=...)``.

Two flows use that model: preferential BO / preference exploration on the preference
experiment itself (the objective is the preference metric, and Ax picks
``qExpectedUtilityOfBestOption``), and BOPE, where the preference experiment is a
``PE_EXPERIMENT`` auxiliary experiment of the main one, whose ``PreferenceOptimizationConfig``
makes the acquisition use ``LearnedObjective(pref_model=<the preference submodel>)``.

The model list. Ax's ``use_model_list`` answers "yes" whenever ``metric_to_model_configs`` is
set, and a ``RankingDataset``'s ``Y`` (ranks, ``m x 2``) never looks like one outcome, so in
step 1's route the surrogate's model is a one-member ``ModelList``. Acquisition functions that
want the preference model itself then fail on the list: analytic EUBO with "'ModelList' object
has no attribute 'datapoints'", ``qLogNoisyExpectedImprovement`` with "scalarize_posterior only
works with a PosteriorList if each sub-posterior has q=1" (``PairwiseGP`` placed by the same
route fails the same way; Ax's own preference adapter avoids the list only because a
``RankingDataset`` outside ``metric_to_model_configs`` falls back to ``PairwiseGP``, so no other
class can get there). :class:`PreferenceSurrogate` is Ax's ``Surrogate`` with one change: after
fitting a single preference dataset it holds the fitted model itself, not the one-member list;
on the preference experiment (preference exploration, preferential BO) use it through
:func:`preference_surrogate` or :func:`get_preference_adapter`, and every BoTorch preference
acquisition (qEUBO, analytic EUBO, qLogNEI on the utility) works. A BOPE main experiment (several
datasets) keeps Ax's model list, where ``LearnedObjective`` takes the preference model by name.

This module registers :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with
``fit_botorch_model`` (on import), and gives the configs that put it in step 1
(:func:`preference_model_config`, :func:`preference_surrogate_spec`), the surrogate
(:func:`preference_surrogate`) and a preference adapter (:func:`get_preference_adapter`, Ax's
own hard-codes ``PairwiseGP``). Its ``construct_inputs`` (step 3) is the model's own.
"""

from __future__ import annotations

import math
import numbers
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from ax.adapter.torch import TorchAdapter
from ax.core.arm import Arm
from ax.core.batch_trial import BatchTrial
from ax.core.data import Data
from ax.core.experiment import Experiment
from ax.core.generator_run import GeneratorRun
from ax.core.metric import Metric
from ax.core.objective import Objective
from ax.core.optimization_config import OptimizationConfig
from ax.core.search_space import SearchSpaceDigest
from ax.exceptions.core import DataRequiredError
from ax.generators.torch.botorch_modular.generator import BoTorchGenerator
from ax.generators.torch.botorch_modular.surrogate import ModelConfig, Surrogate, SurrogateSpec
from ax.generators.torch.botorch_modular.utils import fit_botorch_model
from ax.utils.common.constants import Keys
from botorch.acquisition import AcquisitionFunction
from botorch.exceptions.errors import UnsupportedError
from botorch.fit import fit_gpytorch_mll
from botorch.models.model import Model, ModelList
from botorch.models.transforms.input import Normalize
from botorch.utils.datasets import RankingDataset, SupervisedDataset
from gpytorch.mlls import ExactMarginalLogLikelihood, MarginalLogLikelihood
from torch import Tensor

from botorch_pref.models.evidence import LaplaceEvidence
from botorch_pref.models.pairwise import PairwiseLaplaceGP

__all__ = [
    "PREFERENCE_METRIC",
    "PreferenceSurrogate",
    "add_comparison",
    "fit_pairwise_laplace_gp",
    "get_preference_adapter",
    "get_preference_model",
    "preference_model_config",
    "preference_surrogate",
    "preference_surrogate_spec",
]

#: The name of the metric an Ax preference experiment records its pairwise answers under
#: (Ax's ``Keys.PAIRWISE_PREFERENCE_QUERY``).
PREFERENCE_METRIC: str = Keys.PAIRWISE_PREFERENCE_QUERY.value


@fit_botorch_model.register(PairwiseLaplaceGP)
def fit_pairwise_laplace_gp(
    model: PairwiseLaplaceGP,
    mll_class: type[MarginalLogLikelihood],
    mll_options: dict[str, Any] | None = None,
) -> None:
    """Ax's ``fit_botorch_model`` for :class:`PairwiseLaplaceGP`: ``fit_gpytorch_mll`` on its
    Laplace evidence.

    Ax gives every model class but ``PairwiseGP`` ``ExactMarginalLogLikelihood`` when the
    ``ModelConfig`` names no ``mll_class``; that default is read as :class:`LaplaceEvidence`.

    Args:
        model: The model Ax built.
        mll_class: :class:`LaplaceEvidence` (or a subclass), or Ax's default
            ``ExactMarginalLogLikelihood``.
        mll_options: Keyword arguments of the mll (none are needed).

    Raises:
        UnsupportedError: for any other mll class.
    """
    if mll_class is ExactMarginalLogLikelihood:
        mll_class = LaplaceEvidence
    if not (isinstance(mll_class, type) and issubclass(mll_class, LaplaceEvidence)):
        raise UnsupportedError(
            f"PairwiseLaplaceGP is fitted with LaplaceEvidence, not {mll_class}; set "
            "ModelConfig(mll_class=LaplaceEvidence) or leave it out."
        )
    mll = mll_class(likelihood=model.likelihood, model=model, **(mll_options or {}))
    fit_gpytorch_mll(mll)


def preference_model_config(
    model_options: dict[str, Any] | None = None,
    normalize: bool = True,
    **kwargs: Any,
) -> ModelConfig:
    """A ``ModelConfig`` for :class:`PairwiseLaplaceGP` fitted with :class:`LaplaceEvidence`.

    Args:
        model_options: Constructor options passed through ``construct_inputs`` (``form``,
            ``tol``, ``max_iter``).
        normalize: Map the compared designs to the unit cube with ``Normalize``, as Ax's own
            preference adapter does (for preference data Ax learns the bounds from the data,
            since a preference search space may be unbounded); ``False`` leaves Ax's default
            input transforms.
        kwargs: Further ``ModelConfig`` fields (``covar_module_class``, ``likelihood_class``,
            ``name``...).

    Returns:
        The config.
    """
    if normalize:
        kwargs.setdefault("input_transform_classes", [Normalize])
    return ModelConfig(
        botorch_model_class=PairwiseLaplaceGP,
        model_options=dict(model_options or {}),
        mll_class=LaplaceEvidence,
        **kwargs,
    )


def preference_surrogate_spec(
    model_config: ModelConfig | None = None, **kwargs: Any
) -> SurrogateSpec:
    """A ``SurrogateSpec`` whose preference data (``"pairwise_pref_query"``) get our model.

    Use it for a BOPE experiment with a preference profile (outcome metrics keep ``kwargs``'
    model configs, Ax's defaults when none), and, wrapped in :func:`preference_surrogate`, for
    the preference experiment itself: a bare ``SurrogateSpec`` there leaves the model in a
    one-member ``ModelList``, on which analytic EUBO and qLogNEI fail (module docstring).

    Args:
        model_config: The preference model's config; default :func:`preference_model_config`.
        kwargs: Further ``SurrogateSpec`` fields (``model_configs`` for the outcome metrics...).

    Returns:
        The spec.

    Raises:
        TypeError: if ``model_config`` is neither a ``ModelConfig`` nor ``None``.
    """
    if model_config is not None and not isinstance(model_config, ModelConfig):
        raise TypeError(
            f"model_config must be an Ax ModelConfig or None, got {type(model_config).__name__} "
            "(see preference_model_config)."
        )
    configs = dict(kwargs.pop("metric_to_model_configs", None) or {})
    if PREFERENCE_METRIC in configs:
        raise ValueError(
            f"metric_to_model_configs already has {PREFERENCE_METRIC!r}; pass its config as "
            "model_config instead."
        )
    configs[PREFERENCE_METRIC] = [model_config or preference_model_config()]
    return SurrogateSpec(metric_to_model_configs=configs, **kwargs)


class PreferenceSurrogate(Surrogate):
    """Ax's ``Surrogate`` that holds a single preference dataset's model itself, not in a
    one-member ``ModelList`` (module docstring).

    Everything else is Ax's: model selection, ``construct_inputs``, fitting, state dicts (a
    state dict of the bare model, as ``adapter.generator.surrogate.model.state_dict()`` gives
    it, is accepted where Ax would expect the list's ``models.0.`` keys).
    """

    def fit(
        self,
        datasets: Sequence[SupervisedDataset],
        search_space_digest: SearchSpaceDigest,
        candidate_metadata: list | None = None,
        state_dict: Mapping[str, Tensor] | None = None,
        refit: bool = True,
        repeat_model_selection_if_dataset_changed: bool = True,
    ) -> None:
        """Ax's ``Surrogate.fit``; then a one-member model list of a preference dataset is
        replaced by its model. Arguments as Ax's."""
        single = len(datasets) == 1 and isinstance(datasets[0], RankingDataset)
        if (
            single
            and state_dict is not None
            and not any(k.startswith("models.") for k in state_dict)
        ):
            state_dict = OrderedDict((f"models.0.{k}", v) for k, v in state_dict.items())
        super().fit(
            datasets,
            search_space_digest,
            candidate_metadata=candidate_metadata,
            state_dict=state_dict,
            refit=refit,
            repeat_model_selection_if_dataset_changed=repeat_model_selection_if_dataset_changed,
        )
        if single and isinstance(self._model, ModelList) and len(self._model.models) == 1:
            self._model = self._model.models[0]


def preference_surrogate(model_config: ModelConfig | None = None, **kwargs: Any) -> Surrogate:
    """A :class:`PreferenceSurrogate` whose preference data get our model.

    For a generator of its own, e.g. ``BoTorchGenerator(surrogate=preference_surrogate(),
    botorch_acqf_class=AnalyticExpectedUtilityOfBestOption)`` in a ``TorchAdapter`` over the
    preference experiment.

    Args:
        model_config: The preference model's config; default :func:`preference_model_config`.
        kwargs: Further ``SurrogateSpec`` fields.

    Returns:
        The surrogate.
    """
    return PreferenceSurrogate(surrogate_spec=preference_surrogate_spec(model_config, **kwargs))


def get_preference_adapter(
    experiment: Experiment,
    data: Data,
    model_config: ModelConfig | None = None,
    botorch_acqf_class: type[AcquisitionFunction] | None = None,
) -> TorchAdapter:
    """A fitted ``TorchAdapter`` over a preference experiment, with :class:`PairwiseLaplaceGP`.

    The counterpart of Ax's ``ax.utils.preference.preference_utils.get_preference_adapter``
    (which always builds ``PairwiseGP``): same data handling (no Ax transforms, only the
    preference metric is modelled), our model in a :class:`PreferenceSurrogate`.
    ``adapter.gen(n=2)`` then proposes the next pair with ``botorch_acqf_class`` (Ax picks
    ``qExpectedUtilityOfBestOption`` when it is ``None``; analytic EUBO takes
    ``model_gen_options={"optimizer_kwargs": {"sequential": False}}`` and ``n=2``), and
    ``adapter.generator.surrogate.model`` is the fitted :class:`PairwiseLaplaceGP` itself
    (also :func:`get_preference_model`).

    Args:
        experiment: The preference experiment: its parameters are what is compared (outcome
            names for preference exploration) and its two-arm batch trials carry the
            ``"pairwise_pref_query"`` metric (1 for the preferred arm, 0 for the other).
        data: The preference data (``experiment.lookup_data()``).
        model_config: The model config; default :func:`preference_model_config`.
        botorch_acqf_class: The acquisition function class, e.g.
            ``AnalyticExpectedUtilityOfBestOption`` or ``qLogNoisyExpectedImprovement``;
            ``None`` lets Ax choose.

    Returns:
        The fitted adapter.

    Raises:
        TypeError: if ``experiment``, ``data`` or ``model_config`` is of the wrong type.
        DataRequiredError: if ``data`` holds no ``"pairwise_pref_query"`` row.
    """
    for name, value, kind in (("experiment", experiment, Experiment), ("data", data, Data)):
        if not isinstance(value, kind):
            raise TypeError(f"{name} must be an Ax {kind.__name__}, got {type(value).__name__}.")
    df = data.df
    if df.empty or "metric_name" not in df or not (df["metric_name"] == PREFERENCE_METRIC).any():
        raise DataRequiredError(
            f"No preference data available ({PREFERENCE_METRIC!r} rows). At least one pairwise "
            "comparison is required to fit the preference model."
        )
    surrogate = preference_surrogate(model_config)
    metric = Metric(name=PREFERENCE_METRIC)
    if PREFERENCE_METRIC not in experiment.metrics:
        experiment.add_tracking_metric(metric)
    return TorchAdapter(
        experiment=experiment,
        search_space=experiment.search_space,
        data=data,
        optimization_config=OptimizationConfig(objective=Objective(metric=metric, minimize=False)),
        fit_tracking_metrics=False,
        generator=BoTorchGenerator(surrogate=surrogate, botorch_acqf_class=botorch_acqf_class),
        transforms=[],
    )


def get_preference_model(adapter: TorchAdapter) -> Model:
    """The fitted preference model of an adapter (of a preference experiment, or of a BOPE
    experiment with a preference profile, where it is one member of Ax's model list).

    Args:
        adapter: A fitted ``TorchAdapter`` with a ``BoTorchGenerator``.

    Returns:
        The model Ax fitted to the ``"pairwise_pref_query"`` data.

    Raises:
        DataRequiredError: if the adapter has no preference model.
    """
    submodels = getattr(getattr(adapter.generator, "surrogate", None), "_submodels", {})
    model = submodels.get((PREFERENCE_METRIC,))
    if model is None:
        raise DataRequiredError(
            f"The adapter has no preference model (no {PREFERENCE_METRIC!r} data were fitted)."
        )
    return model


def add_comparison(
    experiment: Experiment,
    winner: dict[str, float],
    loser: dict[str, float],
) -> BatchTrial:
    """Record one answer in a preference experiment, as Ax expects it: a completed two-arm
    batch trial with ``"pairwise_pref_query"`` 1 for the preferred arm and 0 for the other.

    Args:
        experiment: The preference experiment.
        winner: Parameters of the preferred arm (all of the search space's parameters).
        loser: Parameters of the other arm.

    Returns:
        The completed trial.

    Raises:
        ValueError: if an arm's parameters are not exactly the search space's, are NaN or lie
            outside it, or if both arms are the same design; nothing is added to the experiment
            then.
    """
    names = set(experiment.search_space.parameters)
    if dict(winner) == dict(loser):
        raise ValueError("winner and loser are the same design; a comparison needs two.")
    for what, params in (("winner", winner), ("loser", loser)):
        if set(params) != names:
            raise ValueError(
                f"{what} must give exactly the parameters {sorted(names)}, got {sorted(params)}."
            )
        for name, value in params.items():
            # Ax's range check compares, and every comparison with NaN is False.
            if isinstance(value, numbers.Real) and math.isnan(value):
                raise ValueError(f"{what} parameter {name!r} is nan; a design needs numbers.")
        if not experiment.search_space.check_membership(dict(params)):
            raise ValueError(f"{what} {params} lies outside the search space.")
    if PREFERENCE_METRIC not in experiment.metrics:
        experiment.add_tracking_metric(Metric(name=PREFERENCE_METRIC))
    trial = experiment.new_batch_trial(
        generator_run=GeneratorRun([Arm(parameters=dict(winner)), Arm(parameters=dict(loser))])
    )
    first, second = trial.arms
    trial.attach_batch_trial_data(
        raw_data={
            first.name: {PREFERENCE_METRIC: (1.0, 0.0)},
            second.name: {PREFERENCE_METRIC: (0.0, 0.0)},
        }
    )
    trial.mark_running(no_runner_required=True)
    trial.mark_completed()
    return trial
