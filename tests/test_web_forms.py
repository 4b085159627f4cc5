"""Form input and serving edge cases of the web front end, each once a defect.

The application runs in-process (Starlette's ``TestClient``, no lifespan) with a stand-in for
the query-preparing workers: the tests store queries themselves, so no worker process starts.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("CI") != "true":
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")

with warnings.catch_warnings():  # newer Starlette prefers another HTTP client for it
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from botorch_pref.sessions import Session
from botorch_pref.web.app import WebConfig, create_app
from tests.test_web_crash import _free_port
from tests.test_web_helpers import ADMIN, create_form, links, nonces, query_id, quick_session

BEARER = {"authorization": f"Bearer {ADMIN}"}


class _NoWorkers:
    """Stands in for :class:`~botorch_pref.web.workers.Preparer`: prepares nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def start(self) -> None:
        pass

    def prepare(self, name: str) -> bool:
        return False

    def prepared(self, name: str) -> None:
        return None

    def running(self, name: str) -> None:
        return None

    def sweep(self, idle_s: float | None = None) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def no_workers(monkeypatch) -> None:
    """Applications built meanwhile start no worker process."""
    monkeypatch.setattr("botorch_pref.web.server_state.Preparer", _NoWorkers)


@pytest.fixture
def make_app(no_workers, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Build applications on ``tmp_path / "a.db"`` without worker processes."""
    apps = []

    def make(**options: Any):
        app = create_app(WebConfig(tmp_path / "a.db", ADMIN, wait_s=0, **options))
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.state.web.close()


def _create_form(client: TestClient, **fields: str) -> dict[str, str]:
    return create_form(nonces(client.get("/admin").text)[0], **fields)


def _names(path: Path) -> list[str]:
    return [s.name for s in Session.list(path)] if path.exists() else []


def _error(html: str) -> str:
    found = re.search(r'role="alert">([^<]*)<', html)
    return "" if found is None else found.group(1)


def test_a_long_question_is_refused_not_cut(make_app, tmp_path):
    client = TestClient(make_app(), headers=BEARER, follow_redirects=False)
    prompt = "Which of these two coffees tastes better? " * 10  # 420 characters
    r = client.post("/admin/sessions", data=_create_form(client, prompt=prompt))
    assert r.status_code == 400 and "300 characters" in _error(r.text)
    assert _names(tmp_path / "a.db") == []
    r = client.post("/admin/sessions", data=_create_form(client, prompt=prompt[:300]))
    assert r.status_code == 303
    assert "tastes better?" in client.get(f"/a/{links(client.get('/admin').text)[0]}").text


@pytest.mark.parametrize("escaped", ["%FF", "%C3%28", "%ED%A0%80"])
def test_a_form_with_bytes_that_are_not_utf8_is_refused(make_app, tmp_path, escaped):
    client = TestClient(make_app(), headers=BEARER, follow_redirects=False)
    nonce = nonces(client.get("/admin").text)[0]
    body = f"nonce={nonce}&name=a{escaped}b&parameters=x+0+1&strategy=random"
    r = client.post(
        "/admin/sessions",
        content=body.encode("ascii"),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 400 and "Malformed form" in r.text
    assert _names(tmp_path / "a.db") == []
    # real UTF-8 (percent-encoded, as browsers send it) is read as it is
    r = client.post("/admin/sessions", data=_create_form(client, name="Zoë 测试 🙂"))
    assert r.status_code == 303 and _names(tmp_path / "a.db") == ["Zoë 测试 🙂"]


def test_a_refused_create_form_can_be_sent_again_corrected(make_app, tmp_path):
    """Nothing was created, so its nonce is not spent: the same form, fixed, creates it."""
    client = TestClient(make_app(), headers=BEARER, follow_redirects=False)
    form = _create_form(client, name="carol", parameters="x 1 0")
    r = client.post("/admin/sessions", data=form)
    assert r.status_code == 400 and "low &lt; high" in r.text
    form["parameters"] = "x 0 1"  # e.g. corrected on the page the back button shows
    r = client.post("/admin/sessions", data=form)
    assert r.status_code == 303 and _names(tmp_path / "a.db") == ["carol"]
    # once it created something, the same nonce is a replay
    r = client.post("/admin/sessions", data={**form, "name": "dave"})
    assert r.status_code == 409 and _names(tmp_path / "a.db") == ["carol"]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "127.0.0.2", "::1"])
def test_the_printed_links_work_on_any_loopback_address(
    no_workers, tmp_path, monkeypatch, capsys, host
):
    """``serve --host ::1`` (or 127.0.0.2) accepts the Host header of the links it prints."""
    import uvicorn

    from botorch_pref.web.serve_command import cmd_serve

    quick_session(tmp_path / "a.db", "s")
    served = {}

    def run(server, sockets):
        served.update(app=server.config.app, sockets=sockets)
        served.update(host=sockets[0].getsockname()[0], port=sockets[0].getsockname()[1])

    monkeypatch.setattr(uvicorn.Server, "run", run)
    port = _free_port()
    args = argparse.Namespace(
        db=str(tmp_path / "a.db"),
        create=False,
        host=host,
        port=port,
        token=ADMIN,
        renderer=[],
        demo=None,
        workers=1,
        idle=600.0,
        batch=1,
        max_body=16 * 1024,
    )
    assert cmd_serve(args) == 0
    assert served["host"] == {"localhost": "127.0.0.1"}.get(host, host) and served["port"] == port
    app = served["app"]
    try:
        admin = next(
            line.split()[-1] for line in capsys.readouterr().out.splitlines() if "/admin" in line
        )
        client = TestClient(app)
        r = client.get(admin, follow_redirects=False)
        assert r.status_code == 303, r.text
        assert client.get("/", headers={"host": "evil.example"}).status_code == 400
    finally:
        app.state.web.close()


def _token(client: TestClient, name: str) -> str:
    """The answer-link token of a session, from the admin page."""
    for row in client.get("/admin").text.split("<tr>")[1:]:
        if f'<td class="name"><bdi>{name}</bdi></td>' in row:
            return links(row)[0]
    raise AssertionError(f"no link for {name!r}")


def _retracted(path: Path, name: str) -> list[int]:
    """The query ids of the session's retracted answers."""
    with Session.open(path, name) as s:
        return [h.stored.query_id for h in s.history() if h.stored.retracted_at is not None]


def _answer(client: TestClient, token: str, page: str) -> None:
    form = {"nonce": nonces(page)[0], "query_id": str(query_id(page)), "choice": "0"}
    assert client.post(f"/a/{token}/answer", data=form).status_code == 303


def _undo_form(page: str) -> dict[str, str]:
    """The fields of a page's undo form (its last form)."""
    form = page.rsplit('class="undo-form"', 1)[1].split("</form>")[0]
    return dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form))


