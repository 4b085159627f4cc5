"""Sessions for people answering preference queries, stored in SQLite.

A person answering comparisons is the scarcest resource of preferential BO: every answer is
committed in its own transaction before the next query is generated, the model is rebuilt from
the stored answers and hyperparameters on resume, and a pending query is shown again after a
restart. Modules, one concern each:

* :mod:`~botorch_pref.sessions.errors`: the exceptions;
* :mod:`~botorch_pref.sessions.schema`: the tables, their version and migrations;
* :mod:`~botorch_pref.sessions.records`: the row types (:class:`Query`, :class:`StoredAnswer`,
  ...), which wrap the loop's :class:`~botorch_pref.loop.Answer` and
  :class:`~botorch_pref.loop.Recommendation`;
* :mod:`~botorch_pref.sessions.connection`: statements, transactions, busy timeout, errors;
* :mod:`~botorch_pref.sessions.store`: reads and writes of sessions, queries and answers;
* :mod:`~botorch_pref.sessions.model`: the optimiser rebuilt from the stored answers;
* :mod:`~botorch_pref.sessions.session`: :class:`Session`, the Python API;
* :mod:`~botorch_pref.sessions.export` and :mod:`~botorch_pref.sessions.exchange`: export and
  import;
* :mod:`~botorch_pref.sessions.session_command` and :mod:`~botorch_pref.sessions.terminal`:
  ``botorch-pref session`` and its interactive loop.
"""

from botorch_pref.sessions.errors import (
    CorruptDatabaseError,
    DatabaseAccessError,
    DatabaseBusyError,
    ImportFormatError,
    InvalidAnswerError,
    QueryNotPendingError,
    SchemaVersionError,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
)
from botorch_pref.sessions.records import (
    HistoryEntry,
    Progress,
    Query,
    SessionSummary,
    StoredAnswer,
    StoredRecommendation,
)
from botorch_pref.sessions.schema import SCHEMA_VERSION
from botorch_pref.sessions.session import Session, Shown

__all__ = [
    "SCHEMA_VERSION",
    "CorruptDatabaseError",
    "DatabaseAccessError",
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
    "Shown",
    "StoredAnswer",
    "StoredRecommendation",
]
