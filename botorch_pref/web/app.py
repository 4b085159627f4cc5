"""The ASGI application: its routes, error pages and lifespan.

Routes (``<token>`` is a session's capability token, ``<id>`` its opaque admin number):

==========================  ======  ==========================================================
``/``                       GET     a landing page (lists nothing)
``/static/app.js``,         GET     the page script (keyboard shortcuts, copy buttons), the
``/static/style.css``,              style sheet and the icon; no other path is served, nothing
``/favicon.ico``                    reads the file system
``/a/<token>``              GET     the answering page (or "preparing the next question");
                                    ``HEAD`` and previews change nothing
``/a/<token>/answer``       POST    ``nonce``, ``query_id``, ``choice`` (``0``..``q-1``,
                                    ``tie``, ``skip``)
``/a/<token>/undo``         POST    ``nonce``, ``answered``, ``retracted`` (the counts its
                                    page showed: 409 when an answer came or went since)
``/admin/login?token=``     GET     checks the admin token, sets it as a cookie
``/admin``                  GET     sessions with progress and links; the create form
``/admin/sessions``         POST    create a session
``/admin/status.json``      GET     sessions held in memory, preparations under way
``/admin/s/<id>``           GET     results view: recommendation, history, diagnostics
``/admin/s/<id>/utility.png``  GET  the learned utility through the recommendation
``/admin/s/<id>/graph.png``    GET  the comparison graph
``/admin/s/<id>/export.csv``,  GET  the session's exports (named after the session)
``/admin/s/<id>/export.json``
``/admin/s/<id>/revoke``,   POST    withdraw the session's answer link, or replace it
``/admin/s/<id>/rotate``            (``nonce``); the old link then gets 403
``/admin/links.csv``        GET     every session's full answer link (for a mail merge)
``/admin/export.csv``,      GET     every session of the file in one export
``/admin/export.json``
==========================  ======  ==========================================================

The routes live in :mod:`~botorch_pref.web.answering` (the session's token),
:mod:`~botorch_pref.web.admin` and :mod:`~botorch_pref.web.results` (the admin token). Admin
routes need the admin token (the ``botorch_pref_admin`` cookie set by the login link, or
``Authorization: Bearer <token>``); answering routes need the session's own token, which opens
that session only. Every POST carries a single-use nonce issued by a page of the same scope:
an unknown nonce gets 403, a replayed one 409. Answers name their query, so a second answer to
one query gets 409 "already answered" and nothing is written.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from botorch_pref.sessions import DatabaseBusyError, SessionError, SessionNotFoundError
from botorch_pref.web import admin, answering, results
from botorch_pref.web.security import BodyLimitMiddleware, SecurityHeadersMiddleware
from botorch_pref.web.server_state import (
    ADMIN_COOKIE,
    DEFAULT_PROMPT,
    STATIC,
    HTTPProblem,
    WebConfig,
    WebState,
    web_state,
)

__all__ = ["ADMIN_COOKIE", "DEFAULT_PROMPT", "WebConfig", "create_app"]


async def home(request: Request) -> Response:
    """GET ``/``: what this server is; it lists nothing."""
    return web_state(request).render("home.html")


async def static(request: Request) -> Response:
    """GET ``/static/<name>`` (and ``/favicon.ico``): one of the bundled files, from memory."""
    state = web_state(request)
    name = request.path_params.get("name", "favicon.ico")
    if name not in STATIC:
        raise HTTPProblem(404, "Not found.")
    return Response(state.static[name], media_type=STATIC[name])


def _message(request: Request, status: int, message: str) -> Response:
    return web_state(request).render(
        "message.html", status=status, message=message, status_code=status
    )


async def _problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPProblem)
    return _message(request, exc.status, exc.message)


async def _session_error(request: Request, exc: Exception) -> Response:
    """A session error no route handled: 503 while the database is busy, else 404 or 500."""
    if isinstance(exc, DatabaseBusyError):
        return _message(request, 503, "The database is busy; nothing was changed. Try again.")
    if isinstance(exc, SessionNotFoundError):
        return _message(request, 404, "No such session.")
    return _message(request, 500, f"The session could not do that: {exc}")


async def _not_found(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    return _message(
        request, status, {405: "Method not allowed.", 404: "Not found."}.get(status, "Error.")
    )


ROUTES = [
    Route("/", home),
    Route("/static/{name}", static),
    Route("/favicon.ico", static),
    Route("/a/{token}", answering.answer_page),
    Route("/a/{token}/answer", answering.answer_post, methods=["POST"]),
    Route("/a/{token}/undo", answering.undo_post, methods=["POST"]),
    Route("/admin", admin.admin_page),
    Route("/admin/login", admin.admin_login),
    Route("/admin/sessions", admin.admin_create, methods=["POST"]),
    Route("/admin/status.json", admin.admin_status),
    Route("/admin/links.csv", admin.admin_links_csv),
    Route("/admin/export.{fmt:str}", results.study_export),
    Route("/admin/s/{id:int}", results.results_page),
    Route("/admin/s/{id:int}/utility.png", results.utility_png),
    Route("/admin/s/{id:int}/graph.png", results.graph_png),
    Route("/admin/s/{id:int}/export.{fmt:str}", results.export),
    Route("/admin/s/{id:int}/{action:str}", admin.admin_link_action, methods=["POST"]),
]


def create_app(config: WebConfig) -> Starlette:
    """Build the application.

    Args:
        config: The server's settings.

    Returns:
        The Starlette application (its state's ``web`` is the
        :class:`~botorch_pref.web.server_state.WebState`; the workers stop when the application's
        lifespan ends).
    """
    state = WebState(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async def sweep() -> None:
            while True:
                await asyncio.sleep(max(1.0, config.idle_s / 4))
                state.preparer.sweep()

        state.preparer.start()
        task = asyncio.create_task(sweep())
        try:
            yield
        finally:
            task.cancel()
            await run_in_threadpool(state.close)

    middleware = [
        Middleware(SecurityHeadersMiddleware),
        Middleware(TrustedHostMiddleware, allowed_hosts=config.allowed_hosts),
        Middleware(BodyLimitMiddleware, max_body=config.max_body),
    ]
    app = Starlette(
        routes=ROUTES,
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
