"""The settings of a new session: its parameters and optimiser settings, checked before storing.

Also :func:`progress_from_counts`, the counts a session reports without a model.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any

import numpy as np

from botorch_pref.checks import strict_int
from botorch_pref.loop import PreferenceOptimizer
from botorch_pref.loop.config import ANSWER_SETTINGS
from botorch_pref.loop.policy import SETTINGS
from botorch_pref.sessions.errors import SessionError
from botorch_pref.sessions.export import CSV_COLUMNS
from botorch_pref.sessions.records import Progress
from botorch_pref.sessions.sql import SQLITE_MAX_INT

__all__ = [
    "MAX_NAME",
    "MAX_TEXT",
    "OPTIMIZER_OPTIONS",
    "check_name",
    "check_settings",
    "check_text",
    "normalize_parameters",
    "progress_from_counts",
]

#: Optimiser settings a session stores (keyword arguments of PreferenceOptimizer).
OPTIMIZER_OPTIONS = tuple(n for n in SETTINGS if n not in ("device", "dtype", "seed"))

_RESERVED_NAMES = frozenset(CSV_COLUMNS)
#: The settings of graded answers and ratings a session stores resolved (``answers="graded"``
#: without ``levels`` takes the loop's default scale; ties follow the scale's middle level).
_ANSWER_SETTINGS = ("answers", *ANSWER_SETTINGS, "ties")
#: Most characters of a session or parameter name.
MAX_NAME = 200
#: Most characters of a question shown above the options.
MAX_TEXT = 300
#: Characters that reorder the text around them (bidirectional embeddings, overrides,
#: isolates and marks): in a name they make it read as something else.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def check_text(value: Any, what: str, max_length: int = MAX_TEXT) -> str:
    """Check a text shown to people: a string of 1 to ``max_length`` characters without spaces
    at its ends, control characters, line breaks or bidirectional controls.

    Args:
        value: The text.
        what: What it is, for the message (``"A session name"``).
        max_length: Most characters.

    Returns:
        The text.

    Raises:
        SessionError: For anything else (nothing is written then).
    """
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise SessionError(
            f"{what} is a non-empty string without spaces at its ends, got {value!r:.80}."
        )
    if len(value) > max_length:
        raise SessionError(f"{what} has at most {max_length} characters, got {len(value)}.")
    for ch in value:
        if ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp"):
            raise SessionError(
                f"{what} may not contain control or text-direction characters, got U+{ord(ch):04X}"
                f" in {value!r:.80}."
            )
    return value


def check_name(value: Any, what: str = "A session name") -> str:
    """Check a session or parameter name (:func:`check_text` with at most :data:`MAX_NAME`
    characters): the one check of names everywhere (API, command line, admin page).

    Args:
        value: The name.
        what: What it is, for the message.

    Returns:
        The name.

    Raises:
        SessionError: For a bad name.
    """
    return check_text(value, what, MAX_NAME)


def normalize_parameters(
    parameters: Mapping[str, Sequence[float]] | Sequence[Sequence[Any]],
) -> list[tuple[str, float, float]]:
    """Check parameters given as ``[(name, low, high), ...]`` or ``{name: (low, high)}``.

    Args:
        parameters: The parameters and their bounds in the user's units.

    Returns:
        ``(name, low, high)`` triples.

    Raises:
        SessionError: For no parameters, a bad or repeated name, or bad bounds.
    """
    if isinstance(parameters, Mapping):
        items = [(name, *_pair(name, b)) for name, b in parameters.items()]
    else:
        items = []
        for p in parameters:
            if isinstance(p, (str, bytes)) or not isinstance(p, Sequence) or len(p) != 3:
                raise SessionError(f"A parameter is (name, low, high), got {p!r}.")
            items.append((p[0], *_pair(p[0], p[1:])))
    if not items:
        raise SessionError("A session needs at least one parameter.")
    names = [n for n, _, _ in items]
    for name in names:
        check_name(name, "A parameter name")
        if name in _RESERVED_NAMES:
            raise SessionError(
                f"{name!r} is a column of the CSV export; rename the parameter "
                f"(reserved: {', '.join(sorted(_RESERVED_NAMES))})."
            )
    if len(set(names)) != len(names):
        raise SessionError(f"Parameter names repeat: {names}.")
    return items


def _pair(name: Any, bounds: Any) -> tuple[float, float]:
    try:
        if isinstance(bounds, (str, bytes)):  # "05" would be the bounds (0, 5)
            raise TypeError
        low, high = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise SessionError(
            f"Parameter {name!r}: bounds must be (low, high), got {bounds!r}."
        ) from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise SessionError(f"Parameter {name!r}: need finite bounds low < high, got {bounds!r}.")
    return low, high


def check_settings(
    params: list[tuple[str, float, float]],
    strategy: str,
    q: int,
    seed: int | None,
    budget: Any,
    options: dict[str, Any],
) -> dict[str, Any]:
    """Checked optimiser settings of a new session.

    Args:
        params: The checked parameters.
        strategy: The strategy.
        q: Options per query.
        seed: The seed, or ``None`` to draw one.
        budget: The planned number of answers, or ``None``.
        options: Other ``PreferenceOptimizer`` settings (names in :data:`OPTIMIZER_OPTIONS`).

    Returns:
        ``strategy``, ``q``, ``seed`` and the options, as the optimiser normalised them.

    Raises:
        SessionError: For unknown or bad settings.
    """
    unknown = sorted(set(options) - set(OPTIMIZER_OPTIONS))
    if unknown:
        raise SessionError(
            f"Unknown optimiser settings {unknown}; known: {', '.join(OPTIMIZER_OPTIONS)}."
        )
    if not isinstance(options.get("model", "laplace"), str):
        raise SessionError("model must be a name (a factory function cannot be stored).")
    # numpy scalars as their Python values, so that the settings store as JSON
    options = {k: v.item() if isinstance(v, np.generic) else v for k, v in options.items()}
    if budget is not None:
        if strict_int(budget, "budget", 1, error=SessionError) > SQLITE_MAX_INT:
            raise SessionError(f"budget must be at most {SQLITE_MAX_INT}, got {budget}.")
    if seed is None:
        seed = int(np.random.SeedSequence().generate_state(1, dtype=np.uint64)[0] >> 2)
    elif isinstance(seed, Integral) and not isinstance(seed, bool) and seed > SQLITE_MAX_INT:
        raise SessionError(f"seed must be at most {SQLITE_MAX_INT} (it is stored), got {seed}.")
    graded = options.get("answers") == "graded" or options.get("levels") is not None
    if (
        "ties" not in options
        and q == 2
        and not graded  # a graded scale has "about the same" exactly when it has a middle
        and options.get("model", "laplace") != "pairwisegp"
        and options.get("answers", "auto") != "choice"
    ):
        options = {**options, "ties": True}
    bounds = [[lo for _, lo, _ in params], [hi for _, _, hi in params]]
    try:
        opt = PreferenceOptimizer(bounds, strategy=strategy, q=q, seed=seed, **options)
    except (TypeError, ValueError) as err:
        raise SessionError(f"Bad optimiser settings: {err}") from None
    names = ["kernel", "inference", "local_every", "local_when", "lookahead_every"]
    if graded or options.get("ratings") is not None:  # the scales as the loop resolved them
        names += _ANSWER_SETTINGS
    resolved = {name: opt.settings[name] for name in names}
    s = opt.settings
    return {"strategy": s["strategy"], "q": s["q"], "seed": s["seed"], **options, **resolved}


def progress_from_counts(counts: Mapping[str, int], budget: int | None) -> Progress:
    """The :class:`Progress` of a session from :meth:`Store.counts`.

    Args:
        counts: The counts.
        budget: The session's budget.

    Returns:
        The progress.
    """
    return Progress(
        answered=counts["asked"],
        choices=counts["winner"] + counts["ranking"] + counts["rating"],
        skips=counts["skip"],
        ties=counts["tie"],
        imported=counts["imported"],
        retracted=counts["retracted"],
        queries=counts["queries"],
        pending=bool(counts["pending"]),
        budget=budget,
    )
