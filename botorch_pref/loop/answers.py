"""Answers to queries: one validator, one error, one encoding into :class:`PreferenceData`.

A person (or a simulated user) shown ``q`` options answers with exactly one of

* ``winner=i``: option ``i`` is preferred (for ``q > 2``: chosen as the best of ``q``);
* ``ranking=(i_1, ..., i_q)``: a full ranking, best first (a permutation of ``0..q-1``);
* ``tie=True``: no preference between the two options of a pair;
* ``skip=True``: no answer (kept by sessions, never given to a model).

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

A tie is a tie of two datapoints in either mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from botorch_pref.checks import strict_flag, strict_int
from botorch_pref.data.preferences import PreferenceData

__all__ = [
    "ANSWER_KINDS",
    "Answer",
    "InvalidAnswerError",
    "encode_answer",
    "validate_answer",
]

#: The kinds of answer.
ANSWER_KINDS = ("winner", "ranking", "tie", "skip")


class InvalidAnswerError(ValueError):
    """An answer that is malformed or does not fit its query (nothing was recorded)."""


@dataclass(frozen=True)
class Answer:
    """A validated answer about ``q`` options (made by :func:`validate_answer`).

    A frozen record of named fields, each optional field ``None`` unless the kind uses it, so
    that a further kind of answer adds its own optional field without changing these.

    Attributes:
        kind: One of :data:`ANSWER_KINDS`.
        winner: The preferred option (also the first of a ranking); ``None`` for a tie or skip.
        ranking: The full ranking, best first, for ``kind == "ranking"``; else ``None``.
    """

    kind: str
    winner: int | None = None
    ranking: tuple[int, ...] | None = None


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


def validate_answer(
    q: int,
    winner: Any = None,
    ranking: Sequence[Any] | torch.Tensor | None = None,
    *,
    tie: bool = False,
    skip: bool = False,
    ties: bool = True,
    skips: bool = True,
    pair_ties_only: bool = True,
) -> Answer:
    """Check an answer about ``q`` options.

    ``winner`` and ``ranking`` may both be given when they agree (the winner is the ranking's
    first entry); otherwise exactly one kind of answer must be given.

    Args:
        q: The number of options (``>= 2``).
        winner: The index of the preferred option.
        ranking: A permutation of ``0..q-1``, best first.
        tie: No preference between the two options of a pair.
        skip: The question was skipped.
        ties: Whether "no preference" is an accepted answer here.
        skips: Whether the caller takes skips (only the message about a missing answer uses
            it: it names the kinds of answer the caller accepts).
        pair_ties_only: Whether a tie must be about two options, as a model of ties needs; a
            session records "no preference" about any number of options (and models only
            those about pairs), so it passes ``False``.

    Returns:
        The :class:`Answer`.

    Raises:
        InvalidAnswerError: For no answer, several kinds at once, an index out of range, a
            ranking that is not a permutation, a tie that is not accepted, or a ``tie`` or
            ``skip`` that is not a flag (:func:`~botorch_pref.checks.strict_flag`).
    """
    tie = strict_flag(tie, "tie", error=InvalidAnswerError)
    skip = strict_flag(skip, "skip", error=InvalidAnswerError)
    if tie and (winner is not None or ranking is not None):
        raise InvalidAnswerError("A 'no preference' answer (tie=True) takes no winner or ranking.")
    kinds = [winner is not None or ranking is not None, bool(tie), bool(skip)]
    if sum(kinds) != 1:
        accepted = ["winner=...", "ranking=..."] + ["tie=True"] * ties + ["skip=True"] * skips
        raise InvalidAnswerError(
            f"Give exactly one answer ({', '.join(accepted[:-1])} or {accepted[-1]})."
        )
    if skip:
        return Answer("skip")
    if tie:
        if not ties:
            raise InvalidAnswerError(
                "'no preference' (tie) answers are not accepted: they need ties=True."
            )
        if q != 2 and pair_ties_only:
            raise InvalidAnswerError(f"'no preference' is an answer about 2 options, not {q}.")
        return Answer("tie")
    rank = None if ranking is None else _ranking(ranking, q)
    if winner is None:
        return Answer("ranking", rank[0], rank)
    w = strict_int(winner, "winner", error=InvalidAnswerError)
    if not 0 <= w < q:
        raise InvalidAnswerError(f"winner must lie in 0..{q - 1} for {q} options, got {w}.")
    if rank is None:
        return Answer("winner", w, None)
    if rank[0] != w:
        raise InvalidAnswerError(f"winner {w} disagrees with the ranking's first entry {rank[0]}.")
    return Answer("ranking", w, rank)


def encode_answer(index: Sequence[int], answer: Answer, mode: str) -> PreferenceData:
    """The observations an answer about datapoints ``index`` (one per option) makes.

    Args:
        index: The datapoint index of each option, in the query's order.
        answer: A validated answer (not a skip).
        mode: ``"choice"`` or ``"pairs"`` (see the module docstring).

    Returns:
        A :class:`~botorch_pref.data.preferences.PreferenceData` over those datapoints.
    """
    index = [int(i) for i in index]
    obs = PreferenceData()
    if answer.kind == "skip":
        raise InvalidAnswerError("a skipped question makes no observation.")
    if answer.kind == "tie":
        return obs.add_tie(index[0], index[1])
    if mode == "choice":
        if answer.ranking is not None:
            return obs.add_ranking(index, [index[r] for r in answer.ranking])
        return obs.add_choice(index, index[answer.winner])
    if mode != "pairs":
        raise ValueError(f"mode must be 'choice' or 'pairs', got {mode!r}.")
    rank = answer.ranking
    if rank is not None:
        pairs = [(rank[i], rank[i + 1]) for i in range(len(index) - 1)]
    else:
        pairs = [(answer.winner, j) for j in range(len(index)) if j != answer.winner]
    for a, b in pairs:
        obs.add_comparison(index[a], index[b])
    return obs
