"""Sessions: preferential BO with a person, every answer stored before the next query.

A :class:`Session` is a named study in a session database (see
:mod:`botorch_pref.sessions.store`). The stored answers are the source of truth; the optimiser is
rebuilt from them (:mod:`botorch_pref.sessions.model`) with the session's settings, seed and
stored hyperparameters, so a resumed session has the same data, hyperparameters and pending query
as the process that recorded them, without refitting (later queries agree up to rounding).

A ``tie`` ("no preference") answer to a pair is given to the optimiser as well when the session
models ties (``ties=True``, the default for new sessions with ``q = 2``: the pair likelihood is
then ordinal, with a fitted threshold); an answer about ``q > 2`` options is a choice among them
(or a Plackett-Luce ranking), not a set of pairs. ``skip`` answers, ties in sessions that do not
model them (older sessions, ``q > 2``), are recorded with their times but not given to the
optimiser.

:meth:`Session.ask` reads the session once (one read transaction), generates a new query with no
lock held, then stores it in one short ``BEGIN IMMEDIATE`` transaction if the answers did not
change meanwhile (else it generates again): other sessions in the same file never wait for a
query to be generated, and processes asking one session at once all get the same query.
:meth:`Session.ask_and_recommend` does the same and gives the recommendation from that one
snapshot too, without reading the session again.

Example:
    >>> s = Session.create("study.db", "alice", {"sweetness": (0, 10), "sourness": (0, 5)},
    ...                    strategy="eubo", seed=0)
    >>> query = s.ask()                 # stored as pending before it is returned
    >>> s.answer(query.id, winner=1)    # committed before ask() can make the next query
    >>> s.best()
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from botorch_pref.loop import (
    STRATEGIES,
    Hyperparameters,
    PreferenceOptimizer,
    QueryRecord,
    Recommendation,
    validate_answer,
)
from botorch_pref.loop.answers import AnswerFormat
from botorch_pref.sessions import exchange, export
from botorch_pref.sessions.connection import Closing
from botorch_pref.sessions.errors import SessionError
from botorch_pref.sessions.model import NextQuery, Proposal, SessionModel
from botorch_pref.sessions.records import (
    HistoryEntry,
    Progress,
    Query,
    SessionRow,
    SessionState,
    SessionSummary,
    StoredAnswer,
    StoredRecommendation,
)
from botorch_pref.sessions.schema import SCHEMA_VERSION
from botorch_pref.sessions.settings import (
    check_name,
    check_settings,
    normalize_parameters,
    progress_from_counts,
)
from botorch_pref.sessions.store import Store

__all__ = ["ASK_ATTEMPTS", "Session", "Shown"]

#: How many times :meth:`Session.ask` generates a query with no lock held before it generates
#: one under the write lock (when another process keeps answering the same session meanwhile).
ASK_ATTEMPTS = 3


class Shown(NamedTuple):
    """A query shown now, with the recommendation from the answers it was shown after.

    Attributes:
        query: The query (pending, its show recorded).
        best: The compared design with the highest posterior mean after those answers, or
            ``None`` before the first choice.
    """

    query: Query
    best: Recommendation | None


def _read_only(path: str, doc: str) -> property:
    """A read-only property whose value is the session's dotted attribute ``path``."""
    return property(attrgetter(path), doc=doc)


