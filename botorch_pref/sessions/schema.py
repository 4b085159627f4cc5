"""The tables of a session database, its version, and the set-up of a file.

One database file holds any number of named sessions:

``sessions``
    One row per session: its name, the parameters (names and bounds in the user's units, JSON),
    the strategy, ``q``, the seed, the other optimiser settings (JSON), an optional budget of
    answers, the package version that created it and the creation time.
``queries``
    Every query, in order (``number`` counts from 1 within a session): where it came from
    (``ask``, or ``import`` for comparisons collected elsewhere), when it was created, first and
    last shown and how often, and when it was withdrawn (a query that was pending when the answer
    before it was undone).
``designs``
    Every option of every query: ``(query_id, option, x)`` with ``x`` the JSON list of parameter
    values in the user's units.
``answers``
    Every answer: ``winner`` (index of the preferred option), ``ranking`` (JSON list, best first),
    ``skip``, ``tie`` (no preference) or ``rating`` (ratings alone), the winner's ``strength`` on
    a graded scale (1 "slightly" .. ``levels // 2`` "much"), the ``ratings`` of the options (JSON
    list, one level per option, in the query's order), the time it was given, the time its query
    was last shown and the response time in seconds.
``retractions``
    Undone answers: ``(answer_id, retracted_at)``. Nothing is ever deleted.
``fits``
    Fitted hyperparameters (the loop's ``Hyperparameters.to_dict()``, JSON) with the number of
    choices they were fitted to and the id of the last of them, so a reopened session rebuilds
    its model without refitting.
``recommendations``
    The recommended design (JSON) stored when a query is generated, with the choices it was
    computed from, so ``status`` shows it without a model.

``PRAGMA user_version`` holds :data:`SCHEMA_VERSION`. :func:`prepare` checks a file in one read
transaction before anything is written, and creates the schema in an empty one (idempotently,
under ``BEGIN IMMEDIATE``, so processes creating sessions in a fresh file at once all succeed).
A file of another version is refused unchanged: a newer one names the upgrade, an older one
(written before the first release) is not read.
"""

from __future__ import annotations

from botorch_pref.sessions.connection import Connection
from botorch_pref.sessions.errors import CorruptDatabaseError, SchemaVersionError, one_line

__all__ = ["SCHEMA", "SCHEMA_VERSION", "TABLES", "prepare"]

#: The schema this code reads and writes; a database of another ``user_version`` is refused.
SCHEMA_VERSION = 3

