"""The ``botorch-pref session`` command.

Examples::

    botorch-pref session create study.db alice --param sweetness:0:10 --param sourness:0:5 \\
        --strategy eubo --seed 0 --budget 30 --question "Which drink do you prefer?"
    botorch-pref session create study.db bob --param sweetness:0:10 --answers graded \
        --levels 5 --ratings 3                           # "how much better", and ratings
    botorch-pref session run study.db alice            # answer queries; q quits, run resumes
    botorch-pref session run study.db alice --text-renderer mypkg.show:describe
    botorch-pref session status study.db alice
    botorch-pref session export study.db alice -o alice.csv
    botorch-pref session export-all study.db -o study.csv   # every session, one file
    botorch-pref session import study.db alice earlier.json
    botorch-pref session list study.db
    botorch-pref session links study.db --base-url https://study.example.org --csv links.csv
    botorch-pref session rotate study.db alice         # a new answer link; the old one is refused
    botorch-pref session revoke study.db alice         # no link opens the session any more

Two kinds of renderer, two names: ``--renderer`` (``create``, and ``serve``) names the function
that draws an option on the answer page, ``function(values: dict) -> picture, sound or text``;
``--text-renderer`` (``run``) names the function that prints a query in the terminal,
``function(query) -> str``.

Answer links (``create``, ``links``, ``rotate``) are rebuilt from the link key beside the
database (``study.db.key``, see :mod:`botorch_pref.sessions.answer_links`); the database stores only
their hashes.

``run`` is the interactive loop of :mod:`botorch_pref.sessions.terminal`. Every error a person
can cause (a bad name, a damaged file, an unwritable export path) ends the command with a
one-line message on standard error and exit status 2; nothing is written to the database then.

Each sub-command is one function ``cmd_<name>`` of the parsed arguments (and, for those taking
``DB NAME``, of the open session) that prints its report and returns the exit status.
"""

from __future__ import annotations

import argparse
import functools
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from botorch_pref.runtime import positive_int
from botorch_pref.sessions.answer_links import DEFAULT_PROMPT, link_session, page_settings
from botorch_pref.sessions.errors import one_line
from botorch_pref.sessions.link_commands import (
    add_base_url,
    base_url,
    cmd_links,
    cmd_revoke,
    cmd_rotate,
)
from botorch_pref.sessions.settings import MAX_TEXT
from botorch_pref.sessions.terminal import (
    Command,
    describe_best,
    describe_params,
    describe_progress,
    describe_scales,
    format_options,
    indent,
    load_renderer,
    parse_command,
    run_loop,
)