def test_an_undo_from_a_stale_page_retracts_nothing(make_app, tmp_path):
    """A second tab answered meanwhile: the first tab's undo would retract that answer."""
    path = tmp_path / "a.db"
    quick_session(path, "s")
    client = TestClient(make_app(), headers=BEARER, follow_redirects=False)
    token = _token(client, "s")
    with Session.open(path, "s") as s:  # the workers' part: store the queries
        first = s.ask().id
    _answer(client, token, client.get(f"/a/{token}").text)
    with Session.open(path, "s") as s:
        second = s.ask().id
    tab1 = client.get(f"/a/{token}").text  # its undo means: retract the answer to `first`
    tab2 = client.get(f"/a/{token}").text
    _answer(client, token, tab2)  # the second tab answers `second`
    r = client.post(f"/a/{token}/undo", data=_undo_form(tab1))
    assert r.status_code == 409 and "out of date" in r.text
    assert _retracted(path, "s") == []
    # the page it answers with undoes what it shows: the answer to `second`
    r = client.post(f"/a/{token}/undo", data=_undo_form(r.text))
    assert r.status_code == 303 and _retracted(path, "s") == [second]
    # and the first tab's form, sent again with a fresh nonce, is still refused
    stale = {**_undo_form(tab1), "nonce": _undo_form(client.get(f"/a/{token}").text)["nonce"]}
    r = client.post(f"/a/{token}/undo", data=stale)
    assert r.status_code == 409 and _retracted(path, "s") == [second]
    assert first != second


def test_the_admins_choices_win_over_a_page_seen_while_creating(make_app, tmp_path, monkeypatch):
    """A GET of the admin page between the session's creation and its record."""
    app = make_app()
    client = TestClient(app, headers=BEARER, follow_redirects=False)
    create = Session.create

    def create_then_look(*args: Any, **kwargs: Any) -> Session:
        session = create(*args, **kwargs)
        assert TestClient(app, headers=BEARER).get("/admin").status_code == 200
        return session

    monkeypatch.setattr(Session, "create", create_then_look)
    form = _create_form(client, name="t", renderer="colour", prompt="Which coffee is better?")
    r = client.post("/admin/sessions", data=form)
    assert r.status_code == 303
    monkeypatch.setattr(Session, "create", create)
    record = app.state.web.tokens().by_name("t")
    assert (record.renderer, record.prompt) == ("colour", "Which coffee is better?")
    assert "Which coffee is better?" in client.get(f"/a/{_token(client, 't')}").text


