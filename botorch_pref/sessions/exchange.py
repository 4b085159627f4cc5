"""Import of comparisons collected elsewhere into a session.

Import reads either export of :mod:`botorch_pref.sessions.export` (retracted answers are left
out), or comparisons in a plain form:

* JSON: a list (or ``{"comparisons": [...]}``) of records ``{"options": [[...], [...]],
  "winner": 0}``, with ``"ranking": [2, 0, 1]`` instead of ``winner``, or ``"kind": "skip"`` /
  ``"tie"``; options as lists (from Python, tuples too) in the session's parameter order or as
  ``{name: value}`` dicts; an optional ``"answered_at"`` (ISO 8601). In a session with a graded
  scale a winner may have a ``"strength"``, in one with a rating scale an answer may have
  ``"ratings"`` (one level per option; ``"kind": "rating"`` or no other answer: ratings alone).
* CSV: one row per option, with ``query_id`` (rows with the same id form one query), ``option``
  (``0..q-1``), one column per parameter, and ``winner``, ``ranking`` or ``kind``; optionally
  ``strength`` (the answer's, in each of its rows) and ``rating`` (the row's option's rating,
  given in every row of an answer or in none).

Every record is checked (options inside the bounds and distinct, answer in range) before
anything is stored; one bad record rejects the whole file with its position in the message.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from botorch_pref.loop.answers import Answer, AnswerFormat, validate_answer
from botorch_pref.sessions.errors import ImportFormatError, InvalidAnswerError
from botorch_pref.sessions.export import EXPORT_FORMAT, csv_untext

__all__ = ["ImportRecord", "parse_comparisons", "read_comparisons"]

#: ``(designs, answer, answered_at)``: one answered query to import.
ImportRecord = tuple[list[list[float]], Answer, "str | None"]


# ------------------------------------------------------------------------ import
def read_comparisons(
    path: str | Path,
    parameters: Sequence[tuple[str, float, float]],
    fmt: str | None = None,
    scales: AnswerFormat | None = None,
) -> list[ImportRecord]:
    """Read and check comparisons from a CSV or JSON file.

    Args:
        path: The file.
        parameters: The session's ``(name, low, high)`` triples.
        fmt: ``"csv"`` or ``"json"``; default from the file's suffix.
        scales: The session's graded and rating scales (its ``levels`` and ``ratings``;
            ``None``: neither, so a strength or ratings are refused).

    Returns:
        The records, in file order.

    Raises:
        FileNotFoundError: When the file does not exist.
        ImportFormatError: For an unreadable or malformed file or an invalid record.
    """
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in ("csv", "json"):
        raise ImportFormatError(
            f"Cannot tell the format of {str(path)!r}: name it *.csv or *.json, or give the format."
        )
    if not path.is_file():
        raise FileNotFoundError(f"No file {str(path)!r} to import.")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise ImportFormatError(f"Cannot read {str(path)!r}: {err}") from None
    if fmt == "csv":
        return _parse_csv(text, parameters, AnswerFormat() if scales is None else scales)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ImportFormatError(f"{str(path)!r} is not valid JSON: {err}") from None
    return parse_comparisons(data, parameters, scales)


def parse_comparisons(
    data: Any,
    parameters: Sequence[tuple[str, float, float]],
    scales: AnswerFormat | None = None,
) -> list[ImportRecord]:
    """Check comparisons given as Python objects (the JSON forms of the module docstring).

    Args:
        data: A JSON export dict, ``{"comparisons": [...]}`` or a list of records.
        parameters: The session's ``(name, low, high)`` triples.
        scales: The session's graded and rating scales (see :func:`read_comparisons`).

    Returns:
        The records.

    Raises:
        ImportFormatError: For a malformed structure or an invalid record.
    """
    if isinstance(data, Mapping) and data.get("format") == EXPORT_FORMAT:
        data = _records_from_export(data, parameters)
    elif isinstance(data, Mapping) and "comparisons" in data:
        data = data["comparisons"]
    if not isinstance(data, list):
        raise ImportFormatError(
            "Expected a list of comparisons, {'comparisons': [...]} or a session export."
        )
    scales = AnswerFormat() if scales is None else scales
    records = [_parse_record(i, rec, parameters, scales) for i, rec in enumerate(data)]
    if not records:
        raise ImportFormatError("No comparisons to import.")
    return records


def _records_from_export(
    data: Mapping[str, Any], parameters: Sequence[tuple[str, float, float]]
) -> list[dict[str, Any]]:
    """The standing answers of a JSON export as plain records (options keyed by name)."""
    try:
        names = list(data["parameter_names"])
        options = {int(q["id"]): q["options"] for q in data["queries"]}
        answers = list(data["answers"])
    except (KeyError, TypeError, ValueError) as err:
        raise ImportFormatError(f"Malformed session export: missing or bad field {err}.") from None
    if not all(isinstance(n, str) for n in names):
        raise ImportFormatError(f"Malformed session export: parameter_names {names!r:.200}.")
    if sorted(names) != sorted(p[0] for p in parameters):
        raise ImportFormatError(
            f"The export's parameters {names} differ from this session's "
            f"{[p[0] for p in parameters]}."
        )
    records = []
    for i, a in enumerate(answers):
        query_id = a.get("query_id") if isinstance(a, Mapping) else None
        if isinstance(query_id, bool) or not isinstance(query_id, int) or query_id not in options:
            raise ImportFormatError(f"Answer {i} of the export has no known query_id.")
        if a.get("retracted_at"):
            continue
        rows = options[a["query_id"]]
        if not isinstance(rows, list) or not all(
            isinstance(r, list) and len(r) == len(names) for r in rows
        ):
            raise ImportFormatError(f"Query {a['query_id']} of the export has malformed options.")
        records.append(
            {
                "options": [dict(zip(names, r, strict=True)) for r in rows],
                "kind": a.get("kind"),
                "winner": a.get("winner"),
                "ranking": a.get("ranking"),
                "strength": a.get("strength"),
                "ratings": a.get("ratings"),
                "answered_at": a.get("answered_at"),
            }
        )
    return records


def _parse_record(
    i: int, rec: Any, parameters: Sequence[tuple[str, float, float]], scales: AnswerFormat
) -> ImportRecord:
    """Check one record; errors name it by position."""
    try:
        if not isinstance(rec, Mapping):
            raise ImportFormatError(f"must be an object with 'options', got {rec!r}")
        if "options" not in rec:
            raise ImportFormatError("has no 'options'")
        designs = _check_designs(rec["options"], parameters)
        answer = _check_record_answer(rec, len(designs), scales)
        answered_at = _check_time(rec.get("answered_at"))
    except (ImportFormatError, InvalidAnswerError) as err:
        raise ImportFormatError(f"Comparison {i}: {err}".rstrip(".") + ".") from None
    return designs, answer, answered_at


def _check_designs(
    options: Any, parameters: Sequence[tuple[str, float, float]]
) -> list[list[float]]:
    """Options as ``q x d`` floats inside the bounds, distinct, ``q >= 2``."""
    names = [p[0] for p in parameters]
    if not isinstance(options, (list, tuple)) or len(options) < 2:
        raise ImportFormatError("'options' must list at least two designs")
    designs = []
    for j, opt in enumerate(options):
        if isinstance(opt, Mapping):
            if sorted(opt) != sorted(names):
                raise ImportFormatError(f"option {j} has parameters {sorted(opt)}, not {names}")
            opt = [opt[n] for n in names]
        if not isinstance(opt, (list, tuple)) or len(opt) != len(names):
            raise ImportFormatError(f"option {j} must give {len(names)} values ({names})")
        designs.append([_check_value(v, p, j) for v, p in zip(opt, parameters, strict=True)])
    if len({tuple(x) for x in designs}) != len(designs):
        raise ImportFormatError("repeats a design: options must be distinct")
    return designs


def _check_value(value: Any, parameter: tuple[str, float, float], j: int) -> float:
    name, low, high = parameter
    if isinstance(value, bool):
        raise ImportFormatError(f"option {j}: {name} = {value!r} is not a number")
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ImportFormatError(f"option {j}: {name} = {value!r:.40} is not a number") from None
    slack = 1e-9 * (high - low)
    if not math.isfinite(v) or v < low - slack or v > high + slack:
        raise ImportFormatError(f"option {j}: {name} = {v!r} lies outside [{low}, {high}]")
    return v


def _check_record_answer(rec: Mapping[str, Any], q: int, scales: AnswerFormat) -> Answer:
    """The answer of a record from ``kind``, ``winner``, ``ranking``, ``strength`` and
    ``ratings``, validated as a session's answers are ("no preference" about any number of
    options, on the session's scales)."""
    kind = rec.get("kind")
    winner, ranking = rec.get("winner"), rec.get("ranking")
    check = partial(
        validate_answer,
        q,
        strength=rec.get("strength"),
        ratings=rec.get("ratings"),
        pair_ties_only=False,
        levels=scales.levels,
        rating_levels=scales.ratings,
    )
    if kind is None and winner is None and ranking is None and rec.get("ratings") is not None:
        kind = "rating"
    if kind in ("skip", "tie", "rating"):
        if winner not in (None, "") or ranking not in (None, ""):
            raise ImportFormatError(f"kind {kind!r} takes no winner or ranking")
        return check(skip=kind == "skip", tie=kind == "tie")
    if kind not in (None, "winner", "ranking"):
        raise ImportFormatError(f"unknown kind {kind!r} (winner, ranking, skip, tie or rating)")
    if kind == "winner" and ranking not in (None, ""):
        raise ImportFormatError("kind 'winner' takes no ranking")
    if kind == "winner" or (kind is None and ranking is None):
        if winner is None:
            raise ImportFormatError("gives no answer: 'winner', 'ranking' or 'kind'")
        return check(winner=winner)
    if ranking is None:
        raise ImportFormatError("kind 'ranking' without a 'ranking'")
    answer = check(ranking=ranking)
    if winner is not None and winner != answer.winner:
        raise ImportFormatError(f"winner {winner!r} is not the ranking's first entry")
    return answer