__all__ = [
    "Command",
    "add_arguments",
    "format_options",
    "load_renderer",
    "parse_command",
    "run_loop",
]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` that shows each option's default (none for options without one)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default == []:
            return action.help
        return super()._get_help_string(action)


#: The model names ``session create --model`` takes, each explained in its ``--help``.
MODELS = {
    "laplace": "the package's preference GP (PairwiseLaplaceGP), models 'no preference' "
    "answers and choices among q options",
    "laplace-box": "the same GP with BoTorch PairwiseGP's flat outputscale prior",
    "pairwisegp": "BoTorch's own PairwiseGP, pairs only (for comparison with BoTorch)",
}


def add_arguments(session: argparse.ArgumentParser) -> None:
    """Add the sub-commands of ``botorch-pref session`` to its parser."""
    session.formatter_class = HelpFormatter
    sub = session.add_subparsers(dest="session_command", metavar="SUBCOMMAND")
    sub.required = True
    _add_create(sub)
    run = _add(
        sub,
        "run",
        _with_session(cmd_run),
        "answer queries in the terminal",
        description="Show queries one by one and record the answers. Keys: a/b (or 1..q) "
        "pick, s skip, t no preference, u undo, q quit, ? help. A graded study then asks how "
        "much better on its scale, a rated one for a rating of each option.",
    )
    run.add_argument(
        "--text-renderer",
        metavar="MODULE:FUNCTION",
        help="function(query) -> str printed under each query (module or file.py path); "
        "not the answer page's --renderer",
    )
    run.add_argument("--max-answers", type=positive_int, help="stop after this many answers")
    status_help = "show a session's progress, pending query and best"
    _add(sub, "status", _with_session(cmd_status), status_help)
    ex = _add(sub, "export", _with_session(cmd_export), "export a session to CSV or JSON")
    ex.add_argument("-o", "--output", help="output file (default: standard output)")
    ex.add_argument("--format", choices=("csv", "json"), help="default: from the suffix, else json")
    ea = _add(
        sub,
        "export-all",
        cmd_export_all,
        "export every session of a database to one CSV or JSON file",
        positionals=("db",),
    )
    ea.add_argument("-o", "--output", help="output file (default: standard output)")
    ea.add_argument("--format", choices=("csv", "json"), help="default: from the suffix, else csv")
    import_help = "import comparisons collected elsewhere (CSV or JSON)"
    im = _add(sub, "import", _with_session(cmd_import), import_help)
    im.add_argument("file", help="a session export or a file of comparisons")
    im.add_argument("--format", choices=("csv", "json"), help="default: from the suffix")
    _add(sub, "list", cmd_list, "list the sessions in a database", positionals=("db",))
    links = _add(
        sub,
        "links",
        cmd_links,
        "list every session's answer link (for a mail merge: --csv)",
        positionals=("db",),
    )
    add_base_url(links)
    links.add_argument(
        "--csv", metavar="FILE", help="write 'session,answer_url,status' rows there ('-': stdout)"
    )
    rotate = _add(sub, "rotate", cmd_rotate, "give a session a new answer link (old: refused)")
    add_base_url(rotate)
    _add(sub, "revoke", cmd_revoke, "withdraw a session's answer link (answers are kept)")


#: The help of the positional arguments the sub-commands share.
_POSITIONALS = {"db": "session database file", "name": "session name"}


def _add(
    sub: argparse._SubParsersAction,
    name: str,
    func: Callable[[argparse.Namespace], int],
    help: str,
    *,
    positionals: tuple[str, ...] = ("db", "name"),
    description: str | None = None,
) -> argparse.ArgumentParser:
    """A sub-command taking ``DB NAME`` (or the given ``positionals``) that runs ``func(args)``
    with its ``OSError`` s turned into one-line messages (:func:`_guarded`)."""
    parser = sub.add_parser(name, help=help, description=description, formatter_class=HelpFormatter)
    for positional in positionals:
        parser.add_argument(positional, help=_POSITIONALS[positional])
    parser.set_defaults(func=_guarded(func))
    return parser


def _with_session(func: Callable[..., int]) -> Callable[[argparse.Namespace], int]:
    """Open the session ``args.name`` in ``args.db`` for ``func(args, session)``."""

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        from botorch_pref.sessions.session import Session

        with Session.open(args.db, args.name) as s:
            return func(args, s)

    return run


def _guarded(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn an ``OSError`` (an unwritable path, a directory, a full disk) into one line, status 2.

    :class:`~botorch_pref.sessions.SessionError` and other ``ValueError`` s are reported by
    ``botorch-pref`` itself; their messages are made one line here.
    """

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except OSError as err:
            what = err.strerror or str(err)
            where = f": {err.filename!r}" if err.filename else ""
            print(f"botorch-pref: error: {one_line(what)}{where}", file=sys.stderr)
            return 2
        except ValueError as err:
            if "\n" in str(err):
                raise ValueError(one_line(err)) from None
            raise

    return run


def _add_create(sub: argparse._SubParsersAction) -> None:
    """``session create``: the parameters, the optimiser's settings and the answer page."""
    from botorch_pref.loop import STRATEGIES

    cr = _add(
        sub,
        "create",
        cmd_create,
        "create a session",
        description="Create a named session (and the database file if needed).",
    )
    cr.add_argument(
        "--param",
        action="append",
        required=True,
        metavar="NAME:LOW:HIGH",
        help="a parameter and its bounds in your units (repeat for each)",
    )
    cr.add_argument(
        "--strategy", choices=STRATEGIES, default="eubo", help="how the next query is chosen"
    )
    cr.add_argument("-q", "--q", type=int, default=2, help="options per query")
    cr.add_argument("--seed", type=int, default=None, help="default: drawn and stored")
    cr.add_argument(
        "--budget", type=int, default=None, help="planned number of answers (default: none)"
    )
    cr.add_argument(
        "--n-initial",
        type=int,
        default=None,
        help="random queries before the strategy's (default: the optimiser's, 2 per parameter)",
    )
    cr.add_argument(
        "--model",
        choices=tuple(MODELS),
        default=None,
        help="the preference model (default: laplace): "
        + "; ".join(f"{k}: {v}" for k, v in MODELS.items()),
    )
    _add_answer_options(cr)
    _add_page_options(cr)


def _add_answer_options(create: argparse.ArgumentParser) -> None:
    """The options of ``session create`` that say what an answer holds and how it is modelled."""
    answers = create.add_argument_group("the answers")
    answers.add_argument(
        "--answers",
        choices=("choice", "pairs", "graded"),
        default=None,
        help="q > 2 answers as a choice among the options (default) or as pairs; graded: a "
        "pair's winner says how much better, on a scale of --levels levels",
    )
    answers.add_argument(
        "--levels",
        type=int,
        default=None,
        metavar="K",
        help="the graded scale's levels, 'A much better' .. 'B much better' (odd K: 'about "
        "the same' in the middle; default with --answers graded: 5)",
    )
    answers.add_argument(
        "--ratings",
        type=int,
        default=None,
        metavar="K",
        help="people also rate each option on K levels, worst to best (default: no ratings)",
    )
    answers.add_argument(
        "--no-ties",
        action="store_true",
        help="record 'no preference' answers without modelling them (default for q = 2: model)",
    )


def _add_page_options(create: argparse.ArgumentParser) -> None:
    """The options of ``session create`` that set the session's answer page."""
    page = create.add_argument_group("the answer page (botorch-pref serve)")
    page.add_argument(
        "--question",
        default=None,
        help=f"the question above the options, at most {MAX_TEXT} characters (default: "
        f"{DEFAULT_PROMPT!r})",
    )
    page.add_argument(
        "--renderer",
        default=None,
        metavar="NAME|MODULE:FUNCTION",
        help="how the page draws an option: table, colour, or function(values: dict) -> "
        "picture/sound/text (serve must be started with the same --renderer); default: colour "
        "for colour parameters, else table",
    )
    page.add_argument(
        "--show-recommendation",
        action="store_true",
        help="participants see the current recommendation (default: only the experimenter, "
        "on the results page)",
    )
    add_base_url(create)


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


def _shell(*words: object) -> str:
    """``words`` as a shell reads them back (a name or path with spaces is quoted)."""
    return " ".join(shlex.quote(str(w)) for w in words)


def cmd_create(args: argparse.Namespace) -> int:
    """``session create``."""
    from botorch_pref.sessions.session import Session

    options: dict[str, Any] = {}
    if args.n_initial is not None:
        options["n_initial"] = args.n_initial
    if args.model is not None:
        options["model"] = args.model
    for name in ("answers", "levels", "ratings"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    if args.no_ties:
        options["ties"] = False
    params = [_parse_param(p) for p in args.param]
    base = base_url(args.base_url)
    # checked before anything is written
    prompt, renderer = page_settings(args.question, args.renderer)
    with Session.create(
        args.db, args.name, params, args.strategy, args.q, args.seed, budget=args.budget, **options
    ) as s:
        print(
            f"Created session {s.name!r} in {args.db}: {describe_params(s.parameters)}; "
            f"strategy {s.strategy}, q = {s.q}, seed {s.seed}{describe_scales(s)}."
        )
    record = link_session(args.db, args.name, question=prompt, renderer=renderer,
                          show_recommendation=args.show_recommendation)  # fmt: skip
    print(f"Answer link (botorch-pref serve {_shell(args.db)}): {base}/a/{record.token}")
    print(f"Start it with: botorch-pref session run {_shell(args.db, args.name)}")
    return 0


def cmd_export_all(args: argparse.Namespace) -> int:
    """``session export-all``: every session in one file (a file is replaced atomically)."""
    from botorch_pref.sessions.export import export_study

    fmt = args.format
    if fmt is None:
        suffix = Path(args.output).suffix.lower().lstrip(".") if args.output else ""
        fmt = suffix if suffix in ("csv", "json") else "csv"
    if not Path(args.db).is_file():
        raise FileNotFoundError(f"No session database {args.db!r}.")
    if args.output is None:
        export_study(args.db, sys.stdout, fmt)
    else:
        n = export_study(args.db, args.output, fmt)
        print(f"Exported {n} answers of every session in {args.db} to {args.output} ({fmt}).")
    return 0


def cmd_run(args: argparse.Namespace, s: Any) -> int:
    """``session run``: the interactive loop."""
    renderer = load_renderer(args.text_renderer) if args.text_renderer else None
    try:
        return run_loop(s, renderer=renderer, max_answers=args.max_answers, db=args.db)
    except KeyboardInterrupt:
        print(
            f"\nInterrupted. Every answer given is saved; resume with: botorch-pref "
            f"session run {_shell(args.db, s.name)}"
        )
        return 130


def cmd_status(args: argparse.Namespace, s: Any) -> int:
    """``session status`` (reads the database; builds no model)."""
    p = s.progress()
    print(f"Session {s.name!r} in {args.db}")
    print(f"  parameters: {describe_params(s.parameters)}")
    print(
        f"  strategy {s.strategy}, q = {s.q}, seed {s.seed}{describe_scales(s)}; created with "
        f"botorch-pref {s.package_version}"
    )
    print(f"  {describe_progress(p)}; {p.retracted} retracted, {p.imported} imported")
    pending = s.pending()
    if pending is None:
        print("  pending: none")
    else:
        print(f"  pending: query {pending.number} (id {pending.id})")
        print(indent(format_options(pending), "    "))
    stored, n_choices = s.stored_best()
    if stored is None:
        note = "" if n_choices == 0 else f" ({n_choices} choices; shown after the next query)"
        print(f"  best: none yet{note}")
    else:
        newer = n_choices - stored.n_answers
        note = f" (from {stored.n_answers} choices" + (f", {newer} newer)" if newer else ")")
        print(f"  {describe_best(stored.recommendation, s.names, note)}")
    return 0


def cmd_export(args: argparse.Namespace, s: Any) -> int:
    """``session export`` (a file is replaced atomically)."""
    fmt = args.format
    if fmt is None:
        suffix = Path(args.output).suffix.lower().lstrip(".") if args.output else ""
        fmt = suffix if suffix in ("csv", "json") else "json"
    if args.output is None:
        (s.export_csv if fmt == "csv" else s.export_json)(sys.stdout)
    else:
        n = s.export(args.output, fmt)
        print(f"Exported {n} answers of session {s.name!r} to {args.output} ({fmt}).")
    return 0


def cmd_import(args: argparse.Namespace, s: Any) -> int:
    """``session import``."""
    n = s.import_comparisons(args.file, args.format)
    print(f"Imported {n} comparisons into session {s.name!r}.")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``session list``."""
    from botorch_pref.sessions.session import Session

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
