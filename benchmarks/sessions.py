"""Sessions benchmark: the cost of resuming a session, and how long one session waits for another.

Two figures, each printed as a table:

``resume``
    A 2-D EUBO session with ``--answers`` answers (imported, so the database is built quickly;
    the resume cost is what is measured). Measured in a fresh process with the package
    imported: ``Session.open`` followed by ``ask()`` (the next query), and ``session status``.
    With a checkout that stores fitted hyperparameters (schema 2), the fit at the last answer is
    stored first, as a live session stores one at each refit: it is computed once with a
    schedule that fits only there (its values do not change the cost measured).
``wait``
    Two processes answer two sessions in one file for ``--seconds``: one a 6-D EUBO session
    (each new query optimises the acquisition function), the other a 2-D session with random
    queries whose person thinks up to 0.5 s before each answer; each starts timing after its
    first query (the 6-D one first). Reported: how long the second one's ``answer()`` and
    ``ask()`` calls took (they wait for the database's write lock): median, p95 and max.

Run it against any checkout with that checkout first on ``PYTHONPATH``::

    PYTHONPATH=. python -m benchmarks.sessions resume --answers 300
    PYTHONPATH=/tmp/base python -m benchmarks.sessions resume --answers 300
    PYTHONPATH=. python -m benchmarks.sessions wait --seconds 60
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _run(*args: str) -> dict:
    """Run this script's hidden sub-command in a fresh process; its JSON result."""
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _utility(x: np.ndarray) -> float:
    return -float(((x - 0.3) ** 2).sum())


def build(db: Path, n: int, seed: int = 0) -> None:
    """A 2-D EUBO session ``bench`` with ``n`` imported answers of a simulated person."""
    from botorch_pref.sessions import Session

    rng = np.random.default_rng(seed)
    records = []
    for _ in range(n):
        x = rng.random((2, 2))
        records.append({"options": x.tolist(), "winner": int(_utility(x[1]) > _utility(x[0]))})
    with Session.create(db, "bench", {"x1": (0.0, 1.0), "x2": (0.0, 1.0)}, "eubo", seed=0) as s:
        s.import_comparisons(records)


def store_fit(db: Path) -> bool:
    """Store the hyperparameters fitted at the last answer (schema 2 only); whether it did."""
    con = sqlite3.connect(db)
    has_fits = con.execute("SELECT 1 FROM sqlite_master WHERE name = 'fits'").fetchone()
    con.close()
    if not has_fits:
        return False
    from botorch_pref.loop import PreferenceOptimizer
    from botorch_pref.sessions import Session

    with Session.open(db, "bench") as s:
        history = s.history(include_retracted=False)
        records = [(h.query.tensor(), h.answer.winner) for h in history]
        settings = {**s.settings, "refit_all_until": 0, "refit_every": len(records)}
        opt = PreferenceOptimizer(s.bounds, **settings)
        opt.sync(records)
        h = opt.hyperparameters
        assert h.n_answers == len(records)
        session_id = s.store.get_session("bench").id
    con = sqlite3.connect(db, isolation_level=None)
    con.execute(
        "INSERT INTO fits (session_id, n_answers, last_answer_id, hyperparameters, created_at) "
        "VALUES (?, ?, ?, ?, datetime('now'))",
        (session_id, h.n_answers, history[-1].answer.id, json.dumps(h.to_dict())),
    )
    con.close()
    return True


def _reopen(db: str, status: bool = True) -> None:
    """Hidden: time ``session status`` (unless told not to), then ``Session.open`` + ``ask()``."""
    import contextlib
    import io

    from botorch_pref.cli import main
    from botorch_pref.sessions import Session

    status_s = float("nan")
    if status:
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            main(["session", "status", db, "bench"])
        status_s = time.perf_counter() - t
    t = time.perf_counter()
    with Session.open(db, "bench") as s:
        s.ask()
    print(json.dumps({"status_s": status_s, "reopen_ask_s": time.perf_counter() - t}))


