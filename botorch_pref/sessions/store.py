"""The SQLite store behind :class:`~botorch_pref.sessions.Session` (standard library only).

The tables are described in :mod:`botorch_pref.sessions.schema`. A query is *pending* when it came
from ``ask``, is not withdrawn and has no answer that stands (an answer stands until it is
retracted); at most one query per session is pending.

Every write is its own ``BEGIN IMMEDIATE`` transaction: the check that a query is still pending
and the insertion of its answer happen under the database's write lock, so two processes can never
both answer one query; the second gets :class:`QueryNotPendingError`. Every read of more than one
statement runs in one read transaction (:meth:`Store.state`, :meth:`Store.summaries`), so it sees
one consistent snapshot. The file is in WAL mode with ``synchronous=FULL``: a committed answer
survives the process being killed at any point.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from botorch_pref.loop.answers import ANSWER_KINDS, Answer
from botorch_pref.sessions.connection import Closing, Connection
from botorch_pref.sessions.errors import (
    QueryNotPendingError,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
)
from botorch_pref.sessions.records import (
    Query,
    SessionRow,
    SessionState,
    StoredAnswer,
    StoredFit,
    StoredRecommendation,
)
from botorch_pref.sessions.schema import prepare
from botorch_pref.sessions.sql import (
    ANSWER_COLUMNS,
    ANSWER_SELECT,
    BEST_SELECT,
    PENDING,
    QUERY_COLUMNS,
    SESSION_COLUMNS,
    VERSION,
    answer_columns,
    answer_row,
    as_query_id,
    best_row,
    query_row,
    seconds_between,
    session_row,
    utc_now,
)

__all__ = ["Store"]


class Store(Closing):
    """A connection to a session database (one per process and thread).

    Args:
        path: The database file.
        create: Create the file and the schema if they do not exist; otherwise the file must
            exist and hold the schema (an older schema is migrated).
        timeout: Seconds to wait for another process's lock before :class:`DatabaseBusyError`.
        check_same_thread: Refuse use from another thread than the one that opened it
            (``False``: the caller makes sure that one thread at a time uses it).

    Raises:
        SessionNotFoundError: Without ``create``, when the file does not exist.
        SchemaVersionError: For a database of a newer schema.
        CorruptDatabaseError: For a file that is not an intact session database.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = False,
        timeout: float = 30.0,
        check_same_thread: bool = True,
    ) -> None:
        self.connection = Connection(
            path, create=create, timeout=timeout, check_same_thread=check_same_thread
        )
        try:
            prepare(self.connection, create=create)
        except BaseException:
            self.connection.close()
            raise

    @property
    def path(self) -> Path:
        """The database file."""
        return self.connection.path

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()

    def integrity_check(self) -> str:
        """``PRAGMA integrity_check``: ``"ok"`` for an intact file.

        Returns:
            The check's report, one line.
        """
        return "; ".join(str(r[0]) for r in self.connection.rows("PRAGMA integrity_check"))

    # ---------------------------------------------------------------- sessions
    def create_session(
        self,
        name: str,
        parameters: Sequence[tuple[str, float, float]],
        settings: dict[str, Any],
        budget: int | None,
        package_version: str,
    ) -> SessionRow:
        """Insert a new session.

        Args:
            name: Unique session name.
            parameters: ``(name, low, high)`` triples.
            settings: ``strategy``, ``q``, ``seed`` and the other optimiser settings (JSON).
            budget: Planned number of answers, or ``None``.
            package_version: Version of the package creating it.

        Returns:
            The stored row.

        Raises:
            SessionExistsError: When the name is taken.
        """
        options = {k: v for k, v in settings.items() if k not in ("strategy", "q", "seed")}
        params = json.dumps([[n, float(lo), float(hi)] for n, lo, hi in parameters])
        db = self.connection
        with db.write():
            if db.value("SELECT id FROM sessions WHERE name = ?", (name,)) is not None:
                raise SessionExistsError(
                    f"A session named {name!r} already exists in {str(self.path)!r}; open it "
                    "or choose another name."
                )
            db.execute(
                f"INSERT INTO sessions ({SESSION_COLUMNS.removeprefix('id, ')}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    name,
                    params,
                    settings["strategy"],
                    settings["q"],
                    settings["seed"],
                    json.dumps(options, sort_keys=True),
                    budget,
                    package_version,
                    utc_now(),
                ),
            )
            return self.get_session(name)

    def session_names(self) -> list[str]:
        """Names of the sessions in the file, in creation order.

        Returns:
            The names.
        """
        return [r[0] for r in self.connection.rows("SELECT name FROM sessions ORDER BY id")]

    def get_session(self, name: str) -> SessionRow:
        """The session called ``name``.

        Args:
            name: Session name.

        Returns:
            Its row.

        Raises:
            SessionNotFoundError: For an unknown name (the message lists the known ones).
        """
        with self.connection.read():
            rows = self.connection.rows(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE name = ?", (name,)
            )
            if not rows:
                names = self.session_names()
                known = ", ".join(repr(n) for n in names) if names else "none"
                raise SessionNotFoundError(
                    f"No session named {name!r} in {str(self.path)!r} (sessions: {known})."
                )
        return session_row(rows[0])

    def summaries(self) -> list[tuple[SessionRow, dict[str, int]]]:
        """Every session with its counts (:meth:`counts`), read in one transaction.

        Returns:
            ``(row, counts)`` pairs in creation order.
        """
        with self.connection.read():
            rows = self.connection.rows(f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY id")
            return [(session_row(r), self.counts(int(r[0]))) for r in rows]

    def counts(self, session_id: int) -> dict[str, int]:
        """Counts of queries and answers of a session, read in one transaction.

        Args:
            session_id: The session's row id.

        Returns:
            ``queries`` (all), ``pending``, and the standing answers by kind (``winner``,
            ``ranking``, ``skip``, ``tie``, ``rating``), ``asked`` (standing answers to asked
            queries), ``imported`` (standing answers to imported ones) and ``retracted``.
        """
        db = self.connection
        counts = dict.fromkeys((*ANSWER_KINDS, "asked", "imported"), 0)
        with db.read():
            for kind, source, n in db.rows(
                "SELECT a.kind, q.source, count(*) FROM answers a JOIN queries q "
                "ON q.id = a.query_id LEFT JOIN retractions r ON r.answer_id = a.id "
                "WHERE a.session_id = ? AND r.id IS NULL GROUP BY a.kind, q.source",
                (session_id,),
            ):
                counts[kind] += int(n)
                counts["asked" if source == "ask" else "imported"] += int(n)
            counts["retracted"] = int(
                db.value(
                    "SELECT count(*) FROM retractions r JOIN answers a ON a.id = r.answer_id "
                    "WHERE a.session_id = ?",
                    (session_id,),
                )
            )
            counts["queries"] = int(
                db.value("SELECT count(*) FROM queries WHERE session_id = ?", (session_id,))
            )
            counts["pending"] = int(db.value(PENDING, (session_id,)) is not None)
        return counts

    # ------------------------------------------------------------------- reads
    def state(self, session: SessionRow) -> SessionState:
        """Everything stored about a session, read in one transaction.

        Args:
            session: The session.

        Returns:
            The snapshot.
        """
        db = self.connection
        with db.read():
            queries = self._queries(session)
            answers = [
                answer_row(r)
                for r in db.rows(
                    f"{ANSWER_SELECT} WHERE a.session_id = ? ORDER BY a.id", (session.id,)
                )
            ]
            pending = db.value(PENDING, (session.id,))
            version = tuple(int(v) for v in db.rows(VERSION, (session.id, session.id))[0])
            fits = tuple(
                StoredFit(int(n), int(last), json.loads(values))
                for n, last, values in db.rows(
                    "SELECT n_answers, last_answer_id, hyperparameters FROM fits "
                    "WHERE session_id = ? ORDER BY n_answers DESC, id DESC",
                    (session.id,),
                )
            )
            best = db.rows(f"{BEST_SELECT} ORDER BY id DESC LIMIT 1", (session.id,))
        stored = best_row(best[0]) if best else None
        return SessionState(tuple(queries), tuple(answers), pending, version, fits, stored)

    def pending(self, session: SessionRow) -> Query | None:
        """The session's pending query (what :meth:`state` calls ``pending``), read alone."""
        with self.connection.read():
            query_id = self.connection.value(PENDING, (session.id,))
            return None if query_id is None else self._query(session, int(query_id))

    def _queries(self, session: SessionRow, query_id: int | None = None) -> list[Query]:
        """The session's queries with their designs (one, when ``query_id`` is given)."""
        where = "q.session_id = ?" + ("" if query_id is None else " AND q.id = ?")
        params = (session.id,) if query_id is None else (session.id, query_id)
        designs: dict[int, list[tuple[float, ...]]] = {}
        for qid, x in self.connection.rows(
            f"SELECT d.query_id, d.x FROM designs d JOIN queries q ON q.id = d.query_id "
            f"WHERE {where} ORDER BY d.query_id, d.option",
            params,
        ):
            designs.setdefault(int(qid), []).append(tuple(float(v) for v in json.loads(x)))
        rows = self.connection.rows(
            f"SELECT {QUERY_COLUMNS.replace('id, ', 'q.id, ', 1)} FROM queries q "
            f"WHERE {where} ORDER BY q.number",
            params,
        )
        return [query_row(r, session.names, designs.get(int(r[0]), [])) for r in rows]

    def _query(self, session: SessionRow, query_id: int) -> Query | None:
        found = self._queries(session, query_id)
        return found[0] if found else None

    def _answer(self, answer_id: int) -> StoredAnswer:
        return answer_row(self.connection.rows(f"{ANSWER_SELECT} WHERE a.id = ?", (answer_id,))[0])

    # ------------------------------------------------------------------ writes
    def show_query(
        self,
        session: SessionRow,
        designs: Sequence[Sequence[float]] | None = None,
        version: tuple[int, int] | None = None,
        fit: StoredFit | None = None,
        best: StoredRecommendation | None = None,
    ) -> Query | None:
        """Mark the pending query as shown now, or store ``designs`` as the new pending query.

        One short ``BEGIN IMMEDIATE`` transaction. A pending query wins (so processes asking at
        once all get the same query); without one, ``designs`` are stored only while the
        answers are still at ``version`` (they were generated from that state), together with
        the ``fit`` and ``best`` computed from it.

        Args:
            session: The session.
            designs: The options of a new query (user units), or ``None`` to only show.
            version: :attr:`SessionState.version` the designs were generated from.
            fit: Hyperparameters to store (ignored if already stored).
            best: The recommendation to store.

        Returns:
            The query shown, or ``None`` (no pending query and no designs, or the answers
            changed since ``version``).
        """
        db = self.connection
        with db.write():
            now = utc_now()
            query_id = db.value(PENDING, (session.id,))
            current = tuple(int(v) for v in db.rows(VERSION, (session.id, session.id))[0])
            if query_id is None and (designs is None or current != version):
                return None
            if query_id is None:
                query_id = self._insert_query(session.id, designs, "ask", now)
            else:
                db.execute(
                    "UPDATE queries SET first_shown_at = coalesce(first_shown_at, ?), "
                    "last_shown_at = ?, times_shown = times_shown + 1 WHERE id = ?",
                    (now, now, query_id),
                )
            if current == version:
                self._store_model(session.id, fit, best, now)
            return self._query(session, query_id)

    def _store_model(
        self, session_id: int, fit: StoredFit | None, best: StoredRecommendation | None, now: str
    ) -> None:
        if fit is not None:
            self.connection.execute(
                "INSERT OR IGNORE INTO fits (session_id, n_answers, last_answer_id, "
                "hyperparameters, created_at) VALUES (?, ?, ?, ?, ?)",
                (session_id, fit.n_answers, fit.last_answer_id, json.dumps(fit.values), now),
            )
        if best is not None:
            b = best.recommendation
            self.connection.execute(
                "INSERT OR IGNORE INTO recommendations (session_id, n_answers, last_answer_id, x, "
                "mean, std, datapoint, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    best.n_answers,
                    best.last_answer_id,
                    json.dumps(b.x.tolist()),
                    b.mean,
                    b.std,
                    b.index,
                    now,
                ),
            )

    def _insert_query(
        self, session_id: int, designs: Sequence[Sequence[float]], source: str, now: str
    ) -> int:
        db = self.connection
        number = db.value(
            "SELECT coalesce(max(number), 0) + 1 FROM queries WHERE session_id = ?", (session_id,)
        )
        shown = now if source == "ask" else None
        cur = db.execute(
            "INSERT INTO queries (session_id, number, source, created_at, first_shown_at, "
            "last_shown_at, times_shown) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (session_id, number, source, now, shown, shown, int(source == "ask")),
        )
        query_id = int(cur.lastrowid)
        for option, x in enumerate(designs):
            db.execute(
                "INSERT INTO designs (query_id, option, x) VALUES (?, ?, ?)",
                (query_id, option, json.dumps([float(v) for v in x])),
            )
        return query_id

    def _insert_answer(
        self,
        session_id: int,
        query_id: int,
        answer: Answer,
        answered_at: str,
        shown_at: str | None = None,
    ) -> int:
        cur = self.connection.execute(
            f"INSERT INTO answers (session_id, query_id, {', '.join(ANSWER_COLUMNS)}, "
            "answered_at, shown_at, response_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                session_id,
                query_id,
                *answer_columns(answer),
                answered_at,
                shown_at,
                seconds_between(shown_at, answered_at),
            ),
        )
        return int(cur.lastrowid)

    def add_answer(self, session: SessionRow, query_id: Any, answer: Answer) -> StoredAnswer:
        """Commit the answer to a pending query (checked under the write lock).

        Args:
            session: The session.
            query_id: The query answered.
            answer: An answer validated for a query of ``session.q`` options.

        Returns:
            The stored answer.

        Raises:
            QueryNotPendingError: When the query is unknown, imported, withdrawn or answered.
        """
        qid = as_query_id(query_id)
        with self.connection.write():
            query = self._pending_check(session, qid)
            answer_id = self._insert_answer(session.id, qid, answer, utc_now(), query.last_shown_at)
            return self._answer(answer_id)

    def _pending_check(self, session: SessionRow, query_id: int) -> Query:
        """The query if it awaits an answer, else :class:`QueryNotPendingError`."""
        query = self._query(session, query_id)
        if query is None:
            raise QueryNotPendingError(f"Query {query_id} does not belong to this session.")
        if query.source != "ask":
            raise QueryNotPendingError(f"Query {query_id} came with its answer.", "imported")
        standing = self.connection.rows(
            "SELECT a.id, a.answered_at FROM answers a LEFT JOIN retractions r "
            "ON r.answer_id = a.id WHERE a.query_id = ? AND r.id IS NULL",
            (query_id,),
        )
        if standing:
            raise QueryNotPendingError(
                f"Query {query_id} was already answered at {standing[0][1]} (answer "
                f"{standing[0][0]}); it was kept and this one was not recorded.",
                "answered",
            )
        if query.withdrawn_at is not None:
            raise QueryNotPendingError(
                f"Query {query_id} was withdrawn at {query.withdrawn_at} (an answer was undone).",
                "withdrawn",
            )
        return query

    def undo_last(self, session: SessionRow) -> StoredAnswer:
        """Retract the last standing answer to an asked query and show that query again.

        The pending query (generated after that answer) is withdrawn; the retracted answer's
        query becomes pending.

        Args:
            session: The session.

        Returns:
            The retracted answer.

        Raises:
            SessionError: When there is no answer to undo.
        """
        db = self.connection
        with db.write():
            answer_id = db.value(
                "SELECT a.id FROM answers a JOIN queries q ON q.id = a.query_id "
                "LEFT JOIN retractions r ON r.answer_id = a.id WHERE a.session_id = ? "
                "AND q.source = 'ask' AND r.id IS NULL ORDER BY a.id DESC LIMIT 1",
                (session.id,),
            )
            if answer_id is None:
                raise SessionError("Nothing to undo: no answer to an asked query stands.")
            now = utc_now()
            pending = db.value(PENDING, (session.id,))
            if pending is not None:
                db.execute("UPDATE queries SET withdrawn_at = ? WHERE id = ?", (now, pending))
            db.execute(
                "INSERT INTO retractions (answer_id, retracted_at) VALUES (?, ?)", (answer_id, now)
            )
            return self._answer(int(answer_id))

    def import_comparisons(
        self,
        session: SessionRow,
        records: Sequence[tuple[Sequence[Sequence[float]], Answer, str | None]],
    ) -> list[int]:
        """Store answered queries collected elsewhere, all in one transaction.

        Args:
            session: The session.
            records: ``(designs, answer, answered_at)`` with validated answers; ``answered_at``
                ``None`` means now.

        Returns:
            The new query ids.
        """
        ids = []
        with self.connection.write():
            now = utc_now()
            for designs, answer, answered_at in records:
                query_id = self._insert_query(session.id, designs, "import", now)
                self._insert_answer(session.id, query_id, answer, answered_at or now)
                ids.append(query_id)
        return ids
