"""Crash test: SIGKILL the server while answers are posted, restart it, check the database."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

if os.environ.get("CI") != "true":
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")

import httpx

from botorch_pref.sessions import Session
from tests.test_web_helpers import ADMIN, links, nonces, query_id, quick_session

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``botorch-pref serve`` in a child process on 127.0.0.1."""

    def __init__(self, path: Path) -> None:
        self.port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "BOTORCH_PREF_ADMIN_TOKEN": ADMIN}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "botorch_pref.cli",
                "serve",
                str(path),
                "--port",
                str(self.port),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        for _ in range(1200):  # bounded wait until it answers
            try:
                if httpx.get(self.url + "/", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise AssertionError("the server did not start")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=60)


def _running(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def servers():
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.kill()


def _annotate(url: str, token: str, successes: list, stop: threading.Event) -> None:
    """Answer as fast as the page allows; keep (query id, winner) of each 303 response."""
    with httpx.Client(base_url=url, timeout=30) as c:
        for i in range(10_000):
            if stop.is_set():
                return
            try:
                page = c.get(f"/a/{token}").text
                qid = query_id(page)
                if qid is None:
                    time.sleep(0.02)
                    continue
                winner = i % 2
                r = c.post(
                    f"/a/{token}/answer",
                    data={"nonce": nonces(page)[0], "query_id": qid, "choice": str(winner)},
                )
            except httpx.HTTPError:
                return  # the server is gone
            if r.status_code == 303:
                successes.append((qid, winner))


def test_sigkill_while_answering_loses_and_duplicates_nothing(tmp_path, servers):
    path = tmp_path / "crash.db"
    names = ("p1", "p2")
    for name in names:
        quick_session(path, name, {"x": (0, 1), "y": (0, 1)})  # many answers in flight
    servers.append(ServerProcess(path))
    url = servers[0].url
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"}) as c:
        tokens = links(c.get("/admin").text)
        workers = c.get("/admin/status.json").json()["worker_pids"]
    assert workers and servers[0].proc.pid not in workers
    successes: dict[str, list] = {name: [] for name in names}
    stop = threading.Event()
    threads = [
        threading.Thread(target=_annotate, args=(url, token, successes[name], stop))
        for name, token in zip(names, tokens, strict=True)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 300  # bounded, with room for a loaded machine's slow answers
    while time.monotonic() < deadline and sum(len(v) for v in successes.values()) <= 20:
        time.sleep(0.01)
    servers[0].kill()  # SIGKILL while the annotators are posting
    stop.set()
    for t in threads:
        t.join(timeout=120)
    assert sum(len(v) for v in successes.values()) > 20
    for _ in range(1200):  # bounded: the worker processes end with the server
        if not any(_running(pid) for pid in workers):
            break
        time.sleep(0.05)
    assert not any(_running(pid) for pid in workers), "a worker outlived the killed server"

    pending = {}
    for name in names:
        with Session.open(path, name) as s:
            history = s.history()
            pending[name] = s.pending()
        by_query: dict[int, list] = {}
        for h in history:
            by_query.setdefault(h.stored.query_id, []).append(h.answer)
        assert all(len(v) == 1 for v in by_query.values()), "a query was answered twice"
        for qid, winner in successes[name]:
            assert qid in by_query, f"answer to query {qid} was acknowledged but lost"
            assert by_query[qid][0].winner == winner
        # at most one more answer than acknowledged: the one whose response the kill cut off
        assert len(history) - len(successes[name]) in (0, 1)

    servers.append(ServerProcess(path))  # restart on the same file
    with httpx.Client(base_url=servers[1].url, timeout=30) as c:
        for name, token in zip(names, tokens, strict=True):
            page = c.get(f"/a/{token}").text
            if pending[name] is not None:
                assert query_id(page) == pending[name].id  # the pending query, shown again
            for _ in range(1200):
                if query_id(page) is not None:
                    break
                time.sleep(0.05)
                page = c.get(f"/a/{token}").text
            assert query_id(page) is not None
