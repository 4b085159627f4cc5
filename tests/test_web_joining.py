"""Sessions left waiting one step to join others with the same settings and number of answers."""

from __future__ import annotations

import time

from botorch_pref.sessions import Session
from botorch_pref.web import held
from botorch_pref.web.workers import MAX_WAIT_S, Preparer
from tests.test_web_helpers import wait_until


def _sessions(path, answers: dict[str, int]) -> None:
    for i, (name, n) in enumerate(answers.items()):
        Session.create(path, name, {"x": (0, 1), "y": (0, 1)}, "eubo", 2, i, n_initial=1).close()
        with Session.open(path, name) as s:
            for _ in range(n):
                s.answer(s.ask().id, winner=0)


def _answer(path, names) -> None:
    for name in names:
        with Session.open(path, name) as s:
            s.answer(s.pending().id, winner=1)


def _prepare(preparer: Preparer, names) -> None:
    for name in names:
        preparer.prepare(name)
    wait_until(lambda: preparer.preparing_count() == 0)


def test_a_small_group_waits_for_the_large_one_to_come_back_and_joins_its_step(tmp_path):
    path = tmp_path / "join.db"
    big, small = ["a", "b", "c"], ["d", "e"]
    _sessions(path, {**dict.fromkeys(big, 1), **dict.fromkeys(small, 2)})
    held.start(str(path), 600.0, None)
    try:
        assert all(r.query_id is not None for r in held.prepare_many(big))  # 2 answers next
        # the small group would be stepped on its own: it waits for the large one instead
        d, e = held.prepare_many(small, may_wait=small)
        assert d.waiting and e.waiting and d.query_id is None and d.answers == 2
        assert set(d.wait_for) == set(big) == set(e.wait_for)
        for name in small:
            with Session.open(path, name) as s:
                assert s.pending() is None  # nothing stored for those waiting
        _answer(path, big)
        # the large group is back with 2 answers: one step of all five (the small group does
        # not wait again: it is not in may_wait, as the preparer sends it)
        results = held.prepare_many([*small, *big], may_wait=big)
        assert all(not r.waiting and r.query_id is not None for r in results)
        assert ("a", "b", "c", "d", "e") in held._HELD.steps
        # without may_wait nobody waits, even with sessions expected with the same answers
        _answer(path, ["a"])
        (again,) = held.prepare_many(["a"])
        assert not again.waiting and again.query_id is not None
    finally:
        held.close_all()


def test_a_session_ahead_waits_for_the_others_to_catch_up_unless_far_ahead(tmp_path):
    path = tmp_path / "ahead.db"
    _sessions(path, {"a": 1, "b": 1, "c": 3, "d": 6})
    held.start(str(path), 600.0, None)
    try:
        held.prepare_many(["a", "b"])  # they come back with 2 answers
        c, d = held.prepare_many(["c", "d"], may_wait=["c", "d"])
        assert c.waiting and set(c.wait_for) == {"a", "b"}  # one answer ahead: a step closer
        assert not d.waiting and d.query_id is not None  # too far ahead to wait for them
    finally:
        held.close_all()


def test_a_waiting_session_is_prepared_after_one_step_when_the_others_do_not_come(tmp_path):
    path, big = tmp_path / "bounded.db", ["a", "b", "c"]
    _sessions(path, {**dict.fromkeys(big, 1), "d": 2})  # d one answer ahead
    with Preparer(path, workers=1) as preparer:
        _prepare(preparer, big)
        # d waits for a, b and c, whose people never answer: after at most one step's time
        begin = time.monotonic()
        _prepare(preparer, ["d"])
        waited, d = time.monotonic() - begin, preparer.prepared("d")
        assert d.query_id is not None and not d.waiting and d.error == ""
        assert waited < MAX_WAIT_S + 60  # bounded (the step itself may be slow on a busy CI)
        with Session.open(path, "d") as s:
            assert s.pending().id == d.query_id


def test_waiting_sessions_go_with_the_others_as_soon_as_they_are_queued(tmp_path):
    path, big = tmp_path / "soon.db", ["a", "b", "c"]
    _sessions(path, {**dict.fromkeys(big, 1), "d": 2})  # d one answer ahead
    with Preparer(path, workers=1) as preparer:
        _prepare(preparer, big)
        preparer.prepare("d")
        _answer(path, big)
        _prepare(preparer, big)
        assert all(preparer.prepared(n).query_id is not None for n in [*big, "d"])
        assert all(preparer.prepared(n).answers == 2 for n in [*big, "d"])
