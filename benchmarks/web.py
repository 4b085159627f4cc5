r"""Web benchmark: simulated annotators on ``botorch-pref serve``, bounded, on 127.0.0.1 only.

Phases (one server process, ``botorch-pref serve`` on a free port of 127.0.0.1):

1. **Answering**: ``--annotators`` simulated people, each on their own session of a
   ``--dim``-D EUBO study (q = 2) in one database file, for ``--seconds``. Each loads the page
   (the person's view), answers the shown query as soon as it is there (a noiseless user with a
   quadratic utility), then polls the page every ``--poll`` seconds, like the page's own
   refresh, until the next query shows. Measured: the answer POST's latency, the time from the
   POST's response until the next query is shown ("next query ready"), and at the end, from the
   database: acknowledged answers missing (lost) and queries answered more than once
   (duplicated). Each simulated person runs in a process of their own by default
   (``--clients processes``), as people answer from their own browsers; with ``--clients
   threads`` all of them share this process, and the times they measure then include waiting
   for each other's interpreter lock (tens of milliseconds at the tail with 20 people). The
   simulated people's own CPU time is reported (``cpu_s_clients``): on a small machine they
   compete with the server for its cores, which real people's browsers do not.
2. **Memory**: ``--idle-sessions`` more sessions are opened (one page view each, so the worker
   holds each session and stores its first query); the memory of the server and of its worker
   processes (resident set, RSS, and proportional set, PSS, which counts the pages forked
   processes share once) and the sessions held in memory are read once all are prepared.
3. **Dropping idle sessions**: the server runs with ``--idle``; the benchmark waits (bounded)
   until the sessions have left memory and reads the memory again, then opens the results view
   of some answered sessions, which rebuilds them from the database, and times it.

``--query-cpu N`` instead times, in this process, the CPU time of the first ``N`` queries a worker
prepares along one session (what bounds the time to the next query when many people answer).

``--kill-at S`` (repeatable) kills the server with SIGKILL ``S`` seconds into the answering and
starts it again on the same port and file: the simulated people keep answering from the pages
they had open, and the database check counts what was lost or doubled.

``--admin-sessions N`` instead times the admin page of a file with ``N`` sessions: its first
view (which makes the first page's links), a second view, the last page and the links download.

Everything is bounded: the run, every request (30 s timeout) and every wait. Output: a summary
and a JSON file (``--out``, default in the temporary folder that holds the database).

Example::

    OMP_WAIT_POLICY=PASSIVE python -m benchmarks.web            # 20 annotators, 60 s, 100 idle
    python -m benchmarks.web --annotators 2 --seconds 10 --idle-sessions 5   # a smoke test
    python -m benchmarks.web --annotators 10 --seconds 60 --kill-at 20 --kill-at 40
    python -m benchmarks.web --admin-sessions 1000
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from botorch_pref.sessions import Session

#: The repository root, put on the server processes' import path.
ROOT = Path(__file__).resolve().parents[1]

TOKEN = "benchmark-admin-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (its worker processes and their fork server)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) used so far by the server process and by the others."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {"server": 0.0, "others": 0.0}
    for p in _descendants(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out["server" if p == pid else "others"] += (int(fields[11]) + int(fields[12])) / tick
    return out


def _memory_mib(pid: int) -> dict[str, float]:
    """Resident memory of the server: its own, and of all its processes (RSS and PSS).

    PSS (proportional set size) shares the pages that forked processes have in common among
    them, so its sum is the memory the processes take together; the RSS sum counts shared
    pages once per process.
    """
    own = rss = pss = 0.0
    for p in _descendants(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        kib = int(re.search(r"^VmRSS:\s+(\d+)", status, re.M).group(1))
        rss += kib / 1024
        pss += int(re.search(r"^Pss:\s+(\d+)", rollup, re.M).group(1)) / 1024
        if p == pid:
            own = kib / 1024
    return {"server_rss": own, "all_rss": rss, "all_pss": pss, "processes": len(_descendants(pid))}


def _query(html: str) -> tuple[int, str] | None:
    qid = re.search(r'name="query_id" value="(\d+)"', html)
    nonce = re.search(r'name="nonce" value="([^"]+)"', html)
    return None if qid is None or nonce is None else (int(qid.group(1)), nonce.group(1))


def _options(html: str, dim: int) -> list[list[float]]:
    values = [float(v) for v in re.findall(r'<td class="num">([^<]+)</td>', html)]
    return [values[i * dim : (i + 1) * dim] for i in range(2)]


@dataclass
class Annotator:
    """A simulated person answering one session through its pages (:meth:`run`)."""

    url: str
    token: str
    dim: int
    deadline: float
    poll: float
    seed: int
    post_s: list[float] = field(default_factory=list)
    ready_s: list[float] = field(default_factory=list)
    acknowledged: list[tuple[int, int]] = field(default_factory=list)
    errors: int = 0
    cpu_s: float = 0.0

    def run(self) -> Annotator:
        """Answer until the deadline; return ``self`` with what was measured."""
        cpu = time.thread_time()
        self._answer(np.random.default_rng(self.seed).uniform(0.2, 0.8, self.dim))
        self.cpu_s = time.thread_time() - cpu
        return self

    def _answer(self, target: np.ndarray) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as c:
            waiting_since: float | None = None
            while time.monotonic() < self.deadline:
                try:
                    page = c.get(f"/a/{self.token}").text
                except httpx.HTTPError:  # e.g. the server was killed: try again shortly
                    self.errors += 1
                    time.sleep(self.poll)
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
                winner = int(np.argmin([np.sum((np.array(o) - target) ** 2) for o in opts]))
                start = time.monotonic()
                try:
                    r = c.post(
                        f"/a/{self.token}/answer",
                        data={"nonce": nonce, "query_id": qid, "choice": str(winner)},
                    )
                except httpx.HTTPError:
                    self.errors += 1
                    time.sleep(self.poll)
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


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--annotators", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--dim", type=int, default=4)
    parser.add_argument("--idle-sessions", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2, help="the server's --workers")
    parser.add_argument("--idle", type=float, default=20.0, help="the server's --idle seconds")
    parser.add_argument(
        "--batch", type=int, default=None, help="the server's --batch (default: the server's)"
    )
    parser.add_argument("--poll", type=float, default=0.25, help="seconds between page loads")
    parser.add_argument(
        "--clients",
        choices=("processes", "threads"),
        default="processes",
        help="one process per simulated person (default) or all as threads of this process",
    )
    parser.add_argument("--out", default=None, help="JSON file (default: in the temporary folder)")
    parser.add_argument(
        "--query-cpu", type=int, default=0, help="only time this many queries' CPU, no server"
    )
    parser.add_argument(
        "--kill-at",
        type=float,
        action="append",
        default=[],
        help="seconds into the answering at which the server is killed (SIGKILL) and started "
        "again on the same port and file (repeatable)",
    )
    parser.add_argument(
        "--admin-sessions",
        type=int,
        default=0,
        help="only time the admin page of a file with this many sessions, no answering",
    )
    args = parser.parse_args()
    if (
        args.annotators > 100
        or args.seconds > 600
        or args.idle_sessions > 500
        or args.query_cpu > 200
        or args.admin_sessions > 5000
        or any(not 0 < t < args.seconds for t in args.kill_at)
        or (args.batch is not None and args.batch < 1)
    ):
        parser.error(
            "bounded: at most 100 annotators, 600 s, 500 idle sessions, 200 queries, 5000 admin "
            "sessions; batch >= 1; kills within the answering"
        )
    return args


def _start_server(
    db: Path, args: argparse.Namespace, port: int | None = None
) -> tuple[subprocess.Popen, str]:
    """``botorch-pref serve`` on a free port (or ``port``) of 127.0.0.1, once it answers."""
    port = port or _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BOTORCH_PREF_ADMIN_TOKEN": TOKEN}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    cmd = [sys.executable, "-m", "botorch_pref.cli", "serve", str(db), "--port", str(port)]
    cmd += ["--workers", str(args.workers), "--idle", str(args.idle)]
    if args.batch is not None:
        cmd += ["--batch", str(args.batch)]
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(1200):
        try:
            httpx.get(url + "/", timeout=5)
            return server, url
        except httpx.HTTPError:
            time.sleep(0.05)
    _stop(server)
    raise RuntimeError("the server did not start")


def _stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.kill(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(server.pid, signal.SIGKILL)
            server.wait(timeout=60)


def _tokens(admin: httpx.Client) -> dict[str, str]:
    """``{session name: answer-link token}`` from the admin page's links download."""
    rows = list(csv.reader(io.StringIO(admin.get("/admin/links.csv").text)))[1:]
    return {name: url.rsplit("/", 1)[-1] for name, url, _ in rows if url}