def _check_time(value: Any) -> str | None:
    if value in (None, ""):
        return None
    try:
        datetime.fromisoformat(str(value))
    except ValueError:
        raise ImportFormatError(f"answered_at {value!r} is not an ISO 8601 time") from None
    return str(value)


def _parse_csv(
    text: str, parameters: Sequence[tuple[str, float, float]], scales: AnswerFormat
) -> list[ImportRecord]:
    """Group CSV rows into comparisons and check them."""
    reader = csv.DictReader(io.StringIO(text))
    try:
        if reader.fieldnames is not None:
            reader.fieldnames = [
                csv_untext(f)  # formula-like names, escaped
                for f in reader.fieldnames
            ]
        rows = list(reader)
    except csv.Error as err:
        raise ImportFormatError(f"Malformed CSV: {err}") from None
    fields = list(reader.fieldnames or ())  # read with the header, even without rows
    repeated = sorted({f for f in fields if fields.count(f) > 1})
    if repeated:  # DictReader would keep the last of them
        raise ImportFormatError(f"The CSV repeats the columns {repeated}.")
    header = set(fields)
    names = [p[0] for p in parameters]
    missing = [c for c in ("query_id", "option", *names) if c not in header]
    if missing:
        raise ImportFormatError(f"The CSV lacks the columns {missing} (has {sorted(header)}).")
    if not header & {"winner", "ranking", "kind"}:
        raise ImportFormatError("The CSV needs a 'winner', 'ranking' or 'kind' column.")
    with_ids = "answer_id" in header and all((r.get("answer_id") or "").strip() for r in rows)
    key = "answer_id" if with_ids else "query_id"
    groups: dict[str, list[tuple[int, dict[str, str]]]] = {}
    for line, row in enumerate(rows, start=2):
        if None in row or any(v is None for v in row.values()):
            raise ImportFormatError(f"CSV line {line} has the wrong number of fields.")
        if (row.get("retracted_at") or "").strip():
            continue
        groups.setdefault(row[key].strip(), []).append((line, row))
    records = []
    for i, (gid, group) in enumerate(groups.items()):
        records.append(_csv_group(i, gid, group, names, parameters, scales))
    if not records:
        raise ImportFormatError("No comparisons to import.")
    return records


