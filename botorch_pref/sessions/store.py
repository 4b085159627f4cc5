"""The SQLite store behind :class:`~botorch_pref.sessions.Session` (standard library only).

One database file holds any number of named sessions. Its tables:

``sessions``
    One row per session: its name, the parameters (names and bounds in the user's units, JSON),
    the strategy, ``q``, the seed, the other optimiser settings (JSON), an optional budget of
    answers, the package version that created it and the creation time.
``queries``
    Every query, in order (``number`` counts from 1 within a session): where it came from
    (``ask``, or ``import`` for comparisons collected elsewhere), when it was created, first and
    last shown and how often, and when it was withdrawn (a query that was pending when the answer
    before it was undone).
``designs``
    Every option of every query: ``(query_id, option, x)`` with ``x`` the JSON list of parameter
    values in the user's units.
``answers``
    Every answer: ``winner`` (index of the preferred option), ``ranking`` (JSON list, best first),
    ``skip`` or ``tie`` (no preference), the time it was given, the time its query was last shown
    and the response time in seconds.
``retractions``
    Undone answers: ``(answer_id, retracted_at)``. Nothing is ever deleted.

A query is *pending* when it came from ``ask``, is not withdrawn and has no answer that stands
(an answer stands until it is retracted). At most one query per session is pending. Every write is
its own ``BEGIN IMMEDIATE`` transaction: the check that a query is still pending and the insertion
of its answer happen under the database's write lock, so two processes can never both answer one
query; the second gets :class:`QueryNotPendingError`. The file is in WAL mode with
``synchronous=FULL``: a committed answer survives the process being killed at any point.

``PRAGMA user_version`` holds :data:`SCHEMA_VERSION`. A file written by a newer schema, a file
that is not a session database, a corrupted file or an unknown session name raises a
:class:`SessionError` subclass before anything is written.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = [
    "ANSWER_KINDS",
    "SCHEMA_VERSION",
    "AnswerRow",
    "CorruptDatabaseError",
    "DatabaseBusyError",
    "ImportFormatError",
    "InvalidAnswerError",
    "NewAnswer",
    "QueryNotPendingError",
    "QueryRow",
    "SchemaVersionError",
    "SessionError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionRow",
    "Store",
    "utc_now",
]

#: The schema this code writes; a database with a larger ``user_version`` is refused.
SCHEMA_VERSION = 1
#: The kinds of answer a person can give.
ANSWER_KINDS = ("winner", "ranking", "skip", "tie")

_SCHEMA = """
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    parameters TEXT NOT NULL,
    strategy TEXT NOT NULL,
    q INTEGER NOT NULL CHECK (q >= 2),
    seed INTEGER NOT NULL,
    options TEXT NOT NULL,
    budget INTEGER,
    package_version TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE queries (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions (id),
    number INTEGER NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('ask', 'import')),
    created_at TEXT NOT NULL,
    first_shown_at TEXT,
    last_shown_at TEXT,
    times_shown INTEGER NOT NULL DEFAULT 0,
    withdrawn_at TEXT,
    UNIQUE (session_id, number)
);
CREATE TABLE designs (
    query_id INTEGER NOT NULL REFERENCES queries (id),
    option INTEGER NOT NULL,
    x TEXT NOT NULL,
    PRIMARY KEY (query_id, option)
);
CREATE TABLE answers (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions (id),
    query_id INTEGER NOT NULL REFERENCES queries (id),
    kind TEXT NOT NULL CHECK (kind IN ('winner', 'ranking', 'skip', 'tie')),
    winner INTEGER,
    ranking TEXT,
    answered_at TEXT NOT NULL,
    shown_at TEXT,
    response_s REAL
);
CREATE TABLE retractions (
    id INTEGER PRIMARY KEY,
    answer_id INTEGER NOT NULL UNIQUE REFERENCES answers (id),
    retracted_at TEXT NOT NULL
);
CREATE INDEX queries_by_session ON queries (session_id, number);
CREATE INDEX answers_by_session ON answers (session_id, id);
CREATE INDEX answers_by_query ON answers (query_id);
"""
_TABLES = frozenset({"sessions", "queries", "designs", "answers", "retractions"})


class SessionError(ValueError):
    """A session cannot do what was asked; nothing was changed."""


class SessionNotFoundError(SessionError):
    """No database at the path, or no session of that name in it."""


class SessionExistsError(SessionError):
    """A session of that name already exists."""


class SchemaVersionError(SessionError):
    """The database was written by a newer version of the session schema."""


class CorruptDatabaseError(SessionError):
    """The file is not a readable session database."""


class DatabaseBusyError(SessionError):
    """Another process held the database's write lock for longer than the busy timeout."""


