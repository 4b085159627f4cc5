"""What the routes share: the server's settings, its tokens, nonces, renderers, workers, pages.

Also the pieces every route uses: :class:`HTTPProblem` (an error page with a status), the
request's form, the checks of the admin token, the session tokens and the form nonces.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from botorch_pref.sessions import Session
from botorch_pref.sessions.answer_links import DEFAULT_PROMPT, TokenStore, WebSession, load_key
from botorch_pref.sessions.answer_links import admin_token as _admin_token
from botorch_pref.sessions.store import Store
from botorch_pref.web.nonces import NonceStatus, NonceStore
from botorch_pref.web.renderers import RendererSet, format_value
from botorch_pref.web.security import same_token
from botorch_pref.web.workers import DEFAULT_BATCH, Preparer
from botorch_pref.web.writes import GroupWriter

__all__ = [
    "ADMIN_COOKIE",
    "DEFAULT_PROMPT",
    "STATIC",
    "HTTPProblem",
    "WebConfig",
    "WebState",
    "annotator",
    "check_nonce",
    "fmt",
    "is_admin",
    "read_form",
    "require_admin",
    "web_state",
]

#: The cookie that holds the admin token once an admin link has been opened.
ADMIN_COOKIE = "botorch_pref_admin"
#: The bundled files ``/static/<name>`` serves, with their media types.
STATIC = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "favicon.ico": "image/x-icon",
}


@dataclass
class WebConfig:
    """Settings of a server.

    Attributes:
        path: The session database file (created with the first session when missing).
        admin_token: The admin token (default: the one the database's link key gives, the
            same at every start; see :mod:`~botorch_pref.sessions.answer_links`).
        renderers: User renderer specs (``module:function``) offered besides the built-in ones.
        workers: Query-preparing worker processes.
        idle_s: Seconds after which an unused session is dropped from memory.
        batch: Most sessions a worker prepares in one batched step (1: one at a time).
        max_body: Most bytes of a request body.
        allowed_hosts: ``Host`` headers accepted (``["*"]`` for any).
        refresh_s: Seconds between refreshes of the "preparing" page.
        wait_s: Seconds an answering page's request waits for a query being prepared before it
            shows "preparing the next question" instead.
        db_timeout: Seconds a request waits for the database's write lock before 503.
    """

    path: Path
    admin_token: str | None = None
    renderers: list[str] = field(default_factory=list)
    workers: int = 1
    idle_s: float = 600.0
    batch: int = DEFAULT_BATCH
    max_body: int = 16 * 1024
    allowed_hosts: list[str] = field(default_factory=lambda: ["*"])
    refresh_s: int = 1
    wait_s: float = 5.0
    db_timeout: float = 30.0


class HTTPProblem(Exception):
    """An error page with a status.

    Args:
        status: The HTTP status.
        message: What the page says.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class WebState:
    """What the routes share: the config, tokens, nonces, renderers, workers and templates.

    Args:
        config: The server's settings.
    """

    def __init__(self, config: WebConfig) -> None:
        self.config = config
        self.path = Path(config.path)
        #: The link key (beside the database file): answer links, the admin token, nonces.
        self.key = load_key(self.path)
        #: The admin token: the configured one, else the link key's.
        self.admin_token = config.admin_token or _admin_token(self.key)
        self.nonces = NonceStore(self.key)
        self.renderers = RendererSet(config.renderers)
        self.preparer = Preparer(
            self.path, workers=config.workers, idle_s=config.idle_s, batch=config.batch
        )
        self._tokens: TokenStore | None = None
        self._tokens_lock = threading.Lock()
        #: Open connections of finished requests, for the next ones (see :meth:`open`).
        self._stores: list[Store] = []
        self._stores_lock = threading.Lock()
        #: The requests' answers and undos, committed together when they come at once.
        self.writes = GroupWriter(self._kept_store)
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("botorch_pref.web", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        base = resources.files("botorch_pref.web") / "static"
        self.static = {name: (base / name).read_bytes() for name in STATIC}

    def tokens(self) -> TokenStore | None:
        """The token table, opened once the database file exists.

        Returns:
            The store, or ``None`` while there is no database.
        """
        with self._tokens_lock:
            if self._tokens is None and self.path.exists():
                Session.list(self.path)  # checks it is a session database before writing
                self._tokens = TokenStore(self.path, timeout=self.config.db_timeout, key=self.key)
            return self._tokens

    @contextlib.contextmanager
    def _kept_store(self) -> Iterator[Store]:
        """An open connection to the file, kept for the next request when this one is done.

        Opening a connection checks the file (its schema, SQLite's quick check); a kept one is
        used by one request at a time. One whose request raised, or left inside a transaction,
        is closed instead of kept.
        """
        with self._stores_lock:
            store = self._stores.pop() if self._stores else None
        if store is None:
            store = Store(self.path, timeout=self.config.db_timeout, check_same_thread=False)
        try:
            yield store
        except BaseException:
            store.close()
            raise
        if store.connection.sqlite.in_transaction:
            store.close()
        else:
            with self._stores_lock:
                self._stores.append(store)

    @contextlib.contextmanager
    def open(self, name: str) -> Iterator[Session]:
        """A session for one request, on a kept connection (writes go through :attr:`writes`).

        Args:
            name: The session's name.

        Yields:
            The session (do not close it).
        """
        with self._kept_store() as store:
            yield Session.on_store(store, name)

    def record(self, name: str, renderer: str = "auto", prompt: str = "") -> WebSession:
        """The web record of a session, made on first sight (sessions created elsewhere).

        Args:
            name: The session's name.
            renderer: Renderer for a new record (``auto``: by the parameter names).
            prompt: Question for a new record.

        Returns:
            The record.
        """
        tokens = self.tokens()
        assert tokens is not None
        found = tokens.by_name(name)
        if found is not None:
            return found
        return tokens.ensure(name, renderer, prompt or DEFAULT_PROMPT)

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        """A page from a template (autoescaped).

        Args:
            template: The template's file name.
            status: The HTTP status.
            **context: Template variables.

        Returns:
            The response.
        """
        html = self.templates.get_template(template).render(**context)
        return HTMLResponse(html, status_code=status)

    def close(self) -> None:
        """Stop the workers, close the kept connections and the token table."""
        self.preparer.close()
        with self._stores_lock:
            stores, self._stores = self._stores, []
        for store in stores:
            store.close()
        with self._tokens_lock:
            if self._tokens is not None:
                self._tokens.close()
                self._tokens = None


def web_state(request: Request) -> WebState:
    """The :class:`WebState` of the application serving a request.

    Args:
        request: The request.

    Returns:
        The state.
    """
    return request.app.state.web


async def read_form(request: Request) -> dict[str, str]:
    """A url-encoded form's fields (the last value of each).

    Args:
        request: The request.

    Returns:
        The fields.

    Raises:
        HTTPProblem: 415 for another content type, 400 for a malformed body (one that is not
            UTF-8, escapes included, or has over 100 fields).
    """
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise HTTPProblem(415, "Forms must be sent as application/x-www-form-urlencoded.")
    body = await request.body()
    try:  # percent-escapes that are not UTF-8 too: refused, not read as U+FFFD
        fields = parse_qs(
            body.decode("utf-8"), keep_blank_values=True, errors="strict", max_num_fields=100
        )
    except (UnicodeDecodeError, ValueError):
        raise HTTPProblem(400, "Malformed form.") from None
    return {k: v[-1] for k, v in fields.items()}


def annotator(state: WebState, token: str) -> WebSession:
    """The session an answer link's token opens.

    Args:
        state: The server's state.
        token: The token in the link.

    Returns:
        The session's record.

    Raises:
        HTTPProblem: 404 for a token that opens no session, 403 for a revoked or replaced one.
    """
    tokens = state.tokens()
    record = None if tokens is None else tokens.by_token(token)
    if record is None:
        if tokens is not None and tokens.retired(token):
            raise HTTPProblem(
                403,
                "This link was withdrawn or replaced by the study's organiser; nothing was "
                "recorded. Ask them for your current link.",
            )
        raise HTTPProblem(404, "No session has this link. Ask for your link again.")
    return record


def is_admin(state: WebState, request: Request) -> bool:
    """Whether a request carries the admin token (cookie or ``Authorization: Bearer``).

    Args:
        state: The server's state.
        request: The request.

    Returns:
        The flag.
    """
    given = request.cookies.get(ADMIN_COOKIE)
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        given = auth[7:].strip()
    return same_token(given, state.admin_token)


def require_admin(state: WebState, request: Request) -> None:
    """Refuse a request without the admin token.

    Args:
        state: The server's state.
        request: The request.

    Raises:
        HTTPProblem: 401.
    """
    if not is_admin(state, request):
        raise HTTPProblem(
            401, "This page needs the admin token: open the admin link the server printed."
        )


def check_nonce(state: WebState, scope: str, nonce: str | None) -> NonceStatus:
    """Consume a POST's nonce.

    Args:
        state: The server's state.
        scope: What the form acts on (``"admin"`` or ``"s<record id>"``).
        nonce: The nonce the form carried.

    Returns:
        ``OK``, or ``REPLAYED`` for a nonce used before.

    Raises:
        HTTPProblem: 403 for a nonce this server never issued for ``scope``.
    """
    status = state.nonces.consume(scope, nonce)
    if status is NonceStatus.UNKNOWN:
        raise HTTPProblem(403, "This form is out of date or not from this server; reload the page.")
    return status


def fmt(value: float, low: float | None = None, high: float | None = None) -> str:
    """A number as the pages show it (:func:`~botorch_pref.web.renderers.format_value`).

    Args:
        value: The number.
        low: The lower bound of its parameter, if any (more digits in narrow bounds).
        high: The upper bound.

    Returns:
        The text.
    """
    return format_value(value, low, high)
