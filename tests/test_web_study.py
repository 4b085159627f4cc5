"""A study from first link to final report: restarts, links, settings, exports, edges."""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import os
import socket
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from botorch_pref.cli import main
from botorch_pref.sessions import Session, SessionError
from botorch_pref.sessions.answer_links import TokenStore, key_path
from botorch_pref.sessions.export import csv_text, csv_untext, export_study
from botorch_pref.sessions.settings import check_name
from botorch_pref.web.app import WebConfig, create_app
from tests.test_web_forms import BEARER, TestClient, _create_form, _names, _NoWorkers
from tests.test_web_helpers import ADMIN, links, nonces, query_id, quick_session


@pytest.fixture(autouse=True)
def _no_workers(monkeypatch):
    monkeypatch.setattr("botorch_pref.web.server_state.Preparer", _NoWorkers)


def _app(path: Path, token: str | None = ADMIN):
    return create_app(WebConfig(path, token, wait_s=0))


def _dump(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return list(db.iterdump())


def _answers(path: Path, name: str) -> int:
    with Session.open(path, name) as s:
        return s.progress().answered


def _pending(path: Path, name: str) -> int:
    with Session.open(path, name) as s:
        return s.ask().id


def _admin_token(client: TestClient, name: str) -> str:
    page = client.get("/admin").text
    row = next(r for r in page.split("<tr>") if f"<bdi>{name}</bdi></td>" in r)
    return links(row)[0]


@contextmanager
def _answer_link(path: Path) -> Iterator[tuple[TestClient, str, int]]:
    """A server of a new session ``ann`` with a pending query: an admin's client, ann's answer
    link's token and the pending query's id."""
    quick_session(path, "ann")
    qid = _pending(path, "ann")
    app = _app(path)
    try:
        client = TestClient(app, headers=BEARER, follow_redirects=False)
        yield client, _admin_token(client, "ann"), qid
    finally:
        app.state.web.close()


def test_a_page_open_across_a_restart_answers_and_lands_on_the_next_question(tmp_path):
    path = tmp_path / "a.db"
    quick_session(path, "ann", budget=5)
    first = _pending(path, "ann")
    app = _app(path)
    client = TestClient(app, headers=BEARER, follow_redirects=False)
    token = _admin_token(client, "ann")
    page = client.get(f"/a/{token}").text
    app.state.web.close()  # the server stops; the page stays open in the browser
    app = _app(path)
    try:
        client = TestClient(app, follow_redirects=False)
        form = {"nonce": nonces(page)[0], "query_id": query_id(page), "choice": "1"}
        r = client.post(f"/a/{token}/answer", data=form)
        assert r.status_code == 303 and r.headers["location"] == f"/a/{token}"
        assert _answers(path, "ann") == 1
        second = _pending(path, "ann")  # what the worker would prepare
        assert query_id(client.get(f"/a/{token}").text) == second != first
        # the same form again (a reload re-sending it): nothing more is written
        r = client.post(f"/a/{token}/answer", data=form)
        assert r.status_code == 409 and _answers(path, "ann") == 1
        assert query_id(r.text) == second  # and the page offers the current question
    finally:
        app.state.web.close()


def test_a_form_the_server_cannot_check_gets_the_current_question_not_a_dead_end(tmp_path):
    path = tmp_path / "a.db"
    with _answer_link(path) as (client, token, qid):
        before = _dump(path)
        form = {"nonce": "1.from-another-key.xyz", "query_id": str(qid), "choice": "0"}
        r = client.post(f"/a/{token}/answer", data=form)
        assert r.status_code == 403 and "out of date" in r.text
        assert query_id(r.text) == qid and 'id="answer-form"' in r.text  # a working way back
        assert _answers(path, "ann") == 0
        # the page's own form then answers
        r = client.post(f"/a/{token}/answer", data={**form, "nonce": nonces(r.text)[0]})
        assert r.status_code == 303 and _answers(path, "ann") == 1
        assert before != _dump(path)


def test_the_admin_token_outlives_a_restart(tmp_path):
    path = tmp_path / "a.db"
    quick_session(path, "ann")
    app = _app(path, token=None)
    admin = app.state.web.admin_token
    client = TestClient(app, follow_redirects=False)
    assert client.get("/admin").status_code == 401
    r = client.get("/admin/login", params={"token": admin})
    assert r.status_code == 303 and "Max-Age" in r.headers["set-cookie"]
    cookie = client.cookies.get("botorch_pref_admin")
    app.state.web.close()
    app = _app(path, token=None)
    try:
        assert app.state.web.admin_token == admin  # from the link key beside the database
        client = TestClient(app, cookies={"botorch_pref_admin": cookie})
        assert client.get("/admin").status_code == 200
    finally:
        app.state.web.close()
    assert stat.S_IMODE(os.stat(key_path(path)).st_mode) == 0o600


def test_tokens_are_stored_as_hashes_only_and_rebuilt_from_the_key(tmp_path):
    path = tmp_path / "a.db"
    quick_session(path, "ann")
    tokens = TokenStore(path)
    record = tokens.ensure("ann", "table", "Which?")
    tokens.close()
    assert record.token and not any(record.token in line for line in _dump(path))
    again = TokenStore(path)
    assert again.by_name("ann").token == record.token  # rebuilt, never read back
    again.close()
    # a copy of the database alone shows no link and opens nothing
    copy = tmp_path / "copy.db"
    copy.write_bytes(path.read_bytes())
    other = TokenStore(copy)  # a new key is made beside the copy
    assert other.by_name("ann").token is None and other.by_token(record.token) is not None
    other.close()


def test_clear_tokens_of_an_older_version_are_migrated_to_hashes(tmp_path):
    path = tmp_path / "a.db"
    quick_session(path, "ann")
    old = "an-old-token-in-clear"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE web_tokens (id INTEGER PRIMARY KEY, session_name TEXT NOT NULL UNIQUE, "
            "token TEXT NOT NULL, token_sha256 TEXT NOT NULL UNIQUE, renderer TEXT NOT NULL, "
            "prompt TEXT NOT NULL, created_at TEXT NOT NULL)"
        )
        db.execute(
            "INSERT INTO web_tokens VALUES (1, 'ann', ?, ?, 'table', 'Old?', '2025')",
            (old, hashlib.sha256(old.encode()).hexdigest()),
        )
    tokens = TokenStore(path)
    found = tokens.by_token(old)  # the link handed out keeps working ...
    assert found is not None and found.prompt == "Old?" and found.show_best
    assert found.token is None  # ... but cannot be listed: rotate it
    assert tokens.rotate("ann").token and tokens.by_token(old) is None and tokens.retired(old)
    tokens.close()
    assert not any(old in line for line in _dump(path))
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "web_tokens" not in tables and "web_links" in tables


def test_a_revoked_or_replaced_link_gets_403_and_writes_nothing(tmp_path):
    path = tmp_path / "a.db"
    with _answer_link(path) as (admin, token, qid):
        page = admin.get(f"/a/{token}").text
        nonce = nonces(admin.get("/admin").text)[0]
        assert admin.post("/admin/s/1/rotate", data={"nonce": nonce}).status_code == 303
        new = _admin_token(admin, "ann")
        assert new != token
        before = _dump(path)
        form = {"nonce": nonces(page)[0], "query_id": str(qid), "choice": "0"}
        for method, url in (("get", f"/a/{token}"), ("post", f"/a/{token}/answer")):
            r = getattr(admin, method)(url, **({"data": form} if method == "post" else {}))
            assert r.status_code == 403 and "withdrawn or replaced" in r.text
        assert _dump(path) == before
        assert admin.get(f"/a/{new}").status_code == 200
        nonce = nonces(admin.get("/admin").text)[0]
        assert admin.post("/admin/s/1/revoke", data={"nonce": nonce}).status_code == 303
        assert admin.get(f"/a/{new}").status_code == 403
        assert "revoked" in admin.get("/admin").text and not links(admin.get("/admin").text)
        assert admin.get("/a/never-issued").status_code == 404


def test_head_and_previews_change_nothing_a_browser_render_marks_the_show(tmp_path):
    path = tmp_path / "a.db"
    quick_session(path, "ann")
    app = _app(path)
    try:
        client = TestClient(app, headers=BEARER)
        token = _admin_token(client, "ann")
        _pending(path, "ann")
        before = _dump(path)
        assert client.head(f"/a/{token}").status_code == 200
        prefetch = client.get(f"/a/{token}", headers={"sec-purpose": "prefetch"})
        preview = client.get(f"/a/{token}", headers={"sec-fetch-dest": "image"})
        assert prefetch.status_code == preview.status_code == 200
        assert _dump(path) == before  # no show recorded, no query made
        client.get(f"/a/{token}", headers={"sec-fetch-dest": "document"})
        with Session.open(path, "ann") as s:
            assert s.pending().times_shown == 2  # made (and shown) by ask, then this render
    finally:
        app.state.web.close()


def test_csv_cells_and_headers_that_look_like_formulas_are_escaped(tmp_path):
    path = tmp_path / "a.db"
    params = {"=HYPERLINK(1)": (0, 1), "+x": (0, 1), "plain": (-1, 0)}
    Session.create(path, "@evil", params, "random", 2, 0).close()
    Session.create(path, "-bob", {"plain": (0, 1)}, "random", 2, 1).close()
    with Session.open(path, "@evil") as s:
        s.answer(s.ask().id, winner=0)
    with Session.open(path, "-bob") as s:
        s.answer(s.ask().id, winner=1)
    buf = io.StringIO()
    assert export_study(path, buf, "csv") == 2
    rows = list(csv.reader(io.StringIO(buf.getvalue())))
    assert rows[0][0] == "session" and rows[0][-3:] == ["'=HYPERLINK(1)", "'+x", "plain"]
    assert {r[0] for r in rows[1:]} == {"'@evil", "'-bob"}
    assert all(not c.startswith(("=", "+", "@")) for r in rows for c in r)
    negative = [r[-1] for r in rows[1:] if r[0] == "'@evil"]
    assert all(float(v) <= 0 for v in negative)  # numbers stay numbers
    assert [csv_untext(csv_text(t)) for t in ("=a", "'b", "c", "'=d")] == ["=a", "'b", "c", "'=d"]
    # a session's export reads back in
    with Session.open(path, "@evil") as s:
        single = tmp_path / "evil.csv"
        s.export_csv(single)
    Session.create(path, "copy", params, "random", 2, 0).close()
    with Session.open(path, "copy") as s:
        assert s.import_comparisons(single) == 1


def test_exports_are_named_after_the_session_and_a_study_export_holds_all(tmp_path):
    path = tmp_path / "study.db"
    quick_session(path, "Zoë")
    quick_session(path, "bob", {"y": (0, 2)})
    for name in ("Zoë", "bob"):
        with Session.open(path, name) as s:
            s.answer(s.ask().id, winner=0)
    app = _app(path)
    try:
        client = TestClient(app, headers=BEARER)
        _admin_token(client, "bob")
        r = client.get("/admin/s/1/export.csv")
        assert (
            "filename=\"Zo_.csv\"; filename*=UTF-8''Zo%C3%AB.csv"
            in r.headers["content-disposition"]
        )
        assert all(line.startswith("Zoë,") for line in r.text.splitlines()[1:])
        r = client.get("/admin/export.csv")
        assert 'filename="study.csv"' in r.headers["content-disposition"]
        header, *rows = list(csv.reader(io.StringIO(r.text)))
        assert header[-2:] == ["x", "y"] and {row[0] for row in rows} == {"Zoë", "bob"}
        study = client.get("/admin/export.json").json()
        assert study["format"] == "botorch-pref-study" and len(study["sessions"]) == 2
    finally:
        app.state.web.close()


@pytest.mark.parametrize(
    "name",
    ["a" * 201, "evil\u202etxt.exe", "tab\tname", "line\nbreak", " padded", "zero\u2066w"],
)
def test_bad_names_are_refused_everywhere_and_nothing_is_written(tmp_path, name, capsys):
    path = tmp_path / "a.db"
    with pytest.raises(SessionError):
        check_name(name)
    with pytest.raises(SessionError):
        Session.create(path, name, {"x": (0, 1)}, "random", 2, 0)
    with pytest.raises(SessionError):
        Session.create(path, "ok", {name: (0, 1)}, "random", 2, 0)
    assert main(["session", "create", str(path), name, "--param", "x:0:1"]) == 2
    assert main(["session", "create", str(path), "ok", "--param", f"{name}:0:1"]) == 2
    app = _app(path)
    try:
        client = TestClient(app, headers=BEARER, follow_redirects=False)
        if name == name.strip():  # (the form takes a name without the spaces at its ends)
            r = client.post("/admin/sessions", data=_create_form(client, name=name))
            assert r.status_code == 400, name
            form = _create_form(client, parameters=f"{name} 0 1")
            assert client.post("/admin/sessions", data=form).status_code == 400
    finally:
        app.state.web.close()
    assert _names(path) == [] and not path.exists()


def test_session_create_settings_and_links_from_the_command_line(tmp_path, capsys):
    path = tmp_path / "a.db"
    db = str(path)
    # refused before anything is written: a question too long, a renderer that does not import
    assert main(["session", "create", db, "a", "--param", "x:0:1", "--question", "?" * 301]) == 2
    assert "300 characters" in capsys.readouterr().err
    bad = ["--renderer", "no_such_module_xyz:draw"]
    assert main(["session", "create", db, "a", "--param", "x:0:1", *bad]) == 2
    assert "Cannot load the renderer" in capsys.readouterr().err
    assert not path.exists()
    args = ["--param", "x:0:1", "--question", "Which tea?", "--show-recommendation"]
    base = ["--base-url", "https://study.example.org/p/"]
    assert main(["session", "create", db, "a", *args, *base]) == 0
    out = capsys.readouterr().out
    link = next(w for w in out.split() if w.startswith("https://study.example.org/p/a/"))
    quick_session(path, "b")  # created without a link: `links` makes one
    assert main(["session", "links", db, *base]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].split("\t") == ["a", link, "open"] and listed[1].startswith("b\thttps://")
    assert main(["session", "links", db, "--csv", "-"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["session", "answer_url", "status"] and len(rows) == 3
    tokens = TokenStore(path)
    a = tokens.by_name("a")
    assert (a.prompt, a.show_best, a.renderer) == ("Which tea?", True, "auto")
    assert tokens.by_name("b").show_best is False  # off by default
    tokens.close()
    assert main(["session", "rotate", db, "a"]) == 0
    new = capsys.readouterr().out.split()[-1]
    assert new.rsplit("/", 1)[-1] != link.rsplit("/", 1)[-1]
    assert main(["session", "revoke", db, "b"]) == 0
    capsys.readouterr()
    assert main(["session", "links", db]) == 0
    assert "b\t-\trevoked" in capsys.readouterr().out
    assert main(["session", "revoke", db, "nobody"]) == 2
    out = tmp_path / "all.json"
    assert main(["session", "export-all", db, "-o", str(out)]) == 0


def test_every_option_shows_its_default_in_help(capsys):
    for argv in (["serve", "--help"], ["session", "create", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        text = " ".join(capsys.readouterr().out.split())
        assert "(default: " in text
    assert "laplace-box: the same GP" in text and "pairwisegp: BoTorch" in text


def test_admin_page_pages_1000_sessions(tmp_path):
    path = tmp_path / "a.db"
    quick_session(path, "s0000")
    with sqlite3.connect(path) as db:  # copies of the first session's row, quickly
        row = db.execute("SELECT * FROM sessions WHERE id = 1").fetchone()
        db.executemany(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(i + 1, f"s{i:04d}", *row[2:]) for i in range(1, 120)],
        )
    app = _app(path)
    try:
        client = TestClient(app, headers=BEARER)
        first = client.get("/admin")
        assert first.status_code == 200 and len(links(first.text)) == 50
        assert "Page 1 of 3" in first.text and len(first.content) < 100_000
        last = client.get("/admin?page=3").text
        assert len(links(last)) == 20 and "s0119" in last
        assert client.get("/admin?page=999").status_code == 200  # the last page
        listed = client.get("/admin/links.csv").text.splitlines()
        assert len(listed) == 121 and all("/a/" in line for line in listed[1:])
    finally:
        app.state.web.close()


def test_participant_pages_numbering_recommendation_and_layout(tmp_path):
    path = tmp_path / "a.db"
    Session.create(path, "four", {"x": (0, 1), "y": (0, 1)}, "random", 4, 0, budget=2).close()
    app = _app(path)
    try:
        admin = TestClient(app, headers=BEARER, follow_redirects=False)
        token = _admin_token(admin, "four")
        _pending(path, "four")
        page = admin.get(f"/a/{token}").text
        assert 'class="options options-4"' in page and page.count('class="option"') == 4
        assert "Question 1 of 2" in page and "recommendation" not in page.lower()
        assert 'class="hint keys js-only"' in page and 'class="no-js"' in page
        assert admin.get("/favicon.ico").headers["content-type"] == "image/x-icon"
    finally:
        app.state.web.close()


def test_serve_refuses_a_wrong_database_and_a_taken_port_before_any_link(tmp_path, capsys):
    missing = tmp_path / "typo.db"
    assert main(["serve", str(missing)]) == 2
    assert "No session database" in capsys.readouterr().err and not missing.exists()
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database")
    assert main(["serve", str(foreign)]) == 2
    assert "not a" in capsys.readouterr().err.lower()
    path = tmp_path / "a.db"
    quick_session(path, "ann")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["serve", str(path), "--port", str(port)]) == 2
    captured = capsys.readouterr()
    assert "is taken" in captured.err and "http" not in captured.out


def test_the_demo_removes_its_folder(monkeypatch, capsys):
    import uvicorn

    from botorch_pref.web.serve_command import cmd_serve

    seen = {}
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets: seen.update(run=True))
    args = argparse.Namespace(
        db=None, create=False, host="127.0.0.1", port=0, token=None, renderer=[],
        demo="colour", workers=1, idle=600.0, batch=1, max_body=16 * 1024,
    )  # fmt: skip
    assert cmd_serve(args) == 0 and seen["run"]
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "Demo session" in line)
    db = Path(line.split(" in ", 1)[1].split(": ", 1)[0])
    assert db.name == "demo.db" and not db.parent.exists()


def test_the_comparison_graph_keeps_ties_and_reads_in_plain_words(tmp_path):
    from botorch_pref.web import plots

    path = tmp_path / "a.db"
    params = {"x": (0, 1), "y": (0, 1), "z": (0, 1)}
    Session.create(path, "g", params, "random", 2, 0, refit_every=1000, refit_all_until=0).close()
    with Session.open(path, "g") as s:
        assert plots.comparison_graph_summary(s).note  # nothing compared yet
        q1 = s.ask()
        s.answer(q1.id, tie=True)  # a tie joins its two designs
        q2 = s.ask()
        s.answer(q2.id, skip=True)  # a skip joins nothing
        summary = plots.comparison_graph_summary(s)
        assert (summary.designs, summary.pairs, summary.components, summary.ties) == (2, 1, 1, 1)
        assert "no preference" in summary.reading[0] and "linked" in summary.reading[1]
        s.answer(s.ask().id, winner=0)
        summary = plots.comparison_graph_summary(s)
        assert summary.components == 2 and "2 groups never compared" in summary.reading[1]
        assert summary.connectivity == 0.0
        png = plots.comparison_graph_png(s)
        picked = plots.comparison_graph_png(s, ("x", "z"))
        assert png.startswith(b"\x89PNG") and picked.startswith(b"\x89PNG") and png != picked
        assert plots._pairs(s.names, None, 15) == [(0, 1), (0, 2), (1, 2)]  # every pair
        assert plots._pairs(s.names, ("y",), 15) == [(1, 1)]
        words = plots.parameter_reading(s)
        assert [w.split(":")[0] for w in words] == ["x", "y", "z"]


def test_the_page_settings_api_checks_before_writing(tmp_path):
    from botorch_pref.sessions.answer_links import link_session

    path = tmp_path / "a.db"
    quick_session(path, "ann", {"r": (0, 1), "g": (0, 1), "b": (0, 1)})
    before = _dump(path)
    for bad in (
        {"question": "x" * 301},
        {"question": "evil \u202e"},
        {"renderer": "not_a_module_xyz:f"},
        {"renderer": "nocolon"},
        {"show_recommendation": "yes"},
    ):
        with pytest.raises(SessionError):
            link_session(path, "ann", **bad)
    assert _dump(path) == before
    record = link_session(path, "ann", question="Which colour is warmer?")
    assert (record.renderer, record.prompt, record.show_best) == (
        "auto", "Which colour is warmer?", False
    )  # fmt: skip
    from botorch_pref.web.renderers import RendererSet

    unit = {n: (0.0, 1.0) for n in "rgb"}
    drawn = RendererSet().render("auto", {"r": 1.0, "g": 0.5, "b": 0.0}, unit)
    assert drawn.kind == "image"  # auto: a colour swatch for r, g, b
    assert TokenStore(path).by_token(record.token) == record
