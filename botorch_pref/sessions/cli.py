"""The ``botorch-pref session`` command and its interactive terminal loop.

Examples::

    botorch-pref session create study.db alice --param sweetness:0:10 --param sourness:0:5 \\
        --strategy eubo --seed 0 --budget 30
    botorch-pref session run study.db alice            # answer queries; q quits, run resumes
    botorch-pref session run study.db alice --renderer mypkg.show:render
    botorch-pref session status study.db alice
    botorch-pref session export study.db alice -o alice.csv
    botorch-pref session import study.db alice earlier.json
    botorch-pref session list study.db

In ``run``, each query shows its options side by side with the parameter names and values, the
progress and the current best design. Keys: ``a``/``b`` (or ``1``..``q``) pick an option, a full
ranking such as ``c a b`` or ``3 1 2`` ranks all options, ``s`` skips, ``t`` says "no
preference", ``u`` undoes the last answer (recorded as a retraction), ``q`` quits, ``?`` helps.
Input is read with :func:`input`, so the loop can be driven by a script or a pseudo-terminal.

A renderer is a function ``render(query) -> str | None`` (``query`` a
:class:`~botorch_pref.sessions.Query`); its text is printed under the table. Name it as
``module:function`` (an importable module) or ``path/to/file.py:function``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import string
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

__all__ = ["load_renderer", "parse_command", "register", "run_loop"]

Renderer = Callable[[Any], "str | None"]

_HELP = (
    "Pick the option you prefer: {picks}. Rank them all: e.g. '{rank}'.\n"
    "  s  skip this query        t  no preference\n"
    "  u  undo your last answer  q  quit (answers are saved; 'run' resumes)\n"
    "  ?  this help"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``session`` command and its sub-commands.

    Args:
        subparsers: The sub-parsers object of the ``botorch-pref`` parser.
    """
    session = subparsers.add_parser(
        "session",
        help="run preference sessions with people (stored in SQLite)",
        description="Create, run, inspect and export preferential-BO sessions with people. "
        "Every answer is saved before the next query is generated.",
    )
    sub = session.add_subparsers(dest="session_command", metavar="SUBCOMMAND")
    sub.required = True
    _add_create(sub)
    _add_run(sub)
    st = sub.add_parser("status", help="show a session's progress, pending query and best")
    _db_and_name(st)
    st.set_defaults(func=cmd_status)
    ex = sub.add_parser("export", help="export a session to CSV or JSON")
    _db_and_name(ex)
    ex.add_argument("-o", "--output", help="output file (default: standard output)")
    ex.add_argument("--format", choices=("csv", "json"), help="default: from the suffix, else json")
    ex.set_defaults(func=cmd_export)
    im = sub.add_parser("import", help="import comparisons collected elsewhere (CSV or JSON)")
    _db_and_name(im)
    im.add_argument("file", help="a session export or a file of comparisons")
    im.add_argument("--format", choices=("csv", "json"), help="default: from the suffix")
    im.set_defaults(func=cmd_import)
    ls = sub.add_parser("list", help="list the sessions in a database")
    ls.add_argument("db", help="session database file")
    ls.set_defaults(func=cmd_list)


def _db_and_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("db", help="session database file")
    parser.add_argument("name", help="session name")


def _add_create(sub: argparse._SubParsersAction) -> None:
    from botorch_pref.loop import STRATEGIES

    cr = sub.add_parser(
        "create",
        help="create a session",
        description="Create a named session (and the database file if needed).",
    )
    _db_and_name(cr)
    cr.add_argument(
        "--param",
        action="append",
        required=True,
        metavar="NAME:LOW:HIGH",
        help="a parameter and its bounds in your units (repeat for each)",
    )
    cr.add_argument("--strategy", choices=STRATEGIES, default="eubo")
    cr.add_argument("-q", "--q", type=int, default=2, help="options per query")
    cr.add_argument("--seed", type=int, default=None, help="default: drawn and stored")
    cr.add_argument("--budget", type=int, default=None, help="planned number of answers")
    cr.add_argument("--n-initial", type=int, default=None, help="random queries first")
    cr.add_argument("--model", default=None, help="laplace (default) or pairwisegp")
    cr.add_argument(
        "--answers",
        choices=("choice", "pairs"),
        default=None,
        help="q > 2 answers as a choice among the options (default) or as pairs",
    )
    cr.add_argument(
        "--no-ties",
        action="store_true",
        help="record 'no preference' answers without modelling them (default for q = 2: model)",
    )
    cr.set_defaults(func=cmd_create)


