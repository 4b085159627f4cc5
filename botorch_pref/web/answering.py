"""The answering routes: a session's page, its answer and its undo (the session's own token).

``GET /a/<token>`` shows the pending query. When there is none yet, it queues the next one on
the session's worker and waits for it a little
(:attr:`~botorch_pref.web.server_state.WebConfig.wait_s`) before it shows "preparing the next
question" and refreshes itself. An answer (or an undo) is committed before its response, in one
short transaction shared with the answers that arrive at the same moment
(:mod:`~botorch_pref.web.writes`): it never waits for a worker. An answer names the query it
answers, so a second answer to one query gets 409 "already answered", the next query, and
nothing is written.

A session with a graded scale of ``k`` levels (``answers="graded"``) shows a pair as one row of
``k`` buttons, "Option 1 much better" .. "Option 2 much better" with "About the same" in the
middle of an odd scale (:func:`~botorch_pref.sessions.scales.graded_positions`); the form sends
the position as ``grade``. A session with a rating scale (``ratings=k``) shows ``k`` labelled
radio buttons per option (``rating-<option>``: the level, 0 the worst), required for every
answer but a skip. :func:`parse_choice` reads both; the session checks them
(:meth:`~botorch_pref.sessions.Session.answer`): a position or level off the scale, or ratings
of some options only, get 400 and nothing is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from botorch_pref.sessions import (
    DatabaseBusyError,
    InvalidAnswerError,
    QueryNotPendingError,
    Session,
    SessionError,
)
from botorch_pref.sessions.answer_links import WebSession
from botorch_pref.sessions.scales import graded_positions, rating_words
from botorch_pref.web.nonces import NonceStatus
from botorch_pref.web.server_state import (
    HTTPProblem,
    WebState,
    annotator,
    read_form,
    web_state,
)

__all__ = [
    "STALE_FORM",
    "answer_context",
    "answer_page",
    "answer_post",
    "is_browser_render",
    "parse_choice",
    "parse_seen",
    "undo_post",
    "undone_notice",
]

ALREADY_ANSWERED = "That question was already answered: here is the next one."
_NOT_OPEN = "That question is not open: nothing was recorded. Here is the current question."
#: What the page says when the question a form answers no longer awaits an answer, by the
#: :attr:`~botorch_pref.sessions.QueryNotPendingError.reason` the store gives.
NOT_PENDING = {
    "answered": ALREADY_ANSWERED,
    "withdrawn": (
        "That question was withdrawn: an answer was undone since it was shown, so nothing was "
        "recorded. Here is the current question."
    ),
    "imported": _NOT_OPEN,
    "unknown": _NOT_OPEN,
}
STALE_UNDO = (
    "That page was out of date: an answer was given or undone since it was shown, so nothing "
    "was undone. Here is the page as it is now."
)


#: What an undo withdrew, as the page after it names it (the ``undone`` query parameter).
UNDONE = {
    "tie": "“no preference”",
    "skip": "a skip",
    "ranking": "a ranking",
    "rating": "your ratings",
}
#: What the page says to a form it cannot check (from before the server's key changed, or
#: older than a nonce lives): nothing was recorded, the current question is shown.
STALE_FORM = (
    "That page was out of date (the server was restarted or the page was left open for hours), "
    "so nothing was recorded. Here is the current question."
)


def answer_context(
    state: WebState, record: WebSession, browser: bool = True, undone: str = ""
) -> dict[str, Any]:
    """What the answering page shows; queues the next query when it is missing.

    It reads the database: call it in a thread.

    Args:
        state: The server's state.
        record: The session's record.
        browser: The page is rendered for a person's browser: the pending query is marked
            shown now (its response time counts from now). A ``HEAD`` request or a link
            preview neither marks it nor prepares one.
        undone: What the undo before this page withdrew (see :func:`undone_notice`).

    Returns:
        The template's variables (without the forms' nonces).
    """
    with state.open(record.name) as s:
        progress = s.progress()
        query = s.pending()
        parameters = s.parameters
        q = s.q
        levels, rating_levels = s.levels, s.rating_levels
    if browser and query is not None:
        state.writes.run(record.name, lambda s: s.mark_shown())
    prepared = state.preparer.prepared(record.name)
    done = query is None and progress.done
    current = prepared is not None and prepared.answers == progress.answered
    needs_work = (query is None and not progress.done) or prepared is None or not current
    if query is not None and prepared is not None and prepared.query_id != query.id:
        needs_work = True  # e.g. after an undo: the recommendation is to be refreshed
    if needs_work and browser:
        state.preparer.prepare(record.name)
    bounds = {n: (lo, hi) for n, lo, hi in parameters}
    draw = state.renderers.render
    options = []
    if query is not None:
        options = [
            {"index": i, "drawn": draw(record.renderer, values, bounds)}
            for i, values in enumerate(query.as_dicts())
        ]
    best = None
    if record.show_best and current and prepared is not None and prepared.best is not None:
        b = prepared.best
        values = dict(zip(bounds, b.x.tolist(), strict=True))
        best = {"drawn": draw(record.renderer, values, bounds)}
    return {
        "record": record,
        "query": query,
        "number": progress.answered + 1,
        "q": q,
        "options": options,
        "scale": _scale(levels, q),
        "rating_words": None if rating_levels is None else rating_words(rating_levels),
        "progress": progress,
        "budget": progress.budget,
        "best": best,
        "show_best": record.show_best,
        "preparing": query is None and not progress.done,
        # the final recommendation is being computed: the page refreshes until it is
        "finishing": done and record.show_best and not current,
        "error": "" if prepared is None else prepared.error,
        "done": done,
        "can_undo": progress.answered > 0 and not done,
        "undone": undone,
        "refresh_s": state.config.refresh_s,
    }


def _scale(levels: int | None, q: int) -> list[dict[str, Any]] | None:
    """The graded scale's buttons of a pair (``None`` without a graded scale)."""
    if levels is None or q != 2:
        return None
    return [
        {"label": p.label, "middle": p.tie}
        for p in graded_positions(levels, ("Option 1", "Option 2"))
    ]


