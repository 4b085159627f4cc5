"""Edges of sessions, their batched steps and the command line that earlier tests missed.

Each test names what went wrong before its fix.
"""

from __future__ import annotations

import io
import pickle
import shlex
import sys

import numpy as np
import pytest
import torch

from botorch_pref import demo
from botorch_pref.cli import main
from botorch_pref.sessions import QueryNotPendingError, Session
from botorch_pref.sessions import model as session_model
from botorch_pref.web.batching import ask_together

from .helpers import same_recommendation

PARAMS = {"a": (0.0, 1.0), "b": (-1.0, 1.0), "c": (0.0, 2.0)}


def _pair_sessions(path, **options) -> list[Session]:
    """Two compatible sessions, each with one answered (random) query."""
    sessions = [
        Session.create(path, f"s{i}", PARAMS, "eubo", 2, 10 + i, n_initial=1, **options)
        for i in range(2)
    ]
    for s in sessions:
        s.answer(s.ask().id, winner=0)
    return sessions


def _gap(first, second) -> float:
    """The largest difference between two queries' options, in fractions of the ranges."""
    span = np.array([high - low for low, high in PARAMS.values()])
    return float(np.max(np.abs(np.subtract(first, second)) / span))


def test_a_skipped_query_of_a_batched_step_is_not_asked_again(tmp_path):
    """Before, the session's own optimiser proposed the skipped query again up to the
    batched solver's rounding (4e-6 here), so the exact comparison missed it and the person
    saw the query they had just skipped."""
    sessions = _pair_sessions(tmp_path / "s.db")
    try:
        skipped = ask_together(sessions)[0].query
        sessions[0].answer(skipped.id, skip=True)
        again = sessions[0].ask()
        assert _gap(again.options, skipped.options) > 0.01
    finally:
        for s in sessions:
            s.close()


def test_a_process_adopts_the_fit_a_batched_step_stored(tmp_path):
    """Before, a session whose optimiser had already refitted after its last answer (its
    recommendation was shown) kept its own fit when a batched step stored another one for the
    same answers: that process's model, recommendation and next refit differed from what the
    database (and every resumed process) holds."""
    sessions = _pair_sessions(tmp_path / "s.db")
    try:
        sessions[0].best()  # refits after the first answer, in this process
        ask_together(sessions)  # stores the batched step's fit for the first answer
        held = sessions[0].optimizer.hyperparameters
        with Session.open(tmp_path / "s.db", "s0") as resumed:
            stored = resumed.optimizer.hyperparameters
            expected = resumed.best()
        assert held.n_answers == stored.n_answers == 1
        for name, value in stored.values.items():
            assert torch.equal(held.values[name], value), name
        assert same_recommendation(sessions[0].best(), expected)
    finally:
        for s in sessions:
            s.close()


def test_a_session_on_its_own_never_rebuilds_its_optimiser(tmp_path, monkeypatch):
    """The check above costs nothing when the process made the stored fits itself."""
    built = []
    original = session_model.PreferenceOptimizer

    def counting(*args, **kwargs):
        built.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(session_model, "PreferenceOptimizer", counting)
    with Session.create(tmp_path / "s.db", "p", PARAMS, "eubo", 2, 3, n_initial=1,
                        refit_all_until=2, refit_every=2) as s:  # fmt: skip
        for k in range(5):
            query = s.ask()
            s.best()
            s.answer(query.id, winner=k % 2)
        s.ask()
    assert len(built) == 1


