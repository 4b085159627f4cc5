"""The ``botorch-pref session`` command: scripted and pseudo-terminal runs, and bad input."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from botorch_pref.cli import main
from botorch_pref.sessions import SCHEMA_VERSION, Session
from botorch_pref.sessions.session_command import (
    Command,
    format_options,
    load_renderer,
    parse_command,
)


def run_cli(capsys, monkeypatch, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """``botorch-pref`` in this process; (status, stdout, stderr)."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def db(tmp_path, capsys, monkeypatch):
    path = tmp_path / "study.db"
    status, out, _ = run_cli(
        capsys, monkeypatch, "session", "create", path, "alice", "--param", "x:0:1",
        "--param", "y:-2:3", "--strategy", "random", "--seed", "3", "--budget", "4",
    )  # fmt: skip
    assert status == 0 and "Created session 'alice'" in out
    return path


def kinds(path, name="alice") -> list[tuple[str, int | None, bool]]:
    with Session.open(path, name) as s:
        return [
            (h.answer.kind, h.answer.winner, h.stored.retracted_at is None) for h in s.history()
        ]


@pytest.mark.parametrize(
    ("line", "q", "expected"),
    [
        ("a", 2, Command("winner", 0)),
        (" B ", 2, Command("winner", 1)),
        ("2", 2, Command("winner", 1)),
        ("b a", 2, Command("winner", 1)),
        ("s", 2, Command("skip")),
        ("T", 2, Command("tie")),
        ("u", 2, Command("undo")),
        ("quit", 2, Command("quit")),
        ("?", 2, Command("help")),
        ("3", 3, Command("winner", 2)),
        ("c a b", 3, Command("ranking", 2, (2, 0, 1))),
        ("3>1>2", 3, Command("ranking", 2, (2, 0, 1))),
        ("cab", 3, Command("ranking", 2, (2, 0, 1))),
        ("", 2, None),
        ("c", 2, None),
        ("3", 2, None),
        ("a b", 3, None),
        ("a a", 2, None),
        ("yes", 2, None),
        ("\u00b2", 2, None),  # a digit to str.isdigit, not to int()
        ("\u00b9 \u00b2", 2, None),
    ],
)
def test_parse_command(line, q, expected):
    assert parse_command(line, q) == expected


def test_scripted_run_quit_resume_and_budget(db, capsys, monkeypatch):
    status, out, _ = run_cli(
        capsys, monkeypatch, "session", "run", db, "alice", stdin="a\nx\ns\nt\nu\nb\nq\n"
    )
    assert status == 0
    assert "(a)" in out and "(b)" in out and "x " in out
    assert "Not understood" in out
    assert "Undid your last answer (tie)" in out
    assert "best so far: x = " in out
    assert "Resume with: botorch-pref session run" in out
    assert kinds(db) == [
        ("winner", 0, True),
        ("skip", None, True),
        ("tie", None, False),
        ("winner", 1, True),
    ]
    with Session.open(db, "alice") as s:
        pending = s.pending()
    assert pending is not None and pending.number == 5
    status, out, _ = run_cli(capsys, monkeypatch, "session", "run", db, "alice", stdin="2\n")
    assert status == 0
    assert "Query 5 (shown again)" in out
    assert "The planned 4 answers are done" in out
    assert kinds(db)[-1] == ("winner", 1, True)


def test_file_renderers_loaded_together_keep_their_own_modules(tmp_path):
    """Two file renderers (as the web page loads them) each resolve names in their own module."""
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text(
        "from __future__ import annotations\n"
        "import typing\n"
        "class Colour: ...\n"
        "class Swatch:\n"
        "    colour: Colour\n"
        "def render(query):\n"
        "    return typing.get_type_hints(Swatch)['colour'].__name__\n"
    )
    second.write_text("def render(query):\n    return 'second'\n")
    render_first = load_renderer(f"{first}:render")
    render_second = load_renderer(f"{second}:render")
    assert render_first(None) == "Colour"
    assert render_second(None) == "second"


def test_end_of_input_quits_and_keeps_answers(db, capsys, monkeypatch):
    status, out, _ = run_cli(capsys, monkeypatch, "session", "run", db, "alice", stdin="b\n")
    assert status == 0 and "Saved: 1 answers" in out
    assert kinds(db) == [("winner", 1, True)]


