"""Form input and serving edge cases of the web front end, each once a defect.

The application runs in-process (Starlette's ``TestClient``, no lifespan) with a stand-in for
the query-preparing workers: the tests store queries themselves, so no worker process starts.
"""

from __future__ import annotations

import argparse
import os
import re
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
from tests.test_web_helpers import ADMIN, create_form, links, nonces, quick_session

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
    monkeypatch.setattr("botorch_pref.web.state.Preparer", _NoWorkers)


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

    from botorch_pref.web.cli import cmd_serve

    quick_session(tmp_path / "a.db", "s")
    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
    args = argparse.Namespace(
        db=str(tmp_path / "a.db"),
        host=host,
        port=8123,
        token=ADMIN,
        renderer=[],
        demo=None,
        workers=1,
        idle=600.0,
        batch=1,
        max_body=16 * 1024,
    )
    assert cmd_serve(args) == 0
    assert served["host"] == host and served["port"] == 8123
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