def test_a_locked_database_gives_503_within_the_configured_timeout(make_app, tmp_path):
    """The token table waits ``db_timeout`` for the write lock, then answers 503."""
    path = tmp_path / "a.db"
    quick_session(path, "a")
    app = make_app(db_timeout=0.2)
    client = TestClient(app, headers=BEARER, raise_server_exceptions=False)
    assert client.get("/admin").status_code == 200  # the token table is open
    quick_session(path, "b")  # created elsewhere: the next admin page makes its record
    lock = sqlite3.connect(path, isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")
        start = time.monotonic()
        r = client.get("/admin")
        assert r.status_code == 503 and "busy" in r.text
        assert time.monotonic() - start < 10
    finally:
        lock.close()
    r = client.get("/admin")
    assert r.status_code == 200 and len(links(r.text)) == 2


def test_a_session_of_an_unknown_strategy_does_not_break_the_admin_page(make_app, tmp_path):
    path = tmp_path / "a.db"
    quick_session(path, "old")
    quick_session(path, "new")
    with sqlite3.connect(path) as db:  # as written by a newer version
        db.execute("UPDATE sessions SET strategy = 'future' WHERE name = 'new'")
    client = TestClient(make_app(), headers=BEARER, raise_server_exceptions=False)
    r = client.get("/admin")
    assert r.status_code == 200
    assert _token(client, "old")
    row = next(row for row in r.text.split("<tr>") if "<bdi>new</bdi>" in row)
    assert "unreadable" in row.lower() and "future" in row and "/a/" not in row


def test_a_record_left_unstored_by_a_busy_database_is_reported(make_app, tmp_path, monkeypatch):
    """The session was created, then the lock was taken: 503 says so, the form is spent."""
    path = tmp_path / "a.db"
    quick_session(path, "a")
    client = TestClient(make_app(db_timeout=0.2), headers=BEARER, follow_redirects=False)
    form = _create_form(client, name="t", prompt="Which coffee is better?")
    create = Session.create
    lock = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    def create_then_lock(*args: Any, **kwargs: Any) -> Session:
        session = create(*args, **kwargs)
        lock.execute("BEGIN IMMEDIATE")
        return session

    monkeypatch.setattr(Session, "create", create_then_lock)
    try:
        r = client.post("/admin/sessions", data=form)
    finally:
        lock.close()
        monkeypatch.setattr(Session, "create", create)
    assert r.status_code == 503 and "was created" in r.text
    assert _names(path) == ["a", "t"]
    assert client.post("/admin/sessions", data=form).status_code == 409  # a replay


def test_an_answer_to_a_withdrawn_question_says_so(make_app, tmp_path):
    """A tab's question withdrawn by an undo in another tab was reported as "already answered"."""
    path = tmp_path / "a.db"
    quick_session(path, "s")
    client = TestClient(make_app(), headers=BEARER, follow_redirects=False)
    token = _token(client, "s")
    with Session.open(path, "s") as s:
        s.ask()
    _answer(client, token, client.get(f"/a/{token}").text)
    with Session.open(path, "s") as s:
        second = s.ask().id
    tab1 = client.get(f"/a/{token}").text  # shows `second`
    r = client.post(f"/a/{token}/undo", data=_undo_form(client.get(f"/a/{token}").text))
    assert r.status_code == 303  # `second` is withdrawn, the first question asked again
    form = {"nonce": nonces(tab1)[0], "query_id": str(second), "choice": "0"}
    r = client.post(f"/a/{token}/answer", data=form)
    assert r.status_code == 409
    assert "withdrawn" in _notice(r.text) and "already answered" not in r.text
    with Session.open(path, "s") as s:
        assert [h.stored.query_id for h in s.history() if h.stored.retracted_at is None] == []


def test_an_answer_to_another_sessions_question_is_not_called_answered(make_app, tmp_path):
    path = tmp_path / "a.db"
    quick_session(path, "s")
    quick_session(path, "t")
    client = TestClient(make_app(), headers=BEARER, follow_redirects=False)
    with Session.open(path, "t") as t:
        other = t.ask().id
    with Session.open(path, "s") as s:
        s.ask()
    token = _token(client, "s")
    page = client.get(f"/a/{token}").text
    r = client.post(
        f"/a/{token}/answer", data={"nonce": nonces(page)[0], "query_id": str(other), "choice": "0"}
    )
    assert r.status_code == 409 and "not open" in _notice(r.text)
    assert "already answered" not in r.text


@pytest.mark.parametrize("spelling", ["{}_0", " {}", "+{}", "{}\u0660"])
def test_a_query_id_is_ascii_digits_only(make_app, tmp_path, spelling):
    """``int()`` read "1_0" as 10 and Arabic-Indic digits as digits: a form naming another query."""
    path = tmp_path / "a.db"
    quick_session(path, "s")
    client = TestClient(make_app(), headers=BEARER, follow_redirects=False)
    token = _token(client, "s")
    with Session.open(path, "s") as s:
        qid = s.ask().id
    page = client.get(f"/a/{token}").text
    form = {"nonce": nonces(page)[0], "query_id": spelling.format(qid), "choice": "0"}
    assert client.post(f"/a/{token}/answer", data=form).status_code == 400
    form = {"nonce": nonces(page)[0], "query_id": str(qid), "choice": "0"}  # nonce released
    assert client.post(f"/a/{token}/answer", data=form).status_code == 303


def _notice(html: str) -> str:
    found = re.search(r'class="notice"[^>]*>([^<]*)<', html)
    return "" if found is None else found.group(1)
