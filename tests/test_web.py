"""HTTP tests of every route of ``botorch-pref serve`` and of each security rule."""

from __future__ import annotations

import io
import os
import re
import time

import pytest

if os.environ.get("CI") != "true":  # in CI the [web] extra is installed: no skipping there
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")

from botorch_pref.loop import Answer
from botorch_pref.sessions import Session
from botorch_pref.web.security import CSP
from tests.test_web_helpers import (
    ADMIN,
    ThreadServer,
    create_form,
    hold,
    links,
    nonces,
    query_id,
    quick_session,
    wait_for_query,
    wait_until,
)

EVIL = "<script>alert(1)</script>"


def answers(path, name) -> int:
    with Session.open(path, name) as s:
        return len(s.history())


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Two sessions (random strategy, fast queries) in one file, served."""
    path = tmp_path_factory.mktemp("web") / "study.db"
    for name in ("alice", "bob"):
        quick_session(path, name, {"x": (0, 1), "y": (-2, 2)}, budget=6)
    with ThreadServer(path) as server:
        with server.client(admin=True) as admin:
            page = admin.get("/admin").text
        tokens = dict(zip(("alice", "bob"), links(page), strict=True))
        server.path = path
        server.tokens = tokens
        yield server


def test_home_static_and_headers(served):
    with served.client() as c:
        r = c.get("/")
        assert r.status_code == 200
        assert r.headers["content-security-policy"] == CSP
        assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "no-referrer"
        assert "alice" not in r.text  # the landing page lists nothing
        js = c.get("/static/app.js")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        assert c.get("/static/style.css").status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/static/../pyproject.toml",
        "/static/%2e%2e%2fpyproject.toml",
        "/static/..%2f..%2fetc%2fpasswd",
        "/static/app.py",
        "/static/tokens.py",
        "/static/%2fetc%2fpasswd",
        "/templates/answer.html",
        "/a/..%2fadmin",
        "/admin/s/..%2f1",
        "/admin/s/1/export.py",
    ],
)
def test_path_tricks_are_not_found(served, path):
    with served.client(admin=True) as c:
        r = c.get(path)
    assert r.status_code == 404
    assert "root:" not in r.text and "[project]" not in r.text


def test_no_inline_script_in_any_page(served):
    token = served.tokens["alice"]
    with served.client(admin=True) as c:
        pages = [c.get("/").text, c.get("/admin").text, c.get("/admin/s/1").text]
        pages.append(wait_for_query(c, token))
    for page in pages:
        for tag in re.findall(r"<script[^>]*>", page):
            assert 'src="/static/app.js"' in tag
        assert "onclick" not in page.lower() and "style=" not in page.lower()


def test_admin_needs_the_admin_token(served):
    with served.client() as c:
        assert c.get("/admin").status_code == 401
        assert c.get("/admin", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/admin/login", params={"token": "wrong"}).status_code == 403
        for path in (
            "/admin/s/1",
            "/admin/s/1/export.csv",
            "/admin/s/1/export.json",
            "/admin/s/1/utility.png",
            "/admin/s/1/graph.png",
        ):
            assert c.get(path).status_code == 401, path
        # an annotator's token is no admin token
        bearer = {"authorization": f"Bearer {served.tokens['alice']}"}
        assert c.get("/admin/s/1/export.csv", headers=bearer).status_code == 401
        r = c.get("/admin/login", params={"token": ADMIN}, follow_redirects=False)
        assert r.status_code == 303
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert c.get("/admin").status_code == 200  # the cookie now
        status = c.get("/admin/status.json").json()
        assert set(status) == {"sessions_in_memory", "preparing", "worker_pids"}


def test_unknown_or_foreign_tokens(served):
    alice, bob = served.tokens["alice"], served.tokens["bob"]
    with served.client() as c:
        assert c.get("/a/not-a-token").status_code == 404
        assert c.get("/a/" + alice[:-1]).status_code == 404
        page_a = wait_for_query(c, alice)
        page_b = wait_for_query(c, bob)
        before = (answers(served.path, "alice"), answers(served.path, "bob"))
        # Bob's link with Alice's query and nonce: Alice's nonce is not Bob's (403) ...
        r = c.post(
            f"/a/{bob}/answer",
            data={"nonce": nonces(page_a)[0], "query_id": query_id(page_a), "choice": "0"},
        )
        assert r.status_code == 403
        # ... and with a nonce of Bob's page, Alice's query is not Bob's to answer (409)
        r = c.post(
            f"/a/{bob}/answer",
            data={"nonce": nonces(page_b)[0], "query_id": query_id(page_a), "choice": "0"},
        )
        assert r.status_code == 409
        # an unknown link answers nothing
        r = c.post(
            "/a/nope/answer",
            data={"nonce": nonces(page_a)[0], "query_id": query_id(page_a), "choice": "0"},
        )
        assert r.status_code == 404
        assert (answers(served.path, "alice"), answers(served.path, "bob")) == before


def test_answer_replay_second_tab_and_undo(served):
    token = served.tokens["alice"]
    with served.client() as c:
        tab1 = wait_for_query(c, token)
        tab2 = c.get(f"/a/{token}").text  # the same query in a second tab
        qid = query_id(tab1)
        assert query_id(tab2) == qid
        assert 'data-key="1"' in tab1 and 'data-key="2"' in tab1
        assert 'data-key="u"' not in tab1  # nothing to undo yet: no undo offered
        assert "<progress" in tab1 and "<meter" in tab1
        n0 = answers(served.path, "alice")
        form = {"nonce": nonces(tab1)[0], "query_id": qid, "choice": "1"}
        r = c.post(f"/a/{token}/answer", data=form, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == f"/a/{token}"
        assert answers(served.path, "alice") == n0 + 1
        # the same POST again (a double click): already answered, nothing written
        r = c.post(f"/a/{token}/answer", data=form)
        assert r.status_code == 409 and "already answered" in r.text
        # the second tab answers the same query with its own nonce
        r = c.post(
            f"/a/{token}/answer",
            data={"nonce": nonces(tab2)[0], "query_id": qid, "choice": "0"},
        )
        assert r.status_code == 409 and "already answered" in r.text
        assert answers(served.path, "alice") == n0 + 1
        with Session.open(served.path, "alice") as s:
            last = s.history()[-1]
        assert (last.stored.query_id, last.answer) == (qid, Answer("winner", 1))
        # a tie and a skip
        for choice in ("tie", "skip"):
            page = wait_for_query(c, token)
            r = c.post(
                f"/a/{token}/answer",
                data={"nonce": nonces(page)[0], "query_id": query_id(page), "choice": choice},
                follow_redirects=False,
            )
            assert r.status_code == 303
        with Session.open(served.path, "alice") as s:
            assert [h.answer.kind for h in s.history()][-2:] == ["tie", "skip"]
        # undo: the skipped query is asked again
        page = wait_for_query(c, token)
        assert 'data-key="u"' in page and "Question 4 of 6" in page  # numbering counts answers
        undo_nonce = nonces(page)[-1]
        r = c.post(f"/a/{token}/undo", data={"nonce": undo_nonce}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == f"/a/{token}?undone=skip"
        confirmed = c.get(r.headers["location"]).text  # the page says what was withdrawn
        assert "Undone: a skip was withdrawn" in confirmed and "Question 3 of 6" in confirmed
        with Session.open(served.path, "alice") as s:
            assert s.history()[-1].stored.retracted_at is not None
            retracted = sum(h.stored.retracted_at is not None for h in s.history())
            pending = s.pending()
        assert pending is not None and query_id(c.get(f"/a/{token}").text) == pending.id
        # a replayed undo does nothing more
        r = c.post(f"/a/{token}/undo", data={"nonce": undo_nonce})
        assert r.status_code == 409
        with Session.open(served.path, "alice") as s:
            assert sum(h.stored.retracted_at is not None for h in s.history()) == retracted


def test_malformed_answers_write_nothing(served):
    token = served.tokens["bob"]
    with served.client() as c:
        page = wait_for_query(c, token)
        n0 = answers(served.path, "bob")
        qid = query_id(page)
        cases = [
            ({"query_id": qid, "choice": "0"}, 403),  # no nonce
            ({"nonce": "forged", "query_id": qid, "choice": "0"}, 403),
            ({"nonce": nonces(c.get(f"/a/{token}").text)[0], "query_id": qid, "choice": "7"}, 400),
            ({"nonce": nonces(c.get(f"/a/{token}").text)[0], "choice": "0"}, 400),
            ({"nonce": nonces(c.get(f"/a/{token}").text)[0], "query_id": "x", "choice": "0"}, 400),
            # a digit that int() does not read, and an id SQLite cannot hold
            (
                {
                    "nonce": nonces(c.get(f"/a/{token}").text)[0],
                    "query_id": qid,
                    "choice": "\u00b2",
                },
                400,
            ),
            (
                {"nonce": nonces(c.get(f"/a/{token}").text)[0], "query_id": 2**63, "choice": "0"},
                409,
            ),
        ]
        for data, status in cases:
            assert c.post(f"/a/{token}/answer", data=data).status_code == status, data
        fresh = nonces(c.get(f"/a/{token}").text)[0]
        r = c.post(
            f"/a/{token}/answer",
            content=f'{{"nonce": "{fresh}", "query_id": {qid}, "choice": "0"}}',
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 415
        big = {"nonce": fresh, "query_id": qid, "choice": "0", "pad": "x" * 20000}
        assert c.post(f"/a/{token}/answer", data=big).status_code == 413

        def chunks():
            yield f"nonce={fresh}&query_id={qid}&choice=0&pad=".encode()
            for _ in range(40):
                yield b"x" * 1024

        r = c.post(
            f"/a/{token}/answer",
            content=chunks(),
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert r.status_code == 413
        assert c.get(f"/a/{token}/answer").status_code == 405
        assert answers(served.path, "bob") == n0


def test_other_hosts_are_refused(tmp_path):
    path = tmp_path / "h.db"
    Session.create(path, "s", {"x": (0, 1)}, "random", 2, 0).close()
    with ThreadServer(path, allowed_hosts=["127.0.0.1", "localhost"]) as server:
        with server.client() as c:
            assert c.get("/").status_code == 200
            assert c.get("/", headers={"host": "evil.example"}).status_code == 400


def test_create_session_escaping_and_rules(served):
    with served.client(admin=True) as c:
        nonce = nonces(c.get("/admin").text)[0]
        form = {
            "nonce": nonce,
            "name": EVIL,
            "parameters": f"{EVIL} 0 1\nred 0 255",
            "strategy": "random",
            "q": "3",
            "budget": "4",
            "seed": "1",
            "renderer": "auto",
            "prompt": f"Pick {EVIL}",
        }
        r = c.post("/admin/sessions", data=form, follow_redirects=False)
        assert r.status_code == 303
        results = c.get(r.headers["location"])
        admin = c.get("/admin").text
        with Session.open(served.path, EVIL) as s:
            assert s.names == (EVIL, "red") and s.q == 3 and s.budget == 4
        token = links(admin)[-1]
        page = wait_for_query(c, token)
        for html in (results.text, admin, page):
            assert EVIL not in html
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert 'data-key="3"' in page
        # a replayed create makes nothing more
        r = c.post("/admin/sessions", data=form)
        assert r.status_code == 409
        n = len(Session.list(served.path))
        # no nonce, a name taken, bad parameters, too big: refused, nothing written
        assert c.post("/admin/sessions", data={**form, "nonce": ""}).status_code == 403
        fresh = nonces(c.get("/admin").text)[0]
        assert c.post("/admin/sessions", data={**form, "nonce": fresh}).status_code == 409
        fresh = nonces(c.get("/admin").text)[0]
        bad = {**form, "nonce": fresh, "name": "new", "parameters": "x 1 0"}
        r = c.post("/admin/sessions", data=bad)
        assert r.status_code == 400 and "low &lt; high" in r.text
        fresh = nonces(c.get("/admin").text)[0]
        huge = {**form, "nonce": fresh, "name": "huge", "parameters": "x 0 1\n" * 5000}
        assert c.post("/admin/sessions", data=huge).status_code == 413
        for field in ("seed", "budget"):  # beyond SQLite's integers
            fresh = nonces(c.get("/admin").text)[0]
            r = c.post(
                "/admin/sessions", data={**form, "nonce": fresh, "name": "big", field: 2**63}
            )
            assert r.status_code == 400 and f"{field} must be at most" in r.text
        assert c.get(f"/admin/s/{2**63}").status_code == 404
        assert c.get(f"/admin/s/{2**63}/utility.png").status_code == 404
        assert len(Session.list(served.path)) == n
    with served.client() as anonymous:
        fresh = "anything"
        r = anonymous.post("/admin/sessions", data={**form, "nonce": fresh, "name": "anon"})
        assert r.status_code == 401
    assert len(Session.list(served.path)) == n


def test_results_view_images_and_exports(tmp_path):
    path = tmp_path / "r.db"
    # a "$" pair in a name is text, not matplotlib's maths markup
    params = {"x": (0, 1), "tip in $ (% of bill $)": (0, 1)}
    Session.create(path, "carol", params, "eubo", 2, 0, n_initial=2).close()
    with Session.open(path, "carol") as s:
        for i in range(4):
            s.answer(s.ask().id, winner=i % 2)
    with ThreadServer(path) as server, server.client(admin=True) as c:
        page = c.get("/admin/s/1")
        assert page.status_code == 200
        assert "utility.png" in page.text and "graph.png" in page.text
        assert "connected component" in page.text and page.text.count("<tr") >= 5
        for png in ("/admin/s/1/utility.png", "/admin/s/1/graph.png"):
            r = c.get(png)
            assert r.status_code == 200 and r.content.startswith(b"\x89PNG")
        csv = c.get("/admin/s/1/export.csv")
        assert csv.status_code == 200 and "attachment" in csv.headers["content-disposition"]
        assert csv.text.startswith("session,answer_id,")
        js = c.get("/admin/s/1/export.json")
        assert js.json()["session"]["name"] == "carol"
        assert c.get("/admin/s/99").status_code == 404
        assert c.get("/admin/s/99/export.csv").status_code == 404


@pytest.mark.parametrize(
    ("strategy", "q", "answers"),
    [
        ("eubo", 2, ["winner", "tie", "winner", "winner"]),  # a "no preference" answer
        ("qeubo", 3, ["winner", "winner", "winner"]),  # choices among three options
    ],
)
def test_results_view_with_ties_and_choices_among_more_options(tmp_path, strategy, q, answers):
    """Ties and choices among q > 2 options keep the graph: a tie joins two designs, a choice
    joins the chosen option with each other one."""
    path = tmp_path / "c.db"
    Session.create(path, "dave", {"x": (0, 1), "y": (0, 1)}, strategy, q, 0, n_initial=2).close()
    with Session.open(path, "dave") as s:
        for i, kind in enumerate(answers):
            query = s.ask()
            s.answer(query.id, tie=True) if kind == "tie" else s.answer(query.id, winner=i % q)
    with ThreadServer(path) as server, server.client(admin=True) as c:
        page = c.get("/admin/s/1")
        assert page.status_code == 200
        n = len(answers)
        pairs = n if q == 2 else n * (q - 1)  # new designs in every query
        assert f"{pairs} compared pairs" in page.text and f"{n} group(s)" in page.text
        assert ("“no preference” (kept" in page.text) == ("tie" in answers)
        assert "x: the answers" in page.text and "y: the answers" in page.text
        r = c.get("/admin/s/1/graph.png")
        assert r.status_code == 200 and r.content.startswith(b"\x89PNG")
        r = c.get("/admin/s/1/utility.png")
        assert r.status_code == 200 and r.content.startswith(b"\x89PNG")


def test_a_database_created_by_the_page(tmp_path):
    path = tmp_path / "new.db"
    with ThreadServer(path) as server, server.client(admin=True) as c:
        page = c.get("/admin")
        assert page.status_code == 200 and "No sessions yet" in page.text
        form = create_form(nonces(page.text)[0], name="dora", parameters="h 0 1\ns 0 1\nl 0 1")
        assert c.post("/admin/sessions", data=form, follow_redirects=False).status_code == 303
        page = wait_for_query(c, links(c.get("/admin").text)[0])
        assert page.count('src="data:image/svg+xml;base64,') >= 2  # colour swatches
    assert [s.name for s in Session.list(path)] == ["dora"]


def test_budget_reached_says_done(tmp_path):
    path = tmp_path / "d.db"
    Session.create(path, "eve", {"x": (0, 1)}, "random", 2, 0, budget=1).close()
    with ThreadServer(path) as server, server.client(admin=True) as c:
        token = links(c.get("/admin").text)[0]
        page = wait_for_query(c, token)
        r = c.post(
            f"/a/{token}/answer",
            data={"nonce": nonces(page)[0], "query_id": query_id(page), "choice": "0"},
        )
        assert r.status_code == 303
        assert 'id="done"' in wait_for_query(c, token)
        assert Session.list(path)[0].progress.done


def test_export_is_the_sessions_own(served):
    with served.client(admin=True) as c:
        text = c.get("/admin/s/2/export.csv").text
    with Session.open(served.path, "bob") as s:
        buf = io.StringIO()
        s.export_csv(buf)
    assert text == buf.getvalue()


def test_a_busy_database_gets_503_and_nothing_written(tmp_path):
    import sqlite3

    path = tmp_path / "busy.db"
    quick_session(path, "s")
    with ThreadServer(path, db_timeout=0.2) as server, server.client(admin=True) as c:
        token = links(c.get("/admin").text)[0]
        page = wait_for_query(c, token)
        form = {"nonce": nonces(page)[0], "query_id": query_id(page), "choice": "0"}
        admin = nonces(c.get("/admin").text)[0]
        lock = sqlite3.connect(path, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        try:
            assert c.post(f"/a/{token}/answer", data=form).status_code == 503
            create = {"nonce": admin, "name": "new", "parameters": "x 0 1", "strategy": "random"}
            assert c.post("/admin/sessions", data=create).status_code == 503
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert answers(path, "s") == 0
        # The same forms sent again are retries, not replays: nothing was written the first time.
        r = c.post(f"/a/{token}/answer", data=form, follow_redirects=False)
        assert r.status_code == 303 and answers(path, "s") == 1
        r = c.post("/admin/sessions", data=create, follow_redirects=False)
        assert r.status_code == 303 and "new" in [s.name for s in Session.list(path)]


def test_preparing_page_refreshes_itself_until_the_query_is_ready(tmp_path):
    import threading

    path = tmp_path / "prep.db"
    quick_session(path, "s")
    busy, release = tmp_path / "busy", tmp_path / "release"
    with ThreadServer(path, wait_s=0.2) as server, server.client(admin=True) as c:
        token = links(c.get("/admin").text)[0]
        preparer = server.app.state.web.preparer
        with Session.open(path, "s") as s:  # answered elsewhere: the next one is to be made
            s.answer(s.ask().id, winner=0)
        blocker = threading.Thread(target=preparer.call, args=("s", hold, str(busy), str(release)))
        blocker.start()
        wait_until(busy.exists)  # the session's worker is busy: no query can be made
        try:
            page = c.get(f"/a/{token}").text  # waits wait_s, then says "preparing"
            assert 'id="preparing"' in page and "Preparing the next question" in page
            assert '<meta http-equiv="refresh" content="1">' in page
            assert 'id="answer-form"' not in page
        finally:
            release.touch()
            blocker.join(timeout=120)
        page = wait_for_query(c, token)
        assert 'http-equiv="refresh"' not in page and query_id(page) is not None


def test_the_page_waits_for_the_next_query(tmp_path):
    """After an answer, the page's request waits for the worker instead of saying "preparing"."""
    path = tmp_path / "wait.db"
    quick_session(path, "s")
    with ThreadServer(path, wait_s=120.0) as server, server.client(admin=True) as c:
        token = links(c.get("/admin").text)[0]
        for _ in range(3):
            page = c.get(f"/a/{token}").text
            assert 'id="answer-form"' in page and 'id="preparing"' not in page
            r = c.post(
                f"/a/{token}/answer",
                data={"nonce": nonces(page)[0], "query_id": query_id(page), "choice": "1"},
                follow_redirects=True,
            )
            assert r.status_code == 200 and r.url.path == f"/a/{token}"
            assert query_id(r.text) not in (None, query_id(page))  # the next query, at once
    assert answers(path, "s") == 3


