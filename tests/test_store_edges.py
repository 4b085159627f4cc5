"""Edges of the session store's connection: lock waits that are honoured, failed commits."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from botorch_pref.sessions import (
    SCHEMA_VERSION,
    CorruptDatabaseError,
    DatabaseBusyError,
    QueryNotPendingError,
    SchemaVersionError,
    Session,
)
from botorch_pref.sessions.store import Store

from .helpers import SESSION_FAST, SESSION_PARAMS

PARAMS, FAST = SESSION_PARAMS, SESSION_FAST


def _exclusive_holder(path) -> sqlite3.Connection:
    """A connection that keeps every other connection from reading the file (WAL included)."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE sessions SET budget = budget")
    return holder


@pytest.mark.parametrize("timeout", [float("inf"), 1e7])
def test_a_long_timeout_waits_for_a_lock_inside_a_read(tmp_path, timeout):
    # SQLite's own wait takes milliseconds as a C int: a timeout past ~24.8 days (inf
    # included) used to turn it off, so a read inside a transaction failed at once
    path = tmp_path / "study.db"
    Session.create(path, "alice", PARAMS, **FAST).close()
    result: list[object] = []
    holder = _exclusive_holder(path)  # before the store: in WAL mode it needs the file alone

    def read() -> None:
        try:
            with Store(path, timeout=timeout) as store:
                result.append(store.state(store.get_session("alice")).version)
        except Exception as err:  # what the test reports
            result.append(err)

    reader = threading.Thread(target=read)
    try:
        reader.start()
        reader.join(0.3)
        assert reader.is_alive(), f"gave up at once: {result}"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        reader.join(10)
    assert result == [(0, 0)]


def test_busy_timeout_of_an_unbounded_wait_is_set(tmp_path):
    path = tmp_path / "study.db"
    with Store(path, create=True, timeout=float("inf")) as store:
        assert store.connection.value("PRAGMA busy_timeout") == 2**31 - 1
    with Store(path, timeout=2.5) as store:
        assert store.connection.value("PRAGMA busy_timeout") == 2500


def _rollback_journal_copy(tmp_path) -> tuple[object, int]:
    """A session database restored from ``VACUUM INTO`` (rollback journal), with a query."""
    live = tmp_path / "live.db"
    with Session.create(live, "alice", PARAMS, **FAST) as s:
        query_id = s.ask().id
    path = tmp_path / "restored.db"
    con = sqlite3.connect(live)
    con.execute("VACUUM INTO ?", (str(path),))
    con.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    check.close()
    return path, query_id


def test_a_commit_refused_as_busy_records_nothing_and_can_be_retried(tmp_path):
    # in rollback-journal mode a reader keeps a writer from committing: the COMMIT failed
    # with "nothing was changed, try again" but left its transaction open, so the retry saw
    # its own uncommitted answer ("already answered") and the answer was lost on close
    path, query_id = _rollback_journal_copy(tmp_path)
    with Session.open(path, "alice", timeout=0.05) as s:
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM answers").fetchall()
        try:
            with pytest.raises(DatabaseBusyError, match="nothing was changed"):
                s.answer(query_id, 0)
            assert not s.store.connection.sqlite.in_transaction
        finally:
            reader.execute("COMMIT")
            reader.close()
        s.answer(query_id, 1)
        with pytest.raises(QueryNotPendingError, match="already answered"):
            s.answer(query_id, 0)
    with Session.open(path, "alice") as again:
        assert [h.answer.winner for h in again.history()] == [1]


def _with_user_version(path, version: int, *statements: str) -> None:
    con = sqlite3.connect(path)
    for statement in statements:
        con.execute(statement)
    con.execute(f"PRAGMA user_version = {version}")
    con.commit()
    con.close()


def test_another_programs_file_with_a_user_version_is_not_called_newer(tmp_path):
    # many programs number their own schema in user_version: "upgrade botorch-pref" was wrong
    other = tmp_path / "notes.db"
    _with_user_version(other, 7, "CREATE TABLE notes (a)")
    before = other.read_bytes()
    for call in (lambda: Session.open(other, "a"), lambda: Session.create(other, "a", PARAMS)):
        with pytest.raises(CorruptDatabaseError, match="not a botorch-pref session database"):
            call()
    assert other.read_bytes() == before


def test_a_session_file_with_a_negative_version_is_refused_not_a_traceback(tmp_path):
    path = tmp_path / "study.db"
    Session.create(path, "alice", PARAMS, **FAST).close()
    _with_user_version(path, -1)
    with pytest.raises(CorruptDatabaseError, match="not a botorch-pref session database"):
        Session.open(path, "alice")  # used to be KeyError: 0 (no migration from version 0)
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone() == (-1,)  # unchanged
    con.close()


def test_a_newer_session_file_is_still_called_newer(tmp_path):
    path = tmp_path / "study.db"
    Session.create(path, "alice", PARAMS, **FAST).close()
    _with_user_version(path, SCHEMA_VERSION + 1)
    with pytest.raises(SchemaVersionError, match="Upgrade botorch-pref"):
        Session.open(path, "alice")
