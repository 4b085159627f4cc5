"""Answer links and the admin token, kept as hashes in the session database, and the settings
of each session's answer page (``botorch-pref serve`` shows them; ``botorch-pref session
links`` lists the links).

Each session gets its own answer link ``/a/<token>``: whoever holds the token can answer, undo
and read that one session, nothing else. This module keeps, in a table of its own in the
same SQLite file as the sessions (``web_links``, written in its own ``BEGIN IMMEDIATE``
transactions and never touched by the rest of :mod:`botorch_pref.sessions`, whose checks accept
extra tables), one row per session: the SHA-256 of its token, the link's generation, and the
session's page settings (renderer, question, whether participants see the recommendation).

**No token is stored.** A token is derived from a secret *link key* kept in a separate file
beside the database, ``<database>.key`` (created with mode ``0600`` on first use)::

    token = base64url(HMAC-SHA256(key, "link:<row id>:<generation>"))
    admin token = base64url(HMAC-SHA256(key, "admin"))

so a copy of the database file alone opens no session and shows no link, while the server and
``botorch-pref session links`` rebuild every link from the key file (and the admin stays logged
in across restarts: the admin token is the same). Rotating a link raises its generation (a new
token; the old one is refused with 403); revoking it forgets its hash. A link whose hash does
not match the key (one made before links were derived, or after the key file was replaced)
keeps working but cannot be listed: rotate it to get one that can. Protect the key file as you
would the links; delete it (and rotate every link) to change them all.

A lookup goes through the SHA-256 of the presented token, so the time it takes does not depend
on how much of a guessed token matches.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from botorch_pref.sessions.connection import Connection
from botorch_pref.sessions.errors import SessionError
from botorch_pref.sessions.settings import MAX_TEXT, check_text
from botorch_pref.sessions.sql import fits_sqlite

__all__ = [
    "BUILTIN_RENDERERS",
    "DEFAULT_PROMPT",
    "KEY_SUFFIX",
    "TokenStore",
    "WebSession",
    "admin_token",
    "key_path",
    "link_session",
    "load_key",
    "new_token",
    "page_settings",
]

#: The question a session's page asks unless told otherwise.
DEFAULT_PROMPT = "Which do you prefer?"
#: The link key's file is the database's path with this suffix.
KEY_SUFFIX = ".key"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS web_links (
    id INTEGER PRIMARY KEY,
    session_name TEXT NOT NULL UNIQUE,
    token_sha256 TEXT UNIQUE,
    retired_sha256 TEXT,
    generation INTEGER NOT NULL DEFAULT 0,
    revoked_at TEXT,
    renderer TEXT NOT NULL,
    prompt TEXT NOT NULL,
    show_best INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
)
"""
#: Earlier versions kept each token in clear (``web_tokens.token``): the migration copies the
#: rows without it (their links keep working; participants kept seeing the recommendation).
_MIGRATE = """
INSERT INTO web_links (id, session_name, token_sha256, generation, renderer, prompt,
    show_best, created_at)
SELECT id, session_name, token_sha256, 0, renderer, prompt, 1, created_at FROM web_tokens
"""


#: The renderers every server has (``auto``: ``colour`` for colour parameters, else ``table``,
#: chosen by the page).
BUILTIN_RENDERERS = ("auto", "table", "colour")


def page_settings(prompt: str | None, renderer: str | None) -> tuple[str, str]:
    """Check the page settings of a new session (before anything is written).

    Args:
        prompt: The question above the options (``None``: :data:`DEFAULT_PROMPT`), at most
            :data:`~botorch_pref.sessions.settings.MAX_TEXT` characters, no control or
            text-direction characters.
        renderer: One of :data:`BUILTIN_RENDERERS`, or a user renderer ``module:function`` (or
            ``file.py:function``) that imports and names a function (``None``: ``auto``).

    Returns:
        ``(prompt, renderer)``.

    Raises:
        SessionError: For a bad question or a renderer that does not load.
    """
    from botorch_pref.sessions.terminal import load_renderer

    prompt = DEFAULT_PROMPT if prompt is None else check_text(prompt, "The question", MAX_TEXT)
    renderer = "auto" if renderer is None else renderer
    if renderer not in BUILTIN_RENDERERS:
        check_text(renderer, "A renderer", MAX_TEXT)
        try:
            load_renderer(renderer)
        except ValueError as err:
            raise SessionError(str(err)) from None
    return prompt, renderer


