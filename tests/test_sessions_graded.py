"""Sessions with graded answers and ratings: storing, resuming, undoing, bad input, exports,
imports, the terminal and the command line."""

from __future__ import annotations

import io
import json
import sqlite3

import pytest
import torch

from botorch_pref.sessions import (
    ImportFormatError,
    InvalidAnswerError,
    SchemaVersionError,
    Session,
)
from botorch_pref.sessions.export import export_study
from botorch_pref.sessions.scales import graded_positions, rating_words, strength_words
from botorch_pref.sessions.terminal import parse_ratings, run_loop
from tests.helpers import snapshot

PARAMS = {"x": (0.0, 1.0), "y": (-2.0, 3.0)}
#: Quick queries: random options, no refits.
QUICK = {"strategy": "random", "seed": 0, "refit_all_until": 0, "refit_every": 1000}
#: A model-driven session that stays cheap: EUBO after two random queries, refits early on.
EUBO = {"strategy": "eubo", "seed": 3, "n_initial": 2, "refit_all_until": 3, "refit_every": 50}


@pytest.fixture
def db(tmp_path):
    return tmp_path / "study.db"


def _utility(x: list[float]) -> float:
    return -((x[0] - 0.3) ** 2) - 0.1 * (x[1] - 1.0) ** 2


def _graded_answer(query) -> dict:
    """A deterministic graded answer with ratings on 3 levels."""
    u = [_utility(list(o)) for o in query.options]
    diff = u[0] - u[1]
    rate = [min(2, max(0, int(3 + 4 * v))) for v in u]
    if abs(diff) < 1e-3:
        return {"tie": True, "ratings": rate}
    return {"winner": 0 if diff > 0 else 1, "strength": 2 if abs(diff) > 0.05 else 1,
            "ratings": rate}  # fmt: skip


def _answer_graded(s: Session, n: int) -> list:
    queries = []
    for _ in range(n):
        query = s.ask()
        queries.append(query.options)
        s.answer(query.id, **_graded_answer(query))
    return queries


# ------------------------------------------------------------------ the scales
def test_the_scales_people_see():
    assert [p.label for p in graded_positions(5)] == [
        "A much better", "A slightly better", "About the same", "B slightly better",
        "B much better",
    ]  # fmt: skip
    assert [p.answer() for p in graded_positions(5)] == [
        {"winner": 0, "strength": 2}, {"winner": 0, "strength": 1}, {"tie": True},
        {"winner": 1, "strength": 1}, {"winner": 1, "strength": 2},
    ]  # fmt: skip
    four = graded_positions(4, ("(a)", "(b)"))
    assert [p.label for p in four][1:3] == ["(a) slightly better", "(b) slightly better"]
    assert not any(p.tie for p in four)  # an even scale has no middle
    assert [p.answer()["strength"] for p in graded_positions(9)[:4]] == [4, 3, 2, 1]
    assert strength_words(9)[1:3] == ("better (2 of 4)", "better (3 of 4)")
    assert rating_words(3) == ("bad", "fine", "good") and rating_words(7)[-1] == "7 (best)"
    with pytest.raises(ValueError, match="levels"):
        graded_positions(1)


# ---------------------------------------------------------- storing and resuming
def test_graded_answers_and_ratings_are_stored_and_read_back(db):
    with Session.create(db, "g", PARAMS, answers="graded", levels=5, ratings=3, **QUICK) as s:
        assert (s.levels, s.rating_levels) == (5, 3)
        assert s.settings["ties"] is True  # "about the same" is the 5-level scale's middle
        q1 = s.ask()
        s.answer(q1.id, winner=1, strength=2, ratings=[0, 2])
        q2 = s.ask()
        s.answer(q2.id, tie=True, ratings=(1, 1))
        q3 = s.ask()
        s.answer(q3.id, ratings=[2, 0])  # ratings alone
        q4 = s.ask()
        s.answer(q4.id, winner=0)  # "better", of no stated strength
        given = [h.answer for h in s.history()]
    with Session.open(db, "g") as s:
        assert [h.answer for h in s.history()] == given
        assert [(a.kind, a.winner, a.strength, a.ratings) for a in given] == [
            ("winner", 1, 2, (0, 2)), ("tie", None, None, (1, 1)), ("rating", None, None, (2, 0)),
            ("winner", 0, None, None),
        ]  # fmt: skip
        p = s.progress()
        assert (p.answered, p.choices, p.ties) == (4, 3, 1)
        data = s.optimizer.preference_data  # every answer reached the model
        assert s.optimizer.n_queries == 4 and data is not None


