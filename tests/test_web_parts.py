"""The web layer's parts: renderers, colours, nonces, tokens, workers, the serve command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

if os.environ.get("CI") != "true":
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")

import httpx

from botorch_pref.sessions import Session
from botorch_pref.sessions.answer_links import TokenStore
from botorch_pref.web import colour, plots
from botorch_pref.web.admin import parse_parameters
from botorch_pref.web.held import recommendation
from botorch_pref.web.nonces import NonceStatus, NonceStore
from botorch_pref.web.renderers import RendererSet, default_renderer, render_colour, to_rendered
from botorch_pref.web.workers import Preparer, worker_threads
from tests.test_web_crash import ServerProcess, _free_port
from tests.test_web_helpers import (
    ADMIN,
    answered,
    links,
    quick_session,
    session_name,
    wait_for_query,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[1]
BOUNDS = {"r": (0.0, 1.0), "g": (0.0, 255.0), "b": (0.0, 1.0)}


def test_colour_spaces():
    assert colour.colour_space(["r", "g", "b"]) == ("rgb", ("r", "g", "b"))
    assert colour.colour_space(["Red", "x", "Green", "Blue"]) == ("rgb", ("Red", "Green", "Blue"))
    assert colour.colour_space(["hue", "saturation", "lightness"])[0] == "hsl"
    assert colour.colour_space(["L", "a", "b"]) == ("lab", ("L", "a", "b"))
    assert colour.colour_space(["x", "y"]) is None
    # channels are places within the bounds
    rgb = colour.to_rgb({"r": 1.0, "g": 0.0, "b": 0.5}, BOUNDS, ("rgb", ("r", "g", "b")))
    assert colour.hex_colour(rgb) == "#ff0080"
    hsl = {"h": 120.0, "s": 1.0, "l": 0.5}
    hb = {"h": (0.0, 360.0), "s": (0.0, 1.0), "l": (0.0, 1.0)}
    assert colour.hex_colour(colour.to_rgb(hsl, hb, ("hsl", ("h", "s", "l")))) == "#00ff00"
    lab = colour.to_rgb({"L": 100.0, "a": 0.0, "b": 0.0}, {}, ("lab", ("L", "a", "b")))
    assert colour.hex_colour(lab) == "#ffffff"
    black = colour.to_rgb({"L": 0.0, "a": 0.0, "b": 0.0}, {}, ("lab", ("L", "a", "b")))
    assert colour.hex_colour(black) == "#000000"


BOUNDS_NARROW = {"x": (1e6, 1e6 + 1), "y": (2020.0, 2021.0)}


def test_builtin_renderers():
    drawn = render_colour({"r": 1.0, "g": 0.0, "b": 0.0}, BOUNDS)
    assert drawn.kind == "image" and drawn.src.startswith("data:image/svg+xml;base64,")
    assert drawn.text == "#ff0000" and [r.name for r in drawn.rows] == ["r", "g", "b"]
    table = RendererSet().render("table", {"x": 0.25}, {"x": (0.0, 1.0)})
    assert table.kind == "table" and table.rows[0].value == "0.25"
    assert default_renderer(["r", "g", "b"]) == "colour" and default_renderer(["x"]) == "table"
    unknown = RendererSet().render("nope:f", {"x": 0.25}, {"x": (0.0, 1.0)})
    assert unknown.kind == "table" and "not loaded" in unknown.text


def test_user_renderer_outputs():
    rows = ()
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 10
    assert to_rendered(png, rows).src.startswith("data:image/png;base64,")
    assert to_rendered(b"\xff\xd8\xff\xe0xx", rows).src.startswith("data:image/jpeg;base64,")
    wav = b"RIFF\x00\x00\x00\x00WAVEfmt "
    assert to_rendered(wav, rows).kind == "audio"
    svg = to_rendered('<svg xmlns="http://www.w3.org/2000/svg"><script>x</script></svg>', rows)
    assert svg.kind == "image" and svg.src.startswith("data:image/svg+xml;base64,")
    text = to_rendered("<b>bold</b>", rows)
    assert text.kind == "text" and text.text == "<b>bold</b>"  # escaped by the template
    from PIL import Image

    assert to_rendered(Image.new("RGB", (4, 4)), rows).src.startswith("data:image/png;base64,")
    from matplotlib.figure import Figure

    assert to_rendered(Figure(figsize=(1, 1)), rows).src.startswith("data:image/png;base64,")
    with pytest.raises(TypeError):
        to_rendered(b"not an image", rows)
    with pytest.raises(TypeError):
        to_rendered(object(), rows)
    # MP3 frames of every MPEG version and layer without an ID3 tag
    for header in (b"\xff\xfb", b"\xff\xfa", b"\xff\xf3", b"\xff\xe3"):
        assert to_rendered(header + b"\x90\x00" + b"\x00" * 10, rows).kind == "audio"
    # SVG after a byte-order mark, a DOCTYPE or a comment
    body = '<svg xmlns="http://www.w3.org/2000/svg"/>'
    for lead in ("\ufeff", '<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "x">\n', "<!-- a -->"):
        assert to_rendered(lead + body, rows).kind == "image"
    # PIL modes a PNG cannot hold as they are
    for mode in ("CMYK", "F", "I", "RGBX", "YCbCr"):
        drawn = to_rendered(Image.new(mode, (4, 4)), rows)
        assert drawn.src.startswith("data:image/png;base64,"), mode


def test_user_renderer_from_a_file(tmp_path):
    module = tmp_path / "draw.py"
    module.write_text(
        textwrap.dedent(
            """
            def svg(values):
                w = int(100 * values["x"])
                return f'<svg xmlns="http://www.w3.org/2000/svg"><rect width="{w}"/></svg>'

            def broken(values):
                raise RuntimeError("boom")

            def leaves(values):
                raise SystemExit(1)
            """
        )
    )
    renderers = RendererSet([f"{module}:svg", f"{module}:broken"])
    assert renderers.names == ("table", "colour", f"{module}:svg", f"{module}:broken")
    drawn = renderers.render(f"{module}:svg", {"x": 0.5}, {"x": (0.0, 1.0)})
    assert drawn.kind == "image"
    failed = renderers.render(f"{module}:broken", {"x": 0.5}, {"x": (0.0, 1.0)})
    assert failed.kind == "table" and "RuntimeError" in failed.text
    left = RendererSet([f"{module}:leaves"]).render(f"{module}:leaves", {"x": 0.5}, {"x": (0, 1)})
    assert left.kind == "table" and "SystemExit" in left.text
    with pytest.raises(ValueError):
        RendererSet([f"{module}:missing"])
    # a file that needs to be in sys.modules while it runs (a dataclass with postponed
    # annotations), and one that raises on import
    dataclass_module = tmp_path / "shapes.py"
    dataclass_module.write_text(
        textwrap.dedent(
            """
            from __future__ import annotations
            from dataclasses import dataclass

            @dataclass
            class Shape:
                width: int

            def svg(values):
                return f'<svg xmlns="http://www.w3.org/2000/svg" width="{Shape(3).width}"/>'
            """
        )
    )
    drawn = RendererSet([f"{dataclass_module}:svg"]).render(
        f"{dataclass_module}:svg", {"x": 0.5}, {"x": (0.0, 1.0)}
    )
    assert drawn.kind == "image"
    raising = tmp_path / "raising.py"
    raising.write_text("import os\nos.environ['NO_SUCH_VARIABLE_FOR_THIS_TEST']\n")
    with pytest.raises(ValueError, match=r"Cannot load the renderer .*KeyError"):
        RendererSet([f"{raising}:f"])


def test_values_show_enough_digits_to_tell_options_apart():
    rows = RendererSet().render("table", {"x": 1e6 + 0.1, "y": 2020.4}, BOUNDS_NARROW).rows
    assert [r.value for r in rows] == ["1000000.1", "2020.4"]
    assert RendererSet().render("table", {"x": 0.25}, {"x": (0.0, 1.0)}).rows[0].value == "0.25"


def test_nonces_are_single_use_and_scoped():
    store = NonceStore(max_per_scope=3)
    a = store.issue("s1")
    assert store.consume("s2", a) is NonceStatus.UNKNOWN  # another scope's nonce
    assert store.consume("s1", a) is NonceStatus.OK
    assert store.consume("s1", a) is NonceStatus.REPLAYED
    assert store.consume("s1", None) is NonceStatus.UNKNOWN
    assert store.consume("s1", "forged") is NonceStatus.UNKNOWN
    # signed: a store with the same key (the server after a restart) takes the page's nonce;
    # one with another key, or a nonce whose signature was changed, does not
    key = b"k" * 32
    page = NonceStore(key).issue("s1")
    assert NonceStore(b"x" * 32).consume("s1", page) is NonceStatus.UNKNOWN
    assert NonceStore(key).consume("s1", page[:-2] + "AA") is NonceStatus.UNKNOWN
    assert NonceStore(key).consume("s1", page) is NonceStatus.OK
    used = [store.issue("s1") for _ in range(13)]
    for nonce in used:
        assert store.consume("s1", nonce) is NonceStatus.OK
    assert store.consume("s1", used[-1]) is NonceStatus.REPLAYED  # the last 4 * 3 kept
    expired = NonceStore(ttl_s=-1.0)
    assert expired.consume("s", expired.issue("s")) is NonceStatus.UNKNOWN


def test_tokens_persist_in_the_database(tmp_path):
    path = tmp_path / "t.db"
    Session.create(path, "ann", {"x": (0, 1)}, "random", 2, 0).close()
    tokens = TokenStore(path)
    rec = tokens.ensure("ann", "table", "Which?")
    assert tokens.ensure("ann", "colour", "Other?") == rec  # made once
    tokens.close()
    again = TokenStore(path)
    assert again.by_token(rec.token) == rec and again.by_id(rec.id) == rec
    assert again.by_token(rec.token + "x") is None and again.by_token("") is None
    assert again.by_name("nobody") is None
    again.close()
    # the sessions package still opens the file (an extra table is allowed)
    with Session.open(path, "ann") as s:
        assert s.progress().answered == 0


def test_idle_sessions_leave_memory_and_come_back(tmp_path):
    path = tmp_path / "idle.db"
    for name in ("a", "b"):
        quick_session(path, name)
    with Session.open(path, "a") as s:
        s.answer(s.ask().id, winner=0)
    with Preparer(path, workers=2, idle_s=3600.0) as preparer:
        assert preparer.call("a", answered) == 1
        preparer.call("b", session_name)
        assert preparer.live_sessions() == 2
        preparer.sweep(idle_s=0.0)
        assert preparer.live_sessions() == 0
        best = preparer.call("a", recommendation)  # rebuilt from the database
        assert best is not None and preparer.live_sessions() == 1
        assert preparer.prepare("b")
        wait_until(lambda: not preparer.is_preparing("b"))
        assert preparer.prepared("b").query_id is not None
    with Session.open(path, "b") as s:
        assert s.pending() is not None  # the worker stored b's query


def test_worker_threads_share_out_the_cores(monkeypatch):
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    cores = len(os.sched_getaffinity(0))
    assert worker_threads(1) == cores
    assert worker_threads(2) == max(1, cores // 2)
    assert worker_threads(cores + 5) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's choice stands
    assert worker_threads(2) is None


def test_a_worker_process_that_dies_is_replaced(tmp_path):
    path = tmp_path / "dies.db"
    quick_session(path, "a")
    with Preparer(path, workers=1) as preparer:
        (pid,) = preparer.worker_pids()
        assert pid != os.getpid()
        os.kill(pid, signal.SIGKILL)

        def prepared() -> bool:
            if not preparer.is_preparing("a"):
                result = preparer.prepared("a")
                if result is not None and result.query_id is not None:
                    return True
                preparer.prepare("a")  # after a failure (the dead process), again
            return False

        wait_until(prepared)
        assert preparer.worker_pids() != [pid]
        # a call the dying worker had taken is run again on its replacement
        (pid,) = preparer.worker_pids()
        os.kill(pid, signal.SIGKILL)
        summary = preparer.call("a", plots.comparison_graph_summary)
        assert summary.note.startswith("No comparisons yet")
    with Session.open(path, "a") as s:
        assert s.pending() is not None


def test_parse_parameters():
    assert parse_parameters("x 0 1\n\n y:0:2 ") == [("x", 0.0, 1.0), ("y", 0.0, 2.0)]
    assert parse_parameters("a long name 1 2") == [("a long name", 1.0, 2.0)]
    assert parse_parameters("time (h:m) 0 10\nratio a:b:0:1") == [
        ("time (h:m)", 0.0, 10.0),
        ("ratio a:b", 0.0, 1.0),
    ]
    for bad in ("", "x 0", "x a b", "x 0 inf"):
        with pytest.raises(ValueError):
            parse_parameters(bad)


def test_serve_demo_colour_from_the_command_line(tmp_path):
    db = tmp_path / "demo.db"
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BOTORCH_PREF_ADMIN_TOKEN": ADMIN}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "botorch_pref.cli",
            "serve",
            str(db),
            "--demo",
            "colour",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        lines = [proc.stdout.readline() for _ in range(4)]
        answer = next(line for line in lines if line.startswith("Answer here:")).split()[-1]
        assert answer.startswith(f"http://127.0.0.1:{port}/a/")
        assert any(f"/admin/login?token={ADMIN}" in line for line in lines)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
            for _ in range(1200):
                try:
                    c.get("/")
                    break
                except httpx.HTTPError:
                    time.sleep(0.05)
            token = answer.rsplit("/", 1)[-1]
            page = wait_for_query(c, token)
            assert "Which is closer to" in page
            assert page.count("data:image/svg+xml;base64,") >= 2
            assert c.get("/admin", headers={"authorization": f"Bearer {ADMIN}"}).status_code == 200
            assert c.get("/", headers={"host": "evil.example"}).status_code == 400
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert [s.name for s in Session.list(db)] == ["colour demo"]


def test_serve_needs_a_database_or_a_demo():
    from botorch_pref.cli import main

    assert main(["serve"]) == 2


def test_server_process_restarts_on_an_existing_file(tmp_path):
    path = tmp_path / "x.db"
    Session.create(path, "s", {"x": (0, 1)}, "random", 2, 0).close()
    server = ServerProcess(path)
    try:
        with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {ADMIN}"}) as c:
            first = links(c.get("/admin").text)
    finally:
        server.kill()
    server = ServerProcess(path)
    try:
        with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {ADMIN}"}) as c:
            assert links(c.get("/admin").text) == first  # the links survive a restart
    finally:
        server.kill()


def test_worker_queries_are_the_sessions_own(tmp_path):
    """The worker stores the very queries Session.ask makes on its own (same seed, answers)."""
    settings = {"x": (0, 1), "y": (0, 2)}
    direct, served = tmp_path / "direct.db", tmp_path / "served.db"
    for path in (direct, served):
        Session.create(path, "s", settings, "eubo", 2, 5, n_initial=2).close()
    with Session.open(direct, "s") as s, Preparer(served) as preparer:
        for i in range(4):
            expected = s.ask()
            assert preparer.prepare("s")
            wait_until(lambda: not preparer.is_preparing("s"))
            with Session.open(served, "s") as other:
                got = other.pending()
                assert got is not None and got.options == expected.options, i
                other.answer(got.id, winner=i % 2)
            s.answer(expected.id, winner=i % 2)


def test_loopback_hosts():
    from botorch_pref.web.serve_command import _is_loopback

    assert _is_loopback("127.0.0.1") and _is_loopback("localhost") and _is_loopback("::1")
    assert not _is_loopback("0.0.0.0") and not _is_loopback("192.0.2.1")
    assert not _is_loopback("example.org")


def test_a_worker_prepares_the_sessions_queued_meanwhile(tmp_path):
    path = tmp_path / "together.db"
    names = [f"s{i}" for i in range(5)]
    for i, name in enumerate(names):
        Session.create(path, name, {"x": (0, 1), "y": (0, 2)}, "eubo", 2, i, n_initial=1).close()
        with Session.open(path, name) as s:
            s.answer(s.ask().id, winner=0)
    with Preparer(path, workers=1, batch=3) as preparer:
        assert all(preparer.prepare(name) for name in names)
        assert not preparer.prepare(names[-1])  # already queued
        wait_until(lambda: preparer.preparing_count() == 0)
        results = [preparer.prepared(name) for name in names]
    for name, result in zip(names, results, strict=True):
        assert result.error == "" and result.answers == 1
        with Session.open(path, name) as s:
            assert s.pending().id == result.query_id  # stored, with its fit
            assert {f.n_answers for f in s.state().fits} == {1}


def test_held_prepare_many_keeps_each_sessions_error(tmp_path):
    from botorch_pref.web import held

    path = tmp_path / "many.db"
    for i, name in enumerate(("a", "b")):
        Session.create(path, name, {"x": (0, 1)}, "eubo", 2, i, n_initial=1).close()
    held.start(str(path), 600.0, None)
    try:
        a, missing, b = held.prepare_many(["a", "missing", "b"])
    finally:
        held.close_all()
    assert a.query_id is not None and b.query_id is not None and not a.error
    assert missing.query_id is None and "missing" in missing.error


def test_preparer_batch_is_validated(tmp_path):
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="batch"):
            Preparer(tmp_path / "x.db", batch=bad)


def test_held_prepare_many_lets_a_session_ahead_wait(tmp_path):
    from botorch_pref.web import held

    path = tmp_path / "ahead.db"
    for i, name in enumerate(("a", "b", "c")):
        Session.create(path, name, {"x": (0, 1), "y": (0, 1)}, "eubo", 2, i).close()
        with Session.open(path, name) as s:
            for _ in range(2 if name == "a" else 1):
                s.answer(s.ask().id, winner=0)
    held.start(str(path), 600.0, None)
    try:
        a, b, c = held.prepare_many(["a", "b", "c"], may_wait=["a"])
        assert a.waiting and a.query_id is None and a.answers == 2
        assert not b.waiting and b.query_id is not None and c.query_id is not None
        (again,) = held.prepare_many(["a"])  # next time it is prepared
        assert not again.waiting and again.query_id is not None
    finally:
        held.close_all()
