"""Edges of the Ax integration: bad input refused by name, before Ax or the experiment see it."""

from __future__ import annotations

import math

import pytest

ax = pytest.importorskip("ax")

from ax.core.data import Data  # noqa: E402
from ax.core.experiment import Experiment  # noqa: E402
from ax.core.parameter import ParameterType, RangeParameter  # noqa: E402
from ax.core.search_space import SearchSpace  # noqa: E402
from ax.exceptions.core import DataRequiredError  # noqa: E402

from botorch_pref.integrations.ax import (  # noqa: E402
    add_comparison,
    get_preference_adapter,
    preference_surrogate_spec,
)

# Ax and BoTorch warn about their own internals on every fit; the tests check behaviour.
pytestmark = pytest.mark.usefixtures("quiet_warnings")


def _experiment(n_pairs: int = 2) -> Experiment:
    space = SearchSpace([RangeParameter(n, ParameterType.FLOAT, 0.0, 2.0) for n in ("y1", "y2")])
    experiment = Experiment(name="pe", search_space=space, is_test=True)
    for i in range(n_pairs):
        add_comparison(experiment, {"y1": 0.1 * i, "y2": 1.0}, {"y1": 1.5, "y2": 0.1 * i})
    return experiment


@pytest.mark.parametrize("bad", [math.nan, float("-nan")])
def test_add_comparison_refuses_nan_parameters(bad):
    experiment = _experiment()
    n = len(experiment.trials)
    with pytest.raises(ValueError, match="winner parameter 'y1' is nan"):
        add_comparison(experiment, {"y1": bad, "y2": 0.5}, {"y1": 0.2, "y2": 0.3})
    with pytest.raises(ValueError, match="loser parameter 'y2' is nan"):
        add_comparison(experiment, {"y1": 0.5, "y2": 0.5}, {"y1": 0.2, "y2": bad})
    assert len(experiment.trials) == n


def test_preference_adapter_needs_preference_rows_in_the_data():
    experiment = _experiment()
    df = experiment.lookup_data().df
    other = Data(df=df.assign(metric_name="y1", metric_signature="y1"))
    with pytest.raises(DataRequiredError, match="No preference data"):
        get_preference_adapter(experiment, other)


def test_preference_adapter_and_spec_check_argument_types():
    experiment = _experiment()
    data = experiment.lookup_data()
    with pytest.raises(TypeError, match="model_config must be an Ax ModelConfig"):
        preference_surrogate_spec("PairwiseLaplaceGP")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="model_config must be an Ax ModelConfig"):
        get_preference_adapter(experiment, data, model_config="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="data must be an Ax Data"):
        get_preference_adapter(experiment, data.df)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="experiment must be an Ax Experiment"):
        get_preference_adapter(None, data)  # type: ignore[arg-type]
