r"""The loop's record of answers: the one source of its designs and observations.

Each of the ``R`` members of a run (``R = 1`` for a person's run, ``R > 1`` for lockstep
replications) has a list of answered queries. A query is held as the datapoint indices of its
options, not as designs: a design compared again (the champion of champion-challenger, a design
a person brings twice) is one datapoint, found by exact equality of its coordinates. From the
answers, :class:`AnswerRecord` derives, appending as answers arrive:

* the distinct designs, in user units and in the unit cube (``R x n x d``; a member with fewer
  designs than the others is padded with copies of its first design, which no observation
  references);
* the observations, a :class:`~botorch_pref.data.PreferenceData` with batch shape ``(R,)``
  (:func:`~botorch_pref.loop.answers.encode_answer` of each answer; rows of members with fewer
  observations are padded with ``-1``).

:meth:`AnswerRecord.extend` computes the next state without changing the record, and
:meth:`AnswerRecord.commit` adopts it, so a caller can update a model first and keep the old
state when that fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from botorch.utils.transforms import normalize
from torch import Tensor

from botorch_pref.data.preferences import PreferenceData
from botorch_pref.likelihoods import ObservationKind
from botorch_pref.loop.answers import Answer, AnswerFormat, InvalidAnswerError, encode_answer

__all__ = [
    "AnswerRecord",
    "Extension",
    "QueryRecord",
    "Recommendation",
    "as_record",
    "check_bounds",
    "check_designs",
    "check_query",
    "extends",
    "member_data",
    "same_record",
    "stack_data",
]


class QueryRecord(NamedTuple):
    """One answered query.

    Attributes:
        query: The ``q x d`` options in user units.
        winner: The index of the preferred option (``None`` for "no preference").
        ranking: The full ranking (best first) when one was given, else ``None``.
        tie: ``True`` for a "no preference" answer.
        strength: The winner's strength on the run's graded scale (1 "slightly" ..
            ``levels // 2`` "much"), or ``None``.
        ratings: One rating per option on the run's rating scale, or ``None``.
    """

    query: Tensor
    winner: int | None
    ranking: tuple[int, ...] | None = None
    tie: bool = False
    strength: int | None = None
    ratings: tuple[int, ...] | None = None


class Recommendation(NamedTuple):
    """The recommended design and the model's belief about its utility.

    Attributes:
        x: The design, a ``d`` tensor in user units.
        mean: Posterior mean of its utility :math:`\\mu(x)`, on the model's latent scale:
            utilities are identified only up to a common shift, in units of the answer noise,
            so it ranks designs but is not a utility a person would state.
        std: Posterior standard deviation of its utility. Utilities are identified only up to a
            common shift, so this includes the prior's uncertainty about the overall level.
        index: Its row in :attr:`PreferenceOptimizer.datapoints`, or ``None`` for a design
            that was not compared (``best(among="anywhere")``).
    """

    x: Tensor
    mean: float
    std: float
    index: int | None


class Extension(NamedTuple):
    """The record's state after a step (see :meth:`AnswerRecord.extend`).

    Attributes:
        X_user: ``R x n x d`` designs in user units.
        X_unit: ``R x n x d`` designs in the unit cube.
        counts: The number of real designs of each member.
        data: The observations, batch shape ``(R,)``.
        index: Per member, the datapoint index of each option of its new query.
    """

    X_user: Tensor
    X_unit: Tensor
    counts: list[int]
    data: PreferenceData
    index: list[list[int]]


def stack_data(items: Sequence[PreferenceData]) -> PreferenceData:
    """Unbatched observations of ``R`` members as one ``(R,)``-batched set, padding with ``-1``."""
    m = max(len(d) for d in items)
    Q = max(d.max_options for d in items)
    device = items[0].device
    options = torch.full((len(items), m, Q), -1, dtype=torch.long, device=device)
    kind = torch.full((len(items), m), int(ObservationKind.PAIR), device=device)
    stages = torch.zeros(len(items), m, dtype=torch.long, device=device)
    level = torch.full((len(items), m), -1, dtype=torch.long, device=device)
    for r, d in enumerate(items):
        options[r, : len(d), : d.max_options] = d.options
        kind[r, : len(d)] = d.kind
        stages[r, : len(d)] = d.n_stages
        level[r, : len(d)] = d.level
    return PreferenceData.from_checked(options, kind, stages, level, **_scales(items))


def _scales(items: Sequence[PreferenceData]) -> dict[str, int | None]:
    """The numbers of levels of data sets that agree on them (``None`` agrees with any)."""
    return {
        attr: next((v for d in items if (v := getattr(d, attr)) is not None), None)
        for attr in ("graded_levels", "rating_levels")
    }


def member_data(data: PreferenceData, r: int) -> PreferenceData:
    """Member ``r``'s observations of ``(R,)``-batched data, padding rows removed."""
    real = (data.options[r] >= 0).any(-1)
    return PreferenceData.from_checked(
        data.options[r][real],
        data.kind[r][real],
        data.n_stages[r][real],
        data.level[r][real],
        **_scales([data]),
    )


class AnswerRecord:
    """Answered queries of ``R`` members, and the designs and observations derived from them.

    Args:
        R: The number of members.
        bounds: ``2 x d`` bounds in user units (the unit cube is their normalisation).
        mode: How answers are encoded: ``"choice"`` or ``"pairs"``, or an
            :class:`~botorch_pref.loop.answers.AnswerFormat` with graded and rating scales
            (:func:`~botorch_pref.loop.answers.encode_answer`).
        tkwargs: Device and dtype of the designs.
    """

    def __init__(
        self, R: int, bounds: Tensor, mode: str | AnswerFormat, tkwargs: dict[str, Any]
    ) -> None:
        d = bounds.shape[-1]
        self.bounds, self.mode, self.tkwargs = bounds, mode, tkwargs
        self.entries: list[list[tuple[tuple[int, ...], Answer]]] = [[] for _ in range(R)]
        self.X_user = torch.empty(R, 0, d, **tkwargs)
        self.X_unit = torch.empty(R, 0, d, **tkwargs)
        self.counts = [0] * R
        empty = torch.empty(R, 0, 2, dtype=torch.long, device=tkwargs["device"])
        self.data = PreferenceData(empty)

    @property
    def n_members(self) -> int:
        """The number of members ``R``."""
        return len(self.entries)

    @property
    def n_answers(self) -> int:
        """The number of answered queries (the same for every member)."""
        return len(self.entries[0])

    def designs(self, r: int, unit: bool = False) -> Tensor:
        """Member ``r``'s ``n_r x d`` distinct designs (user units, or the unit cube)."""
        return (self.X_unit if unit else self.X_user)[r, : self.counts[r]]

    def query(self, r: int, i: int) -> QueryRecord:
        """Member ``r``'s ``i``-th answered query."""
        index, answer = self.entries[r][i]
        query = self.X_user[r, list(index)]
        tie = answer.kind == "tie"
        return QueryRecord(
            query, answer.winner, answer.ranking, tie, answer.strength, answer.ratings
        )

    def match(self, r: int, X: Tensor) -> tuple[list[int], Tensor]:
        """Datapoint indices of the (distinct) rows of ``X`` for member ``r``, and its new rows."""
        n = self.counts[r]
        if n == 0:
            return list(range(X.shape[0])), X
        hit = (X.unsqueeze(-2) == self.X_user[r, :n].unsqueeze(0)).all(-1)  # q x n
        found = hit.any(-1)
        first = hit.int().argmax(-1)
        new = (~found).long().cumsum(0) - 1 + n
        index = torch.where(found, first, new)
        return index.tolist(), X[~found]

    def extend(self, queries: Sequence[Tensor], answers: Sequence[Answer]) -> Extension:
        """The state after each member ``r`` answered ``queries[r]`` with ``answers[r]``.

        Args:
            queries: ``R`` queries (``q_r x d``, distinct rows, user units, inside bounds).
            answers: ``R`` validated answers (no skips).

        Returns:
            The :class:`Extension` (the record itself is unchanged).
        """
        indices, new_rows, observations = [], [], []
        for r, (X, answer) in enumerate(zip(queries, answers, strict=True)):
            index, new = self.match(r, X)
            indices.append(index)
            new_rows.append(new)
            observations.append(encode_answer(index, answer, self.mode))
        counts = [n + len(new) for n, new in zip(self.counts, new_rows, strict=True)]
        X_user = self.X_user
        if any(len(new) for new in new_rows):
            X_user = self._grown(counts, new_rows)
        X_unit = self.X_unit
        if X_user is not self.X_user:
            unit = [normalize(new, self.bounds).clamp(0.0, 1.0) for new in new_rows]
            X_unit = self._grown(counts, unit, self.X_unit)
        step = stack_data(observations).to(self.tkwargs["device"])
        data = PreferenceData.cat([self.data, step])
        return Extension(X_user, X_unit, counts, data, indices)

    def _grown(
        self, counts: list[int], new_rows: list[Tensor], held: Tensor | None = None
    ) -> Tensor:
        """``held`` (default: the user-unit designs) with each member's new rows appended."""
        held = self.X_user if held is None else held
        R, n_old, d = held.shape
        n = max(counts)
        X = torch.cat([held, held.new_empty(R, n - n_old, d)], dim=1) if n > n_old else held.clone()
        for r, new in enumerate(new_rows):
            X[r, self.counts[r] : counts[r]] = new
            if counts[r] < n:  # padding: copies of the member's first design
                X[r, counts[r] :] = X[r, :1]
        return X

    def commit(self, ext: Extension, answers: Sequence[Answer]) -> None:
        """Adopt the state :meth:`extend` computed for ``answers``."""
        for entries, index, answer in zip(self.entries, ext.index, answers, strict=True):
            entries.append((tuple(index), answer))
        self.X_user, self.X_unit, self.counts, self.data = (
            ext.X_user,
            ext.X_unit,
            ext.counts,
            ext.data,
        )

    def member_data(self, r: int, data: PreferenceData | None = None) -> PreferenceData:
        """Member ``r``'s observations (of the record, or of ``data``), without padding."""
        return member_data(self.data if data is None else data, r)


def _as_tuple(values: Any) -> tuple[Any, ...] | None:
    """A ranking's or ratings' entries as a tuple (``None`` stays ``None``)."""
    if values is None:
        return None
    return tuple(values.reshape(-1).tolist() if torch.is_tensor(values) else values)


def as_record(i: int, record: Any) -> QueryRecord:
    """A :class:`QueryRecord` from a record or a tuple ``(query, winner[, ranking[, tie[,
    strength[, ratings]]]])``.

    Raises:
        InvalidAnswerError: For anything else (naming record ``i``).
    """
    if not isinstance(record, tuple) or not 2 <= len(record) <= 6:
        raise InvalidAnswerError(
            f"record {i} must be (query, winner), (query, winner, ranking), "
            f"(query, None, None, tie) or (query, winner, ranking, tie, strength, ratings), "
            f"got {record!r}."
        )
    query, winner, *rest = record
    rest += [None] * (4 - len(rest))
    ranking, tie, strength, ratings = rest[0], bool(rest[1]), rest[2], rest[3]
    ranking, ratings = _as_tuple(ranking), _as_tuple(ratings)
    if tie and (winner is not None or ranking is not None):
        raise InvalidAnswerError(
            f"record {i}: a 'no preference' answer takes no winner or ranking, got winner "
            f"{winner!r} and ranking {ranking!r}."
        )
    if ranking and winner is not None and winner != ranking[0]:
        raise InvalidAnswerError(
            f"record {i}: winner {winner!r} disagrees with the ranking {ranking!r}, which puts "
            f"{ranking[0]!r} first."
        )
    if ranking is not None:
        winner = None  # the ranking's first entry
    return QueryRecord(query, winner, ranking, tie, strength, ratings)


def same_record(held: QueryRecord, given: QueryRecord) -> bool:
    """Whether a held record is the given one (same query values and the same answer)."""
    q = torch.as_tensor(given.query, dtype=held.query.dtype).to(held.query.device)
    if q.shape != held.query.shape or not torch.equal(q, held.query):
        return False
    graded = (held.strength, held.ratings) == (given.strength, _as_tuple(given.ratings))
    if given.ranking is not None:
        return held.ranking == tuple(given.ranking) and not held.tie and graded
    winner = None if given.tie else given.winner
    return graded and (held.winner, held.ranking, held.tie) == (winner, None, bool(given.tie))


def extends(given: Sequence[QueryRecord], held: Sequence[QueryRecord]) -> bool:
    """Whether the ``given`` records start with the ``held`` ones (:func:`same_record`)."""
    return len(held) <= len(given) and all(
        same_record(a, b) for a, b in zip(held, given[: len(held)], strict=True)
    )


def check_bounds(bounds: Tensor | Sequence[Sequence[float]], tkwargs: dict[str, Any]) -> Tensor:
    """``bounds`` as a finite ``2 x d`` tensor with lower < upper, else a ``ValueError``."""
    b = torch.as_tensor(bounds).to(**tkwargs)
    if b.dim() != 2 or b.shape[0] != 2 or b.shape[1] < 1:
        raise ValueError(
            f"bounds must be a 2 x d tensor (lower, upper), got shape {tuple(b.shape)}."
        )
    if not bool(torch.isfinite(b).all()):
        raise ValueError("bounds must be finite.")
    if not bool((b[1] > b[0]).all()):
        raise ValueError("bounds must satisfy lower < upper in every dimension.")
    return b


def check_designs(X: Tensor | Sequence[Sequence[float]], bounds: Tensor) -> Tensor:
    """``X`` as a ``... x d`` tensor of the bounds' dtype and device, else a ``ValueError``."""
    try:
        X = torch.as_tensor(X).to(bounds)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"X must be an array of numbers: {err}") from None
    d = bounds.shape[-1]
    if X.dim() < 1 or X.shape[-1] != d:
        raise ValueError(f"X must have shape ... x {d}, got {tuple(X.shape)}.")
    return X


