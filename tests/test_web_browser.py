"""A real browser (headless Debian Chromium driven by selenium) answers queries on the page.

Skipped only outside CI when no Chromium or chromedriver is found; in CI (``CI=true``) a
missing browser fails the test (``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from botorch_pref.sessions import Session
from tests.helpers import CHROMEDRIVER, CHROMIUM, headless_chromium

IN_CI = os.environ.get("CI") == "true"

if not IN_CI:
    pytest.importorskip("selenium")
    pytest.importorskip("starlette")
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("no Chromium/chromedriver (CI installs them)", allow_module_level=True)

from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tests.test_web_helpers import ADMIN, ThreadServer, links, quick_session  # noqa: E402

#: Where to also save the screenshots (the README's pictures are made this way).
SHOTS = os.environ.get("BOTORCH_PREF_WEB_SCREENSHOTS")


def _console_errors(driver) -> list[str]:
    """The browser console's errors since the last call (a favicon 404 would be one)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _chromium(javascript: bool = True):
    assert CHROMIUM is not None and CHROMEDRIVER is not None, (
        "CI must have chromium and chromedriver"
    )
    prefs = None if javascript else {"profile.managed_default_content_settings.javascript": 2}
    driver = headless_chromium("--window-size=1200,1000", logging={"browser": "ALL"}, prefs=prefs)
    return driver


@pytest.fixture
def browser():
    driver = _chromium()
    try:
        yield driver
    finally:
        driver.quit()


def _query_id(driver) -> int | None:
    """The query id on the page, or ``None`` (also while the page is being replaced)."""
    try:
        found = driver.find_elements(By.CSS_SELECTOR, "input[name=query_id]")
        return int(found[0].get_attribute("value")) if found else None
    except StaleElementReferenceException:
        return None
    except WebDriverException as err:  # the element's page was replaced between the two calls
        if "does not belong to the document" in str(err):
            return None
        raise


def _wait_for_new_query(driver, old: int | None) -> int:
    """Wait (bounded) until the page shows a query other than ``old``; return its id."""

    def new_query(d) -> int | bool:
        found = _query_id(d)
        return found if found not in (None, old) else False

    wait = WebDriverWait(
        driver, 180, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)
    )
    return wait.until(new_query)


def _save(driver, tmp_path: Path, name: str, height: int | None = None) -> Path:
    if height is not None:
        driver.set_window_size(1200, height)
    out = tmp_path / name
    assert driver.save_screenshot(str(out))
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(out, Path(SHOTS) / name)
    return out


def test_answer_ten_queries_by_clicking_and_keyboard_then_undo(browser, tmp_path):
    path = tmp_path / "browser.db"
    Session.create(
        path,
        "ada",
        {"r": (0, 1), "g": (0, 1), "b": (0, 1)},
        "eubo",
        2,
        3,
        budget=20,
        n_initial=3,
    ).close()
    with ThreadServer(path) as server:
        with server.client(admin=True) as c:
            token = links(c.get("/admin").text)[0]
        browser.get(f"{server.url}/a/{token}")
        qid = _wait_for_new_query(browser, None)
        assert len(browser.find_elements(By.CSS_SELECTOR, "section.option")) == 2
        # 'click' = a mouse click on a button; any other entry is a key press
        steps = [
            "click1",
            "1",
            "2",
            Keys.ARROW_LEFT,
            Keys.ARROW_RIGHT,
            "click2",
            "t",
            "click1",
            "s",
            "2",
        ]
        expected = []
        answered = []
        for step in steps:
            if step.startswith("click"):
                i = int(step[-1]) - 1
                browser.find_element(By.CSS_SELECTOR, f'button[name=choice][value="{i}"]').click()
                expected.append(("winner", i))
            else:
                ActionChains(browser).send_keys(step).perform()
                expected.append(
                    {
                        "1": ("winner", 0),
                        "2": ("winner", 1),
                        Keys.ARROW_LEFT: ("winner", 0),
                        Keys.ARROW_RIGHT: ("winner", 1),
                        "t": ("tie", None),
                        "s": ("skip", None),
                    }[step]
                )
            answered.append(qid)
            qid = _wait_for_new_query(browser, qid)
        _save(browser, tmp_path, "answering-page.png", height=1000)
        # undo the last answer by keyboard: its query is asked again
        ActionChains(browser).send_keys("u").perform()
        assert _wait_for_new_query(browser, qid) == answered[-1]
        assert "9 of 20 answered" in browser.page_source

        with Session.open(path, "ada") as s:
            history = s.history()
            pending = s.pending()
        assert [(h.answer.kind, h.answer.winner) for h in history] == expected
        assert [h.stored.query_id for h in history] == answered
        assert [h.stored.retracted_at is not None for h in history] == [False] * 9 + [True]
        assert pending is not None and pending.id == answered[-1]
        assert len({h.stored.query_id for h in history}) == 10  # no duplicate answers

        # the results view, as the admin sees it
        browser.get(f"{server.url}/admin/login?token={ADMIN}")
        browser.get(f"{server.url}/admin/s/1")
        WebDriverWait(browser, 180).until(
            lambda d: d.execute_script(
                "return Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)"
            )
        )
        assert "Results of ada" in browser.page_source
        shot = _save(browser, tmp_path, "results-view.png", height=1800)
        assert shot.stat().st_size > 10_000


