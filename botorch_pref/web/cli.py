"""``botorch-pref serve``: answer sessions in a browser.

Examples::

    botorch-pref serve study.db                       # http://127.0.0.1:8000, admin link printed
    botorch-pref serve --demo colour                  # a colour to find, in a temporary file
    botorch-pref serve study.db --renderer mypkg.show:render --port 8080
    botorch-pref serve study.db --host 0.0.0.0 --token "$ADMIN_TOKEN"

The server binds 127.0.0.1 unless told otherwise and then accepts only ``Host`` headers naming
this machine. The admin token comes from ``--token``, else ``BOTORCH_PREF_ADMIN_TOKEN``, else it
is generated and printed (with the admin link) at start; any host other than the loopback one
gets a warning to use a stable token over HTTPS (put a TLS proxy in front).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["add_arguments", "cmd_serve"]

ENV_TOKEN = "BOTORCH_PREF_ADMIN_TOKEN"


def add_arguments(serve: argparse.ArgumentParser) -> None:
    """Add the arguments of ``botorch-pref serve`` to its parser."""
    from botorch_pref.web.demo import DEMOS
    from botorch_pref.web.workers import DEFAULT_BATCH

    serve.add_argument("db", nargs="?", help="session database file (created with a session)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--token", help=f"admin token (default: ${ENV_TOKEN}, else generated)")
    serve.add_argument(
        "--renderer",
        action="append",
        default=[],
        metavar="MODULE:FUNCTION",
        help="a user renderer function(values: dict) -> PNG/JPEG/SVG/image/sound (repeatable)",
    )
    serve.add_argument("--demo", choices=DEMOS, help="create a demo session and serve it")
    serve.add_argument("--workers", type=int, default=2, help="query-preparing processes")
    serve.add_argument(
        "--idle", type=float, default=600.0, help="seconds before an unused session leaves memory"
    )
    serve.add_argument(
        "--batch",
        type=int,
        default=DEFAULT_BATCH,
        help="most sessions a worker prepares in one batched step (1: one at a time)",
    )
    serve.add_argument("--max-body", type=int, default=16 * 1024, help="largest request body")
    serve.set_defaults(func=cmd_serve)


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
        import uvicorn

        from botorch_pref.web.app import WebConfig, create_app
    except ImportError as err:
        print(
            f"botorch-pref serve needs the web extra: pip install 'botorch-pref[web]' ({err})",
            file=sys.stderr,
        )
        return 2
    from botorch_pref.web.demo import make_demo
    from botorch_pref.web.tokens import new_token

    if args.db is None and args.demo is None:
        raise ValueError("Name a session database (or use --demo colour).")
    db = Path(args.db) if args.db else Path(tempfile.mkdtemp(prefix="botorch-pref-")) / "demo.db"
    token = args.token or os.environ.get(ENV_TOKEN) or new_token()
    loopback = _is_loopback(args.host)
    hosts = _allowed_hosts(args.host)
    config = WebConfig(
        db,
        token,
        renderers=list(args.renderer),
        workers=args.workers,
        idle_s=args.idle,
        batch=args.batch,
        max_body=args.max_body,
        allowed_hosts=hosts,
    )
    app = create_app(config)
    state = app.state.web
    base = f"http://{_url_host(args.host)}:{args.port}"
    if args.demo:
        name, prompt = make_demo(db, args.demo)
        record = state.record(name, "colour", prompt)
        print(f"Demo session {name!r} in {db}: {prompt}")
        print(f"Answer here: {base}/a/{record.token}", flush=True)
    print(f"Serving {db} on {base}")
    print(f"Admin (keep it private): {base}/admin/login?token={token}", flush=True)
    if not loopback:
        print(
            "Warning: serving beyond this machine. Use a stable --token and put HTTPS in front.",
            file=sys.stderr,
        )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0
