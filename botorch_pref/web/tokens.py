"""Capability tokens of the web front end, kept in the session database itself.

Each session gets its own answer link ``/a/<token>``: whoever holds the token can answer, undo
and read that one session, nothing else. The tokens and each session's web settings (its
renderer and the question shown above the options) live in a table of the web layer's own,
``web_tokens``, created in the same SQLite file as the sessions, written in its own
``BEGIN IMMEDIATE`` transactions and never touched by :mod:`botorch_pref.sessions` (whose checks
accept extra tables). One file therefore holds a study and its links, and a restart keeps them.

The token is stored in clear (the admin page lists the links); a lookup goes through the
SHA-256 of the presented token, so the time it takes does not depend on how much of a guessed
token matches. Whoever can read the database file can read the answers too: protect the file.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from botorch_pref.sessions.connection import Connection
from botorch_pref.sessions.sql import fits_sqlite

__all__ = ["TokenStore", "WebSession", "new_token"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS web_tokens (
    id INTEGER PRIMARY KEY,
    session_name TEXT NOT NULL UNIQUE,
    token TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    renderer TEXT NOT NULL,
    prompt TEXT NOT NULL,
    created_at TEXT NOT NULL
)
"""


def new_token() -> str:
    """A fresh random token (32 bytes, URL-safe).

    Returns:
        The token.
    """
    return secrets.token_urlsafe(32)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class WebSession:
    """The web layer's record of a session.

    Attributes:
        id: Its opaque number in admin links (no session name ever appears in a URL).
        name: The session's name.
        token: The capability token of its answer link.
        renderer: The renderer's name (``table``, ``colour`` or a user renderer's spec).
        prompt: The question shown above the options.
        created_at: When the link was made (UTC, ISO 8601).
    """

    id: int
    name: str
    token: str
    renderer: str
    prompt: str
    created_at: str


class TokenStore:
    """The ``web_tokens`` table of a session database (thread-safe).

    Its statements go through a :class:`~botorch_pref.sessions.connection.Connection`: a lock
    held by another writer for longer than ``timeout`` raises
    :class:`~botorch_pref.sessions.DatabaseBusyError` (the pages answer 503), as the sessions do.

    Args:
        path: The session database file (it must exist).
        timeout: Seconds to wait for another writer's lock.

    Raises:
        SessionError: When the file cannot be opened, or stays locked (``DatabaseBusyError``).
    """

    def __init__(self, path: str | os.PathLike[str], timeout: float = 30.0) -> None:
        self.path = Path(path)
        self._db = Connection(self.path, create=False, timeout=timeout, check_same_thread=False)
        self._lock = threading.Lock()
        try:
            with self._lock:
                self._db.execute("PRAGMA synchronous = FULL")
                with self._db.write():
                    self._db.execute(_SCHEMA)
        except BaseException:
            self._db.close()
            raise

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    _COLUMNS = "id, session_name, token, renderer, prompt, created_at"

    def ensure(self, name: str, renderer: str, prompt: str, replace: bool = False) -> WebSession:
        """The record of a session, made (with a new token) if it has none.

        Args:
            name: The session's name.
            renderer: Renderer for a new record.
            prompt: Question for a new record.
            replace: Set ``renderer`` and ``prompt`` of an existing record too (its token
                stays): for a session just created with these settings, whose record another
                request may have made meanwhile with the defaults.

        Returns:
            The record (the existing one when there was one).
        """
        token = new_token()
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        on_conflict = (
            "ON CONFLICT (session_name) DO UPDATE SET renderer = excluded.renderer, "
            "prompt = excluded.prompt"
            if replace
            else "ON CONFLICT (session_name) DO NOTHING"
        )
        with self._lock, self._db.write():
            self._db.execute(
                "INSERT INTO web_tokens (session_name, token, token_sha256, renderer, prompt, "
                f"created_at) VALUES (?, ?, ?, ?, ?, ?) {on_conflict}",
                (name, token, _digest(token), renderer, prompt, now),
            )
        found = self._one("session_name", name)  # this token, or another writer's
        assert found is not None  # records are never deleted
        return found

    def by_token(self, token: str) -> WebSession | None:
        """The session a token opens.

        Args:
            token: The presented token.

        Returns:
            The record, or ``None`` for an unknown token.
        """
        if not token or len(token) > 200:
            return None
        found = self._one("token_sha256", _digest(token))
        if found is None or not secrets.compare_digest(found.token, token):
            return None
        return found

    def by_id(self, record_id: int) -> WebSession | None:
        """The record with an admin-link number.

        Args:
            record_id: The number.

        Returns:
            The record, or ``None``.
        """
        return self._one("id", record_id)

    def by_name(self, name: str) -> WebSession | None:
        """The record of a session name.

        Args:
            name: The session's name.

        Returns:
            The record, or ``None``.
        """
        return self._one("session_name", name)

    def _one(self, column: str, value: int | str) -> WebSession | None:
        """The record whose (unique) ``column`` is ``value``."""
        if isinstance(value, int) and not fits_sqlite(value):
            return None  # no record has an id SQLite cannot store
        with self._lock:
            rows = self._db.rows(
                f"SELECT {self._COLUMNS} FROM web_tokens WHERE {column} = ?", (value,)
            )
        return WebSession(*rows[0]) if rows else None
