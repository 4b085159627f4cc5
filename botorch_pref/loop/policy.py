r"""The query policy: which question the loop asks at query :math:`k`, as an ordered list of steps.

A :class:`QueryPolicy` is a list of steps. Each step says *when* it applies (its schedule, and
for some a condition on the member's state) and *what* it asks. For query :math:`k` (0-based)
of a member, :meth:`QueryPolicy.steps` takes the first step in the list that applies; the last
step must apply always. The schedules count *acquisition queries*, those after the
:class:`Initial` ones: a step with ``every = e`` applies to acquisition queries
:math:`e, 2e, 3e, \ldots` (1-based), i.e. query :math:`k` with
:math:`(k - n_\text{initial}) \bmod e = e - 1`.

The steps:

* :class:`Initial` ``(n)``: the first ``n`` queries are ``q`` uniform random designs;
* :class:`Local` ``(every, when, radius)``: the champion (the compared design with the highest
  posterior mean, the current recommendation) against the challenger that maximises the
  champion-challenger acquisition within a box around it;
* :class:`Lookahead` ``(every)``: the pair whose answer is expected to raise the best posterior
  mean among the leading compared designs the most
  (:class:`~botorch_pref.acquisition.LookaheadBestCompared`);
* :class:`Acquire` ``(strategy)``: the strategy's own question: ``"eubo"``
  (:math:`E[\max(g(x_1), g(x_2))]` over a pair), ``"qeubo"`` (:math:`E[\max_i g(x_i)]` over
  ``q`` options), ``"champion-challenger"`` (the champion :math:`c` against the :math:`x`
  maximising :math:`E[(g(x) - g(c))^+]`) or ``"random"`` (``q`` uniform designs).

The default policy (:func:`default_policy`, what ``strategy="eubo"`` builds) is

.. code-block:: python

    QueryPolicy([Initial(min(4 * d, 20)), Local(every=2, when="edge"), Lookahead(every=3),
                 Acquire("eubo")])

and says, step by step:

* **Initial**: :math:`4 d` random queries, the PBO protocol's, give the first lengthscale fits
  enough spread; capped at 20 so that a person is not asked 80 random questions in 20
  dimensions.
* **Local, every second acquisition query, when the champion is near the edge**: a global
  acquisition never asks about a design a short step from the champion (their difference has a
  small posterior variance, so EUBO prefers far-away partners), and where the kernel
  extrapolates a rising utility onto the boundary the recommendation stalls on the edge. The
  local query compares the champion with its neighbourhood directly. Around an interior
  champion the stall cannot happen, so the step does not apply there and the query falls
  through to the next step.
* **Lookahead, every third acquisition query**: EUBO never asks about a compared design again,
  so a design that won its only comparison by luck can stay the recommendation while the
  questions explore elsewhere; the lookahead question puts the leading designs to the test.
  A local query due at the same time comes first (it is earlier in the list).
* **Acquire EUBO** otherwise: the expected utility of the best option, the question of
  BoTorch's own pipeline.

So with ``strategy="eubo"`` an interior run asks EUBO at acquisition queries 1, 2, 4, 5, 7,
... and the lookahead at 3, 6, 9, ...; a run whose champion sits on the edge asks local queries
at 2, 4, 6, ... instead. :func:`strategy_policy` builds the policy of the other strategies the
same way: champion-challenger has no lookahead step (it compares the champion every time), and
``q > 2`` queries, random queries, answers modelled as choices and custom model factories have
neither local nor lookahead steps. Measured effects are in the documentation's benchmark
tables.

A policy of one's own is a list of steps: BoTorch's PBO pipeline (random initial queries, then
EUBO on every query) is

.. code-block:: python

    policy = QueryPolicy([Initial(8), Acquire("eubo")])
    opt = PreferenceOptimizer(bounds, policy=policy, seed=0)
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from torch import Tensor

from botorch_pref.acquisition import (
    ChampionChallenger,
    LookaheadBestCompared,
    make_eubo,
    make_qeubo,
)
from botorch_pref.acquisition.local import LocalBox, local_box, near_boundary
from botorch_pref.loop.backends import Acquisition, Backend, ModelGroup
from botorch_pref.loop.config import (
    ANSWER_SETTINGS,
    MODEL_SETTINGS,
    LoopConfig,
    answers_from_settings,
    model_from_settings,
    nonnegative_int,
    positive_int,
)
from botorch_pref.loop.seeding import Stream, derived_seed

__all__ = [
    "CONFIG_SETTINGS",
    "LOOKAHEAD_DESIGNS",
    "POLICY_SETTINGS",
    "SETTINGS",
    "STRATEGIES",
    "Acquire",
    "Initial",
    "Local",
    "Lookahead",
    "QueryPolicy",
    "Step",
    "configure",
    "default_policy",
    "strategy_policy",
]

#: The strategies of :class:`Acquire`: analytic EUBO on pairs, Monte-Carlo qEUBO on ``q``
#: options, champion-challenger, and uniformly random queries (the baseline).
STRATEGIES = ("eubo", "qeubo", "champion-challenger", "random")
#: When a due local query is asked: ``"edge"``, only around a champion within ``radius`` of
#: the unit cube's boundary, or ``"always"``.
LOCAL_WHEN = ("edge", "always")
#: A lookahead query looks at this many compared designs, those with the highest posterior means.
LOOKAHEAD_DESIGNS = 8
#: The default number of random initial queries in ``d`` dimensions: :math:`\min(4 d, 20)`.
INITIAL_PER_DIM, INITIAL_CAP = 4, 20
#: The default schedules of the local and the lookahead steps, and the local box's half-width.
DEFAULT_LOCAL_EVERY, DEFAULT_LOOKAHEAD_EVERY, DEFAULT_LOCAL_RADIUS = 2, 3, 0.05


class StateView(Protocol):
    """What a step reads of the loop's state (:class:`~botorch_pref.loop.state.LoopState`)."""

    config: LoopConfig
    seeds: list[int]
    backend: Backend

    def champions(self, members: Sequence[int]) -> list[int]:
        """Each member's champion: its compared design with the highest posterior mean."""

    def designs_at(
        self, members: Sequence[int], indices: Sequence[int], unit: bool = True
    ) -> Tensor:
        """Design ``indices[j]`` of member ``members[j]``, stacked."""

    def top_compared(self, members: Sequence[int], k: int) -> Tensor:
        """Each member's ``k`` compared designs with the highest posterior means."""


