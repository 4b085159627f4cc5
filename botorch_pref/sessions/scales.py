"""The graded and rating scales as people see them: one labelled position per answer.

A session with a graded scale of ``k`` levels (``answers="graded", levels=k``) shows a pair's
comparison as a row of ``k`` positions, left to right from "A much better" to "B much better"
(:func:`graded_positions`); for ``k = 5``::

    A much better · A slightly better · About the same · B slightly better · B much better

Position ``i`` (from 0) is the answer ``winner=0, strength=k // 2 - i`` left of the middle,
``winner=1, strength=i - (k - 1) // 2`` right of it, and for odd ``k`` the middle position
``i = k // 2`` is "about the same" (``tie=True``); an even scale has no middle. The strengths
are named by :func:`strength_words` (``1`` "slightly better" .. ``k // 2`` "much better").

A rating scale of ``k`` levels (``ratings=k``) shows ``k`` positions per option, from the
worst (level 0) to the best (level ``k - 1``), named by :func:`rating_words`; people see them
numbered from 1.

The terminal (:mod:`~botorch_pref.sessions.terminal`) and the web page
(:mod:`botorch_pref.web.answering`) both build their scales here.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from botorch_pref.checks import strict_int

__all__ = ["ScalePosition", "graded_positions", "rating_words", "strength_words"]

#: Names of the strengths ``1 .. top`` of a graded scale whose top strength is ``top``.
_STRENGTHS = {
    1: ("better",),
    2: ("slightly better", "much better"),
    3: ("slightly better", "better", "much better"),
}
#: Names of the levels of the common rating scales, worst first.
_RATINGS = {
    2: ("bad", "good"),
    3: ("bad", "fine", "good"),
    4: ("bad", "poor", "good", "very good"),
    5: ("very bad", "bad", "fine", "good", "very good"),
}


class ScalePosition(NamedTuple):
    """One position of a graded scale: its label and the answer it gives.

    Attributes:
        label: What people read, e.g. ``"A much better"`` or ``"About the same"``.
        winner: The preferred option (``0`` or ``1``), or ``None`` in the middle.
        strength: The winner's strength (``1`` .. ``k // 2``), or ``None`` in the middle.
    """

    label: str
    winner: int | None
    strength: int | None

    @property
    def tie(self) -> bool:
        """Whether this is the middle position, "about the same"."""
        return self.winner is None

    def answer(self) -> dict[str, Any]:
        """The keyword arguments of :meth:`~botorch_pref.sessions.Session.answer` it gives."""
        if self.tie:
            return {"tie": True}
        return {"winner": self.winner, "strength": self.strength}


def _levels(levels: Any) -> int:
    return strict_int(levels, "levels", 2)


def strength_words(levels: int) -> tuple[str, ...]:
    """The names of the strengths ``1 .. levels // 2`` of a graded scale, weakest first.

    Args:
        levels: The scale's number of levels ``k >= 2``.

    Returns:
        ``k // 2`` names: ``("slightly better", "much better")`` for ``k = 4, 5``; beyond the
        scales of up to 7 levels the middle strengths are numbered (``"better (2 of 4)"``).
    """
    top = _levels(levels) // 2
    if top in _STRENGTHS:
        return _STRENGTHS[top]
    middle = tuple(f"better ({s} of {top})" for s in range(2, top))
    return ("slightly better", *middle, "much better")


def graded_positions(levels: int, names: tuple[str, str] = ("A", "B")) -> list[ScalePosition]:
    """The ``k`` positions of a graded scale, left ("``names[0]`` much better") to right.

    Args:
        levels: The scale's number of levels ``k >= 2``.
        names: How the two options are called.

    Returns:
        The positions (module docstring).
    """
    k = _levels(levels)
    words = strength_words(k)
    left = [ScalePosition(f"{names[0]} {words[s - 1]}", 0, s) for s in range(k // 2, 0, -1)]
    right = [ScalePosition(f"{names[1]} {words[s - 1]}", 1, s) for s in range(1, k // 2 + 1)]
    middle = [ScalePosition("About the same", None, None)] if k % 2 else []
    return left + middle + right


def rating_words(levels: int) -> tuple[str, ...]:
    """The names of the levels ``0 .. levels - 1`` of a rating scale, worst first.

    Args:
        levels: The scale's number of levels ``k >= 2``.

    Returns:
        ``k`` names: ``("bad", "fine", "good")`` for ``k = 3``; beyond 5 levels
        ``"1 (worst)"``, ``"2"``, ..., ``"k (best)"``.
    """
    k = _levels(levels)
    if k in _RATINGS:
        return _RATINGS[k]
    return tuple(f"{i + 1}" + (" (worst)" if i == 0 else " (best)" if i == k - 1 else "")
                 for i in range(k))  # fmt: skip