def _run(capsys, monkeypatch, *args, stdin: str | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def _hint(out: str, start: str) -> list[str]:
    """The command after ``start`` on a line of ``out``, split as a shell would."""
    line = next(line for line in out.splitlines() if start in line)
    return shlex.split(line.split(start, 1)[1])


def test_the_printed_commands_work_for_names_and_paths_with_spaces(tmp_path, capsys, monkeypatch):
    """Before, ``Start it with: botorch-pref session run my dir/s.db participant 7`` was printed
    unquoted: pasted into a shell it is four arguments, not a database and a name."""
    db = tmp_path / "my dir" / "s.db"
    db.parent.mkdir()
    status, out, _ = _run(capsys, monkeypatch, "session", "create", db, "participant 7",
                          "--param", "x:0:1", "--strategy", "random", "--seed", "0")  # fmt: skip
    assert status == 0
    assert _hint(out, "Start it with: botorch-pref ") == [
        "session", "run", str(db), "participant 7"]  # fmt: skip
    status, out, _ = _run(capsys, monkeypatch, "session", "run", db, "participant 7",
                          stdin="a\nq\n")  # fmt: skip
    assert status == 0
    assert _hint(out, "Resume with: botorch-pref ") == ["session", "run", str(db), "participant 7"]

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("botorch_pref.sessions.session_command.run_loop", interrupt)
    status, out, _ = _run(capsys, monkeypatch, "session", "run", db, "participant 7")
    assert status == 130
    assert _hint(out, "resume with: botorch-pref ") == ["session", "run", str(db), "participant 7"]


DEMO = ["demo", "--queries", "0", "--initial", "1", "--strategy", "random", "--no-progress"]


def test_the_demo_names_the_figure_it_wrote(tmp_path, capsys):
    """Before, ``--output fig`` wrote ``fig.png`` (matplotlib adds the suffix) but printed
    ``figure written to fig``, a file that does not exist."""
    target = tmp_path / "fig"
    assert main([*DEMO, "--output", str(target)]) == 0
    written = tmp_path / "fig.png"
    assert written.read_bytes()[:4] == b"\x89PNG" and not target.exists()
    assert capsys.readouterr().out.splitlines()[-1] == f"figure written to {written}"


@pytest.mark.parametrize("where", ["directory", "under a file"])
def test_an_unusable_demo_output_is_refused_before_the_run(tmp_path, capsys, where, monkeypatch):
    """Before, the whole run went first, then a traceback (``IsADirectoryError`` or
    ``FileExistsError`` from ``mkdir``), exit status 1."""
    (tmp_path / "afile").write_text("")
    (tmp_path / "fig.png").mkdir()
    target = tmp_path / ("fig.png" if where == "directory" else "afile/fig.png")
    monkeypatch.setattr(demo, "_ask_and_answer", lambda *args: pytest.fail("it ran"))
    assert main([*DEMO, "--output", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("botorch-pref: error:") and len(err.strip().splitlines()) == 1, err


def test_a_figure_that_cannot_be_written_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    """Before, an ``OSError`` while saving (a read-only file system, a full disk) ended the
    demo with a traceback and exit status 1."""

    def refuse(result, utility, path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(demo, "plot_demo", refuse)
    assert main([*DEMO, "--output", str(tmp_path / "fig.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("botorch-pref: error:") and "Permission denied" in err
    assert len(err.strip().splitlines()) == 1, err


def test_a_refused_answer_says_why_for_a_program(tmp_path):
    """Every refusal was one error with one meaning for a program: callers (the web page said
    "already answered" to a question an undo had withdrawn) could only parse the message."""
    s = Session.create(tmp_path / "a.db", "s", PARAMS, "eubo", 2, 0, n_initial=2)

    def reason(query_id) -> str:
        with pytest.raises(QueryNotPendingError) as info:
            s.answer(query_id, winner=0)
        return info.value.reason

    first = s.ask()
    s.answer(first.id, winner=0)
    assert reason(first.id) == "answered"
    second = s.ask()
    s.undo()  # `second` is withdrawn, `first` asked again
    assert reason(second.id) == "withdrawn"
    s.import_comparisons([{"options": first.options, "winner": 1}])
    imported = [h.query.id for h in s.history() if h.query.id not in (first.id, second.id)]
    assert reason(imported[0]) == "imported"
    assert reason(10**6) == "unknown"
    err = pickle.loads(pickle.dumps(QueryNotPendingError("gone", "withdrawn")))
    assert (str(err), err.reason) == ("gone", "withdrawn")
    with pytest.raises(ValueError, match="reason must be one of"):
        QueryNotPendingError("x", "lost")
    s.close()