class Step:
    """A step of a :class:`QueryPolicy`: when it applies, and what it asks.

    Subclasses set ``random`` (the step asks uniform random designs) or implement
    :meth:`acquisition`; they may narrow :meth:`due` (the schedule) and :meth:`applies`
    (a condition on each member's state), and :meth:`check` the run's settings.
    """

    #: Whether the step asks ``q`` uniform random designs (no acquisition function).
    random: bool = False

    def due(self, k: int, start: int) -> bool:
        """Whether query ``k`` is on the step's schedule (``start``: the first acquisition
        query, the number of initial ones)."""
        return True

    def applies(self, state: StateView, group: ModelGroup) -> Tensor | None:
        """Which members of ``group`` the due step applies to (``members`` booleans), or
        ``None`` for all of them."""
        return None

    def check(self, config: LoopConfig) -> None:
        """Raise a ``ValueError`` if the step cannot ask questions of a run with ``config``."""

    def acquisition(self, state: StateView, group: ModelGroup, k: int) -> Acquisition:
        """``group``'s acquisition function for query ``k``."""
        raise ValueError(f"{self!r} asks random designs: it has no acquisition function.")


def _every(k: int, start: int, every: int) -> bool:
    """Whether query ``k`` is the ``every``-th, ``2 every``-th, ... acquisition query."""
    return bool(every) and k >= start and (k - start) % every == every - 1


