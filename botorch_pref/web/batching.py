r"""Several sessions' next queries in one batched step of the loop.

When many people answer at once, a process that prepares their sessions' next queries spends
most of its time in many small tensor operations per session. :func:`ask_together` makes the
queries of compatible sessions in one step of the loop's batched back end
(:class:`~botorch_pref.loop.LoopState` with ``backend="batched"``, the lockstep replications'
step): one model with ``batch_shape = (R,)`` and each session's own hyperparameters, one batched
refit when the schedule has one, and one batched maximisation of every session's acquisition
function, each seeded from its session's seed and number of answers.

Sessions are compatible when they have the same optimiser settings besides the seed (strategy,
``q``, model, schedule, ...), the same bounds and the same number of standing choices, and
either no choice yet fitted or their latest stored fit is the one the schedule made last (a
refit after the next choice starts from it); the model must be one the batched back end holds
(``"laplace"``, ``"laplace-box"``) and the answers binary (sessions with graded answers or
ratings are stepped one at a time). Every random draw of the step is the session's own (qEUBO's
base samples too, :class:`~botorch_pref.acquisition.sampling.MemberSobolSampler`), so a
session's query depends on the sessions stepped with it only through rounding (the batched
solvers step every member until the last one converges). Sessions with other models,
and any group the batched step fails for, get their query from :meth:`Session.ask
<botorch_pref.sessions.Session.ask>`, one at a time, as do sessions whose answers changed while
the step ran.

A query made in a batched step is stored with the step's fit and recommendation, as
``Session.ask`` stores its own; the session's own optimiser is not touched (when it is next
needed it catches up from the stored fit, without refitting), so a resumed session rebuilds the
same model from the stored answers and fits. The random queries are those of the session's
own optimiser; the fit and the acquisition's maximiser come from the batched solvers, equal in
distribution to the sequential ones but not bit for bit (see
:mod:`~botorch_pref.loop.backends`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple

import torch

from botorch_pref.loop import (
    Hyperparameters,
    LoopConfig,
    LoopState,
    QueryPolicy,
    QueryRecord,
    Recommendation,
    validate_answer,
)
from botorch_pref.loop.history import check_bounds, check_query, same_record
from botorch_pref.loop.policy import configure
from botorch_pref.sessions.model import Proposal
from botorch_pref.sessions.records import SessionState
from botorch_pref.sessions.session import Session, Shown

__all__ = [
    "BATCHED_MODELS",
    "KEPT_STEPS",
    "Member",
    "ask_together",
    "group_key",
    "propose_together",
]

#: The models the batched back end holds.
BATCHED_MODELS = ("laplace", "laplace-box")

#: Most batched states :func:`ask_together` keeps for the next call.
KEPT_STEPS = 8


class Member(NamedTuple):
    """A session as a member of a batched step.

    Attributes:
        seed: The session's seed.
        records: The loop's records of its standing choices, in order.
        warm: Its latest stored fit before the last choice, or ``None``.
    """

    seed: int
    records: list[QueryRecord]
    warm: Hyperparameters | None


def ask_together(
    sessions: Sequence[Session],
    steps: dict[tuple[str, ...], LoopState] | None = None,
    may_wait: Collection[int] = (),
) -> list[Shown | None]:
    """Every session's query to show now: the pending one, else a new one (stored first).

    Like :meth:`Session.ask_and_recommend
    <botorch_pref.sessions.Session.ask_and_recommend>` for each session, with the new
    queries of compatible sessions made in one batched step (see the module docstring). Each
    session is read once (one snapshot gives its member of the step, its query and its
    recommendation); it is read again only when its answers changed meanwhile.

    Args:
        sessions: Open sessions, distinct.
        steps: The batched states of earlier calls, by their sessions' names (updated: a
            session's state is replaced by this call's, at most :data:`KEPT_STEPS` kept): a
            group of the same sessions, each one answer further, continues its state instead
            of replaying every answer. ``None`` keeps none.
        may_wait: Indices of sessions that may be left without a query when they would be
            stepped alone while sessions with the same settings but another number of answers
            are stepped together: asked again after those, they can join them (one batched
            step instead of a step of their own, then and after).

    Returns:
        Their queries with their recommendations, in order (``None`` for those left waiting).
    """
    states = [s.state() for s in sessions]
    members = [_member(s, st) for s, st in zip(sessions, states, strict=True)]
    groups: dict[tuple[str, int], list[int]] = {}
    for i, (s, member) in enumerate(zip(sessions, members, strict=True)):
        if member is not None:
            groups.setdefault((_compatible(s), len(member.records)), []).append(i)
    together = {key[0] for key, group in groups.items() if len(group) > 1}
    waiting = {
        group[0]
        for key, group in groups.items()
        if len(group) == 1 and key[0] in together and group[0] in may_wait
    }
    proposals: dict[int, Proposal] = {}
    kept: dict[tuple[str, ...], LoopState] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda i: sessions[i].name)
        names = tuple(sessions[i].name for i in group)
        first, these = sessions[group[0]], [members[i] for i in group]
        start = None if steps is None else steps.get(names)
        try:
            config, policy = _config(first)
            made, kept[names] = propose_together(config, first.bounds, these, start, policy)
        except Exception:  # a numerical failure of the step: one at a time
            continue
        proposals.update(zip(group, made, strict=True))
    if steps is not None:
        _keep(steps, kept)
    queries: list[Shown | None] = []
    for i, s in enumerate(sessions):
        if i in proposals:  # None: the answers changed since the snapshot, which is stale
            shown = s.ask_proposed(states[i], proposals[i]) or s.ask_and_recommend()
        else:
            shown = None if i in waiting else s.ask_and_recommend(states[i])
        queries.append(shown)
    return queries


def _keep(steps: dict[tuple[str, ...], LoopState], kept: dict[tuple[str, ...], LoopState]) -> None:
    """Replace the states of the sessions stepped now; keep at most :data:`KEPT_STEPS`."""
    now = {name for names in kept for name in names}
    for names in [n for n in steps if now.intersection(n)]:
        del steps[names]
    steps.update(kept)
    for names in list(steps)[: max(0, len(steps) - KEPT_STEPS)]:
        del steps[names]


def _member(session: Session, state: SessionState) -> Member | None:
    """A session's records and warm fit, or ``None`` when it cannot join a batched step."""
    if state.pending_id is not None:
        return None
    config, _ = _config(session)
    if not _batchable(config):
        return None
    records, warm = session.replay_input(state)
    k = len(records)
    if k == 0:
        return None  # no model yet: the first query is random and needs none
    due = [j for j in range(1, k) if j == 1 or config.refit_due(j)]
    if due and (warm is None or warm.n_answers != due[-1]):
        return None  # the session's latest fit is not stored: it refits on its own
    return Member(session.seed, records, warm)