def link_session(
    path: str | os.PathLike[str],
    name: str,
    *,
    question: str | None = None,
    renderer: str | None = None,
    show_recommendation: bool = False,
) -> WebSession:
    """Set a session's answer page and give it its link (the API of ``session create``'s page
    options and of the admin page's create form).

    Example:
        >>> Session.create("study.db", "alice", {"sweetness": (0, 10)}).close()
        >>> record = link_session("study.db", "alice", question="Which drink do you prefer?")
        >>> url = f"http://127.0.0.1:8000/a/{record.token}"   # hand it to alice

    Args:
        path: The session database file.
        name: The session's name.
        question: The question above the options (default: :data:`DEFAULT_PROMPT`).
        renderer: How an option is drawn (see :func:`page_settings`; default ``auto``).
        show_recommendation: Participants see the current recommendation (the experimenter
            always does, on the results page).

    Returns:
        The session's record, with the token of its answer link.

    Raises:
        SessionError: For bad settings (nothing is written then) or an unknown session.
    """
    from botorch_pref.sessions.session import Session

    if not isinstance(show_recommendation, bool):
        raise SessionError(f"show_recommendation is True or False, got {show_recommendation!r}.")
    prompt, renderer = page_settings(question, renderer)
    Session.open(path, name).close()  # an existing session
    tokens = TokenStore(path)
    try:
        return tokens.ensure(name, renderer, prompt, show_recommendation, replace=True)
    finally:
        tokens.close()


def new_token() -> str:
    """A fresh random token (32 bytes, URL-safe).

    Returns:
        The token.
    """
    return secrets.token_urlsafe(32)


def key_path(path: str | os.PathLike[str]) -> Path:
    """The link key's file of a database.

    Args:
        path: The database file.

    Returns:
        ``<path>.key``.
    """
    return Path(f"{os.fspath(path)}{KEY_SUFFIX}")