def _pairs(config: LoopConfig, what: str, answers: bool = False) -> None:
    """Raise a ``ValueError`` unless ``config`` asks pairs (and models them as pairs)."""
    if config.q != 2 or (answers and config.answers.mode != "pairs"):
        raise ValueError(
            f"{what}: they need q = 2{' and answers=pairs' if answers else ''}, got "
            f"q = {config.q} and answers={config.answers.mode!r}."
        )


@dataclass(frozen=True)
class Initial(Step):
    """The first ``n`` queries: ``q`` uniform random designs each."""

    n: int
    random = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", nonnegative_int(self.n, "n_initial"))

    def due(self, k: int, start: int) -> bool:
        return k < self.n


@dataclass(frozen=True)
class Local(Step):
    """Every ``every``-th acquisition query, the champion against its best neighbour.

    The challenger maximises the champion-challenger acquisition (``variant``, see
    :class:`~botorch_pref.acquisition.ChampionChallenger`) within the box of half-width
    ``radius`` around the champion on the unit cube (:mod:`botorch_pref.acquisition.local`).
    ``when="edge"``: only for a member whose champion lies within ``radius`` of the boundary
    (its box is clipped; the others fall through to the next step); ``"always"``: every member.
    """

    every: int = DEFAULT_LOCAL_EVERY
    when: str = "edge"
    radius: float = DEFAULT_LOCAL_RADIUS
    variant: str = "joint"

    def __post_init__(self) -> None:
        object.__setattr__(self, "every", positive_int(self.every, "local_every"))
        r = self.radius
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 < r <= 0.5:
            raise ValueError(f"local_radius must be a number in (0, 0.5], got {r!r}.")
        object.__setattr__(self, "radius", float(r))
        if self.when not in LOCAL_WHEN:
            raise ValueError(
                f"local_when must be one of {', '.join(LOCAL_WHEN)}; got {self.when!r}."
            )
        _check_variant(self.variant)

    def due(self, k: int, start: int) -> bool:
        return _every(k, start, self.every)

    def applies(self, state: StateView, group: ModelGroup) -> Tensor | None:
        if self.when == "always":
            return None
        center = state.designs_at(group.members, state.champions(group.members))
        return near_boundary(center, self.radius).cpu()

    def check(self, config: LoopConfig) -> None:
        _pairs(config, "local queries are pairs of the champion and a challenger")

    def acquisition(self, state: StateView, group: ModelGroup, k: int) -> Acquisition:
        acqf, champions = _challenger(state, group, self.variant)
        X = state.designs_at(group.members, champions)
        return Acquisition(LocalBox(acqf, *local_box(X, self.radius)), 1, champions)


@dataclass(frozen=True)
class Lookahead(Step):
    """Every ``every``-th acquisition query, the pair that maximises
    :class:`~botorch_pref.acquisition.LookaheadBestCompared` over each member's ``designs``
    compared designs with the highest posterior means (its optimiser also starts from every
    pair of them)."""

    every: int = DEFAULT_LOOKAHEAD_EVERY
    designs: int = LOOKAHEAD_DESIGNS

    def __post_init__(self) -> None:
        object.__setattr__(self, "every", positive_int(self.every, "lookahead_every"))
        object.__setattr__(self, "designs", positive_int(self.designs, "designs"))

    def due(self, k: int, start: int) -> bool:
        return _every(k, start, self.every)

    def check(self, config: LoopConfig) -> None:
        _pairs(config, "lookahead queries are pairs answered by a pair likelihood", answers=True)

    def acquisition(self, state: StateView, group: ModelGroup, k: int) -> Acquisition:
        top = state.top_compared(group.members, self.designs)
        acqf = LookaheadBestCompared(group.model, top if state.backend.batched else top[0])
        initial = acqf.compared_pairs().reshape(len(group.members), -1, 2, state.config.dim)
        return Acquisition(acqf, 2, None, initial)


