"""The session store: consistent snapshots, schema versions, fast resume, queries generated
outside the write lock, and rejected calls that leave the file unchanged."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading

import pytest

from botorch_pref.loop import PreferenceOptimizer
from botorch_pref.sessions import Session, errors
from botorch_pref.sessions import model as session_model

from .helpers import SESSION_FAST, SESSION_PARAMS, same_recommendation

PARAMS, FAST = SESSION_PARAMS, SESSION_FAST
# EUBO with a cheap acquisition: fits after answers 1..3, then every 100th
EUBO = {
    "strategy": "eubo",
    "seed": 5,
    "n_initial": 2,
    "refit_all_until": 3,
    "refit_every": 100,
    "num_restarts": 2,
    "raw_samples": 16,
}


def digest(path) -> str:
    """Hash of the database file and its write-ahead log."""
    h = hashlib.sha256(path.read_bytes())
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        h.update(wal.read_bytes())
    return h.hexdigest()


def answer_some(session: Session, n: int) -> None:
    for _ in range(n):
        query = session.ask()
        session.answer(query.id, min(range(query.q), key=lambda i: query.options[i][0]))


def raw_connection(session: Session) -> sqlite3.Connection:
    """The session's sqlite3 connection (``_conn`` in the store before the split)."""
    store = session.store
    return store.connection.sqlite if hasattr(store, "connection") else store._conn


def answer_in_between(session: Session, other: Session, prefix: str) -> None:
    """When ``session`` next runs a statement starting with ``prefix``, ``other`` first commits
    a new query and its answer (another process writing between two reads)."""
    done = []

    def trace(sql: str) -> None:
        if not done and sql.lstrip().startswith(prefix):
            done.append(True)
            other.answer(other.ask().id, 0)

    raw_connection(session).set_trace_callback(trace)


@pytest.fixture
def db(tmp_path):
    return tmp_path / "study.db"


@pytest.mark.parametrize("export", ["csv", "json", "history"])
def test_reads_are_one_snapshot_when_an_answer_lands_between_statements(tmp_path, db, export):
    """Before, the queries and the answers were read in separate statements: an answer
    committed in between made ``export_csv`` fail with ``KeyError`` and ``export_json`` write
    an answer whose query is missing."""
    with Session.create(db, "alice", PARAMS, **FAST) as s, Session.open(db, "alice") as other:
        answer_some(s, 2)
        answer_in_between(s, other, "SELECT a.id, a.query_id")
        out = tmp_path / f"out.{export}"
        if export == "csv":
            s.export_csv(out)
            rows = out.read_text().splitlines()[1:]
            assert len(rows) == 2 * 2
        elif export == "json":
            s.export_json(out)
            data = json.loads(out.read_text())
            assert {a["query_id"] for a in data["answers"]} <= {q["id"] for q in data["queries"]}
            assert len(data["answers"]) == 2
        else:
            assert len(s.history()) == 2
        raw_connection(s).set_trace_callback(None)
        assert len(s.history()) == 3  # the answer was committed, after the snapshot


def test_progress_and_list_are_one_snapshot(db):
    with Session.create(db, "alice", PARAMS, **FAST) as s, Session.open(db, "alice") as other:
        answer_some(s, 2)
        answer_in_between(s, other, "SELECT count(*) FROM queries")
        p = s.progress()
        assert (p.answered, p.queries, p.pending) == (2, 2, False)


def test_a_file_of_an_older_schema_is_refused_unchanged(db):
    """Files from before the first release (schema version 1) are not read, nor migrated."""
    with Session.create(db, "old", PARAMS, **FAST) as s:
        answer_some(s, 2)
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 1")
    con.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for call in (lambda: Session.open(db, "old"), lambda: Session.create(db, "new", PARAMS)):
        with pytest.raises(
            errors.SchemaVersionError, match="schema version 1, from before the first"
        ):
            call()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_reopening_rebuilds_the_model_without_refitting(db):
    with Session.create(db, "alice", PARAMS, **EUBO) as s:
        answer_some(s, 6)
        assert s.optimizer.n_refits == 3
    with Session.open(db, "alice") as s:
        query = s.ask()
        opt = s.optimizer
        assert opt.n_refits == 0  # the fit after answer 3 was loaded, answers 4..6 need none
        records = [(h.query.options, h.answer.winner) for h in s.history()][:6]
    direct = PreferenceOptimizer([[0.0, -2.0], [1.0, 3.0]], **EUBO, ties=True)
    direct.sync(records)
    assert direct.n_refits == 3
    assert query.options == tuple(tuple(x) for x in direct.ask().tolist())
    for name, value in direct.hyperparameters.values.items():
        assert value.tolist() == opt.hyperparameters.values[name].tolist(), name


def test_a_fit_from_before_an_undo_is_not_used(db):
    with Session.create(db, "alice", PARAMS, **EUBO | {"refit_all_until": 2}) as s:
        answer_some(s, 2)
        s.ask()  # stores the fit after 2 answers
        s.undo()
        s.answer(s.ask().id, 0)  # a different second answer
    with Session.open(db, "alice") as s:
        s.ask()
        opt = s.optimizer
        # the fit after answer 1 still holds; the one after answer 2 saw the undone answer
        assert opt.n_refits == 1
        records = [(h.query.options, h.answer.winner) for h in s.history(False)]
    settings = EUBO | {"refit_all_until": 2, "ties": True}
    direct = PreferenceOptimizer([[0.0, -2.0], [1.0, 3.0]], **settings)
    direct.sync(records)
    for name, value in direct.hyperparameters.values.items():
        assert value.tolist() == opt.hyperparameters.values[name].tolist(), name