def _config(session: Session) -> tuple[LoopConfig, QueryPolicy]:
    settings = dict(session.settings)
    strategy, q = settings.pop("strategy"), settings.pop("q")
    return configure(len(session.names), strategy, q, None, settings)


def group_key(session: Session, answers: int) -> tuple[str, int] | None:
    """What sessions share to be stepped together when they have ``answers`` answers.

    Args:
        session: The session.
        answers: Its number of answers then.

    Returns:
        Equal for sessions that may share a batched step then, or ``None`` for one that never
        joins one (a model or strategy the batched back end does not take, or no answer yet).
    """
    if answers < 1 or not _batchable(_config(session)[0]):
        return None
    return _compatible(session), answers


def _batchable(config: LoopConfig) -> bool:
    # every random draw of a batched step is the member's own (qEUBO's base samples too), so
    # a session's query depends on the sessions stepped with it only through rounding; graded
    # answers and ratings are stepped one session at a time (their thresholds are fitted)
    return config.model_name in BATCHED_MODELS and config.answers.binary


def _compatible(session: Session) -> str:
    """What sessions share to be stepped together, besides their number of answers."""
    settings = {n: v for n, v in session.settings.items() if n != "seed"}
    return repr((sorted(settings.items()), session.bounds))


def propose_together(
    config: LoopConfig,
    bounds: Sequence[Sequence[float]],
    members: Sequence[Member],
    start: LoopState | None = None,
    policy: QueryPolicy | None = None,
) -> tuple[list[Proposal], LoopState]:
    """The next queries of sessions with the same settings, in one batched step.

    The members' records are replayed into one :class:`~botorch_pref.loop.LoopState` with the
    batched back end (without fits) and their warm fits are loaded -- or ``start`` is taken
    when it holds exactly that -- then the last record is recorded as the loop records an
    answer (refitting when the schedule says so), and the state proposes every member's next
    query.

    Args:
        config: The members' settings (any seed: each member's own is used).
        bounds: ``[[lows...], [highs...]]`` in user units.
        members: The members, each with at least one record and the same number of them.
        start: The state of an earlier step of the same members, used when it holds all
            their records but the last and their warm fits.
        policy: The members' query policy (default: the loop's default).

    Returns:
        ``(proposals, state)``: one :class:`~botorch_pref.sessions.model.Proposal` per member,
        and the state after the step.

    Raises:
        ValueError: For members with different numbers of records, or warm fits that do not
            fit the batched model.
    """
    k = len(members[0].records)
    if k == 0 or any(len(m.records) != k for m in members):
        raise ValueError("the members of a batched step need the same number (>= 1) of records.")
    b = check_bounds(bounds, config.tkwargs)
    if start is not None and _continues(start, members):
        state = start
    else:
        state = _replayed(config, b, members, policy)
    state.record_answers(*_step(config, b, [m.records[-1] for m in members]))  # refit if due
    X = state.propose()
    fitted = k == 1 or config.refit_due(k)
    proposals = [
        Proposal(X[r].tolist(), _member_fit(state, r, k) if fitted else None, best)
        for r, best in enumerate(_recommendations(state))
    ]
    return proposals, state