def test_renderer_hook(db, tmp_path, capsys, monkeypatch):
    plugin = tmp_path / "show.py"
    plugin.write_text(
        "def render(query):\n"
        "    return 'CUSTOM ' + ' | '.join(f\"{o['x']:.2f}\" for o in query.as_dicts())\n"
    )
    status, out, _ = run_cli(
        capsys, monkeypatch, "session", "run", db, "alice", "--text-renderer", f"{plugin}:render",
        "--max-answers", "1", stdin="a\n",
    )  # fmt: skip
    assert status == 0 and out.count("CUSTOM ") == 1
    plugin.write_text("def broken(query):\n    raise RuntimeError('no screen')\n")
    status, out, _ = run_cli(
        capsys, monkeypatch, "session", "run", db, "alice", "--text-renderer", f"{plugin}:broken",
        "--max-answers", "1", stdin="b\n",
    )  # fmt: skip
    assert status == 0 and "the renderer failed: RuntimeError: no screen" in out
    for bad, match in [
        (f"{plugin}:nope", "has no function 'nope'"),
        ("no_such_module_xyz:f", "Cannot load the renderer"),
        ("render", "MODULE:FUNCTION"),
    ]:
        status, _, err = run_cli(capsys, monkeypatch, "session", "run", db, "alice",
                                 "--text-renderer", bad)  # fmt: skip
        assert status == 2 and match in err
    assert kinds(db) == [("winner", 0, True), ("winner", 1, True)]


def test_status_list_export_import(db, tmp_path, capsys, monkeypatch):
    run_cli(capsys, monkeypatch, "session", "run", db, "alice", stdin="a\nt\nq\n")
    status, out, _ = run_cli(capsys, monkeypatch, "session", "status", db, "alice")
    assert status == 0
    assert "x in [0, 1], y in [-2, 3]" in out and "strategy random" in out
    assert "2 of 4 answered (0 skipped, 1 no preference)" in out
    assert "pending: query 3" in out and "best so far" in out
    status, out, _ = run_cli(capsys, monkeypatch, "session", "list", db)
    assert status == 0 and out.splitlines()[1].split()[:5] == ["alice", "random", "2", "2/4", "yes"]
    status, out, _ = run_cli(capsys, monkeypatch, "session", "export", db, "alice")
    assert json.loads(out)["session"]["name"] == "alice"
    status, out, _ = run_cli(capsys, monkeypatch, "session", "export", db, "alice", "--format",
                             "csv")  # fmt: skip
    assert out.splitlines()[0].endswith(",option,rating,x,y") and len(out.splitlines()) == 5
    target = tmp_path / "alice.csv"
    status, out, _ = run_cli(capsys, monkeypatch, "session", "export", db, "alice", "-o", target)
    assert status == 0 and "Exported 2 answers" in out and target.exists()
    run_cli(capsys, monkeypatch, "session", "create", db, "bob", "--param", "x:0:1", "--param",
            "y:-2:3", "--strategy", "random", "--seed", "1")  # fmt: skip
    status, out, _ = run_cli(capsys, monkeypatch, "session", "import", db, "bob", target)
    assert status == 0 and "Imported 2 comparisons" in out
    assert kinds(db, "bob") == [("winner", 0, True), ("tie", None, True)]


def test_create_flags_for_ties_and_choices(db, capsys, monkeypatch):
    from botorch_pref.sessions import Session

    run_cli(capsys, monkeypatch, "session", "create", db, "nt", "--param", "x:0:1",
            "--no-ties")  # fmt: skip
    run_cli(capsys, monkeypatch, "session", "create", db, "q3", "--param", "x:0:1", "-q", "3",
            "--strategy", "qeubo", "--answers", "pairs")  # fmt: skip
    with Session.open(db, "nt") as s:
        assert s.settings["ties"] is False
    with Session.open(db, "q3") as s:
        assert s.settings["answers"] == "pairs" and "ties" not in s.settings


