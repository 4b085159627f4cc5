"""The results view of a session and its downloads (admin token).

``/admin/s/<id>``: the recommendation, the comparison-graph diagnostics and the answer
history; its pictures (``utility.png``, ``graph.png``) are drawn by the session's worker, which
holds its model; ``export.csv`` and ``export.json`` are the session's exports.
"""

from __future__ import annotations

import io
import re
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from botorch_pref.sessions import HistoryEntry, SessionNotFoundError
from botorch_pref.sessions.answer_links import WebSession
from botorch_pref.sessions.export import export_study
from botorch_pref.sessions.scales import strength_words
from botorch_pref.web import held, plots
from botorch_pref.web.admin import base_url, session_rows
from botorch_pref.web.server_state import HTTPProblem, WebState, fmt, require_admin, web_state

__all__ = [
    "attachment",
    "export",
    "graph_png",
    "results_context",
    "results_page",
    "study_export",
    "utility_png",
]


async def _admin_request(request: Request) -> tuple[WebState, WebSession]:
    """The state and the record of the session an admin route names (admin token needed)."""
    state = web_state(request)
    return state, await run_in_threadpool(_admin_record, state, request)


def _admin_record(state: WebState, request: Request) -> WebSession:
    require_admin(state, request)
    tokens = state.tokens()
    record = None if tokens is None else tokens.by_id(request.path_params["id"])
    if record is None and tokens is not None:
        session_rows(state)  # sessions created elsewhere get their records
        record = tokens.by_id(request.path_params["id"])
    if record is None:
        raise HTTPProblem(404, "No such session.")
    return record


def _history_row(
    entry: HistoryEntry, bounds: dict[str, tuple[float, float]], levels: int | None
) -> dict[str, Any]:
    """A row of the answers table: the options, the answer (with its strength's name on the
    graded scale of ``levels`` levels, and the ratings as "option: level", numbered from 1),
    the times."""
    a, query = entry.stored, entry.query
    strength = a.answer.strength
    return {
        "number": query.number,
        "options": [
            ", ".join(f"{n}={fmt(v, *bounds[n])}" for n, v in o.items()) for o in query.as_dicts()
        ],
        "kind": a.answer.kind,
        "winner": a.answer.winner,
        "strength": "" if strength is None else strength_words(levels)[strength - 1],
        "ratings": ""
        if a.answer.ratings is None
        else ", ".join(f"{i + 1}: {r + 1}" for i, r in enumerate(a.answer.ratings)),
        "answered_at": a.answered_at,
        "response_s": None if a.response_s is None else f"{a.response_s:.1f}",
        "retracted": a.retracted_at is not None,
    }


def results_context(state: WebState, record: WebSession) -> dict[str, Any]:
    """What the results view shows (it reads the database and asks the worker: in a thread).

    Args:
        state: The server's state.
        record: The session's record.

    Returns:
        The template's variables.
    """
    try:
        with state.open(record.name) as s:
            history = s.history()
            progress = s.progress()
            settings = s.settings
            parameters = s.parameters
            levels = s.levels
            graph = plots.comparison_graph_summary(s)
    except SessionNotFoundError:
        raise HTTPProblem(404, "No such session.") from None
    bounds = {name: (low, high) for name, low, high in parameters}
    best = state.preparer.call(record.name, held.recommendation)
    reading = () if best is None else state.preparer.call(record.name, plots.parameter_reading)
    return {
        "record": record,
        "progress": progress,
        "settings": settings,
        "parameters": parameters,
        "history": [_history_row(entry, bounds, levels) for entry in history],
        "graph": graph,
        "reading": reading,
        "pairs": len(parameters) * (len(parameters) - 1) // 2,
        "best": best,
        "best_text": ""
        if best is None
        else ", ".join(
            f"{n} = {fmt(v, *bounds[n])}" for n, v in zip(bounds, best.x.tolist(), strict=True)
        ),
        "fmt": fmt,
    }


async def results_page(request: Request) -> Response:
    """GET ``/admin/s/<id>``: the results view."""
    state, record = await _admin_request(request)
    context = await run_in_threadpool(results_context, state, record)
    link = "" if record.token is None else f"{base_url(request)}/a/{record.token}"
    nonce = state.nonces.issue("admin")
    return state.render("results.html", **context, link=link, nonce=nonce)


async def _png(request: Request, draw: Any, *args: Any) -> Response:
    state, record = await _admin_request(request)
    png = await run_in_threadpool(state.preparer.call, record.name, draw, *args)
    if png is None:
        raise HTTPProblem(404, "Nothing to draw yet.")
    return Response(png, media_type="image/png")


async def utility_png(request: Request) -> Response:
    """GET ``/admin/s/<id>/utility.png``: the learned utility through the recommendation."""
    return await _png(request, plots.utility_png)


async def graph_png(request: Request) -> Response:
    """GET ``/admin/s/<id>/graph.png[?params=a,b,...]``: the comparison graph, one panel for
    every pair of parameters (of those named, when ``params`` names some)."""
    named = request.query_params.get("params", "")
    chosen = tuple(sorted(set(named.split(",")))) if named else None
    return await _png(request, plots.comparison_graph_png, chosen)


def attachment(stem: str, kind: str) -> dict[str, str]:
    """The ``Content-Disposition`` header of a download named after ``stem``.

    Args:
        stem: The file name without suffix (any text: a session's name).
        kind: The suffix.

    Returns:
        The header: an ASCII ``filename`` (other characters as ``_``) and the exact name as
        ``filename*`` (RFC 6266).
    """
    plain = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip(".") or "session"
    exact = quote(f"{stem}.{kind}", safe="")
    return {
        "content-disposition": f"attachment; filename=\"{plain}.{kind}\"; filename*=UTF-8''{exact}"
    }


def _export_kind(request: Request) -> str:
    kind = request.path_params["fmt"]
    if kind not in ("csv", "json"):
        raise HTTPProblem(404, "Exports are export.csv and export.json.")
    return kind


async def export(request: Request) -> Response:
    """GET ``/admin/s/<id>/export.csv`` or ``.json``: the session's export as a download named
    after the session."""
    state, record = await _admin_request(request)
    kind = _export_kind(request)

    def write() -> str:
        buf = io.StringIO()
        with state.open(record.name) as s:
            (s.export_csv if kind == "csv" else s.export_json)(buf)
        return buf.getvalue()

    text = await run_in_threadpool(write)
    media = "text/csv" if kind == "csv" else "application/json"
    return Response(
        text, media_type=f"{media}; charset=utf-8", headers=attachment(record.name, kind)
    )


async def study_export(request: Request) -> Response:
    """GET ``/admin/export.csv`` or ``.json``: every session of the file in one download."""
    state = web_state(request)
    require_admin(state, request)
    kind = _export_kind(request)

    def write() -> str:
        buf = io.StringIO()
        if state.path.exists():
            export_study(state.path, buf, kind)
        return buf.getvalue()

    text = await run_in_threadpool(write)
    media = "text/csv" if kind == "csv" else "application/json"
    return Response(
        text, media_type=f"{media}; charset=utf-8", headers=attachment(state.path.stem, kind)
    )
