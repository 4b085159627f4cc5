"""What runs inside a worker process: the sessions it holds and the work done on them.

A worker process (see :class:`~botorch_pref.web.workers.Preparer`) imports this module, calls
:func:`start` once, then runs the functions below one at a time, in the order they were sent.
It keeps each session it was given an open :class:`~botorch_pref.sessions.Session`, and with it
the session's optimiser, so that the next query after an answer only adds that answer to the
model (and refits on the optimiser's schedule) instead of replaying the whole history; sessions
prepared together in one batched step (:func:`prepare_many`) share a batched state that is kept
between steps in the same way. A session unused for ``idle_s`` seconds is closed and forgotten;
its next use reopens it from the database, whose stored answers and fits are the source of truth
(a reopened session rebuilds the model of the process that recorded the answers).

Everything here is module state of the worker process; nothing is shared with the server.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from botorch_pref.loop import LoopState, Recommendation
from botorch_pref.sessions import Session
from botorch_pref.web.batching import ask_together, group_key

__all__ = [
    "Prepared",
    "call",
    "close_all",
    "count",
    "evict_idle",
    "pid",
    "prepare",
    "prepare_many",
    "recommendation",
    "start",
]

T = TypeVar("T")

#: Most answers a session waiting for others to catch up with it is ahead of them.
MAX_AHEAD = 2


@dataclass(frozen=True)
class Prepared:
    """A worker's last word on a session.

    Attributes:
        query_id: The pending query it prepared, or ``None``.
        best: The recommendation after the answers it saw, or ``None``.
        answers: How many standing answers it saw.
        error: Why preparing failed, or ``""``.
        seconds: How long preparing took.
        waiting: It was left to wait for the next step, to join other sessions in it (see
            :func:`prepare_many`); nothing else is set.
        wait_for: When waiting, the sessions expected back with the same settings and number
            of answers: the step it waits for is best sent once they are queued too.
    """

    query_id: int | None
    best: Recommendation | None
    answers: int
    error: str = ""
    seconds: float = 0.0
    waiting: bool = False
    wait_for: tuple[str, ...] = ()


class _Held:
    """The worker process's open sessions (one instance per process)."""

    def __init__(self) -> None:
        self.path = ""
        self.idle_s = 600.0
        self.sessions: dict[str, Session] = {}
        self.last_used: dict[str, float] = {}
        #: Batched states of the last steps, continued by the next (see ``ask_together``).
        self.steps: dict[tuple[str, ...], LoopState] = {}
        #: Sessions given a new query by a step and not prepared since, with the number of
        #: answers they will have when they come back after their next answer.
        self.coming: dict[str, int] = {}


_HELD = _Held()


def start(path: str, idle_s: float, threads: int | None, server: Connection | None = None) -> None:
    """Set up the worker process (its initializer).

    Args:
        path: The session database.
        idle_s: Seconds after which an unused session is dropped from memory.
        threads: torch's intra-op threads in this process, or ``None`` to leave torch's.
        server: The reading end of a pipe whose other end only the server holds: when it
            closes (the server stopped or was killed), this process exits at once.
    """
    _HELD.path = path
    _HELD.idle_s = idle_s
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    if server is not None:
        threading.Thread(target=_exit_with, args=(server,), daemon=True).start()


def _exit_with(server: Connection) -> None:
    """Wait for the server's end of the pipe to close, then end this process."""
    try:
        server.recv()
    except (EOFError, OSError):
        pass
    os._exit(0)  # the stored answers are committed; nothing here needs saving


def _session(name: str) -> Session:
    s = _HELD.sessions.get(name)
    if s is None:
        s = Session.open(_HELD.path, name)
        _HELD.sessions[name] = s
    _HELD.last_used[name] = time.monotonic()
    return s


def _drop(name: str) -> None:
    s = _HELD.sessions.pop(name, None)
    _HELD.last_used.pop(name, None)
    _HELD.coming.pop(name, None)
    if s is not None:
        s.close()


def evict_idle(idle_s: float | None = None) -> list[str]:
    """Close the sessions unused for longer than ``idle_s`` seconds.

    Args:
        idle_s: The limit (default: the one given to :func:`start`).

    Returns:
        The names dropped.
    """
    now = time.monotonic()
    limit = _HELD.idle_s if idle_s is None else idle_s
    stale = [n for n, t in _HELD.last_used.items() if now - t > limit]
    for name in stale:
        _drop(name)
    return stale


def recommendation(session: Session) -> Recommendation | None:
    """The session's recommendation: the one stored with its last query when it is current.

    Args:
        session: The session.

    Returns:
        The recommendation, or ``None`` before the first choice.
    """
    return session.recommendation()


def prepare(name: str) -> Prepared:
    """Store the session's next query unless one is pending or its budget is reached.

    :meth:`~botorch_pref.sessions.Session.ask` generates the query from a snapshot with no
    lock held and stores it, with the recommendation of the same model, in one short
    transaction; the recommendation returned is the one stored, from the same snapshot (the
    session's state is read once).

    Args:
        name: The session's name.

    Returns:
        The pending query's id and the recommendation, or the error that stopped it.
    """
    return prepare_many([name])[0]


