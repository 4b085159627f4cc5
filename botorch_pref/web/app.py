"""The ASGI application: answering pages, the admin pages, exports and the results view.

Routes (``<token>`` is a session's capability token, ``<id>`` its opaque admin number):

==========================  ======  ==========================================================
``/``                       GET     a landing page (lists nothing)
``/static/app.js``,         GET     the page script (keyboard shortcuts) and style sheet; no
``/static/style.css``               other path is served, nothing reads the file system
``/a/<token>``              GET     the answering page (or "preparing the next question")
``/a/<token>/answer``       POST    ``nonce``, ``query_id``, ``choice`` (``0``..``q-1``,
                                    ``tie``, ``skip``)
``/a/<token>/undo``         POST    ``nonce``
``/admin/login?token=``     GET     checks the admin token, sets it as a cookie
``/admin``                  GET     sessions with progress and links; the create form
``/admin/sessions``         POST    create a session
``/admin/status.json``      GET     sessions held in memory, preparations under way
``/admin/s/<id>``           GET     results view: recommendation, history, diagnostics
``/admin/s/<id>/utility.png``  GET  the learned utility through the recommendation
``/admin/s/<id>/graph.png``    GET  the comparison graph
``/admin/s/<id>/export.csv``,  GET  the session's exports
``/admin/s/<id>/export.json``
==========================  ======  ==========================================================

Admin routes need the admin token (the ``botorch_pref_admin`` cookie set by the login link, or
``Authorization: Bearer <token>``); answering routes need the session's own token, which opens
that session only. Every POST carries a single-use nonce issued by a page of the same scope:
an unknown nonce gets 403, a replayed one 409. Answers name their query, so a second answer to
one query gets 409 "already answered" and nothing is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from botorch_pref.sessions import (
    DatabaseBusyError,
    InvalidAnswerError,
    QueryNotPendingError,
    Session,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
)
from botorch_pref.web.nonces import NonceStatus, NonceStore
from botorch_pref.web.renderers import RendererSet, default_renderer
from botorch_pref.web.security import BodyLimitMiddleware, SecurityHeadersMiddleware, same_token
from botorch_pref.web.tokens import TokenStore, WebSession
from botorch_pref.web.workers import Preparer

__all__ = ["ADMIN_COOKIE", "DEFAULT_PROMPT", "WebConfig", "create_app"]

ADMIN_COOKIE = "botorch_pref_admin"
DEFAULT_PROMPT = "Which do you prefer?"
_STATIC = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
_MAX_NAME = 200
_MAX_PARAMS = 50


@dataclass
class WebConfig:
    """Settings of a server.

    Attributes:
        path: The session database file (created with the first session when missing).
        admin_token: The admin token.
        renderers: User renderer specs (``module:function``) offered besides the built-in ones.
        workers: Query-preparing worker threads.
        idle_s: Seconds after which an unused session is dropped from memory.
        max_body: Most bytes of a request body.
        allowed_hosts: ``Host`` headers accepted (``["*"]`` for any).
        refresh_s: Seconds between refreshes of the "preparing" page.
        db_timeout: Seconds a request waits for the database's write lock before 503.
    """

    path: Path
    admin_token: str
    renderers: list[str] = field(default_factory=list)
    workers: int = 1
    idle_s: float = 600.0
    max_body: int = 16 * 1024
    allowed_hosts: list[str] = field(default_factory=lambda: ["*"])
    refresh_s: int = 1
    db_timeout: float = 30.0


class HTTPProblem(Exception):
    """An error page with a status."""

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
        self.nonces = NonceStore()
        self.renderers = RendererSet(config.renderers)
        self.preparer = Preparer(self.path, workers=config.workers, idle_s=config.idle_s)
        self._tokens: TokenStore | None = None
        self._tokens_lock = threading.Lock()
        self.templates = jinja2.Environment(
            loader=jinja2.PackageLoader("botorch_pref.web", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        base = resources.files("botorch_pref.web") / "static"
        self.static = {name: (base / name).read_bytes() for name in _STATIC}

    def tokens(self) -> TokenStore | None:
        """The token table, opened once the database file exists.

        Returns:
            The store, or ``None`` while there is no database.
        """
        with self._tokens_lock:
            if self._tokens is None and self.path.exists():
                Session.list(self.path)  # checks it is a session database before writing
                self._tokens = TokenStore(self.path)
            return self._tokens

    def open(self, name: str) -> Session:
        """Open a session on a new connection (for one request; close it).

        Args:
            name: The session's name.

        Returns:
            The session.
        """
        return Session.open(self.path, name, timeout=self.config.db_timeout)

    def record(self, name: str, renderer: str | None = None, prompt: str = "") -> WebSession:
        """The web record of a session, made on first sight (sessions created elsewhere).

        Args:
            name: The session's name.
            renderer: Renderer for a new record (default: by the parameter names).
            prompt: Question for a new record.

        Returns:
            The record.
        """
        tokens = self.tokens()
        assert tokens is not None
        found = tokens.by_name(name)
        if found is not None:
            return found
        if renderer is None:
            with self.open(name) as s:
                renderer = default_renderer(s.names)
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
        """Stop the workers and close the token table."""
        self.preparer.close()
        with self._tokens_lock:
            if self._tokens is not None:
                self._tokens.close()
                self._tokens = None


# ------------------------------------------------------------------ helpers
def _state(request: Request) -> WebState:
    return request.app.state.web


async def _form(request: Request) -> dict[str, str]:
    """A url-encoded form's fields (one value each); anything else is 415."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise HTTPProblem(415, "Forms must be sent as application/x-www-form-urlencoded.")
    body = await request.body()
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=100)
    except (UnicodeDecodeError, ValueError):
        raise HTTPProblem(400, "Malformed form.") from None
    return {k: v[-1] for k, v in fields.items()}


