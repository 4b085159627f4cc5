"""The interactive terminal loop of ``botorch-pref session run``.

Each query shows its options side by side with the parameter names and values, the progress and
the current best design. Keys: ``a``/``b`` (or ``1``..``q``) pick an option, a full ranking such
as ``c a b`` or ``3 1 2`` ranks all options, ``s`` skips, ``t`` says "no preference", ``u`` undoes
the last answer (recorded as a retraction), ``q`` quits, ``?`` helps. Input is read with
:func:`input`, so the loop can be driven by a script or a pseudo-terminal.

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

__all__ = [
    "Command",
    "describe_best",
    "describe_params",
    "describe_progress",
    "format_options",
    "indent",
    "load_renderer",
    "option_labels",
    "parse_command",
    "run_loop",
]

Renderer = Callable[[Any], "str | None"]

_HELP = (
    "Pick the option you prefer: {picks}. Rank them all: e.g. '{rank}'.\n"
    "  s  skip this query        t  no preference\n"
    "  u  undo your last answer  q  quit (answers are saved; 'run' resumes)\n"
    "  ?  this help"
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
            term.say(_HELP.format(picks=picks, rank=" ".join(reversed(labels))))
            continue
        if cmd.action == "quit":
            return "quit"
        try:
            if cmd.action == "undo":
                undone = session.undo()
                what = undone.answer.kind
                term.say(f"Undid your last answer ({what}); that query is shown again.")
                return "undone"
            session.answer(
                query.id,
                cmd.winner if cmd.action == "winner" else None,
                ranking=cmd.ranking,
                skip=cmd.action == "skip",
                tie=cmd.action == "tie",
            )
        except QueryNotPendingError as err:
            term.say(f"{err} Showing the current query.")
            return "undone"
        except USER_ERRORS as err:
            term.say(str(err))
            continue
        term.say(f"Saved: {_describe_answer(cmd, labels)}.")
        return "answered"


def _describe_answer(cmd: Command, labels: list[str]) -> str:
    if cmd.action == "winner":
        return f"you prefer ({labels[cmd.winner]})"
    if cmd.action == "ranking":
        return "your ranking " + " > ".join(f"({labels[i]})" for i in cmd.ranking)
    return "skipped" if cmd.action == "skip" else "no preference"
