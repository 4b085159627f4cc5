"""The row types of a session database: one type per thing stored.

:class:`SessionRow` (a study and its settings), :class:`Query` (a query with its options),
:class:`StoredAnswer` (an answer with its times and retraction), :class:`StoredFit` (fitted
hyperparameters and the answers they were fitted to), :class:`StoredRecommendation` (a
recommendation and the answers it was made from), and the read-only views built from them:
:class:`HistoryEntry`, :class:`Progress`, :class:`SessionSummary` and :class:`SessionState`
(everything :meth:`Session.ask` needs, read in one transaction).

A stored row wraps the loop's value rather than restating it: a :class:`StoredAnswer` holds the
validated :class:`~botorch_pref.loop.answers.Answer` (the one answer type, from the person's
input to the database), a :class:`StoredRecommendation` the loop's
:class:`~botorch_pref.loop.history.Recommendation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from botorch_pref.loop.answers import Answer
from botorch_pref.loop.history import Recommendation

__all__ = [
    "HistoryEntry",
    "Progress",
    "Query",
    "SessionRow",
    "SessionState",
    "SessionSummary",
    "StoredAnswer",
    "StoredFit",
    "StoredRecommendation",
]


@dataclass(frozen=True)
class SessionRow:
    """A ``sessions`` row, JSON fields decoded.

    Attributes:
        id: Row id.
        name: Session name (unique in the file).
        parameters: ``[(name, low, high), ...]`` in the user's units.
        strategy: The optimiser's strategy.
        q: Options per query.
        seed: Seed of the optimiser.
        options: Other optimiser settings (keyword arguments of ``PreferenceOptimizer``).
        budget: Number of answers the study plans for, or ``None``.
        package_version: Version of ``botorch-pref`` that created the session.
        created_at: Creation time (UTC, ISO 8601).
    """

    id: int
    name: str
    parameters: tuple[tuple[str, float, float], ...]
    strategy: str
    q: int
    seed: int
    options: dict[str, Any]
    budget: int | None
    package_version: str
    created_at: str

    @property
    def names(self) -> tuple[str, ...]:
        """The parameter names."""
        return tuple(p[0] for p in self.parameters)

    @property
    def levels(self) -> int | None:
        """The graded scale's number of levels of a pair's comparison (``answers="graded"``),
        or ``None`` for binary answers."""
        return self.options.get("levels")

    @property
    def rating_levels(self) -> int | None:
        """The rating scale's number of levels (``ratings=k``), or ``None`` for no ratings."""
        return self.options.get("ratings")


@dataclass(frozen=True)
class Query:
    """A query: its options and when it was made and shown.

    Attributes:
        id: The id to answer it with.
        number: Its position in the session, from 1.
        names: The parameter names.
        options: ``q`` designs, each a tuple of parameter values in the user's units.
        source: ``"ask"`` or ``"import"`` (comparisons collected elsewhere).
        created_at: When it was generated or imported (UTC, ISO 8601).
        first_shown_at: When ``ask`` first returned it, or ``None``.
        last_shown_at: When ``ask`` last returned it, or ``None``.
        times_shown: How many times ``ask`` returned it (more than one after a restart).
        withdrawn_at: When it was withdrawn (the answer before it was undone), or ``None``.
    """

    id: int
    number: int
    names: tuple[str, ...]
    options: tuple[tuple[float, ...], ...]
    source: str
    created_at: str
    first_shown_at: str | None = None
    last_shown_at: str | None = None
    times_shown: int = 0
    withdrawn_at: str | None = None

    @property
    def shown_at(self) -> str | None:
        """When it was last shown (response times count from it), or ``None``."""
        return self.last_shown_at

    @property
    def q(self) -> int:
        """The number of options."""
        return len(self.options)

    def option(self, i: int) -> dict[str, float]:
        """Option ``i`` as ``{name: value}``.

        Args:
            i: Option index.

        Returns:
            The parameter values by name.
        """
        return dict(zip(self.names, self.options[i], strict=True))

    def as_dicts(self) -> list[dict[str, float]]:
        """All options as ``{name: value}`` dicts.

        Returns:
            One dict per option.
        """
        return [self.option(i) for i in range(self.q)]

    def tensor(self) -> torch.Tensor:
        """The options as a ``q x d`` float64 tensor in the user's units.

        Returns:
            The tensor.
        """
        return torch.tensor(self.options, dtype=torch.float64)


@dataclass(frozen=True)
class StoredAnswer:
    """An answer as stored: the validated answer, the query it answers, its times and retraction.

    Attributes:
        id: Its id.
        query_id: The query it answers.
        answer: The answer (:func:`~botorch_pref.loop.answers.validate_answer` checked it
            before it was stored; a stored answer is not checked again).
        answered_at: When it was committed (UTC, ISO 8601).
        response_s: Seconds from the query being shown to the answer, or ``None``.
        retracted_at: When it was undone, or ``None`` while it stands.
        shown_at: When its query was last shown before the answer, or ``None`` (imports).
    """

    id: int
    query_id: int
    answer: Answer
    answered_at: str
    response_s: float | None
    retracted_at: str | None
    shown_at: str | None = None

    @property
    def stands(self) -> bool:
        """Whether the answer stands (was not undone)."""
        return self.retracted_at is None