def _annotator(state: WebState, token: str) -> WebSession:
    tokens = state.tokens()
    record = None if tokens is None else tokens.by_token(token)
    if record is None:
        raise HTTPProblem(404, "No session has this link. Ask for your link again.")
    return record


def _is_admin(state: WebState, request: Request) -> bool:
    given = request.cookies.get(ADMIN_COOKIE)
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        given = auth[7:].strip()
    return same_token(given, state.config.admin_token)


def _require_admin(state: WebState, request: Request) -> None:
    if not _is_admin(state, request):
        raise HTTPProblem(
            401, "This page needs the admin token: open the admin link the server printed."
        )


def _check_nonce(state: WebState, scope: str, nonce: str | None) -> NonceStatus:
    status = state.nonces.consume(scope, nonce)
    if status is NonceStatus.UNKNOWN:
        raise HTTPProblem(403, "This form is out of date or not from this server; reload the page.")
    return status


def _format(value: float) -> str:
    return f"{value:.4g}"


# --------------------------------------------------------- answering page
def _answer_context(state: WebState, record: WebSession, notice: str = "") -> dict[str, Any]:
    """Everything the answering page shows (runs in a thread: it reads the database)."""
    with state.open(record.name) as s:
        progress = s.progress()
        query = s.pending()
        parameters = s.parameters
        q = s.q
    prepared = state.preparer.prepared(record.name)
    needs_work = (query is None and not progress.done) or prepared is None
    if query is not None and prepared is not None and prepared.query_id != query.id:
        needs_work = True  # e.g. after an undo: the recommendation is to be refreshed
    if needs_work:
        state.preparer.prepare(record.name)
    bounds = {n: (lo, hi) for n, lo, hi in parameters}
    options = []
    if query is not None:
        for i, values in enumerate(query.as_dicts()):
            options.append(
                {"index": i, "drawn": state.renderers.render(record.renderer, values, bounds)}
            )
    best = None if prepared is None else prepared.best
    scope = f"s{record.id}"
    return {
        "record": record,
        "query": query,
        "q": q,
        "options": options,
        "progress": progress,
        "budget": progress.budget,
        "best": None
        if best is None
        else {
            "drawn": state.renderers.render(record.renderer, best.x, bounds),
            "mean": _format(best.mean),
            "std": _format(best.std),
        },
        "preparing": query is None and not progress.done,
        "error": "" if prepared is None else prepared.error,
        "done": query is None and progress.done,
        "answer_nonce": state.nonces.issue(scope) if query is not None else "",
        "undo_nonce": state.nonces.issue(scope),
        "notice": notice,
        "refresh_s": state.config.refresh_s,
    }