def _ids(admin: httpx.Client) -> dict[str, str]:
    """``{session name: results id}`` from every page of the admin page."""
    out: dict[str, str] = {}
    for page in range(1, 1000):
        html = admin.get("/admin", params={"page": page}).text
        for row in html.split("<tr>")[1:]:
            found = re.search(r"<bdi>([^<]+)</bdi></td>.*?href=\"/admin/s/(\d+)\"", row, re.S)
            if found:
                out[found.group(1)] = found.group(2)
        if f"Page {page} of {page}" in html or "Page " not in html:
            return out
    return out


def _run(person: Annotator) -> Annotator:
    return person.run()


def _answering(url: str, tokens: dict[str, str], args: argparse.Namespace) -> list[Annotator]:
    """Phase 1: one simulated person per session, answering for ``args.seconds``.

    ``time.monotonic`` is one clock for all processes of the machine, so one deadline serves.
    """
    deadline = time.monotonic() + args.seconds
    people = [
        Annotator(url, tokens[name], args.dim, deadline, args.poll, seed=i)
        for i, name in enumerate(tokens)
    ]
    if args.clients == "threads":
        results: list[Annotator | None] = [None] * len(people)

        def run(i: int) -> None:
            results[i] = people[i].run()

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(people))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=args.seconds + 120)
        return [r if r is not None else p for r, p in zip(results, people, strict=True)]
    with multiprocessing.get_context("fork").Pool(len(people)) as pool:
        return pool.map_async(_run, people).get(timeout=args.seconds + 120)