def test_bad_input_gives_clear_errors_and_loses_nothing(db, tmp_path, capsys, monkeypatch):
    run_cli(capsys, monkeypatch, "session", "run", db, "alice", stdin="a\nq\n")
    before = kinds(db)
    bad_file = tmp_path / "bad.json"
    bad_file.write_text('[{"options": [[0.1, 0.0], [0.2, 99.0]], "winner": 0}]')
    cases = [
        (("session", "status", db, "carol"), "No session named 'carol'"),
        (("session", "run", db, "carol"), "No session named 'carol'"),
        (("session", "status", tmp_path / "missing.db", "alice"), "No session database"),
        (("session", "import", db, "alice", bad_file), "outside [-2.0, 3.0]"),
        (("session", "import", db, "alice", tmp_path / "none.json"), "No file"),
        (("session", "create", db, "alice", "--param", "x:0:1"), "already exists"),
        (("session", "create", db, "new", "--param", "x:1:0"), "low < high"),
        (("session", "create", db, "new", "--param", "x"), "NAME:LOW:HIGH"),
        (("session", "create", db, "new", "--param", "x:a:1"), "must be numbers"),
        (("session", "create", db, "new", "--param", "x:0:1", "--seed", str(2**63)), "at most"),
    ]
    for args, match in cases:
        status, _, err = run_cli(capsys, monkeypatch, *args)
        assert status == 2 and match in err and err.startswith("botorch-pref: error:"), err
    with pytest.raises(SystemExit) as exit_info:
        run_cli(capsys, monkeypatch, "session", "frobnicate", db)
    assert exit_info.value.code == 2 and "invalid choice" in capsys.readouterr().err
    assert kinds(db) == before
    assert not (tmp_path / "missing.db").exists()


def test_newer_schema_and_corrupted_file_through_the_cli(db, tmp_path, capsys, monkeypatch):
    con = sqlite3.connect(db)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    con.close()
    before = db.read_bytes()
    for args in (("session", "run", db, "alice"), ("session", "list", db)):
        status, _, err = run_cli(capsys, monkeypatch, *args, stdin="a\n")
        assert status == 2 and "Upgrade botorch-pref" in err
    assert db.read_bytes() == before
    junk = tmp_path / "junk.db"
    junk.write_bytes(os.urandom(8192))
    status, _, err = run_cli(capsys, monkeypatch, "session", "status", junk, "alice")
    assert status == 2 and "not a readable session database" in err


def test_format_options_side_by_side():
    with_names = type(
        "Q", (), {"q": 2, "names": ("temperature", "t"), "options": ((1.5, 2.0), (30.25, -4.0))}
    )
    lines = format_options(with_names).splitlines()
    assert lines[0].split() == ["(a)", "(b)"]
    assert lines[1].split() == ["temperature", "1.5", "30.25"]
    assert lines[2].split() == ["t", "2", "-4"]