def resume(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "resume.db"
        t = time.perf_counter()
        build(db, args.answers)
        stored = store_fit(db)
        build_s = time.perf_counter() - t
        result = _run("_reopen", str(db), *([] if args.status else ["--no-status"]))
    print("| answers | fit stored | build s | status s | reopen + ask s |")
    print("|---|---|---|---|---|")
    print(
        f"| {args.answers} | {'yes' if stored else 'no (schema 1)'} | {build_s:.1f} | "
        f"{result['status_s']:.2f} | {result['reopen_ask_s']:.2f} |"
    )


def _answer(db: str, name: str, seconds: float, think: float) -> None:
    """Hidden: answer ``name`` for ``seconds``; the durations of ``ask()`` and ``answer()``."""
    from botorch_pref.sessions import Session

    rng = np.random.default_rng(len(name))
    asks, answers = [], []
    with Session.open(db, name) as s:
        s.ask()  # warm up: rebuild the model from the imported answers (not counted)
        print("started", flush=True)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter()
            query = s.ask()
            asks.append(time.perf_counter() - t)
            winner = int(rng.integers(query.q))
            time.sleep(think * rng.random())  # the person thinks: answers land at any time
            t = time.perf_counter()
            s.answer(query.id, winner)
            answers.append(time.perf_counter() - t)
    print(json.dumps({"asks": asks, "answers": answers}))


def wait(args: argparse.Namespace) -> None:
    from botorch_pref.sessions import Session

    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "wait.db"
        six = {f"x{i}": (0.0, 1.0) for i in range(6)}
        with Session.create(db, "eubo6", six, "eubo", seed=0, n_initial=2) as s:
            s.import_comparisons(
                [{"options": rng.random((2, 6)).tolist(), "winner": 0} for _ in range(20)]
            )
        fast = {"refit_all_until": 1, "refit_every": 10**6}
        Session.create(db, "random2", {"a": (0.0, 1.0), "b": (0.0, 1.0)}, "random", seed=0,
                       **fast).close()  # fmt: skip
        procs = {}
        for name, seconds, think in (
            ("eubo6", args.seconds + 10, 0.0),
            ("random2", args.seconds, 0.5),
        ):
            procs[name] = subprocess.Popen(
                [sys.executable, __file__, "_answer", str(db), name, str(seconds), str(think)],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert procs[name].stdout.readline().strip() == "started"  # after its first query
        results = {
            n: json.loads(p.communicate()[0].strip().splitlines()[-1]) for n, p in procs.items()
        }
    gen = results["eubo6"]["asks"]
    print(
        "| 6-D EUBO queries | their mean ask s | other session's | n | median s | p95 s | max s |"
    )
    print("|---|---|---|---|---|---|---|")
    for call in ("answers", "asks"):
        waits = sorted(results["random2"][call])
        p95 = waits[min(len(waits) - 1, int(0.95 * len(waits)))]
        print(
            f"| {len(gen)} | {statistics.mean(gen):.2f} | {call[:-1]}() | {len(waits)} | "
            f"{statistics.median(waits):.3f} | {p95:.3f} | {waits[-1]:.3f} |"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_reopen":
        return _reopen(sys.argv[2], "--no-status" not in sys.argv)
    if len(sys.argv) > 1 and sys.argv[1] == "_answer":
        return _answer(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="figure", required=True)
    r = sub.add_parser("resume", help="reopen a session and ask; session status")
    r.add_argument("--answers", type=int, default=300)
    r.add_argument(
        "--no-status", dest="status", action="store_false", help="time only reopen + ask"
    )
    w = sub.add_parser("wait", help="one session's answers while another generates 6-D queries")
    w.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    print(f"botorch_pref from {os.path.dirname(__import__('botorch_pref').__file__)}")
    {"resume": resume, "wait": wait}[args.figure](args)


if __name__ == "__main__":
    main()