def _check_database(db: Path, people: list[Annotator], names: list[str]) -> dict:
    """Acknowledged answers missing from the database, and queries answered twice."""
    lost = duplicated = extra = 0
    for p, name in zip(people, names, strict=True):
        with Session.open(db, name) as s:
            history = [h for h in s.history() if h.answer.retracted_at is None]
        counts: dict[int, int] = {}
        for h in history:
            counts[h.answer.query_id] = counts.get(h.answer.query_id, 0) + 1
        duplicated += sum(c - 1 for c in counts.values() if c > 1)
        lost += sum(1 for qid, _ in p.acknowledged if qid not in counts)
        extra += len(counts) - len({qid for qid, _ in p.acknowledged})
    return {"lost": lost, "duplicated": duplicated, "unacknowledged_stored": extra}


def _latencies(people: list[Annotator]) -> dict:
    post = [s for p in people for s in p.post_s]
    ready = [s for p in people for s in p.ready_s]
    return {
        "answers": sum(len(p.acknowledged) for p in people),
        "errors": sum(p.errors for p in people),
        "post_ms_p50": 1000 * _p(post, 50),
        "post_ms_p95": 1000 * _p(post, 95),
        "post_ms_max": 1000 * max(post, default=float("nan")),
        "ready_s_p50": _p(ready, 50),
        "ready_s_p95": _p(ready, 95),
        "ready_s_max": max(ready, default=float("nan")),
    }


def _status(admin: httpx.Client) -> dict:
    return admin.get("/admin/status.json").json()


def _idle_memory(admin: httpx.Client, url: str, server: int, args: argparse.Namespace) -> dict:
    """Phase 2: open the idle sessions (one page view each), then read the memory."""
    with httpx.Client(base_url=url, timeout=60) as c:
        for name, token in _tokens(admin).items():
            if name.startswith("idle"):
                c.get(f"/a/{token}")
    t0 = time.monotonic()
    status = _status(admin)
    while status["preparing"] and time.monotonic() - t0 < 600:
        time.sleep(0.5)
        status = _status(admin)
    return {
        "idle_prepare_s": time.monotonic() - t0,
        "sessions_in_memory_loaded": status["sessions_in_memory"],
        "memory_mib_loaded": _memory_mib(server),
    }


