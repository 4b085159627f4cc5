"""Helpers of the web tests: a uvicorn server in a thread, and reading the pages."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from botorch_pref.sessions import Session
from botorch_pref.web.app import WebConfig, create_app

ADMIN = "admin-token-for-tests"


def quick_session(path: Path, name: str, parameters: dict | None = None, **options) -> None:
    """Create a session whose queries are quick: random options, no refits."""
    Session.create(
        path,
        name,
        parameters or {"x": (0, 1)},
        "random",
        2,
        0,
        refit_all_until=0,
        refit_every=1000,
        **options,
    ).close()


class ThreadServer:
    """The web app served by uvicorn on 127.0.0.1 (a free port) in a thread of this process."""

    def __init__(self, path: Path, port: int = 0, **options) -> None:
        self.config = WebConfig(path, ADMIN, **options)
        self.app = create_app(self.config)
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        for _ in range(600):  # bounded wait for the socket
            if self.server.started:
                break
            time.sleep(0.05)
        assert self.server.started, "the server did not start"
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=120)

    def client(self, admin: bool = False) -> httpx.Client:
        headers = {"authorization": f"Bearer {ADMIN}"} if admin else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)


def create_form(nonce: str, **fields: str) -> dict[str, str]:
    """The admin page's create form: one parameter ``x`` in [0, 1], random pairs, defaults for
    the rest; ``fields`` override any of them."""
    form = {
        "nonce": nonce,
        "name": "s",
        "parameters": "x 0 1",
        "strategy": "random",
        "q": "2",
        "budget": "",
        "seed": "",
        "renderer": "auto",
        "prompt": "",
    }
    return {**form, **fields}


def nonces(html: str) -> list[str]:
    """The form nonces of a page, in order."""
    return re.findall(r'name="nonce" value="([^"]+)"', html)


def query_id(html: str) -> int | None:
    """The id of the query a page asks, or ``None``."""
    m = re.search(r'name="query_id" value="(\d+)"', html)
    return None if m is None else int(m.group(1))


def wait_for_query(client: httpx.Client, token: str, tries: int = 1200) -> str:
    """GET the answering page until it shows a query (or says the session is done).

    Returns:
        The page.
    """
    for _ in range(tries):
        page = client.get(f"/a/{token}").text
        if 'id="answer-form"' in page or 'id="done"' in page:
            return page
        time.sleep(0.05)
    raise AssertionError("no query was prepared")


def links(html: str) -> list[str]:
    """Every answer-link token on the admin page (its links are full URLs)."""
    return re.findall(r'class="answer-link" href="http://[^"/]+/a/([^"]+)"', html)


# Functions the tests run on a worker process's session (sent by name: module level).
def answered(session) -> int:
    """The session's number of standing answers."""
    return session.progress().answered


def session_name(session) -> str:
    """The session's name."""
    return session.name


def hold(session, busy: str, release: str) -> None:
    """Keep the session's worker busy: create the file ``busy``, wait (bounded) for ``release``."""
    Path(busy).touch()
    for _ in range(2400):
        if Path(release).exists():
            return
        time.sleep(0.05)


def wait_until(condition, tries: int = 12000, pause: float = 0.01) -> None:
    """Poll ``condition()`` until it holds (bounded)."""
    for _ in range(tries):
        if condition():
            return
        time.sleep(pause)
    raise AssertionError("the condition did not come true in time")