def test_an_even_scale_has_no_tie_and_no_default_ties(db):
    with Session.create(db, "even", PARAMS, answers="graded", levels=4, **QUICK) as s:
        assert s.settings["ties"] is False and s.levels == 4
        query = s.ask()
        with pytest.raises(InvalidAnswerError, match="4-level scale"):
            s.answer(query.id, tie=True)
        s.answer(query.id, winner=0, strength=2)


def test_a_graded_session_resumes_with_the_same_queries(db):
    """Answers given in one process, or in three with closes between them: the same queries."""
    settings = {**EUBO, "answers": "graded", "levels": 5, "ratings": 3}
    with Session.create(db, "once", PARAMS, **settings) as s:
        straight = _answer_graded(s, 6)
        straight.append(s.ask().options)
    Session.create(db, "resumed", PARAMS, **settings).close()
    resumed = []
    for n in (2, 2, 2):
        with Session.open(db, "resumed") as s:
            resumed += _answer_graded(s, n)
    with Session.open(db, "resumed") as s:
        resumed.append(s.ask().options)
        history = [h.answer for h in s.history()]
    assert any(a.strength == 2 for a in history) and all(a.ratings for a in history)
    assert len(resumed) == len(straight) == 7
    for a, b in zip(straight, resumed, strict=True):
        assert torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-6)


def test_undo_of_a_graded_answer(db):
    with Session.create(db, "g", PARAMS, answers="graded", ratings=4, **QUICK) as s:
        first = s.ask()
        s.answer(first.id, winner=0, strength=1, ratings=[3, 0])
        s.ask()
        undone = s.undo()
        assert (undone.answer.strength, undone.answer.ratings) == (1, (3, 0))
        assert s.ask().id == first.id  # asked again
        s.answer(first.id, winner=1, strength=2, ratings=[0, 3])
        standing = [h.answer for h in s.history(include_retracted=False)]
        assert [(a.winner, a.strength, a.ratings) for a in standing] == [(1, 2, (0, 3))]
        assert s.progress().retracted == 1


# -------------------------------------------------------------------- bad input
BAD = [
    ({"winner": 0, "strength": 3}, "graded", r"strength must lie in 1\.\.2 .* got 3"),
    ({"winner": 0, "strength": 0}, "graded", r"got 0"),
    ({"winner": 0, "strength": 1.5}, "graded", r"strength must be an integer, got 1\.5"),
    ({"winner": 0, "strength": "2"}, "graded", r"got '2'"),
    ({"winner": 0, "strength": True}, "graded", r"got True"),
    ({"tie": True, "strength": 1}, "graded", r"strength=1 .* a tie takes none"),
    ({"skip": True, "strength": 2}, "graded", r"strength=2 .* a skip takes none"),
    ({"winner": 0, "strength": 1}, "binary", r"strength=1 given to a binary comparison"),
    ({"winner": 0, "ratings": [1]}, "graded", r"one level per option \(2\), got 1: \[1\]"),
    ({"winner": 0, "ratings": [1, 2, 0]}, "graded", r"got 3: \[1, 2, 0\]"),
    ({"winner": 0, "ratings": [1, 3]}, "graded", r"0\.\.2 \(3 levels\), got 3 in \[1, 3\]"),
    ({"winner": 0, "ratings": [-1, 0]}, "graded", r"got -1"),
    ({"winner": 0, "ratings": [1.0, 0]}, "graded", r"ratings entries must be an integer, got 1\.0"),
    ({"winner": 0, "ratings": "12"}, "graded", r"sequence of levels, got '12'"),
    ({"winner": 0, "ratings": [1, 1]}, "binary", r"ratings \[1, 1\] given, but this study"),
    ({"skip": True, "ratings": [1, 1]}, "graded", r"skipped question takes no ratings"),
]


@pytest.mark.parametrize(("answer", "study", "message"), BAD)
def test_bad_graded_answers_change_nothing(db, answer, study, message):
    scales = {"answers": "graded", "levels": 5, "ratings": 3} if study == "graded" else {}
    with Session.create(db, "s", PARAMS, **QUICK, **scales) as s:
        s.answer(s.ask().id, skip=True)
        query = s.ask()
        before, state = snapshot(db), s.state()
        with pytest.raises(InvalidAnswerError, match=message):
            s.answer(query.id, **answer)
        assert snapshot(db) == before and s.state() == state
        assert s.pending().id == query.id