def check_query(query: Tensor | Sequence[Sequence[float]], bounds: Tensor) -> Tensor:
    """A query as a ``q' x d`` tensor (``q' >= 2``, finite, distinct rows, inside bounds up to
    rounding)."""
    try:
        X = query if torch.is_tensor(query) else torch.as_tensor(query, dtype=bounds.dtype)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"query must be a q x d array of numbers: {err}") from None
    if not (X.is_floating_point() or X.dtype in (torch.int32, torch.int64)):
        raise ValueError(f"query must hold real numbers, got dtype {X.dtype}.")
    X = X.to(bounds)
    d = bounds.shape[-1]
    if X.dim() != 2 or X.shape[-1] != d or X.shape[0] < 2:
        raise ValueError(f"query must have shape q x {d} with q >= 2, got {tuple(X.shape)}.")
    if not bool(torch.isfinite(X).all()):
        raise ValueError("query contains NaN or infinite values.")
    lower, upper = bounds
    # A tolerance of 1e-9 of the range, and of a few rounding steps of the dtype: the unit
    # cube's upper face maps to lower + (upper - lower), which may round past upper.
    eps = torch.finfo(X.dtype).eps
    slack = 1e-9 * (upper - lower) + 4 * eps * (upper.abs() + lower.abs())
    if bool((X < lower - slack).any() or (X > upper + slack).any()):
        raise ValueError("query has designs outside bounds.")
    if bool((X.unsqueeze(0) == X.unsqueeze(1)).all(-1).triu(1).any()):
        raise ValueError("query repeats a design: its options must be distinct.")
    return X
