"""Edges of the query preparer: a worker that cannot be started or fails oddly frees its sessions.

The worker processes are replaced by a stand-in (no process starts): what is tested is the
preparer's bookkeeping when sending a step fails, not the worker's work.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

from botorch_pref.web import held
from botorch_pref.web.workers import Prepared, Preparer


class _Standin:
    """What a worker's ``submit`` does: fail the first ``failures`` sends, then prepare."""

    def __init__(self, failures: list[BaseException | Future]) -> None:
        self.failures = failures
        self.sent: list[Any] = []

    def submit(self, func: Callable[..., Any], *args: Any) -> Future:
        self.sent.append(func)
        future: Future = Future()
        if func is not held.prepare_many:
            future.set_result(None)
            return future
        if self.failures:
            failure = self.failures.pop(0)
            if isinstance(failure, Future):
                return failure
            raise failure
        future.set_result([Prepared(7, None, 1) for _ in args[0]])
        return future


@pytest.fixture
def preparer(tmp_path):
    with Preparer(tmp_path / "none.db", workers=1) as p:
        yield p


def _failed(err: BaseException) -> Future:
    future: Future = Future()
    future.set_exception(err)
    return future


@pytest.mark.parametrize(
    "failure",
    [
        OSError(24, "Too many open files"),  # replacing a dead worker process failed
        _failed(SystemExit(1)),  # the step ended by a BaseException (sys.exit in it)
    ],
    ids=["start", "base-exception"],
)
def test_a_step_that_cannot_run_leaves_no_session_preparing(preparer, monkeypatch, failure):
    standin = _Standin([failure])
    (worker,) = preparer._workers
    monkeypatch.setattr(worker, "submit", standin.submit)
    preparer.prepare("alice")  # used to raise, or to leave "alice" preparing for ever
    assert not preparer.is_preparing("alice")
    first = preparer.prepared("alice")
    assert first is not None and first.query_id is None
    assert type(failure if not isinstance(failure, Future) else failure.exception()).__name__ in (
        first.error
    )
    # the worker is not left busy: the next preparation runs
    assert preparer.prepare("alice")
    assert preparer.prepared("alice") == Prepared(7, None, 1)
    assert preparer.preparing_count() == 0


def test_sweeping_and_closing_reach_every_worker_when_one_cannot_be_reached(tmp_path, monkeypatch):
    preparer = Preparer(tmp_path / "none.db", workers=2)
    first, second = preparer._workers
    stopped = []

    def unreachable(func: Callable[..., Any], *args: Any) -> Future:
        raise OSError(24, "Too many open files")  # its dead process could not be replaced

    monkeypatch.setattr(first, "submit", unreachable)
    for worker in (first, second):
        monkeypatch.setattr(worker, "shutdown", lambda w=worker: stopped.append(w))
    second_standin = _Standin([])
    monkeypatch.setattr(second, "submit", second_standin.submit)
    preparer.sweep()  # used to raise (ending the server's periodic sweep for good)
    assert second_standin.sent == [held.evict_idle]
    preparer.close()  # used to raise at the first worker, the others left running
    assert stopped == [first, second]
    assert preparer._alive_w.closed and preparer._alive_r.closed