class Session(Closing):
    """A named preferential-BO study stored in an SQLite file.

    Use :meth:`create` or :meth:`open`; a session holds one database connection (close it, or use
    it as a context manager) and is not meant to be shared between threads. Several processes
    may open the same session: each answer is committed only if its query is still pending.
    """

    def __init__(self, store: Store, row: SessionRow) -> None:
        self._store = store
        self._row = row
        self._model = SessionModel(row)

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
            timeout: Seconds to wait for another process's lock.
            **optimizer_options: Other ``PreferenceOptimizer`` settings, the names in
                :data:`~botorch_pref.sessions.settings.OPTIMIZER_OPTIONS` (``n_initial``,
                ``model`` (a name), ``kernel``, ``inference``,
                ``refit_every``, ``local_every``, ``lookahead_every``, ...).
                A new session with ``q = 2`` and a Laplace model models "no preference"
                answers (``ties=True``) unless told otherwise; with ``q > 2`` an answer is a
                choice among the options (``answers="choice"``, the optimiser's default).
                ``answers="graded", levels=k`` asks how much better a pair's winner is, on a
                scale of ``k`` levels (default 5: "A much better" .. "B much better", with
                "about the same" in the middle of an odd scale, which then models ties);
                ``ratings=k`` takes a rating of each option on ``k`` levels. Both are stored
                resolved, so the session resumes with the same scales.

        Returns:
            The open session.

        Raises:
            SessionError: For bad settings, an existing name, or a file that is not a session
                database (subclasses say which).
        """
        check_name(name)
        params = normalize_parameters(parameters)
        settings = check_settings(params, strategy, q, seed, budget, dict(optimizer_options))
        budget = None if budget is None else int(budget)  # checked: a numpy integer too
        from botorch_pref import __version__

        store = Store(path, create=True, timeout=timeout)
        try:
            row = store.create_session(name, params, settings, budget, __version__)
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
            timeout: Seconds to wait for another process's lock.

        Returns:
            The session.

        Raises:
            SessionNotFoundError: For a missing file or an unknown name.
            SchemaVersionError: For a file written by a newer schema.
            CorruptDatabaseError: For a damaged file or one that is not a session database.
        """
        store = Store(path, timeout=timeout)
        try:
            return cls.on_store(store, name)
        except BaseException:
            store.close()
            raise

    @classmethod
    def on_store(cls, store: Store, name: str) -> Session:
        """A session on an open store that the caller keeps (for many short uses of one file).

        Closing the session closes the store: a caller that keeps the store leaves the
        session unclosed.

        Args:
            store: The open store (the file was checked when it was opened).
            name: The session's name.

        Returns:
            The session.

        Raises:
            SessionNotFoundError: For an unknown name.
        """
        row = store.get_session(name)
        if row.strategy not in STRATEGIES:
            raise SessionError(
                f"Session {name!r} uses strategy {row.strategy!r}, unknown to this version."
            )
        return cls(store, row)

    @staticmethod
    def list(path: str | os.PathLike[str]) -> list[SessionSummary]:
        """The sessions in a database file (read in one transaction).

        Args:
            path: The database file.

        Returns:
            One summary per session, in creation order.
        """
        with Store(path) as store:
            return [
                SessionSummary(
                    row.name,
                    row.strategy,
                    row.q,
                    row.names,
                    progress_from_counts(counts, row.budget),
                    row.created_at,
                )
                for row, counts in store.summaries()
            ]

    def close(self) -> None:
        """Close the database connection."""
        self._store.close()

    # ------------------------------------------------------------- properties
    name = _read_only("_row.name", "The session's name (``str``).")
    path = _read_only("_store.path", "The database file (a ``Path``).")
    names = _read_only("_row.names", "The parameter names (a tuple of ``str``).")
    bounds = _read_only("_model.bounds", "``[[lows...], [highs...]]`` in the user's units.")
    strategy = _read_only("_row.strategy", "The optimiser's strategy (``str``).")
    q = _read_only("_row.q", "Options per asked query (``int``).")
    seed = _read_only("_row.seed", "The optimiser's seed (``int``).")
    budget = _read_only("_row.budget", "The planned number of answers, or ``None``.")
    levels = _read_only(
        "_row.levels",
        "The graded scale's number of levels of a pair's comparison, or ``None`` (binary).",
    )
    rating_levels = _read_only(
        "_row.rating_levels", "The rating scale's number of levels, or ``None`` (no ratings)."
    )
    settings = _read_only(
        "_model.settings",
        "Every ``PreferenceOptimizer`` argument the session uses (besides ``bounds``), a dict.",
    )
    package_version = _read_only(
        "_row.package_version", "The version of botorch-pref that created the session."
    )
    store = _read_only("_store", "The underlying :class:`~botorch_pref.sessions.store.Store`.")

    @property
    def parameters(self) -> list[tuple[str, float, float]]:
        """``(name, low, high)`` triples in the user's units."""
        return list(self._row.parameters)

    def state(self) -> SessionState:
        """Everything stored about the session, read in one transaction.

        Returns:
            The snapshot.
        """
        return self._store.state(self._row)

    # ----------------------------------------------------------------- queries
    def pending(self) -> Query | None:
        """The query awaiting an answer, without recording a show.

        It reads that query alone, not the session's whole history (:meth:`state`).

        Returns:
            The query, or ``None``.
        """
        return self._store.pending(self._row)

    def mark_shown(self) -> Query | None:
        """Record that the pending query is shown now (its response time counts from now);
        return it, or ``None`` (nothing written) when none is pending."""
        return self._store.show_query(self._row)

    def ask(self, state: SessionState | None = None) -> Query:
        """The query to show now: the pending one if any, else a new one (stored first).

        The time it is returned is recorded as its show time (response times count from it). A
        new query is generated from one snapshot with no lock held, then stored in one short
        transaction only if the answers are unchanged (else generated again); a query stored
        meanwhile by another process is returned instead, so processes asking at once all get
        the same query. Only when another process keeps answering this session faster than a
        query is generated, :data:`ASK_ATTEMPTS` times in a row, is the next query generated
        under the write lock, so that every process makes progress.

        Args:
            state: A snapshot just read (:meth:`state`), taken for the first attempt instead of
                reading one (the default); a later attempt reads its own.

        Returns:
            The query.
        """
        return self._ask(state)[0]

    def ask_and_recommend(self, state: SessionState | None = None) -> Shown:
        """:meth:`ask`, and the recommendation from the snapshot the query was shown from.

        The recommendation is the one stored with the last generated query when it is current
        (the one stored now with a new query, when there is one), else the model's (see
        :meth:`recommendation`): the session is not read again.

        Args:
            state: As for :meth:`ask`.

        Returns:
            The query and the recommendation.
        """
        query, used, made = self._ask(state)
        return Shown(query, self._recommendation(used, made))

    def _ask(
        self, state: SessionState | None
    ) -> tuple[Query, SessionState, StoredRecommendation | None]:
        """:meth:`ask`, with the snapshot the query was shown from and the recommendation
        stored with it when the query is new."""
        for _ in range(ASK_ATTEMPTS):
            state = self.state() if state is None else state
            shown, made = self._show(state)
            if shown is not None:
                return shown, state, made
            state = None  # the answers changed: the next attempt reads them
        with self._store.connection.write():
            state = self.state()
            shown, made = self._show(state)
        return shown, state, made

    def _show(self, state: SessionState) -> tuple[Query | None, StoredRecommendation | None]:
        """Show the pending query of ``state``, or generate one and store it if the answers
        did not change; with the recommendation stored with it."""
        if state.pending_id is not None:
            return self._store.show_query(self._row), None
        return self._store_next(state, self._model.next_query(state))

    def _store_next(
        self, state: SessionState, nxt: NextQuery
    ) -> tuple[Query | None, StoredRecommendation | None]:
        """Store ``nxt``, made from ``state``, if the answers did not change; show it."""
        shown = self._store.show_query(self._row, nxt.designs, state.version, nxt.fit, nxt.best)
        return shown, nxt.best

    def ask_proposed(self, state: SessionState, proposal: Proposal) -> Shown | None:
        """Store a query made for this session by a step shared with other sessions.

        The session's optimiser takes the step's fit (no fit of its own), and the query is
        stored with it and the recommendation, as :meth:`ask` stores its own, in one short
        transaction and only if the answers are still those of ``state``.

        Args:
            state: The snapshot the proposal was made from (see :meth:`replay_input`).
            proposal: The query and the fit.

        Returns:
            The stored query shown now with the recommendation (as
            :meth:`ask_and_recommend`), or ``None`` when ``state`` has a pending query or the
            answers changed since (then :meth:`ask` makes the query).
        """
        if state.pending_id is not None:
            return None
        shown, made = self._store_next(state, self._model.next_query(state, proposal))
        return None if shown is None else Shown(shown, self._recommendation(state, made))

    def replay_input(self, state: SessionState) -> tuple[list[QueryRecord], Hyperparameters | None]:
        """What another optimiser needs to reach this session's state before its next query.

        Args:
            state: A snapshot of the session.

        Returns:
            ``(records, warm)``: the loop's records of the standing choices, in order, and
            the latest stored fit before the last of them (the hyperparameters a refit after
            it starts from), or ``None``.
        """
        return self._model.records(state), self._model.warm_fit(state)

    # ------------------------------------------------------------------- model
    @property
    def optimizer(self) -> PreferenceOptimizer:
        """The optimiser rebuilt from the standing answers (do not modify it)."""
        return self._model.sync(self.state())

    def best(self) -> Recommendation | None:
        """The compared design with the highest posterior mean utility (builds the model).

        Returns:
            The recommendation, or ``None`` before the first choice.
        """
        return self._model.best(self.state())

    def stored_best(self) -> tuple[StoredRecommendation | None, int]:
        """The recommendation stored with the last generated query, without a model.

        Returns:
            ``(stored, n_choices)``: the stored recommendation (or ``None``) and the number of
            choices that stand now (the stored one is current when they are equal and its last
            choice still stands).
        """
        state = self.state()
        choices = self._model.choices(state)
        stored = state.recommendation if _stands(state.recommendation, choices) else None
        return stored, len(choices)

    def recommendation(self, state: SessionState | None = None) -> Recommendation | None:
        """The recommendation after the standing choices, built only when none is stored.

        It is the one stored with the last generated query when that is current (made after
        exactly the choices that stand), else :meth:`best` (which builds the model).

        Args:
            state: A snapshot (default: read one now).

        Returns:
            The recommendation, or ``None`` before the first choice.
        """
        return self._recommendation(self.state() if state is None else state, None)

    def _recommendation(
        self, state: SessionState, made: StoredRecommendation | None
    ) -> Recommendation | None:
        """:meth:`recommendation` from ``state``, or ``made`` (stored after ``state`` was read)
        when the stored one of ``state`` is not current and ``made`` is."""
        choices = self._model.choices(state)
        for stored in (state.recommendation, made):
            if stored is not None and stored.n_answers == len(choices) and _stands(stored, choices):
                return stored.recommendation
        return self._model.best(state) if choices else None

    # ----------------------------------------------------------------- answers
    def answer(
        self,
        query_id: int,
        winner: int | None = None,
        *,
        ranking: Sequence[int] | None = None,
        skip: bool = False,
        tie: bool = False,
        strength: int | None = None,
        ratings: Sequence[int] | None = None,
    ) -> StoredAnswer:
        """Record the answer to the pending query (committed before this returns).

        The answer is validated once, here (:func:`~botorch_pref.loop.validate_answer`, on
        the session's graded and rating scales; "no preference" is accepted about any number
        of options, and modelled only for pairs), and stored as that
        :class:`~botorch_pref.loop.Answer`.

        Args:
            query_id: The query's id (:attr:`Query.id`).
            winner: Index of the preferred option.
            ranking: All options' indices, best first.
            skip: The person skipped the query.
            tie: The person has no preference (on a graded scale: "about the same", its
                middle level; an even scale has none).
            strength: How much better the winner of a pair is, in a session with a graded
                scale of ``k`` levels (``answers="graded", levels=k``): ``1`` ("slightly")
                .. ``k // 2`` ("much"); ``None`` for "better" of unknown strength.
            ratings: One level ``0 .. k - 1`` per option (0 the worst), in the query's order,
                in a session with a rating scale (``ratings=k``): beside a winner, a ranking or
                "no preference", or alone.

        Returns:
            The stored answer.

        Raises:
            QueryNotPendingError: When the query is not pending (answered by another process,
                withdrawn or unknown); nothing is recorded.
            InvalidAnswerError: For no answer, several, one out of range, a strength or
                ratings the session has no scale for (or a strength for a tie or a skip), a
                strength or rating that is not an integer on its scale, or ratings of the
                wrong length; nothing is recorded.
        """
        row = self._row
        new = validate_answer(
            row.q,
            winner,
            ranking,
            skip=skip,
            tie=tie,
            strength=strength,
            ratings=ratings,
            pair_ties_only=False,
            levels=row.levels,
            rating_levels=row.rating_levels,
        )
        return self._store.add_answer(row, query_id, new)

    def undo(self) -> StoredAnswer:
        """Retract the last standing answer to an asked query; its query is pending again.

        The retraction is recorded (nothing is deleted); the query that was pending is withdrawn.

        Returns:
            The retracted answer.

        Raises:
            SessionError: When there is nothing to undo.
        """
        return self._store.undo_last(self._row)

    def history(self, include_retracted: bool = True) -> list[HistoryEntry]:
        """Every answer with its query, in the order the answers were committed.

        Args:
            include_retracted: Include undone answers (their ``retracted_at`` is set).

        Returns:
            The entries.
        """
        return self.state().history(include_retracted)

    def queries(self) -> list[Query]:
        """Every stored query (answered, pending, withdrawn, imported), in order.

        Returns:
            The queries.
        """
        return list(self.state().queries)

    def progress(self) -> Progress:
        """Counts of answers and queries (no model needed).

        Returns:
            The :class:`Progress`.
        """
        return progress_from_counts(self._store.counts(self._row.id), self.budget)

    # ------------------------------------------------------------ export/import
    def to_dict(self, state: SessionState | None = None) -> dict[str, Any]:
        """Everything stored about the session (the JSON export).

        Args:
            state: A snapshot to export (default: read one now).

        Returns:
            A JSON-serialisable dict.
        """
        return export.session_to_dict(self._row, state or self.state(), SCHEMA_VERSION)

    def export_json(self, out: str | os.PathLike[str] | TextIO) -> int:
        """Write the JSON export, :meth:`to_dict` of one snapshot (to a path: atomically).

        Args:
            out: A path or a text stream.

        Returns:
            The number of answers written.
        """
        return self._export(out, "json")

    def export_csv(self, out: str | os.PathLike[str] | TextIO) -> int:
        """Write the CSV export, one row per option of every answer; otherwise as
        :meth:`export_json` (to a path: atomically; returns the number of answers written)."""
        return self._export(out, "csv")

    def _export(self, out: str | os.PathLike[str] | TextIO, fmt: str) -> int:
        """Write one snapshot as ``fmt`` to a path (atomically) or a text stream."""
        state = self.state()
        if fmt == "json":
            write = partial(export.write_json, self.to_dict(state))
        else:
            write = partial(export.write_csv, self._row, state)
        export.write_to(out, write)
        return len(state.answers)

    def export(self, out: str | os.PathLike[str], fmt: str | None = None) -> int:
        """Write the CSV or JSON export to a file (atomically).

        Args:
            out: The file.
            fmt: ``"csv"`` or ``"json"``; default from the suffix.

        Returns:
            The number of answers written.

        Raises:
            SessionError: For an unknown format.
            OSError: When the file cannot be written (a previous file is left intact).
        """
        fmt = (fmt or Path(out).suffix.lstrip(".")).lower()
        if fmt == "csv":
            return self.export_csv(out)
        if fmt == "json":
            return self.export_json(out)
        raise SessionError(f"Export format must be csv or json, got {fmt!r}.")

    def import_comparisons(
        self,
        source: str | os.PathLike[str] | Mapping[str, Any] | Iterable[Mapping[str, Any]],
        fmt: str | None = None,
    ) -> int:
        """Add answered queries collected elsewhere (all or nothing).

        Imported ``winner`` and ``ranking`` answers feed the optimiser like asked ones; the
        pending query, if any, stays pending.

        Args:
            source: A CSV or JSON file (see :mod:`botorch_pref.sessions.exchange`), a list of
                records ``{"options": ..., "winner": ...}``, ``{"comparisons": [...]}`` or a
                session's :meth:`to_dict`.
            fmt: ``"csv"`` or ``"json"`` for a file; default from the suffix.

        Returns:
            The number of comparisons imported.

        Raises:
            ImportFormatError: For a malformed source; nothing is imported.
            FileNotFoundError: For a missing file.
        """
        scales = AnswerFormat(levels=self.levels, ratings=self.rating_levels)
        if isinstance(source, (str, os.PathLike)):
            records = exchange.read_comparisons(source, self.parameters, fmt, scales)
        else:  # a mapping is a whole export or {"comparisons": [...]}, not a list of keys
            data = source if isinstance(source, Mapping) else list(source)
            records = exchange.parse_comparisons(data, self.parameters, scales)
        return len(self._store.import_comparisons(self._row, records))


def _stands(stored: StoredRecommendation | None, choices: Sequence[StoredAnswer]) -> bool:
    """Whether a stored recommendation was made after a prefix of ``choices`` (all still stand)."""
    return (
        stored is not None
        and stored.n_answers <= len(choices)
        and choices[stored.n_answers - 1].id == stored.last_answer_id
    )