@dataclass(frozen=True)
class Acquire(Step):
    """The strategy's own question, on every query no earlier step takes.

    Args:
        strategy: ``"eubo"``, ``"qeubo"``, ``"champion-challenger"`` or ``"random"``.
        mc_samples: qEUBO's quasi-Monte-Carlo samples.
        variant: Champion-challenger's acquisition: ``"joint"`` (the expected improvement over
            the champion under the joint posterior) or ``"marginal"`` (Brochu's).
    """

    strategy: str = "eubo"
    mc_samples: int = 128
    variant: str = "joint"

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"strategy must be one of {', '.join(STRATEGIES)}; got {self.strategy!r}."
            )
        object.__setattr__(self, "mc_samples", positive_int(self.mc_samples, "mc_samples"))
        _check_variant(self.variant)
        object.__setattr__(self, "random", self.strategy == "random")

    @property
    def q_opt(self) -> int | None:
        """The points the strategy's optimiser places: 2 for EUBO, 1 for the challenger,
        ``None`` (``q``) otherwise."""
        return {"eubo": 2, "champion-challenger": 1}.get(self.strategy)

    def check(self, config: LoopConfig) -> None:
        if self.strategy in ("eubo", "champion-challenger") and config.q != 2:
            raise ValueError(
                f"strategy {self.strategy!r} asks about pairs (q = 2); use 'qeubo' or 'random' "
                f"for q = {config.q}."
            )

    def acquisition(self, state: StateView, group: ModelGroup, k: int) -> Acquisition:
        if self.strategy == "eubo":
            return Acquisition(make_eubo(group.model), 2)
        if self.strategy == "qeubo":
            seeds = [derived_seed(state.seeds[r], k, Stream.ACQF) % 2**31 for r in group.members]
            seed = seeds if state.backend.batched else seeds[0]  # each member's own base samples
            acqf = make_qeubo(group.model, self.mc_samples, seed=seed)
            return Acquisition(acqf, state.config.q)
        if self.strategy == "random":
            return super().acquisition(state, group, k)
        acqf, champions = _challenger(state, group, self.variant)
        return Acquisition(acqf, 1, champions)


def _check_variant(variant: str) -> None:
    if variant not in ("joint", "marginal"):
        raise ValueError(f"champion_variant must be 'joint' or 'marginal', got {variant!r}.")


def _challenger(
    state: StateView, group: ModelGroup, variant: str
) -> tuple[ChampionChallenger, list[int]]:
    """The champion-challenger acquisition of ``group``'s members and their champions."""
    champions = state.champions(group.members)
    X = state.designs_at(group.members, champions)
    acqf = ChampionChallenger(
        group.model, X if state.backend.batched else X[0], variant=variant, log=True
    )
    return acqf, champions


class QueryPolicy:
    """An ordered list of steps; query ``k`` of a member asks the first step that applies.

    Args:
        steps: The steps, in order of precedence. The last one must be due at every query
            (an :class:`Acquire` step); an :class:`Initial` step, if any, comes first.
        settings: The arguments the policy was built from (:func:`strategy_policy`), kept for
            the record (a session stores them); ``{}`` for a policy of one's own.
    """

    def __init__(self, steps: Sequence[Step], settings: dict[str, Any] | None = None) -> None:
        steps = list(steps)
        if not steps or not all(isinstance(s, Step) for s in steps):
            raise ValueError(f"a policy is a non-empty list of steps, got {steps!r}.")
        if not isinstance(steps[-1], Acquire):
            raise ValueError(f"a policy's last step must be an Acquire step, got {steps[-1]!r}.")
        if any(isinstance(s, Initial) for s in steps[1:]):
            raise ValueError("an Initial step must come first.")
        self.steps = steps
        self.settings = dict(settings or {})

    def __repr__(self) -> str:
        return f"QueryPolicy({self.steps!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QueryPolicy) and self.steps == other.steps

    @property
    def n_initial(self) -> int:
        """The number of random initial queries (the first acquisition query)."""
        first = self.steps[0]
        return first.n if isinstance(first, Initial) else 0

    @property
    def strategy(self) -> str:
        """The strategy of the last step (the question of every query no other step takes)."""
        return self.steps[-1].strategy

    def check(self, config: LoopConfig) -> None:
        """Raise a ``ValueError`` if a step cannot ask questions of a run with ``config``."""
        for step in self.steps:
            step.check(config)

    def due(self, k: int) -> list[Step]:
        """The steps on their schedule at query ``k``, in order (the last is always due)."""
        return [s for s in self.steps if s.due(k, self.n_initial)]

    def steps_for(self, state: StateView, group: ModelGroup, k: int) -> list[Step]:
        """The step each member of ``group`` asks at query ``k``: the first due one that
        applies to it."""
        chosen: list[Step | None] = [None] * len(group.members)
        for step in self.due(k):
            mask = step.applies(state, group)
            for j, todo in enumerate(chosen):
                if todo is None and (mask is None or bool(mask[j])):
                    chosen[j] = step
            if all(s is not None for s in chosen):
                break
        return chosen