def test_a_file_of_the_previous_schema_is_refused_unchanged(db):
    with Session.create(db, "old", PARAMS, **QUICK) as s:
        s.answer(s.ask().id, winner=0)
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 2")
    con.close()
    before = db.read_bytes()
    with pytest.raises(SchemaVersionError, match="schema version 2, from before the first"):
        Session.open(db, "old")
    assert db.read_bytes() == before


def test_bad_scales_at_creation_are_refused(db):
    for scales, message in (
        ({"answers": "graded", "levels": 1}, "levels"),
        ({"ratings": 1}, "ratings"),
        ({"answers": "graded", "levels": 2.5}, "levels"),
        ({"answers": "graded", "q": 3}, "pairs"),
    ):
        with pytest.raises(ValueError, match=message):
            Session.create(db, "bad", PARAMS, **{**QUICK, **scales})
    assert not db.exists() or Session.list(db) == []


# --------------------------------------------------------------- exports, imports
def _graded_study(db, name: str = "g") -> Session:
    s = Session.create(db, name, PARAMS, answers="graded", levels=5, ratings=3, **QUICK)
    answers = [
        {"winner": 1, "strength": 2, "ratings": [0, 2]},
        {"tie": True, "ratings": [1, 1]},
        {"ratings": [2, 1]},
        {"winner": 0, "strength": 1},
        {"skip": True},
    ]
    for answer in answers:
        s.answer(s.ask().id, **answer)
    s.ask()
    s.undo()  # the skip, retracted
    return s