def undone_notice(undone: str) -> str:
    """What the page after an undo says it withdrew.

    Args:
        undone: The ``undone`` query parameter: ``1``..``8`` (the option chosen), ``tie``,
            ``skip`` or ``ranking``; anything else says nothing.

    Returns:
        The notice, or ``""``.
    """
    if _digits(undone, 1) and 1 <= int(undone) <= 8:
        what = f"your choice of option {undone}"
    elif undone in UNDONE:
        what = UNDONE[undone]
    else:
        return ""
    return f"Undone: {what} was withdrawn. That question is asked again below."


def _render(state: WebState, context: dict[str, Any], notice: str = "", status: int = 200):
    """The answering page, with fresh nonces for its forms."""
    scope = f"s{context['record'].id}"
    answer_nonce = state.nonces.issue(scope) if context["query"] is not None else ""
    return state.render(
        "answer.html",
        status=status,
        answer_nonce=answer_nonce,
        undo_nonce=state.nonces.issue(scope) if context["can_undo"] else "",
        notice=notice or undone_notice(context["undone"]),
        **context,
    )


async def _prepared_in_time(state: WebState, name: str) -> bool:
    """Wait (bounded, without a thread) for the session's preparation under way."""
    future = state.preparer.running(name)
    if future is None or state.config.wait_s <= 0:
        return False
    done, _ = await asyncio.wait([asyncio.wrap_future(future)], timeout=state.config.wait_s)
    return bool(done)


def is_browser_render(request: Request) -> bool:
    """Whether a request is a person's browser opening the page (not a ``HEAD``, a prefetch
    or a link preview that says what it is).

    Args:
        request: The request.

    Returns:
        The flag.
    """
    if request.method != "GET":
        return False
    headers = request.headers
    purpose = (headers.get("sec-purpose") or headers.get("purpose") or "").lower()
    if "prefetch" in purpose or "prerender" in purpose:
        return False
    return headers.get("sec-fetch-dest", "document").lower() in ("document", "iframe")


