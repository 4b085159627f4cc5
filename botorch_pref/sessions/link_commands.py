"""The answer-link commands of ``botorch-pref session``: ``links``, ``rotate``, ``revoke``.

They work on a session database's links (:mod:`botorch_pref.sessions.answer_links`): the full answer
URL of every session (``--csv`` for a mail merge), a new link for one session (the old one is
refused from then on), or none. A session without a link yet gets one.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from botorch_pref.sessions.answer_links import DEFAULT_PROMPT, TokenStore
from botorch_pref.sessions.export import csv_text, write_atomic

__all__ = [
    "DEFAULT_BASE_URL",
    "add_base_url",
    "base_url",
    "cmd_links",
    "cmd_revoke",
    "cmd_rotate",
    "links_of",
]

#: The address answer links are built on unless ``--base-url`` says otherwise.
DEFAULT_BASE_URL = "http://127.0.0.1:8000"


def add_base_url(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--base-url",
        default=DEFAULT_BASE_URL,
        help="the server's address as participants reach it (serve's --host and --port, or "
        "the HTTPS proxy in front)",
    )


def base_url(text: str) -> str:
    """``--base-url`` checked: ``http(s)://host[:port][/path]`` without a trailing slash."""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"--base-url must be http(s)://host[:port][/path], got {text!r}.")
    return text.rstrip("/")


@contextlib.contextmanager
def links_of(db: str) -> Iterator[Any]:
    """The answer links of a session database (its ``web_links`` table and link key)."""
    from botorch_pref.sessions.session import Session

    if not Path(db).is_file():
        raise FileNotFoundError(f"No session database {db!r}.")
    Session.list(db)  # a session database, before anything is written to it
    tokens = TokenStore(db)
    try:
        yield tokens
    finally:
        tokens.close()


def _link_rows(db: str, base: str) -> list[tuple[str, str, str]]:
    """``(session, answer_url, status)`` of every session, made for those without a link."""
    from botorch_pref.sessions.session import Session

    rows = []
    with links_of(db) as tokens:
        summaries = Session.list(db)
        tokens.ensure_all(
            [(m.name, "auto", DEFAULT_PROMPT, False) for m in summaries]
        )  # (sessions that have a link keep it)
        records = tokens.all()
        for summary in summaries:
            record = records[summary.name]
            if record.revoked:
                url, status = "", "revoked"
            elif record.token is None:
                url, status = "", "not rebuildable from the link key: rotate it"
            else:
                status = "done" if summary.progress.done else "open"
                url = f"{base}/a/{record.token}"
            rows.append((summary.name, url, status))
    return rows


def cmd_links(args: argparse.Namespace) -> int:
    """``session links``: every session's full answer link (made for sessions without one)."""
    rows = _link_rows(args.db, base_url(args.base_url))
    if args.csv is not None:

        def write(out: TextIO) -> None:
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(["session", "answer_url", "status"])
            writer.writerows([[csv_text(c) for c in row] for row in rows])

        if args.csv == "-":
            write(sys.stdout)
        else:
            write_atomic(args.csv, write)
            print(f"Wrote {len(rows)} answer links to {args.csv}.")
        return 0
    if not rows:
        print(f"No sessions in {args.db}.")
    for name, url, status in rows:
        print(f"{name}\t{url or '-'}\t{status}")
    return 0


def cmd_rotate(args: argparse.Namespace) -> int:
    """``session rotate``: a new answer link; the old one is refused from now on."""
    base = base_url(args.base_url)
    with links_of(args.db) as tokens:
        if tokens.by_name(args.name) is None:
            from botorch_pref.sessions.session import Session

            Session.open(args.db, args.name).close()  # an existing session
            tokens.ensure(args.name, "auto", DEFAULT_PROMPT)
        record = tokens.rotate(args.name)
    print(f"New answer link of {args.name!r} (the old one is refused): {base}/a/{record.token}")
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    """``session revoke``: no link opens the session any more (``rotate`` makes a new one)."""
    from botorch_pref.sessions.session import Session

    with links_of(args.db) as tokens:
        with Session.open(args.db, args.name):
            pass  # an existing session
        if tokens.by_name(args.name) is None:
            tokens.ensure(args.name, "table", DEFAULT_PROMPT)
        tokens.revoke(args.name)
    print(f"Revoked the answer link of {args.name!r}; its answers are kept.")
    return 0
