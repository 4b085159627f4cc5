"""Sessions for people answering preference queries, stored in SQLite.

A person answering comparisons is the scarcest resource of preferential BO: every answer is
committed in its own transaction before the next query is generated, the model is rebuilt from
the stored answers on resume, and a pending query is shown again after a restart. See
:class:`Session` for the Python API, :mod:`botorch_pref.sessions.store` for the schema and
:mod:`botorch_pref.sessions.cli` for ``botorch-pref session``.
"""

from botorch_pref.sessions.session import (
    Answer,
    Best,
    HistoryEntry,
    Progress,
    Query,
    Session,
    SessionSummary,
)
from botorch_pref.sessions.store import (
    SCHEMA_VERSION,
    CorruptDatabaseError,
    DatabaseBusyError,
    ImportFormatError,
    InvalidAnswerError,
    QueryNotPendingError,
    SchemaVersionError,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
)

__all__ = [
    "SCHEMA_VERSION",
    "Answer",
    "Best",
    "CorruptDatabaseError",
    "DatabaseBusyError",
    "HistoryEntry",
    "ImportFormatError",
    "InvalidAnswerError",
    "Progress",
    "Query",
    "QueryNotPendingError",
    "SchemaVersionError",
    "Session",
    "SessionError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionSummary",
]