@dataclass(frozen=True)
class HistoryEntry:
    """A stored answer with the query it answers.

    Attributes:
        stored: The stored answer (its times and retraction).
        query: The query.
    """

    stored: StoredAnswer
    query: Query

    @property
    def answer(self) -> Answer:
        """The answer given (``stored.answer``)."""
        return self.stored.answer


@dataclass(frozen=True)
class StoredFit:
    """Hyperparameters stored with the answers they were fitted to.

    The choices a session gives its optimiser are its standing ``winner``/``ranking`` (and
    modelled ``tie``) answers in commit order. Answers are never deleted and ids only grow, so
    the first ``n_answers`` choices are the same list exactly when the ``n_answers``-th choice
    still has id ``last_answer_id``.

    Attributes:
        n_answers: The number of choices the fit saw.
        last_answer_id: The id of the last of them.
        values: ``Hyperparameters.to_dict()`` of the loop.
    """

    n_answers: int
    last_answer_id: int
    values: Mapping[str, Any]


@dataclass(frozen=True, eq=False)
class StoredRecommendation:
    """The recommendation stored when a query was generated (``status`` shows it), with the
    choices it was made from (matched to the standing ones as :class:`StoredFit` is).

    Attributes:
        n_answers: The number of choices the model had seen.
        last_answer_id: The id of the last of them.
        recommendation: The recommendation (its design a float64 tensor in the user's units,
            in the session's parameter order).
    """

    n_answers: int
    last_answer_id: int
    recommendation: Recommendation

    def __eq__(self, other: object) -> bool:
        """Equal fields, the design compared as a tensor (exactly)."""
        if not isinstance(other, StoredRecommendation):
            return NotImplemented
        a, b = self.recommendation, other.recommendation
        key = (self.n_answers, self.last_answer_id, a.mean, a.std, a.index)
        other_key = (other.n_answers, other.last_answer_id, b.mean, b.std, b.index)
        return key == other_key and torch.equal(a.x, b.x)

    __hash__ = None  # equal by value, and its design is a mutable tensor


@dataclass(frozen=True)
class Progress:
    """Counts of a session.

    Attributes:
        answered: Standing answers to asked queries (choices, skips and ties).
        choices: Standing ``winner`` and ``ranking`` answers, and ratings given alone
            (imported ones included); the optimiser learns from these.
        skips: Standing skips (imported ones included).
        ties: Standing "no preference" answers (imported ones included).
        imported: Standing imported answers.
        retracted: Undone answers.
        queries: Queries stored (asked, imported, withdrawn).
        pending: Whether a query awaits an answer.
        budget: The planned number of answers, or ``None``.
    """

    answered: int
    choices: int
    skips: int
    ties: int
    imported: int
    retracted: int
    queries: int
    pending: bool
    budget: int | None

    @property
    def done(self) -> bool:
        """Whether the budget is reached."""
        return self.budget is not None and self.answered >= self.budget


@dataclass(frozen=True)
class SessionSummary:
    """A line of :meth:`Session.list`.

    Attributes:
        name: Session name.
        strategy: Its strategy.
        q: Options per query.
        parameters: Parameter names.
        progress: Its counts.
        created_at: Creation time.
    """

    name: str
    strategy: str
    q: int
    parameters: tuple[str, ...]
    progress: Progress
    created_at: str


@dataclass(frozen=True)
class SessionState:
    """Everything stored about one session, read in one transaction (a consistent snapshot).

    Attributes:
        queries: Every query, in order.
        answers: Every answer (retracted ones included), in commit order.
        pending_id: The id of the query awaiting an answer, or ``None``.
        version: ``(last answer id, last retraction id)``: changes whenever the standing
            answers may have changed.
        fits: The stored fits, most answers first.
        recommendation: The recommendation stored last, or ``None``.
    """

    queries: tuple[Query, ...]
    answers: tuple[StoredAnswer, ...]
    pending_id: int | None
    version: tuple[int, int]
    fits: tuple[StoredFit, ...] = ()
    recommendation: StoredRecommendation | None = None
    _by_id: dict[int, Query] = field(default_factory=dict, init=False, repr=False, compare=False)

    def query(self, query_id: int) -> Query:
        """The query with this id.

        Args:
            query_id: Its id.

        Returns:
            The query.
        """
        if not self._by_id:
            self._by_id.update((q.id, q) for q in self.queries)
        return self._by_id[query_id]

    @property
    def pending(self) -> Query | None:
        """The query awaiting an answer, or ``None``."""
        return None if self.pending_id is None else self.query(self.pending_id)

    def standing(self) -> list[StoredAnswer]:
        """The answers that stand, in commit order.

        Returns:
            The answers.
        """
        return [a for a in self.answers if a.stands]

    def history(self, include_retracted: bool = True) -> list[HistoryEntry]:
        """Every answer with its query.

        Args:
            include_retracted: Include undone answers.

        Returns:
            The entries, in commit order.
        """
        return [
            HistoryEntry(a, self.query(a.query_id))
            for a in self.answers
            if include_retracted or a.stands
        ]