async def answer_page(request: Request) -> Response:
    """GET ``/a/<token>``: the pending query, or "preparing the next question"."""
    state = _state(request)
    record = await run_in_threadpool(_annotator, state, request.path_params["token"])
    context = await run_in_threadpool(_answer_context, state, record)
    return state.render("answer.html", **context)


def _parse_choice(form: dict[str, str], q: int) -> tuple[int, dict[str, Any]]:
    try:
        query_id = int(form.get("query_id", ""))
    except ValueError:
        raise HTTPProblem(400, "The answer does not name its query.") from None
    choice = form.get("choice", "")
    if choice == "tie":
        return query_id, {"tie": True}
    if choice == "skip":
        return query_id, {"skip": True}
    if choice.isdigit() and len(choice) < 4 and int(choice) < q:
        return query_id, {"winner": int(choice)}
    raise HTTPProblem(400, f"Unknown choice {choice[:20]!r}.")


def _already(state: WebState, record: WebSession, message: str) -> Response:
    context = _answer_context(state, record, notice=message)
    return state.render("answer.html", status=409, **context)


async def answer_post(request: Request) -> Response:
    """POST ``/a/<token>/answer``: record the answer, queue the next query, go back to the page."""
    state = _state(request)
    token = request.path_params["token"]
    record = await run_in_threadpool(_annotator, state, token)
    form = await _form(request)
    if _check_nonce(state, f"s{record.id}", form.get("nonce")) is NonceStatus.REPLAYED:
        return await run_in_threadpool(
            _already, state, record, "That question was already answered: here is the next one."
        )

    def write() -> Response | None:
        with state.open(record.name) as s:
            query_id, answer = _parse_choice(form, s.q)
            try:
                s.answer(query_id, **answer)
            except QueryNotPendingError:
                return None
            except InvalidAnswerError as err:
                raise HTTPProblem(400, str(err)) from None
        state.preparer.prepare(record.name)
        return RedirectResponse(f"/a/{token}", status_code=303)

    response = await run_in_threadpool(write)
    if response is None:
        return await run_in_threadpool(
            _already, state, record, "That question was already answered: here is the next one."
        )
    return response


async def undo_post(request: Request) -> Response:
    """POST ``/a/<token>/undo``: retract the last answer; its query is asked again."""
    state = _state(request)
    token = request.path_params["token"]
    record = await run_in_threadpool(_annotator, state, token)
    form = await _form(request)
    if _check_nonce(state, f"s{record.id}", form.get("nonce")) is NonceStatus.REPLAYED:
        return await run_in_threadpool(_already, state, record, "That undo was already done.")

    def write() -> Response | None:
        with state.open(record.name) as s:
            try:
                s.undo()
            except SessionError:
                return None
        state.preparer.prepare(record.name)
        return RedirectResponse(f"/a/{token}", status_code=303)

    response = await run_in_threadpool(write)
    if response is None:
        return await run_in_threadpool(_already, state, record, "There is nothing to undo.")
    return response