async def answer_page(request: Request) -> Response:
    """GET ``/a/<token>``: the pending query, or "preparing the next question".

    A ``HEAD`` request gets the headers alone: it writes nothing, prepares nothing.
    """
    state = web_state(request)
    token = request.path_params["token"]
    record = await run_in_threadpool(annotator, state, token)
    if request.method == "HEAD":
        return Response(media_type="text/html; charset=utf-8")
    browser = is_browser_render(request)
    undone = request.query_params.get("undone", "")
    context = await run_in_threadpool(answer_context, state, record, browser, undone)
    waiting = context["preparing"] or context["finishing"]
    if browser and waiting and await _prepared_in_time(state, record.name):
        context = await run_in_threadpool(answer_context, state, record, browser, undone)
    return _render(state, context)


def _digits(text: str, most: int) -> bool:
    """Whether ``text`` is 1 to ``most`` ASCII digits (``int()`` also reads ``"1_0"``, ``" 10"``
    and ``"+10"`` as 10, and other scripts' digits)."""
    return text.isascii() and text.isdigit() and len(text) <= most


def parse_choice(
    form: dict[str, str], q: int, levels: int | None = None
) -> tuple[int, dict[str, Any]]:
    """The query an answer form names and the answer, as :meth:`Session.answer` takes it.

    Args:
        form: The form: ``query_id``; ``choice`` (``0``..``q-1``, ``tie`` or ``skip``) or
            ``grade`` (a position ``0..levels-1`` of the graded scale, module docstring); and
            ``rating-<i>`` for each option ``i`` when rated (left out of a skip).
        q: Options per query.
        levels: The session's graded scale's number of levels, or ``None``.

    Returns:
        ``(query_id, keyword arguments of Session.answer)``; the ratings' levels are passed as
        given, for the session to check against its scale.

    Raises:
        HTTPProblem: 400 for a form without a query id, with an unknown choice or position,
            a position without a graded scale, or ratings of some options only.
    """
    query_id = form.get("query_id", "")
    if not _digits(query_id, 30):  # an id beyond SQLite's integers is not open (409)
        raise HTTPProblem(400, "The answer does not name its query.")
    choice, grade = form.get("choice", ""), form.get("grade")
    if grade is not None:
        if levels is None or q != 2:
            raise HTTPProblem(400, "This study has no graded scale: answer with a choice.")
        if not (_digits(grade, 3) and int(grade) < levels):
            raise HTTPProblem(400, f"Position {grade[:20]!r} is not on the {levels}-level scale.")
        answer = graded_positions(levels)[int(grade)].answer()
    elif choice in ("tie", "skip"):
        answer = {choice: True}
    elif _digits(choice, 3) and int(choice) < q:
        answer = {"winner": int(choice)}
    else:
        raise HTTPProblem(400, f"Unknown choice {choice[:20]!r}.")
    if choice != "skip":  # a skip leaves the ratings its page had checked
        ratings = _ratings(form, q)
        if ratings is not None:
            answer["ratings"] = ratings
    return int(query_id), answer


def _ratings(form: dict[str, str], q: int) -> list[int | str] | None:
    """The ``rating-<i>`` fields of the options, ``None`` without any (400 for some only)."""
    given = [form.get(f"rating-{i}") for i in range(q)]
    if all(g is None for g in given):
        return None
    missing = [i + 1 for i, g in enumerate(given) if g is None]
    if missing:
        raise HTTPProblem(400, f"Rate every option or none: option {missing[0]} has no rating.")
    # a whole number stays text here, so that the session's check names it as given
    return [int(g) if _digits(g, 3) else g for g in given]


def _answer(session: Session, form: dict[str, str]) -> str:
    """Record the form's answer; what the page says when it does not (``""`` when it does)."""
    query_id, answer = parse_choice(form, session.q, session.levels)
    try:
        session.answer(query_id, **answer)
    except QueryNotPendingError as err:
        return NOT_PENDING[err.reason]
    except InvalidAnswerError as err:
        raise HTTPProblem(400, str(err)) from None
    return ""