def default_policy(dim: int) -> QueryPolicy:
    """The default policy in ``dim`` dimensions (``strategy="eubo"``; why: module docstring)."""
    return QueryPolicy(
        [
            Initial(min(4 * dim, 20)),
            Local(every=2, when="edge"),
            Lookahead(every=3),
            Acquire("eubo"),
        ]
    )


def strategy_policy(
    strategy: str,
    config: LoopConfig,
    *,
    n_initial: int | None = None,
    mc_samples: int = 128,
    champion_variant: str = "joint",
    local_every: int | None = None,
    local_radius: float = DEFAULT_LOCAL_RADIUS,
    local_when: str = "edge",
    lookahead_every: int | None = None,
) -> QueryPolicy:
    """The policy ``strategy=`` builds for a run with ``config`` (the module docstring says
    which steps each strategy has, and why).

    Args:
        strategy: The :class:`Acquire` step's strategy.
        config: The run's settings (``q``, ``answers`` and ``model`` decide the defaults).
        n_initial: Random initial queries (default :math:`\\min(4 d, 20)`).
        mc_samples: qEUBO's quasi-Monte-Carlo samples.
        champion_variant: Champion-challenger's variant (also the local step's).
        local_every: The :class:`Local` step's schedule; ``0``: no local step; ``None``: 2 for
            pair queries of an acquisition strategy, else ``0``.
        local_radius: The local box's half-width, in ``(0, 0.5]``.
        local_when: ``"edge"`` or ``"always"`` (see :class:`Local`).
        lookahead_every: The :class:`Lookahead` step's schedule; ``0``: none; ``None``: 3 for
            EUBO and qEUBO pair queries of a named model with pair answers, else ``0``.

    Returns:
        The policy, with these arguments resolved in its ``settings``.
    """
    acquire = Acquire(strategy, mc_samples, champion_variant)
    if n_initial is None:
        n_initial = min(INITIAL_PER_DIM * config.dim, INITIAL_CAP)
    pairs = config.q == 2 and strategy != "random"
    lookahead = pairs and config.answers.mode == "pairs" and strategy in ("eubo", "qeubo")
    got = f"got q = {config.q}, answers={config.answers.mode!r} and strategy {strategy!r}"
    local_every = _schedule(
        local_every,
        "local_every",
        DEFAULT_LOCAL_EVERY if pairs else 0,
        pairs,
        "local queries are pairs of the champion and a challenger: they need q = 2 and an "
        f"acquisition strategy, {got}",
    )
    lookahead_every = _schedule(
        lookahead_every,
        "lookahead_every",
        DEFAULT_LOOKAHEAD_EVERY if lookahead and config.packaged_model else 0,
        pairs and config.answers.mode == "pairs",
        "lookahead queries are pairs answered by a pair likelihood: they need q = 2, "
        f"answers='pairs' and an acquisition strategy, {got}",
    )
    local = Local(local_every or 1, local_when, local_radius, champion_variant)
    steps: list[Step] = [Initial(n_initial)]
    steps += [local] if local_every else []
    steps += [Lookahead(lookahead_every)] if lookahead_every else []
    settings = {
        "strategy": strategy,
        "n_initial": steps[0].n,
        "mc_samples": acquire.mc_samples,
        "champion_variant": champion_variant,
        "local_every": local_every,
        "local_radius": local.radius,
        "local_when": local_when,
        "lookahead_every": lookahead_every,
    }
    policy = QueryPolicy([*steps, acquire], settings)
    policy.check(config)
    return policy


