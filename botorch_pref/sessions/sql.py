"""The SQL the store runs more than once, and the decoding of its rows into records.

:data:`PENDING` selects a session's pending query (asked, not withdrawn, no standing answer);
:data:`VERSION` is ``(last answer id, last retraction id)`` of a session, which changes whenever
its standing answers may have changed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import torch

from botorch_pref.checks import strict_int
from botorch_pref.loop import Answer, Recommendation
from botorch_pref.sessions.errors import QueryNotPendingError
from botorch_pref.sessions.records import Query, SessionRow, StoredAnswer, StoredRecommendation

__all__ = [
    "ANSWER_COLUMNS",
    "ANSWER_SELECT",
    "BEST_SELECT",
    "PENDING",
    "QUERY_COLUMNS",
    "SESSION_COLUMNS",
    "VERSION",
    "answer_columns",
    "answer_row",
    "as_query_id",
    "best_row",
    "query_row",
    "seconds_between",
    "session_row",
    "utc_now",
]

SESSION_COLUMNS = (
    "id, name, parameters, strategy, q, seed, options, budget, package_version, created_at"
)
QUERY_COLUMNS = (
    "id, number, source, created_at, first_shown_at, last_shown_at, times_shown, withdrawn_at"
)
ANSWER_SELECT = (
    "SELECT a.id, a.query_id, a.kind, a.winner, a.ranking, a.answered_at, a.response_s, "
    "r.retracted_at, a.shown_at, a.strength, a.ratings FROM answers a "
    "LEFT JOIN retractions r ON r.answer_id = a.id"
)
PENDING = (
    "SELECT q.id FROM queries q WHERE q.session_id = ? AND q.source = 'ask' "
    "AND q.withdrawn_at IS NULL AND NOT EXISTS (SELECT 1 FROM answers a "
    "LEFT JOIN retractions r ON r.answer_id = a.id WHERE a.query_id = q.id "
    "AND r.id IS NULL) ORDER BY q.number DESC LIMIT 1"
)
BEST_SELECT = (
    "SELECT n_answers, last_answer_id, x, mean, std, datapoint FROM recommendations "
    "WHERE session_id = ?"
)
VERSION = (
    "SELECT (SELECT coalesce(max(id), 0) FROM answers WHERE session_id = ?), "
    "(SELECT coalesce(max(r.id), 0) FROM retractions r JOIN answers a ON a.id = r.answer_id "
    "WHERE a.session_id = ?)"
)


def utc_now() -> str:
    """The current time in UTC, ISO 8601 with microseconds.

    Returns:
        The timestamp string.
    """
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def seconds_between(start: str | None, end: str) -> float | None:
    """Seconds from ``start`` to ``end``.

    Args:
        start: An ISO timestamp, or ``None``.
        end: An ISO timestamp.

    Returns:
        The seconds, or ``None`` without a start.
    """
    if start is None:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


#: The largest integer SQLite stores (a signed 64-bit one).
SQLITE_MAX_INT = 2**63 - 1


def fits_sqlite(value: int) -> bool:
    """Whether SQLite can store the integer ``value`` (a signed 64-bit one)."""
    return -SQLITE_MAX_INT - 1 <= value <= SQLITE_MAX_INT


def as_query_id(value: Any) -> int:
    """A query id given by a caller.

    Args:
        value: The id.

    Returns:
        It as an ``int``.

    Raises:
        QueryNotPendingError: For anything but an integer.
    """
    query_id = strict_int(value, "A query id", error=QueryNotPendingError)
    if not fits_sqlite(query_id):
        raise QueryNotPendingError(f"No query has the id {query_id}.")
    return query_id


def session_row(row: Sequence[Any]) -> SessionRow:
    """Decode a row of :data:`SESSION_COLUMNS`.

    Args:
        row: The row.

    Returns:
        The session.
    """
    return SessionRow(
        id=int(row[0]),
        name=row[1],
        parameters=tuple((str(n), float(lo), float(hi)) for n, lo, hi in json.loads(row[2])),
        strategy=row[3],
        q=int(row[4]),
        seed=int(row[5]),
        options=json.loads(row[6]),
        budget=None if row[7] is None else int(row[7]),
        package_version=row[8],
        created_at=row[9],
    )


#: The columns :func:`answer_columns` gives values for, in its order.
ANSWER_COLUMNS = ("kind", "winner", "ranking", "strength", "ratings")


def _json_list(values: Sequence[int] | None) -> str | None:
    return None if values is None else json.dumps(list(values))


def _int_tuple(text: str | None) -> tuple[int, ...] | None:
    return None if text is None else tuple(int(i) for i in json.loads(text))


def answer_columns(answer: Answer) -> tuple[str, int | None, str | None, int | None, str | None]:
    """The values of :data:`ANSWER_COLUMNS` that store an answer (ranking and ratings as JSON).

    Args:
        answer: A validated answer.

    Returns:
        The column values, in that order (:func:`answer_row` reads them back).
    """
    ranking, ratings = _json_list(answer.ranking), _json_list(answer.ratings)
    return answer.kind, answer.winner, ranking, answer.strength, ratings


def answer_row(row: Sequence[Any]) -> StoredAnswer:
    """Decode a row of :data:`ANSWER_SELECT` (its answer was validated before it was stored).

    Args:
        row: The row.

    Returns:
        The stored answer.
    """
    response = None if row[6] is None else float(row[6])
    if response is not None and not math.isfinite(response):
        response = None
    winner = None if row[3] is None else int(row[3])
    strength = None if row[9] is None else int(row[9])
    answer = Answer(row[2], winner, _int_tuple(row[4]), strength, _int_tuple(row[10]))
    return StoredAnswer(
        id=int(row[0]),
        query_id=int(row[1]),
        answer=answer,
        answered_at=row[5],
        response_s=response,
        retracted_at=row[7],
        shown_at=row[8],
    )


def query_row(
    row: Sequence[Any], names: tuple[str, ...], designs: list[tuple[float, ...]]
) -> Query:
    """Decode a row of :data:`QUERY_COLUMNS` with its designs.

    Args:
        row: The row.
        names: The parameter names.
        designs: The options, in order.

    Returns:
        The query.
    """
    return Query(
        int(row[0]), int(row[1]), names, tuple(designs), row[2], row[3], row[4], row[5],
        int(row[6]), row[7],
    )  # fmt: skip


def best_row(row: Sequence[Any]) -> StoredRecommendation:
    """Decode a row of :data:`BEST_SELECT`.

    Args:
        row: The row.

    Returns:
        The stored recommendation (its design a float64 tensor).
    """
    n, last, x, mean, std, index = row
    design = torch.tensor(json.loads(x), dtype=torch.float64)
    rec = Recommendation(design, float(mean), float(std), int(index))
    return StoredRecommendation(int(n), int(last), rec)
