"""Answers to queries: one validator, one error, one encoding into :class:`PreferenceData`.

A person (or a simulated user) shown ``q`` options answers with exactly one of

* ``winner=i``: option ``i`` is preferred (for ``q > 2``: chosen as the best of ``q``);
* ``ranking=(i_1, ..., i_q)``: a full ranking, best first (a permutation of ``0..q-1``);
* ``tie=True``: no preference between the two options of a pair;
* ``ratings=(l_0, ..., l_{q-1})`` alone: a rating of each option, no comparison;
* ``skip=True``: no answer (kept by sessions, never given to a model);

and, where the run's :class:`AnswerFormat` takes them, two optional parts:

* ``strength=s`` beside a pair's ``winner`` (a *graded comparison* on a scale of ``k = levels``
  levels): ``1`` is "slightly better", ``k // 2`` (the scale's top) "much better". A scale
  printed "A much better ... about the same ... B much better" has ``k`` boxes; the person's box
  is the winner and how far from the middle it lies. For odd ``k`` the middle box is "about the
  same", the answer ``tie=True`` (no strength); an even scale has no middle box, so no tie.
  For ``k = 5``: strengths 1 ("slightly") and 2 ("much"); for ``k = 7``: 1, 2, 3; for ``k = 3``
  only 1 (a tie model with the tie threshold fitted).
* ``ratings=(l_0, ..., l_{q-1})`` beside a winner, a ranking or a tie: one level per option
  of the query, in the query's order, each in ``0..rating_levels - 1`` (0 the worst, e.g.
  "bad / fine / good" is ``k = 3``). Ratings need not agree with the comparison (a person may
  rate both options "fine" and still prefer one); both enter the model.

:func:`validate_answer` checks an answer and returns it as an :class:`Answer`, the one answer
value of the package: the optimiser's ``tell``, sessions (their store, terminal, web page, command
line, export and import) all take answers through :func:`validate_answer` and hold them as
:class:`Answer` s (a session's stored row wraps one), and a bad answer raises
:class:`InvalidAnswerError` at the door, before anything is recorded. :func:`encode_answer` turns a
valid answer about datapoints ``index`` into observations, either as a choice / Plackett-Luce
ranking or as pairs:

* ``mode="choice"``: a winner is a choice among the ``q`` options
  (:math:`P = e^{g_w} / \\sum_j e^{g_j}`), a ranking a Plackett-Luce ranking;
* ``mode="pairs"``: a winner beats each other option (``q - 1`` pairs), a ranking gives its
  ``q - 1`` consecutive pairs; these rows are then treated as independent although they are not.

A tie is a tie of two datapoints in either mode; on a graded scale of odd ``k`` it is the
middle level ``(k - 1) // 2`` of a graded row. A graded answer (winner ``w``, loser ``l``,
strength ``s``) is the row ``add_graded(w, l, (k - 1) // 2 + s)`` of
:meth:`~botorch_pref.data.preferences.PreferenceData.add_graded`, whose levels run from 0
("the second much better") to ``k - 1`` ("the first much better"): for ``k = 5`` strength 1
is level 3 and strength 2 level 4, for ``k = 4`` levels 2 and 3. Each rating is a row
``add_rating(i, l)`` after the comparison's rows. A winner without a strength on a graded
scale is a plain comparison (a ``PAIR`` row: "better", of unknown strength).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import torch

from botorch_pref.checks import strict_flag, strict_int
from botorch_pref.data.preferences import PreferenceData

__all__ = [
    "ANSWER_KINDS",
    "ANSWER_MODES",
    "Answer",
    "AnswerFormat",
    "AnswerParts",
    "InvalidAnswerError",
    "check_parts",
    "encode_answer",
    "graded_answer",
    "graded_level",
    "validate_answer",
]

#: The kinds of answer (``"rating"``: ratings alone, without a comparison).
ANSWER_KINDS = ("winner", "ranking", "tie", "skip", "rating")
#: How a comparison of ``q`` options is modelled (:func:`encode_answer`).
ANSWER_MODES = ("choice", "pairs")


class AnswerParts(TypedDict, total=False):
    """An answer's parts beside its winner, as keywords (all optional; :func:`validate_answer`).

    Attributes:
        ranking: A full ranking of the options, best first.
        tie: "No preference" between two options.
        strength: How much better the winner of a pair is on a graded scale (``1 .. k // 2``).
        ratings: One rating per option, in the query's order.
    """

    ranking: Sequence[int] | torch.Tensor | None
    tie: bool
    strength: int | None
    ratings: Sequence[int] | torch.Tensor | None


def check_parts(parts: dict[str, Any]) -> None:
    """Refuse keywords that are not an answer's parts (:class:`AnswerParts`) with a
    ``TypeError`` naming them, as a signature that listed the parts would."""
    unknown = sorted(set(parts) - AnswerParts.__optional_keys__)
    if unknown:
        known = ", ".join(sorted(AnswerParts.__optional_keys__))
        raise TypeError(f"unexpected answer keyword(s) {', '.join(unknown)}; the parts: {known}.")


class InvalidAnswerError(ValueError):
    """An answer that is malformed or does not fit its query (nothing was recorded)."""


def _scale(value: Any, name: str) -> int | None:
    """A number of levels: ``None`` or an integer ``>= 2`` (else a ``ValueError``)."""
    return None if value is None else strict_int(value, name, 2)


@dataclass(frozen=True)
class AnswerFormat:
    """What answers a run takes and how they are modelled.

    Args:
        mode: ``"pairs"`` or ``"choice"`` (how a comparison of ``q`` options is encoded,
            :func:`encode_answer`).
        levels: The graded scale of a pair's comparison, ``k >= 2`` levels from "the second
            much better" to "the first much better" (a winner's ``strength`` runs from 1 to
            ``k // 2``; odd ``k`` has "about the same" in the middle); ``None`` for binary
            answers ("which is better", and ties where the run takes them).
        ratings: The rating scale, ``k >= 2`` levels from 0 (worst) to ``k - 1`` (best), or
            ``None`` for no ratings.

    Raises:
        ValueError: For an unknown mode or a scale that is not an integer ``>= 2``.
    """

    mode: str = "pairs"
    levels: int | None = None
    ratings: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in ANSWER_MODES:
            raise ValueError(f"mode must be 'choice' or 'pairs', got {self.mode!r}.")
        object.__setattr__(self, "levels", _scale(self.levels, "levels"))
        object.__setattr__(self, "ratings", _scale(self.ratings, "ratings"))

    @property
    def graded(self) -> bool:
        """Whether pairs are compared on a graded scale."""
        return self.levels is not None

    @property
    def binary(self) -> bool:
        """Whether the answers are the plain ones (no graded scale, no ratings)."""
        return self.levels is None and self.ratings is None


@dataclass(frozen=True)
class Answer:
    """A validated answer about ``q`` options (made by :func:`validate_answer`).

    A frozen record of named fields, each optional field ``None`` unless the kind uses it, so
    that a further kind of answer adds its own optional field without changing these.

    Attributes:
        kind: One of :data:`ANSWER_KINDS`.
        winner: The preferred option (also the first of a ranking); ``None`` for a tie, a
            skip or ratings alone.
        ranking: The full ranking, best first, for ``kind == "ranking"``; else ``None``.
        strength: How much better the winner of a pair is on the run's graded scale of ``k``
            levels: 1 ("slightly") .. ``k // 2`` ("much"); ``None`` for an ungraded answer.
        ratings: One rating per option of the query, in the query's order, each in
            ``0 .. k - 1`` of the rating scale (0 the worst), or ``None``; beside a winner, a
            ranking or a tie, or alone (``kind == "rating"``).
    """

    kind: str
    winner: int | None = None
    ranking: tuple[int, ...] | None = None
    strength: int | None = None
    ratings: tuple[int, ...] | None = None


def _ranking(ranking: Any, q: int) -> tuple[int, ...]:
    if torch.is_tensor(ranking):
        ranking = ranking.reshape(-1).tolist()
    if isinstance(ranking, (str, bytes)) or not hasattr(ranking, "__iter__"):
        raise InvalidAnswerError(f"ranking must be a sequence of indices, got {ranking!r}.")
    rank = tuple(strict_int(r, "ranking entries", error=InvalidAnswerError) for r in ranking)
    if sorted(rank) != list(range(q)):
        raise InvalidAnswerError(
            f"ranking must be a permutation of 0..{q - 1} (best first), got {list(rank)}."
        )
    return rank


def _ratings(ratings: Any, q: int, levels: int | None) -> tuple[int, ...]:
    """Checked ratings of ``q`` options on a scale of ``levels`` levels."""
    if levels is None:
        raise InvalidAnswerError(
            f"ratings {ratings!r} given, but this study takes no ratings (no rating scale)."
        )
    if torch.is_tensor(ratings):
        ratings = ratings.reshape(-1).tolist()
    if isinstance(ratings, (str, bytes)) or not hasattr(ratings, "__iter__"):
        raise InvalidAnswerError(f"ratings must be a sequence of levels, got {ratings!r}.")
    values = tuple(strict_int(r, "ratings entries", error=InvalidAnswerError) for r in ratings)
    if len(values) != q:
        raise InvalidAnswerError(
            f"ratings must give one level per option ({q}), got {len(values)}: {list(values)}."
        )
    bad = [r for r in values if not 0 <= r < levels]
    if bad:
        raise InvalidAnswerError(
            f"ratings must lie in 0..{levels - 1} ({levels} levels), got {bad[0]} in "
            f"{list(values)}."
        )
    return values


def _strength(strength: Any, q: int, levels: int | None) -> int:
    """A checked strength of a pair's winner on a graded scale of ``levels`` levels."""
    if levels is None:
        raise InvalidAnswerError(
            f"strength={strength!r} given to a binary comparison: this study has no graded "
            "scale (levels)."
        )
    if q != 2:
        raise InvalidAnswerError(f"strength grades a pair's winner, not an answer about {q}.")
    s = strict_int(strength, "strength", error=InvalidAnswerError)
    top = levels // 2
    if not 1 <= s <= top:
        raise InvalidAnswerError(
            f"strength must lie in 1..{top} on a {levels}-level scale (1 slightly, {top} much "
            f"better), got {s}."
        )
    return s


def graded_level(strength: int, levels: int) -> int:
    """The level of the graded row ``(winner, loser)`` for a winner of ``strength``:
    ``(levels - 1) // 2 + strength`` (module docstring; strength 0 is the middle, a tie)."""
    return (levels - 1) // 2 + strength


def graded_answer(level: int, levels: int) -> tuple[int | None, int | None]:
    """The inverse of :func:`graded_level` for the row ``(option 0, option 1)``.

    Args:
        level: The row's level, ``0`` ("option 1 much better") .. ``levels - 1``.
        levels: The scale's odd number of levels.

    Returns:
        ``(winner, strength)``, or ``(None, None)`` for the middle level ("about the same").
    """
    offset = level - graded_level(0, levels)
    if offset == 0:
        return None, None
    return (0 if offset > 0 else 1), abs(offset)


def validate_answer(
    q: int,
    winner: Any = None,
    ranking: Sequence[Any] | torch.Tensor | None = None,
    *,
    tie: bool = False,
    skip: bool = False,
    strength: Any = None,
    ratings: Sequence[Any] | torch.Tensor | None = None,
    ties: bool = True,
    skips: bool = True,
    pair_ties_only: bool = True,
    levels: int | None = None,
    rating_levels: int | None = None,
) -> Answer:
    """Check an answer about ``q`` options.

    ``winner`` and ``ranking`` may both be given when they agree (the winner is the ranking's
    first entry); otherwise exactly one kind of answer must be given: a winner or ranking, a
    tie, a skip, or ratings alone. ``strength`` goes with a pair's winner, ``ratings`` with
    any answer but a skip (module docstring).

    Args:
        q: The number of options (``>= 2``).
        winner: The index of the preferred option.
        ranking: A permutation of ``0..q-1``, best first.
        tie: No preference between the two options of a pair.
        skip: The question was skipped.
        strength: How much better the winner of a pair is: ``1`` ("slightly") ..
            ``levels // 2`` ("much"), on a graded scale only.
        ratings: One level ``0..rating_levels - 1`` per option, in the query's order.
        ties: Whether "no preference" is an accepted answer here (on a graded scale it is the
            middle level, which only an odd scale has).
        skips: Whether the caller takes skips (only the message about a missing answer uses
            it: it names the kinds of answer the caller accepts).
        pair_ties_only: Whether a tie must be about two options, as a model of ties needs; a
            session records "no preference" about any number of options (and models only
            those about pairs), so it passes ``False``.
        levels: The graded scale's number of levels ``k >= 2``, or ``None`` for binary
            comparisons (then a strength is an error).
        rating_levels: The rating scale's number of levels ``k >= 2``, or ``None`` for none
            (then ratings are an error).

    Returns:
        The :class:`Answer`.

    Raises:
        InvalidAnswerError: For no answer, several kinds at once, an index out of range, a
            ranking that is not a permutation, a tie that is not accepted (or on an even graded
            scale), a strength that is not an integer in ``1..levels // 2`` or given to a
            binary comparison, a tie, a skip or an answer about ``q != 2`` options, ratings of
            the wrong length, out of range or without a rating scale, or a ``tie`` or ``skip``
            that is not a flag (:func:`~botorch_pref.checks.strict_flag`).
        ValueError: For ``levels`` or ``rating_levels`` that are not integers ``>= 2``.
    """
    levels = _scale(levels, "levels")
    rating_levels = _scale(rating_levels, "rating_levels")
    tie = strict_flag(tie, "tie", error=InvalidAnswerError)
    skip = strict_flag(skip, "skip", error=InvalidAnswerError)
    if tie and (winner is not None or ranking is not None):
        raise InvalidAnswerError("A 'no preference' answer (tie=True) takes no winner or ranking.")
    compared = winner is not None or ranking is not None
    if strength is not None and not compared:
        what = "a tie" if tie else "a skip" if skip else "an answer without a winner"
        raise InvalidAnswerError(f"strength={strength!r} grades a winner; {what} takes none.")
    if skip and ratings is not None:
        raise InvalidAnswerError(f"a skipped question takes no ratings, got {ratings!r}.")
    kinds = [compared, bool(tie), bool(skip)]
    if sum(kinds) > 1 or (sum(kinds) == 0 and ratings is None):
        accepted = ["winner=...", "ranking=..."] + ["tie=True"] * ties + ["skip=True"] * skips
        accepted += ["ratings=..."] * (rating_levels is not None)
        raise InvalidAnswerError(
            f"Give exactly one answer ({', '.join(accepted[:-1])} or {accepted[-1]})."
        )
    rated = None if ratings is None else _ratings(ratings, q, rating_levels)
    if skip:
        return Answer("skip")
    if not any(kinds):
        return Answer("rating", ratings=rated)
    if tie:
        if not ties:
            raise InvalidAnswerError(
                "'no preference' (tie) answers are not accepted: they need ties=True."
            )
        if q != 2 and pair_ties_only:
            raise InvalidAnswerError(f"'no preference' is an answer about 2 options, not {q}.")
        if levels is not None and levels % 2 == 0:
            raise InvalidAnswerError(
                f"'no preference' is not on a {levels}-level scale (an even scale has no "
                "middle level)."
            )
        return Answer("tie", ratings=rated)
    rank = None if ranking is None else _ranking(ranking, q)
    w = rank[0] if winner is None else strict_int(winner, "winner", error=InvalidAnswerError)
    if not 0 <= w < q:
        raise InvalidAnswerError(f"winner must lie in 0..{q - 1} for {q} options, got {w}.")
    if rank is not None and rank[0] != w:
        raise InvalidAnswerError(f"winner {w} disagrees with the ranking's first entry {rank[0]}.")
    s = None if strength is None else _strength(strength, q, levels)
    return Answer("winner" if rank is None else "ranking", w, rank, s, rated)


def encode_answer(index: Sequence[int], answer: Answer, mode: str | AnswerFormat) -> PreferenceData:
    """The observations an answer about datapoints ``index`` (one per option) makes.

    Args:
        index: The datapoint index of each option, in the query's order.
        answer: A valid answer (not a skip) for the format.
        mode: ``"choice"`` or ``"pairs"`` (binary answers, see the module docstring), or the
            run's :class:`AnswerFormat` (its mode, its graded and rating scales).

    Returns:
        A :class:`~botorch_pref.data.preferences.PreferenceData` over those datapoints: the
        comparison's rows, then one rating row per option.
    """
    form = mode if isinstance(mode, AnswerFormat) else AnswerFormat(mode)
    index = [int(i) for i in index]
    obs = PreferenceData()
    if answer.kind == "skip":
        raise InvalidAnswerError("a skipped question makes no observation.")
    levels = form.levels
    if answer.kind == "tie":
        if levels is None:
            obs.add_tie(index[0], index[1])
        else:
            obs.add_graded(index[0], index[1], graded_level(0, levels), levels=levels)
    elif answer.strength is not None:
        loser = index[1 - answer.winner]
        level = graded_level(answer.strength, levels)
        obs.add_graded(index[answer.winner], loser, level, levels=levels)
    elif answer.kind != "rating":
        _encode_comparison(obs, index, answer, form.mode)
    for i, level in zip(index, answer.ratings or (), strict=False):
        obs.add_rating(i, level, levels=form.ratings)
    return obs


def _encode_comparison(obs: PreferenceData, index: list[int], answer: Answer, mode: str) -> None:
    """Add an ungraded winner's or ranking's rows to ``obs``."""
    if mode == "choice":
        if answer.ranking is not None:
            obs.add_ranking(index, [index[r] for r in answer.ranking])
        else:
            obs.add_choice(index, index[answer.winner])
        return
    rank = answer.ranking
    if rank is not None:
        pairs = [(rank[i], rank[i + 1]) for i in range(len(index) - 1)]
    else:
        pairs = [(answer.winner, j) for j in range(len(index)) if j != answer.winner]
    for a, b in pairs:
        obs.add_comparison(index[a], index[b])
