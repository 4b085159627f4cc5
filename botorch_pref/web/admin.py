"""The admin routes: login, the sessions with their progress, creating one, the status.

Every route here needs the admin token (see :func:`~botorch_pref.web.server_state.require_admin`).
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from botorch_pref.loop import STRATEGIES
from botorch_pref.sessions import DatabaseBusyError, Session, SessionExistsError
from botorch_pref.sessions.answer_links import WebSession, page_settings
from botorch_pref.sessions.export import csv_text
from botorch_pref.sessions.settings import MAX_NAME, MAX_TEXT, check_name
from botorch_pref.web.nonces import NonceStatus
from botorch_pref.web.security import same_token
from botorch_pref.web.server_state import (
    ADMIN_COOKIE,
    DEFAULT_PROMPT,
    HTTPProblem,
    WebState,
    check_nonce,
    read_form,
    require_admin,
    web_state,
)

__all__ = [
    "PAGE_SIZE",
    "admin_create",
    "admin_link_action",
    "admin_links_csv",
    "admin_login",
    "admin_page",
    "admin_status",
    "answer_options",
    "base_url",
    "create_session",
    "link_rows",
    "parse_parameters",
    "session_rows",
]

_MAX_PARAMS = 50
#: Most levels of a graded or rating scale the create form takes (one button or radio button
#: each on the answer page).
MAX_LEVELS = 11


async def admin_login(request: Request) -> Response:
    """GET ``/admin/login?token=``: check the admin token and keep it in a cookie."""
    state = web_state(request)
    if not same_token(request.query_params.get("token"), state.admin_token):
        raise HTTPProblem(403, "Wrong admin token.")
    response = RedirectResponse("/admin", status_code=303)
    response.set_cookie(  # kept for 30 days: the admin token outlives a restart
        ADMIN_COOKIE,
        state.admin_token,
        max_age=30 * 24 * 3600,
        httponly=True,
        samesite="strict",
        path="/",
    )
    return response


#: Sessions per admin page.
PAGE_SIZE = 50


def session_rows(
    state: WebState, page: int = 1, per_page: int | None = None
) -> tuple[list[dict[str, Any]], int]:
    """A page of the file's sessions with their web records (made for sessions created
    elsewhere, on the pages shown).

    A session this version cannot open (e.g. of a strategy it does not know) gets no record:
    its row says why (``problem``) instead of giving links.

    Args:
        state: The server's state.
        page: The page, from 1 (a page past the last gives the last).
        per_page: Sessions per page (``None``: all on one page).

    Returns:
        ``(rows, pages)``: one row per session of the page, with ``record`` (``None`` for an
        unreadable one), ``problem`` (``""`` unless unreadable), ``summary``, ``answered``,
        ``budget``, ``done``; and the number of pages.
    """
    tokens = state.tokens()
    if tokens is None:
        return [], 1
    summaries = Session.list(state.path)
    size = per_page or max(1, len(summaries))
    pages = max(1, math.ceil(len(summaries) / size))
    page = min(max(1, page), pages)
    shown = summaries[(page - 1) * size : page * size]
    records = tokens.all()
    missing = [m for m in shown if m.name not in records and m.strategy in STRATEGIES]
    if missing:  # sessions created elsewhere get their links, in one transaction
        tokens.ensure_all([(m.name, "auto", DEFAULT_PROMPT, False) for m in missing])
        records = tokens.all()
    out = []
    for summary in shown:
        record, problem = records.get(summary.name), ""
        if summary.strategy not in STRATEGIES:
            record = None
            problem = f"Unreadable: strategy {summary.strategy!r} is unknown to this version."
        p = summary.progress
        out.append(
            {
                "record": record,
                "problem": problem,
                "summary": summary,
                "answered": p.answered,
                "budget": p.budget,
                "done": p.done,
            }
        )
    return out, pages


def base_url(request: Request) -> str:
    """The server's address as the request named it (answer links are built on it).

    Args:
        request: The request (its ``Host`` header was checked).

    Returns:
        ``scheme://host[:port]``.
    """
    return str(request.base_url).rstrip("/")


def _page_number(request: Request) -> int:
    text = request.query_params.get("page", "1")
    return int(text) if text.isascii() and text.isdigit() and len(text) < 7 else 1


def _admin_context(
    state: WebState,
    request: Request,
    form: dict[str, str] | None = None,
    error: str = "",
    notice: str = "",
) -> dict[str, Any]:
    page = _page_number(request)
    rows, pages = session_rows(state, page, PAGE_SIZE)
    return {
        "sessions": rows,
        "page": min(page, pages),
        "pages": pages,
        "base": base_url(request),
        "strategies": STRATEGIES,
        "renderers": ("auto", *state.renderers.names),
        "nonce": state.nonces.issue("admin"),
        "form": form or {},
        "error": error,
        "notice": notice,
        "path": str(state.path),
        "max_name": MAX_NAME,
        "max_text": MAX_TEXT,
        "max_levels": MAX_LEVELS,
    }


async def admin_page(request: Request) -> Response:
    """GET ``/admin``: the sessions and the create form."""
    state = web_state(request)
    require_admin(state, request)
    context = await run_in_threadpool(_admin_context, state, request)
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
        parts = line.rsplit(None, 2)  # "name low high", the name may hold ":" and spaces
        if len(parts) != 3 or not (_number(parts[1]) and _number(parts[2])):
            parts = line.rsplit(":", 2)  # "name:low:high"
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


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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


def answer_options(form: dict[str, str]) -> dict[str, Any]:
    """The optimiser settings of the create form's answers: ``answers="graded"`` with
    ``levels`` (blank: the loop's default scale), and ``ratings`` (blank: none).

    Args:
        form: The create form.

    Returns:
        The settings given (none for binary answers without ratings).

    Raises:
        ValueError: For an unknown kind of answers, or a scale that is not a whole number
            from 2 to :data:`MAX_LEVELS`.
    """
    answers = form.get("answers", "")
    if answers not in ("", "graded"):
        raise ValueError(f"answers is 'graded' or blank, got {answers[:20]!r}.")
    options: dict[str, Any] = {"answers": "graded"} if answers else {}
    for key in ("levels", "ratings"):
        value = _optional_int(form, key, 2)
        if value is not None and value > MAX_LEVELS:
            raise ValueError(f"{key} must be at most {MAX_LEVELS}, got {value}.")
        if value is not None:
            options[key] = value
    return options


def create_session(state: WebState, form: dict[str, str]) -> WebSession:
    """Create the session the create form describes, and its web record.

    Args:
        state: The server's state.
        form: The form (``name``, ``parameters``, ``strategy``, ``q``, ``budget``, ``seed``,
            ``renderer``, ``prompt``, ``show_best``; ``answers`` (``""`` or ``"graded"``),
            ``levels`` and ``ratings``: the graded and rating scales, see
            :func:`answer_options`).

    Returns:
        The new session's record.

    Raises:
        ValueError: For a bad field (a :class:`~botorch_pref.sessions.SessionError` included).
    """
    name = check_name(form.get("name", "").strip())
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
    if renderer != "auto" and renderer not in state.renderers.names:
        raise ValueError(f"Unknown renderer {renderer[:60]!r}.")
    prompt, renderer = page_settings(form.get("prompt", "").strip() or None, renderer)
    show = form.get("show_best", "")
    if show not in ("", "on", "1", "0"):
        raise ValueError(f"show_best is on or off, got {show[:20]!r}.")
    show_best = show in ("on", "1")
    options = answer_options(form)
    timeout = state.config.db_timeout
    Session.create(
        state.path, name, params, strategy, q, seed, budget=budget, timeout=timeout, **options
    ).close()
    tokens = state.tokens()
    assert tokens is not None  # the file exists now
    try:  # replace: a page seen since the session was created may have given it the defaults
        return tokens.ensure(name, renderer, prompt, show_best, replace=True)
    except DatabaseBusyError:  # not a ValueError here: the session exists, the form is spent
        raise HTTPProblem(
            503,
            f"Session {name!r} was created, but the database was too busy to store its renderer "
            "and question (it has the defaults); create another session to change them.",
        ) from None


async def admin_create(request: Request) -> Response:
    """POST ``/admin/sessions``: create a session and its answer link."""
    state = web_state(request)
    require_admin(state, request)
    form = await read_form(request)
    if check_nonce(state, "admin", form.get("nonce")) is NonceStatus.REPLAYED:
        raise HTTPProblem(409, "This form was already sent; nothing more was created.")

    def create() -> Response:
        try:
            record = create_session(state, form)
        except ValueError as err:  # SessionError included: nothing was created
            # so the same form may be sent again (corrected, or after a 503), not a replay
            state.nonces.release("admin", form.get("nonce"))
            if isinstance(err, DatabaseBusyError):
                raise
            status = 409 if isinstance(err, SessionExistsError) else 400
            context = _admin_context(state, request, form, str(err))
            return state.render("admin.html", status, **context)
        state.preparer.prepare(record.name)
        return RedirectResponse(f"/admin/s/{record.id}", status_code=303)

    return await run_in_threadpool(create)


async def admin_status(request: Request) -> Response:
    """GET ``/admin/status.json``: sessions held in memory, preparations, worker processes."""
    state = web_state(request)
    require_admin(state, request)
    live = await run_in_threadpool(state.preparer.live_sessions)
    pids = await run_in_threadpool(state.preparer.worker_pids)
    return JSONResponse(
        {
            "sessions_in_memory": live,
            "preparing": state.preparer.preparing_count(),
            "worker_pids": pids,
        }
    )


def link_rows(state: WebState, base: str) -> list[list[str]]:
    """Every session's answer link, for the CSV download (a mail merge's input).

    Args:
        state: The server's state.
        base: The server's address (:func:`base_url`).

    Returns:
        ``[session, answer_url, status]`` rows; ``answer_url`` is empty for a revoked link or
        one the link key cannot rebuild (``status`` says which).
    """
    rows, _ = session_rows(state)
    out = []
    for row in rows:
        record = row["record"]
        if record is None:
            url, status = "", row["problem"]
        elif record.revoked:
            url, status = "", "revoked"
        elif record.token is None:
            url, status = "", "not rebuildable: rotate it"
        else:
            url, status = f"{base}/a/{record.token}", "done" if row["done"] else "open"
        out.append([row["summary"].name, url, status])
    return out


async def admin_links_csv(request: Request) -> Response:
    """GET ``/admin/links.csv``: every session's name and full answer link."""
    state = web_state(request)
    require_admin(state, request)
    rows = await run_in_threadpool(link_rows, state, base_url(request))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["session", "answer_url", "status"])
    writer.writerows([[csv_text(c) for c in row] for row in rows])
    return Response(
        buf.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"content-disposition": 'attachment; filename="answer-links.csv"'},
    )


async def admin_link_action(request: Request) -> Response:
    """POST ``/admin/s/<id>/revoke`` or ``/rotate``: withdraw a session's answer link, or
    replace it with a new one (the old link then gets 403; the answers stay)."""
    state = web_state(request)
    require_admin(state, request)
    action = request.path_params["action"]
    if action not in ("revoke", "rotate"):
        raise HTTPProblem(404, "Not found.")
    form = await read_form(request)
    if check_nonce(state, "admin", form.get("nonce")) is NonceStatus.REPLAYED:
        raise HTTPProblem(409, "This form was already sent; nothing more was changed.")

    def act() -> Response:
        tokens = state.tokens()
        record = None if tokens is None else tokens.by_id(request.path_params["id"])
        if tokens is None or record is None:
            raise HTTPProblem(404, "No such session.")
        (tokens.revoke if action == "revoke" else tokens.rotate)(record.name)
        return RedirectResponse(f"/admin/s/{record.id}", status_code=303)

    return await run_in_threadpool(act)