@pytest.fixture
def browser_without_javascript():
    driver = _chromium(javascript=False)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_page_works_with_javascript_off(browser_without_javascript, tmp_path):
    driver = browser_without_javascript
    path = tmp_path / "nojs.db"
    quick_session(path, "bo", {"x": (0, 1), "y": (0, 1)})
    with ThreadServer(path) as server:
        with server.client(admin=True) as c:
            token = links(c.get("/admin").text)[0]
        driver.get(f"{server.url}/a/{token}")
        first = _wait_for_new_query(driver, None)  # the page refreshed itself (meta refresh)
        hints = driver.find_elements(By.CSS_SELECTOR, ".keys, kbd")
        assert hints and not any(h.is_displayed() for h in hints)  # keys need the script
        driver.find_element(By.CSS_SELECTOR, 'button[name=choice][value="1"]').click()
        second = _wait_for_new_query(driver, first)
        driver.find_element(By.CSS_SELECTOR, 'button[name=choice][value="tie"]').click()
        third = _wait_for_new_query(driver, second)
        driver.find_element(By.ID, "undo").click()
        assert _wait_for_new_query(driver, third) == second
        with Session.open(path, "bo") as s:
            history = s.history()
        assert [(h.stored.query_id, h.answer.kind, h.answer.winner) for h in history] == [
            (first, "winner", 1),
            (second, "tie", None),
        ]
        assert history[1].stored.retracted_at is not None


def _answer(driver, qid: int | None, n: int) -> int | None:
    """Click the first option ``n`` times, each time waiting for the next query."""
    for _ in range(n):
        driver.find_element(By.CSS_SELECTOR, 'button[name=choice][value="0"]').click()
        qid = _wait_for_new_query(driver, qid)
    return qid


def test_a_tab_answers_through_a_server_restart_without_a_reload(browser, tmp_path):
    path = tmp_path / "restart.db"
    quick_session(path, "cy", {"x": (0, 1), "y": (0, 1)}, budget=20)
    with ThreadServer(path) as server:
        port = int(server.url.rsplit(":", 1)[1])
        with server.client(admin=True) as c:
            token = links(c.get("/admin").text)[0]
        browser.get(f"{server.url}/a/{token}")
        qid = _answer(browser, _wait_for_new_query(browser, None), 5)
    # the server is gone; the tab still shows its question. A new server on the same file:
    with ThreadServer(path, port=port):
        _answer(browser, qid, 5)  # the same tab, no reload by hand
        assert "10 of 20 answered" in browser.page_source
    with Session.open(path, "cy") as s:
        history = s.history()
    assert len(history) == 10 and len({h.stored.query_id for h in history}) == 10
    assert all(h.stored.retracted_at is None for h in history)