class Terminal:
    """A child process on a pseudo-terminal (``input()`` writes its prompt to the terminal)."""

    def __init__(self, *args: str) -> None:
        self.master, slave = pty.openpty()
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "botorch_pref.cli", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            close_fds=True,
        )
        os.close(slave)
        self.text = ""
        self.pos = 0

    def expect(self, needle: str, timeout: float = 120.0) -> str:
        """Read until ``needle`` appears after the previous match; the text up to its end."""
        deadline = time.monotonic() + timeout
        while needle not in self.text[self.pos :]:
            if time.monotonic() > deadline:
                pytest.fail(
                    f"no {needle!r} on the terminal (exit status {self.proc.poll()}); got:\n"
                    f"{self.text[self.pos :]}"
                )
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    chunk = b""
                if not chunk and self.proc.poll() is not None:
                    pytest.fail(f"the process ended before {needle!r}:\n{self.text[self.pos :]}")
                self.text += chunk.decode(errors="replace")
        end = self.text.index(needle, self.pos) + len(needle)
        seen, self.pos = self.text[self.pos : end], end
        return seen

    def send(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def close(self) -> int:
        """Wait for the process (killing it after a minute); its exit status."""
        try:
            status = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait()
        os.close(self.master)
        return status


def test_terminal_session_quit_resume_export(db, tmp_path, capsys, monkeypatch):
    term = Terminal("session", "run", str(db), "alice")
    try:
        first = term.expect("> ")
        assert "Query 1 " in first and "(a)" in first and "(b)" in first
        for key, reply in [
            ("b", "Saved: you prefer (b)"),
            ("s", "Saved: skipped"),
            ("u", "Undid your last answer (skip)"),
            ("zzz", "Not understood"),
            ("a", "Saved: you prefer (a)"),
        ]:
            term.send(key)
            term.expect(reply)
            term.expect("> ")
        term.send("q")
        term.expect("Resume with: botorch-pref session run")
    finally:
        status = term.close()
    assert status == 0
    assert kinds(db) == [("winner", 1, True), ("skip", None, False), ("winner", 0, True)]
    with Session.open(db, "alice") as s:
        pending = s.pending()
    status, out, _ = run_cli(capsys, monkeypatch, "session", "run", db, "alice", stdin="t\nq\n")
    assert f"Query {pending.number} (shown again)" in out
    assert kinds(db)[-1] == ("tie", None, True)
    target = tmp_path / "alice.json"
    status, out, _ = run_cli(capsys, monkeypatch, "session", "export", db, "alice", "-o", target)
    data = json.loads(target.read_text())
    assert [a["kind"] for a in data["answers"]] == ["winner", "skip", "winner", "tie"]
    assert data["answers"][1]["retracted_at"] is not None
    assert all(a["response_s"] >= 0 for a in data["answers"])


def test_export_errors_are_one_line_and_keep_the_previous_file(db, tmp_path, capsys, monkeypatch):
    """Before, an unwritable path or a directory ended in a traceback, and exports were written
    in place (a crash mid-export truncated the previous file)."""
    run_cli(capsys, monkeypatch, "session", "run", db, "alice", stdin="a\nb\nq\n")
    cases = [
        (tmp_path, "is a directory"),
        (tmp_path / "no" / "such" / "dir.csv", f"the directory '{tmp_path / 'no' / 'such'}' does"),
    ]
    for target, match in cases:
        status, _, err = run_cli(capsys, monkeypatch, "session", "export", db, "alice", "-o",
                                 target)  # fmt: skip
        assert status == 2 and match in err and len(err.strip().splitlines()) == 1, err
    target = tmp_path / "alice.csv"
    status, _, _ = run_cli(capsys, monkeypatch, "session", "export", db, "alice", "-o", target)
    before = target.read_bytes()
    run_cli(capsys, monkeypatch, "session", "run", db, "alice", stdin="a\nq\n")
    from botorch_pref.sessions import export

    def crash(session, state, out):
        out.write("answer_id,partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "write_csv", crash)
    status, _, err = run_cli(capsys, monkeypatch, "session", "export", db, "alice", "-o", target)
    assert status == 2 and "No space left on device" in err
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".alice")) == []


def test_negative_max_answers_is_rejected(db, capsys, monkeypatch):
    for bad in ("-1", "0", "x"):
        with pytest.raises(SystemExit) as exit_info:
            run_cli(capsys, monkeypatch, "session", "run", db, "alice", "--max-answers", bad)
        assert exit_info.value.code == 2 and "--max-answers" in capsys.readouterr().err
    assert kinds(db) == []


def test_damaged_pages_give_a_one_line_message(db, capsys, monkeypatch):
    """Before, SQLite's integrity report was printed over several lines."""
    run_cli(capsys, monkeypatch, "session", "run", db, "alice", stdin="a\nb\na\nq\n")
    raw = sqlite3.connect(db)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = raw.execute("PRAGMA page_size").fetchone()[0]
    raw.close()
    data = bytearray(db.read_bytes())
    for p in range(1, len(data) // page):
        data[p * page + 8 : p * page + 24] = b"\x13" * 16  # the cell pointers
    db.write_bytes(bytes(data))
    before = db.read_bytes()
    status, _, err = run_cli(capsys, monkeypatch, "session", "status", db, "alice")
    assert status == 2 and "damaged" in err and len(err.strip().splitlines()) == 1, err
    assert db.read_bytes() == before


def test_a_read_only_directory_is_named_as_the_problem():
    """Before, a WAL database in a read-only directory was "not a readable session database"."""
    folder = Path(tempfile.mkdtemp(prefix="ro-sessions-"))
    db = folder / "study.db"
    try:
        Session.create(db, "alice", {"x": (0.0, 1.0)}, "random", seed=0).close()
        db.chmod(0o666)
        folder.chmod(0o555)
        # root writes anywhere: run without root's capabilities then (the same user, so the
        # checkout and its environment stay readable wherever they live)
        no_caps = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]
        proc = subprocess.run(
            [*(no_caps if os.geteuid() == 0 else []), sys.executable, "-m", "botorch_pref.cli",
             "session", "status", str(db), "alice"],
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)
    assert proc.returncode == 2
    assert "is not writable" in proc.stderr and "-wal" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
