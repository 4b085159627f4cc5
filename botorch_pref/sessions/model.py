"""The optimiser of a session, rebuilt from its stored answers and fits.

The stored answers are the source of truth. The optimiser is given the standing (not retracted)
``winner`` and ``ranking`` answers in the order they were committed, and the ``tie`` answers to
pairs when the session models ties (``ties=True``), through
:meth:`~botorch_pref.loop.PreferenceOptimizer.sync`: only the answers it does not hold yet are
added, and it is rebuilt when its history is no longer a prefix of them (after an undo).

Fitted hyperparameters are stored with the number of answers they were fitted to (see
:class:`~botorch_pref.sessions.records.StoredFit`); handing the latest matching fit to ``sync``
rebuilds a reopened session without refitting, with the same data and hyperparameters as the
process that recorded the answers; its pending query is the stored one, and the queries after
it agree with that process's up to rounding (the mode is found from another start: by up to
1e-8 in a Hartmann-6 run).

A query with a standing skip or tie is never proposed twice: uniformly random options (seeded by
the session's seed and the numbers of answers) are asked instead. Options count as the same when
they differ by at most :data:`SAME_OPTION_TOL` of each parameter's range, so a query a batched step
made (see :mod:`~botorch_pref.web.batching`) is not asked again when the session's own optimiser
reaches it up to rounding.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from botorch_pref.loop import Hyperparameters, PreferenceOptimizer, QueryRecord, Recommendation
from botorch_pref.sessions.errors import SessionError
from botorch_pref.sessions.records import (
    SessionRow,
    SessionState,
    StoredAnswer,
    StoredFit,
    StoredRecommendation,
)

__all__ = ["SAME_OPTION_TOL", "NextQuery", "Proposal", "SessionModel"]

_STREAM_FALLBACK = 0x5E55

#: Options differing by at most this fraction of each parameter's range are the same option.
SAME_OPTION_TOL = 1e-3


class NextQuery:
    """A generated query and what to store with it.

    Attributes:
        designs: ``q`` designs in user units.
        fit: The optimiser's latest fit, when it is not stored yet.
        best: The recommendation from the answers the query was generated from.
    """

    def __init__(
        self,
        designs: list[list[float]],
        fit: StoredFit | None,
        best: StoredRecommendation | None,
    ) -> None:
        self.designs = designs
        self.fit = fit
        self.best = best


class Proposal(NamedTuple):
    """A query proposed for the session by a step it shared with other sessions.

    Attributes:
        designs: ``q`` designs in user units.
        fit: The hyperparameters that step fitted after the standing choices, or ``None``
            when the schedule had no fit there.
        best: The recommendation of that step's model.
    """

    designs: list[list[float]]
    fit: Hyperparameters | None
    best: Recommendation


class SessionModel:
    """The session's :class:`~botorch_pref.loop.PreferenceOptimizer`, kept in step with the store.

    Args:
        row: The session.
    """

    def __init__(self, row: SessionRow) -> None:
        self._row = row
        self._opt: PreferenceOptimizer | None = None

    @property
    def settings(self) -> dict:
        """Every ``PreferenceOptimizer`` argument besides ``bounds``."""
        row = self._row
        return {"strategy": row.strategy, "q": row.q, "seed": row.seed, **row.options}

    @property
    def ties(self) -> bool:
        """Whether the session models "no preference" answers to pairs."""
        return bool(self._row.options.get("ties"))

    @property
    def bounds(self) -> list[list[float]]:
        """``[[lows...], [highs...]]`` in the user's units."""
        return [[p[1] for p in self._row.parameters], [p[2] for p in self._row.parameters]]

    def choices(self, state: SessionState) -> list[StoredAnswer]:
        """The standing answers the optimiser learns from, in commit order: winners, rankings
        (graded or not), ratings given alone, ties to pairs when the session models ties, and
        any tie whose ratings were given.

        Args:
            state: A snapshot of the session.

        Returns:
            The answers.
        """
        return [a for a in state.standing() if _learns(a, state, self.ties)]

    def sync(self, state: SessionState) -> PreferenceOptimizer:
        """Bring the optimiser to the standing choices of ``state`` (one prefix-checked sync).

        Args:
            state: A snapshot of the session.

        Returns:
            The optimiser (do not modify it).

        Raises:
            SessionError: When a stored answer cannot be replayed.
        """
        choices = self.choices(state)
        records = self.records(state, choices)
        fit = _matching_fit(state.fits, choices)
        try:
            return self._sync(records, fit)
        except ValueError:
            if fit is None:
                raise
        return self._sync(records, None)  # a stored fit that does not fit: refit instead

    def records(
        self, state: SessionState, choices: list[StoredAnswer] | None = None
    ) -> list[QueryRecord]:
        """The loop's records of the standing choices, in commit order.

        Args:
            state: A snapshot of the session.
            choices: Its :meth:`choices`, when already read.

        Returns:
            The records.
        """
        choices = self.choices(state) if choices is None else choices
        return [_record(a, state, self.ties) for a in choices]

    def warm_fit(self, state: SessionState) -> Hyperparameters | None:
        """The stored fit the optimiser holds before the last standing choice.

        Args:
            state: A snapshot of the session.

        Returns:
            The latest stored fit matching the choices before the last one, or ``None``.
        """
        return _matching_fit(state.fits, self.choices(state)[:-1])

    def _sync(self, records: list[QueryRecord], fit: Hyperparameters | None) -> PreferenceOptimizer:
        if self._opt is not None and fit is not None and _misses(self._opt, fit):
            self._opt = None  # it fitted answers it holds otherwise than the stored fit says
        if self._opt is None:
            self._opt = PreferenceOptimizer(self.bounds, **self.settings)
        try:
            self._opt.sync(records, hyperparameters=fit)
        except ValueError as err:
            self._opt = None
            if fit is not None:
                raise
            raise SessionError(f"The stored answers cannot be replayed: {err}") from None
        return self._opt

    def best(self, state: SessionState) -> Recommendation | None:
        """The compared design with the highest posterior mean, or ``None`` before a choice.

        Args:
            state: A snapshot of the session.

        Returns:
            The recommendation.
        """
        opt = self.sync(state)
        return None if opt.model is None else opt.best()

    def next_query(self, state: SessionState, proposal: Proposal | None = None) -> NextQuery:
        """The optimiser's next query, or random options if that query got no usable answer.

        Args:
            state: A snapshot of the session without a pending query.
            proposal: The query, fit and recommendation a step shared with other sessions made
                from ``state``, used instead of the optimiser's own (the optimiser is left as
                it is; it catches up from the stored fit when it is next needed).

        Returns:
            The designs, with the fit and the recommendation to store.
        """
        choices = self.choices(state)
        if proposal is None:
            opt = self.sync(state)
            designs = opt.ask().tolist()
            fit, rec = opt.hyperparameters, None if opt.model is None else opt.best()
        else:
            designs, fit, rec = proposal.designs, proposal.fit, proposal.best
        unusable = {
            state.query(a.query_id).options
            for a in state.standing()
            if a.answer.kind in ("skip", "tie")
        }
        if self._repeats(designs, unusable):
            designs = self._random_designs(len(choices), len(unusable))
        return NextQuery(designs, self._new_fit(fit, state, choices), self._best(rec, choices))

    def _new_fit(
        self, h: Hyperparameters | None, state: SessionState, choices: list[StoredAnswer]
    ) -> StoredFit | None:
        if h is None or not 1 <= h.n_answers <= len(choices):
            return None
        key = (h.n_answers, choices[h.n_answers - 1].id)
        if any((f.n_answers, f.last_answer_id) == key for f in state.fits):
            return None
        return StoredFit(*key, h.to_dict())

    def _best(
        self, rec: Recommendation | None, choices: list[StoredAnswer]
    ) -> StoredRecommendation | None:
        if rec is None or not choices:
            return None
        return StoredRecommendation(len(choices), choices[-1].id, rec)

    def _repeats(self, designs: list[list[float]], unusable: set[tuple]) -> bool:
        """Whether ``designs`` are the options of an unusable query, up to rounding."""
        x = np.asarray(designs, dtype=np.float64)
        low, high = (np.asarray(b, dtype=np.float64) for b in self.bounds)
        tol = SAME_OPTION_TOL * (high - low)
        for options in unusable:
            other = np.asarray(options, dtype=np.float64)
            if other.shape == x.shape and bool(np.all(np.abs(other - x) <= tol)):
                return True
        return False

    def _random_designs(self, n_choices: int, n_unusable: int) -> list[list[float]]:
        """``q`` uniform designs, seeded by the seed and the numbers of answers."""
        ss = np.random.SeedSequence([self._row.seed, n_choices, n_unusable, _STREAM_FALLBACK])
        u = np.random.default_rng(ss).random((self._row.q, len(self._row.parameters)))
        low, high = (np.asarray(b) for b in self.bounds)
        return (low + u * (high - low)).tolist()


