"""The interactive terminal loop of ``botorch-pref session run``.

Each query shows its options side by side with the parameter names and values, the progress and
the current best design. Keys: ``a``/``b`` (or ``1``..``q``) pick an option, a full ranking such
as ``c a b`` or ``3 1 2`` ranks all options, ``s`` skips, ``t`` says "no preference", ``u`` undoes
the last answer (recorded as a retraction), ``q`` quits, ``?`` helps. Input is read with
:func:`input`, so the loop can be driven by a script or a pseudo-terminal.

In a session with a graded scale of ``k`` levels, a pick of ``a`` or ``b`` is followed by the
scale (:func:`~botorch_pref.sessions.scales.graded_positions`), numbered ``1`` ("(a) much
better") to ``k`` ("(b) much better") with "about the same" in the middle of an odd scale: a
number places the answer there (another side or the middle too), Enter keeps the pick as
"better" of no stated strength. In a session with a rating scale of ``k`` levels, every answer
but a skip is followed by the ratings: one number ``1`` (worst) .. ``k`` (best) per option, in
the options' order (``3 1``), or Enter for none. ``q`` at either question quits without saving
that answer; a wrong number is refused with the reason and asked again.

A renderer is a function ``render(query) -> str | None`` (``query`` a
:class:`~botorch_pref.sessions.Query`); its text is printed under the table. Name it as
``module:function`` (an importable module) or ``path/to/file.py:function``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import shlex
import string
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from botorch_pref.sessions.errors import USER_ERRORS, QueryNotPendingError
from botorch_pref.sessions.scales import graded_positions, rating_words, strength_words

__all__ = [
    "Command",
    "describe_best",
    "describe_params",
    "describe_progress",
    "describe_scales",
    "format_options",
    "indent",
    "load_renderer",
    "option_labels",
    "parse_command",
    "parse_ratings",
    "run_loop",
]

Renderer = Callable[[Any], "str | None"]

_HELP = (
    "Pick the option you prefer: {picks}. Rank them all: e.g. '{rank}'.\n"
    "  s  skip this query        t  no preference\n"
    "  u  undo your last answer  q  quit (answers are saved; 'run' resumes)\n"
    "  ?  this help"
)
_GRADED_HELP = (
    "\nAfter a pick, say how much better on the scale: type its number (the middle one is "
    "'about the same'), or press Enter for just 'better'."
)
_RATING_HELP = (
    "\nAfter each answer (not a skip), rate every option: one number per option, in their "
    "order ({scale}), or press Enter for no ratings."
)


# ------------------------------------------------------------------- renderers
def load_renderer(spec: str) -> Renderer:
    """Load ``module:function`` or ``path/to/file.py:function``.

    Args:
        spec: The renderer's location.

    Returns:
        The function.

    Raises:
        ValueError: When it cannot be loaded or is not callable.
    """
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"A renderer must be MODULE:FUNCTION, got {spec!r}.")
    try:
        if module_name.endswith(".py"):
            # one module name per file: renderers loaded together (the web page's) must not
            # replace each other in sys.modules, where typing and pickle look their names up
            path = os.path.realpath(module_name)
            digest = hashlib.sha1(path.encode()).hexdigest()[:16]
            file_spec = importlib.util.spec_from_file_location(f"_session_renderer_{digest}", path)
            if file_spec is None or file_spec.loader is None:
                raise ImportError(f"cannot load {module_name}")
            module = importlib.util.module_from_spec(file_spec)
            # registered while it runs, as an import would: dataclasses and typing look it up
            sys.modules[file_spec.name] = module
            try:
                file_spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[file_spec.name]
                raise
        else:
            module = importlib.import_module(module_name)
    except Exception as err:  # whatever the module raises on import
        raise ValueError(
            f"Cannot load the renderer {spec!r}: {type(err).__name__}: {err}"
        ) from None
    func = getattr(module, attr, None)
    if not callable(func):
        raise ValueError(f"Renderer {spec!r}: {module_name} has no function {attr!r}.")
    return func


# -------------------------------------------------------------------- the loop
def option_labels(q: int) -> list[str]:
    """Labels of the options shown: ``a``, ``b`` for pairs, ``1``..``q`` otherwise.

    Args:
        q: The number of options.

    Returns:
        The labels.
    """
    return ["a", "b"] if q == 2 else [str(i + 1) for i in range(q)]


@dataclass(frozen=True)
class Command:
    """A parsed line of input.

    Attributes:
        action: ``"winner"``, ``"ranking"``, ``"skip"``, ``"tie"``, ``"undo"``, ``"quit"`` or
            ``"help"``.
        winner: The chosen option for ``winner``.
        ranking: The ranking for ``ranking``.
    """

    action: str
    winner: int | None = None
    ranking: tuple[int, ...] | None = None


_WORDS = {
    "s": "skip",
    "skip": "skip",
    "t": "tie",
    "tie": "tie",
    "=": "tie",
    "u": "undo",
    "undo": "undo",
    "q": "quit",
    "quit": "quit",
    "exit": "quit",
    "?": "help",
    "h": "help",
    "help": "help",
}


def parse_command(line: str, q: int) -> Command | None:
    """Parse one line typed by the person.

    Args:
        line: The input.
        q: The number of options of the query shown.

    Returns:
        The command, or ``None`` when the line means nothing.
    """
    text = line.strip().lower()
    if text in _WORDS:
        return Command(_WORDS[text])
    tokens = [t for t in text.replace(">", " ").replace(",", " ").split() if t]
    if len(tokens) == 1 and len(tokens[0]) == q > 2 and tokens[0].isalpha():
        tokens = list(tokens[0])
    indices = [_option_index(t, q) for t in tokens]
    if not indices or None in indices:
        return None
    if len(indices) == 1:
        return Command("winner", winner=indices[0])
    if sorted(indices) == list(range(q)):
        if q == 2:
            return Command("winner", winner=indices[0])
        return Command("ranking", winner=indices[0], ranking=tuple(indices))
    return None


def _option_index(token: str, q: int) -> int | None:
    """``a``.. or ``1``.. as a 0-based option index, else ``None``."""
    if token.isascii() and token.isdigit() and 1 <= int(token) <= q:
        return int(token) - 1
    letters = string.ascii_lowercase[: min(q, 10)]
    if len(token) == 1 and token in letters:
        return letters.index(token)
    return None


def format_options(query: Any) -> str:
    """The options side by side: one row per parameter, one column per option.

    Args:
        query: A :class:`~botorch_pref.sessions.Query`.

    Returns:
        The table.
    """
    labels = option_labels(query.q)
    cells = [[f"{v:.6g}" for v in x] for x in query.options]
    name_w = max(len(n) for n in query.names)
    col_w = max(8, *(len(c) for col in cells for c in col))
    head = " " * name_w + "".join(f"  {'(' + lab + ')':>{col_w}}" for lab in labels)
    rows = [head]
    for j, name in enumerate(query.names):
        rows.append(name.ljust(name_w) + "".join(f"  {col[j]:>{col_w}}" for col in cells))
    return "\n".join(rows)


def describe_params(parameters: list[tuple[str, float, float]]) -> str:
    """``name in [low, high], ...``.

    Args:
        parameters: ``(name, low, high)`` triples.

    Returns:
        The text.
    """
    return ", ".join(f"{n} in [{lo:g}, {hi:g}]" for n, lo, hi in parameters)


def describe_progress(p: Any) -> str:
    """``N of M answered (...)``.

    Args:
        p: A :class:`~botorch_pref.sessions.Progress`.

    Returns:
        The text.
    """
    budget = "" if p.budget is None else f" of {p.budget}"
    imported = f", {p.imported} imported" if p.imported else ""
    return f"{p.answered}{budget} answered ({p.skips} skipped, {p.ties} no preference{imported})"


def describe_best(best: Any, names: Sequence[str], note: str = "") -> str:
    """The recommendation as one line.

    Args:
        best: A :class:`~botorch_pref.loop.Recommendation` (its design in the order of
            ``names``), or ``None``.
        names: The parameter names.
        note: Said after "best so far" (e.g. how many answers it is based on).

    Returns:
        The text.
    """
    if best is None:
        return "best: none yet (no choices recorded)"
    values = ", ".join(f"{n} = {v:.6g}" for n, v in zip(names, best.x.tolist(), strict=True))
    return f"best so far{note}: {values} (utility {best.mean:.3g} ± {best.std:.2g})"


def describe_scales(session: Any) -> str:
    """``, graded answers on 5 levels, ratings on 3 levels`` for a session with those scales
    (``""`` for binary answers).

    Args:
        session: A :class:`~botorch_pref.sessions.Session`.

    Returns:
        The text.
    """
    parts = []
    if session.levels is not None:
        parts.append(f"graded answers on {session.levels} levels")
    if session.rating_levels is not None:
        parts.append(f"ratings on {session.rating_levels} levels")
    return "".join(f", {p}" for p in parts)


def indent(text: str, prefix: str) -> str:
    """Each line of ``text`` after ``prefix``.

    Args:
        text: The text.
        prefix: The indentation.

    Returns:
        The indented text.
    """
    return "\n".join(prefix + line for line in text.splitlines())


class _Terminal:
    """Output with flushing, and input that treats end of input and Ctrl-C as quit."""

    def __init__(self, read: Callable[[str], str], out: TextIO) -> None:
        self._read = read
        self._out = out

    def say(self, text: str = "") -> None:
        print(text, file=self._out, flush=True)

    def ask(self, prompt: str) -> str:
        try:
            return self._read(prompt)
        except (EOFError, KeyboardInterrupt):
            self.say()
            return "q"


def run_loop(
    session: Any,
    *,
    renderer: Renderer | None = None,
    max_answers: int | None = None,
    read: Callable[[str], str] = input,
    out: TextIO | None = None,
    db: str | None = None,
) -> int:
    """Show queries and record answers until the person quits or the budget is reached.

    Args:
        session: An open :class:`~botorch_pref.sessions.Session`.
        renderer: Optional ``render(query) -> str | None`` printed under each query.
        max_answers: Stop after this many answers in this run.
        read: Reads a line after printing a prompt (default :func:`input`).
        out: Where to print (default standard output).
        db: The database path, for the resume hint.

    Returns:
        Exit status (0).

    Raises:
        ValueError: For a negative ``max_answers``.
    """
    if max_answers is not None and (isinstance(max_answers, bool) or max_answers < 0):
        raise ValueError(f"max_answers must be a non-negative integer, got {max_answers!r}.")
    term = _Terminal(read, out or sys.stdout)
    term.say(f"Session {session.name!r}: {describe_params(session.parameters)}.")
    term.say("Type ? for help. Every answer is saved at once.")
    given = 0
    while True:
        progress = session.progress()
        if progress.done:
            term.say(f"The planned {progress.budget} answers are done. Thank you!")
            break
        if max_answers is not None and given >= max_answers:
            break
        query = session.ask()
        _show(term, session, query, progress, renderer)
        outcome = _handle_query(term, session, query)
        if outcome == "quit":
            break
        given += outcome == "answered"
    where = shlex.quote(str(db)) if db else "DB"
    term.say(
        f"Saved: {session.progress().answered} answers. Resume with: botorch-pref session run "
        f"{where} {shlex.quote(session.name)}"
    )
    return 0


def _show(term: _Terminal, session: Any, query: Any, progress: Any, renderer: Any) -> None:
    term.say()
    again = " (shown again)" if query.times_shown > 1 else ""
    term.say(f"Query {query.number}{again} - {describe_progress(progress)}")
    term.say(describe_best(session.best(), session.names))
    term.say()
    term.say(format_options(query))
    if renderer is not None:
        try:
            text = renderer(query)
        except Exception as err:  # a display bug must not end the session
            text = f"(the renderer failed: {type(err).__name__}: {err})"
        if text:
            term.say(str(text))


def _handle_query(term: _Terminal, session: Any, query: Any) -> str:
    """Read commands until one acts on the query; ``"answered"``, ``"undone"`` or ``"quit"``."""
    labels = option_labels(query.q)
    picks = "/".join(labels)
    prompt = f"[{picks}] pick, s skip, t no preference, u undo, q quit, ? help > "
    while True:
        cmd = parse_command(term.ask(prompt), query.q)
        if cmd is None:
            term.say(f"Not understood. Type {picks}, s, t, u, q or ? for help.")
            continue
        if cmd.action == "help":
            term.say(_help(session, labels))
            continue
        if cmd.action == "quit":
            return "quit"
        try:
            if cmd.action == "undo":
                undone = session.undo()
                what = undone.answer.kind
                term.say(f"Undid your last answer ({what}); that query is shown again.")
                return "undone"
            answer = _details(term, session, query, cmd, labels)
            if answer is None:
                return "quit"
            session.answer(query.id, **answer)
        except QueryNotPendingError as err:
            term.say(f"{err} Showing the current query.")
            return "undone"
        except USER_ERRORS as err:
            term.say(str(err))
            continue
        term.say(f"Saved: {_describe_answer(answer, labels, session.levels)}.")
        return "answered"


def _help(session: Any, labels: list[str]) -> str:
    """The help text, with the graded and rating scales' parts where the session has them."""
    text = _HELP.format(picks="/".join(labels), rank=" ".join(reversed(labels)))
    if session.levels is not None:
        text += _GRADED_HELP
    rating_levels = session.rating_levels
    if rating_levels is not None:
        text += _RATING_HELP.format(scale=_rating_scale(rating_levels))
    return text


