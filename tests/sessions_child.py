"""Helper process for the session crash and concurrency tests (not a test module).

``python tests/sessions_child.py`` imports the package once, prints ``READY`` and then reads one
JSON command per line from standard input. ``{"label": ..., "db": ..., "name": ..., ...}``
forks a child that opens the session and answers queries with a simulated user; the server prints
``PID <label> <pid>`` and, when the child ends, ``EXIT <label> <pid> <status>``. Forking from a
process that has already imported torch and BoTorch makes each child start in milliseconds, so
the tests can kill many of them.

The child prints, each line written with one ``write`` call and flushed at once:

* ``SHOW <label> <query id> <options as JSON>`` when ``ask()`` returned a query;
* ``ANSWERING <label> <query id>`` just before answering (or undoing);
* ``ACK <label> <query id> <answer id> <kind> <winner>`` after an answer was committed;
* ``UNDO <label> <answer id>`` after an answer was retracted;
* ``LOST <label> <query id> <message>`` when another process answered the query first;
* ``DONE <label>`` after ``max_steps`` steps; ``ERROR <label> <message>`` on anything else;
* ``CREATED <label>`` after creating a session (a command with ``"create": true``: the child
  waits for the file ``go`` in ``barrier``, then creates the session ``name`` in ``db``).

Command fields: ``seed`` (the simulated user's), ``max_steps``, ``p_skip``, ``p_tie``,
``p_undo`` (probabilities of each answer), ``think`` (the most seconds the simulated person
thinks before answering), ``commit_delay`` (the most seconds to wait before each COMMIT, so that
kills land inside transactions), ``ack_delay`` (the most seconds between a commit and its
``ACK``), and ``barrier`` (a directory: before answering query ``i`` the
child waits for the file ``go_<i>`` there, so that two children answer one query at once).
"""

from __future__ import annotations

import importlib
import json
import os
import random
import signal
import sys
import time
import traceback

from botorch_pref.sessions import QueryNotPendingError, Session
from botorch_pref.sessions.connection import Connection


def emit(text: str) -> None:
    """Write one line to standard output with a single ``write`` call."""
    os.write(1, (text.replace("\n", " ") + "\n").encode())


def utility(x: tuple[float, ...]) -> float:
    """The simulated person's utility (unit-cube-like inputs)."""
    return -sum((v - 0.3) ** 2 for v in x)


def wait_for(path: str, timeout: float = 60.0) -> None:
    """Poll for a file to appear."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {path}")
        time.sleep(0.002)


def step(session: Session, label: str, rng: random.Random, cmd: dict) -> None:
    """Ask one query and answer it (or undo the last answer)."""
    query = session.ask()
    emit(f"SHOW {label} {query.id} {json.dumps([list(x) for x in query.options])}")
    if cmd.get("barrier"):
        wait_for(os.path.join(cmd["barrier"], f"go_{query.id}"))
    time.sleep(rng.uniform(0.0, cmd.get("think", 0.0)))
    r = rng.random()
    p_skip, p_tie, p_undo = cmd.get("p_skip", 0.0), cmd.get("p_tie", 0.0), cmd.get("p_undo", 0.0)
    emit(f"ANSWERING {label} {query.id}")
    try:
        if r < p_undo and session.progress().answered > 0:
            undone = session.undo()
            emit(f"UNDO {label} {undone.id}")
            return
        if r < p_undo + p_skip:
            answer = session.answer(query.id, skip=True)
        elif r < p_undo + p_skip + p_tie:
            answer = session.answer(query.id, tie=True)
        else:
            noisy = [utility(x) + rng.gauss(0.0, 0.05) for x in query.options]
            answer = session.answer(query.id, winner=max(range(query.q), key=noisy.__getitem__))
    except QueryNotPendingError as err:
        emit(f"LOST {label} {query.id} {err}")
        return
    time.sleep(rng.uniform(0.0, cmd.get("ack_delay", 0.0)))
    emit(f"ACK {label} {query.id} {answer.id} {answer.answer.kind} {answer.answer.winner}")


def slow_commits(rng: random.Random, delay: float) -> None:
    """Wait up to ``delay`` seconds before each COMMIT, so that kills land inside transactions."""
    execute = Connection.execute

    def slow(self: Connection, sql: str, params: tuple = ()) -> object:
        if sql == "COMMIT":
            time.sleep(rng.uniform(0.0, delay))
        return execute(self, sql, params)

    Connection.execute = slow


def create(cmd: dict) -> None:
    """Create a session as soon as the barrier opens."""
    wait_for(os.path.join(cmd["barrier"], "go"))
    params = {"x": (0.0, 1.0), "y": (-2.0, 3.0)}
    Session.create(cmd["db"], cmd["name"], params, "random", seed=cmd.get("seed", 0)).close()
    emit(f"CREATED {cmd['label']}")


def child(cmd: dict) -> None:
    """The forked child's work; never returns."""
    label = cmd["label"]
    status = 0
    try:
        if cmd.get("create"):
            create(cmd)
            os._exit(0)
        rng = random.Random(cmd.get("seed", 0))
        if cmd.get("commit_delay"):
            slow_commits(rng, cmd["commit_delay"])
        with Session.open(cmd["db"], cmd["name"]) as session:
            for _ in range(cmd.get("max_steps", 10**6)):
                step(session, label, rng, cmd)
        emit(f"DONE {label}")
    except BaseException:
        emit(f"ERROR {label} {traceback.format_exc()}")
        status = 1
    os._exit(status)


def reap(signum: int, frame: object) -> None:
    """Report children that ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        emit(f"EXIT {LABELS.pop(pid, '?')} {pid} {status}")


LABELS: dict[int, str] = {}


def warm_up() -> None:
    """Import what the first model fit imports lazily, so that forked children skip it.

    No tensor work happens here: OpenMP's thread pool does not survive ``fork``.
    """
    importlib.import_module("torch.fx.experimental.symbolic_shapes")


def serve() -> None:
    """Read commands and fork a child for each."""
    warm_up()
    signal.signal(signal.SIGCHLD, reap)
    emit("READY")
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            child(cmd)
        LABELS[pid] = cmd["label"]
        emit(f"PID {cmd['label']} {pid}")
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})


if __name__ == "__main__":
    serve()
