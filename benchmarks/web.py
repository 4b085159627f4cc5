r"""Web benchmark: simulated annotators on ``botorch-pref serve``, bounded, on 127.0.0.1 only.

Phases (one server process, ``botorch-pref serve`` on a free port of 127.0.0.1):

1. **Answering**: ``--annotators`` simulated people (threads), each on their own session of a
   ``--dim``-D EUBO study (q = 2) in one database file, for ``--seconds``. Each loads the page
   (the person's view), answers the shown query as soon as it is there (a noiseless user with a
   quadratic utility), then polls the page every ``--poll`` seconds, like the page's own
   refresh, until the next query shows. Measured: the answer POST's latency, the time from the
   POST's response until the next query is shown ("next query ready"), and at the end, from the
   database: acknowledged answers missing (lost) and queries answered more than once
   (duplicated).
2. **Memory**: ``--idle-sessions`` more sessions are opened (one page view each, so the worker
   holds each session and stores its first query); the server's resident memory (VmRSS) and the
   sessions it holds in memory are read once all are prepared.
3. **Dropping idle sessions**: the server runs with ``--idle``; the benchmark waits (bounded)
   until the sessions have left memory and reads the memory again, then opens the results view
   of some answered sessions, which rebuilds them from the database, and times it.

Everything is bounded: the run, every request (30 s timeout) and every wait. Output: a summary
and a JSON file (``--out``, default in the temporary folder that holds the database).

Example::

    OMP_WAIT_POLICY=PASSIVE python benchmarks/web.py            # 20 annotators, 60 s, 100 idle
    python benchmarks/web.py --annotators 2 --seconds 10 --idle-sessions 5   # a smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from botorch_pref.sessions import Session  # noqa: E402

TOKEN = "benchmark-admin-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _query(html: str) -> tuple[int, str] | None:
    qid = re.search(r'name="query_id" value="(\d+)"', html)
    nonce = re.search(r'name="nonce" value="([^"]+)"', html)
    return None if qid is None or nonce is None else (int(qid.group(1)), nonce.group(1))


def _options(html: str, dim: int) -> list[list[float]]:
    values = [float(v) for v in re.findall(r'<td class="num">([^<]+)</td>', html)]
    return [values[i * dim : (i + 1) * dim] for i in range(2)]


class Annotator(threading.Thread):
    """A simulated person answering one session through its pages."""

    def __init__(self, url: str, token: str, dim: int, deadline: float, poll: float, seed: int):
        super().__init__(daemon=True)
        self.url, self.token, self.dim = url, token, dim
        self.deadline, self.poll = deadline, poll
        self.target = np.random.default_rng(seed).uniform(0.2, 0.8, dim)
        self.post_s: list[float] = []
        self.ready_s: list[float] = []
        self.acknowledged: list[tuple[int, int]] = []
        self.errors = 0

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as c:
            waiting_since: float | None = None
            while time.monotonic() < self.deadline:
                try:
                    page = c.get(f"/a/{self.token}").text
                except httpx.HTTPError:
                    self.errors += 1
                    continue
                found = _query(page)
                if found is None:
                    if 'id="done"' in page:
                        return
                    time.sleep(self.poll)
                    continue
                if waiting_since is not None:
                    self.ready_s.append(time.monotonic() - waiting_since)
                qid, nonce = found
                opts = _options(page, self.dim)
                winner = int(np.argmin([np.sum((np.array(o) - self.target) ** 2) for o in opts]))
                start = time.monotonic()
                try:
                    r = c.post(
                        f"/a/{self.token}/answer",
                        data={"nonce": nonce, "query_id": qid, "choice": str(winner)},
                    )
                except httpx.HTTPError:
                    self.errors += 1
                    continue
                done = time.monotonic()
                self.post_s.append(done - start)
                if r.status_code == 303:
                    self.acknowledged.append((qid, winner))
                else:
                    self.errors += 1
                waiting_since = done


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--dim", type=int, default=4)
    parser.add_argument("--idle-sessions", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2, help="the server's --workers")
    parser.add_argument("--idle", type=float, default=20.0, help="the server's --idle seconds")
    parser.add_argument("--poll", type=float, default=0.25, help="seconds between page loads")
    parser.add_argument("--out", default=None, help="JSON file (default: in the temporary folder)")
    args = parser.parse_args()
    if args.annotators > 100 or args.seconds > 600 or args.idle_sessions > 500:
        parser.error("bounded: at most 100 annotators, 600 s and 500 idle sessions")

    tmp = Path(tempfile.mkdtemp(prefix="botorch-pref-web-bench-"))
    db = tmp / "study.db"
    params = {f"x{i}": (0.0, 1.0) for i in range(args.dim)}
    names = [f"annotator {i:02d}" for i in range(args.annotators)]
    idle_names = [f"idle {i:03d}" for i in range(args.idle_sessions)]
    for i, name in enumerate(names + idle_names):
        Session.create(db, name, params, "eubo", 2, i, budget=1000).close()

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BOTORCH_PREF_ADMIN_TOKEN": TOKEN}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    cmd = [
        sys.executable,
        "-m",
        "botorch_pref.cli",
        "serve",
        str(db),
        "--port",
        str(port),
        "--workers",
        str(args.workers),
        "--idle",
        str(args.idle),
    ]
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    admin = httpx.Client(base_url=url, timeout=60, headers={"authorization": f"Bearer {TOKEN}"})
    result: dict = {
        "annotators": args.annotators,
        "seconds": args.seconds,
        "dim": args.dim,
        "workers": args.workers,
        "idle_sessions": args.idle_sessions,
        "uptime_before": Path("/proc/loadavg").read_text().strip(),
    }
    try:
        for _ in range(1200):
            try:
                admin.get("/")
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        rss_start = _rss_mib(server.pid)
        page = admin.get("/admin").text
        tokens = dict(
            re.findall(r"<td>([^<]+)</td>\s*<td>eubo</td>.*?href=\"/a/([^\"]+)\"", page, re.S)
        )
        ids = dict(
            re.findall(r"<td>([^<]+)</td>\s*<td>eubo</td>.*?href=\"/admin/s/(\d+)\"", page, re.S)
        )

        # 1. answering
        deadline = time.monotonic() + args.seconds
        people = [
            Annotator(url, tokens[name], args.dim, deadline, args.poll, seed=i)
            for i, name in enumerate(names)
        ]
        for p in people:
            p.start()
        for p in people:
            p.join(timeout=args.seconds + 120)
        result["load_after_answering"] = Path("/proc/loadavg").read_text().strip()
        post = [s for p in people for s in p.post_s]
        ready = [s for p in people for s in p.ready_s]
        lost = duplicated = extra = 0
        acknowledged = 0
        for p, name in zip(people, names, strict=True):
            with Session.open(db, name) as s:
                history = [h for h in s.history() if h.answer.retracted_at is None]
            counts: dict[int, int] = {}
            for h in history:
                counts[h.answer.query_id] = counts.get(h.answer.query_id, 0) + 1
            duplicated += sum(c - 1 for c in counts.values() if c > 1)
            lost += sum(1 for qid, _ in p.acknowledged if qid not in counts)
            extra += len(counts) - len({qid for qid, _ in p.acknowledged})
            acknowledged += len(p.acknowledged)
        result.update(
            answers=acknowledged,
            lost=lost,
            duplicated=duplicated,
            unacknowledged_stored=extra,
            errors=sum(p.errors for p in people),
            post_ms_p50=1000 * _p(post, 50),
            post_ms_p95=1000 * _p(post, 95),
            post_ms_max=1000 * max(post, default=float("nan")),
            ready_s_p50=_p(ready, 50),
            ready_s_p95=_p(ready, 95),
            ready_s_max=max(ready, default=float("nan")),
            rss_mib_start=rss_start,
        )

        # 2. memory with the idle sessions held
        page = admin.get("/admin").text
        idle_tokens = [
            t for n, t in re.findall(r"<td>(idle [^<]+)</td>.*?href=\"/a/([^\"]+)\"", page, re.S)
        ]
        with httpx.Client(base_url=url, timeout=60) as c:
            for token in idle_tokens:
                c.get(f"/a/{token}")
        t0 = time.monotonic()
        status = admin.get("/admin/status.json").json()
        while status["preparing"] and time.monotonic() - t0 < 600:
            time.sleep(0.5)
            status = admin.get("/admin/status.json").json()
        result["idle_prepare_s"] = time.monotonic() - t0
        result["sessions_in_memory_loaded"] = status["sessions_in_memory"]
        result["rss_mib_loaded"] = _rss_mib(server.pid)

        # 3. idle sessions leave memory; a dropped session is rebuilt from the database
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.idle * 3 + 60:
            status = admin.get("/admin/status.json").json()
            if status["sessions_in_memory"] == 0:
                break
            time.sleep(1.0)
        result["sessions_in_memory_after_idle"] = status["sessions_in_memory"]
        result["dropped_after_s"] = time.monotonic() - t0
        result["rss_mib_after_idle"] = _rss_mib(server.pid)
        rebuild = []
        for name in names[:5]:
            start = time.monotonic()
            r = admin.get(f"/admin/s/{ids[name]}")
            rebuild.append(time.monotonic() - start)
            assert r.status_code == 200
        result["rebuild_s"] = rebuild
        result["answers_per_rebuilt_session"] = [len(p.acknowledged) for p in people[:5]]
    finally:
        admin.close()
        if server.poll() is None:
            os.kill(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(server.pid, signal.SIGKILL)
                server.wait(timeout=60)
    result["uptime_after"] = Path("/proc/loadavg").read_text().strip()
    out = Path(args.out) if args.out else tmp / "web-benchmark.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"written: {out}")
    for key, value in result.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
