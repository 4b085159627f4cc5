"""One answer type from the door to the database: validated once, stored as it was validated.

A session validates each answer once (:func:`~botorch_pref.loop.validate_answer`), stores that
:class:`~botorch_pref.loop.Answer` inside its row (:class:`StoredAnswer`), and reads it back
equal, through a reopened session and through an export and import. A bad answer raises
:class:`InvalidAnswerError` and leaves the session's state and its file as they were.
"""

from __future__ import annotations

import dataclasses
import sys

import pytest

from botorch_pref.loop import Answer, InvalidAnswerError, validate_answer
from botorch_pref.loop import answers as loop_answers
from botorch_pref.sessions import Session, StoredAnswer
from botorch_pref.sessions.records import HistoryEntry

from .helpers import SESSION_FAST, SESSION_PARAMS, snapshot

PARAMS, FAST = SESSION_PARAMS, SESSION_FAST

#: One answer of each kind a session takes, with the number of options it is about.
GIVEN = [
    (2, {"winner": 1}, Answer("winner", 1)),
    (2, {"tie": True}, Answer("tie")),
    (2, {"skip": True}, Answer("skip")),
    (3, {"ranking": [2, 0, 1]}, Answer("ranking", 2, (2, 0, 1))),
    (3, {"winner": 0, "ranking": (0, 2, 1)}, Answer("ranking", 0, (0, 2, 1))),
    (3, {"tie": True}, Answer("tie")),  # recorded about any number of options, not modelled
]


@pytest.fixture
def count_validations(monkeypatch):
    """Counts the calls of ``validate_answer``, wherever the package imported it."""
    calls = []
    original = loop_answers.validate_answer

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("botorch_pref") and (
            getattr(module, "validate_answer", None) is original
        ):
            monkeypatch.setattr(module, "validate_answer", counted)
    return calls


def _session(tmp_path, q: int, name: str = "alice") -> Session:
    return Session.create(tmp_path / "study.db", name, PARAMS, **{**FAST, "q": q})


@pytest.mark.parametrize(("q", "kwargs", "expected"), GIVEN)
def test_an_answer_is_validated_once_and_stored_as_validated(
    tmp_path, count_validations, q, kwargs, expected
):
    with _session(tmp_path, q) as s:
        query = s.ask()
        del count_validations[:]
        stored = s.answer(query.id, **kwargs)
        assert len(count_validations) == 1  # the door checks it; the store does not again
        assert isinstance(stored, StoredAnswer) and type(stored.answer) is Answer
        assert stored.answer == expected == validate_answer(q, pair_ties_only=False, **kwargs)
        assert stored.query_id == query.id and stored.stands
    with Session.open(tmp_path / "study.db", "alice") as again:
        (entry,) = again.history()
        assert isinstance(entry, HistoryEntry)
        assert entry.stored == stored and entry.answer == expected
        assert again.state().answers == (stored,)


def test_an_import_validates_each_record_once(tmp_path, count_validations):
    records = [
        {"options": [[0.1, 0.0], [0.2, 1.0]], "winner": 0},
        {"options": [[0.3, 0.0], [0.4, 1.0]], "kind": "tie"},
        {"options": [[0.5, 0.0], [0.6, 1.0]], "kind": "skip"},
    ]
    with _session(tmp_path, 2) as s:
        del count_validations[:]
        assert s.import_comparisons(records) == 3
        assert len(count_validations) == 3
        assert [h.answer for h in s.history()] == [
            Answer("winner", 0),
            Answer("tie"),
            Answer("skip"),
        ]


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_exported_answers_import_as_the_same_answers(tmp_path, fmt):
    with _session(tmp_path, 3) as s:
        for _, kwargs, _ in (g for g in GIVEN if g[0] == 3):
            s.answer(s.ask().id, **kwargs)
        s.answer(s.ask().id, winner=2)
        s.export(tmp_path / f"out.{fmt}")
        given = [h.answer for h in s.history()]
    with Session.create(tmp_path / "copy.db", "copy", PARAMS, **{**FAST, "q": 3}) as copy:
        copy.import_comparisons(tmp_path / f"out.{fmt}")
        assert [h.answer for h in copy.history()] == given


@pytest.mark.parametrize(
    ("q", "kwargs", "match"),
    [
        (2, {"winner": 2}, "winner must lie"),
        (2, {"winner": True}, "must be an integer"),
        (2, {"tie": "False"}, "tie must be True or False"),
        (2, {"skip": [1]}, "skip must be True or False"),
        (2, {"tie": True, "winner": 0}, "takes no winner"),
        (3, {"ranking": [0, 1, 1]}, "permutation"),
        (3, {"ranking": [0, 1.0, 2]}, "ranking entries must be an integer"),
        (3, {"winner": 1, "ranking": [0, 1, 2]}, "disagrees"),
        (3, {}, "exactly one"),
    ],
)
def test_a_bad_answer_changes_neither_the_state_nor_the_file(tmp_path, q, kwargs, match):
    with _session(tmp_path, q) as s:
        s.answer(s.ask().id, winner=0)
        query = s.ask()
        state, stored = s.state(), snapshot(s.path)
        with pytest.raises(InvalidAnswerError, match=match):
            s.answer(query.id, **kwargs)
        assert s.state() == state and snapshot(s.path) == stored
        assert s.pending() == query  # still awaiting its answer


def test_the_answer_type_takes_new_optional_fields_by_name():
    """Every field past ``kind`` has a default, and nothing reads an answer by position, so a
    further kind of answer adds an optional field without changing the existing ones."""
    fields = dataclasses.fields(Answer)
    assert [f.name for f in fields] == ["kind", "winner", "ranking", "strength", "ratings"]
    assert all(f.default is None for f in fields[1:])
    assert Answer("skip") == Answer(kind="skip", winner=None, ranking=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Answer("winner", 0).winner = 1
    with pytest.raises(TypeError):
        iter(Answer("tie"))  # not a tuple: no unpacking by position
