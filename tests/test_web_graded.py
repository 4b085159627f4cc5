"""The answer page of studies with graded answers and ratings, and the admin form that creates
them (in-process, without worker processes: the tests store the queries themselves)."""

from __future__ import annotations

import re

import pytest

from botorch_pref.sessions import Session
from tests.helpers import snapshot
from tests.test_web_forms import BEARER, _create_form, _error, _token, make_app, no_workers
from tests.test_web_helpers import links, nonces, query_id, quick_session

pytest.importorskip("starlette")
from starlette.testclient import TestClient

__all__ = ["make_app", "no_workers"]  # fixtures, used by name


def _client(make_app) -> TestClient:
    return TestClient(make_app(), headers=BEARER, follow_redirects=False)


def _page(client: TestClient, path, name: str) -> tuple[str, str]:
    """The session's token and its page showing a stored pending query."""
    token = _token(client, name)
    with Session.open(path, name) as s:
        s.ask()
    return token, client.get(f"/a/{token}").text


def _post(client: TestClient, token: str, page: str, **fields: str):
    form = {"nonce": nonces(page)[0], "query_id": str(query_id(page)), **fields}
    return client.post(f"/a/{token}/answer", data=form)


def _answers(path, name: str) -> list[tuple]:
    with Session.open(path, name) as s:
        return [(a.kind, a.winner, a.strength, a.ratings) for a in (h.answer for h in s.history())]


def test_a_graded_pair_is_answered_on_a_labelled_scale(make_app, tmp_path):
    path = tmp_path / "a.db"
    quick_session(path, "g", answers="graded", levels=5)
    client = _client(make_app)
    token, page = _page(client, path, "g")
    labels = re.findall(r'name="grade" value="(\d)"[^>]*>([^<]*)<kbd', page)
    assert [(int(v), text.strip()) for v, text in labels] == [
        (0, "Option 1 much better"), (1, "Option 1 slightly better"), (2, "About the same"),
        (3, "Option 2 slightly better"), (4, "Option 2 much better"),
    ]  # fmt: skip
    assert "<legend>Which is better, and by how much?</legend>" in page
    assert 'data-graded="5"' in page and 'data-key="5"' in page
    assert "I prefer option" not in page and 'value="tie"' not in page  # the scale has both
    assert "Keys: 1–5 place your answer on the scale" in page
    assert _post(client, token, page, grade="0").status_code == 303
    token, page = _page(client, path, "g")
    assert _post(client, token, page, grade="2").status_code == 303
    token, page = _page(client, path, "g")
    assert _post(client, token, page, grade="3").status_code == 303
    token, page = _page(client, path, "g")
    assert _post(client, token, page, choice="1").status_code == 303  # a plain choice still
    assert _answers(path, "g") == [
        ("winner", 0, 2, None), ("tie", None, None, None), ("winner", 1, 1, None),
        ("winner", 1, None, None),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"grade": "5"}, "Position &#39;5&#39; is not on the 5-level scale."),
        ({"grade": "-1"}, "Position &#39;-1&#39; is not on the 5-level scale."),
        ({"grade": "x"}, "Position &#39;x&#39; is not on the 5-level scale."),
        ({"grade": "1", "rating-0": "1"}, "option 2 has no rating"),
        ({"grade": "1", "rating-0": "1", "rating-1": "3"}, "got 3 in [1, 3]"),
        ({"grade": "1", "rating-0": "1", "rating-1": "1.5"}, "got &#39;1.5&#39;"),
        ({"choice": "tie", "rating-0": "0", "rating-1": "9"}, "got 9 in [0, 9]"),
    ],
)
def test_bad_graded_forms_are_refused_and_change_nothing(make_app, tmp_path, fields, message):
    path = tmp_path / "a.db"
    quick_session(path, "g", answers="graded", levels=5, ratings=3)
    client = _client(make_app)
    token, page = _page(client, path, "g")
    before = snapshot(path)
    r = _post(client, token, page, **fields)
    assert r.status_code == 400 and message in r.text
    assert snapshot(path) == before


def test_a_binary_study_refuses_a_position_and_ratings(make_app, tmp_path):
    path = tmp_path / "a.db"
    quick_session(path, "b")
    client = _client(make_app)
    token, page = _page(client, path, "b")
    assert 'name="grade"' not in page and 'type="radio"' not in page
    before = snapshot(path)
    r = _post(client, token, page, grade="1")
    assert r.status_code == 400 and "This study has no graded scale" in r.text
    r = _post(client, token, page, choice="0", **{"rating-0": "1", "rating-1": "0"})
    assert r.status_code == 400 and "this study takes no ratings" in r.text
    assert snapshot(path) == before


