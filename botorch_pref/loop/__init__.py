"""The preference-optimisation loop: ask a person about ``q`` designs, learn, ask again."""

from botorch_pref.loop.answers import Answer, InvalidAnswerError, validate_answer
from botorch_pref.loop.optimizer import (
    MODEL_FACTORIES,
    STRATEGIES,
    Hyperparameters,
    ModelFactory,
    PreferenceOptimizer,
    QueryRecord,
    Recommendation,
    acquisition_effort,
    box_covar_module,
    laplace_box_model,
    laplace_model,
    pairwisegp_model,
)
from botorch_pref.loop.seeding import Stream, derived_seed

__all__ = [
    "MODEL_FACTORIES",
    "STRATEGIES",
    "Answer",
    "Hyperparameters",
    "InvalidAnswerError",
    "ModelFactory",
    "PreferenceOptimizer",
    "QueryRecord",
    "Recommendation",
    "Stream",
    "acquisition_effort",
    "box_covar_module",
    "derived_seed",
    "laplace_box_model",
    "laplace_model",
    "pairwisegp_model",
    "validate_answer",
]
