"""Export of sessions to CSV and JSON, written atomically.

JSON export (``format: "botorch-pref-session"``) holds everything: the session's problem and
settings, every query (options, source, show times, status) and every answer (retracted ones
too, with their retraction time).

CSV export has one row per option of every answer (retracted ones too), so a spreadsheet can
filter and pivot it: ``session, answer_id, query_id, query_number, source, kind, winner,
ranking, strength, answered_at, shown_at, response_s, retracted_at, option, rating`` and one
column per parameter (the session's name is in every row, so files of several sessions can be
merged). A ranking is written best first, separated by spaces. ``strength`` is the winner's
strength on a graded scale (1 "slightly" .. ``levels // 2`` "much"; the same in every row of
the answer), ``rating`` the row's option's rating (0 the worst); both are empty where the
answer has none. The JSON export's answers hold them as ``strength`` and ``ratings`` (one level
per option, in the query's order), its session's ``options`` the scales (``levels``,
``ratings``). A study's export (:func:`write_study_csv`,
:func:`study_to_dict`) holds every session of a file: its CSV has a column for each parameter of
any session (empty where a session has no such parameter).

Text that a spreadsheet would read as a formula (a cell or header that starts with ``=``,
``+``, ``-``, ``@``, a tab or a carriage return) is written with a leading ``'``
(:func:`csv_text`; a leading ``'`` is doubled), which spreadsheets show as text; the import
reads it back (:func:`csv_untext`). Numbers are written as numbers.

Both are built from one :class:`~botorch_pref.sessions.records.SessionState` (a consistent
snapshot). A file is written to a temporary file beside it, flushed to disk and renamed over the
target (:func:`write_atomic`): a crash mid-export leaves the previous file intact.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from botorch_pref.sessions.errors import SessionError
from botorch_pref.sessions.records import Query, SessionRow, SessionState

__all__ = [
    "CSV_COLUMNS",
    "EXPORT_FORMAT",
    "STUDY_FORMAT",
    "csv_text",
    "csv_untext",
    "export_study",
    "session_to_dict",
    "study_to_dict",
    "write_atomic",
    "write_csv",
    "write_json",
    "write_study_csv",
    "write_to",
]

#: The ``format`` field of a JSON export.
EXPORT_FORMAT = "botorch-pref-session"
#: The ``format`` field of a study's JSON export (every session of a file).
STUDY_FORMAT = "botorch-pref-study"
#: The fixed columns of a CSV export (the parameters follow, one column each).
CSV_COLUMNS = (
    "session",
    "answer_id",
    "query_id",
    "query_number",
    "source",
    "kind",
    "winner",
    "ranking",
    "strength",
    "answered_at",
    "shown_at",
    "response_s",
    "retracted_at",
    "option",
    "rating",
)


_FORMULA = ("=", "+", "-", "@", "\t", "\r", "'")


def csv_text(text: str) -> str:
    """A text cell as a spreadsheet reads it as text: a leading ``'`` before ``=``, ``+``,
    ``-``, ``@``, a tab, a carriage return or ``'``.

    Args:
        text: The text.

    Returns:
        The cell.
    """
    return f"'{text}" if text.startswith(_FORMULA) else text


def csv_untext(cell: str) -> str:
    """The text :func:`csv_text` wrote (a cell it did not change is returned as is).

    Args:
        cell: The cell.

    Returns:
        The text.
    """
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(_FORMULA) else cell


def _status(query: Query, standing: set[int], pending_id: int | None) -> str:
    if query.id in standing:
        return "answered"
    if query.id == pending_id:
        return "pending"
    if query.withdrawn_at is not None:
        return "withdrawn"
    return "unanswered"


def session_to_dict(
    session: SessionRow, state: SessionState, schema_version: int
) -> dict[str, Any]:
    """The JSON export of a session.

    Args:
        session: The session row.
        state: A snapshot of the session.
        schema_version: The store's schema version.

    Returns:
        A JSON-serialisable dict.
    """
    standing = {a.query_id for a in state.standing()}
    return {
        "format": EXPORT_FORMAT,
        "schema_version": schema_version,
        "session": {
            "name": session.name,
            "parameters": [{"name": n, "low": lo, "high": hi} for n, lo, hi in session.parameters],
            "strategy": session.strategy,
            "q": session.q,
            "seed": session.seed,
            "options": session.options,
            "budget": session.budget,
            "package_version": session.package_version,
            "created_at": session.created_at,
        },
        "parameter_names": list(session.names),
        "queries": [
            {
                "id": q.id,
                "number": q.number,
                "source": q.source,
                "status": _status(q, standing, state.pending_id),
                "options": [list(x) for x in q.options],
                "created_at": q.created_at,
                "first_shown_at": q.first_shown_at,
                "last_shown_at": q.last_shown_at,
                "times_shown": q.times_shown,
                "withdrawn_at": q.withdrawn_at,
            }
            for q in state.queries
        ],
        "answers": [
            {
                "id": a.id,
                "query_id": a.query_id,
                "kind": a.answer.kind,
                "winner": a.answer.winner,
                "ranking": None if a.answer.ranking is None else list(a.answer.ranking),
                "strength": a.answer.strength,
                "ratings": None if a.answer.ratings is None else list(a.answer.ratings),
                "answered_at": a.answered_at,
                "shown_at": a.shown_at,
                "response_s": a.response_s,
                "retracted_at": a.retracted_at,
            }
            for a in state.answers
        ],
    }


def write_json(data: Mapping[str, Any], out: TextIO) -> None:
    """Write a JSON export.

    Args:
        data: The dict from :func:`session_to_dict`.
        out: A text stream.
    """
    json.dump(data, out, indent=2)
    out.write("\n")


def study_to_dict(
    sessions: Sequence[tuple[SessionRow, SessionState]], schema_version: int
) -> dict[str, Any]:
    """The JSON export of a study: every session's :func:`session_to_dict`.

    Args:
        sessions: ``(row, snapshot)`` of each session.
        schema_version: The store's schema version.

    Returns:
        A JSON-serialisable dict (``format``: :data:`STUDY_FORMAT`).
    """
    return {
        "format": STUDY_FORMAT,
        "schema_version": schema_version,
        "sessions": [session_to_dict(row, state, schema_version) for row, state in sessions],
    }


def write_csv(session: SessionRow, state: SessionState, out: TextIO) -> None:
    """Write the CSV export of one session: one row per option of every answer.

    Args:
        session: The session row.
        state: A snapshot of the session.
        out: A text stream (open it with ``newline=""``).
    """
    write_study_csv([(session, state)], out)


def write_study_csv(sessions: Sequence[tuple[SessionRow, SessionState]], out: TextIO) -> None:
    """Write the CSV export of several sessions: one row per option of every answer.

    Args:
        sessions: ``(row, snapshot)`` of each session.
        out: A text stream (open it with ``newline=""``).
    """
    names = list(dict.fromkeys(n for row, _ in sessions for n in row.names))
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*CSV_COLUMNS, *map(csv_text, names)])
    for session, state in sessions:
        where = [names.index(n) for n in session.names]
        for entry in state.history():
            a, given, query = entry.stored, entry.answer, entry.query
            fixed = [
                csv_text(session.name),
                a.id,
                query.id,
                query.number,
                query.source,
                given.kind,
                _blank(given.winner),
                "" if given.ranking is None else " ".join(str(i) for i in given.ranking),
                _blank(given.strength),
                a.answered_at,
                a.shown_at or "",
                "" if a.response_s is None else repr(a.response_s),
                a.retracted_at or "",
            ]
            for option, x in enumerate(query.options):
                values = [""] * len(names)
                for i, v in zip(where, x, strict=True):
                    values[i] = repr(v)
                rating = None if given.ratings is None else given.ratings[option]
                writer.writerow([*fixed, option, _blank(rating), *values])


def _blank(value: int | None) -> int | str:
    """An optional integer cell: empty for ``None``."""
    return "" if value is None else value


def write_atomic(path: str | os.PathLike[str], write: Callable[[TextIO], None]) -> None:
    """Write a text file through a temporary file beside it, fsync'd, then renamed over it.

    A crash at any point leaves either the previous file or the complete new one.

    Args:
        path: The file to write.
        write: Writes the content to the stream it is given.

    Raises:
        OSError: When the directory or the file cannot be written (nothing is left behind).
    """
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(f"{str(target)!r} is a directory; name a file to export to.")
    directory = target.parent
    if not directory.is_dir():
        raise FileNotFoundError(
            f"Cannot write {str(target)!r}: the directory {str(directory)!r} does not exist."
        )
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_to(out: str | os.PathLike[str] | TextIO, write: Callable[[TextIO], None]) -> None:
    """Write to a path (atomically, :func:`write_atomic`) or to a text stream.

    Args:
        out: The path or stream.
        write: Writes the content to the stream it is given.

    Raises:
        SessionError: When ``out`` is neither.
    """
    if isinstance(out, (str, os.PathLike)):
        write_atomic(out, write)
    elif hasattr(out, "write"):
        write(out)
    else:
        raise SessionError(f"Cannot write to {out!r}.")


def export_study(
    path: str | os.PathLike[str], out: str | os.PathLike[str] | TextIO, fmt: str | None = None
) -> int:
    """Write every session of a file as one CSV or JSON export, from one snapshot.

    The CSV has the session's name in every row and a column for each parameter of any
    session (:func:`write_study_csv`); the JSON (:data:`STUDY_FORMAT`) holds each session's
    export (:func:`study_to_dict`).

    Args:
        path: The database file.
        out: A path (written atomically) or a text stream.
        fmt: ``"csv"`` or ``"json"``; default from the path's suffix.

    Returns:
        The number of answers written.

    Raises:
        SessionError: For an unknown format or a file that is not a session database.
        OSError: When the file cannot be written (a previous file is left intact).
    """
    from botorch_pref.sessions.schema import SCHEMA_VERSION
    from botorch_pref.sessions.store import Store

    if fmt is None and isinstance(out, (str, os.PathLike)):
        fmt = Path(out).suffix.lstrip(".")
    fmt = (fmt or "").lower()
    if fmt not in ("csv", "json"):
        raise SessionError(f"Export format must be csv or json, got {fmt!r}.")
    with Store(path) as store, store.connection.read():  # one snapshot of every session
        sessions = [(row, store.state(row)) for row, _ in store.summaries()]
    if fmt == "json":
        write_to(out, partial(write_json, study_to_dict(sessions, SCHEMA_VERSION)))
    else:
        write_to(out, partial(write_study_csv, sessions))
    return sum(len(state.answers) for _, state in sessions)