def _dropped(admin: httpx.Client, server: int, ids: list[str], args: argparse.Namespace) -> dict:
    """Phase 3: wait (bounded) until idle sessions leave memory; rebuild some answered ones."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < args.idle * 3 + 60:
        status = _status(admin)
        if status["sessions_in_memory"] == 0:
            break
        time.sleep(1.0)
    out = {
        "sessions_in_memory_after_idle": status["sessions_in_memory"],
        "dropped_after_s": time.monotonic() - t0,
        "memory_mib_after_idle": _memory_mib(server),
    }
    rebuild = []
    for record_id in ids:
        start = time.monotonic()
        r = admin.get(f"/admin/s/{record_id}")
        rebuild.append(time.monotonic() - start)
        assert r.status_code == 200
    out["rebuild_s"] = rebuild
    return out


def _query_cpu(count: int, dim: int) -> int:
    """CPU seconds of one worker's preparations along one EUBO session, in this process.

    CPU time (not wall time) of :func:`botorch_pref.web.held.prepare` on one thread: what one
    query costs a worker, whatever else runs on the machine.
    """
    import torch

    from botorch_pref.web import held

    torch.set_num_threads(1)
    db = Path(tempfile.mkdtemp(prefix="botorch-pref-web-bench-")) / "cpu.db"
    Session.create(db, "s", {f"x{i}": (0.0, 1.0) for i in range(dim)}, "eubo", 2, 0).close()
    held.start(str(db), 600.0, 1)
    target = np.random.default_rng(0).uniform(0.2, 0.8, dim)
    cpu = []
    for _ in range(count):
        start = time.process_time()
        held.prepare("s")
        cpu.append(time.process_time() - start)
        with Session.open(db, "s") as s:
            query = s.pending()
            gaps = [np.sum((np.array(list(o.values())) - target) ** 2) for o in query.as_dicts()]
            s.answer(query.id, winner=int(np.argmin(gaps)))
    held.close_all()
    print("CPU s of the query after each answer:", " ".join(f"{c:.3f}" for c in cpu))
    return 0


def _admin_page(count: int, args: argparse.Namespace) -> int:
    """Time the admin page of a file with ``count`` sessions (first view, makes their links)."""
    tmp = Path(tempfile.mkdtemp(prefix="botorch-pref-web-admin-"))
    db = tmp / "study.db"
    params = {f"x{i}": (0.0, 1.0) for i in range(args.dim)}
    for i in range(count):
        Session.create(db, f"participant {i:04d}", params, "eubo", 2, i, budget=20).close()
    result: dict = {"sessions": count, "load_before": Path("/proc/loadavg").read_text().strip()}
    server, url = _start_server(db, args)
    admin = httpx.Client(base_url=url, timeout=60, headers={"authorization": f"Bearer {TOKEN}"})
    try:
        for key, page in (("first", 1), ("again", 1), ("last", count // 50 + 1)):
            start = time.monotonic()
            r = admin.get("/admin", params={"page": page})
            result[f"{key}_page_s"] = time.monotonic() - start
            result[f"{key}_page_kb"] = len(r.content) / 1024
            assert r.status_code == 200
        start = time.monotonic()
        r = admin.get("/admin/links.csv")
        result["links_csv_s"] = time.monotonic() - start
        result["links_csv_rows"] = len(r.text.splitlines()) - 1
    finally:
        admin.close()
        _stop(server)
    result["load_after"] = Path("/proc/loadavg").read_text().strip()
    for key, value in result.items():
        print(f"{key}: {value}")
    return 0


def main() -> int:
    args = _arguments()
    if args.query_cpu:
        return _query_cpu(args.query_cpu, args.dim)
    if args.admin_sessions:
        return _admin_page(args.admin_sessions, args)
    tmp = Path(tempfile.mkdtemp(prefix="botorch-pref-web-bench-"))
    db = tmp / "study.db"
    params = {f"x{i}": (0.0, 1.0) for i in range(args.dim)}
    names = [f"annotator {i:02d}" for i in range(args.annotators)]
    idle_names = [f"idle {i:03d}" for i in range(args.idle_sessions)]
    for i, name in enumerate(names + idle_names):
        Session.create(db, name, params, "eubo", 2, i, budget=1000).close()

    result: dict = {
        k: getattr(args, k) for k in ("annotators", "seconds", "dim", "workers", "batch", "clients")
    }
    result["idle_sessions"] = args.idle_sessions
    result["load_before"] = Path("/proc/loadavg").read_text().strip()
    server, url = _start_server(db, args)
    admin = httpx.Client(base_url=url, timeout=60, headers={"authorization": f"Bearer {TOKEN}"})
    try:
        _status(admin)  # the worker processes have started
        result["memory_mib_start"] = _memory_mib(server.pid)
        tokens = _tokens(admin)
        ids = _ids(admin)
        cpu = _cpu_s(server.pid)
        start = time.monotonic()
        killer = None
        if args.kill_at:

            def kill_and_restart() -> None:
                nonlocal server
                for at in sorted(args.kill_at):
                    time.sleep(max(0.0, start + at - time.monotonic()))
                    os.kill(server.pid, signal.SIGKILL)  # no clean shutdown
                    server.wait(timeout=60)
                    server, _ = _start_server(db, args, port=int(url.rsplit(":", 1)[1]))

            killer = threading.Thread(target=kill_and_restart)
            killer.start()
        people = _answering(url, {n: tokens[n] for n in names}, args)
        if killer is not None:
            killer.join(timeout=120)
        result["kills"] = len(args.kill_at)
        result["load_after_answering"] = Path("/proc/loadavg").read_text().strip()
        result["cpu_s_answering"] = {k: v - cpu[k] for k, v in _cpu_s(server.pid).items()}
        result["cpu_s_clients"] = sum(p.cpu_s for p in people)
        result.update(_latencies(people), **_check_database(db, people, names))
        result.update(_idle_memory(admin, url, server.pid, args))
        result.update(_dropped(admin, server.pid, [ids[n] for n in names[:5]], args))
        result["answers_per_rebuilt_session"] = [len(p.acknowledged) for p in people[:5]]
    finally:
        admin.close()
        _stop(server)
    result["load_after"] = Path("/proc/loadavg").read_text().strip()
    out = Path(args.out) if args.out else tmp / "web-benchmark.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"written: {out}")
    for key, value in result.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
