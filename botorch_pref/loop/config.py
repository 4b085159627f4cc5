r"""The loop's settings: every default and every check, in one place.

:class:`LoopConfig` holds what a preference-optimisation run needs besides its answers: the
strategy, the number of options per query, the random initial queries, the model, the refit
schedule, the acquisition optimiser's effort, the encoding of answers, the device, the dtype
and the seed. :class:`~botorch_pref.loop.PreferenceOptimizer` and
:func:`~botorch_pref.loop.run_replications` both build one, so a study of replications runs
with exactly the settings a person's run would get.

Defaults and why:

* ``n_initial = min(4 d, 20)`` random queries: the PBO protocol's :math:`4 d` (enough spread
  for the first lengthscale fits), capped so that a person is not asked 80 random questions in
  20 dimensions. Benchmarks that follow the protocol pass ``n_initial = 4 d``.
* Refits after every answer for the first ``refit_all_until = 30`` answers (the
  hyperparameters move most while data are few), then after every ``refit_every = 5``-th.
* Acquisition effort: BoTorch's PBO pipeline uses :math:`d q'` restarts and :math:`30 d q'`
  raw samples (:math:`q'` the number of points optimised jointly: 2 for EUBO pairs, ``q`` for
  qEUBO, 1 for the challenger); they are clipped to ``[4, 10]`` restarts and ``[128, 512]`` raw
  samples (:func:`acquisition_effort`): few enough for an interactive ``ask`` in six
  dimensions, enough for the multi-modal acquisition in two.
* ``mc_samples = 128`` scrambled-Sobol base samples for qEUBO.
* ``answers = "auto"``: a ``q > 2`` answer is a choice among ``q`` options (a ranking a
  Plackett-Luce ranking), both modelled by :class:`~botorch_pref.likelihoods.Ranking`; pairs
  use the probit pair likelihood. ``ties=True`` makes the pair likelihood ordinal
  (:class:`~botorch_pref.likelihoods.PairwiseProbit` with a fitted tie threshold).
* ``kernel = "matern32"`` for the Laplace models (:data:`DEFAULT_KERNEL`): a Matern 3/2 kernel
  trusts its interpolation less far from the compared designs than the RBF kernel, so the
  acquisition looks closer to the best designs instead of leaning on a smooth extrapolation;
  measured on the question-quality suite (``benchmarks/pbo.py --suite``, figures in
  ``benchmarks/RESULTS.md``) it gave better questions on average and on most problems there
  (not on all). The lengthscale prior (``"gamma"``) and the probit link stay: the alternatives
  measured no better.
* ``inference = "ep"`` for probit pair answers (:data:`DEFAULT_INFERENCE`): the posterior the
  acquisition and the recommendation see, and the evidence the hyperparameters are fitted by,
  are expectation propagation's (:mod:`botorch_pref.inference.ep`). The Laplace approximation
  centres a skewed posterior at its mode and misstates the evidence; EP's are close to the exact
  ones. On the question-quality suite, with common random numbers, it found better designs on
  average, also on the problems outside it (most on Branin), and worse on no suite problem by
  more than one standard error, for up to about a third more time per query (figures in
  ``benchmarks/RESULTS.md``). Answers EP does not model (choices among more than two options,
  the logit link) keep the Laplace approximation, and so do ties (``ties=True``, the sessions'
  default): EP models them too (``inference="ep"``), but with the tie threshold in the model it
  measured no better on the suite, and worse on Hartmann-3 in 10 dimensions with users who
  answer "no preference".
* ``local_every = 2``, ``local_radius = 0.05``, ``local_when = "edge"`` for pair queries:
  every second acquisition query is a *local* one when the champion (the compared design with
  the highest posterior mean, the current recommendation) lies within 0.05 of the boundary on
  the unit cube: the champion against the challenger that maximises the champion-challenger
  acquisition within the box of half-width 0.05 around it. A global acquisition never asks
  about a design a short step from the champion: their difference has a small posterior
  variance, so EUBO prefers far-away partners, and where the kernel extrapolates a rising
  utility onto the boundary (Branin's optimum lies 0.04 from its ``x1 = 10`` edge) the
  recommendation stalls on the edge. The local query compares the champion with its
  neighbourhood directly, so a better design next to it is found and recommended. Around an
  interior champion the stall cannot happen, and the query stays global (``local_when =
  "always"`` makes it local there too, which costs a little on problems with an interior
  optimum); figures in ``benchmarks/RESULTS.md``. Queries of ``q > 2`` options have none.
* ``lookahead_every = 3`` for EUBO and qEUBO pairs: every third acquisition query (a due
  local query comes first) asks the pair that maximises
  :class:`~botorch_pref.acquisition.LookaheadBestCompared` over the :data:`LOOKAHEAD_DESIGNS`
  compared designs with the highest posterior means: the pair whose answer is expected to
  raise the recommendation the most (its optimiser starts from every pair of those designs as
  well as from random pairs, since the best question is often about two of them). EUBO never
  asks about a compared design again, so a design that won its only comparison by luck can
  stay the recommendation for the rest of a run while the questions explore elsewhere; the
  lookahead question puts the leading designs to the test. Measured on the question-quality
  suite with 64 replications per problem it gains on average and on four of six problems, and
  costs none more than one standard error (figures in ``benchmarks/RESULTS.md``).
  Champion-challenger queries compare the champion every time and have none by default;
  ``q > 2`` queries, answers modelled as choices and custom model factories (whose likelihood
  the lookahead may not know) have none either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from botorch_pref.likelihoods import PairwiseLikelihood, PairwiseLogit, PairwiseProbit, Ranking
from botorch_pref.loop.answers import InvalidAnswerError, as_index
from botorch_pref.models.data import INFERENCES
from botorch_pref.models.factories import MODEL_FACTORIES, ModelFactory
from botorch_pref.models.kernels import BASE_KERNELS

__all__ = [
    "DEFAULT_INFERENCE",
    "DEFAULT_KERNEL",
    "LOOKAHEAD_DESIGNS",
    "STRATEGIES",
    "LoopConfig",
    "acquisition_effort",
]

#: The query strategies of the loop: analytic EUBO on pairs, Monte-Carlo qEUBO on ``q``
#: options, champion-challenger, and uniformly random queries (the baseline).
STRATEGIES = ("eubo", "qeubo", "champion-challenger", "random")

#: The Laplace models' base kernel when ``kernel`` is not given (module docstring).
DEFAULT_KERNEL = "matern32"
#: The Laplace models' posterior approximation when ``inference`` is not given and the answers
#: are probit pairs without ties (module docstring); ties and other answers take ``"laplace"``.
DEFAULT_INFERENCE = "ep"
#: Every this many-th acquisition query of a pair strategy is a local one (module docstring).
DEFAULT_LOCAL_EVERY = 2
#: Every this many-th acquisition query of EUBO and qEUBO pairs is a lookahead one (module
#: docstring).
DEFAULT_LOOKAHEAD_EVERY = 3
#: The strategies whose pair queries include lookahead ones by default: champion-challenger
#: already compares the champion in every query.
LOOKAHEAD_STRATEGIES = ("eubo", "qeubo")
#: A lookahead query looks at this many compared designs, those with the highest posterior means.
LOOKAHEAD_DESIGNS = 8
#: The half-width of a local query's box on the unit cube.
DEFAULT_LOCAL_RADIUS = 0.05
#: When a due local query is asked: ``"edge"``, only around a champion within
#: ``local_radius`` of the boundary (else the query is global), or ``"always"``.
LOCAL_WHEN = ("edge", "always")
#: The lengthscale priors of the Laplace models' kernel.
LENGTHSCALE_PRIORS = ("gamma", "dim_scaled")

# Caps on the acquisition optimiser's effort (see the module docstring).
MIN_RESTARTS, MAX_RESTARTS = 4, 10
MIN_RAW, MAX_RAW = 128, 512


def acquisition_effort(d: int, q_opt: int) -> tuple[int, int]:
    """Default restarts and raw samples for optimising ``q_opt`` points in ``d`` dimensions.

    Returns:
        ``(restarts, raw_samples)``: :math:`d q'` clipped to ``[4, 10]`` and :math:`30 d q'`
        clipped to ``[128, 512]``.
    """
    restarts = min(max(d * q_opt, MIN_RESTARTS), MAX_RESTARTS)
    return restarts, min(max(30 * d * q_opt, MIN_RAW), MAX_RAW)


def _setting_int(value: Any, name: str) -> int:
    """``value`` as an integer, else a plain ``ValueError``: a setting is not an answer."""
    try:
        return as_index(value, name)
    except InvalidAnswerError as err:
        raise ValueError(str(err)) from None


def positive_int(value: Any, name: str) -> int:
    """``value`` as an integer ``>= 1``, else a ``ValueError`` naming ``name``."""
    value = _setting_int(value, name)
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}.")
    return value


def nonnegative_int(value: Any, name: str) -> int:
    """``value`` as an integer ``>= 0``, else a ``ValueError`` naming ``name``."""
    value = _setting_int(value, name)
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value}.")
    return value


@dataclass(frozen=True)
class LoopConfig:
    """Validated settings of a preference-optimisation run (defaults in the module docstring).

    Every field given as ``None`` (or ``"auto"``) is resolved on construction, so a config
    always holds the values the run uses. Invalid values raise ``ValueError``.

    Args:
        dim: The design dimension :math:`d`.
        strategy: ``"eubo"``, ``"qeubo"``, ``"champion-challenger"`` or ``"random"``.
        q: Options per query (2 for EUBO and champion-challenger).
        n_initial: Random queries before the acquisition takes over.
        model: A name in :data:`~botorch_pref.models.factories.MODEL_FACTORIES` or a
            :data:`~botorch_pref.models.factories.ModelFactory`.
        refit_every: After ``refit_all_until`` answers, refit every this many answers.
        refit_all_until: Refit after every answer up to this many answers.
        num_restarts: Acquisition optimiser restarts.
        raw_samples: Acquisition optimiser raw samples.
        mc_samples: qEUBO's quasi-Monte-Carlo samples.
        answers: ``"choice"``, ``"pairs"`` or ``"auto"`` (how ``q > 2`` answers are modelled).
        ties: Accept "no preference" answers to pairs (needs ``answers="pairs"``).
        champion_variant: ``"joint"`` or ``"marginal"`` (Brochu's EI) for champion-challenger.
        lengthscale_prior: The kernel's lengthscale prior for the Laplace models: ``"gamma"``
            or ``"dim_scaled"`` (see :func:`~botorch_pref.models.kernels.make_covar_module`).
        kernel: The Laplace models' base kernel: ``"rbf"``, ``"matern52"`` or ``"matern32"``
            (see :func:`~botorch_pref.models.kernels.make_covar_module`); ``None``: the default
            :data:`DEFAULT_KERNEL` for ``model="laplace"`` and ``"laplace-box"``, the factory's
            own kernel for other models (resolved to ``None``).
        link: How a pair's answer depends on the utility gap: ``"probit"`` or ``"logit"``
            (:class:`~botorch_pref.likelihoods.PairwiseProbit` or
            :class:`~botorch_pref.likelihoods.PairwiseLogit`).
        inference: The Laplace models' posterior approximation: ``"laplace"`` or ``"ep"``
            (expectation propagation, :mod:`botorch_pref.inference.ep`; probit pairs, with or
            without ties). ``None``: :data:`DEFAULT_INFERENCE` for probit pairs without ties,
            ``"laplace"`` for ties and other answers, and ``None`` for other models (their own).
        local_every: Make every this many-th acquisition query (after the initial ones) a
            *local* query: the champion (the compared design with the highest posterior mean)
            against the challenger maximising the champion-challenger acquisition within the
            box of half-width ``local_radius`` around it on the unit cube
            (:mod:`botorch_pref.acquisition.local`). ``0``: never; ``None``: the default
            (:data:`DEFAULT_LOCAL_EVERY` for pair queries, ``0`` for ``q > 2`` and random
            queries). Local queries are pairs: ``q`` must be 2.
        local_radius: The half-width of a local query's box, in ``(0, 0.5]``.
        local_when: ``"edge"``: a due local query is asked only of a member whose champion
            lies within ``local_radius`` of the unit cube's boundary (its box is clipped),
            the others get a global query; ``"always"``: of every member.
        lookahead_every: Make every this many-th acquisition query (after the initial ones) a
            *lookahead* query, the pair maximising
            :class:`~botorch_pref.acquisition.LookaheadBestCompared`. ``0``: never; ``None``:
            the default (:data:`DEFAULT_LOOKAHEAD_EVERY` for EUBO and qEUBO pair queries of a
            built-in model with pair answers, else ``0``). A local query due at the same time
            comes first. Lookahead queries are pairs answered by a pair likelihood: ``q`` must
            be 2 and ``answers`` ``"pairs"``.
        device: Device of the model and of every tensor the loop returns.
        dtype: ``torch.float64`` or ``torch.float32``.
        seed: Seed of all randomness; ``None`` draws one from torch's global generator.
    """

    dim: int
    strategy: str = "eubo"
    q: int = 2
    n_initial: int | None = None
    model: str | ModelFactory = "laplace"
    refit_every: int = 5
    refit_all_until: int = 30
    num_restarts: int | None = None
    raw_samples: int | None = None
    mc_samples: int = 128
    answers: str = "auto"
    ties: bool = False
    champion_variant: str = "joint"
    lengthscale_prior: str = "gamma"
    kernel: str | None = None
    link: str = "probit"
    inference: str | None = None
    local_every: int | None = None
    local_radius: float = DEFAULT_LOCAL_RADIUS
    local_when: str = "edge"
    lookahead_every: int | None = None
    device: torch.device | str | None = None
    dtype: torch.dtype = torch.float64
    seed: int | None = None
    factory: ModelFactory = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        values = _resolve(self)
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def model_name(self) -> str:
        """The model's name (a factory's ``__name__`` for a custom factory)."""
        if isinstance(self.model, str):
            return self.model
        return getattr(self.model, "__name__", type(self.model).__name__)

    @property
    def q_opt(self) -> int:
        """The number of points the acquisition optimiser places (1 for the challenger)."""
        return {"eubo": 2, "champion-challenger": 1}.get(self.strategy, self.q)

    @property
    def tkwargs(self) -> dict[str, Any]:
        """``{"device": ..., "dtype": ...}`` of the run's tensors."""
        return {"device": self.device, "dtype": self.dtype}

    def refit_due(self, k: int) -> bool:
        """Whether the schedule refits the hyperparameters after the ``k``-th answer."""
        return k <= self.refit_all_until or k % self.refit_every == 0

    def local_due(self, k: int) -> bool:
        """Whether query ``k`` is due to be local (every ``local_every``-th acquisition query;
        with ``local_when="edge"`` only members with a champion near the boundary ask one)."""
        return self._every(k, self.local_every)

    def lookahead_due(self, k: int) -> bool:
        """Whether query ``k`` is due to be a lookahead query (every ``lookahead_every``-th
        acquisition query; a local query due at the same time comes first)."""
        return self._every(k, self.lookahead_every)

    def _every(self, k: int, every: int) -> bool:
        """Whether query ``k`` is the ``every``-th, ``2 every``-th, ... acquisition query."""
        if not every or k < self.n_initial:
            return False
        return (k - self.n_initial) % every == every - 1

    def likelihood(self) -> PairwiseLikelihood | None:
        """A fresh likelihood for the answers, or ``None`` for the model's default probit."""
        if self.answers == "choice":
            return Ranking()
        link = PairwiseLogit if self.link == "logit" else PairwiseProbit
        if self.ties:
            return link(tie_threshold=0.5)
        return PairwiseLogit() if self.link == "logit" else None

    def model_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the model factory besides the data (likelihood, priors)."""
        likelihood = self.likelihood()
        kwargs: dict[str, Any] = {} if likelihood is None else {"likelihood": likelihood}
        if self.lengthscale_prior != "gamma":
            kwargs["lengthscale_prior"] = self.lengthscale_prior
        if self.kernel not in (None, "rbf"):
            kwargs["base_kernel"] = self.kernel
        if self.inference == "ep":
            kwargs["inference"] = "ep"
        return kwargs


def _resolve(config: LoopConfig) -> dict[str, Any]:
    """Validated and resolved field values of ``config``."""
    if config.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {config.dtype}.")
    d = positive_int(config.dim, "dim")
    if config.strategy not in STRATEGIES:
        raise ValueError(
            f"strategy must be one of {', '.join(STRATEGIES)}; got {config.strategy!r}."
        )
    q = positive_int(config.q, "q")
    if q < 2:
        raise ValueError(f"A query needs q >= 2 options, got q = {config.q}.")
    if config.strategy in ("eubo", "champion-challenger") and q != 2:
        raise ValueError(
            f"strategy {config.strategy!r} asks about pairs (q = 2); use 'qeubo' or 'random' "
            f"for q = {config.q}."
        )
    n_initial = config.n_initial
    n_initial = min(4 * d, 20) if n_initial is None else nonnegative_int(n_initial, "n_initial")
    factory = _factory(config.model)
    restarts, raw = acquisition_effort(d, 1 if config.strategy == "champion-challenger" else q)
    if config.num_restarts is not None:
        restarts = positive_int(config.num_restarts, "num_restarts")
    if config.raw_samples is not None:
        raw = positive_int(config.raw_samples, "raw_samples")
    answers = config.answers
    if answers not in ("auto", "choice", "pairs"):
        raise ValueError(f"answers must be 'auto', 'choice' or 'pairs', got {answers!r}.")
    answers = ("choice" if q > 2 else "pairs") if answers == "auto" else answers
    ties = bool(config.ties)
    if ties and answers == "choice":
        raise ValueError(
            "ties=True needs answers='pairs': no tie model is defined for choices among "
            "more than two options."
        )
    if (answers == "choice" or ties) and config.model == "pairwisegp":
        raise ValueError(
            "model='pairwisegp' models pairs only; use answers='pairs' and ties=False, "
            "or model='laplace'."
        )
    if config.champion_variant not in ("joint", "marginal"):
        raise ValueError(
            f"champion_variant must be 'joint' or 'marginal', got {config.champion_variant!r}."
        )
    if config.lengthscale_prior not in LENGTHSCALE_PRIORS:
        raise ValueError(
            f"lengthscale_prior must be one of {', '.join(LENGTHSCALE_PRIORS)}, got "
            f"{config.lengthscale_prior!r}."
        )
    laplace = config.model in ("laplace", "laplace-box")
    kernel = config.kernel
    if kernel is None:
        kernel = DEFAULT_KERNEL if laplace else None
    elif kernel not in BASE_KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(BASE_KERNELS)}, got {kernel!r}.")
    custom = {"lengthscale_prior": ("gamma",), "kernel": (None,)}
    for name, defaults in custom.items():
        value = getattr(config, name)
        if value not in defaults and not laplace:
            raise ValueError(
                f"{name}={value!r} needs model='laplace' or 'laplace-box', got "
                f"{config.model_name!r}."
            )
    if config.link not in ("probit", "logit"):
        raise ValueError(f"link must be 'probit' or 'logit', got {config.link!r}.")
    if config.link == "logit" and config.model == "pairwisegp":
        raise ValueError("model='pairwisegp' has a probit link only; use link='probit'.")
    inference = _inference(config, laplace, answers, ties)
    local_every, radius, lookahead_every = _schedules(config, q, answers)
    seed = config.seed
    seed = int(torch.randint(0, 2**62, (1,)).item()) if seed is None else seed
    return {
        "dim": d,
        "q": q,
        "n_initial": n_initial,
        "refit_every": positive_int(config.refit_every, "refit_every"),
        "refit_all_until": nonnegative_int(config.refit_all_until, "refit_all_until"),
        "num_restarts": restarts,
        "raw_samples": raw,
        "mc_samples": positive_int(config.mc_samples, "mc_samples"),
        "answers": answers,
        "ties": ties,
        "kernel": kernel,
        "inference": inference,
        "local_every": local_every,
        "local_radius": radius,
        "lookahead_every": lookahead_every,
        "device": torch.device(config.device if config.device is not None else "cpu"),
        "seed": nonnegative_int(seed, "seed"),
        "factory": factory,
    }


def _inference(config: LoopConfig, laplace: bool, answers: str, ties: bool) -> str | None:
    """The validated posterior approximation of ``config`` (``answers`` and ``ties`` resolved):
    ``None`` for models other than the Laplace ones."""
    inference = config.inference
    if inference is not None and inference not in INFERENCES:
        raise ValueError(f"inference must be one of {', '.join(INFERENCES)}, got {inference!r}.")
    if not laplace:
        if inference not in (None, "laplace"):
            raise ValueError(
                f"inference={inference!r} needs model='laplace' or 'laplace-box', got "
                f"{config.model_name!r}."
            )
        return None
    probit_pairs = answers == "pairs" and config.link == "probit"
    if inference is None:
        return DEFAULT_INFERENCE if probit_pairs and not ties else "laplace"
    if inference == "ep" and not probit_pairs:
        raise ValueError(
            "inference='ep' needs probit pair answers (answers='pairs', link='probit'); use "
            "inference='laplace'."
        )
    return inference


def _schedules(config: LoopConfig, q: int, answers: str) -> tuple[int, float, int]:
    """Validated ``(local_every, local_radius, lookahead_every)`` of ``config`` (``q`` options
    per query, ``answers`` resolved): the schedules of the local and the lookahead pair
    queries."""
    pairs = q == 2 and config.strategy != "random"
    got = f"got q = {q}, answers={answers!r} and strategy {config.strategy!r}"
    local_every = _schedule(
        config.local_every,
        "local_every",
        DEFAULT_LOCAL_EVERY if pairs else 0,
        pairs,
        f"local queries are pairs of the champion and a challenger: they need q = 2 and an "
        f"acquisition strategy, {got}",
    )
    radius = config.local_radius
    if isinstance(radius, bool) or not isinstance(radius, (int, float)) or not 0 < radius <= 0.5:
        raise ValueError(f"local_radius must be a number in (0, 0.5], got {radius!r}.")
    if config.local_when not in LOCAL_WHEN:
        raise ValueError(
            f"local_when must be one of {', '.join(LOCAL_WHEN)}; got {config.local_when!r}."
        )
    pair_answers = pairs and answers == "pairs"
    lookahead_default = (
        pair_answers and config.strategy in LOOKAHEAD_STRATEGIES and isinstance(config.model, str)
    )
    lookahead_every = _schedule(
        config.lookahead_every,
        "lookahead_every",
        DEFAULT_LOOKAHEAD_EVERY if lookahead_default else 0,
        pair_answers,
        f"lookahead queries are pairs answered by a pair likelihood: they need q = 2, "
        f"answers='pairs' and an acquisition strategy, {got}",
    )
    return local_every, float(radius), lookahead_every


def _schedule(value: Any, name: str, default: int, allowed: bool, needs: str) -> int:
    """The schedule ``name`` (every ``value``-th acquisition query; ``None``: ``default``) as an
    integer ``>= 0``; a schedule other than ``0`` where not ``allowed`` raises a ``ValueError``
    that says what it ``needs``."""
    every = nonnegative_int(default if value is None else value, name)
    if every and not allowed:
        raise ValueError(f"{name}={every}: {needs}; use {name}=0.")
    return every


def _factory(model: Any) -> ModelFactory:
    if isinstance(model, str):
        if model not in MODEL_FACTORIES:
            raise ValueError(
                f"model must be one of {', '.join(MODEL_FACTORIES)} or a factory; got {model!r}."
            )
        return MODEL_FACTORIES[model]
    if callable(model):
        return model
    raise ValueError(f"model must be a name or a factory callable, got {model!r}.")