# ------------------------------------------------------------------ admin
async def admin_login(request: Request) -> Response:
    """GET ``/admin/login?token=``: check the admin token and keep it in a cookie."""
    state = _state(request)
    if not same_token(request.query_params.get("token"), state.config.admin_token):
        raise HTTPProblem(403, "Wrong admin token.")
    response = RedirectResponse("/admin", status_code=303)
    response.set_cookie(
        ADMIN_COOKIE, state.config.admin_token, httponly=True, samesite="strict", path="/"
    )
    return response


def _sessions(state: WebState) -> list[dict[str, Any]]:
    if state.tokens() is None:
        return []
    out = []
    for summary in Session.list(state.path):
        record = state.record(summary.name)
        p = summary.progress
        out.append(
            {
                "record": record,
                "summary": summary,
                "answered": p.answered,
                "budget": p.budget,
                "done": p.done,
            }
        )
    return out


def _admin_context(state: WebState, form: dict[str, str] | None = None, error: str = ""):
    from botorch_pref.loop import STRATEGIES

    return {
        "sessions": _sessions(state),
        "strategies": STRATEGIES,
        "renderers": ("auto", *state.renderers.names),
        "nonce": state.nonces.issue("admin"),
        "form": form or {},
        "error": error,
        "path": str(state.path),
    }


async def admin_page(request: Request) -> Response:
    """GET ``/admin``: the sessions and the create form."""
    state = _state(request)
    _require_admin(state, request)
    context = await run_in_threadpool(_admin_context, state)
    return state.render("admin.html", **context)


def parse_parameters(text: str) -> list[tuple[str, float, float]]:
    """Parameters from the create form: one ``name low high`` (or ``name:low:high``) a line.

    Args:
        text: The form field.

    Returns:
        ``(name, low, high)`` triples.

    Raises:
        ValueError: For a malformed line.
    """
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        parts = line.rsplit(":", 2) if ":" in line else line.rsplit(None, 2)
        if len(parts) != 3:
            raise ValueError(f"Write each parameter as 'name low high', got {line[:60]!r}.")
        name = parts[0].strip()
        try:
            low, high = float(parts[1]), float(parts[2])
        except ValueError:
            raise ValueError(f"Bounds must be numbers in {line[:60]!r}.") from None
        if not (math.isfinite(low) and math.isfinite(high)):
            raise ValueError(f"Bounds must be finite in {line[:60]!r}.")
        out.append((name, low, high))
    if not out:
        raise ValueError("Give at least one parameter.")
    if len(out) > _MAX_PARAMS:
        raise ValueError(f"At most {_MAX_PARAMS} parameters.")
    return out


def _optional_int(form: dict[str, str], key: str, low: int) -> int | None:
    value = form.get(key, "").strip()
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{key} must be a whole number, got {value[:20]!r}.") from None
    if number < low:
        raise ValueError(f"{key} must be at least {low}.")
    return number


def _create(state: WebState, form: dict[str, str]) -> WebSession:
    from botorch_pref.loop import STRATEGIES

    name = form.get("name", "").strip()
    if not name or len(name) > _MAX_NAME:
        raise ValueError(f"A session name has 1 to {_MAX_NAME} characters.")
    params = parse_parameters(form.get("parameters", ""))
    strategy = form.get("strategy", "eubo")
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown strategy {strategy[:30]!r}.")
    q = _optional_int(form, "q", 2) or 2
    if q > 8:
        raise ValueError("At most 8 options per query.")
    budget = _optional_int(form, "budget", 1)
    seed = _optional_int(form, "seed", 0)
    renderer = form.get("renderer", "auto")
    if renderer == "auto":
        renderer = default_renderer([p[0] for p in params])
    if renderer not in state.renderers.names:
        raise ValueError(f"Unknown renderer {renderer[:60]!r}.")
    prompt = form.get("prompt", "").strip()[:300] or DEFAULT_PROMPT
    Session.create(
        state.path, name, params, strategy, q, seed, budget=budget, timeout=state.config.db_timeout
    ).close()
    return state.record(name, renderer, prompt)


