"""A web answer's next query reads the session's whole state once.

The path from an answer POST to the next prepared query: the answer is written through the
server's :class:`~botorch_pref.web.writes.GroupWriter` (the answering page's own write), then
the session's worker prepares the next query and its recommendation
(:func:`botorch_pref.web.held.prepare_many`). Here both run in this process, with
:meth:`Store.state <botorch_pref.sessions.store.Store.state>` counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from botorch_pref.sessions import Session
from botorch_pref.sessions.store import Store
from botorch_pref.web import held
from botorch_pref.web.answering import _answer
from botorch_pref.web.writes import GroupWriter
from tests.helpers import same_recommendation

PARAMS = {"a": (0.0, 1.0), "b": (-1.0, 1.0)}

#: Two sessions stepped together (same settings), one alone (another strategy).
SESSIONS = {
    "s0": ("eubo", 10),
    "s1": ("eubo", 11),
    "alone": ("champion-challenger", 12),
}


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """Calls of ``Store.state``, by session name."""
    counts: Counter = Counter()
    original = Store.state

    def counted(self: Store, session):
        counts[session.name] += 1
        return original(self, session)

    monkeypatch.setattr(Store, "state", counted)
    return counts


def test_a_web_answers_next_query_reads_the_session_once(tmp_path, reads):
    path = tmp_path / "reads.db"
    for name, (strategy, seed) in SESSIONS.items():
        Session.create(path, name, PARAMS, strategy, 2, seed, n_initial=2).close()

    @contextmanager
    def kept() -> Iterator[Store]:
        with Store(path) as store:
            yield store

    writer = GroupWriter(kept)
    names = list(SESSIONS)
    held.start(str(path), 600.0, None)
    try:
        prepared = held.prepare_many(names)  # the first pages: random queries
        assert reads == dict.fromkeys(names, 1)
        for step in range(4):  # random answers, then model queries: batched and alone
            reads.clear()
            for name, result in zip(names, prepared, strict=True):
                form = {"query_id": str(result.query_id), "choice": str(step % 2)}
                assert writer.run(name, lambda s, form=form: _answer(s, form)) == ""
            prepared = held.prepare_many(names)
            assert reads == dict.fromkeys(names, 1), step
            assert all(p.query_id is not None and not p.error for p in prepared)
            assert list(held._HELD.steps) == [("s0", "s1")]  # "alone" was not in a step
            for name, result in zip(names, prepared, strict=True):
                with Session.open(path, name) as s:  # what a fresh process reads back
                    assert s.pending().id == result.query_id
                    assert same_recommendation(result.best, s.recommendation())
                    assert result.best is not None and result.answers == step + 1
    finally:
        held.close_all()


def test_a_page_with_a_pending_query_reads_the_session_once(tmp_path, reads):
    path = tmp_path / "pending.db"
    with Session.create(path, "p", PARAMS, "eubo", 2, 3, n_initial=1) as s:
        s.answer(s.ask().id, winner=0)
        pending = s.ask()  # stored by another process; its recommendation too
    held.start(str(path), 600.0, None)
    try:
        reads.clear()
        (result,) = held.prepare_many(["p"])
        assert reads == {"p": 1}
        assert result.query_id == pending.id and result.best is not None
    finally:
        held.close_all()