def _details(
    term: _Terminal, session: Any, query: Any, cmd: Command, labels: list[str]
) -> dict[str, Any] | None:
    """The answer's keyword arguments of :meth:`Session.answer`, with the strength and ratings
    asked for where the session takes them; ``None`` when the person quits."""
    answer: dict[str, Any] = {
        "winner": cmd.winner if cmd.action == "winner" else None,
        "ranking": cmd.ranking,
        "skip": cmd.action == "skip",
        "tie": cmd.action == "tie",
    }
    levels = session.levels
    if levels is not None and cmd.action == "winner" and query.q == 2:
        placed = _ask_strength(term, levels, labels, cmd.winner)
        if placed is None:
            return None
        answer.update({"winner": None, **placed})
    rating_levels = session.rating_levels
    if rating_levels is not None and cmd.action != "skip":
        ratings = _ask_ratings(term, rating_levels, labels)
        if ratings == "quit":
            return None
        answer["ratings"] = ratings
    return answer


def _ask_strength(
    term: _Terminal, levels: int, labels: list[str], winner: int
) -> dict[str, Any] | None:
    """Where on the graded scale the pick lies; ``{"winner": ...}`` for Enter, ``None`` for
    quit."""
    names = (f"({labels[0]})", f"({labels[1]})")
    positions = graded_positions(levels, names)
    for i, position in enumerate(positions):
        term.say(f"  {i + 1}  {position.label}")
    prompt = f"How much better is ({labels[winner]})? 1-{levels}, Enter: just better > "
    while True:
        text = term.ask(prompt).strip().lower()
        if text == "":
            return {"winner": winner}
        if text in ("q", "quit", "exit"):
            return None
        if text.isascii() and text.isdigit() and 1 <= int(text) <= levels:
            return positions[int(text) - 1].answer()
        term.say(f"Not on the scale: {text[:20]!r}. Type a number from 1 to {levels}, or Enter.")