def _schedule(value: Any, name: str, default: int, allowed: bool, needs: str) -> int:
    """The schedule ``name`` (every ``value``-th acquisition query; ``None``: ``default``) as an
    integer ``>= 0``; a schedule other than ``0`` where not ``allowed`` raises a ``ValueError``
    that says what it ``needs``."""
    every = nonnegative_int(default if value is None else value, name)
    if every and not allowed:
        raise ValueError(f"{name}={every}: {needs}; use {name}=0.")
    return every


#: The settings of a run besides its query policy (:class:`LoopConfig`'s fields a caller
#: chooses; the dimension comes from the bounds, ``q`` is an argument of its own).
CONFIG_SETTINGS = tuple(
    f.name for f in dataclasses.fields(LoopConfig) if f.init and f.name not in ("dim", "q")
)
#: The settings ``strategy=`` builds the query policy from (:func:`strategy_policy`).
POLICY_SETTINGS = tuple(
    name
    for name, p in inspect.signature(strategy_policy).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
)
#: Every keyword setting of a run besides ``strategy``, ``q`` and ``policy``: the config's,
#: the model factory's (:data:`~botorch_pref.loop.config.MODEL_SETTINGS`), the answer
#: format's (:data:`~botorch_pref.loop.config.ANSWER_SETTINGS`), then the policy's.
SETTINGS = CONFIG_SETTINGS + MODEL_SETTINGS + ANSWER_SETTINGS + POLICY_SETTINGS


def configure(
    dim: int,
    strategy: str | None,
    q: int,
    policy: QueryPolicy | None,
    settings: dict[str, Any],
) -> tuple[LoopConfig, QueryPolicy]:
    """The config and the policy of a run from its keyword settings (:data:`SETTINGS`).

    Args:
        dim: The design dimension.
        strategy: The strategy ``strategy_policy`` builds the policy for (``None``: ``"eubo"``);
            not with ``policy``.
        q: Options per query.
        policy: A policy of one's own, or ``None``.
        settings: The config's settings, the model factory's, the answer format's and,
            without ``policy``, the policy's.

    Raises:
        TypeError: For an unknown setting.
        ValueError: For a bad setting, or ``policy`` with ``strategy`` or its settings.
    """
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise TypeError(f"unknown settings {unknown}; known: {', '.join(SETTINGS)}.")
    shaping = [k for k in POLICY_SETTINGS if k in settings]
    if policy is not None and (strategy is not None or shaping):
        given = ["strategy"] * (strategy is not None) + shaping
        raise ValueError(f"give either policy= or strategy= and its settings, got both: {given}.")
    given = {k: v for k, v in settings.items() if k in CONFIG_SETTINGS}
    model = settings.get("model", "laplace")
    given["model"] = model_from_settings(
        model, **{k: settings[k] for k in MODEL_SETTINGS if k in settings}
    )
    if any(k in settings for k in ANSWER_SETTINGS):
        given["answers"] = answers_from_settings(
            settings.get("answers", "auto"),
            **{k: settings[k] for k in ANSWER_SETTINGS if k in settings},
        )
    config = LoopConfig(dim, q, **given)
    if policy is None:
        shaped = {k: settings[k] for k in shaping}
        policy = strategy_policy("eubo" if strategy is None else strategy, config, **shaped)
    elif not isinstance(policy, QueryPolicy):
        raise ValueError(f"policy must be a QueryPolicy, got {policy!r}.")
    return config, policy
