r"""Laplace inference engines: pure tensor code, no GPyTorch classes.

* :mod:`~botorch_pref.inference.rows`: the difference rows ``A`` (gathers and scatters).
* :mod:`~botorch_pref.inference.newton`: the damped-Newton driver.
* :mod:`~botorch_pref.inference.engine`: :class:`LaplaceEngine`, the mode, posterior factors and
  evidence written once for any curvature.
* :mod:`~botorch_pref.inference.pairs`: :class:`PairEngine`, pairs with a diagonal curvature.
* :mod:`~botorch_pref.inference.blocks`: :class:`BlockEngine`, choices, rankings and ties with a
  block-diagonal curvature.
* :mod:`~botorch_pref.inference.select`: which engine takes which answers
  (:func:`engine_for_data`).
* :mod:`~botorch_pref.inference.ep`: expectation propagation for probit pairs, started from the
  Laplace mode; its factors take the Laplace factors' form.
"""

from botorch_pref.inference.blocks import BlockEngine, ObservationStructure, build_observations
from botorch_pref.inference.engine import (
    LaplaceEngine,
    LaplaceFactors,
    ModeResult,
    WarmStart,
    predictive_terms,
)
from botorch_pref.inference.ep import EPSites, run_ep
from botorch_pref.inference.newton import (
    Form,
    NewtonState,
    damped_newton,
    default_tolerance,
    fit_tolerance,
)
from botorch_pref.inference.pairs import PairEngine, PairStructure, merge_pairs
from botorch_pref.inference.select import engine_for_data

__all__ = [
    "BlockEngine",
    "EPSites",
    "Form",
    "LaplaceEngine",
    "LaplaceFactors",
    "ModeResult",
    "NewtonState",
    "ObservationStructure",
    "PairEngine",
    "PairStructure",
    "WarmStart",
    "build_observations",
    "damped_newton",
    "default_tolerance",
    "engine_for_data",
    "fit_tolerance",
    "merge_pairs",
    "predictive_terms",
    "run_ep",
]
