"""The errors of the session store: one exception type per kind of mistake.

Every :class:`SessionError` means nothing was changed. A bad answer raises the loop's
:class:`~botorch_pref.loop.InvalidAnswerError` (re-exported here), the one error for answers
across the optimiser, the sessions and their command line; it is a ``ValueError`` but not a
:class:`SessionError`, so code that reports both catches :data:`USER_ERRORS`.
"""

from __future__ import annotations

from botorch_pref.loop import InvalidAnswerError

__all__ = [
    "USER_ERRORS",
    "CorruptDatabaseError",
    "DatabaseAccessError",
    "DatabaseBusyError",
    "ImportFormatError",
    "InvalidAnswerError",
    "QueryNotPendingError",
    "SchemaVersionError",
    "SessionError",
    "SessionExistsError",
    "SessionNotFoundError",
    "one_line",
]


class SessionError(ValueError):
    """A session cannot do what was asked; nothing was changed."""


class SessionNotFoundError(SessionError):
    """No database at the path, or no session of that name in it."""


class SessionExistsError(SessionError):
    """A session of that name already exists."""


class SchemaVersionError(SessionError):
    """The database was written by a newer version of the session schema."""


class CorruptDatabaseError(SessionError):
    """The file is not a readable session database."""


class DatabaseAccessError(SessionError):
    """The database file (or the directory it needs to write beside it) cannot be used."""


class DatabaseBusyError(SessionError):
    """Another process held the database's lock for longer than the busy timeout."""


class QueryNotPendingError(SessionError):
    """The query is not awaiting an answer (already answered, withdrawn or unknown).

    Args:
        message: What happened, for a person.
        reason: Why, for a program: ``"answered"`` (it has a standing answer), ``"withdrawn"``
            (an undo withdrew it before it was answered), ``"imported"`` (it came with its
            answer) or ``"unknown"`` (no such query in the session).

    Attributes:
        reason: The reason given.
    """

    REASONS = ("answered", "withdrawn", "imported", "unknown")

    def __init__(self, message: str, reason: str = "unknown") -> None:
        if reason not in self.REASONS:
            raise ValueError(f"reason must be one of {self.REASONS}, got {reason!r}.")
        super().__init__(message)
        self.reason = reason

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (str(self), self.reason)


class ImportFormatError(SessionError):
    """A file of comparisons to import is malformed; nothing was imported."""


#: The errors a person can cause with a bad call or bad input (each says what to fix).
USER_ERRORS = (SessionError, InvalidAnswerError)


def one_line(text: object) -> str:
    """A message on one line (SQLite and OS errors may span several).

    Args:
        text: The message.

    Returns:
        The lines joined with ``"; "``.
    """
    return "; ".join(line.strip() for line in str(text).splitlines() if line.strip())
