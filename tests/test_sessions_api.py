"""Session API: queries, answers, undo, resume, export/import, and bad input at every entry."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import datetime

import numpy as np
import pytest
import torch

from botorch_pref.likelihoods import ObservationKind
from botorch_pref.loop import Answer, PreferenceOptimizer
from botorch_pref.sessions import (
    SCHEMA_VERSION,
    CorruptDatabaseError,
    DatabaseBusyError,
    ImportFormatError,
    InvalidAnswerError,
    QueryNotPendingError,
    SchemaVersionError,
    Session,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
)
from botorch_pref.sessions.export import EXPORT_FORMAT

from .helpers import SESSION_FAST, SESSION_PARAMS, snapshot

PARAMS, FAST = SESSION_PARAMS, SESSION_FAST


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def prefer_low_x(query) -> int:
    return min(range(query.q), key=lambda i: query.options[i][0])


@pytest.fixture
def db(tmp_path):
    return tmp_path / "study.db"


@pytest.fixture
def session(db):
    with Session.create(db, "alice", PARAMS, **FAST) as s:
        yield s


def answer_some(s: Session, n: int) -> None:
    for _ in range(n):
        query = s.ask()
        s.answer(query.id, prefer_low_x(query))


def test_create_records_the_problem(db):
    with Session.create(db, "p1", {"x": (0, 1), "y": (-2, 3)}, "eubo", seed=7, budget=9) as s:
        assert s.parameters == PARAMS
        assert (s.strategy, s.q, s.seed, s.budget) == ("eubo", 2, 7, 9)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    row = con.execute("SELECT parameters, strategy, q, seed, package_version FROM sessions")
    params, strategy, q, seed, version = row.fetchone()
    con.close()
    assert json.loads(params) == [list(p) for p in PARAMS]
    assert (strategy, q, seed) == ("eubo", 2, 7)
    from botorch_pref import __version__

    assert version == __version__


def test_ask_returns_the_pending_query_until_answered(session):
    q1 = session.ask()
    q2 = session.ask()
    assert (q1.id, q1.options) == (q2.id, q2.options)
    assert q2.times_shown == 2
    assert session.pending() == q2
    for x in q1.options:
        assert 0.0 <= x[0] <= 1.0 and -2.0 <= x[1] <= 3.0
    stored = session.answer(q1.id, winner=1)
    assert stored.answer == Answer("winner", 1) and stored.query_id == q1.id
    assert session.pending() is None
    assert session.ask().id != q1.id


def test_timestamps_and_response_time(session):
    query = session.ask()
    answer = session.answer(query.id, 0)
    shown = datetime.fromisoformat(query.shown_at)
    answered = datetime.fromisoformat(answer.answered_at)
    assert shown.utcoffset().total_seconds() == 0
    assert answer.response_s == pytest.approx((answered - shown).total_seconds())
    assert answer.response_s >= 0


def test_resume_shows_the_same_pending_query_and_the_same_model(db, session):
    answer_some(session, 6)
    pending = session.ask()
    before = session.optimizer
    with Session.open(db, "alice") as again:
        assert again.ask().id == pending.id
        assert again.ask().options == pending.options
        after = again.optimizer
    assert torch.equal(before.comparisons, after.comparisons)
    assert torch.equal(before.datapoints, after.datapoints)
    X = torch.rand(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(before.predict(X)[0], after.predict(X)[0])


def test_model_equals_a_direct_replay_of_the_answers(db):
    with Session.create(db, "eubo", PARAMS, "eubo", seed=5, n_initial=2) as s:
        answer_some(s, 4)
        query = s.ask()
        s.answer(query.id, ranking=[1, 0])
        records = [
            (torch.tensor(h.query.options, dtype=torch.float64), h.answer.winner)
            for h in s.history()
        ]
        direct = PreferenceOptimizer.replay(records, s.bounds, **s.settings)
        rebuilt = s.optimizer
        assert torch.equal(direct.comparisons, rebuilt.comparisons)
        X = torch.tensor([[0.2, 0.0], [0.7, 2.0]], dtype=torch.float64)
        torch.testing.assert_close(direct.predict(X)[0], rebuilt.predict(X)[0])
        assert torch.equal(direct.ask(), torch.tensor(s.ask().options, dtype=torch.float64))


def test_skip_is_recorded_and_tie_is_modelled(session):
    assert session.settings["ties"] is True  # the default for new pair sessions
    answer_some(session, 2)
    skipped = session.ask()
    session.answer(skipped.id, skip=True)
    tied = session.ask()
    session.answer(tied.id, tie=True)
    assert tied.options != skipped.options, "a skipped query was proposed again"
    assert session.ask().options not in (skipped.options, tied.options)
    kinds = [h.answer.kind for h in session.history()]
    assert kinds == ["winner", "winner", "skip", "tie"]
    data = session.optimizer.preference_data
    assert data.kind.tolist() == [0, 0, int(ObservationKind.TIE)]
    assert session.optimizer.history[-1].tie
    p = session.progress()
    assert (p.answered, p.choices, p.skips, p.ties) == (4, 2, 1, 1)


def test_sessions_without_ties_record_but_do_not_model_them(db):
    with Session.create(db, "noties", PARAMS, "random", seed=0, ties=False) as s:
        answer_some(s, 2)
        s.answer(s.ask().id, tie=True)
        assert s.optimizer.comparisons.shape[0] == 2
        assert s.progress().ties == 1


def test_ranking_for_three_options(db):
    with Session.create(db, "q3", PARAMS, "random", q=3, seed=0) as s:
        query = s.ask()
        s.answer(query.id, ranking=[2, 0, 1])
        assert s.history()[0].answer.ranking == (2, 0, 1)
        # a ranking of three options is one Plackett-Luce observation, not two pairs
        data = s.optimizer.preference_data
        assert data.kind.tolist() == [int(ObservationKind.RANKING)]
        assert data.options.tolist() == [[2, 0, 1]]
        with pytest.raises(InvalidAnswerError, match="permutation"):
            s.answer(s.ask().id, ranking=[0, 0, 1])


def test_undo_is_a_retraction_and_reopens_the_query(session):
    answer_some(session, 3)
    pending = session.ask()
    last = session.history()[-1]
    undone = session.undo()
    assert undone.id == last.stored.id and undone.retracted_at is not None
    assert session.ask().id == last.query.id
    with pytest.raises(QueryNotPendingError, match="withdrawn"):
        session.answer(pending.id, 0)
    assert session.optimizer.comparisons.shape[0] == 2
    session.answer(last.query.id, 1 - last.answer.winner)
    history = session.history()
    assert len(history) == 4 and history[2].stored.retracted_at is not None
    assert [h.stored.retracted_at is None for h in history] == [True, True, False, True]
    assert session.history(include_retracted=False)[-1].answer.winner == 1 - last.answer.winner
    assert session.progress().retracted == 1
    con = sqlite3.connect(session.path)
    assert con.execute("SELECT count(*) FROM answers").fetchone()[0] == 4
    con.close()


def test_pending_reads_the_same_query_as_the_full_state(session):
    # pending() reads one query; it must be exactly the one the whole snapshot calls pending,
    # through asking, answering, skipping and undoing (which withdraws and reopens queries).
    def check() -> None:
        assert session.pending() == session.state().pending

    check()
    assert session.pending() is None
    for step in range(6):
        query = session.ask()
        check()
        assert session.pending() == query
        if step == 2:
            session.answer(query.id, skip=True)
        else:
            session.answer(query.id, step % 2)
        check()
        if step in (3, 4):
            session.undo()
            check()
            assert session.pending() is not None


def test_undo_twice_and_nothing_to_undo(session):
    with pytest.raises(SessionError, match="Nothing to undo"):
        session.undo()
    answer_some(session, 2)
    session.undo()
    session.undo()
    assert session.ask().number == 1
    assert session.optimizer.model is None
    with pytest.raises(SessionError, match="Nothing to undo"):
        session.undo()


def test_best_is_the_top_compared_design(session):
    assert session.best() is None
    answer_some(session, 8)
    best = session.best()
    opt = session.optimizer
    rec = opt.best()
    assert torch.equal(best.x, rec.x) and best.x.dtype == torch.float64
    assert best.mean == rec.mean


def test_answer_errors_record_nothing(session):
    query = session.ask()
    before = snapshot(session.path)
    for kwargs, match in [
        ({"winner": 2}, "winner must lie"),
        ({"winner": -1}, "winner must lie"),
        ({"winner": True}, "integer"),
        ({"winner": 1.0}, "integer"),
        ({}, "exactly one"),
        ({"winner": 0, "skip": True}, "exactly one"),
        ({"ranking": [0, 2]}, "permutation"),
        ({"ranking": "ab"}, "sequence"),
    ]:
        with pytest.raises(InvalidAnswerError, match=match):
            session.answer(query.id, **kwargs)
    with pytest.raises(QueryNotPendingError, match="does not belong"):
        session.answer(query.id + 100, 0)
    with pytest.raises(QueryNotPendingError, match="integer"):
        session.answer("1", 0)
    for beyond in (2**63, -(2**63) - 1):  # ids SQLite cannot hold
        with pytest.raises(QueryNotPendingError, match=f"No query has the id {beyond}"):
            session.answer(beyond, 0)
    assert snapshot(session.path)[3] == before[3]
    session.answer(query.id, 0)
    with pytest.raises(QueryNotPendingError, match="already answered"):
        session.answer(query.id, 1)
    assert len(session.history()) == 1


def test_two_connections_race_for_one_query(db, session):
    with Session.open(db, "alice") as other:
        mine, theirs = session.ask(), other.ask()
        assert mine.id == theirs.id
        other.answer(theirs.id, 1)
        with pytest.raises(QueryNotPendingError, match="already answered"):
            session.answer(mine.id, 0)
        assert [h.answer.winner for h in session.history()] == [1]
        assert session.ask().id == other.ask().id


def test_a_held_write_lock_gives_a_clear_busy_error(db, session):
    query = session.ask()
    with Session.open(db, "alice", timeout=0.2) as impatient:
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(DatabaseBusyError, match="locked"):
                impatient.answer(query.id, 0)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        impatient.answer(query.id, 0)
    assert len(session.history()) == 1


def test_session_names_and_list(db, session):
    with pytest.raises(SessionExistsError, match="already exists"):
        Session.create(db, "alice", PARAMS)
    Session.create(db, "bob", PARAMS, "eubo", seed=1, budget=3).close()
    answer_some(session, 2)
    summaries = Session.list(db)
    assert [m.name for m in summaries] == ["alice", "bob"]
    assert summaries[0].progress.answered == 2 and summaries[1].progress.budget == 3
    before = digest(db)
    with pytest.raises(SessionNotFoundError, match=r"'carol'.*'alice', 'bob'"):
        Session.open(db, "carol")
    assert digest(db) == before


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"parameters": []}, "at least one parameter"),
        ({"parameters": [("x", 1.0, 0.0)]}, "low < high"),
        ({"parameters": [("x", 0, 1), ("x", 0, 2)]}, "repeat"),
        ({"parameters": [("kind", 0, 1)]}, "column of the CSV"),
        ({"parameters": [("x", 0, float("nan"))]}, "finite"),
        ({"parameters": [("x", 0)]}, "name, low, high"),
        ({"strategy": "nope"}, "strategy must be one of"),
        ({"strategy": "eubo", "q": 3}, "pairs"),
        ({"budget": 0}, "budget"),
        ({"budget": 2**63}, "budget must be at most"),
        ({"seed": 2**63}, "seed must be at most"),
        ({"refit_every": 0}, "positive"),
        ({"acqf": "x"}, "Unknown optimiser settings"),
        ({"name": ""}, "session name"),
    ],
)
def test_bad_creation_changes_nothing(db, session, kwargs, match):
    args = {"name": "new", "parameters": PARAMS, **kwargs}
    before = snapshot(db)
    with pytest.raises(SessionError, match=match):
        Session.create(db, **args)
    assert snapshot(db) == before


def test_numpy_integers_are_stored_as_integers(db):
    session = Session.create(
        db, "numpy", PARAMS, budget=np.int64(5), seed=np.int64(3), n_initial=np.int64(2)
    )
    again = Session.open(db, "numpy")
    assert again.budget == 5 and again.seed == 3 and again.settings["n_initial"] == 2
    assert session.ask() is not None


def test_missing_file_is_not_created(tmp_path):
    path = tmp_path / "none.db"
    with pytest.raises(SessionNotFoundError, match="No session database"):
        Session.open(path, "alice")
    with pytest.raises(SessionNotFoundError):
        Session.list(path)
    assert not path.exists()


def test_newer_schema_is_refused_and_unchanged(db, session):
    answer_some(session, 2)
    session.close()
    con = sqlite3.connect(db)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    before = digest(db)
    for call in (
        lambda: Session.open(db, "alice"),
        lambda: Session.create(db, "bob", PARAMS),
        lambda: Session.list(db),
    ):
        newer = rf"version {SCHEMA_VERSION + 1}; .* reads version {SCHEMA_VERSION} at most"
        with pytest.raises(SchemaVersionError, match=newer):
            call()
    assert digest(db) == before


def test_corrupted_file_is_refused_and_unchanged(db, session):
    answer_some(session, 3)
    session.close()
    data = bytearray(db.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)
    db.write_bytes(bytes(data))
    before = digest(db)
    with pytest.raises(CorruptDatabaseError, match="not changed"):
        Session.open(db, "alice")
    assert digest(db) == before


def test_garbage_and_foreign_files_are_refused(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("this is not a database\n" * 50)
    before = digest(junk)
    for call in (lambda: Session.open(junk, "a"), lambda: Session.create(junk, "a", PARAMS)):
        with pytest.raises(CorruptDatabaseError, match="not a readable session database"):
            call()
    assert digest(junk) == before
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    before = digest(other)
    with pytest.raises(CorruptDatabaseError, match="not a botorch-pref session database"):
        Session.create(other, "a", PARAMS)
    assert digest(other) == before


def test_export_json_and_csv_round_trip(tmp_path, db, session):
    answer_some(session, 3)
    session.answer(session.ask().id, skip=True)
    session.answer(session.ask().id, tie=True)
    session.ask()
    session.undo()
    session.export(tmp_path / "a.json")
    session.export(tmp_path / "a.csv")
    data = json.loads((tmp_path / "a.json").read_text())
    assert data["format"] == "botorch-pref-session" and data["parameter_names"] == ["x", "y"]
    assert [a["kind"] for a in data["answers"]] == ["winner"] * 3 + ["skip", "tie"]
    assert data["answers"][-1]["retracted_at"] is not None
    assert [q["status"] for q in data["queries"]][-2:] == ["pending", "withdrawn"]
    lines = (tmp_path / "a.csv").read_text().splitlines()
    assert lines[0].endswith("retracted_at,option,rating,x,y")
    assert len(lines) == 1 + 2 * 5
    with Session.create(db, "copy_json", PARAMS, **FAST) as c1:
        assert c1.import_comparisons(tmp_path / "a.json") == 4
        from_json = [(h.query.options, h.answer.kind, h.answer.winner) for h in c1.history()]
        assert c1.pending() is None
    with Session.create(db, "copy_csv", PARAMS, **FAST) as c2:
        assert c2.import_comparisons(tmp_path / "a.csv") == 4
        from_csv = [(h.query.options, h.answer.kind, h.answer.winner) for h in c2.history()]
        assert torch.equal(c2.optimizer.comparisons, session.optimizer.comparisons)
    original = [
        (h.query.options, h.answer.kind, h.answer.winner)
        for h in session.history(include_retracted=False)
    ]
    assert from_json == from_csv == original


def test_import_plain_records_then_continue(session):
    n = session.import_comparisons(
        [
            {"options": [[0.1, 0.0], [0.9, 1.0]], "winner": 0},
            {"options": [{"x": 0.5, "y": 2.0}, {"y": -1.0, "x": 0.2}], "ranking": [1, 0]},
            {"options": [[0.3, 0.3], [0.4, 0.4], [0.6, 0.6]], "kind": "tie"},
        ]
    )
    assert n == 3
    assert session.progress().imported == 3 and session.progress().answered == 0
    assert session.optimizer.comparisons.tolist() == [[0, 1], [3, 2]]
    query = session.ask()
    assert query.source == "ask" and query.number == 4
    session.answer(query.id, 0)
    session.undo()
    with pytest.raises(SessionError, match="Nothing to undo"):
        session.undo()
    assert session.progress().imported == 3


WINNER_AND_RANKING = json.dumps(
    [{"options": [[0.1, 0], [0.2, 0]], "kind": "winner", "winner": 1, "ranking": [0, 1]}]
)
_EXPORT = {"format": EXPORT_FORMAT, "parameter_names": ["x", "y"], "answers": []}
_QUERY = {"id": 1, "options": [[0.1, 0], [0.2, 0]]}
EXPORT_WITH_BAD_NAMES = json.dumps({**_EXPORT, "parameter_names": [["x"], "y"], "queries": []})
EXPORT_WITH_A_LIST_ID = json.dumps(
    {**_EXPORT, "queries": [_QUERY], "answers": [{"query_id": [1], "kind": "winner", "winner": 0}]}
)


@pytest.mark.parametrize(
    ("content", "suffix", "match"),
    [
        ("{not json", ".json", "not valid JSON"),
        ('{"a": 1}', ".json", "Expected a list"),
        ("[]", ".json", "No comparisons"),
        ('[{"options": [[0.1, 0.0]], "winner": 0}]', ".json", "at least two"),
        ('[{"options": [[0.1, 0.0], [0.2, 9.0]], "winner": 0}]', ".json", "outside"),
        ('[{"options": [[0.1, 0.0], [0.1, 0.0]], "winner": 0}]', ".json", "distinct"),
        ('[{"options": [[0.1, 0.0], [0.2, 0.0]], "winner": 2}]', ".json", "winner must lie"),
        ('[{"options": [[0.1, 0.0], [0.2, 0.0]]}]', ".json", "no answer"),
        ('[{"options": [[0.1, 0.0], [0.2, "a"]], "winner": 1}]', ".json", "not a number"),
        ('[{"options": [{"x": 0.1}, {"x": 0.2}], "winner": 1}]', ".json", "parameters"),
        ('[{"options": [[0.1, 0.0], [0.2, 0.0]], "kind": "maybe"}]', ".json", "unknown kind"),
        ('[{"options": [[0.1, 0], [0.2, 0]], "winner": 0, "answered_at": "x"}]', ".json", "ISO"),
        (
            '[{"options": [[1' + "0" * 400 + ', 0], [0.2, 0]], "winner": 0}]',
            ".json",
            "not a number",
        ),
        ('[{"options": [[0.1, 0], [0.2, 0]], "kind": "skip", "winner": 1}]', ".json", "takes no"),
        ('[{"options": [[0.1, 0], [0.2, 0]], "kind": "tie", "ranking": [1, 0]}]', ".json", "no"),
        (WINNER_AND_RANKING, ".json", "takes no ranking"),
        (EXPORT_WITH_BAD_NAMES, ".json", "Malformed"),
        (EXPORT_WITH_A_LIST_ID, ".json", "query_id"),
        ("query_id,option,x\n1,0,0.1\n", ".csv", "lacks the columns"),
        ("query_id,option,x,y\n1,0,0.1,0\n", ".csv", "winner"),
        ("query_id,option,x,y,winner\n1,0,0.1,0,0\n1,1,0.2,0,1\n", ".csv", "differs"),
        ("query_id,option,x,y,winner\n1,0,0.1,0,0\n1,2,0.2,0,0\n", ".csv", "numbered"),
        ("query_id,option,x,y,winner\n1,0,0.1,0,0\n1,1,0.2\n", ".csv", "number of fields"),
        ("query_id,option,x,y,winner\n1,0,0.1,0,z\n1,1,0.2,0,z\n", ".csv", "not an integer"),
        ("a,b\n", ".txt", "format"),
    ],
)
def test_malformed_import_files_import_nothing(tmp_path, session, content, suffix, match):
    answer_some(session, 1)
    path = tmp_path / f"in{suffix}"
    path.write_text(content)
    before = snapshot(session.path)
    with pytest.raises(ImportFormatError, match=match):
        session.import_comparisons(path)
    assert snapshot(session.path) == before


def test_a_csv_with_blank_answer_ids_is_grouped_by_query(tmp_path, session):
    path = tmp_path / "in.csv"
    path.write_text(
        "answer_id,query_id,option,x,y,winner\n"
        ",1,0,0.1,0,0\n,1,1,0.2,0,0\n,2,0,0.3,0,1\n,2,1,0.4,0,1\n"
    )
    assert session.import_comparisons(path) == 2


def test_import_from_a_missing_file(tmp_path, session):
    with pytest.raises(FileNotFoundError):
        session.import_comparisons(tmp_path / "nope.json")


def test_a_session_keeps_its_kernel_when_the_default_changes(tmp_path):
    """A new session stores the kernel and query settings it resolved, so a later change of a
    default never changes the model of a stored session: it resumes with what it stored."""
    from botorch_pref.loop.config import DEFAULT_KERNEL
    from botorch_pref.loop.policy import DEFAULT_LOCAL_EVERY, DEFAULT_LOOKAHEAD_EVERY

    path = tmp_path / "s.db"
    eubo = {**FAST, "strategy": "eubo"}
    Session.create(path, "new", PARAMS, **eubo).close()
    chosen = {"kernel": "rbf", "local_every": 3, "lookahead_every": 2}
    Session.create(path, "chosen", PARAMS, **chosen, **eubo).close()
    con = sqlite3.connect(path)
    stored = {
        name: json.loads(options)
        for name, options in con.execute("SELECT name, options FROM sessions").fetchall()
    }
    con.close()
    for name, kernel, every, lookahead in (
        ("new", DEFAULT_KERNEL, DEFAULT_LOCAL_EVERY, DEFAULT_LOOKAHEAD_EVERY),
        ("chosen", "rbf", 3, 2),
    ):
        resolved = {"kernel": kernel, "local_every": every, "local_when": "edge"}
        # sessions model "no preference" answers by default, on the Laplace approximation
        resolved.update(lookahead_every=lookahead, inference="laplace")
        assert resolved.items() <= stored[name].items()
        with Session.open(path, name) as s:
            assert resolved.items() <= s.settings.items()
            assert len(s.ask().options) == 2
    s = Session.create(path, "ep", PARAMS, **eubo, ties=False, inference="ep")
    s.answer(s.ask().id, winner=0)
    s.close()
    with Session.open(path, "ep") as s:
        assert s.settings["inference"] == "ep"
        s.answer(s.ask().id, winner=1)
        assert s.optimizer.model.inference == "ep"


def test_a_session_on_ep_models_no_preference_answers(db):
    # EP's sites cover ties (the ordinal probit): a session that accepts ties can use it, and
    # its recommendation stays finite after a tie.
    with Session.create(db, "ep-ties", PARAMS, **{**FAST, "strategy": "eubo"}, inference="ep") as s:
        assert s.settings["ties"] is True and s.settings["inference"] == "ep"
        s.answer(s.ask().id, tie=True)
        s.answer(s.ask().id, winner=0)
    with Session.open(db, "ep-ties") as s:
        s.answer(s.ask().id, tie=True)
        model = s.optimizer.model
        assert model.inference == "ep" and model.likelihood.has_ties
        assert s.progress().ties == 2
        assert torch.isfinite(model.posterior(model.datapoints).mean).all()


# ------------------------------------------------ imports of every export form; flags and settings
def stored(s: Session) -> list[tuple]:
    """The standing answers with their options, as an import reproduces them."""
    return [
        (h.query.options, h.answer, h.stored.answered_at)
        for h in s.history(include_retracted=False)
    ]


def test_the_dict_export_of_a_session_imports_like_its_file(db, session):
    query = session.ask()
    session.answer(query.id, 1)
    session.answer(session.ask().id, tie=True)
    with Session.create(db, "copy", PARAMS, **FAST) as copy:
        assert copy.import_comparisons(session.to_dict()) == 2
        assert stored(copy) == stored(session)
    with Session.create(db, "plain", PARAMS, **FAST) as plain:
        records = {"comparisons": [{"options": [[0.1, 0.0], [0.2, 0.0]], "winner": 0}]}
        assert plain.import_comparisons(records) == 1


def test_options_given_as_tuples_import_like_lists(db, session):
    query = session.ask()
    session.answer(query.id, 0)
    n = session.import_comparisons([{"options": query.options, "winner": 1}])
    assert n == 1
    imported = session.history()[-1]
    assert imported.query.options == query.options and imported.answer.winner == 1
    with pytest.raises(ImportFormatError, match="at least two designs"):
        session.import_comparisons([{"options": ((0.1, 0.0),), "winner": 0}])
    with pytest.raises(ImportFormatError, match="at least two designs"):
        session.import_comparisons([{"options": "ab", "winner": 0}])


def test_the_csv_export_of_a_session_without_answers_says_so(tmp_path, db, session):
    path = tmp_path / "empty.csv"
    session.export(path)
    with Session.create(db, "copy", PARAMS, **FAST) as copy:
        before = snapshot(db)
        with pytest.raises(ImportFormatError, match="No comparisons to import"):
            copy.import_comparisons(path)
        assert snapshot(db) == before


@pytest.mark.parametrize("bounds", ["05", b"05", "0 5"])
def test_bounds_given_as_text_are_refused(db, bounds):
    with pytest.raises(SessionError, match="bounds must be"):
        Session.create(db, "text", {"x": bounds}, **FAST)
    assert not db.exists()


@pytest.mark.parametrize("timeout", ["5", None, float("nan"), -1.0, True])
def test_a_bad_timeout_is_named(db, session, timeout):
    before = snapshot(db)
    with pytest.raises(SessionError, match="timeout must be"):
        Session.open(db, "alice", timeout=timeout)
    with pytest.raises(SessionError, match="timeout must be"):
        Session.create(db, "bob", PARAMS, timeout=timeout, **FAST)
    assert snapshot(db) == before
    fresh = db.with_name("fresh.db")
    with pytest.raises(SessionError, match="timeout must be"):
        Session.create(fresh, "bob", PARAMS, timeout=timeout, **FAST)
    assert not fresh.exists()


def test_an_unbounded_timeout_is_accepted(db, session):
    with Session.open(db, "alice", timeout=float("inf")) as again:
        assert again.progress().answered == 0


@pytest.mark.parametrize(("flag", "value"), [("skip", "False"), ("tie", "no"), ("skip", [])])
def test_a_skip_or_tie_that_is_not_a_flag_records_nothing(db, session, flag, value):
    query = session.ask()
    before = snapshot(db)
    with pytest.raises(InvalidAnswerError, match=f"{flag} must be True or False"):
        session.answer(query.id, **{flag: value})
    with pytest.raises(InvalidAnswerError, match=f"{flag} must be True or False"):
        session.answer(query.id, 0, **{flag: value})
    assert snapshot(db) == before
    assert session.pending() == query


def test_flags_given_as_numpy_booleans_are_answers(session):
    query = session.ask()
    assert session.answer(query.id, tie=np.bool_(True), skip=np.bool_(False)).answer.kind == "tie"
    assert session.answer(session.ask().id, 1, skip=None, tie=0).answer.kind == "winner"


@pytest.mark.parametrize("name", ["alice ", " alice", "\talice"])
def test_a_session_name_with_spaces_at_its_ends_is_refused(db, name):
    """Such a name is awkward to open again from a shell, where spaces are trimmed."""
    with pytest.raises(SessionError, match="without spaces at its ends"):
        Session.create(db, name, PARAMS, **FAST)
    assert not db.exists()


def test_a_csv_that_repeats_a_column_is_refused(tmp_path, db, session):
    """csv.DictReader would keep the last of two 'x' columns: the import would change a value."""
    path = tmp_path / "twice.csv"
    path.write_text("query_id,option,x,y,x,winner\n1,0,0.1,0.0,0.9,0\n1,1,0.2,0.0,0.8,0\n")
    before = snapshot(db)
    with pytest.raises(ImportFormatError, match=r"repeats the columns \['x'\]"):
        session.import_comparisons(path)
    assert snapshot(db) == before