def test_the_finished_page_shows_the_final_recommendation_only_when_asked_to(tmp_path):
    from botorch_pref.sessions.answer_links import TokenStore

    path = tmp_path / "a.db"
    quick_session(path, "shown", budget=2)
    quick_session(path, "hidden", budget=2)
    tokens = TokenStore(path)
    tokens.ensure("shown", "table", "Which?", show_best=True)
    tokens.close()
    with ThreadServer(path) as server, server.client(admin=True) as c:
        page = c.get("/admin").text
        for name in ("shown", "hidden"):
            row = next(r for r in page.split("<tr>") if f"<bdi>{name}</bdi></td>" in r)
            token = links(row)[0]
            for _ in range(2):
                html = wait_for_query(c, token)
                form = {"nonce": nonces(html)[0], "query_id": query_id(html), "choice": "0"}
                r = c.post(f"/a/{token}/answer", data=form, follow_redirects=False)
                assert r.status_code == 303
            for _ in range(600):  # the final recommendation is computed after the last answer
                done = c.get(f"/a/{token}").text
                if 'id="done"' in done and "Computing the final" not in done:
                    break
                time.sleep(0.05)
            assert 'id="undo"' not in done  # nothing to undo on the finished page
            if name == "hidden":
                assert "recommendation" not in done.lower()
                continue
            with Session.open(path, name) as s:
                x = s.best().x[s.names.index("x")].item()  # after both answers
            assert "Final recommendation" in done
            shown = done.split("Final recommendation")[1]
            assert f'value="{x!r}"' in shown or f"{x:.4g}" in shown
