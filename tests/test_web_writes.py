"""Requests' writes committed together (:mod:`botorch_pref.web.writes`); kept connections."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from botorch_pref.sessions import QueryNotPendingError, Session, SessionError
from botorch_pref.web.server_state import WebConfig, WebState
from tests.test_web_helpers import ADMIN, quick_session, wait_until

NAMES = [f"p{i}" for i in range(5)]


@pytest.fixture
def state(tmp_path: Path):
    path = tmp_path / "w.db"
    for name in NAMES:
        quick_session(path, name)
        with Session.open(path, name) as s:
            s.ask()
    web = WebState(WebConfig(path, ADMIN))
    yield web
    web.close()


def _pending(state: WebState, name: str) -> int:
    with state.open(name) as s:
        return s.pending().id


def _answered(path: Path, name: str) -> list[int]:
    with Session.open(path, name) as s:
        return [h.stored.query_id for h in s.history(include_retracted=False)]


def test_writes_queued_meanwhile_commit_together_each_with_its_outcome(state):
    """While one write holds the transaction, the writes that arrive wait, then commit
    together; a write that fails after writing leaves nothing, the others are kept."""
    ids = {name: _pending(state, name) for name in NAMES}
    release = threading.Event()
    outcomes: dict[str, object] = {}

    def first(s: Session):
        release.wait(30)
        return s.answer(ids["p0"], winner=0)

    def failing(s: Session):
        s.answer(ids["p1"], winner=1)
        raise ValueError("after its answer")

    def twice(s: Session):  # p2's query, answered again after p2's own answer in the group
        return s.answer(ids["p2"], winner=0)

    writes = {
        "p0": first,
        "p1": failing,
        "p2": lambda s: s.answer(ids["p2"], winner=1),
        "p3": lambda s: s.answer(ids["p3"], winner=0),
    }

    def run(key: str, name: str, write) -> None:
        try:
            outcomes[key] = state.writes.run(name, write)
        except Exception as err:
            outcomes[key] = err

    threads = [threading.Thread(target=run, args=("p0", "p0", first))]
    threads[0].start()
    wait_until(lambda: state.writes.transactions == 1)
    for key, write in list(writes.items())[1:]:
        threads.append(threading.Thread(target=run, args=(key, key, write)))
        threads[-1].start()
        wait_until(lambda n=len(threads) - 1: state.writes.waiting() == n)
    threads.append(threading.Thread(target=run, args=("again", "p2", twice)))
    threads[-1].start()
    wait_until(lambda: state.writes.waiting() == 4)
    release.set()
    for t in threads:
        t.join(60)
    assert state.writes.transactions == 2  # the first write alone, then the four queued
    assert isinstance(outcomes["p1"], ValueError)
    assert isinstance(outcomes["again"], QueryNotPendingError)
    for key in ("p0", "p2", "p3"):
        assert outcomes[key].query_id == ids[key]
    assert _answered(state.path, "p0") == [ids["p0"]]
    assert _answered(state.path, "p1") == []
    assert _answered(state.path, "p2") == [ids["p2"]]
    assert _answered(state.path, "p3") == [ids["p3"]]
    assert _answered(state.path, "p4") == []


def test_concurrent_answers_are_all_committed(state):
    ids = {name: _pending(state, name) for name in NAMES}
    start = threading.Barrier(len(NAMES))
    answers = {}

    def answer(name: str) -> None:
        start.wait(30)
        answers[name] = state.writes.run(name, lambda s: s.answer(ids[name], winner=0))

    threads = [threading.Thread(target=answer, args=(name,)) for name in NAMES]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert {n: a.query_id for n, a in answers.items()} == ids
    assert all(_answered(state.path, n) == [ids[n]] for n in NAMES)


def test_a_failed_transaction_fails_every_write_of_it(state):
    """An error of the transaction itself (here: its connection) reaches the request, and the
    next request gets a working connection."""
    qid = _pending(state, "p0")
    with state.open("p0") as s:
        kept = s.store
    kept.connection.sqlite.close()  # a kept connection that broke
    with pytest.raises(sqlite3.ProgrammingError):
        state.writes.run("p0", lambda s: s.answer(qid, winner=0))
    assert _answered(state.path, "p0") == []
    assert state.writes.run("p0", lambda s: s.answer(qid, winner=0)).query_id == qid
    assert _answered(state.path, "p0") == [qid]


def test_kept_connections_are_reused_and_closed(state):
    with state.open("p0") as s:
        first = s.store
    with state.open("p1") as s:
        assert s.store is first and s.name == "p1"
    state.close()
    with pytest.raises(SessionError):
        first.connection.value("SELECT 1")
