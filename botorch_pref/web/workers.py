"""Query preparation off the request path, in worker processes that hold the sessions' models.

A request never generates a query: after an answer (or when a page finds no pending query) it
calls :meth:`Preparer.prepare`, which sends the session to its worker and returns at once; the
answering page waits a little for the result (:meth:`Preparer.running`) and otherwise says
"preparing the next question" and refreshes itself until the query is stored.

Each session is pinned to one of ``workers`` worker processes (by a hash of its name), which
holds the session's :class:`~botorch_pref.sessions.Session` and so its model, refreshed
incrementally from the stored answers (see :mod:`botorch_pref.web.held`). A worker prepares
the sessions queued for it together: while it works, the sessions answered meanwhile queue up,
and it takes them all (at most ``batch``) in its next step, where the compatible ones get their
queries from one batched step of the loop (:func:`~botorch_pref.web.batching.ask_together`);
with many people answering at once, that costs a worker little more than one query. So that a
worker's sessions stay in one group instead of splitting into groups with different numbers of
answers that take turns, a session level with or ahead of others with the same settings may
be left waiting one step for them (:func:`~botorch_pref.web.held.prepare_many`); that step is
then held back until they are queued, for at most as long as the worker's last step took.
Generating a query is many small torch operations driven from Python; in processes, workers
run on separate cores instead of taking turns on one interpreter lock, and the server process
that answers the requests is not slowed by them; each worker gets its share of the cores as
torch threads (:func:`worker_threads`). A worker process that dies is replaced on its next use.
Writes (answers, undo) do not go through the workers: requests make them on connections the
server keeps, and the writes of requests that arrive together are committed in one transaction
(:class:`~botorch_pref.web.writes.GroupWriter`).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from botorch_pref.runtime import USER_SETTINGS
from botorch_pref.web import held
from botorch_pref.web.held import Prepared

__all__ = ["DEFAULT_BATCH", "Prepared", "Preparer", "worker_threads"]

#: Most sessions a worker prepares in one step, by default.
DEFAULT_BATCH = 16

#: Most seconds a step is held back for the sessions that sessions left waiting wait for.
MAX_WAIT_S = 1.0

T = TypeVar("T")


def worker_threads(workers: int) -> int | None:
    """torch's intra-op threads in each worker process: the cores shared out among them.

    Args:
        workers: Number of worker processes.

    Returns:
        At least 1, or ``None`` (torch's own setting) when the user chose one in the
        environment (``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS``).
    """
    if any(os.environ.get(name) for name in USER_SETTINGS):
        return None
    if hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1
    return max(1, cores // workers)


def _context() -> multiprocessing.context.BaseContext:
    """How worker processes start: forked from a fork server that imported the models once.

    The fork server is a fresh process (no threads of this one) that imports
    :mod:`botorch_pref.web.held`, and with it torch and the models, once; each worker is
    forked from it, so starting or replacing a worker does not import them again. Where there
    is no fork server, workers are spawned.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([held.__name__])
    return context


class _Worker:
    """One worker process (started again when it died)."""

    def __init__(self, path: str, idle_s: float, threads: int | None, server: Connection) -> None:
        self._args = (path, idle_s, threads, server)
        self._lock = threading.Lock()
        self._executor = self._start()
        #: Sessions waiting for this worker's next step, and whether a step is under way
        #: (guarded by the preparer's lock).
        self.queued: list[str] = []
        self.busy = False
        #: Sessions left waiting in the last step (they are not left waiting twice in a row),
        #: the sessions they wait for, and when the next step is sent without them.
        self.waited: set[str] = set()
        self.wait_for: set[str] = set()
        self.timer: threading.Timer | None = None
        self.holds = 0  # which hold the timer ends
        #: Seconds the last step that prepared a query took (the longest wait for others).
        self.step_s = 0.0

    def _start(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            1,
            mp_context=_context(),
            initializer=held.start,
            initargs=self._args,
        )

    def submit(self, func: Callable[..., T], *args: Any) -> Future[T]:
        with self._lock:
            try:
                return self._executor.submit(func, *args)
            except BrokenProcessPool:  # the process died: a new one rebuilds from the database
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = self._start()
                return self._executor.submit(func, *args)

    def shutdown(self) -> None:
        with self._lock:
            self._executor.shutdown(wait=True)


class Preparer:
    """Prepares queries and recommendations in worker processes.

    Args:
        path: The session database.
        workers: Number of worker processes.
        idle_s: Seconds after which an unused session is dropped from a worker's memory.
        batch: Most sessions a worker prepares in one step (1: one at a time, each query the
            one :meth:`Session.ask <botorch_pref.sessions.Session.ask>` makes alone).

    Raises:
        ValueError: For fewer than one worker, or a batch below 1.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        workers: int = 1,
        idle_s: float = 600.0,
        batch: int = DEFAULT_BATCH,
    ):
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}.")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be an integer of at least 1, got {batch!r}.")
        self._batch = batch
        self.path = str(path)
        # The workers watch the reading end; only this process holds the writing end, so
        # they exit when it closes: at close(), or when the server dies (even by SIGKILL).
        self._alive_r, self._alive_w = _context().Pipe(duplex=False)
        threads = worker_threads(workers)
        self._workers = [_Worker(self.path, idle_s, threads, self._alive_r) for _ in range(workers)]
        self._lock = threading.Lock()
        self._running: dict[str, Future[Prepared]] = {}
        self._prepared: dict[str, Prepared] = {}
        self._closed = False

    def start(self) -> None:
        """Start the worker processes now rather than on the first request."""
        for worker in self._workers:
            worker.submit(held.pid)

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
            return name in self._running

    def running(self, name: str) -> Future[Prepared] | None:
        """The session's preparation under way, to wait for.

        Args:
            name: The session's name.

        Returns:
            Its future (do not cancel it), or ``None`` when none is under way.
        """
        with self._lock:
            return self._running.get(name)

    def preparing_count(self) -> int:
        """How many sessions are queued or being prepared.

        Returns:
            The count.
        """
        with self._lock:
            return len(self._running)

    def prepared(self, name: str) -> Prepared | None:
        """The last preparation's result for a session.

        Args:
            name: The session's name.

        Returns:
            It, or ``None`` if none was made since the server started.
        """
        with self._lock:
            return self._prepared.get(name)

    def prepare(self, name: str) -> bool:
        """Queue the session's next query (a no-op if it is already queued).

        The worker stores a new query unless one is pending or the budget is reached, and
        reads the recommendation. Sessions queued while the worker is busy are prepared
        together in its next step.

        Args:
            name: The session's name.

        Returns:
            Whether it was queued now.
        """
        with self._lock:
            if self._closed or name in self._running:
                return False
            self._running[name] = Future()
            worker = self._worker(name)
            worker.queued.append(name)
        self._dispatch(worker)
        return True

    def _dispatch(self, worker: _Worker, hold: int | None = None) -> None:
        """Send the worker its queued sessions (at most ``batch``) unless it is busy.

        While sessions left waiting by the last step wait for others not yet queued, the step
        is held back until those are queued, for at most as long as the last step took
        (:data:`MAX_WAIT_S` at most); a step sent when that time is up (``hold``: the hold
        that ended) leaves none waiting.
        """
        with self._lock:
            timed_out = hold is not None and hold == worker.holds and worker.timer is not None
            if hold is not None and not timed_out:
                return  # a hold ended by the step it held back
            if timed_out:
                worker.timer, worker.wait_for = None, set()
            if worker.busy or not worker.queued:
                return
            if worker.wait_for.difference(worker.queued):
                if worker.timer is None:
                    worker.holds += 1
                    delay = min(worker.step_s, MAX_WAIT_S)
                    worker.timer = threading.Timer(delay, self._dispatch, (worker, worker.holds))
                    worker.timer.daemon = True
                    worker.timer.start()
                return
            if worker.timer is not None:
                worker.timer.cancel()
                worker.timer = None
            names, worker.queued = worker.queued[: self._batch], worker.queued[self._batch :]
            worker.busy, worker.wait_for = True, set()
            may_wait = [] if timed_out else [n for n in names if n not in worker.waited]
        begin = time.monotonic()
        try:
            future = worker.submit(held.prepare_many, names, may_wait)
        except Exception as err:  # shut down meanwhile, or no process could be started
            future = Future()  # (then the worker is not left busy: the next step tries again)
            future.set_exception(err)
        future.add_done_callback(lambda f: self._done(worker, names, f, begin))

    def _done(
        self, worker: _Worker, names: list[str], future: Future[list[Prepared]], begin: float
    ) -> None:
        try:
            results = future.result()
        except BaseException as err:  # the process died, the server stopped, sys.exit in it
            results = [Prepared(None, None, 0, f"{type(err).__name__}: {err}")] * len(names)
        with self._lock:
            worker.busy = False
            worker.waited = {n for n, r in zip(names, results, strict=True) if r.waiting}
            worker.wait_for = {n for r in results for n in r.wait_for}
            worker.queued[:0] = [n for n in names if n in worker.waited]  # first in the next
            done = [(n, r) for n, r in zip(names, results, strict=True) if not r.waiting]
            if any(r.query_id is not None for _, r in done):
                worker.step_s = time.monotonic() - begin
            for name, result in done:
                self._prepared[name] = result
            futures = [self._running.pop(name) for name, _ in done]
        for each, (_, result) in zip(futures, done, strict=True):
            each.set_result(result)
        if not self._closed:
            self._dispatch(worker)

    def call(self, name: str, func: Callable[..., T], *args: Any, timeout: float = 120.0) -> T:
        """Run ``func(session, *args)`` on the session's worker (work that needs its model).

        Args:
            name: The session's name.
            func: A module-level function (sent to the worker process by name).
            *args: Its other arguments (picklable).
            timeout: Seconds to wait.

        Returns:
            What ``func`` returned.
        """
        worker = self._worker(name)
        try:
            return worker.submit(held.call, name, func, *args).result(timeout=timeout)
        except BrokenProcessPool:  # it died during the call: once more, on its replacement
            return worker.submit(held.call, name, func, *args).result(timeout=timeout)

    def sweep(self, idle_s: float | None = None) -> None:
        """Drop idle sessions on every worker (queued behind their current work).

        Args:
            idle_s: Drop those unused for longer than this (default: the preparer's ``idle_s``).
        """
        for worker in self._workers:
            try:
                worker.submit(held.evict_idle, idle_s)
            except Exception:  # shut down, or its dead process could not be replaced (now)
                pass

    def live_sessions(self, timeout: float = 120.0) -> int:
        """How many sessions the workers hold in memory.

        Args:
            timeout: Seconds to wait for each worker.

        Returns:
            The count.
        """
        futures = [w.submit(held.count) for w in self._workers]
        return sum(f.result(timeout=timeout) for f in futures)

    def worker_pids(self, timeout: float = 120.0) -> list[int]:
        """The worker processes' ids (for reading their memory).

        Args:
            timeout: Seconds to wait for each worker.

        Returns:
            The ids.
        """
        return [w.submit(held.pid).result(timeout=timeout) for w in self._workers]

    def close(self) -> None:
        """Stop the workers (after their current work) and close their sessions."""
        with self._lock:
            self._closed = True
            queued = [n for w in self._workers for n in w.queued]
            for worker in self._workers:
                worker.queued = []
                if worker.timer is not None:
                    worker.timer.cancel()
            waiting = [self._running.pop(n) for n in queued]
        for future in waiting:  # those not started: never will be
            future.set_result(Prepared(None, None, 0, "RuntimeError: the server stopped"))
        for worker in self._workers:
            try:
                worker.submit(held.close_all)
            except Exception:  # shut down, or its dead process could not be replaced
                pass
            worker.shutdown()
        self._alive_w.close()
        self._alive_r.close()

    def __enter__(self) -> Preparer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