def _add_run(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        help="answer queries in the terminal",
        description="Show queries one by one and record the answers. Keys: a/b (or 1..q) "
        "pick, s skip, t no preference, u undo, q quit, ? help.",
    )
    _db_and_name(run)
    run.add_argument(
        "--renderer",
        metavar="MODULE:FUNCTION",
        help="function(query) -> str printed under each query (module or file.py path)",
    )
    run.add_argument("--max-answers", type=int, default=None, help="stop after this many")
    run.set_defaults(func=cmd_run)


# --------------------------------------------------------------------- commands
def _parse_param(spec: str) -> tuple[str, float, float]:
    """``NAME:LOW:HIGH`` (the name may contain colons)."""
    parts = spec.rsplit(":", 2)
    if len(parts) != 3:
        raise ValueError(f"--param must be NAME:LOW:HIGH, got {spec!r}.")
    try:
        return parts[0], float(parts[1]), float(parts[2])
    except ValueError:
        raise ValueError(f"--param {spec!r}: LOW and HIGH must be numbers.") from None


def cmd_create(args: argparse.Namespace) -> int:
    """``session create``.

    Args:
        args: Parsed arguments.

    Returns:
        Exit status.
    """
    from botorch_pref.sessions import Session

    options = {}
    if args.n_initial is not None:
        options["n_initial"] = args.n_initial
    if args.model is not None:
        options["model"] = args.model
    if args.answers is not None:
        options["answers"] = args.answers
    if args.no_ties:
        options["ties"] = False
    params = [_parse_param(p) for p in args.param]
    with Session.create(
        args.db, args.name, params, args.strategy, args.q, args.seed, budget=args.budget, **options
    ) as s:
        print(
            f"Created session {s.name!r} in {args.db}: {_describe_params(s.parameters)}; "
            f"strategy {s.strategy}, q = {s.q}, seed {s.seed}."
        )
        print(f"Start it with: botorch-pref session run {args.db} {s.name}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """``session run``: the interactive loop.

    Args:
        args: Parsed arguments.

    Returns:
        Exit status.
    """
    from botorch_pref.sessions import Session

    renderer = load_renderer(args.renderer) if args.renderer else None
    with Session.open(args.db, args.name) as s:
        try:
            return run_loop(s, renderer=renderer, max_answers=args.max_answers, db=args.db)
        except KeyboardInterrupt:
            print(
                f"\nInterrupted. Every answer given is saved; resume with: botorch-pref "
                f"session run {args.db} {s.name}"
            )
            return 130


def cmd_status(args: argparse.Namespace) -> int:
    """``session status``.

    Args:
        args: Parsed arguments.

    Returns:
        Exit status.
    """
    from botorch_pref.sessions import Session

    with Session.open(args.db, args.name) as s:
        p = s.progress()
        print(f"Session {s.name!r} in {args.db}")
        print(f"  parameters: {_describe_params(s.parameters)}")
        print(
            f"  strategy {s.strategy}, q = {s.q}, seed {s.seed}; created with botorch-pref "
            f"{s.package_version}"
        )
        print(f"  {_describe_progress(p)}; {p.retracted} retracted, {p.imported} imported")
        pending = s.pending()
        if pending is None:
            print("  pending: none")
        else:
            print(f"  pending: query {pending.number} (id {pending.id})")
            print(_indent(format_options(pending), "    "))
        print(f"  {_describe_best(s.best())}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``session export``.

    Args:
        args: Parsed arguments.

    Returns:
        Exit status.
    """
    from botorch_pref.sessions import Session

    fmt = args.format
    if fmt is None:
        suffix = Path(args.output).suffix.lower().lstrip(".") if args.output else ""
        fmt = suffix if suffix in ("csv", "json") else "json"
    with Session.open(args.db, args.name) as s:
        if args.output is None:
            (s.export_csv if fmt == "csv" else s.export_json)(sys.stdout)
        else:
            s.export(args.output, fmt)
            n = len(s.history())
            print(f"Exported {n} answers of session {s.name!r} to {args.output} ({fmt}).")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """``session import``.

    Args:
        args: Parsed arguments.

    Returns:
        Exit status.
    """
    from botorch_pref.sessions import Session

    with Session.open(args.db, args.name) as s:
        n = s.import_comparisons(args.file, args.format)
        print(f"Imported {n} comparisons into session {s.name!r}.")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``session list``.

    Args:
        args: Parsed arguments.

    Returns:
        Exit status.
    """
    from botorch_pref.sessions import Session

    summaries = Session.list(args.db)
    if not summaries:
        print(f"No sessions in {args.db}.")
        return 0
    rows = [("name", "strategy", "q", "answered", "pending", "parameters", "created")]
    for m in summaries:
        budget = "" if m.progress.budget is None else f"/{m.progress.budget}"
        rows.append(
            (
                m.name,
                m.strategy,
                str(m.q),
                f"{m.progress.answered}{budget}",
                "yes" if m.progress.pending else "no",
                ",".join(m.parameters),
                m.created_at[:19],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


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
        raise ValueError(f"--renderer must be MODULE:FUNCTION, got {spec!r}.")
    try:
        if module_name.endswith(".py"):
            file_spec = importlib.util.spec_from_file_location("_session_renderer", module_name)
            if file_spec is None or file_spec.loader is None:
                raise ImportError(f"cannot load {module_name}")
            module = importlib.util.module_from_spec(file_spec)
            file_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except (ImportError, OSError, SyntaxError) as err:
        raise ValueError(f"Cannot load the renderer {spec!r}: {err}") from None
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
    if token.isdigit() and 1 <= int(token) <= q:
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


def _describe_params(parameters: list[tuple[str, float, float]]) -> str:
    return ", ".join(f"{n} in [{lo:g}, {hi:g}]" for n, lo, hi in parameters)


def _describe_progress(p: Any) -> str:
    budget = "" if p.budget is None else f" of {p.budget}"
    imported = f", {p.imported} imported" if p.imported else ""
    return f"{p.answered}{budget} answered ({p.skips} skipped, {p.ties} no preference{imported})"


def _describe_best(best: Any) -> str:
    if best is None:
        return "best: none yet (no choices recorded)"
    values = ", ".join(f"{n} = {v:.6g}" for n, v in best.x.items())
    return f"best so far: {values} (utility {best.mean:.3g} ± {best.std:.2g})"


def _indent(text: str, prefix: str) -> str:
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
    """
    term = _Terminal(read, out or sys.stdout)
    term.say(f"Session {session.name!r}: {_describe_params(session.parameters)}.")
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
    where = f" {db}" if db else " DB"
    term.say(
        f"Saved: {session.progress().answered} answers. Resume with: botorch-pref session run"
        f"{where} {session.name}"
    )
    return 0


def _show(term: _Terminal, session: Any, query: Any, progress: Any, renderer: Any) -> None:
    term.say()
    again = " (shown again)" if query.times_shown > 1 else ""
    term.say(f"Query {query.number}{again} - {_describe_progress(progress)}")
    term.say(_describe_best(session.best()))
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
    from botorch_pref.sessions.store import QueryNotPendingError, SessionError

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
                term.say(f"Undid your last answer ({undone.kind}); that query is shown again.")
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
        except SessionError as err:
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