def test_status_needs_no_model(db, monkeypatch):
    with Session.create(db, "alice", PARAMS, **FAST) as s:
        answer_some(s, 3)
        s.ask()
        expected = s.best()

    def no_model(*args: object) -> None:
        raise AssertionError("status built a model")

    monkeypatch.setattr(session_model.SessionModel, "sync", no_model)
    with Session.open(db, "alice") as s:
        stored, n_choices = s.stored_best()
        assert n_choices == 3 and stored.n_answers == 3
        assert same_recommendation(stored.recommendation, expected)
        assert s.progress().answered == 3 and s.pending() is not None


def test_queries_are_generated_without_the_write_lock(db, monkeypatch):
    """Another connection can write while a query is generated (before, the whole generation ran
    inside ``BEGIN IMMEDIATE``)."""
    generate = session_model.SessionModel.next_query
    free = []

    def probe(self, state):
        con = sqlite3.connect(db, timeout=0, isolation_level=None)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("ROLLBACK")
            free.append(True)
        except sqlite3.OperationalError:
            free.append(False)
        finally:
            con.close()
        return generate(self, state)

    with Session.create(db, "alice", PARAMS, **FAST) as s:
        monkeypatch.setattr(session_model.SessionModel, "next_query", probe)
        answer_some(s, 2)
    assert free == [True, True]


def test_a_query_is_regenerated_when_the_answers_change_meanwhile(db, monkeypatch):
    generate = session_model.SessionModel.next_query
    seen = []
    with Session.create(db, "alice", PARAMS, **FAST) as s, Session.open(db, "alice") as other:

        def interfere(self, state):
            seen.append(len(state.answers))
            if len(seen) == 1:
                other.import_comparisons([{"options": [[0.1, 0.0], [0.9, 1.0]], "winner": 0}])
            return generate(self, state)

        monkeypatch.setattr(session_model.SessionModel, "next_query", interfere)
        query = s.ask()
    assert seen == [0, 1]
    assert query.number == 2
    with Session.open(db, "alice") as s:
        assert len(s.queries()) == 2


def test_processes_asking_at_once_get_the_same_query(db, monkeypatch):
    generate = session_model.SessionModel.next_query
    with Session.create(db, "alice", PARAMS, **FAST) as s, Session.open(db, "alice") as other:
        theirs = []

        def race(self, state):
            if not theirs:
                monkeypatch.setattr(session_model.SessionModel, "next_query", generate)
                theirs.append(other.ask())  # stored while this one was generating
            return generate(self, state)

        monkeypatch.setattr(session_model.SessionModel, "next_query", race)
        mine = s.ask()
        assert mine.id == theirs[0].id and mine.times_shown == 2
        assert len(s.queries()) == 1


def test_rejected_calls_leave_the_file_unchanged(tmp_path, db):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"options": [[0.1, 0.0], [0.2, 0.0]], "winner": 0}, {"options": 1}]')
    with Session.create(db, "alice", PARAMS, **FAST) as s:
        query = s.ask()
        s.close()
        before = digest(db)
        with Session.open(db, "alice") as s:
            calls = [
                (lambda: s.answer(query.id, 2), errors.InvalidAnswerError),
                (lambda: s.answer(query.id, ranking=[1, 1]), errors.InvalidAnswerError),
                (lambda: s.answer(query.id, winner=0, tie=True), errors.InvalidAnswerError),
                (lambda: s.answer(query.id + 1, 0), errors.QueryNotPendingError),
                (lambda: s.undo(), errors.SessionError),
                (lambda: s.import_comparisons(bad), errors.ImportFormatError),
                (lambda: s.export(tmp_path / "x.txt"), errors.SessionError),
                (lambda: Session.create(db, "alice", PARAMS), errors.SessionExistsError),
                (lambda: Session.create(db, "bob", PARAMS, strategy="nope"), errors.SessionError),
            ]
            for call, error in calls:
                with pytest.raises(error):
                    call()
        assert digest(db) == before


def test_a_tie_about_three_options_is_recorded(db):
    with Session.create(db, "q3", PARAMS, "random", q=3, seed=0) as s:
        s.answer(s.ask().id, tie=True)
        with pytest.raises(errors.InvalidAnswerError, match="no winner or ranking"):
            s.answer(s.ask().id, winner=0, tie=True)
        assert [h.answer.kind for h in s.history()] == ["tie"]
        assert s.optimizer.model is None


def test_creation_waits_for_a_file_locked_at_the_wal_switch(db):
    """``PRAGMA journal_mode = WAL`` gets "database is locked" at once while another
    connection holds the write lock of a new file (SQLite's busy handler is not called there);
    before, creation failed at once with a message saying the file "stayed locked"."""
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.5, lambda: holder.execute("ROLLBACK"))
    release.start()
    try:
        with Session.create(db, "alice", PARAMS, timeout=30.0, **FAST) as s:
            assert s.progress().queries == 0
    finally:
        release.join()
        holder.close()
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