def _learns(stored: StoredAnswer, state: SessionState, ties: bool) -> bool:
    """Whether the optimiser learns from a standing answer (see :meth:`SessionModel.choices`)."""
    answer = stored.answer
    if answer.kind == "tie":
        return (ties and state.query(stored.query_id).q == 2) or answer.ratings is not None
    return answer.kind in ("winner", "ranking", "rating")


def _record(stored: StoredAnswer, state: SessionState, ties: bool) -> QueryRecord:
    """The loop's record of a stored choice (a tie the session does not model keeps only its
    ratings)."""
    query = torch.tensor(state.query(stored.query_id).options, dtype=torch.float64)
    a = stored.answer
    tie = ties and a.kind == "tie" and query.shape[0] == 2
    return QueryRecord(query, a.winner, a.ranking, tie, a.strength, a.ratings)


def _misses(opt: PreferenceOptimizer, fit: Hyperparameters) -> bool:
    """Whether ``opt`` holds the answers up to ``fit`` but not its values (``sync`` keeps
    what it holds): another process, or a batched step, stored its own fit for them."""
    held = opt.hyperparameters
    if fit.n_answers > opt.n_queries or (held is not None and held.n_answers > fit.n_answers):
        return False  # sync loads the fit; or the optimiser refitted since, from a checked state
    if held is None:
        return True
    if held.values.keys() != fit.values.keys() or any(
        v.shape != fit.values[n].shape for n, v in held.values.items()
    ):
        return False  # a fit that does not fit the model: the optimiser refitted instead
    return held.n_answers != fit.n_answers or any(
        not torch.equal(v, fit.values[n].to(v)) for n, v in held.values.items()
    )


def _matching_fit(
    fits: tuple[StoredFit, ...], choices: list[StoredAnswer]
) -> Hyperparameters | None:
    """The stored fit with the most answers that were fitted to a prefix of ``choices``."""
    for fit in fits:
        n = fit.n_answers
        if 1 <= n <= len(choices) and choices[n - 1].id == fit.last_answer_id:
            try:
                return Hyperparameters.from_dict(fit.values)
            except ValueError:
                continue
    return None
