r"""The loop's core: propose, record, refit and recommend for ``R`` members in lockstep.

One step of preferential Bayesian optimisation for each member ``r`` (seed :math:`s_r`):

1. **Propose** query :math:`k` (0-based): for :math:`k < n_\text{initial}`, for
   ``strategy="random"`` and before the first answer, ``q`` uniform designs drawn from
   :math:`(s_r, k, \text{RANDOM})`; otherwise the maximiser of the acquisition function on the
   unit cube (EUBO :math:`E[\max(g(x_1), g(x_2))]`, qEUBO :math:`E[\max_i g(x_i)]`, or for
   champion-challenger the champion :math:`c` -- the compared design with the highest
   posterior mean -- against the :math:`x` maximising :math:`E[(g(x) - g(c))^+]`); a due local
   query maximises the last within a box around the champion, a due lookahead query the
   expected best posterior mean after the answer (its optimiser also starts from every pair of
   the compared designs it looks at). An option that repeats another of the same
   query is replaced by a uniform design from :math:`(s_r, k, \text{REPAIR})`.
2. **Record** the answer (:class:`~botorch_pref.loop.history.AnswerRecord`) and give the model
   the new designs and observations (built on the first answer, then updated in place with a
   warm-started mode); refit the hyperparameters after answer :math:`k` when
   :math:`k \le` ``refit_all_until`` or :math:`k` is a multiple of ``refit_every``, starting
   from the current values. A fit that fails numerically keeps the previous hyperparameters
   with a warning; any other failure restores the model and leaves the record unchanged.
3. **Recommend** the compared design with the highest posterior mean, the **champion**
   :math:`x^\star_r = \arg\max_{x_i \in \mathcal D_r} \mu_r(x_i)` (a design the person has
   seen), or, asked for with ``among="anywhere"``, the maximiser of :math:`\mu_r` over the unit
   cube (the qEUBO paper's recommendation), found by the back end's acquisition optimiser on
   ``PosteriorMean`` started from random designs and from the 8 compared designs with the
   highest posterior means (the set a lookahead query looks at), and never worse (by
   :math:`\mu_r`) than :math:`x^\star_r`.

Models are held in groups: with the sequential back end one model per member, with the batched
back end one model with ``batch_shape = (R,)`` for all (see :mod:`~botorch_pref.loop.backends`).
Every random draw comes from :func:`~botorch_pref.loop.seeding.derived_seed` of the member's
seed, so member ``r`` draws exactly what a run seeded :math:`s_r` alone draws.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Unpack

import torch
from botorch.acquisition import PosteriorMean
from botorch.exceptions.errors import ModelFittingError
from botorch.models.model import Model
from botorch.utils.transforms import unnormalize
from torch import Tensor

from botorch_pref.acquisition.local import LocalBox
from botorch_pref.data.preferences import PreferenceData
from botorch_pref.loop.answers import Answer, AnswerParts, check_parts, validate_answer
from botorch_pref.loop.backends import BACKENDS, Acquisition, Backend, ModelGroup, seeded
from botorch_pref.loop.config import LaplaceFactory, LoopConfig
from botorch_pref.loop.history import (
    AnswerRecord,
    Extension,
    QueryRecord,
    Recommendation,
    as_record,
    check_query,
    extends,
    member_data,
)
from botorch_pref.loop.hyperparameters import Hyperparameters
from botorch_pref.loop.policy import (
    LOOKAHEAD_DESIGNS,
    QueryPolicy,
    Step,
    configure,
    strategy_policy,
)
from botorch_pref.loop.seeding import Stream, uniform
from botorch_pref.optim import FIT_ERRORS as LINALG_FIT_ERRORS

__all__ = ["FIT_ERRORS", "LoopState", "ModelGroup"]

#: Errors of a hyperparameter fit after which the previous hyperparameters are kept (the
#: batched fit charges linear-algebra errors to the failing members alone, see
#: :func:`~botorch_pref.optim.isolating`).
FIT_ERRORS = (ModelFittingError, *LINALG_FIT_ERRORS)


def model_data(data: PreferenceData) -> Tensor | PreferenceData:
    """What a model is given: ``m x 2`` rows for pairs (the fast path), else ``data``."""
    return data.as_comparisons() if data.is_pairwise else data


class LoopState:
    """The state of ``R`` preference-optimisation runs that advance one query at a time.

    Args:
        config: The run's settings.
        bounds: ``2 x d`` bounds of the designs in user units (on ``config.device``).
        seeds: One seed per member (default: ``[config.seed]``, one member).
        backend: ``"sequential"`` or ``"batched"`` (see :mod:`~botorch_pref.loop.backends`).
        policy: What each query asks (default: :func:`~botorch_pref.loop.policy.strategy_policy`
            of ``"eubo"``). The config's acquisition effort is resolved for its strategy.
    """

    def __init__(
        self,
        config: LoopConfig,
        bounds: Tensor,
        seeds: Sequence[int] | None = None,
        backend: str = "sequential",
        policy: QueryPolicy | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}.")
        if backend == "batched" and not isinstance(config.model, LaplaceFactory):
            raise ValueError(
                "the batched back end needs model='laplace' or 'laplace-box', got "
                f"{config.model_name!r}."
            )
        self.policy = strategy_policy("eubo", config) if policy is None else policy
        self.policy.check(config)
        self.config = config.with_effort(self.policy.steps[-1].q_opt or config.q)
        self.bounds = bounds
        self.seeds = [config.seed] if seeds is None else [int(s) for s in seeds]
        if not self.seeds:
            raise ValueError("seeds must name at least one member (or be None for one).")
        self.backend: Backend = BACKENDS[backend](self.config)
        self.reset()

    @classmethod
    def build(
        cls,
        bounds: Tensor,
        strategy: str | None = None,
        q: int = 2,
        *,
        seeds: Sequence[int] | None = None,
        backend: str = "sequential",
        policy: QueryPolicy | None = None,
        **settings: Any,
    ) -> LoopState:
        """A state from the optimiser's arguments (:func:`~botorch_pref.loop.policy.configure`):
        ``strategy`` or ``policy``, ``q`` and the keyword settings."""
        config, policy = configure(bounds.shape[-1], strategy, q, policy, settings)
        return cls(config, bounds, seeds, backend, policy)

    def reset(self) -> None:
        """Forget every answer (the settings and the seeds stay)."""
        self.record = AnswerRecord(
            len(self.seeds), self.bounds, self.config.answers, self.config.tkwargs
        )
        self.groups: list[ModelGroup] | None = None
        self.n_refits = 0
        self.fitted_at = 0

    @property
    def n_members(self) -> int:
        """The number of members ``R``."""
        return len(self.seeds)

    @property
    def n_answers(self) -> int:
        """The number of answered queries of each member."""
        return self.record.n_answers

    def from_unit(self, X: Tensor) -> Tensor:
        """Map designs from the unit cube to user units."""
        return unnormalize(X.to(**self.config.tkwargs), self.bounds)

    def group_of(self, r: int) -> ModelGroup:
        """The model group that serves member ``r``."""
        if self.groups is None:
            raise ValueError("No answers yet: there is no model.")
        return self.groups[0] if self.backend.batched else self.groups[r]

    # ---------------------------------------------------------------- propose
    def propose(self) -> Tensor:
        """The next query of every member: ``R x q x d`` distinct designs in user units.

        Each member asks what its policy's step for the query says
        (:meth:`~botorch_pref.loop.policy.QueryPolicy.steps_for`); before the first answer
        there is no model and every query is random.
        """
        k = self.n_answers
        if self.groups is None:
            X = self._random(range(self.n_members), k)
        else:
            X = torch.cat([self._ask(g, k) for g in self.groups])
        return self._repair(X, k)

    def _uniform(self, n: int, seed: int, k: int, stream: int) -> Tensor:
        cfg = self.config
        return uniform(n, cfg.dim, seed, k, stream, dtype=cfg.dtype, device=cfg.device)

    def _random(self, members: Sequence[int], k: int) -> Tensor:
        """``q`` uniform designs for each of ``members``: ``members x q x d`` user units."""
        q = self.config.q
        return self.from_unit(
            torch.stack([self._uniform(q, self.seeds[r], k, Stream.RANDOM) for r in members])
        )

    def _ask(self, group: ModelGroup, k: int) -> Tensor:
        """The queries of ``group``'s members: ``members x q x d`` user units.

        Where the members of a batched group ask different steps (a local query only around a
        champion near the edge), each step is asked of the whole group (each member on its own
        seeds) and each member keeps its own step's query.
        """
        steps = self.policy.steps_for(self, group, k)
        distinct = [s for i, s in enumerate(steps) if all(s is not t for t in steps[:i])]
        queries = [self._ask_step(group, k, step) for step in distinct]
        if len(queries) == 1:
            return queries[0]
        pick = torch.tensor([next(i for i, t in enumerate(distinct) if t is s) for s in steps])
        pick = pick.to(queries[0].device)[:, None, None]
        X = queries[0]
        for i, other in enumerate(queries[1:], start=1):
            X = torch.where(pick == i, other, X)
        return X

    def _ask_step(self, group: ModelGroup, k: int, step: Step) -> Tensor:
        """Every member's query of one step: ``members x q x d`` user units."""
        if step.random:
            return self._random(group.members, k)
        acquisition = step.acquisition(self, group, k)
        X = self.backend.optimize(acquisition, [self.seeds[r] for r in group.members], k)
        if isinstance(acquisition.acqf, LocalBox):
            X = acquisition.acqf.to_box(X).clamp(0.0, 1.0)
        X = self.from_unit(X)
        if acquisition.champions is not None:
            first = self.designs_at(group.members, acquisition.champions, unit=False)
            X = torch.cat([first.unsqueeze(-2), X], dim=-2)
        return X

    def acquisition(self, group: ModelGroup, k: int) -> Acquisition:
        """``group``'s acquisition for query ``k`` (on the unit cube): that of the step the
        first member asks (:meth:`~botorch_pref.loop.policy.QueryPolicy.steps_for`).

        Raises:
            ValueError: When that step asks random designs.
        """
        return self.policy.steps_for(self, group, k)[0].acquisition(self, group, k)

    def _repair(self, X: Tensor, k: int) -> Tensor:
        """Replace a repeated option (it would compare a design with itself) by a random one."""
        same = (X.unsqueeze(-3) == X.unsqueeze(-2)).all(-1).triu(1)  # R x q x q
        dup = same.any(-2)
        if not bool(dup.any()):
            return X
        X = X.clone()
        for r in dup.any(-1).nonzero().flatten().tolist():
            count = int(dup[r].sum())
            X[r, dup[r]] = self.from_unit(self._uniform(count, self.seeds[r], k, Stream.REPAIR))
        return X

    # ----------------------------------------------------------------- record
    def record_answers(
        self,
        queries: Sequence[Tensor],
        answers: Sequence[Answer],
        refit: bool = True,
        update_models: bool = True,
    ) -> None:
        """Record every member's answer, update the models, refit when the schedule says so.

        Args:
            queries: ``R`` validated queries (``q_r x d``, distinct rows, user units).
            answers: ``R`` validated answers (no skips).
            refit: ``False`` records without fitting hyperparameters.
            update_models: ``False`` only appends to the record; the models then lag behind it
                until :meth:`update_models` (or the next recorded answer) gives them its data.

        Raises:
            Exception: Whatever the model raised; the state is then unchanged.
        """
        k = self.n_answers + 1
        fit = refit and (self.groups is None or self.config.refit_due(k))
        ext = self.record.extend(queries, answers)
        if not update_models:
            self.record.commit(ext, answers)
            return
        if self.groups is None:
            self._build(ext, fit, k)
        else:
            self._update(ext, fit, k)
        self.record.commit(ext, answers)
        if fit:
            self.n_refits += 1
            self.fitted_at = k

    def update_models(self) -> None:
        """Give the models the record's data (building them if needed), without fitting.

        One model update for any number of answers recorded with ``update_models=False``.
        """
        if self.n_answers == 0:
            return
        record = self.record
        ext = Extension(record.X_user, record.X_unit, record.counts, record.data, [])
        if self.groups is None:
            self._build(ext, False, self.n_answers)
        else:
            self._update(ext, False, self.n_answers)

    def answer(
        self, X: Tensor, winner: Any = None, *, defer: bool = False, **parts: Unpack[AnswerParts]
    ) -> None:
        """Validate a one-member state's answer to query ``X`` and record it, all or nothing.

        Args:
            X: The validated ``q x d`` query in user units.
            winner: The index of the preferred option (or ``None``).
            defer: Record without fitting or updating the models (see :meth:`record_answers`).
            **parts: The answer's ranking, tie, strength and ratings
                (:class:`~botorch_pref.loop.answers.AnswerParts`).

        Raises:
            InvalidAnswerError: For a bad answer; the state is then unchanged.
            ValueError: For a state of several members (also for :meth:`history`, :meth:`sync`).
        """
        self._one_member("answer")
        answer = self.validate(X.shape[0], winner, **parts)
        self.record_answers([X], [answer], refit=not defer, update_models=not defer)

    def validate(self, q: int, winner: Any = None, **parts: Unpack[AnswerParts]) -> Answer:
        """An answer about ``q`` options checked against the run's answer format (its ties,
        graded and rating scales): :func:`~botorch_pref.loop.answers.validate_answer`."""
        check_parts(parts)  # the run's own settings are not the caller's to pass
        form = self.config.answers
        return validate_answer(
            q,
            winner,
            **parts,
            ties=self.config.ties,
            skips=False,
            levels=form.levels,
            rating_levels=form.ratings,
        )

    def _one_member(self, name: str) -> None:
        if self.n_members != 1:
            raise ValueError(f"{name}() needs a one-member state, this one has {self.n_members}.")

    def history(self) -> list[QueryRecord]:
        """A one-member state's answered queries, in order."""
        self._one_member("history")
        return [self.record.query(0, i) for i in range(self.n_answers)]

    def sync(
        self,
        records: Sequence[QueryRecord | tuple[Any, ...]],
        hyperparameters: Hyperparameters | None = None,
    ) -> int:
        """Bring a one-member state to the state after ``records``, the answered queries in
        order: only the new ones are added when :meth:`history` is a prefix of ``records``,
        else the state is reset and rebuilt. Records up to the stored ``hyperparameters``'
        ``n_answers`` enter without fitting, in one model update, and those values are loaded
        there (unused when the state holds that many answers, or ``records`` fewer).

        Returns the number of records added; records, hyperparameters and errors are those of
        :meth:`~botorch_pref.loop.optimizer.PreferenceOptimizer.sync`.
        """
        self._one_member("sync")
        records = [as_record(i, r) for i, r in enumerate(records)]
        n = self.n_answers
        if not extends(records, self.history()):
            self.reset()
            n = 0
        h = hyperparameters
        if h is not None and not (n < h.n_answers <= len(records)):
            h = None  # no record before its fit is added: it is not used
        if h is not None and self.groups is not None:
            h.check(self.groups[0].model)  # a misfit raises before any record changes the state
        deferred = False  # answers up to the stored fit enter the model in one update
        try:
            for k, record in enumerate(records[n:], start=n + 1):
                X = check_query(record.query, self.bounds)
                deferred = h is not None and k <= h.n_answers
                self.answer(
                    X,
                    record.winner,
                    defer=deferred,
                    ranking=record.ranking,
                    tie=record.tie,
                    strength=record.strength,
                    ratings=record.ratings,
                )
                if h is not None and k == h.n_answers:
                    try:
                        self.adopt(h)
                    except ValueError:
                        if n == 0:  # a misfit found only now: no answer is left without a fit
                            deferred = False
                            self.reset()
                        raise
                    deferred = False
        finally:
            if deferred:  # a bad record: the answers before it are kept, the model catches up
                self.update_models()
        return len(records) - n

    def adopt(self, hyperparameters: Hyperparameters) -> None:
        """Update the models with the record's data and load stored ``hyperparameters`` into
        the first group's model, as if it had been fitted after their ``n_answers`` answers."""
        self.update_models()
        model = self.groups[0].model
        hyperparameters.load_into(model)
        self.fitted_at = hyperparameters.n_answers
        refresh(model, self.record.designs(0, unit=True))

    def _inputs(self, members: list[int], ext: Extension) -> tuple[Tensor, Tensor | PreferenceData]:
        """A group's model inputs: unit-cube designs and observations."""
        if self.backend.batched:
            return ext.X_unit, model_data(ext.data)
        r = members[0]
        return ext.X_unit[r, : ext.counts[r]], model_data(member_data(ext.data, r))

    def _build(self, ext: Extension, fit: bool, k: int) -> None:
        """Build the models on the first answers (and fit them)."""
        cfg = self.config
        member_sets = (
            [list(range(self.n_members))]
            if self.backend.batched
            else [[r] for r in range(self.n_members)]
        )
        groups = []
        for members in member_sets:
            X, data = self._inputs(members, ext)
            with seeded(self.seeds[members[0]], k, Stream.MODEL, cfg.device):
                model, mll = cfg.model(X, data, **cfg.model_kwargs())
            model.to(**cfg.tkwargs)
            group = ModelGroup(members, model, mll)
            if fit:
                self._fit(group, k)
            refresh(group.model, X)
            groups.append(group)
        self.groups = groups

    def _update(self, ext: Extension, fit: bool, k: int) -> None:
        """Give every model its new data (and refit); on failure restore every model."""
        states = [
            {name: v.clone() for name, v in g.model.state_dict().items()} for g in self.groups
        ]
        try:
            for group in self.groups:
                X, data = self._inputs(group.members, ext)
                with seeded(self.seeds[group.members[0]], k, Stream.MODEL, self.config.device):
                    group.model.set_train_data(X, data, update_model=True)
                if fit:
                    self._fit(group, k)
                refresh(group.model, X)
        except BaseException:
            old = Extension(
                self.record.X_user, self.record.X_unit, self.record.counts, self.record.data, []
            )
            for group, state in zip(self.groups, states, strict=True):
                group.model.load_state_dict(state)
                X, data = self._inputs(group.members, old)
                group.model.set_train_data(X, data, update_model=True)
                refresh(group.model, X)
            raise

    def _fit(self, group: ModelGroup, k: int) -> None:
        """Refit ``group``'s hyperparameters from their current values; keep them on failure.

        A fit fails when it raises one of :data:`FIT_ERRORS` or ends at non-finite
        hyperparameters; the group then keeps the previous ones, with a ``RuntimeWarning``.
        """
        state = {name: v.clone() for name, v in group.mll.state_dict().items()}
        seeds = [self.seeds[r] for r in group.members]
        try:
            self.backend.fit(group.mll, seeds, k)
            if not all(bool(torch.isfinite(p).all()) for p in group.mll.parameters()):
                raise ModelFittingError("the fit ended at non-finite hyperparameters")
        except FIT_ERRORS as err:
            group.mll.load_state_dict(state)
            warnings.warn(
                f"Hyperparameter fit failed after {k} answers ({err}); keeping the previous "
                "hyperparameters.",
                RuntimeWarning,
                stacklevel=5,
            )
        group.model.eval()

    # -------------------------------------------------------------- recommend
    def top_compared(self, members: Sequence[int], k: int) -> Tensor:
        """Each member's ``k`` compared designs with the highest posterior means, or all while
        one has compared fewer: ``members x k' x d`` in the unit cube."""
        means = self.means(members)
        k = min(k, *(len(m) for m in means))
        X = self.record.X_unit
        return torch.stack([X[r, m.topk(k).indices] for r, m in zip(members, means, strict=True)])

    def means(self, members: Sequence[int] | None = None) -> list[Tensor]:
        """Posterior means of ``members`` (default: all) at their designs (``n_r`` values each)."""
        counts = self.record.counts
        members = range(self.n_members) if members is None else members
        if self.backend.batched:
            with torch.no_grad():
                utility = self.group_of(0).model.utility
            return [utility[r, : counts[r]] for r in members]
        return [self.moments(r)[0] for r in members]

    def moments(self, r: int, X_unit: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Member ``r``'s marginal posterior means and standard deviations (sequential models).

        Args:
            r: The member.
            X_unit: ``n x d`` unit-cube designs (default: the member's designs).
        """
        X = self.record.designs(r, unit=True) if X_unit is None else X_unit
        with torch.no_grad():
            post = self.group_of(r).model.posterior(X.unsqueeze(-2))
            mean = post.mean.reshape(-1)
            std = post.variance.reshape(-1).clamp_min(0.0).sqrt()
        return mean, std

    def maximise_mean(self, r: int) -> tuple[Tensor, Tensor, Tensor]:
        """Member ``r``'s posterior-mean maximiser over the unit cube (sequential models).

        Returns:
            ``(x_unit, mean, std)``: the design in the unit cube (see :meth:`mean_maximisers`),
            its posterior mean and std.
        """
        group = self.group_of(r)
        x = self.mean_maximisers(group)[group.members.index(r)]
        mean, std = self.moments(r, x.unsqueeze(0))
        return x, mean[0], std[0]

    def mean_maximisers(self, group: ModelGroup) -> Tensor:
        """The posterior-mean maximiser over the unit cube of each member of ``group``.

        The back end's acquisition optimiser on ``PosteriorMean`` with the run's restarts and
        raw samples, seeded by the :class:`~botorch_pref.loop.seeding.Stream` ``RECOMMEND`` of
        the current answer count, which also starts from the member's 8 compared designs with
        the highest posterior means; a member's best compared design is kept where the
        optimiser found nothing with a higher posterior mean.

        Returns:
            ``members x d`` designs in the unit cube.
        """
        k, members = self.n_answers, group.members
        seeds = [self.seeds[r] for r in members]
        starts = self.top_compared(members, LOOKAHEAD_DESIGNS).unsqueeze(-2)  # members x k x 1 x d
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mean = Acquisition(PosteriorMean(group.model), 1, initial=starts)
            x = self.backend.optimize(mean, seeds, k, Stream.RECOMMEND)
        compared = self.designs_at(members, self.champions(members))
        X = torch.stack([compared, x[:, 0].clamp(0.0, 1.0)], dim=-2)  # members x 2 x d
        with torch.no_grad():
            post = group.model.posterior(X if self.backend.batched else X[0])
            pick = post.mean.reshape(len(members), 2).argmax(-1)
        return X[torch.arange(len(members), device=X.device), pick]

    def recommend_anywhere(self) -> Tensor:
        """Each member's posterior-mean maximiser over the box: ``R x d`` designs in user units."""
        if self.groups is None:
            raise ValueError("No answers yet: there is no model.")
        return self.from_unit(torch.cat([self.mean_maximisers(g) for g in self.groups]))

    def best(self, r: int, among: str = "compared") -> Recommendation:
        """Member ``r``'s recommendation among the compared designs or anywhere in the box.

        Args:
            r: The member.
            among: ``"compared"`` (the compared design with the highest posterior mean) or
                ``"anywhere"`` (the posterior-mean maximiser over the box).

        Returns:
            The design in user units, its posterior mean and std, and its index among the
            compared designs (``None`` for a design not compared).
        """
        if among == "anywhere":
            x, mean, std = self.maximise_mean(r)
            hit = (self.record.designs(r, unit=True) == x).all(-1).nonzero().flatten().tolist()
            i = hit[0] if hit else None  # a compared design: as given, not mapped back and forth
            x = self.from_unit(x) if i is None else self.record.designs(r)[i].clone()
            return Recommendation(x, float(mean), float(std), i)
        mean, std = self.moments(r)
        i = int(mean.argmax())
        return Recommendation(self.record.designs(r)[i].clone(), float(mean[i]), float(std[i]), i)

    def recommend(self) -> Tensor:
        """Each member's recommendation: ``R x d`` designs in user units."""
        members = range(self.n_members)
        return self.designs_at(members, self.champions(members), unit=False)

    def champions(self, members: Sequence[int]) -> list[int]:
        """Each member's champion: the index of its compared design with the highest posterior
        mean (the current recommendation)."""
        return [int(m.argmax()) for m in self.means(members)]

    def designs_at(
        self, members: Sequence[int], indices: Sequence[int], unit: bool = True
    ) -> Tensor:
        """Design ``indices[j]`` of member ``members[j]``, stacked (unit cube or user units)."""
        X = self.record.X_unit if unit else self.record.X_user
        return torch.stack([X[r, i] for r, i in zip(members, indices, strict=True)])


def refresh(model: Model, X_unit: Tensor) -> None:
    """Bring a model's cached posterior up to date with its data and hyperparameters.

    L-BFGS may stop at hyperparameters other than the last ones it evaluated, and the model
    then refreshes its mode lazily, on the next posterior call. Doing it here, not inside
    whichever call comes next, makes the state a function of the answers alone (a replayed
    history reaches the same state to the last bit).
    """
    with torch.no_grad():
        model.posterior(X_unit[..., :1, :])