class QueryNotPendingError(SessionError):
    """The query is not awaiting an answer (already answered, withdrawn or unknown)."""


class InvalidAnswerError(SessionError):
    """An answer that does not fit its query."""


class ImportFormatError(SessionError):
    """A file of comparisons to import is malformed; nothing was imported."""


def utc_now() -> str:
    """The current time in UTC, ISO 8601 with microseconds.

    Returns:
        The timestamp string.
    """
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _seconds_between(start: str | None, end: str) -> float | None:
    """Seconds from ``start`` to ``end`` (ISO timestamps); ``None`` without a start."""
    if start is None:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


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


@dataclass(frozen=True)
class QueryRow:
    """A ``queries`` row with its designs.

    Attributes:
        id: Row id (the query id used to answer it).
        number: Position of the query in its session, from 1.
        source: ``"ask"`` or ``"import"``.
        designs: The options, ``q`` tuples of parameter values in the user's units.
        created_at: When the query was generated or imported.
        first_shown_at: When it was first shown (``ask`` returned it), or ``None``.
        last_shown_at: When it was last shown, or ``None``.
        times_shown: How many times ``ask`` returned it.
        withdrawn_at: When it was withdrawn (its predecessor's answer was undone), or ``None``.
    """

    id: int
    number: int
    source: str
    designs: tuple[tuple[float, ...], ...]
    created_at: str
    first_shown_at: str | None
    last_shown_at: str | None
    times_shown: int
    withdrawn_at: str | None


@dataclass(frozen=True)
class AnswerRow:
    """An ``answers`` row, with its retraction time (``None`` while it stands).

    Attributes:
        id: Row id.
        query_id: The query answered.
        kind: ``"winner"``, ``"ranking"``, ``"skip"`` or ``"tie"``.
        winner: Index of the preferred option (also the ranking's first entry), else ``None``.
        ranking: Full ranking, best first, or ``None``.
        answered_at: When the answer was committed.
        shown_at: When its query was last shown before the answer, or ``None`` (imports).
        response_s: ``answered_at - shown_at`` in seconds, or ``None``.
        retracted_at: When the answer was undone, or ``None``.
    """

    id: int
    query_id: int
    kind: str
    winner: int | None
    ranking: tuple[int, ...] | None
    answered_at: str
    shown_at: str | None
    response_s: float | None
    retracted_at: str | None


@dataclass(frozen=True)
class NewAnswer:
    """An answer about to be stored (validated with :func:`check_answer`).

    Attributes:
        kind: One of :data:`ANSWER_KINDS`.
        winner: Index of the preferred option for ``winner``/``ranking``, else ``None``.
        ranking: Full ranking for ``ranking``, else ``None``.
    """

    kind: str
    winner: int | None = None
    ranking: tuple[int, ...] | None = None


