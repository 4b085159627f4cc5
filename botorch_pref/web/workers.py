"""Query preparation off the request path, and the live sessions it keeps in memory.

A request never generates a query: after an answer (or when a page finds no pending query) it
calls :meth:`Preparer.prepare`, which queues the session on its worker and returns at once; the
page says "preparing the next question" and refreshes itself until the query is stored.

Each session is pinned to one of ``workers`` single-thread executors (by a hash of its name),
which holds the session's :class:`~botorch_pref.sessions.Session` and so its model: a
``Session`` is used only by the thread that opened it, and a session's model is refreshed
incrementally from the stored answers instead of being rebuilt. A session unused for ``idle_s``
seconds is closed and dropped from memory; the next use rebuilds it from the database (the
stored answers are the source of truth). Writes (answers, undo) do not go through the workers:
requests make them on their own short-lived connections, under SQLite's write lock. The
worker computes a new query before :meth:`~botorch_pref.sessions.Session.ask` stores it, so
the write lock is not held while the acquisition function is optimised.
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from botorch_pref.sessions import Best, Session, SessionError

__all__ = ["Prepared", "Preparer"]

T = TypeVar("T")


@dataclass(frozen=True)
class Prepared:
    """The worker's last word on a session.

    Attributes:
        query_id: The pending query it prepared, or ``None``.
        best: The recommendation after the answers it saw, or ``None``.
        answers: How many standing answers it saw.
        error: Why preparing failed, or ``""``.
        seconds: How long preparing took.
    """

    query_id: int | None
    best: Best | None
    answers: int
    error: str = ""
    seconds: float = 0.0


class _Worker:
    """One thread and the sessions it holds."""

    def __init__(self, index: int, path: str, idle_s: float) -> None:
        self.path = path
        self.idle_s = idle_s
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"botorch-pref-web-{index}")
        self.sessions: dict[str, Session] = {}  # touched only on the worker thread
        self.last_used: dict[str, float] = {}

    def session(self, name: str) -> Session:
        s = self.sessions.get(name)
        if s is None:
            s = Session.open(self.path, name)
            self.sessions[name] = s
        self.last_used[name] = time.monotonic()
        return s

    def drop(self, name: str) -> None:
        s = self.sessions.pop(name, None)
        self.last_used.pop(name, None)
        if s is not None:
            s.close()

    def evict_idle(self, idle_s: float | None = None) -> list[str]:
        now = time.monotonic()
        limit = self.idle_s if idle_s is None else idle_s
        stale = [n for n, t in self.last_used.items() if now - t > limit]
        for name in stale:
            self.drop(name)
        return stale


class Preparer:
    """Prepares queries and recommendations on worker threads.

    Args:
        path: The session database.
        workers: Number of worker threads (each prepares one query at a time).
        idle_s: Seconds after which an unused session is dropped from memory.
    """

    def __init__(self, path: str | os.PathLike[str], workers: int = 1, idle_s: float = 600.0):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}.")
        self.path = str(path)
        self._workers = [_Worker(i, self.path, idle_s) for i in range(workers)]
        self._lock = threading.Lock()
        self._queued: set[str] = set()
        self._prepared: dict[str, Prepared] = {}
        self._closed = False

    def _worker(self, name: str) -> _Worker:
        return self._workers[zlib.crc32(name.encode("utf-8", "surrogatepass")) % len(self._workers)]

    def is_preparing(self, name: str) -> bool:
        """Whether the session is queued or being prepared.

        Args:
            name: The session's name.

        Returns:
            The flag.
        """
        with self._lock:
            return name in self._queued

    def preparing_count(self) -> int:
        """How many sessions are queued or being prepared.

        Returns:
            The count.
        """
        with self._lock:
            return len(self._queued)

    def prepared(self, name: str) -> Prepared | None:
        """The last preparation's result for a session.

        Args:
            name: The session's name.

        Returns:
            It, or ``None`` if none was made since the server started (or since it was dropped).
        """
        with self._lock:
            return self._prepared.get(name)

    def prepare(self, name: str) -> bool:
        """Queue the session's next query (a no-op if it is already queued).

        The worker stores a new query unless one is pending or the budget is reached, then
        computes the recommendation.

        Args:
            name: The session's name.

        Returns:
            Whether it was queued now.
        """
        with self._lock:
            if self._closed or name in self._queued:
                return False
            self._queued.add(name)
        worker = self._worker(name)
        try:
            worker.executor.submit(self._prepare, worker, name)
        except RuntimeError:  # shut down meanwhile
            with self._lock:
                self._queued.discard(name)
            return False
        return True

    def _prepare(self, worker: _Worker, name: str) -> None:
        start = time.perf_counter()
        if self._closed:
            with self._lock:
                self._queued.discard(name)
            return
        try:
            worker.evict_idle()
            s = worker.session(name)
            progress = s.progress()
            query = None
            if not progress.pending and not progress.done:
                # The optimiser's next query, computed before ask() takes the database's write
                # lock: ask() then finds it ready (an optimiser returns its unanswered query
                # again), so other sessions' answers do not wait for the acquisition.
                s.optimizer.ask()
            if progress.pending or not progress.done:
                query = s.ask()
            result = Prepared(
                None if query is None else query.id,
                s.best(),
                progress.answered,
                seconds=time.perf_counter() - start,
            )
        except SessionError as err:
            worker.drop(name)
            result = Prepared(None, None, 0, f"{type(err).__name__}: {err}")
        except Exception as err:  # report it on the page rather than lose the worker
            worker.drop(name)
            result = Prepared(None, None, 0, f"{type(err).__name__}: {err}")
        with self._lock:
            self._prepared[name] = result
            self._queued.discard(name)

    def call(self, name: str, func: Callable[[Session], T], timeout: float = 120.0) -> T:
        """Run ``func(session)`` on the session's worker (for work that needs its model).

        Args:
            name: The session's name.
            func: What to run; it must not keep the session.
            timeout: Seconds to wait.

        Returns:
            What ``func`` returned.
        """
        worker = self._worker(name)

        def run() -> T:
            worker.evict_idle()
            return func(worker.session(name))

        future: Future[T] = worker.executor.submit(run)
        return future.result(timeout=timeout)

    def sweep(self, idle_s: float | None = None) -> None:
        """Drop idle sessions on every worker (queued behind their current work).

        Args:
            idle_s: Drop those unused for longer than this (default: the preparer's ``idle_s``).
        """
        for worker in self._workers:
            try:
                worker.executor.submit(worker.evict_idle, idle_s)
            except RuntimeError:
                pass

    def live_sessions(self) -> int:
        """How many sessions the workers hold in memory (read on the worker threads).

        Returns:
            The count.
        """
        futures = [w.executor.submit(lambda w=w: len(w.sessions)) for w in self._workers]
        return sum(f.result(timeout=120.0) for f in futures)

    def close(self) -> None:
        """Stop the workers (waiting for the current preparations) and close the sessions."""
        with self._lock:
            self._closed = True
        for worker in self._workers:
            try:
                worker.executor.submit(lambda w=worker: [w.drop(n) for n in list(w.sessions)])
            except RuntimeError:
                pass
            worker.executor.shutdown(wait=True)

    def __enter__(self) -> Preparer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
