"""One connection to a session database: statements, transactions and their errors.

Every statement goes through :meth:`Connection.execute`, which turns SQLite's errors into the
:mod:`~botorch_pref.sessions.errors` types with one-line messages and applies the busy timeout
to every statement. SQLite's own busy handler is not called in some cases -- a ``PRAGMA
journal_mode = WAL`` or a ``BEGIN`` that would deadlock with another connection returns "database
is locked" at once -- so a statement run outside a transaction is retried here until the timeout
has passed.

Writes run in :meth:`Connection.write` (``BEGIN IMMEDIATE``: the write lock is taken first, so
the checks and the writes see the same data); multi-statement reads run in :meth:`Connection.read`
(one read transaction: in WAL mode every statement in it sees the same snapshot, whatever other
processes commit meanwhile).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from numbers import Real
from pathlib import Path
from typing import Any, Self

from botorch_pref.sessions.errors import (
    CorruptDatabaseError,
    DatabaseAccessError,
    DatabaseBusyError,
    SessionError,
    SessionNotFoundError,
    one_line,
)

__all__ = ["Closing", "Connection"]

_FIRST_WAIT_S = 0.001
_LONGEST_WAIT_S = 0.05
#: The longest wait SQLite's busy handler takes (milliseconds in a C ``int``: about 24.8
#: days); a longer timeout given to it, ``inf`` included, would turn the wait off.
_LONGEST_BUSY_S = (2**31 - 1) / 1000


def _is_busy(err: sqlite3.Error) -> bool:
    name = getattr(err, "sqlite_errorname", "") or ""
    text = str(err).lower()
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text or "busy" in text


class Closing:
    """A context manager whose exit calls :meth:`close`."""

    def close(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Connection(Closing):
    """An SQLite connection in autocommit mode whose errors are :class:`SessionError` s.

    Args:
        path: The database file.
        create: Create the file if it does not exist.
        timeout: Seconds to wait for another process's lock (``inf``: for ever; inside a
            transaction SQLite's own wait, at most about 24.8 days, is the one taken).
        check_same_thread: Refuse use from another thread than the one that opened it
            (``False``: the caller makes sure that one thread at a time uses it).

    Raises:
        SessionNotFoundError: Without ``create``, when the file does not exist.
        SessionError: For a directory, a file that cannot be opened, or a timeout that is not
            a number of seconds ``>= 0``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool,
        timeout: float,
        check_same_thread: bool = True,
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, Real) or not timeout >= 0:
            raise SessionError(
                f"timeout must be a number of seconds >= 0 (inf: wait for ever), got {timeout!r}."
            )
        self.path = Path(path)
        self.timeout = float(timeout)
        if self.path.is_dir():
            raise SessionError(f"{str(self.path)!r} is a directory, not a session database.")
        if not create and not self.path.exists():
            raise SessionNotFoundError(f"No session database at {str(self.path)!r}.")
        uri = f"{self.path.resolve().as_uri()}?mode={'rwc' if create else 'rw'}"
        try:
            self.sqlite = sqlite3.connect(
                uri,
                uri=True,
                timeout=min(self.timeout, _LONGEST_BUSY_S),
                isolation_level=None,
                check_same_thread=check_same_thread,
            )
        except sqlite3.Error as err:
            raise self.error(err) from None

    # ------------------------------------------------------------------ errors
    def error(self, err: sqlite3.Error) -> SessionError:
        """The :class:`SessionError` that says what an SQLite error means here.

        Args:
            err: The error.

        Returns:
            The exception to raise.
        """
        where = repr(str(self.path))
        name = getattr(err, "sqlite_errorname", "") or ""
        text = one_line(err)
        if _is_busy(err):
            return DatabaseBusyError(
                f"{where} was locked by another process for more than {self.timeout:g} s "
                f"({text}); nothing was changed, try again."
            )
        directory = self.path.resolve().parent
        if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")) and not os.access(
            directory, os.W_OK
        ):
            return DatabaseAccessError(
                f"{where} cannot be used: its directory {str(directory)!r} is not writable, and "
                f"a session database (SQLite in WAL mode) needs to create {self.path.name}-wal "
                f"and {self.path.name}-shm beside it. Nothing was changed; copy the file to a "
                "writable directory."
            )
        if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_IOERR")):
            return DatabaseAccessError(f"Cannot use {where}: {text}.")
        if isinstance(err, sqlite3.OperationalError) and name not in ("SQLITE_NOTADB",):
            return SessionError(f"Database error on {where}: {text}.")
        return CorruptDatabaseError(
            f"{where} is not a readable session database ({text}); the file was not changed."
        )

    # -------------------------------------------------------------- statements
    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        """Execute one statement; outside a transaction, retry while the file is busy.

        Args:
            sql: The statement.
            params: Its parameters.

        Returns:
            The cursor.

        Raises:
            SessionError: A subclass saying what went wrong.
        """
        deadline = time.monotonic() + self.timeout
        wait = _FIRST_WAIT_S
        while True:
            try:
                return self.sqlite.execute(sql, params)
            except sqlite3.Error as err:
                retry = (
                    _is_busy(err)
                    and not self.sqlite.in_transaction
                    and time.monotonic() + wait < deadline
                )
                if not retry:
                    raise self.error(err) from None
            time.sleep(wait)
            wait = min(2 * wait, _LONGEST_WAIT_S)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """All rows of a query.

        Args:
            sql: The query.
            params: Its parameters.

        Returns:
            The rows.
        """
        cursor = self.execute(sql, params)
        try:
            return cursor.fetchall()
        except sqlite3.Error as err:
            raise self.error(err) from None

    def value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row (``None`` without rows).

        Args:
            sql: The query.
            params: Its parameters.

        Returns:
            The value.
        """
        rows = self.rows(sql, params)
        return rows[0][0] if rows else None

    # ------------------------------------------------------------ transactions
    @contextmanager
    def _transaction(self, begin: str) -> Iterator[None]:
        if self.sqlite.in_transaction:  # nested: part of the enclosing transaction
            yield
            return
        self.execute(begin)
        try:
            yield
            self.execute("COMMIT")  # a COMMIT refused (busy) leaves the transaction open
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        """End the open transaction, if any, without its changes (after an error)."""
        if self.sqlite.in_transaction:
            try:
                self.sqlite.rollback()
            except sqlite3.Error:  # the error being raised says more; closing rolls back
                pass

    def write(self) -> Any:
        """A ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on any error.

        Returns:
            The context manager.
        """
        return self._transaction("BEGIN IMMEDIATE")

    def read(self) -> Any:
        """A read transaction: every statement in it sees one snapshot of the file.

        Returns:
            The context manager.
        """
        return self._transaction("BEGIN")

    def close(self) -> None:
        """Close the connection."""
        self.sqlite.close()
