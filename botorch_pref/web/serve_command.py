"""``botorch-pref serve``: answer sessions in a browser.

Examples::

    botorch-pref serve study.db                       # http://127.0.0.1:8000, admin link printed
    botorch-pref serve new.db --create                # a new, empty study
    botorch-pref serve --demo colour                  # a colour to find, in a temporary folder
    botorch-pref serve study.db --renderer mypkg.show:render --port 8080
    botorch-pref serve study.db --host 0.0.0.0 --token "$ADMIN_TOKEN"

The server binds 127.0.0.1 unless told otherwise and then accepts only ``Host`` headers naming
this machine. The admin token comes from ``--token``, else ``BOTORCH_PREF_ADMIN_TOKEN``, else
from the database's link key (``study.db.key``, made on first use): the same admin link at every
start, so a logged-in admin stays logged in across restarts. Any host other than the loopback
one gets a warning to put HTTPS in front (a TLS proxy).

Before printing any link, the command checks the database (a missing file is refused unless
``--create`` is given; a file that is not a session database is refused) and binds the port (a
taken port is reported, nothing else is printed). The demo's temporary folder is removed when
the server stops.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

__all__ = ["add_arguments", "bind", "check_database", "cmd_serve"]

ENV_TOKEN = "BOTORCH_PREF_ADMIN_TOKEN"


def add_arguments(serve: argparse.ArgumentParser) -> None:
    """Add the arguments of ``botorch-pref serve`` to its parser."""
    from botorch_pref.sessions.session_command import HelpFormatter
    from botorch_pref.web.colour_demo import DEMOS
    from botorch_pref.web.workers import DEFAULT_BATCH

    serve.formatter_class = HelpFormatter
    serve.add_argument("db", nargs="?", help="session database file")
    serve.add_argument(
        "--create", action="store_true", help="start a new study when the database does not exist"
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind")
    serve.add_argument("--port", type=int, default=8000, help="TCP port to bind")
    serve.add_argument(
        "--token", help=f"admin token (default: ${ENV_TOKEN}, else the database's link key's)"
    )
    serve.add_argument(
        "--renderer",
        action="append",
        default=[],
        metavar="MODULE:FUNCTION",
        help="offer a renderer: function(values: dict) -> PNG/JPEG/SVG/image/sound/text, drawing "
        "an option on the answer page (repeatable; table and colour are built in)",
    )
    serve.add_argument("--demo", choices=DEMOS, help="create a demo session and serve it")
    serve.add_argument("--workers", type=int, default=2, help="query-preparing processes")
    serve.add_argument(
        "--idle",
        type=float,
        default=600.0,
        help="seconds before an unused session leaves a worker's memory",
    )
    serve.add_argument(
        "--batch",
        type=int,
        default=DEFAULT_BATCH,
        help="most sessions a worker prepares in one batched step (1: one at a time)",
    )
    serve.add_argument(
        "--max-body", type=int, default=16 * 1024, help="largest request body, in bytes"
    )
    serve.set_defaults(func=cmd_serve)


def check_database(db: Path, create: bool) -> None:
    """Refuse a database path that would start the wrong study.

    Args:
        db: The file.
        create: A missing file is a new study (it is made with the first session).

    Raises:
        FileNotFoundError: For a missing file without ``create``, or a missing folder.
        SessionError: For a file that is not a session database (or a newer one).
    """
    from botorch_pref.sessions import Session

    if db.is_dir():
        raise FileNotFoundError(f"{str(db)!r} is a folder; name the session database file.")
    if not db.exists():
        if not db.parent.is_dir():
            raise FileNotFoundError(f"No folder {str(db.parent)!r} for the database {str(db)!r}.")
        if not create:
            raise FileNotFoundError(
                f"No session database {str(db)!r}. Check the path, or start a new study with "
                "--create (or create a session first: botorch-pref session create)."
            )
        return
    Session.list(db)  # refuses a file that is not a session database


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, made before anything is printed.

    Args:
        host: The address.
        port: The port.

    Returns:
        The socket.

    Raises:
        OSError: With a one-line message when the port is taken or the address is wrong.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as err:
        sock.close()
        what = "is taken" if err.errno == errno.EADDRINUSE else f"cannot be bound: {err.strerror}"
        raise OSError(
            err.errno, f"Port {port} on {host} {what}; choose another with --port."
        ) from None
    return sock


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    """The host as a URL (and a ``Host`` header) names it: an IPv6 address in brackets."""
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


def _allowed_hosts(host: str) -> list[str]:
    """The ``Host`` headers accepted when serving on ``host``: this machine's names for a
    loopback address (the address itself among them, e.g. ``[::1]`` or ``127.0.0.2``), else
    any."""
    if not _is_loopback(host):
        return ["*"]
    return sorted({"127.0.0.1", "localhost", "[::1]", _url_host(host).lower()})


def cmd_serve(args: argparse.Namespace) -> int:
    """``serve``: run the server until interrupted.

    Args:
        args: Parsed arguments.

    Returns:
        Exit status.
    """
    try:
        import uvicorn  # noqa: F401

        from botorch_pref.web.app import create_app  # noqa: F401
    except ImportError as err:
        print(
            f"botorch-pref serve needs the web extra: pip install 'botorch-pref[web]' ({err})",
            file=sys.stderr,
        )
        return 2
    if args.db is None and args.demo is None:
        raise ValueError("Name a session database (or use --demo colour).")
    folder = None if args.db else Path(tempfile.mkdtemp(prefix="botorch-pref-"))
    try:
        db = Path(args.db) if folder is None else folder / "demo.db"
        if folder is None:
            check_database(db, args.create or args.demo is not None)
        sock = bind(args.host, args.port)
        try:
            return _serve(args, db, sock)
        finally:
            sock.close()
    except OSError as err:
        print(f"botorch-pref: error: {err.strerror or err}", file=sys.stderr)
        return 2
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _serve(args: argparse.Namespace, db: Path, sock: socket.socket) -> int:
    """Print the links and run the server on the bound socket until interrupted."""
    import uvicorn

    from botorch_pref.web.app import WebConfig, create_app
    from botorch_pref.web.colour_demo import make_demo

    loopback = _is_loopback(args.host)
    config = WebConfig(
        db,
        args.token or os.environ.get(ENV_TOKEN) or None,
        renderers=list(args.renderer),
        workers=args.workers,
        idle_s=args.idle,
        batch=args.batch,
        max_body=args.max_body,
        allowed_hosts=_allowed_hosts(args.host),
    )
    app = create_app(config)
    state = app.state.web
    base = f"http://{_url_host(args.host)}:{sock.getsockname()[1]}"
    if args.demo:
        name, prompt = make_demo(db, args.demo)
        record = state.record(name, "colour", prompt)
        print(f"Demo session {name!r} in {db}: {prompt}")
        print(f"Answer here: {base}/a/{record.token}", flush=True)
    print(f"Serving {db} on {base}")
    print(f"Admin (keep it private): {base}/admin/login?token={state.admin_token}", flush=True)
    if not loopback:
        print(
            "Warning: serving beyond this machine. Put HTTPS in front (a TLS proxy).",
            file=sys.stderr,
        )
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    )
    server.run(sockets=[sock])
    return 0