def test_ratings_are_asked_per_option_and_stored(make_app, tmp_path):
    path = tmp_path / "a.db"
    quick_session(path, "r", ratings=3)
    client = _client(make_app)
    token, page = _page(client, path, "r")
    assert page.count('<fieldset class="rating">') == 2
    assert "<legend>Your rating of option 2</legend>" in page
    radio = r'<label><input type="radio" name="(rating-\d)" value="(\d)" required> (\w+)</label>'
    radios = re.findall(radio, page)
    assert radios == [
        ("rating-0", "0", "bad"), ("rating-0", "1", "fine"), ("rating-0", "2", "good"),
        ("rating-1", "0", "bad"), ("rating-1", "1", "fine"), ("rating-1", "2", "good"),
    ]  # fmt: skip
    assert re.search(r'value="skip"[^>]*formnovalidate', page)  # a skip needs no ratings
    assert "I prefer option 1" in page and 'value="tie"' in page  # binary comparison
    assert "(after rating each option)" in page
    ratings = {"rating-0": "2", "rating-1": "0"}
    assert _post(client, token, page, choice="0", **ratings).status_code == 303
    token, page = _page(client, path, "r")
    assert _post(client, token, page, choice="tie", **ratings).status_code == 303
    token, page = _page(client, path, "r")
    assert _post(client, token, page, choice="skip", **ratings).status_code == 303
    assert _answers(path, "r") == [
        ("winner", 0, None, (2, 0)), ("tie", None, None, (2, 0)), ("skip", None, None, None),
    ]  # fmt: skip


def test_undo_of_a_graded_answer_shows_the_question_again(make_app, tmp_path):
    path = tmp_path / "a.db"
    quick_session(path, "g", answers="graded", levels=5, ratings=3)
    client = _client(make_app)
    token, page = _page(client, path, "g")
    first = query_id(page)
    ratings = {"rating-0": "1", "rating-1": "2"}
    assert _post(client, token, page, grade="4", **ratings).status_code == 303
    page = client.get(f"/a/{token}").text
    undo = {"nonce": nonces(page)[-1], "answered": "1", "retracted": "0"}
    r = client.post(f"/a/{token}/undo", data=undo)
    assert r.status_code == 303 and r.headers["location"].endswith("?undone=2")
    page = client.get(r.headers["location"]).text
    assert query_id(page) == first and "your choice of option 2 was withdrawn" in page
    assert _post(client, token, page, grade="1", **ratings).status_code == 303
    with Session.open(path, "g") as s:
        standing = [h.answer for h in s.history(include_retracted=False)]
    assert [(a.winner, a.strength, a.ratings) for a in standing] == [(0, 1, (1, 2))]


def test_the_admin_form_creates_a_graded_study(make_app, tmp_path):
    path = tmp_path / "a.db"
    client = _client(make_app)
    page = client.get("/admin").text
    assert '<select name="answers">' in page and 'name="ratings"' in page
    form = _create_form(client, name="g", answers="graded", levels="7", ratings="4")
    assert client.post("/admin/sessions", data=form).status_code == 303
    with Session.open(path, "g") as s:
        assert (s.levels, s.rating_levels) == (7, 4)
    form = _create_form(client, name="five", answers="graded", levels="")
    assert client.post("/admin/sessions", data=form).status_code == 303
    with Session.open(path, "five") as s:
        assert (s.levels, s.rating_levels) == (5, None)
    for fields, message in (
        ({"answers": "lots"}, "answers is &#39;graded&#39; or blank, got &#39;lots&#39;"),
        ({"answers": "graded", "levels": "12"}, "levels must be at most 11, got 12"),
        ({"ratings": "1"}, "ratings must be at least 2"),
        ({"ratings": "two"}, "ratings must be a whole number, got &#39;two&#39;"),
        ({"answers": "graded", "q": "3"}, "pairs"),
    ):
        r = client.post("/admin/sessions", data=_create_form(client, name="bad", **fields))
        assert r.status_code == 400 and message in _error(r.text), (fields, _error(r.text))
    assert [s.name for s in Session.list(path)] == ["g", "five"]
    assert len(links(client.get("/admin").text)) == 2


def test_graded_and_rated_sessions_are_stepped_one_at_a_time(tmp_path):
    from botorch_pref.web.batching import group_key

    path = tmp_path / "a.db"
    for name, scales in (("b", {}), ("g", {"answers": "graded"}), ("r", {"ratings": 3})):
        quick_session(path, name, **scales)
    keys = {}
    for name in ("b", "g", "r"):
        with Session.open(path, name) as s:
            keys[name] = group_key(s, 3)
    assert keys["b"] is not None and keys["g"] is None and keys["r"] is None


def test_the_results_view_names_strengths_and_ratings(tmp_path):
    from tests.test_web_helpers import ThreadServer

    path = tmp_path / "a.db"
    quick_session(path, "g", answers="graded", levels=5, ratings=3)
    with Session.open(path, "g") as s:
        s.answer(s.ask().id, winner=1, strength=2, ratings=[2, 0])
        s.answer(s.ask().id, tie=True)
    with ThreadServer(path) as server, server.client(admin=True) as c:
        page = c.get("/admin/s/1").text
    assert "winner 2 (much better); rated 1: 3, 2: 1" in page
    assert re.search(r"<td>tie\s*</td>", page)