async def admin_create(request: Request) -> Response:
    """POST ``/admin/sessions``: create a session and its answer link."""
    state = _state(request)
    _require_admin(state, request)
    form = await _form(request)
    if _check_nonce(state, "admin", form.get("nonce")) is NonceStatus.REPLAYED:
        raise HTTPProblem(409, "This form was already sent; nothing more was created.")

    def create() -> Response:
        try:
            record = _create(state, form)
        except SessionExistsError as err:
            return state.render("admin.html", 409, **_admin_context(state, form, str(err)))
        except ValueError as err:  # SessionError included
            return state.render("admin.html", 400, **_admin_context(state, form, str(err)))
        state.preparer.prepare(record.name)
        return RedirectResponse(f"/admin/s/{record.id}", status_code=303)

    return await run_in_threadpool(create)


def _admin_record(state: WebState, request: Request) -> WebSession:
    _require_admin(state, request)
    tokens = state.tokens()
    record = None if tokens is None else tokens.by_id(request.path_params["id"])
    if record is None and tokens is not None:
        _sessions(state)  # sessions created elsewhere get their records
        record = tokens.by_id(request.path_params["id"])
    if record is None:
        raise HTTPProblem(404, "No such session.")
    return record


def _results_context(state: WebState, record: WebSession) -> dict[str, Any]:
    from botorch_pref.web.plots import comparison_graph_summary

    try:
        with state.open(record.name) as s:
            history = s.history()
            progress = s.progress()
            settings = s.settings
            parameters = s.parameters
    except SessionNotFoundError:
        raise HTTPProblem(404, "No such session.") from None
    graph = state.preparer.call(record.name, comparison_graph_summary)
    best = state.preparer.call(record.name, lambda s: s.best())
    rows = []
    for entry in history:
        a, query = entry.answer, entry.query
        rows.append(
            {
                "number": query.number,
                "options": [
                    ", ".join(f"{n}={_format(v)}" for n, v in o.items()) for o in query.as_dicts()
                ],
                "kind": a.kind,
                "winner": a.winner,
                "answered_at": a.answered_at,
                "response_s": None if a.response_s is None else f"{a.response_s:.1f}",
                "retracted": a.retracted_at is not None,
            }
        )
    return {
        "record": record,
        "progress": progress,
        "settings": settings,
        "parameters": parameters,
        "history": rows,
        "graph": graph,
        "best": best,
        "best_text": ""
        if best is None
        else ", ".join(f"{n} = {_format(v)}" for n, v in best.x.items()),
        "fmt": _format,
    }


async def results_page(request: Request) -> Response:
    """GET ``/admin/s/<id>``: the results view."""
    state = _state(request)
    record = await run_in_threadpool(_admin_record, state, request)
    context = await run_in_threadpool(_results_context, state, record)
    return state.render("results.html", **context, link=f"/a/{record.token}")


async def _png(request: Request, draw: Any) -> Response:
    state = _state(request)
    record = await run_in_threadpool(_admin_record, state, request)
    png = await run_in_threadpool(state.preparer.call, record.name, draw)
    if png is None:
        raise HTTPProblem(404, "Nothing to draw yet.")
    return Response(png, media_type="image/png")


async def utility_png(request: Request) -> Response:
    """GET ``/admin/s/<id>/utility.png``."""
    from botorch_pref.web.plots import utility_png as draw

    return await _png(request, draw)


async def graph_png(request: Request) -> Response:
    """GET ``/admin/s/<id>/graph.png``."""
    from botorch_pref.web.plots import comparison_graph_png as draw

    return await _png(request, draw)


