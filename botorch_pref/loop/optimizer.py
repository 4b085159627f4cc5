r"""An ask/tell preferential Bayesian optimiser.

:class:`PreferenceOptimizer` runs the loop of preferential BO for a person (or a simulated user)
who says which of :math:`q` designs they prefer (and, where the run takes them, by how much on a
graded scale, and a rating of each design):

1. :meth:`~PreferenceOptimizer.ask` returns the next query, a ``q x d`` tensor of designs in the
   user's units (within ``bounds``);
2. :meth:`~PreferenceOptimizer.tell` records the answer (the index of the preferred option, a
   full ranking, or "no preference"), refits the preference GP when the schedule says so, and
   updates its posterior;
3. :meth:`~PreferenceOptimizer.best` recommends the compared design with the highest posterior
   mean of the utility :math:`g`, :math:`x^\star = \arg\max_{x_i \in \mathcal{D}} \mu(x_i)`
   over the set :math:`\mathcal D` of designs compared so far (the qEUBO protocol's
   recommendation: it never recommends a design nobody has looked at).

It is a thin facade over the loop's core, :class:`~botorch_pref.loop.state.LoopState`, with one
member and the sequential back end (the settings and their defaults are
:class:`~botorch_pref.loop.config.LoopConfig`'s, what each query asks its
:class:`~botorch_pref.loop.policy.QueryPolicy`'s). Conventions:

* Inputs are normalised to the unit cube through ``bounds``; the model, the acquisition and its
  optimisation never see user units.
* A design that has been compared before (a row *exactly* equal to an earlier one, e.g. the
  champion that champion-challenger re-proposes) is reused, not duplicated: its answers attach to
  the same datapoint.
* All randomness (initial and random queries, ``optimize_acqf``'s raw samples, qEUBO's base
  samples, fit restarts) is drawn from seeds derived from ``(seed, query number)``, so the same
  seed and answers give the same run on the same machine with as many intra-op threads (torch's
  reductions round differently elsewhere), and :meth:`PreferenceOptimizer.replay` of a
  history reaches the state of the run that produced it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Unpack

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.models.model import Model
from botorch.utils.transforms import normalize
from gpytorch.mlls import MarginalLogLikelihood
from torch import Tensor

from botorch_pref.data.preferences import PreferenceData
from botorch_pref.loop.answers import AnswerParts
from botorch_pref.loop.config import LoopConfig
from botorch_pref.loop.history import (
    QueryRecord,
    Recommendation,
    check_bounds,
    check_designs,
    check_query,
)
from botorch_pref.loop.hyperparameters import Hyperparameters
from botorch_pref.loop.policy import QueryPolicy, configure
from botorch_pref.loop.state import LoopState
from botorch_pref.runtime import with_problem_threads

__all__ = ["PreferenceOptimizer", "Recommendation"]


class PreferenceOptimizer:
    r"""Ask/tell preferential Bayesian optimisation on a box.

    Example:
        >>> bounds = torch.tensor([[-5.0, 0.0], [10.0, 15.0]], dtype=torch.float64)
        >>> opt = PreferenceOptimizer(bounds, strategy="eubo", seed=0)
        >>> for _ in range(20):
        ...     X = opt.ask()                    # 2 x 2, inside bounds
        ...     opt.tell(X, winner=user(X))      # index of the preferred row
        >>> opt.best().x

    What each query asks is the optimiser's :attr:`policy`
    (:class:`~botorch_pref.loop.policy.QueryPolicy`, an ordered list of steps). ``strategy``
    builds the default one for a strategy (:func:`~botorch_pref.loop.policy.strategy_policy`):

    * ``"eubo"``: analytic EUBO, :math:`E[\max(g(x_1), g(x_2))]`, maximised jointly over the
      pair (``q = 2``), with local and lookahead queries in between.
    * ``"qeubo"``: Monte-Carlo qEUBO, :math:`E[\max_i g(x_i)]`, for any ``q >= 2``.
    * ``"champion-challenger"``: the champion (the compared design with the highest posterior
      mean) against the challenger maximising :math:`E[(g(x) - g(c))^+]` under the joint
      posterior (:class:`~botorch_pref.acquisition.ChampionChallenger`; ``q = 2``). The champion
      is an earlier datapoint, so each such query adds one new design.
    * ``"random"``: ``q`` uniform designs, the baseline.

    A policy of one's own replaces it: EUBO on every query after 8 random ones, as BoTorch's
    PBO pipeline asks, is
    ``PreferenceOptimizer(bounds, policy=QueryPolicy([Initial(8), Acquire("eubo")]))``.

    Graded answers and ratings are opt-in settings (the scales:
    :mod:`~botorch_pref.loop.answers`):

        >>> opt = PreferenceOptimizer(bounds, answers="graded", levels=5, ratings=3, seed=0)
        >>> X = opt.ask()
        >>> opt.tell(X, winner=0, strength=2)            # "A much better"
        >>> opt.tell(opt.ask(), tie=True)                # "about the same" (odd scale)
        >>> opt.tell(opt.ask(), winner=1, strength=1, ratings=[0, 1])  # "B slightly", bad/fine
        >>> opt.tell(opt.ask(), ratings=[2, 1])          # ratings alone

    Args:
        bounds: ``2 x d`` lower and upper bounds of the designs, in the user's units.
        strategy: One of ``"eubo"`` (default), ``"qeubo"``, ``"champion-challenger"``,
            ``"random"``; not with ``policy``.
        q: Options per query (2 for EUBO and champion-challenger).
        policy: A :class:`~botorch_pref.loop.policy.QueryPolicy` of one's own.
        **settings: The run's settings, :class:`~botorch_pref.loop.config.LoopConfig`'s fields
            (``model``, ``answers``, ``ties``, ``refit_every``, ``refit_all_until``,
            ``num_restarts``, ``raw_samples``, ``device`` (default: ``bounds``'s), ``dtype``,
            ``seed``), the Laplace model factory's arguments (``kernel``, ``inference``:
            :class:`~botorch_pref.loop.config.LaplaceFactory`), the answer format's
            (``levels``: the graded scale of ``answers="graded"``, ``ratings``: the rating
            scale, :func:`~botorch_pref.loop.config.answers_from_settings`), and without
            ``policy`` the
            arguments of :func:`~botorch_pref.loop.policy.strategy_policy` (``n_initial``,
            ``mc_samples``, ``champion_variant``, ``local_every``, ``local_radius``,
            ``local_when``, ``lookahead_every``). All are in
            :data:`~botorch_pref.loop.policy.SETTINGS`; their defaults, and why, are
            :mod:`~botorch_pref.loop.config`'s and :mod:`~botorch_pref.loop.policy`'s.

    Attributes:
        config: The resolved :class:`~botorch_pref.loop.config.LoopConfig`.
        policy: The :class:`~botorch_pref.loop.policy.QueryPolicy`.
    """

    def __init__(
        self,
        bounds: Tensor | Sequence[Sequence[float]],
        strategy: str | None = None,
        q: int = 2,
        *,
        policy: QueryPolicy | None = None,
        **settings: Any,
    ) -> None:
        dtype = settings.get("dtype", torch.float64)
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}.")
        device = settings.get("device")
        if device is None:
            device = bounds.device if torch.is_tensor(bounds) else torch.device("cpu")
        b = check_bounds(bounds, {"device": torch.device(device), "dtype": dtype})
        settings = {**settings, "device": device}
        config, policy = configure(b.shape[-1], strategy, q, policy, settings)
        self._state = LoopState(config, b, policy=policy)
        self._pending: Tensor | None = None

    @property
    def config(self) -> LoopConfig:
        """The run's settings besides its policy (resolved)."""
        return self._state.config

    @property
    def policy(self) -> QueryPolicy:
        """What each query asks."""
        return self._state.policy

    @property
    def settings(self) -> dict[str, Any]:
        """The keyword arguments that rebuild this optimiser with ``bounds`` (``strategy``,
        ``q``, the config's settings with the model factory's, and the policy's when
        ``strategy=`` built it)."""
        cfg = self.config
        return {
            "strategy": self.policy.strategy,
            "q": cfg.q,
            **cfg.settings,
            **self.policy.settings,
        }

    # -------------------------------------------------------------- properties
    @property
    def bounds(self) -> Tensor:
        """The ``2 x d`` bounds in user units."""
        return self._state.bounds.clone()

    @property
    def n_refits(self) -> int:
        """The number of hyperparameter fits so far."""
        return self._state.n_refits

    @property
    def datapoints(self) -> Tensor:
        """The ``n x d`` distinct designs compared so far, in user units."""
        return self._state.record.designs(0).clone()

    @property
    def preference_data(self) -> PreferenceData:
        """Every answer as observations over :attr:`datapoints` (a copy)."""
        return PreferenceData.cat([self._state.record.member_data(0)])

    @property
    def comparisons(self) -> Tensor:
        """The ``m x 2`` (winner, loser) rows indexing :attr:`datapoints`.

        Raises:
            ValueError: If the answers hold choices, rankings, ties, graded comparisons or
                ratings (see preference_data).
        """
        data = self._state.record.member_data(0)
        if not data.is_pairwise:
            raise ValueError(
                "the answers hold choices, rankings, ties, graded comparisons or ratings, not "
                "only pairs: use preference_data."
            )
        return data.as_comparisons()

    @property
    def n_queries(self) -> int:
        """The number of answered queries."""
        return self._state.n_answers

    @property
    def history(self) -> list[QueryRecord]:
        """The answered queries in order (a copy); :meth:`replay` rebuilds the state from it."""
        return self._state.history()

    @property
    def pending(self) -> Tensor | None:
        """The query :meth:`ask` returned and that awaits its answer, or ``None``."""
        return None if self._pending is None else self._pending.clone()

    @property
    def model(self) -> Model | None:
        """The preference model on unit-cube inputs (``None`` before the first answer)."""
        return None if self._state.groups is None else self._state.groups[0].model

    @property
    def mll(self) -> MarginalLogLikelihood | None:
        """The marginal log-likelihood the hyperparameters are fitted with."""
        return None if self._state.groups is None else self._state.groups[0].mll

    @property
    def hyperparameters(self) -> Hyperparameters | None:
        """The model's hyperparameters and the answer count of their last fit (``None`` before);
        store them with the answers to rebuild the run without refitting (:meth:`sync`)."""
        if self.model is None or self._state.fitted_at == 0:
            return None
        return Hyperparameters.of(self.model, self._state.fitted_at)

    def to_unit(self, X: Tensor) -> Tensor:
        """Map ``... x d`` designs from user units to the unit cube."""
        return normalize(check_designs(X, self._state.bounds), self._state.bounds)

    def from_unit(self, X: Tensor) -> Tensor:
        """Map ``... x d`` designs from the unit cube to user units."""
        return self._state.from_unit(check_designs(X, self._state.bounds))

    # ---------------------------------------------------------------- ask/tell
    @with_problem_threads(lambda self: (None, self.config.device))
    def ask(self) -> Tensor:
        """The next query: ``q x d`` distinct designs inside ``bounds``, in user units.

        Until it is answered with :meth:`tell`, repeated calls return the same query.
        """
        if self._pending is None:
            self._pending = self._state.propose()[0]
        return self._pending.clone()

    def acquisition_function(
        self, k: int | None = None
    ) -> tuple[AcquisitionFunction, int, int | None]:
        """The acquisition function :meth:`ask` optimises on the unit cube.

        Args:
            k: The query number (picks the policy's step, seeds qEUBO's base samples); default
                :attr:`n_queries`.

        Raises:
            ValueError: Before the first answer, or when the step for query ``k`` asks random
                designs (an initial query, ``strategy="random"``).

        Returns:
            ``(acqf, q_opt, champion)``: the acquisition function (for a local query a
            ``LocalBox``, whose ``to_box`` maps its maximiser into the box), the number of
            points it takes, and the champion's row in :attr:`datapoints` (else ``None``).
        """
        if self.model is None:
            raise ValueError("No answers yet: the acquisition needs a model.")
        k = self.n_queries if k is None else k
        acqf, q_opt, champions, _ = self._state.acquisition(self._state.groups[0], k)
        return acqf, q_opt, None if champions is None else champions[0]

    @with_problem_threads(lambda self: (None, self.config.device))
    def tell(
        self,
        query: Tensor,
        winner: int | None = None,
        *,
        ranking: Sequence[int] | Tensor | None = None,
        tie: bool = False,
        strength: int | None = None,
        ratings: Sequence[int] | Tensor | None = None,
    ) -> None:
        """Record the answer to the query :meth:`ask` returned.

        Answers to other queries (a person's own designs, stored answers): :meth:`add_comparison`.

        Args:
            query: The ``q x d`` query, exactly as :meth:`ask` returned it.
            winner: The index of the preferred option.
            ranking: A full ranking of the options, best first (a permutation of ``0..q-1``):
                a Plackett-Luce ranking with ``answers="choice"``, else the ``q - 1``
                consecutive pairs.
            tie: "No preference" between the two options (needs ``ties=True``, or an odd graded
                scale: its middle level).
            strength: How much better the winner of a pair is on the graded scale of
                ``levels`` levels: 1 ("slightly") .. ``levels // 2`` ("much"); needs
                ``answers="graded"``. Without it a graded run records a plain comparison.
            ratings: One rating per option, in the query's order, each in
                ``0 .. ratings - 1`` of the run's rating scale (0 the worst); beside a winner, a
                ranking or a tie, or alone.

        Raises:
            ValueError: Without a pending query, for a different query, or for a bad answer
                (:class:`~botorch_pref.loop.answers.InvalidAnswerError`, naming the value); the
                optimiser's state is then unchanged.
        """
        if self._pending is None:
            raise ValueError(
                "tell() without a pending query: call ask() first, or use add_comparison() to "
                "record an answer to any query."
            )
        X = check_query(query, self._state.bounds)
        if X.shape != self._pending.shape or not torch.equal(X, self._pending):
            raise ValueError(
                "query differs from the one ask() returned; use add_comparison() to record "
                "an answer to another query."
            )
        self._record(X, winner, ranking=ranking, tie=tie, strength=strength, ratings=ratings)

    def add_comparison(
        self,
        query: Tensor | Sequence[Sequence[float]],
        winner: int | None = None,
        **answer: Unpack[AnswerParts],
    ) -> None:
        """Record the answer to any query of ``q' >= 2`` distinct designs inside ``bounds``.

        :meth:`tell` without the check that the query came from :meth:`ask`. It counts as a
        query (the refit schedule and the seeds advance); a pending query from :meth:`ask` that
        differs from ``query`` is discarded (the next :meth:`ask` makes a new one).

        Args:
            query: A ``q' x d`` tensor (or nested sequence) in user units.
            winner: The index of the preferred option.
            **answer: ``ranking``, ``tie``, ``strength`` and ``ratings``, keyword only, as for
                :meth:`tell` (:class:`~botorch_pref.loop.answers.AnswerParts`).

        Raises:
            ValueError: For a bad query or answer; the optimiser's state is then unchanged.
        """
        X = check_query(query, self._state.bounds)
        self._record(X, winner, **answer)

    def _record(self, X: Tensor, winner: Any | None, **answer: Unpack[AnswerParts]) -> None:
        """Validate the answer, then record it, all or nothing."""
        self._state.answer(X, winner, **answer)
        self._pending = None

    # -------------------------------------------------------------------- best
    def predict(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """Posterior mean and standard deviation of the utility at designs in user units.

        Args:
            X: ``n x d`` designs in user units.

        Returns:
            Two ``n`` tensors.
        """
        if self.model is None:
            raise ValueError("No answers yet: nothing to predict from.")
        X = check_designs(X, self._state.bounds)
        if X.dim() != 2:
            raise ValueError(f"X must have shape n x {self.config.dim}, got {tuple(X.shape)}.")
        return self._state.moments(0, normalize(X, self._state.bounds))

    def best(self, among: str = "compared") -> Recommendation:
        """The recommended design: the highest posterior mean among the compared designs.

        Args:
            among: ``"compared"`` (default: a design the person has seen) or ``"anywhere"``
                (the posterior-mean maximiser over the box, the qEUBO paper's recommendation;
                the best compared design when no other design has a higher mean).

        Returns:
            A :class:`Recommendation` (design in user units, posterior mean and std, index).
        """
        if among not in ("compared", "anywhere"):
            raise ValueError(f"among must be 'compared' or 'anywhere', got {among!r}.")
        if self.model is None:
            raise ValueError("No answers yet: there is nothing to recommend.")
        return self._state.best(0, among)

    # ------------------------------------------------------------------ replay
    def sync(
        self,
        records: Sequence[QueryRecord | tuple[Any, ...]],
        *,
        hyperparameters: Hyperparameters | None = None,
    ) -> int:
        """Bring the optimiser to the state after ``records``, the answered queries in order.

        If :attr:`history` is a prefix of ``records``, only the new records are added, else
        the optimiser is reset and rebuilt: a caller that keeps the answers elsewhere (a
        session database) hands the full list each time and pays only for what is new. With
        the run's ``hyperparameters`` (:attr:`hyperparameters`), records up to their
        ``n_answers`` enter without fitting and those values are loaded there (ignored when
        the optimiser holds that many answers, or ``records`` fewer): the run's state and next
        :meth:`ask` without the cost of its fits, up to rounding (the mode is found from another
        start: a next query moved by up to 1e-8 in a Hartmann-6 run; without them, none).

        Args:
            records: :class:`~botorch_pref.loop.history.QueryRecord` s, or tuples
                ``(query, winner)``, ``(query, winner, ranking)``,
                ``(query, None, None, True)`` (a tie) or
                ``(query, winner, ranking, tie, strength, ratings)``.
            hyperparameters: Stored hyperparameters of this run.

        Returns:
            The number of records added.

        Raises:
            InvalidAnswerError: For a malformed record or answer (records before it are kept).
            ValueError: For a malformed query (likewise), or hyperparameters that do not fit
                the model (then none of the new records is kept).
        """
        record, n = self._state.record, self.n_queries
        try:
            return self._state.sync(records, hyperparameters)
        finally:
            if self._state.record is not record or self.n_queries != n:
                self._pending = None  # the state moved on (or was reset): a new query is due

    @classmethod
    def replay(
        cls,
        records: Iterable[QueryRecord | tuple[Any, ...]],
        bounds: Tensor | Sequence[Sequence[float]],
        *,
        hyperparameters: Hyperparameters | None = None,
        **kwargs: Any,
    ) -> PreferenceOptimizer:
        """Rebuild an optimiser from answered queries, in order.

        With the same constructor arguments (``seed`` included) and the :attr:`history` of a
        run, the result has the run's data, hyperparameters and next :meth:`ask`; with the
        run's :attr:`hyperparameters` it gets there without refitting (see :meth:`sync`).

        Args:
            records: As for :meth:`sync`.
            bounds: As for the constructor.
            hyperparameters: Stored hyperparameters of the run (optional).
            **kwargs: Other constructor arguments.

        Returns:
            The optimiser.
        """
        opt = cls(bounds, **kwargs)
        opt.sync(list(records), hyperparameters=hyperparameters)
        return opt
