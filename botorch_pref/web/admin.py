"""The admin routes: login, the sessions with their progress, creating one, the status.

Every route here needs the admin token (see :func:`~botorch_pref.web.state.require_admin`).
"""

from __future__ import annotations

import math
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from botorch_pref.loop import STRATEGIES
from botorch_pref.sessions import DatabaseBusyError, Session, SessionError, SessionExistsError
from botorch_pref.web.nonces import NonceStatus
from botorch_pref.web.renderers import default_renderer
from botorch_pref.web.security import same_token
from botorch_pref.web.state import (
    ADMIN_COOKIE,
    DEFAULT_PROMPT,
    HTTPProblem,
    WebState,
    check_nonce,
    read_form,
    require_admin,
    web_state,
)
from botorch_pref.web.tokens import WebSession

__all__ = [
    "admin_create",
    "admin_login",
    "admin_page",
    "admin_status",
    "create_session",
    "parse_parameters",
    "session_rows",
]

_MAX_NAME = 200
_MAX_PARAMS = 50
_MAX_PROMPT = 300


async def admin_login(request: Request) -> Response:
    """GET ``/admin/login?token=``: check the admin token and keep it in a cookie."""
    state = web_state(request)
    if not same_token(request.query_params.get("token"), state.config.admin_token):
        raise HTTPProblem(403, "Wrong admin token.")
    response = RedirectResponse("/admin", status_code=303)
    response.set_cookie(
        ADMIN_COOKIE, state.config.admin_token, httponly=True, samesite="strict", path="/"
    )
    return response


def session_rows(state: WebState) -> list[dict[str, Any]]:
    """Every session of the file with its web record (made for sessions created elsewhere).

    A session this version cannot open (e.g. of a strategy it does not know) gets no record:
    its row says why (``problem``) instead of giving links.

    Args:
        state: The server's state.

    Returns:
        One row per session: ``record`` (``None`` for an unreadable one), ``problem`` (``""``
        unless unreadable), ``summary``, ``answered``, ``budget``, ``done``.
    """
    if state.tokens() is None:
        return []
    out = []
    for summary in Session.list(state.path):
        record, problem = None, ""
        if summary.strategy not in STRATEGIES:
            problem = f"Unreadable: strategy {summary.strategy!r} is unknown to this version."
        else:
            try:
                record = state.record(summary.name)
            except DatabaseBusyError:
                raise
            except SessionError as err:
                problem = f"Unreadable: {err}"
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
    return out


def _admin_context(
    state: WebState, form: dict[str, str] | None = None, error: str = ""
) -> dict[str, Any]:
    from botorch_pref.loop import STRATEGIES

    return {
        "sessions": session_rows(state),
        "strategies": STRATEGIES,
        "renderers": ("auto", *state.renderers.names),
        "nonce": state.nonces.issue("admin"),
        "form": form or {},
        "error": error,
        "path": str(state.path),
    }


async def admin_page(request: Request) -> Response:
    """GET ``/admin``: the sessions and the create form."""
    state = web_state(request)
    require_admin(state, request)
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


def create_session(state: WebState, form: dict[str, str]) -> WebSession:
    """Create the session the create form describes, and its web record.

    Args:
        state: The server's state.
        form: The form (``name``, ``parameters``, ``strategy``, ``q``, ``budget``, ``seed``,
            ``renderer``, ``prompt``).

    Returns:
        The new session's record.

    Raises:
        ValueError: For a bad field (a :class:`~botorch_pref.sessions.SessionError` included).
    """
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
    prompt = form.get("prompt", "").strip()
    if len(prompt) > _MAX_PROMPT:  # refused, not cut: the page shows what was asked for
        raise ValueError(f"A question has at most {_MAX_PROMPT} characters, got {len(prompt)}.")
    prompt = prompt or DEFAULT_PROMPT
    Session.create(
        state.path, name, params, strategy, q, seed, budget=budget, timeout=state.config.db_timeout
    ).close()
    tokens = state.tokens()
    assert tokens is not None  # the file exists now
    try:  # replace: a page seen since the session was created may have given it the defaults
        return tokens.ensure(name, renderer, prompt, replace=True)
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
            return state.render("admin.html", status, **_admin_context(state, form, str(err)))
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
