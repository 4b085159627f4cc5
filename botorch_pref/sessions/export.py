"""Export of sessions to CSV and JSON, written atomically.

JSON export (``format: "botorch-pref-session"``) holds everything: the session's problem and
settings, every query (options, source, show times, status) and every answer (retracted ones
too, with their retraction time).

CSV export has one row per option of every answer (retracted ones too), so a spreadsheet can
filter and pivot it: ``answer_id, query_id, query_number, source, kind, winner, ranking,
answered_at, shown_at, response_s, retracted_at, option`` and one column per parameter. A
ranking is written best first, separated by spaces.

Both are built from one :class:`~botorch_pref.sessions.records.SessionState` (a consistent
snapshot). A file is written to a temporary file beside it, flushed to disk and renamed over the
target (:func:`write_atomic`): a crash mid-export leaves the previous file intact.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from botorch_pref.sessions.records import Query, SessionRow, SessionState

__all__ = [
    "CSV_COLUMNS",
    "EXPORT_FORMAT",
    "session_to_dict",
    "write_atomic",
    "write_csv",
    "write_json",
]

#: The ``format`` field of a JSON export.
EXPORT_FORMAT = "botorch-pref-session"
#: The fixed columns of a CSV export (the parameters follow, one column each).
CSV_COLUMNS = (
    "answer_id",
    "query_id",
    "query_number",
    "source",
    "kind",
    "winner",
    "ranking",
    "answered_at",
    "shown_at",
    "response_s",
    "retracted_at",
    "option",
)


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
                "kind": a.kind,
                "winner": a.winner,
                "ranking": None if a.ranking is None else list(a.ranking),
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


def write_csv(session: SessionRow, state: SessionState, out: TextIO) -> None:
    """Write the CSV export: one row per option of every answer.

    Args:
        session: The session row.
        state: A snapshot of the session.
        out: A text stream (open it with ``newline=""``).
    """
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*CSV_COLUMNS, *session.names])
    for entry in state.history():
        a, query = entry.answer, entry.query
        fixed = [
            a.id,
            query.id,
            query.number,
            query.source,
            a.kind,
            "" if a.winner is None else a.winner,
            "" if a.ranking is None else " ".join(str(i) for i in a.ranking),
            a.answered_at,
            a.shown_at or "",
            "" if a.response_s is None else repr(a.response_s),
            a.retracted_at or "",
        ]
        for option, x in enumerate(query.options):
            writer.writerow([*fixed, option, *(repr(v) for v in x)])


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
