"""The preference-optimisation loop: ask a person about ``q`` designs, learn, ask again.

* :mod:`~botorch_pref.loop.config`: the settings that are not a query step's own, their
  defaults and checks (:class:`LoopConfig`);
* :mod:`~botorch_pref.loop.policy`: what each query asks, an ordered list of steps
  (:class:`QueryPolicy`: :class:`Initial`, :class:`Local`, :class:`Lookahead`, :class:`Acquire`);
* :mod:`~botorch_pref.loop.answers`: one validator and one encoding of answers;
* :mod:`~botorch_pref.loop.history`: the record of answers and the data derived from it;
* :mod:`~botorch_pref.loop.state`: propose / record / refit / recommend for ``R`` members;
* :mod:`~botorch_pref.loop.backends`: how models are held, fitted and their acquisition
  functions maximised (sequential or batched);
* :mod:`~botorch_pref.loop.seeding`: the derived seeds;
* :mod:`~botorch_pref.loop.optimizer`: :class:`PreferenceOptimizer`, the ask/tell facade;
* :mod:`~botorch_pref.loop.replications`: :func:`run_replications`, lockstep PBO studies.

The model factories live in :mod:`botorch_pref.models.factories` and are re-exported here.
"""

from botorch_pref.loop.answers import Answer, AnswerFormat, InvalidAnswerError, validate_answer
from botorch_pref.loop.config import LaplaceFactory, LoopConfig, acquisition_effort
from botorch_pref.loop.history import QueryRecord
from botorch_pref.loop.hyperparameters import Hyperparameters
from botorch_pref.loop.optimizer import PreferenceOptimizer, Recommendation
from botorch_pref.loop.policy import (
    STRATEGIES,
    Acquire,
    Initial,
    Local,
    Lookahead,
    QueryPolicy,
    Step,
    default_policy,
    strategy_policy,
)
from botorch_pref.loop.replications import ReplicationResults, run_replications
from botorch_pref.loop.seeding import Stream, derived_seed
from botorch_pref.loop.state import LoopState
from botorch_pref.models.factories import (
    MODEL_FACTORIES,
    ModelFactory,
    box_covar_module,
    laplace_box_model,
    laplace_model,
    pairwisegp_model,
)

__all__ = [
    "MODEL_FACTORIES",
    "STRATEGIES",
    "Acquire",
    "Answer",
    "AnswerFormat",
    "Hyperparameters",
    "Initial",
    "InvalidAnswerError",
    "LaplaceFactory",
    "Local",
    "Lookahead",
    "LoopConfig",
    "LoopState",
    "ModelFactory",
    "PreferenceOptimizer",
    "QueryPolicy",
    "QueryRecord",
    "Recommendation",
    "ReplicationResults",
    "Step",
    "Stream",
    "acquisition_effort",
    "box_covar_module",
    "default_policy",
    "derived_seed",
    "laplace_box_model",
    "laplace_model",
    "pairwisegp_model",
    "run_replications",
    "strategy_policy",
    "validate_answer",
]