async def export(request: Request) -> Response:
    """GET ``/admin/s/<id>/export.csv`` or ``.json``: the session's export as a download."""
    state = _state(request)
    record = await run_in_threadpool(_admin_record, state, request)
    fmt = request.path_params["fmt"]
    if fmt not in ("csv", "json"):
        raise HTTPProblem(404, "Exports are export.csv and export.json.")

    def write() -> str:
        buf = io.StringIO()
        with state.open(record.name) as s:
            (s.export_csv if fmt == "csv" else s.export_json)(buf)
        return buf.getvalue()

    text = await run_in_threadpool(write)
    media = "text/csv" if fmt == "csv" else "application/json"
    filename = f"session-{record.id}.{fmt}"
    return Response(
        text,
        media_type=f"{media}; charset=utf-8",
        headers={"content-disposition": f'attachment; filename="{filename}"'},
    )


async def admin_status(request: Request) -> Response:
    """GET ``/admin/status.json``: sessions held in memory and preparations under way."""
    state = _state(request)
    _require_admin(state, request)
    live = await run_in_threadpool(state.preparer.live_sessions)
    return JSONResponse({"sessions_in_memory": live, "preparing": state.preparer.preparing_count()})


# ------------------------------------------------------------------ other
async def home(request: Request) -> Response:
    """GET ``/``: what this server is; it lists nothing."""
    return _state(request).render("home.html")


async def static(request: Request) -> Response:
    """GET ``/static/<name>``: one of the two bundled files, from memory."""
    state = _state(request)
    name = request.path_params["name"]
    if name not in _STATIC:
        raise HTTPProblem(404, "Not found.")
    return Response(state.static[name], media_type=_STATIC[name])


async def _problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPProblem)
    state = _state(request)
    return state.render(
        "message.html", status=exc.status, message=exc.message, status_code=exc.status
    )


async def _session_error(request: Request, exc: Exception) -> Response:
    """A session error no route handled: 503 while the database is busy, else 404 or 500."""
    if isinstance(exc, DatabaseBusyError):
        status, message = 503, "The database is busy; nothing was changed. Try again."
    elif isinstance(exc, SessionNotFoundError):
        status, message = 404, "No such session."
    else:
        status, message = 500, f"The session could not do that: {exc}"
    return _state(request).render(
        "message.html", status=status, message=message, status_code=status
    )


async def _not_found(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    text = {405: "Method not allowed.", 404: "Not found."}.get(status, "Error.")
    return _state(request).render("message.html", status=status, message=text, status_code=status)


def create_app(config: WebConfig) -> Starlette:
    """Build the application.

    Args:
        config: The server's settings.

    Returns:
        The Starlette application (its state's ``web`` is the :class:`WebState`; the workers
        stop when the application's lifespan ends).
    """
    state = WebState(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async def sweep() -> None:
            while True:
                await asyncio.sleep(max(1.0, config.idle_s / 4))
                state.preparer.sweep()

        task = asyncio.create_task(sweep())
        try:
            yield
        finally:
            task.cancel()
            await run_in_threadpool(state.close)

    routes = [
        Route("/", home),
        Route("/static/{name}", static),
        Route("/a/{token}", answer_page),
        Route("/a/{token}/answer", answer_post, methods=["POST"]),
        Route("/a/{token}/undo", undo_post, methods=["POST"]),
        Route("/admin", admin_page),
        Route("/admin/login", admin_login),
        Route("/admin/sessions", admin_create, methods=["POST"]),
        Route("/admin/status.json", admin_status),
        Route("/admin/s/{id:int}", results_page),
        Route("/admin/s/{id:int}/utility.png", utility_png),
        Route("/admin/s/{id:int}/graph.png", graph_png),
        Route("/admin/s/{id:int}/export.{fmt:str}", export),
    ]
    middleware = [
        Middleware(SecurityHeadersMiddleware),
        Middleware(TrustedHostMiddleware, allowed_hosts=config.allowed_hosts),
        Middleware(BodyLimitMiddleware, max_body=config.max_body),
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            HTTPProblem: _problem,
            SessionError: _session_error,
            404: _not_found,
            405: _not_found,
        },
        lifespan=lifespan,
    )
    app.state.web = state
    return app