#: The tables and indices, created in an empty file.
SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    parameters TEXT NOT NULL,
    strategy TEXT NOT NULL,
    q INTEGER NOT NULL CHECK (q >= 2),
    seed INTEGER NOT NULL,
    options TEXT NOT NULL,
    budget INTEGER,
    package_version TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS queries (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions (id),
    number INTEGER NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('ask', 'import')),
    created_at TEXT NOT NULL,
    first_shown_at TEXT,
    last_shown_at TEXT,
    times_shown INTEGER NOT NULL DEFAULT 0,
    withdrawn_at TEXT,
    UNIQUE (session_id, number)
);
CREATE TABLE IF NOT EXISTS designs (
    query_id INTEGER NOT NULL REFERENCES queries (id),
    option INTEGER NOT NULL,
    x TEXT NOT NULL,
    PRIMARY KEY (query_id, option)
);
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions (id),
    query_id INTEGER NOT NULL REFERENCES queries (id),
    kind TEXT NOT NULL CHECK (kind IN ('winner', 'ranking', 'skip', 'tie', 'rating')),
    winner INTEGER,
    ranking TEXT,
    strength INTEGER CHECK (strength >= 1),
    ratings TEXT,
    answered_at TEXT NOT NULL,
    shown_at TEXT,
    response_s REAL
);
CREATE TABLE IF NOT EXISTS retractions (
    id INTEGER PRIMARY KEY,
    answer_id INTEGER NOT NULL UNIQUE REFERENCES answers (id),
    retracted_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS queries_by_session ON queries (session_id, number);
CREATE INDEX IF NOT EXISTS answers_by_session ON answers (session_id, id);
CREATE INDEX IF NOT EXISTS answers_by_query ON answers (query_id);
CREATE TABLE IF NOT EXISTS fits (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions (id),
    n_answers INTEGER NOT NULL CHECK (n_answers >= 1),
    last_answer_id INTEGER NOT NULL REFERENCES answers (id),
    hyperparameters TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (session_id, n_answers, last_answer_id)
);
CREATE TABLE IF NOT EXISTS recommendations (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions (id),
    n_answers INTEGER NOT NULL,
    last_answer_id INTEGER NOT NULL REFERENCES answers (id),
    x TEXT NOT NULL,
    mean REAL NOT NULL,
    std REAL NOT NULL,
    datapoint INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (session_id, n_answers, last_answer_id)
);
"""

#: The tables of :data:`SCHEMA`.
TABLES = frozenset(
    {"sessions", "queries", "designs", "answers", "retractions", "fits", "recommendations"}
)


def _state(conn: Connection) -> tuple[int, set[str]]:
    """``(user_version, table names)``, read in one transaction after a quick check."""
    with conn.read():
        version = int(conn.value("PRAGMA user_version"))
        if version > SCHEMA_VERSION:
            if conn.value("SELECT 1 FROM sqlite_master WHERE name = 'sessions'") is None:
                raise _not_ours(conn)  # another program's file that sets user_version
            raise SchemaVersionError(
                f"{str(conn.path)!r} was written by session schema version {version}; this "
                f"version of botorch-pref reads version {SCHEMA_VERSION} at most. Upgrade "
                "botorch-pref; the file was not changed."
            )
        report = [str(r[0]) for r in conn.rows("PRAGMA quick_check")]
        if report != ["ok"]:
            problems = [
                line.strip()
                for text in report
                for line in text.splitlines()
                if line.strip() and not line.startswith("***")
            ]
            raise CorruptDatabaseError(
                f"{str(conn.path)!r} is damaged (integrity check: {len(problems)} problem(s), the "
                f"first: {one_line(problems[0] if problems else report[0])}); the file was not "
                "changed. Restore it from a backup or export what is readable with sqlite3."
            )
        tables = {r[0] for r in conn.rows("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return version, tables


def _not_ours(conn: Connection) -> CorruptDatabaseError:
    return CorruptDatabaseError(
        f"{str(conn.path)!r} is an SQLite database but not a botorch-pref session "
        "database; the file was not changed."
    )


def _check_tables(conn: Connection, version: int, tables: set[str]) -> None:
    if version == SCHEMA_VERSION and TABLES <= tables:
        return
    if 1 <= version < SCHEMA_VERSION and "sessions" in tables:
        raise SchemaVersionError(
            f"{str(conn.path)!r} was written by session schema version {version}, from before "
            f"the first release; this version of botorch-pref reads version {SCHEMA_VERSION}. "
            "The file was not changed."
        )
    raise _not_ours(conn)


def prepare(conn: Connection, *, create: bool) -> None:
    """Check a database file, and create the schema in an empty one.

    Nothing is written to a file that is refused. Creation runs under ``BEGIN IMMEDIATE`` and
    re-checks the version there, so concurrent callers create the schema once.

    Args:
        conn: The open connection.
        create: Create the schema in an empty file.

    Raises:
        SchemaVersionError: For a file of another schema version.
        CorruptDatabaseError: For a damaged file or one that is not a session database.
    """
    version, tables = _state(conn)
    if version == 0 and not tables and create:
        conn.execute("PRAGMA journal_mode = WAL")
        with conn.write():
            if int(conn.value("PRAGMA user_version")) == 0:
                if conn.value("SELECT count(*) FROM sqlite_master WHERE type = 'table'"):
                    raise _not_ours(conn)
                _run(conn, SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        version, tables = _state(conn)
    _check_tables(conn, version, tables)
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")


def _run(conn: Connection, script: str) -> None:
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)
