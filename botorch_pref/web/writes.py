"""The requests' writes, committed together: one transaction for those that arrive at once.

Every answer or undo must be on disk before its request says so, and with ``synchronous =
FULL`` each commit waits for the disk (an ``fsync`` of the write-ahead log). When several people
answer at the same moment (a worker hands a group of sessions their queries at once), their
writes would each take the write lock and wait for the disk in turn; here they take turns on
a lock of this process instead, and whoever gets it commits every write queued meanwhile in one
``BEGIN IMMEDIATE`` transaction, each write inside its own savepoint. A write that raises is
rolled back to its savepoint and raises in its own request; the others are committed. Every
request returns only after the transaction holding its write was committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Generic, TypeVar

from botorch_pref.sessions import Session
from botorch_pref.sessions.store import Store

__all__ = ["GroupWriter"]

T = TypeVar("T")


class _Write(Generic[T]):
    """One request's write and, once committed, its outcome."""

    def __init__(self, name: str, write: Callable[[Session], T]) -> None:
        self.name = name
        self.write = write
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None


class GroupWriter:
    """Commits the writes of concurrent requests together (see the module's docstring).

    Args:
        store: A context manager factory yielding an open store, used by one thread at a time.
    """

    def __init__(self, store: Callable[[], AbstractContextManager[Store]]) -> None:
        self._store = store
        self._queued: list[_Write] = []
        self._queue_lock = threading.Lock()
        #: Held while a group is committed; the requests waiting for it take it in turn.
        self._commit_lock = threading.Lock()
        #: Transactions committed or attempted so far.
        self.transactions = 0

    def waiting(self) -> int:
        """How many writes wait for a transaction (not yet in one).

        Returns:
            The count.
        """
        with self._queue_lock:
            return len(self._queued)

    def run(self, name: str, write: Callable[[Session], T]) -> T:
        """Run ``write`` on a session and commit it, with the writes queued at the same time.

        Args:
            name: The session's name.
            write: The write (its statements run in the shared transaction).

        Returns:
            What ``write`` returned, once committed.

        Raises:
            Exception: What ``write`` raised (nothing of it was written), or the error that
                stopped the transaction (nothing of the group was written).
        """
        mine: _Write[T] = _Write(name, write)
        with self._queue_lock:
            self._queued.append(mine)
        with self._commit_lock:
            if not mine.done:  # not committed by the request before: commit all queued
                with self._queue_lock:
                    group, self._queued = self._queued, []
                self.transactions += 1
                self._commit(group)
        if mine.error is not None:
            raise mine.error
        return mine.result  # type: ignore[return-value]

    def _commit(self, group: list[_Write]) -> None:
        """One transaction for the group; each write in a savepoint of its own."""
        try:
            with self._store() as store, store.connection.write():
                for each in group:
                    _one(store, each)
        except BaseException as err:  # the transaction: nothing of the group was written
            for each in group:
                each.result, each.error = None, err
        finally:
            for each in group:
                each.done = True


def _one(store: Store, each: _Write) -> None:
    """Run one write inside the open transaction, rolled back to its savepoint on error."""
    db = store.connection
    db.execute("SAVEPOINT request")
    try:
        each.result = each.write(Session.on_store(store, each.name))
    except Exception as err:
        db.execute("ROLLBACK TO request")
        each.error = err
    db.execute("RELEASE request")