def _replayed(
    config: LoopConfig, bounds: torch.Tensor, members: Sequence[Member], policy: QueryPolicy | None
) -> LoopState:
    """A batched state holding every member's records but the last, with its warm fit."""
    seeds = [m.seed for m in members]
    state = LoopState(config, bounds, seeds=seeds, backend="batched", policy=policy)
    k = len(members[0].records)
    for i in range(k - 1):
        step = _step(config, bounds, [m.records[i] for m in members])
        state.record_answers(*step, refit=False, update_models=False)
    if k > 1:
        state.update_models()
        warm = [m.warm for m in members]
        if all(h is not None for h in warm):
            _stacked(state, warm).load_into(state.groups[0].model)
    return state


def _continues(state: LoopState, members: Sequence[Member]) -> bool:
    """Whether ``state`` holds exactly the members' records but the last, and their warm fits."""
    k = len(members[0].records)
    if state.n_answers != k - 1 or state.seeds != [m.seed for m in members]:
        return False
    for r, m in enumerate(members):
        if any(not same_record(state.record.query(r, i), m.records[i]) for i in range(k - 1)):
            return False
        if m.warm is not None:
            held = _member_fit(state, r, m.warm.n_answers).values
            if held.keys() != m.warm.values.keys() or any(
                not torch.equal(held[n], v.to(held[n])) for n, v in m.warm.values.items()
            ):
                return False
    return True


def _recommendations(state: LoopState) -> list[Recommendation]:
    """Each member's compared design with the highest posterior mean, with its mean and std."""
    members = range(state.n_members)
    index = state.champions(members)
    record = state.record
    X = state.designs_at(members, index).unsqueeze(-2)
    with torch.no_grad():
        posterior = state.groups[0].model.posterior(X)  # R x 1 x d: member r at its design
        mean = posterior.mean.reshape(-1)
        std = posterior.variance.reshape(-1).clamp_min(0.0).sqrt()
    return [
        Recommendation(record.X_user[r, i].clone(), float(mean[r]), float(std[r]), i)
        for r, i in enumerate(index)
    ]


def _step(config: LoopConfig, bounds: torch.Tensor, records: list[QueryRecord]) -> tuple:
    """Every member's ``i``-th query and validated answer."""
    queries = [check_query(r.query, bounds) for r in records]
    answers = [
        validate_answer(X.shape[0], r.winner, r.ranking, tie=r.tie, ties=config.ties)
        for X, r in zip(queries, records, strict=True)
    ]
    return queries, answers


def _stacked(state: LoopState, fits: list[Hyperparameters]) -> Hyperparameters:
    """The members' fits as the batched model's parameters (trainable ones per member)."""
    model = state.groups[0].model
    values = {}
    for name, p in model.named_parameters():
        each = [h.values[name] for h in fits]
        if p.requires_grad:
            values[name] = torch.stack(each)
        elif all(torch.equal(v, each[0]) for v in each):
            values[name] = each[0]
        else:
            raise ValueError(f"the members differ in the shared parameter {name!r}.")
    return Hyperparameters(values, fits[0].n_answers)


def _member_fit(state: LoopState, r: int, k: int) -> Hyperparameters:
    """Member ``r``'s fit after ``k`` answers, as its own optimiser's parameters."""
    model = state.groups[0].model
    return Hyperparameters(
        {
            name: (p[r] if p.requires_grad else p).detach().clone()
            for name, p in model.named_parameters()
        },
        k,
    )