def test_the_documented_pages_render_without_console_errors(browser, tmp_path):
    """The admin page with links, the results page with diagnostics and a question with four
    options (saved as the docs' pictures when ``BOTORCH_PREF_WEB_SCREENSHOTS`` names a folder)."""
    path = tmp_path / "study.db"
    params = {"sweetness": (0, 10), "sourness": (0, 5), "temperature": (4, 60)}
    for name in ("participant-01", "participant-02", "participant-03"):
        Session.create(path, name, params, "eubo", 2, 7, budget=20, n_initial=4).close()
    Session.create(path, "four-way", params, "qeubo", 4, 3, budget=12, n_initial=4).close()
    with Session.open(path, "participant-01") as s:
        for i in range(8):
            query = s.ask()
            s.answer(query.id, tie=True) if i == 5 else s.answer(query.id, winner=i % 2)
    with ThreadServer(path) as server:
        browser.get(f"{server.url}/admin/login?token={ADMIN}")
        assert "participant-03" in browser.page_source
        assert len(browser.find_elements(By.CSS_SELECTOR, "button.copy")) == 4  # JS shows them
        _save(browser, tmp_path, "admin-links.png", height=900)
        assert _console_errors(browser) == []
        browser.get(f"{server.url}/admin/s/1")
        WebDriverWait(browser, 180).until(
            lambda d: d.execute_script(
                "return Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)"
            )
        )
        assert "What the answers say" in browser.page_source
        _save(browser, tmp_path, "results-diagnostics.png", height=2000)
        assert _console_errors(browser) == []
        with server.client(admin=True) as c:
            token = links(c.get("/admin").text)[3]
        browser.get(f"{server.url}/a/{token}")
        _wait_for_new_query(browser, None)
        options = browser.find_elements(By.CSS_SELECTOR, "section.option")
        assert len(options) == 4
        tops = {round(o.rect["y"]) for o in options}
        widths = {round(o.rect["width"]) for o in options}
        assert len(tops) == 1 and len(widths) == 1  # one row of four equal options
        _save(browser, tmp_path, "question-q4.png", height=900)
        assert _console_errors(browser) == []


def _rate(driver, ratings: list[int]) -> None:
    """Click each option's rating (its level from 0), then the heading (the focus leaves the
    radio buttons, where keys move between them)."""
    for option, level in enumerate(ratings):
        driver.find_element(
            By.CSS_SELECTOR, f'input[name="rating-{option}"][value="{level}"]'
        ).click()
    driver.find_element(By.TAG_NAME, "h1").click()


def test_a_graded_study_with_ratings_is_answered_by_clicks_and_keys(browser, tmp_path):
    """The 5-point row and the ratings (saved as the docs' picture of a graded question)."""
    path = tmp_path / "graded.db"
    params = {"sweetness": (0, 10), "sourness": (0, 5)}
    Session.create(path, "gus", params, "eubo", 2, 5, budget=10, n_initial=2,
                   answers="graded", levels=5, ratings=3).close()  # fmt: skip
    with ThreadServer(path) as server:
        with server.client(admin=True) as c:
            token = links(c.get("/admin").text)[0]
        browser.get(f"{server.url}/a/{token}")
        qid = _wait_for_new_query(browser, None)
        grades = browser.find_elements(By.CSS_SELECTOR, "fieldset.scale button[name=grade]")
        assert [g.text.rsplit(" ", 1)[0] for g in grades] == [
            "Option 1 much better", "Option 1 slightly better", "About the same",
            "Option 2 slightly better", "Option 2 much better",
        ]  # fmt: skip
        assert len({round(g.rect["y"]) for g in grades}) == 1  # one row
        # without ratings the browser does not send the form (they are required)
        grades[0].click()
        assert _query_id(browser) == qid
        _rate(browser, [2, 0])
        _save(browser, tmp_path, "question-graded.png", height=700)
        assert _console_errors(browser) == []
        browser.find_elements(By.CSS_SELECTOR, "button[name=grade]")[0].click()
        answered = [qid]
        qid = _wait_for_new_query(browser, qid)
        for key, ratings in (("4", [0, 1]), ("3", [1, 1]), (Keys.ARROW_LEFT, [1, 2])):
            _rate(browser, ratings)
            ActionChains(browser).send_keys(key).perform()
            if key == Keys.ARROW_LEFT:  # not a graded answer: the page stays
                assert _query_id(browser) == qid
                browser.find_element(By.CSS_SELECTOR, 'button[value="skip"]').click()
            answered.append(qid)
            qid = _wait_for_new_query(browser, qid)
        with Session.open(path, "gus") as s:
            history = s.history()
    given = [(h.answer.kind, h.answer.winner, h.answer.strength, h.answer.ratings) for h in history]
    assert given == [
        ("winner", 0, 2, (2, 0)), ("winner", 1, 1, (0, 1)), ("tie", None, None, (1, 1)),
        ("skip", None, None, None),
    ]  # fmt: skip
    assert [h.stored.query_id for h in history] == answered