def _rating_scale(levels: int) -> str:
    words = rating_words(levels)
    return ", ".join(f"{i + 1} {w}" for i, w in enumerate(words))


def parse_ratings(line: str, q: int, levels: int) -> list[int] | None:
    """Ratings typed as one number ``1 .. levels`` per option (spaces or commas between them).

    Args:
        line: The input.
        q: The number of options.
        levels: The rating scale's number of levels.

    Returns:
        The levels ``0 .. levels - 1`` (the typed numbers less one), or ``None`` for an empty
        line (no ratings).

    Raises:
        ValueError: For anything but ``q`` whole numbers on the scale (the message names the
            value).
    """
    tokens = line.replace(",", " ").split()
    if not tokens:
        return None
    bad = [t for t in tokens if not (t.isascii() and t.isdigit() and 1 <= int(t) <= levels)]
    if bad:
        raise ValueError(f"{bad[0][:20]!r} is not a rating from 1 to {levels}.")
    if len(tokens) != q:
        raise ValueError(f"Give one rating per option ({q}), got {len(tokens)}: {line.strip()!r}.")
    return [int(t) - 1 for t in tokens]


def _ask_ratings(term: _Terminal, levels: int, labels: list[str]) -> list[int] | str | None:
    """The ratings of the options (levels from 0), ``None`` for Enter, ``"quit"`` for quit."""
    order = " ".join(f"({lab})" for lab in labels)
    prompt = f"Rate {order} ({_rating_scale(levels)}), Enter: none > "
    while True:
        text = term.ask(prompt).strip().lower()
        if text in ("q", "quit", "exit"):
            return "quit"
        try:
            return parse_ratings(text, len(labels), levels)
        except ValueError as err:
            term.say(str(err))


def _describe_answer(answer: dict[str, Any], labels: list[str], levels: int | None) -> str:
    if answer["winner"] is not None:
        strength = answer.get("strength")
        text = f"you prefer ({labels[answer['winner']]})"
        if strength is not None and levels is not None:
            text = f"({labels[answer['winner']]}) {strength_words(levels)[strength - 1]}"
    elif answer["ranking"] is not None:
        text = "your ranking " + " > ".join(f"({labels[i]})" for i in answer["ranking"])
    else:
        text = "skipped" if answer["skip"] else "no preference"
    ratings = answer.get("ratings")
    if ratings is not None:
        text += "; ratings " + ", ".join(
            f"({lab}) {r + 1}" for lab, r in zip(labels, ratings, strict=True)
        )
    return text