def load_key(path: str | os.PathLike[str]) -> bytes:
    """The link key of a database, made (mode ``0600``) when its file does not exist yet.

    Processes that make it at once all read the one that was written first.

    Args:
        path: The database file.

    Returns:
        The 32-byte key.

    Raises:
        SessionError: When the key file exists but is not a key, or cannot be written.
    """
    file = key_path(path)
    if not file.exists():
        tmp = file.with_name(f"{file.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(32) + "\n")
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(tmp, file)  # fails when another process made it first
            except FileExistsError:
                pass
        except OSError as err:
            where = str(file)
            raise SessionError(f"Cannot write the link key {where!r}: {err.strerror}.") from None
        finally:
            tmp.unlink(missing_ok=True)
    try:
        key = bytes.fromhex(file.read_text().strip())
    except (OSError, ValueError, UnicodeDecodeError):
        key = b""
    if len(key) != 32:
        raise SessionError(f"{str(file)!r} is not a link key (64 hex digits); move it away.")
    return key


def _mac(key: bytes, message: str) -> str:
    digest = hmac.new(key, message.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def admin_token(key: bytes) -> str:
    """The admin token a link key gives.

    Args:
        key: The link key.

    Returns:
        The token.
    """
    return _mac(key, "admin")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class WebSession:
    """The answer link and page settings of a session.

    Attributes:
        id: Its opaque number in admin links (no session name ever appears in a URL).
        name: The session's name.
        token: The token of its answer link, or ``None`` when revoked or not rebuildable
            from the link key (see the module's note).
        renderer: The renderer's name (``table``, ``colour`` or a user renderer's spec).
        prompt: The question shown above the options.
        show_best: Whether participants see the current recommendation.
        revoked: Whether the link was revoked (no token opens the session).
        created_at: When the record was made (UTC, ISO 8601).
    """

    id: int
    name: str
    token: str | None
    renderer: str
    prompt: str
    show_best: bool
    revoked: bool
    created_at: str


class TokenStore:
    """The ``web_links`` table of a session database and its link key (thread-safe).

    Its statements go through a :class:`~botorch_pref.sessions.connection.Connection`: a lock
    held by another writer for longer than ``timeout`` raises
    :class:`~botorch_pref.sessions.DatabaseBusyError` (the pages answer 503), as the sessions do.

    Args:
        path: The session database file (it must exist).
        timeout: Seconds to wait for another writer's lock.
        key: The link key (default: :func:`load_key` of ``path``).

    Raises:
        SessionError: When the file cannot be opened, or stays locked (``DatabaseBusyError``),
            or the key file is not a key.
    """

    def __init__(
        self, path: str | os.PathLike[str], timeout: float = 30.0, key: bytes | None = None
    ) -> None:
        self.path = Path(path)
        self.key = load_key(self.path) if key is None else key
        self._db = Connection(self.path, create=False, timeout=timeout, check_same_thread=False)
        self._lock = threading.Lock()
        try:
            with self._lock:
                self._db.execute("PRAGMA synchronous = FULL")
                with self._db.write():
                    self._db.execute(_SCHEMA)
                    self._db.execute(
                        "CREATE INDEX IF NOT EXISTS web_links_retired ON web_links (retired_sha256)"
                    )
                    old = self._db.value(
                        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'web_tokens'"
                    )
                    if old is not None:  # tokens in clear: copied without them, then dropped
                        self._db.execute(_MIGRATE)
                        self._db.execute("DROP TABLE web_tokens")
        except BaseException:
            self._db.close()
            raise

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    def _token(self, record_id: int, generation: int) -> str:
        return _mac(self.key, f"link:{record_id}:{generation}")

    _COLUMNS = (
        "id, session_name, token_sha256, generation, renderer, prompt, show_best, revoked_at, "
        "created_at"
    )

    def ensure(
        self,
        name: str,
        renderer: str,
        prompt: str,
        show_best: bool = False,
        replace: bool = False,
    ) -> WebSession:
        """The record of a session, made (with a new link) if it has none.

        Args:
            name: The session's name.
            renderer: Renderer for a new record.
            prompt: Question for a new record.
            show_best: Whether participants see the recommendation, for a new record.
            replace: Set the settings of an existing record too (its link stays): for a
                session just created with these settings, whose record another request may
                have made meanwhile with the defaults.

        Returns:
            The record (the existing one when there was one).
        """
        self.ensure_all([(name, renderer, prompt, show_best)], replace)
        found = self._one("session_name", name)
        assert found is not None  # records are never deleted
        return found

    def ensure_all(
        self, settings: Sequence[tuple[str, str, str, bool]], replace: bool = False
    ) -> None:
        """:meth:`ensure` for many sessions in one transaction.

        Args:
            settings: ``(name, renderer, prompt, show_best)`` of each session.
            replace: As for :meth:`ensure`.
        """
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._lock, self._db.write():
            for name, renderer, prompt, show_best in settings:
                row = self._db.rows("SELECT id FROM web_links WHERE session_name = ?", (name,))
                if not row:
                    cursor = self._db.execute(
                        "INSERT INTO web_links (session_name, renderer, prompt, show_best, "
                        "created_at) VALUES (?, ?, ?, ?, ?)",
                        (name, renderer, prompt, int(show_best), now),
                    )
                    record_id = int(cursor.lastrowid)
                    self._db.execute(
                        "UPDATE web_links SET token_sha256 = ? WHERE id = ?",
                        (_digest(self._token(record_id, 0)), record_id),
                    )
                elif replace:
                    self._db.execute(
                        "UPDATE web_links SET renderer = ?, prompt = ?, show_best = ? WHERE id = ?",
                        (renderer, prompt, int(show_best), row[0][0]),
                    )

    def rotate(self, name: str) -> WebSession:
        """Give a session a new answer link; the old one is refused from now on.

        A revoked link is made anew this way too.

        Args:
            name: The session's name.

        Returns:
            The record, with its new token.

        Raises:
            SessionError: When the session has no record.
        """
        with self._lock, self._db.write():
            rows = self._db.rows(
                "SELECT id, generation, token_sha256 FROM web_links WHERE session_name = ?",
                (name,),
            )
            if not rows:
                raise SessionError(f"Session {name!r} has no answer link yet.")
            record_id, generation, old = rows[0]
            self._db.execute(
                "UPDATE web_links SET token_sha256 = ?, generation = ?, revoked_at = NULL, "
                "retired_sha256 = coalesce(?, retired_sha256) WHERE id = ?",
                (_digest(self._token(record_id, generation + 1)), generation + 1, old, record_id),
            )
        found = self._one("id", record_id)
        assert found is not None
        return found

    def revoke(self, name: str) -> WebSession:
        """Withdraw a session's answer link (the answers stay; :meth:`rotate` makes a new one).

        Args:
            name: The session's name.

        Returns:
            The record (revoked, without token).

        Raises:
            SessionError: When the session has no record.
        """
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._lock, self._db.write():
            cursor = self._db.execute(
                "UPDATE web_links SET retired_sha256 = coalesce(token_sha256, retired_sha256), "
                "token_sha256 = NULL, revoked_at = coalesce(revoked_at, ?) WHERE session_name = ?",
                (now, name),
            )
            if cursor.rowcount == 0:
                raise SessionError(f"Session {name!r} has no answer link yet.")
        found = self._one("session_name", name)
        assert found is not None
        return found

    def by_token(self, token: str) -> WebSession | None:
        """The session a token opens.

        Args:
            token: The presented token.

        Returns:
            The record, or ``None`` for an unknown, revoked or replaced token.
        """
        if not token or len(token) > 200:
            return None
        return self._one("token_sha256", _digest(token))

    def retired(self, token: str) -> bool:
        """Whether a token is a session's revoked or replaced link.

        Args:
            token: The presented token.

        Returns:
            The flag.
        """
        if not token or len(token) > 200:
            return False
        return self._one("retired_sha256", _digest(token)) is not None

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

    def all(self) -> dict[str, WebSession]:
        """Every record, by session name.

        Returns:
            The records.
        """
        with self._lock:
            rows = self._db.rows(f"SELECT {self._COLUMNS} FROM web_links ORDER BY id")
        return {r.name: r for r in map(self._record, rows)}

    def _record(self, row: tuple) -> WebSession:
        record_id, name, sha, generation, renderer, prompt, show_best, revoked_at, created = row
        token = None
        if sha is not None:
            derived = self._token(record_id, generation)
            token = derived if hmac.compare_digest(_digest(derived), sha) else None
        show, revoked = bool(show_best), revoked_at is not None
        return WebSession(record_id, name, token, renderer, prompt, show, revoked, created)

    def _one(self, column: str, value: int | str) -> WebSession | None:
        """The record whose (unique) ``column`` is ``value``."""
        if isinstance(value, int) and not fits_sqlite(value):
            return None  # no record has an id SQLite cannot store
        with self._lock:
            rows = self._db.rows(
                f"SELECT {self._COLUMNS} FROM web_links WHERE {column} = ? LIMIT 1", (value,)
            )
        return self._record(rows[0]) if rows else None