def parse_seen(form: dict[str, str]) -> tuple[int, int] | None:
    """The answer counts the page of an undo form showed (``answered``, ``retracted``).

    Every answer and every undo changes them, so while they are unchanged the last standing
    answer is the one that page followed, the one its undo means.

    Args:
        form: The undo form.

    Returns:
        ``(answered, retracted)``, or ``None`` for a form that names neither (undo the last).

    Raises:
        HTTPProblem: 400 for counts that are missing or not whole numbers.
    """
    answered, retracted = form.get("answered"), form.get("retracted")
    if answered is None and retracted is None:
        return None
    counts = []
    for value in (answered, retracted):
        if value is None or not _digits(value, 18):
            raise HTTPProblem(400, "The undo form does not say which answer it undoes.")
        counts.append(int(value))
    return counts[0], counts[1]


def _undo(session: Session, form: dict[str, str]) -> str:
    """Retract the last answer, the one the form's page followed.

    Returns:
        ``""`` and the page's ``?undone=`` value, as ``"=<what>"``, when done; else what the
        page says.
    """
    seen = parse_seen(form)
    if seen is not None:  # checked in the undo's own transaction
        progress = session.progress()
        if (progress.answered, progress.retracted) != seen:
            return STALE_UNDO
    try:
        answer = session.undo()
    except DatabaseBusyError:
        raise
    except SessionError:  # nothing to undo
        return "There is nothing to undo."
    given = answer.answer
    what = str(given.winner + 1) if given.kind == "winner" else given.kind
    return f"={what}"


async def _post(
    request: Request, write: Callable[[Session, dict[str, str]], str], replayed: str
) -> Response:
    """A POST of the answering page: its nonce, one write, the next query queued, the page.

    The token, the nonce and the write are checked and made in one thread: the request waits
    for nothing but the short transaction that commits its write (with those of the requests
    that came at the same moment).

    Args:
        request: The request.
        write: The write; it returns what the page says when it did nothing, else ``""``.
        replayed: What the page says to a replayed form.

    Returns:
        A redirect to the page (303), or the page with 409 and a notice.
    """
    state = web_state(request)
    token = request.path_params["token"]
    form = await read_form(request)

    def run() -> tuple[WebSession, str, int]:
        record = annotator(state, token)
        scope = f"s{record.id}"
        status = state.nonces.consume(scope, form.get("nonce"))
        if status is NonceStatus.UNKNOWN:  # a page from before a restart, or forged
            return record, STALE_FORM, 403
        if status is NonceStatus.REPLAYED:
            return record, replayed, 409
        try:
            refused = state.writes.run(record.name, lambda s: write(s, form))
        except Exception:  # nothing was written (a busy database, a bad form): may be resent
            state.nonces.release(scope, form.get("nonce"))
            raise
        if not refused or refused.startswith("="):
            state.preparer.prepare(record.name)
        return record, refused, 409

    record, notice, status = await run_in_threadpool(run)
    if not notice or notice.startswith("="):
        undone = f"?undone={notice[1:]}" if notice else ""
        return RedirectResponse(f"/a/{token}{undone}", status_code=303)
    context = await run_in_threadpool(answer_context, state, record)
    return _render(state, context, notice=notice, status=status)


async def answer_post(request: Request) -> Response:
    """POST ``/a/<token>/answer``: record the answer, queue the next query, back to the page."""
    return await _post(request, _answer, ALREADY_ANSWERED)


async def undo_post(request: Request) -> Response:
    """POST ``/a/<token>/undo``: retract the last answer; its query is asked again.

    The form names the answer counts its page showed: when an answer was given or undone since
    (in another tab, say), the last answer is not the one that page followed, and the undo is
    refused with 409 and the page as it is now; nothing is retracted.
    """
    return await _post(request, _undo, "That undo was already done.")