def prepare_many(names: list[str], may_wait: Collection[str] = ()) -> list[Prepared]:
    """:func:`prepare` for several sessions, the new queries of compatible ones made together.

    The sessions that need a new query get it from
    :func:`~botorch_pref.web.batching.ask_together` (one batched step for each group of
    compatible sessions, :meth:`~botorch_pref.sessions.Session.ask_and_recommend` for the
    others); when that fails, each session is prepared on its own, so that one session's error
    is its own.

    A session of ``may_wait`` is left waiting (a result with ``waiting``, and ``wait_for``
    the sessions it waits for) when it is level with, or ahead of, sessions with the same
    settings that were given a query by an earlier step and come back with at most as many
    answers, or ahead of sessions asked now (by at most :data:`MAX_AHEAD` answers): while it
    waits, those catch up with it, and the next steps are shared. A session alone in its
    group, one answer ahead of or behind sessions stepped together now, may also be left
    waiting (see :func:`~botorch_pref.web.batching.ask_together`).

    Args:
        names: The sessions' names, distinct.
        may_wait: Names of sessions that may be left waiting.

    Returns:
        One result per name, in order.
    """
    begin = time.perf_counter()
    evict_idle()
    asking: list[tuple[str, Session, int]] = []
    results: dict[str, Prepared] = {}
    for name in names:
        _HELD.coming.pop(name, None)
        try:
            s = _session(name)
            progress = s.progress()
            if progress.pending or not progress.done:
                asking.append((name, s, progress.answered))
            else:
                results[name] = _prepared(None, recommendation(s), progress.answered, begin)
        except Exception as err:  # SessionError and anything else: shown on the page
            results[name] = _failed(name, err, begin)
    joining = _joining(asking, may_wait)
    asking = [a for a in asking if a not in joining]
    wait = [i for i, (name, _, _) in enumerate(asking) if name in may_wait]
    try:
        queries = ask_together([s for _, s, _ in asking], _HELD.steps, wait)
    except Exception:  # one at a time, each with its own error
        queries, wait = [None] * len(asking), []
    for i, ((name, s, answered), shown) in enumerate(zip(asking, queries, strict=True)):
        if shown is None and i in wait:
            joining.append((name, s, answered))
            continue
        try:
            shown = s.ask_and_recommend() if shown is None else shown
            results[name] = _prepared(shown.query.id, shown.best, answered, begin)
            _HELD.coming[name] = answered + 1
        except Exception as err:
            results[name] = _failed(name, err, begin)
    for name, s, answered in joining:
        results[name] = Prepared(None, None, answered, waiting=True, wait_for=_coming(s, answered))
    return [results[name] for name in names]


def _joining(
    asking: list[tuple[str, Session, int]], may_wait: Collection[str]
) -> list[tuple[str, Session, int]]:
    """Those of ``asking`` to leave waiting: sessions of ``may_wait`` level with or ahead of
    (by at most :data:`MAX_AHEAD` answers) sessions with the same settings that come back
    or are asked now with fewer answers."""
    keys = [group_key(s, n) for _, s, n in asking]
    joining = []
    for (name, s, n), key in zip(asking, keys, strict=True):
        if name not in may_wait or key is None:
            continue
        behind = any(
            k is not None and k[0] == key[0] and n - MAX_AHEAD <= m < n
            for (_, _, m), k in zip(asking, keys, strict=True)
        )
        if behind or _coming(s, n):
            joining.append((name, s, n))
    return joining


def _coming(session: Session, answers: int) -> tuple[str, ...]:
    """The sessions expected back with the same settings as ``session`` and at most
    ``answers`` answers (and at least ``answers - MAX_AHEAD``)."""
    key = group_key(session, answers)
    if key is None:
        return ()
    return tuple(
        name
        for name, n in _HELD.coming.items()
        if answers - MAX_AHEAD <= n <= answers
        and (k := group_key(_HELD.sessions[name], n)) is not None
        and k[0] == key[0]
    )


def _prepared(
    query_id: int | None, best: Recommendation | None, answered: int, begin: float
) -> Prepared:
    return Prepared(query_id, best, answered, seconds=time.perf_counter() - begin)


def _failed(name: str, err: Exception, begin: float) -> Prepared:
    _drop(name)
    return Prepared(None, None, 0, f"{type(err).__name__}: {err}", time.perf_counter() - begin)


def call(name: str, func: Callable[..., T], *args: Any) -> T:
    """Run ``func(session, *args)`` on a held session (work that needs its model).

    Args:
        name: The session's name.
        func: A module-level function (it is sent to the process by name).
        *args: Its other arguments.

    Returns:
        What ``func`` returned.
    """
    evict_idle()
    return func(_session(name), *args)


def count() -> int:
    """How many sessions this process holds.

    Returns:
        The count.
    """
    return len(_HELD.sessions)


def pid() -> int:
    """This process's id (also starts it: the server starts its workers with this).

    Returns:
        The id.
    """
    return os.getpid()


def close_all() -> None:
    """Close every held session."""
    _HELD.steps.clear()
    for name in list(_HELD.sessions):
        _drop(name)