def _as_int(value: Any, what: str) -> int:
    """An integer (not a bool, not a float) or :class:`InvalidAnswerError`."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise InvalidAnswerError(f"{what} must be an integer, got {value!r}.")
    return int(value.__index__())


def check_answer(
    q: int,
    winner: Any = None,
    ranking: Sequence[Any] | None = None,
    skip: bool = False,
    tie: bool = False,
) -> NewAnswer:
    """Validate exactly one answer for a query of ``q`` options.

    Args:
        q: Number of options of the query.
        winner: Index of the preferred option.
        ranking: A permutation of ``0..q-1``, best first.
        skip: The person skipped the query.
        tie: The person has no preference.

    Returns:
        The :class:`NewAnswer`.

    Raises:
        InvalidAnswerError: For no answer, several answers, or an answer out of range.
    """
    given = [winner is not None, ranking is not None, bool(skip), bool(tie)]
    if sum(given) != 1:
        raise InvalidAnswerError(
            "Give exactly one answer: winner=..., ranking=..., skip=True or tie=True."
        )
    if skip:
        return NewAnswer("skip")
    if tie:
        return NewAnswer("tie")
    if winner is not None:
        w = _as_int(winner, "winner")
        if not 0 <= w < q:
            raise InvalidAnswerError(f"winner must lie in 0..{q - 1} for {q} options, got {w}.")
        return NewAnswer("winner", w, None)
    if isinstance(ranking, (str, bytes)) or not hasattr(ranking, "__iter__"):
        raise InvalidAnswerError(f"ranking must be a sequence of indices, got {ranking!r}.")
    rank = tuple(_as_int(r, "ranking entries") for r in ranking)
    if sorted(rank) != list(range(q)):
        raise InvalidAnswerError(
            f"ranking must be a permutation of 0..{q - 1} (best first), got {list(rank)}."
        )
    return NewAnswer("ranking", rank[0], rank)


def _is_busy(err: sqlite3.OperationalError) -> bool:
    text = str(err).lower()
    return "locked" in text or "busy" in text


class Store:
    """A connection to a session database (one per process and thread).

    Args:
        path: The database file.
        create: Create the file and the schema if they do not exist; otherwise the file must
            exist and hold the schema.
        timeout: Seconds to wait for another process's write lock before
            :class:`DatabaseBusyError`.

    Raises:
        SessionNotFoundError: Without ``create``, when the file does not exist.
        SchemaVersionError: For a database of a newer schema.
        CorruptDatabaseError: For a file that is not an intact session database.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, create: bool = False, timeout: float = 30.0
    ):
        self.path = Path(path)
        if not create and not self.path.exists():
            raise SessionNotFoundError(f"No session database at {str(self.path)!r}.")
        if self.path.exists() and self.path.is_dir():
            raise SessionError(f"{str(self.path)!r} is a directory, not a session database.")
        mode = "rwc" if create else "rw"
        uri = f"{self.path.resolve().as_uri()}?mode={mode}"
        try:
            self._conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
        except sqlite3.Error as err:
            raise SessionError(f"Cannot open {str(self.path)!r}: {err}") from None
        try:
            self._check_and_prepare(create)
        except BaseException:
            self._conn.close()
            raise

    # ---------------------------------------------------------------- opening
    def _check_and_prepare(self, create: bool) -> None:
        """Check the file before writing anything; create the schema when asked to."""
        version = self._read_pragma("user_version")
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{str(self.path)!r} was written by session schema version {version}; this "
                f"version of botorch-pref reads version {SCHEMA_VERSION} at most. Upgrade "
                "botorch-pref; the file was not changed."
            )
        check = self._read_check()
        if check != "ok":
            raise CorruptDatabaseError(
                f"{str(self.path)!r} is damaged (integrity check: {check}); the file was not "
                "changed. Restore it from a backup or export what is readable with sqlite3."
            )
        tables = self._table_names()
        if version == 0 and not tables and create:
            self._create_schema()
        elif version == 0 or not _TABLES <= tables:
            raise CorruptDatabaseError(
                f"{str(self.path)!r} is an SQLite database but not a botorch-pref session "
                "database; the file was not changed."
            )
        self._execute("PRAGMA synchronous = FULL")
        self._execute("PRAGMA foreign_keys = ON")

    def _read_pragma(self, name: str) -> int:
        try:
            return int(self._conn.execute(f"PRAGMA {name}").fetchone()[0])
        except sqlite3.OperationalError as err:
            if _is_busy(err):
                raise DatabaseBusyError(f"{str(self.path)!r} is busy: {err}") from None
            raise CorruptDatabaseError(self._corrupt_message(err)) from None
        except sqlite3.DatabaseError as err:
            raise CorruptDatabaseError(self._corrupt_message(err)) from None

    def _read_check(self) -> str:
        try:
            rows = self._conn.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as err:
            raise CorruptDatabaseError(self._corrupt_message(err)) from None
        return "; ".join(str(r[0]) for r in rows[:5])

    def _corrupt_message(self, err: Exception) -> str:
        return (
            f"{str(self.path)!r} is not a readable session database ({err}); the file was not "
            "changed."
        )

    def _table_names(self) -> set[str]:
        rows = self._execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {r[0] for r in rows}

    def _create_schema(self) -> None:
        """Switch to WAL and create the tables (re-checked under the write lock)."""
        self._execute("PRAGMA journal_mode = WAL")
        with self.transaction():
            if self._read_pragma("user_version") == 0 and not self._table_names():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._execute(statement)
                self._execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # ------------------------------------------------------------ transactions
    def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        """Execute one statement, turning SQLite errors into :class:`SessionError` s."""
        try:
            return self._conn.execute(sql, params)
        except sqlite3.OperationalError as err:
            if _is_busy(err):
                raise DatabaseBusyError(
                    f"{str(self.path)!r} stayed locked by another process: {err}. Nothing was "
                    "changed; try again."
                ) from None
            raise SessionError(f"Database error on {str(self.path)!r}: {err}") from None
        except sqlite3.DatabaseError as err:
            raise CorruptDatabaseError(self._corrupt_message(err)) from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on any error."""
        self._execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self._conn.in_transaction:
                self._conn.rollback()
            raise
        self._execute("COMMIT")

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def integrity_check(self) -> str:
        """``PRAGMA integrity_check``: ``"ok"`` for an intact file.

        Returns:
            The check's report.
        """
        rows = self._execute("PRAGMA integrity_check").fetchall()
        return "; ".join(str(r[0]) for r in rows)

    # ---------------------------------------------------------------- sessions
    def create_session(
        self,
        name: str,
        parameters: Sequence[tuple[str, float, float]],
        strategy: str,
        q: int,
        seed: int,
        options: dict[str, Any],
        budget: int | None,
        package_version: str,
    ) -> SessionRow:
        """Insert a new session.

        Args:
            name: Unique session name.
            parameters: ``(name, low, high)`` triples.
            strategy: Optimiser strategy.
            q: Options per query.
            seed: Optimiser seed.
            options: Other optimiser settings (JSON-serialisable).
            budget: Planned number of answers, or ``None``.
            package_version: Version of the package creating it.

        Returns:
            The stored row.

        Raises:
            SessionExistsError: When the name is taken.
        """
        params = json.dumps([[n, float(lo), float(hi)] for n, lo, hi in parameters])
        with self.transaction():
            if self._session_id(name) is not None:
                raise SessionExistsError(
                    f"A session named {name!r} already exists in {str(self.path)!r}; open it "
                    "or choose another name."
                )
            self._execute(
                "INSERT INTO sessions (name, parameters, strategy, q, seed, options, budget, "
                "package_version, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    name,
                    params,
                    strategy,
                    q,
                    seed,
                    json.dumps(options, sort_keys=True),
                    budget,
                    package_version,
                    utc_now(),
                ),
            )
        return self.get_session(name)

    def _session_id(self, name: str) -> int | None:
        row = self._execute("SELECT id FROM sessions WHERE name = ?", (name,)).fetchone()
        return None if row is None else int(row[0])

    def session_names(self) -> list[str]:
        """Names of the sessions in the file, in creation order.

        Returns:
            The names.
        """
        return [r[0] for r in self._execute("SELECT name FROM sessions ORDER BY id").fetchall()]

    def get_session(self, name: str) -> SessionRow:
        """The session called ``name``.

        Args:
            name: Session name.

        Returns:
            Its row.

        Raises:
            SessionNotFoundError: For an unknown name (the message lists the known ones).
        """
        row = self._execute(
            "SELECT id, name, parameters, strategy, q, seed, options, budget, package_version, "
            "created_at FROM sessions WHERE name = ?",
            (name,),
        ).fetchone()
        if row is None:
            names = self.session_names()
            known = ", ".join(repr(n) for n in names) if names else "none"
            raise SessionNotFoundError(
                f"No session named {name!r} in {str(self.path)!r} (sessions: {known})."
            )
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

    def session_counts(self, session_id: int) -> dict[str, int]:
        """Counts of queries and answers of a session.

        Args:
            session_id: The session's row id.

        Returns:
            ``queries`` (all), ``pending``, and the standing answers by kind (``winner``,
            ``ranking``, ``skip``, ``tie``), ``asked`` (standing answers to asked queries),
            ``imported`` (standing answers to imported ones) and ``retracted``.
        """
        counts = dict.fromkeys(ANSWER_KINDS, 0)
        for kind, n in self._execute(
            "SELECT a.kind, count(*) FROM answers a LEFT JOIN retractions r ON r.answer_id = a.id "
            "WHERE a.session_id = ? AND r.id IS NULL GROUP BY a.kind",
            (session_id,),
        ).fetchall():
            counts[kind] = int(n)
        for source, n in self._execute(
            "SELECT q.source, count(*) FROM answers a JOIN queries q ON q.id = a.query_id "
            "LEFT JOIN retractions r ON r.answer_id = a.id WHERE a.session_id = ? AND r.id IS NULL "
            "GROUP BY q.source",
            (session_id,),
        ).fetchall():
            counts["asked" if source == "ask" else "imported"] = int(n)
        counts.setdefault("asked", 0)
        counts.setdefault("imported", 0)
        counts["retracted"] = int(
            self._execute(
                "SELECT count(*) FROM retractions r JOIN answers a ON a.id = r.answer_id "
                "WHERE a.session_id = ?",
                (session_id,),
            ).fetchone()[0]
        )
        counts["queries"] = int(
            self._execute(
                "SELECT count(*) FROM queries WHERE session_id = ?", (session_id,)
            ).fetchone()[0]
        )
        counts["pending"] = int(self._pending_id(session_id) is not None)
        return counts

    # ----------------------------------------------------------------- queries
    def _pending_id(self, session_id: int) -> int | None:
        row = self._execute(
            "SELECT q.id FROM queries q WHERE q.session_id = ? AND q.source = 'ask' "
            "AND q.withdrawn_at IS NULL AND NOT EXISTS (SELECT 1 FROM answers a "
            "LEFT JOIN retractions r ON r.answer_id = a.id WHERE a.query_id = q.id "
            "AND r.id IS NULL) ORDER BY q.number DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        return None if row is None else int(row[0])

    def _query(self, query_id: int) -> QueryRow:
        row = self._execute(
            "SELECT id, number, source, created_at, first_shown_at, last_shown_at, times_shown, "
            "withdrawn_at FROM queries WHERE id = ?",
            (query_id,),
        ).fetchone()
        return self._query_row(row)

    def _query_row(self, row: Sequence[Any], designs: list[str] | None = None) -> QueryRow:
        """A :class:`QueryRow` from a ``queries`` row and its designs' JSON (read if not given)."""
        if designs is None:
            designs = [
                d[0]
                for d in self._execute(
                    "SELECT x FROM designs WHERE query_id = ? ORDER BY option", (row[0],)
                ).fetchall()
            ]
        return QueryRow(
            id=int(row[0]),
            number=int(row[1]),
            source=row[2],
            designs=tuple(tuple(float(v) for v in json.loads(d)) for d in designs),
            created_at=row[3],
            first_shown_at=row[4],
            last_shown_at=row[5],
            times_shown=int(row[6]),
            withdrawn_at=row[7],
        )

    def pending_query(self, session_id: int) -> QueryRow | None:
        """The query awaiting an answer, if any (reading does not count as showing it).

        Args:
            session_id: The session's row id.

        Returns:
            The query or ``None``.
        """
        query_id = self._pending_id(session_id)
        return None if query_id is None else self._query(query_id)

    def queries(self, session_id: int) -> list[QueryRow]:
        """Every query of the session, in order.

        Args:
            session_id: The session's row id.

        Returns:
            The queries.
        """
        rows = self._execute(
            "SELECT id, number, source, created_at, first_shown_at, last_shown_at, times_shown, "
            "withdrawn_at FROM queries WHERE session_id = ? ORDER BY number",
            (session_id,),
        ).fetchall()
        designs: dict[int, list[str]] = {}
        for query_id, x in self._execute(
            "SELECT d.query_id, d.x FROM designs d JOIN queries q ON q.id = d.query_id "
            "WHERE q.session_id = ? ORDER BY d.query_id, d.option",
            (session_id,),
        ).fetchall():
            designs.setdefault(int(query_id), []).append(x)
        return [self._query_row(r, designs.get(int(r[0]), [])) for r in rows]

    def _insert_query(
        self, session_id: int, designs: Sequence[Sequence[float]], source: str, now: str
    ) -> int:
        number = self._execute(
            "SELECT coalesce(max(number), 0) + 1 FROM queries WHERE session_id = ?", (session_id,)
        ).fetchone()[0]
        shown = now if source == "ask" else None
        cur = self._execute(
            "INSERT INTO queries (session_id, number, source, created_at, first_shown_at, "
            "last_shown_at, times_shown) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (session_id, number, source, now, shown, shown, int(source == "ask")),
        )
        query_id = int(cur.lastrowid)
        for option, x in enumerate(designs):
            self._execute(
                "INSERT INTO designs (query_id, option, x) VALUES (?, ?, ?)",
                (query_id, option, json.dumps([float(v) for v in x])),
            )
        return query_id

    def show_or_add_query(
        self, session_id: int, generate: Callable[[], Sequence[Sequence[float]]]
    ) -> QueryRow:
        """The pending query marked as shown now, or a new query stored as pending and shown.

        The check for a pending query, ``generate()`` and the insertion run under the write lock,
        so concurrent callers get the same query and the new query depends on the answers as
        they are when it is stored. Other writers wait (up to the busy timeout) meanwhile.

        Args:
            session_id: The session's row id.
            generate: Makes the options of a new query (user units); it may read the store.

        Returns:
            The query.
        """
        with self.transaction():
            query_id = self._pending_id(session_id)
            if query_id is not None:
                self._mark_shown(query_id, utc_now())
            else:
                designs = generate()
                query_id = self._insert_query(session_id, designs, "ask", utc_now())
        return self._query(query_id)

    def _mark_shown(self, query_id: int, now: str) -> None:
        self._execute(
            "UPDATE queries SET first_shown_at = coalesce(first_shown_at, ?), last_shown_at = ?, "
            "times_shown = times_shown + 1 WHERE id = ?",
            (now, now, query_id),
        )

    def show_pending(self, session_id: int) -> QueryRow | None:
        """Record that the pending query is shown now, and return it.

        Args:
            session_id: The session's row id.

        Returns:
            The pending query (with the new show time), or ``None`` when there is none.
        """
        with self.transaction():
            query_id = self._pending_id(session_id)
            if query_id is None:
                return None
            self._mark_shown(query_id, utc_now())
        return self._query(query_id)

    # ----------------------------------------------------------------- answers
    def add_answer(self, session_id: int, query_id: Any, answer: NewAnswer) -> AnswerRow:
        """Commit the answer to a pending query (checked under the write lock).

        Args:
            session_id: The session's row id.
            query_id: The query answered.
            answer: A validated answer (its indices are checked again against the query).

        Returns:
            The stored answer.

        Raises:
            QueryNotPendingError: When the query is unknown, imported, withdrawn or answered.
            InvalidAnswerError: When the answer does not fit the query.
        """
        qid = _as_query_id(query_id)
        with self.transaction():
            query = self._pending_check(session_id, qid)
            check_answer(
                len(query.designs),
                winner=answer.winner if answer.kind == "winner" else None,
                ranking=answer.ranking,
                skip=answer.kind == "skip",
                tie=answer.kind == "tie",
            )
            now = utc_now()
            cur = self._execute(
                "INSERT INTO answers (session_id, query_id, kind, winner, ranking, answered_at, "
                "shown_at, response_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    qid,
                    answer.kind,
                    answer.winner,
                    None if answer.ranking is None else json.dumps(list(answer.ranking)),
                    now,
                    query.last_shown_at,
                    _seconds_between(query.last_shown_at, now),
                ),
            )
            answer_id = int(cur.lastrowid)
        return self._answer(answer_id)

    def _pending_check(self, session_id: int, query_id: int) -> QueryRow:
        """The query if it awaits an answer, else :class:`QueryNotPendingError`."""
        row = self._execute(
            "SELECT id, number, source, created_at, first_shown_at, last_shown_at, times_shown, "
            "withdrawn_at FROM queries WHERE id = ? AND session_id = ?",
            (query_id, session_id),
        ).fetchone()
        if row is None:
            raise QueryNotPendingError(f"Query {query_id} does not belong to this session.")
        query = self._query_row(row)
        if query.source != "ask":
            raise QueryNotPendingError(f"Query {query_id} was imported with its answer.")
        standing = self._execute(
            "SELECT a.id, a.answered_at FROM answers a LEFT JOIN retractions r "
            "ON r.answer_id = a.id WHERE a.query_id = ? AND r.id IS NULL",
            (query_id,),
        ).fetchone()
        if standing is not None:
            raise QueryNotPendingError(
                f"Query {query_id} was already answered at {standing[1]} (answer {standing[0]}); "
                "its answer was kept and this one was not recorded."
            )
        if query.withdrawn_at is not None:
            raise QueryNotPendingError(
                f"Query {query_id} was withdrawn at {query.withdrawn_at} (an earlier answer was "
                "undone); ask for the current query."
            )
        return query

    def _answer(self, answer_id: int) -> AnswerRow:
        row = self._execute(
            "SELECT a.id, a.query_id, a.kind, a.winner, a.ranking, a.answered_at, a.shown_at, "
            "a.response_s, r.retracted_at FROM answers a LEFT JOIN retractions r "
            "ON r.answer_id = a.id WHERE a.id = ?",
            (answer_id,),
        ).fetchone()
        return _answer_row(row)

    def answers(self, session_id: int, standing_only: bool = False) -> list[AnswerRow]:
        """The session's answers in the order they were committed.

        Args:
            session_id: The session's row id.
            standing_only: Leave out retracted answers.

        Returns:
            The answers.
        """
        sql = (
            "SELECT a.id, a.query_id, a.kind, a.winner, a.ranking, a.answered_at, a.shown_at, "
            "a.response_s, r.retracted_at FROM answers a LEFT JOIN retractions r "
            "ON r.answer_id = a.id WHERE a.session_id = ?"
        )
        if standing_only:
            sql += " AND r.id IS NULL"
        rows = self._execute(sql + " ORDER BY a.id", (session_id,)).fetchall()
        return [_answer_row(r) for r in rows]

    def undo_last(self, session_id: int) -> AnswerRow:
        """Retract the last standing answer to an asked query and show that query again.

        The pending query (generated after that answer) is withdrawn; the retracted answer's
        query becomes pending.

        Args:
            session_id: The session's row id.

        Returns:
            The retracted answer.

        Raises:
            SessionError: When there is no answer to undo.
        """
        with self.transaction():
            row = self._execute(
                "SELECT a.id FROM answers a JOIN queries q ON q.id = a.query_id "
                "LEFT JOIN retractions r ON r.answer_id = a.id WHERE a.session_id = ? "
                "AND q.source = 'ask' AND r.id IS NULL ORDER BY a.id DESC LIMIT 1",
                (session_id,),
            ).fetchone()
            if row is None:
                raise SessionError("Nothing to undo: no answer to an asked query stands.")
            now = utc_now()
            pending = self._pending_id(session_id)
            if pending is not None:
                self._execute("UPDATE queries SET withdrawn_at = ? WHERE id = ?", (now, pending))
            self._execute(
                "INSERT INTO retractions (answer_id, retracted_at) VALUES (?, ?)", (row[0], now)
            )
        return self._answer(int(row[0]))

    def import_comparisons(
        self,
        session_id: int,
        records: Sequence[tuple[Sequence[Sequence[float]], NewAnswer, str | None]],
    ) -> list[int]:
        """Store answered queries collected elsewhere, all in one transaction.

        Args:
            session_id: The session's row id.
            records: ``(designs, answer, answered_at)`` with validated answers; ``answered_at``
                ``None`` means now.

        Returns:
            The new query ids.
        """
        ids = []
        with self.transaction():
            now = utc_now()
            for designs, answer, answered_at in records:
                query_id = self._insert_query(session_id, designs, "import", now)
                self._execute(
                    "INSERT INTO answers (session_id, query_id, kind, winner, ranking, "
                    "answered_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        session_id,
                        query_id,
                        answer.kind,
                        answer.winner,
                        None if answer.ranking is None else json.dumps(list(answer.ranking)),
                        answered_at or now,
                    ),
                )
                ids.append(query_id)
        return ids


def _as_query_id(value: Any) -> int:
    """A query id (an integer) or :class:`QueryNotPendingError`."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise QueryNotPendingError(f"A query id is an integer, got {value!r}.")
    return int(value.__index__())


def _answer_row(row: Sequence[Any]) -> AnswerRow:
    response = None if row[7] is None else float(row[7])
    if response is not None and not math.isfinite(response):
        response = None
    return AnswerRow(
        id=int(row[0]),
        query_id=int(row[1]),
        kind=row[2],
        winner=None if row[3] is None else int(row[3]),
        ranking=None if row[4] is None else tuple(int(i) for i in json.loads(row[4])),
        answered_at=row[5],
        shown_at=row[6],
        response_s=response,
        retracted_at=row[8],
    )