def _csv_group(
    i: int,
    gid: str,
    group: list[tuple[int, dict[str, str]]],
    names: list[str],
    parameters: Sequence[tuple[str, float, float]],
    scales: AnswerFormat,
) -> ImportRecord:
    """One comparison from the CSV rows sharing an id."""
    first_line = group[0][0]
    answer_fields = ("kind", "winner", "ranking", "strength", "answered_at")
    ref = {f: (group[0][1].get(f) or "").strip() for f in answer_fields}
    options: dict[int, dict[str, str]] = {}
    ratings: dict[int, int | None] = {}
    for line, row in group:
        if {f: (row.get(f) or "").strip() for f in answer_fields} != ref:
            raise ImportFormatError(
                f"CSV line {line}: the answer differs from line {first_line} of the same query."
            )
        try:
            option = int(row["option"])
        except ValueError:
            raise ImportFormatError(
                f"CSV line {line}: option {row['option']!r} is not an integer."
            ) from None
        if option in options:
            raise ImportFormatError(f"CSV line {line}: option {option} of {gid!r} repeats.")
        options[option] = {n: row[n] for n in names}
        ratings[option] = _csv_int((row.get("rating") or "").strip(), line, "rating")
    if sorted(options) != list(range(len(options))):
        raise ImportFormatError(
            f"CSV lines from {first_line}: the options of {gid!r} must be numbered 0..q-1, "
            f"got {sorted(options)}."
        )
    rated = [ratings[j] for j in range(len(options))]
    if None in rated and any(r is not None for r in rated):
        raise ImportFormatError(
            f"CSV lines from {first_line} ({gid!r}): rate every option of an answer or none, "
            f"got ratings {['' if r is None else r for r in rated]}."
        )
    record = {
        "options": [options[j] for j in range(len(options))],
        "kind": ref["kind"] or None,
        "winner": _csv_int(ref["winner"], first_line, "winner"),
        "ranking": _csv_ranking(ref["ranking"], first_line),
        "strength": _csv_int(ref["strength"], first_line, "strength"),
        "ratings": None if None in rated else rated,
        "answered_at": ref["answered_at"] or None,
    }
    try:
        return _parse_record(i, record, parameters, scales)
    except ImportFormatError as err:
        raise ImportFormatError(f"CSV lines from {first_line} ({gid!r}): {err}") from None


def _csv_int(text: str, line: int, what: str) -> int | None:
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ImportFormatError(f"CSV line {line}: {what} {text!r} is not an integer.") from None


def _csv_ranking(text: str, line: int) -> list[int] | None:
    if not text:
        return None
    parts = [p for p in re.split(r"[\s,;>]+", text) if p]
    return [_csv_int(p, line, "ranking entry") for p in parts]
