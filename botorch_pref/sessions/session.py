"""Sessions: preferential BO with a person, every answer stored before the next query.

A :class:`Session` is a named study in a session database (see
:mod:`botorch_pref.sessions.store`). The stored answers are the source of truth: the
:class:`~botorch_pref.loop.PreferenceOptimizer` is rebuilt from them by replaying the standing
(not retracted) ``winner`` and ``ranking`` answers in the order they were committed, with the
session's settings and seed, so a resumed session has the same data and hyperparameters as the
process that recorded them, and the same next query.

A ``tie`` ("no preference") answer to a pair is given to the optimiser as well when the session
models ties (``ties=True``, the default for new sessions with ``q = 2``: the pair likelihood is
then ordinal, with a fitted threshold); an answer about ``q > 2`` options is a choice among them
(or a Plackett-Luce ranking), not a set of pairs. ``skip`` answers, ties in sessions that do not
model them (older sessions, ``q > 2``), are recorded with their times but not given to the
optimiser. A query with a standing skip or tie is never proposed twice: uniformly random options
(seeded by the session's seed and the number of answers) are asked instead.

Example:
    >>> s = Session.create("study.db", "alice", {"sweetness": (0, 10), "sourness": (0, 5)},
    ...                    strategy="eubo", seed=0)
    >>> query = s.ask()                 # stored as pending before it is returned
    >>> s.answer(query.id, winner=1)    # committed before ask() can make the next query
    >>> s.best()
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import torch

from botorch_pref.loop import STRATEGIES, PreferenceOptimizer
from botorch_pref.sessions import exchange
from botorch_pref.sessions.store import (
    SCHEMA_VERSION,
    AnswerRow,
    QueryRow,
    SessionError,
    SessionRow,
    Store,
    check_answer,
)

__all__ = ["Answer", "Best", "HistoryEntry", "Progress", "Query", "Session", "SessionSummary"]

#: Optimiser settings a session stores (keyword arguments of PreferenceOptimizer).
OPTIMIZER_OPTIONS = (
    "n_initial",
    "model",
    "refit_every",
    "refit_all_until",
    "num_restarts",
    "raw_samples",
    "mc_samples",
    "answers",
    "ties",
    "champion_variant",
)
_RESERVED_NAMES = frozenset(exchange.CSV_COLUMNS)
_STREAM_FALLBACK = 0x5E55


@dataclass(frozen=True)
class Query:
    """A query shown to the person.

    Attributes:
        id: The id to answer it with.
        number: Its position in the session, from 1.
        names: The parameter names.
        options: ``q`` designs, each a tuple of parameter values in the user's units.
        source: ``"ask"`` or ``"import"``.
        created_at: When it was generated (UTC, ISO 8601).
        shown_at: When it was last shown (``ask`` returned it), or ``None``.
        times_shown: How many times ``ask`` returned it (more than one after a restart).
    """

    id: int
    number: int
    names: tuple[str, ...]
    options: tuple[tuple[float, ...], ...]
    source: str
    created_at: str
    shown_at: str | None
    times_shown: int

    @property
    def q(self) -> int:
        """The number of options."""
        return len(self.options)

    def option(self, i: int) -> dict[str, float]:
        """Option ``i`` as ``{name: value}``.

        Args:
            i: Option index.

        Returns:
            The parameter values by name.
        """
        return dict(zip(self.names, self.options[i], strict=True))

    def as_dicts(self) -> list[dict[str, float]]:
        """All options as ``{name: value}`` dicts.

        Returns:
            One dict per option.
        """
        return [self.option(i) for i in range(self.q)]

    def tensor(self) -> torch.Tensor:
        """The options as a ``q x d`` float64 tensor in the user's units.

        Returns:
            The tensor.
        """
        return torch.tensor(self.options, dtype=torch.float64)


@dataclass(frozen=True)
class Answer:
    """A recorded answer.

    Attributes:
        id: Its id.
        query_id: The query it answers.
        kind: ``"winner"``, ``"ranking"``, ``"skip"`` or ``"tie"``.
        winner: Index of the preferred option (for ``winner`` and ``ranking``), else ``None``.
        ranking: The ranking, best first, for ``ranking``, else ``None``.
        answered_at: When it was committed (UTC, ISO 8601).
        response_s: Seconds from the query being shown to the answer, or ``None``.
        retracted_at: When it was undone, or ``None`` while it stands.
    """

    id: int
    query_id: int
    kind: str
    winner: int | None
    ranking: tuple[int, ...] | None
    answered_at: str
    response_s: float | None
    retracted_at: str | None

    @classmethod
    def from_row(cls, row: AnswerRow) -> Answer:
        """Build from a store row.

        Args:
            row: The row.

        Returns:
            The answer.
        """
        return cls(
            row.id,
            row.query_id,
            row.kind,
            row.winner,
            row.ranking,
            row.answered_at,
            row.response_s,
            row.retracted_at,
        )


@dataclass(frozen=True)
class HistoryEntry:
    """An answer with the query it answers.

    Attributes:
        answer: The answer.
        query: The query.
    """

    answer: Answer
    query: Query


@dataclass(frozen=True)
class Best:
    """The recommendation: the compared design with the highest posterior mean utility.

    Attributes:
        x: The design, ``{name: value}`` in the user's units.
        mean: Posterior mean of its utility.
        std: Posterior standard deviation of its utility.
        index: Its row in the optimiser's ``datapoints``.
    """

    x: dict[str, float]
    mean: float
    std: float
    index: int


@dataclass(frozen=True)
class Progress:
    """Counts of a session.

    Attributes:
        answered: Standing answers to asked queries (choices, skips and ties).
        choices: Standing ``winner`` and ``ranking`` answers (imported ones included); the
            optimiser learns from these.
        skips: Standing skips (imported ones included).
        ties: Standing "no preference" answers (imported ones included).
        imported: Standing imported answers.
        retracted: Undone answers.
        queries: Queries stored (asked, imported, withdrawn).
        pending: Whether a query awaits an answer.
        budget: The planned number of answers, or ``None``.
    """

    answered: int
    choices: int
    skips: int
    ties: int
    imported: int
    retracted: int
    queries: int
    pending: bool
    budget: int | None

    @property
    def done(self) -> bool:
        """Whether the budget is reached."""
        return self.budget is not None and self.answered >= self.budget


@dataclass(frozen=True)
class SessionSummary:
    """A line of :meth:`Session.list`.

    Attributes:
        name: Session name.
        strategy: Its strategy.
        q: Options per query.
        parameters: Parameter names.
        progress: Its counts.
        created_at: Creation time.
    """

    name: str
    strategy: str
    q: int
    parameters: tuple[str, ...]
    progress: Progress
    created_at: str


def normalize_parameters(
    parameters: Mapping[str, Sequence[float]] | Sequence[Sequence[Any]],
) -> list[tuple[str, float, float]]:
    """Check parameters given as ``[(name, low, high), ...]`` or ``{name: (low, high)}``.

    Args:
        parameters: The parameters and their bounds in the user's units.

    Returns:
        ``(name, low, high)`` triples.

    Raises:
        SessionError: For no parameters, a bad or repeated name, or bad bounds.
    """
    if isinstance(parameters, Mapping):
        items = [(name, *_pair(name, b)) for name, b in parameters.items()]
    else:
        items = []
        for p in parameters:
            if isinstance(p, (str, bytes)) or not isinstance(p, Sequence) or len(p) != 3:
                raise SessionError(f"A parameter is (name, low, high), got {p!r}.")
            items.append((p[0], *_pair(p[0], p[1:])))
    if not items:
        raise SessionError("A session needs at least one parameter.")
    names = [n for n, _, _ in items]
    for name in names:
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise SessionError(f"Parameter names must be non-empty strings, got {name!r}.")
        if name in _RESERVED_NAMES:
            raise SessionError(
                f"{name!r} is a column of the CSV export; rename the parameter "
                f"(reserved: {', '.join(sorted(_RESERVED_NAMES))})."
            )
    if len(set(names)) != len(names):
        raise SessionError(f"Parameter names repeat: {names}.")
    return items


def _pair(name: Any, bounds: Any) -> tuple[float, float]:
    try:
        low, high = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise SessionError(
            f"Parameter {name!r}: bounds must be (low, high), got {bounds!r}."
        ) from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise SessionError(f"Parameter {name!r}: need finite bounds low < high, got {bounds!r}.")
    return low, high


class Session:
    """A named preferential-BO study stored in an SQLite file.

    Use :meth:`create` or :meth:`open`; a session holds one database connection (close it, or use
    it as a context manager) and is not meant to be shared between threads. Several processes
    may open the same session: each answer is committed only if its query is still pending.
    """

    def __init__(self, store: Store, row: SessionRow) -> None:
        self._store = store
        self._row = row
        self._opt: PreferenceOptimizer | None = None
        self._applied: list[int] = []

    # ------------------------------------------------------------ construction
    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        name: str,
        parameters: Mapping[str, Sequence[float]] | Sequence[Sequence[Any]],
        strategy: str = "eubo",
        q: int = 2,
        seed: int | None = None,
        *,
        budget: int | None = None,
        timeout: float = 30.0,
        **optimizer_options: Any,
    ) -> Session:
        """Create a session (and the database file if needed).

        Args:
            path: The database file.
            name: The session's name, unique in the file (e.g. a participant id).
            parameters: ``[(name, low, high), ...]`` or ``{name: (low, high)}``, user units.
            strategy: One of ``"eubo"``, ``"qeubo"``, ``"champion-challenger"``, ``"random"``.
            q: Options per query.
            seed: Seed of the optimiser; ``None`` draws one (it is stored).
            budget: The planned number of answers (shown as progress), or ``None``.
            timeout: Seconds to wait for another process's write lock.
            **optimizer_options: Other ``PreferenceOptimizer`` settings (``n_initial``,
                ``model`` (a name), ``refit_every``, ``refit_all_until``, ``num_restarts``,
                ``raw_samples``, ``mc_samples``, ``answers``, ``ties``, ``champion_variant``).
                A new session with ``q = 2`` and a Laplace model models "no preference"
                answers (``ties=True``) unless told otherwise; with ``q > 2`` an answer is a
                choice among the options (``answers="choice"``, the optimiser's default).

        Returns:
            The open session.

        Raises:
            SessionError: For bad settings, an existing name, or a file that is not a session
                database (subclasses say which).
        """
        if not isinstance(name, str) or not name.strip():
            raise SessionError(f"A session name is a non-empty string, got {name!r}.")
        params = normalize_parameters(parameters)
        unknown = sorted(set(optimizer_options) - set(OPTIMIZER_OPTIONS))
        if unknown:
            raise SessionError(
                f"Unknown optimiser settings {unknown}; known: {', '.join(OPTIMIZER_OPTIONS)}."
            )
        if not isinstance(optimizer_options.get("model", "laplace"), str):
            raise SessionError("model must be a name (a factory function cannot be stored).")
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int) or budget < 1
        ):
            raise SessionError(f"budget must be a positive integer, got {budget!r}.")
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1, dtype=np.uint64)[0] >> 2)
        if (
            "ties" not in optimizer_options
            and q == 2
            and optimizer_options.get("model", "laplace") != "pairwisegp"
            and optimizer_options.get("answers", "auto") != "choice"
        ):
            optimizer_options["ties"] = True
        bounds = [[lo for _, lo, _ in params], [hi for _, _, hi in params]]
        try:
            opt = PreferenceOptimizer(
                bounds, strategy=strategy, q=q, seed=seed, **optimizer_options
            )
        except (TypeError, ValueError) as err:
            raise SessionError(f"Bad optimiser settings: {err}") from None
        from botorch_pref import __version__

        store = Store(path, create=True, timeout=timeout)
        try:
            row = store.create_session(
                name,
                params,
                opt.strategy,
                opt.q,
                opt.seed,
                dict(optimizer_options),
                budget,
                __version__,
            )
        except BaseException:
            store.close()
            raise
        return cls(store, row)

    @classmethod
    def open(cls, path: str | os.PathLike[str], name: str, *, timeout: float = 30.0) -> Session:
        """Open an existing session.

        Args:
            path: The database file.
            name: The session's name.
            timeout: Seconds to wait for another process's write lock.

        Returns:
            The session.

        Raises:
            SessionNotFoundError: For a missing file or an unknown name.
            SchemaVersionError: For a file written by a newer schema.
            CorruptDatabaseError: For a damaged file or one that is not a session database.
        """
        store = Store(path, timeout=timeout)
        try:
            row = store.get_session(name)
            if row.strategy not in STRATEGIES:
                raise SessionError(
                    f"Session {name!r} uses strategy {row.strategy!r}, unknown to this version."
                )
        except BaseException:
            store.close()
            raise
        return cls(store, row)

    @staticmethod
    def list(path: str | os.PathLike[str]) -> list[SessionSummary]:
        """The sessions in a database file.

        Args:
            path: The database file.

        Returns:
            One summary per session, in creation order.
        """
        with Store(path) as store:
            out = []
            for name in store.session_names():
                row = store.get_session(name)
                out.append(
                    SessionSummary(
                        row.name,
                        row.strategy,
                        row.q,
                        tuple(p[0] for p in row.parameters),
                        _progress(store.session_counts(row.id), row.budget),
                        row.created_at,
                    )
                )
        return out

    def close(self) -> None:
        """Close the database connection."""
        self._store.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------- properties
    @property
    def name(self) -> str:
        """The session's name."""
        return self._row.name

    @property
    def path(self) -> Path:
        """The database file."""
        return self._store.path

    @property
    def parameters(self) -> list[tuple[str, float, float]]:
        """``(name, low, high)`` triples in the user's units."""
        return list(self._row.parameters)

    @property
    def names(self) -> tuple[str, ...]:
        """The parameter names."""
        return tuple(p[0] for p in self._row.parameters)

    @property
    def bounds(self) -> list[list[float]]:
        """``[[lows...], [highs...]]`` in the user's units."""
        return [[p[1] for p in self._row.parameters], [p[2] for p in self._row.parameters]]

    @property
    def strategy(self) -> str:
        """The optimiser's strategy."""
        return self._row.strategy

    @property
    def q(self) -> int:
        """Options per asked query."""
        return self._row.q

    @property
    def seed(self) -> int:
        """The optimiser's seed."""
        return self._row.seed

    @property
    def budget(self) -> int | None:
        """The planned number of answers, or ``None``."""
        return self._row.budget

    @property
    def settings(self) -> dict[str, Any]:
        """Every ``PreferenceOptimizer`` argument the session uses (besides ``bounds``)."""
        return {"strategy": self.strategy, "q": self.q, "seed": self.seed, **self._row.options}

    @property
    def package_version(self) -> str:
        """The version of botorch-pref that created the session."""
        return self._row.package_version

    @property
    def store(self) -> Store:
        """The underlying :class:`~botorch_pref.sessions.store.Store`."""
        return self._store

    # ----------------------------------------------------------------- queries
    def _query(self, row: QueryRow) -> Query:
        return Query(
            row.id,
            row.number,
            self.names,
            row.designs,
            row.source,
            row.created_at,
            row.last_shown_at,
            row.times_shown,
        )

    def pending(self) -> Query | None:
        """The query awaiting an answer, without recording a show.

        Returns:
            The query, or ``None``.
        """
        row = self._store.pending_query(self._row.id)
        return None if row is None else self._query(row)

    def ask(self) -> Query:
        """The query to show now: the pending one if any, else a new one (stored first).

        The time it is returned is recorded as its show time (response times count from it). A
        new query is generated and stored under the database's write lock, so processes asking
        at once all get the same query.

        Returns:
            The query.
        """
        row = self._store.show_pending(self._row.id)
        if row is None:
            self._refresh()  # bring the model up to date before taking the write lock
            row = self._store.show_or_add_query(self._row.id, self._next_designs)
        return self._query(row)

    def _next_designs(self) -> list[list[float]]:
        """The optimiser's next query, or random options if that query got no usable answer."""
        answers = self._store.answers(self._row.id, standing_only=True)
        queries = {q.id: q for q in self._store.queries(self._row.id)}
        opt = self._sync(answers, queries)
        designs = opt.ask().tolist()
        unusable = {
            tuple(map(tuple, queries[a.query_id].designs))
            for a in answers
            if a.kind in ("skip", "tie")
        }
        if tuple(map(tuple, designs)) in unusable:
            designs = self._random_designs(len(opt.history), len(unusable))
        return designs

    def _random_designs(self, n_choices: int, n_unusable: int) -> list[list[float]]:
        """``q`` uniform designs, seeded by the seed and the numbers of answers."""
        ss = np.random.SeedSequence([self.seed, n_choices, n_unusable, _STREAM_FALLBACK])
        u = np.random.default_rng(ss).random((self.q, len(self.names)))
        low, high = (np.asarray(b) for b in self.bounds)
        return (low + u * (high - low)).tolist()

    # ------------------------------------------------------------------- model
    def _sync(
        self, answers: Sequence[AnswerRow], queries: Mapping[int, QueryRow]
    ) -> PreferenceOptimizer:
        """Bring the optimiser up to the standing choices, rebuilding it after a retraction."""
        ties = bool(self.settings.get("ties"))
        choices = [
            a
            for a in answers
            if a.kind in ("winner", "ranking")
            or (ties and a.kind == "tie" and len(queries[a.query_id].designs) == 2)
        ]
        ids = [a.id for a in choices]
        if self._opt is None or ids[: len(self._applied)] != self._applied:
            self._opt = PreferenceOptimizer(self.bounds, **self.settings)
            self._applied = []
        for a in choices[len(self._applied) :]:
            designs = [list(x) for x in queries[a.query_id].designs]
            try:
                if a.kind == "tie":
                    self._opt.add_comparison(designs, tie=True)
                elif a.kind == "ranking":
                    self._opt.add_comparison(designs, ranking=list(a.ranking))
                else:
                    self._opt.add_comparison(designs, a.winner)
            except ValueError as err:
                self._opt = None
                self._applied = []
                raise SessionError(f"Stored answer {a.id} cannot be replayed: {err}") from None
            self._applied.append(a.id)
        return self._opt

    @property
    def optimizer(self) -> PreferenceOptimizer:
        """The optimiser rebuilt from the standing answers (do not modify it)."""
        return self._refresh()

    def _refresh(self) -> PreferenceOptimizer:
        """Read the standing answers and bring the optimiser up to date with them."""
        answers = self._store.answers(self._row.id, standing_only=True)
        queries = {q.id: q for q in self._store.queries(self._row.id)}
        return self._sync(answers, queries)

    def best(self) -> Best | None:
        """The compared design with the highest posterior mean utility.

        Returns:
            The recommendation, or ``None`` before the first choice.
        """
        opt = self._refresh()
        if opt.model is None:
            return None
        rec = opt.best()
        return Best(
            dict(zip(self.names, rec.x.tolist(), strict=True)), rec.mean, rec.std, rec.index
        )

    # ----------------------------------------------------------------- answers
    def answer(
        self,
        query_id: int,
        winner: int | None = None,
        *,
        ranking: Sequence[int] | None = None,
        skip: bool = False,
        tie: bool = False,
    ) -> Answer:
        """Record the answer to the pending query (committed before this returns).

        Args:
            query_id: The query's id (:attr:`Query.id`).
            winner: Index of the preferred option.
            ranking: All options' indices, best first.
            skip: The person skipped the query.
            tie: The person has no preference.

        Returns:
            The stored answer.

        Raises:
            QueryNotPendingError: When the query is not pending (answered by another process,
                withdrawn or unknown); nothing is recorded.
            InvalidAnswerError: For no answer, several, or one out of range.
        """
        new = check_answer(self.q, winner=winner, ranking=ranking, skip=skip, tie=tie)
        return Answer.from_row(self._store.add_answer(self._row.id, query_id, new))

    def undo(self) -> Answer:
        """Retract the last standing answer to an asked query; its query is pending again.

        The retraction is recorded (nothing is deleted); the query that was pending is withdrawn.

        Returns:
            The retracted answer.

        Raises:
            SessionError: When there is nothing to undo.
        """
        return Answer.from_row(self._store.undo_last(self._row.id))

    def history(self, include_retracted: bool = True) -> list[HistoryEntry]:
        """Every answer with its query, in the order the answers were committed.

        Args:
            include_retracted: Include undone answers (their ``retracted_at`` is set).

        Returns:
            The entries.
        """
        queries = {q.id: q for q in self._store.queries(self._row.id)}
        answers = self._store.answers(self._row.id, standing_only=not include_retracted)
        return [HistoryEntry(Answer.from_row(a), self._query(queries[a.query_id])) for a in answers]

    def queries(self) -> list[Query]:
        """Every stored query (answered, pending, withdrawn, imported), in order.

        Returns:
            The queries.
        """
        return [self._query(q) for q in self._store.queries(self._row.id)]

    def progress(self) -> Progress:
        """Counts of answers and queries.

        Returns:
            The :class:`Progress`.
        """
        return _progress(self._store.session_counts(self._row.id), self.budget)

    # ------------------------------------------------------------ export/import
    def to_dict(self) -> dict[str, Any]:
        """Everything stored about the session (the JSON export).

        Returns:
            A JSON-serialisable dict.
        """
        pending = self._store.pending_query(self._row.id)
        return exchange.session_to_dict(
            self._row,
            self._store.queries(self._row.id),
            self._store.answers(self._row.id),
            None if pending is None else pending.id,
            SCHEMA_VERSION,
        )

    def export_json(self, out: str | os.PathLike[str] | TextIO) -> None:
        """Write the JSON export.

        Args:
            out: A path or a text stream.
        """
        with _opened(out) as f:
            exchange.write_json(self.to_dict(), f)

    def export_csv(self, out: str | os.PathLike[str] | TextIO) -> None:
        """Write the CSV export (one row per option of every answer).

        Args:
            out: A path or a text stream.
        """
        with _opened(out) as f:
            exchange.write_csv(
                self._row, self._store.queries(self._row.id), self._store.answers(self._row.id), f
            )

    def export(self, out: str | os.PathLike[str], fmt: str | None = None) -> None:
        """Write the CSV or JSON export to a file.

        Args:
            out: The file.
            fmt: ``"csv"`` or ``"json"``; default from the suffix.

        Raises:
            SessionError: For an unknown format.
        """
        fmt = (fmt or Path(out).suffix.lstrip(".")).lower()
        if fmt == "csv":
            self.export_csv(out)
        elif fmt == "json":
            self.export_json(out)
        else:
            raise SessionError(f"Export format must be csv or json, got {fmt!r}.")

    def import_comparisons(
        self, source: str | os.PathLike[str] | Iterable[Mapping[str, Any]], fmt: str | None = None
    ) -> int:
        """Add answered queries collected elsewhere (all or nothing).

        Imported ``winner`` and ``ranking`` answers feed the optimiser like asked ones; the
        pending query, if any, stays pending.

        Args:
            source: A CSV or JSON file (see :mod:`botorch_pref.sessions.exchange`), or a list of
                records ``{"options": ..., "winner": ...}``.
            fmt: ``"csv"`` or ``"json"`` for a file; default from the suffix.

        Returns:
            The number of comparisons imported.

        Raises:
            ImportFormatError: For a malformed source; nothing is imported.
            FileNotFoundError: For a missing file.
        """
        if isinstance(source, (str, os.PathLike)):
            records = exchange.read_comparisons(source, self.parameters, fmt)
        else:
            records = exchange.parse_comparisons(list(source), self.parameters)
        return len(self._store.import_comparisons(self._row.id, records))


def _progress(counts: Mapping[str, int], budget: int | None) -> Progress:
    return Progress(
        answered=counts["asked"],
        choices=counts["winner"] + counts["ranking"],
        skips=counts["skip"],
        ties=counts["tie"],
        imported=counts["imported"],
        retracted=counts["retracted"],
        queries=counts["queries"],
        pending=bool(counts["pending"]),
        budget=budget,
    )


def _opened(out: str | os.PathLike[str] | TextIO) -> Any:
    """A context manager giving a text stream: the stream itself, or the file opened for writing."""
    if isinstance(out, (str, os.PathLike)):
        return open(out, "w", encoding="utf-8", newline="")
    if isinstance(out, io.TextIOBase) or hasattr(out, "write"):
        return nullcontext(out)
    raise SessionError(f"Cannot write to {out!r}.")