def test_exports_carry_strength_and_ratings(db, tmp_path):
    with _graded_study(db) as s:
        data = s.to_dict()
        s.export(tmp_path / "g.csv")
    assert data["session"]["options"]["levels"] == 5 and data["session"]["options"]["ratings"] == 3
    assert [(a["kind"], a["strength"], a["ratings"]) for a in data["answers"]] == [
        ("winner", 2, [0, 2]), ("tie", None, [1, 1]), ("rating", None, [2, 1]),
        ("winner", 1, None), ("skip", None, None),
    ]  # fmt: skip
    rows = (tmp_path / "g.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert header[-4:] == ["option", "rating", "x", "y"] and "strength" in header
    cells = [dict(zip(header, r.split(","), strict=True)) for r in rows[1:]]
    assert [(c["kind"], c["strength"], c["option"], c["rating"]) for c in cells[:6]] == [
        ("winner", "2", "0", "0"), ("winner", "2", "1", "2"), ("tie", "", "0", "1"),
        ("tie", "", "1", "1"), ("rating", "", "0", "2"), ("rating", "", "1", "1"),
    ]  # fmt: skip
    study = io.StringIO()
    export_study(db, study, "csv")
    assert study.getvalue().splitlines()[1:] == rows[1:]
    study = io.StringIO()
    export_study(db, study, "json")
    assert json.loads(study.getvalue())["sessions"][0]["answers"] == data["answers"]


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_an_export_imports_back_with_its_strengths_and_ratings(db, tmp_path, fmt):
    with _graded_study(db) as s:
        s.export(tmp_path / f"g.{fmt}")
        exported = [(h.query.options, h.answer) for h in s.history(include_retracted=False)]
    with Session.create(db, "copy", PARAMS, answers="graded", ratings=3, **QUICK) as s:
        assert s.import_comparisons(tmp_path / f"g.{fmt}") == 4
        imported = [(h.query.options, h.answer) for h in s.history()]
    assert imported == exported
    # a session without those scales refuses the file whole, naming the first bad answer
    with Session.create(db, "binary", PARAMS, **QUICK) as s:
        with pytest.raises(ImportFormatError, match=r"Comparison 0: .*ratings \[0, 2\] given"):
            s.import_comparisons(tmp_path / f"g.{fmt}")
        assert s.history() == []


def test_bad_strengths_and_ratings_in_an_import_are_named(db, tmp_path):
    options = [[0.1, 0.0], [0.9, 1.0]]
    with Session.create(db, "g", PARAMS, answers="graded", ratings=3, **QUICK) as s:
        for record, message in (
            ({"winner": 0, "strength": 5}, r"Comparison 0: strength must lie in 1\.\.2"),
            ({"kind": "tie", "strength": 1}, "Comparison 0: strength=1 grades a winner"),
            ({"winner": 0, "ratings": [1]}, r"one level per option \(2\), got 1"),
            ({"kind": "rating"}, "Give exactly one answer"),
        ):
            with pytest.raises(ImportFormatError, match=message):
                s.import_comparisons([{"options": options, **record}])
        path = tmp_path / "partial.csv"
        path.write_text("query_id,option,x,y,winner,rating\n1,0,0.1,0,0,2\n1,1,0.9,1,0,\n")
        with pytest.raises(ImportFormatError, match=r"rate every option of an answer or none"):
            s.import_comparisons(path)
        assert s.history() == []
        assert s.import_comparisons([{"options": options, "ratings": [2, 0]}]) == 1
        assert s.history()[0].answer.kind == "rating"


# --------------------------------------------------------------------- terminal
def _script(lines: list[str], prompts: list[str]):
    feed = iter(lines)

    def read(prompt: str) -> str:
        prompts.append(prompt)
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    return read


def test_the_terminal_asks_for_the_strength_and_the_ratings(db):
    with Session.create(db, "t", PARAMS, answers="graded", levels=5, ratings=3, **QUICK) as s:
        out = io.StringIO()
        script = [
            "?",
            "a", "2", "3 1",  # (a) slightly better, rated good and bad
            "b", "9", "5", "", # off the scale, then (b) much better; no ratings
            "a", "3", "2 2",  # placed in the middle: about the same
            "b", "", "1 2 3", "x 1", "1 3",  # just "better"; wrong ratings, then right
            "s",
            "a", "q",  # quits at the scale: nothing saved
        ]  # fmt: skip
        prompts: list[str] = []
        run_loop(s, read=_script(script, prompts), out=out)
        text, asked = out.getvalue(), "\n".join(prompts)
        given = [(a.kind, a.winner, a.strength, a.ratings) for a in (h.answer for h in s.history())]
    assert given == [
        ("winner", 0, 1, (2, 0)), ("winner", 1, 2, None), ("tie", None, None, (1, 1)),
        ("winner", 1, None, (0, 2)), ("skip", None, None, None),
    ]  # fmt: skip
    assert "1  (a) much better" in text and "3  About the same" in text
    assert "5  (b) much better" in text and "How much better is (a)? 1-5, Enter" in asked
    assert "Rate (a) (b) (1 bad, 2 fine, 3 good), Enter: none" in asked
    assert "Not on the scale: '9'" in text
    assert "Give one rating per option (2), got 3: '1 2 3'." in text
    assert "'x' is not a rating from 1 to 3." in text
    assert "Saved: (a) slightly better; ratings (a) 3, (b) 1." in text
    assert "After a pick, say how much better on the scale" in text  # the help
    assert "rate every option" in text


def test_parse_ratings():
    assert parse_ratings(" 3, 1 ", 2, 3) == [2, 0]
    assert parse_ratings("", 2, 3) is None
    for line, message in (("4 1", "'4' is not a rating from 1 to 3"), ("1", "got 1: '1'")):
        with pytest.raises(ValueError, match=message):
            parse_ratings(line, 2, 3)


def test_the_command_line_creates_a_graded_study(db, capsys):
    from botorch_pref.cli import main

    code = main(["session", "create", str(db), "g", "--param", "x:0:1", "--strategy", "random",
                 "--answers", "graded", "--levels", "7", "--ratings", "5"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "graded answers on 7 levels, ratings on 5 levels" in out
    with Session.open(db, "g") as s:
        assert (s.levels, s.rating_levels, s.settings["ties"]) == (7, 5, True)
    assert main(["session", "status", str(db), "g"]) == 0
    assert "graded answers on 7 levels" in capsys.readouterr().out


def test_the_ratings_of_a_tie_the_session_does_not_model_reach_the_model(db):
    with Session.create(db, "r", PARAMS, ratings=3, ties=False, **QUICK) as s:
        s.answer(s.ask().id, tie=True, ratings=[1, 2])
        s.answer(s.ask().id, tie=True)  # no ratings: recorded, not modelled
        s.answer(s.ask().id, winner=0, ratings=[2, 0])
        records = s.optimizer.history
    assert [(r.winner, r.tie, r.ratings) for r in records] == [
        (None, False, (1, 2)),
        (0, False, (2, 0)),
    ]
