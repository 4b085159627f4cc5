r"""The loop's settings that are not a query step's own: the model, the answers, the refit
schedule, the acquisition optimiser's effort, the device, the dtype and the seed.

:class:`LoopConfig` holds what a preference-optimisation run needs besides its answers and its
query policy (:mod:`~botorch_pref.loop.policy`, which says what each query asks). The Laplace
models' kernel and posterior approximation are arguments of the loop's model factory,
:class:`LaplaceFactory`, which ``model="laplace"`` builds with the loop's defaults.
:class:`~botorch_pref.loop.PreferenceOptimizer` and :func:`~botorch_pref.loop.run_replications`
both build one, so a study of replications runs with exactly the settings a person's run would
get.

Defaults and why:

* Refits after every answer for the first ``refit_all_until = 30`` answers (the
  hyperparameters move most while data are few), then after every ``refit_every = 5``-th.
* Acquisition effort: BoTorch's PBO pipeline uses :math:`d q'` restarts and :math:`30 d q'`
  raw samples (:math:`q'` the number of points the strategy optimises jointly: 2 for EUBO
  pairs, ``q`` for qEUBO, 1 for the challenger); they are clipped to ``[4, 10]`` restarts and
  ``[128, 512]`` raw samples (:func:`acquisition_effort`): few enough for an interactive
  ``ask`` in six dimensions, enough for the multi-modal acquisition in two.
* ``answers = "auto"``: a ``q > 2`` answer is a choice among ``q`` options (a ranking a
  Plackett-Luce ranking), both modelled by :class:`~botorch_pref.likelihoods.Ranking`; pairs
  use the probit pair likelihood. ``ties=True`` makes the pair likelihood ordinal
  (:class:`~botorch_pref.likelihoods.PairwiseProbit` with a fitted tie threshold).
* Graded comparisons and ratings are opt-in (:func:`answers_from_settings`):
  ``answers="graded", levels=5`` asks a pair's winner how much better it is on a ``levels``-level
  scale ("A much better" ... "about the same" ... "B much better"; ``levels`` defaults to 5),
  ``ratings=k`` takes a rating of each option on ``k`` levels beside (or instead of) the
  comparison (:mod:`~botorch_pref.loop.answers` states the scales). Both are modelled by
  :class:`~botorch_pref.likelihoods.PairwiseProbit` with fitted thresholds
  (:mod:`~botorch_pref.likelihoods.ordinal`). Graded comparisons take expectation propagation
  as untied binary pairs do (on the suite's answers study it found better designs than the
  Laplace approximation of the same answers); ratings keep the Laplace approximation (EP
  models them too, unmeasured in the loop: ``inference="ep"``). On a graded scale "no
  preference" is the middle level of an odd scale: ``ties`` resolves to whether the scale has
  one.
* The loop's model is not the model class's default. :class:`~botorch_pref.models.pairwise.
  PairwiseLaplaceGP` on its own (BoTorch's drop-in for ``PairwiseGP``) has a scaled ARD RBF
  kernel and the Laplace approximation, so that it does at least as well as ``PairwiseGP`` on
  BoTorch's own flows; the loop's factory (:class:`LaplaceFactory`) passes
  ``kernel = "matern32"`` (:data:`DEFAULT_KERNEL`) and, for probit pairs without ties,
  ``inference = "ep"`` (:data:`DEFAULT_INFERENCE`) explicitly, because they asked better
  questions on the question-quality suite (graded comparisons too, above). A Matern 3/2
  kernel trusts its interpolation less far from the compared designs, so the acquisition
  looks closer to the best designs; expectation propagation's posterior and evidence are
  close to the exact ones where the Laplace approximation centres a skewed posterior at its
  mode. Choices among more than two options (which EP does not model) and ratings keep the
  Laplace approximation, and so do binary answers with ties (``ties=True``, the sessions'
  default): with the tie threshold in the model EP measured no better.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any

import torch
from botorch.models.model import Model
from gpytorch.mlls import MarginalLogLikelihood
from torch import Tensor

from botorch_pref.checks import strict_int
from botorch_pref.data.preferences import PreferenceData
from botorch_pref.likelihoods import PairwiseLikelihood, PairwiseProbit, Ranking
from botorch_pref.loop.answers import AnswerFormat
from botorch_pref.models.data import INFERENCES
from botorch_pref.models.factories import (
    MODEL_FACTORIES,
    ModelFactory,
    laplace_box_model,
    laplace_model,
    pairwisegp_model,
)
from botorch_pref.models.kernels import BASE_KERNELS

__all__ = [
    "ANSWER_SETTINGS",
    "DEFAULT_GRADED_LEVELS",
    "DEFAULT_INFERENCE",
    "DEFAULT_KERNEL",
    "MODEL_SETTINGS",
    "LaplaceFactory",
    "LoopConfig",
    "acquisition_effort",
    "answers_from_settings",
    "model_from_settings",
]

#: The loop's base kernel for the Laplace models when ``kernel`` is not given (module
#: docstring: the model class's own default is the RBF kernel).
DEFAULT_KERNEL = "matern32"
#: The loop's posterior approximation for the Laplace models when ``inference`` is not given
#: and the answers are probit pairs without ties or graded pairs without ratings (module
#: docstring: the model class's own default is the Laplace approximation); other answers take
#: ``"laplace"``.
DEFAULT_INFERENCE = "ep"
#: The graded scale's number of levels of ``answers="graded"`` without ``levels``.
DEFAULT_GRADED_LEVELS = 5
#: The values of the ``answers`` keyword (``"graded"``: pairs on a graded scale).
ANSWER_KEYWORDS = ("auto", "choice", "pairs", "graded")
#: The model names :class:`LaplaceFactory` builds (``box``: ``"laplace-box"``).
LAPLACE_MODELS = ("laplace", "laplace-box")

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


def positive_int(value: Any, name: str) -> int:
    """``value`` as an integer ``>= 1``, else a ``ValueError`` naming ``name``."""
    return strict_int(value, name, 1)


def nonnegative_int(value: Any, name: str) -> int:
    """``value`` as an integer ``>= 0``, else a ``ValueError`` naming ``name``."""
    return strict_int(value, name, 0)


@dataclass(frozen=True)
class LaplaceFactory:
    """The loop's Laplace models: a model factory with its kernel and posterior approximation.

    ``model="laplace"`` is ``LaplaceFactory()`` and ``model="laplace-box"``
    ``LaplaceFactory(box=True)``; the keyword settings ``kernel=`` and ``inference=`` of the
    optimiser (:func:`model_from_settings`) set its fields. It calls
    :func:`~botorch_pref.models.factories.laplace_model` (``box``:
    :func:`~botorch_pref.models.factories.laplace_box_model`) with its kernel and inference
    passed explicitly, since the model class's own defaults differ (module docstring).

    Args:
        kernel: The base kernel: ``"rbf"``, ``"matern52"`` or ``"matern32"`` (see
            :func:`~botorch_pref.models.kernels.make_covar_module`).
        inference: The posterior approximation: ``"laplace"`` or ``"ep"`` (expectation
            propagation, :mod:`botorch_pref.inference.ep`; probit pairs, with or without ties).
            ``None``: resolved for the run's answers by :meth:`for_answers`
            (:data:`DEFAULT_INFERENCE` for probit pairs without ties and for graded pairs
            without ratings, else ``"laplace"``).
        box: ``PairwiseGP``'s flat outputscale prior
            (:func:`~botorch_pref.models.factories.box_covar_module`).
    """

    kernel: str = DEFAULT_KERNEL
    inference: str | None = None
    box: bool = False

    def __post_init__(self) -> None:
        if self.kernel not in BASE_KERNELS:
            raise ValueError(
                f"kernel must be one of {', '.join(BASE_KERNELS)}, got {self.kernel!r}."
            )
        if self.inference is not None and self.inference not in INFERENCES:
            raise ValueError(
                f"inference must be one of {', '.join(INFERENCES)}, got {self.inference!r}."
            )
        object.__setattr__(self, "box", bool(self.box))

    @property
    def name(self) -> str:
        """The model's name: ``"laplace"`` or ``"laplace-box"``."""
        return LAPLACE_MODELS[self.box]

    def for_answers(self, answers: AnswerFormat, ties: bool) -> LaplaceFactory:
        """The factory with its inference resolved for the answer format and ``ties``; EP
        given for choices among ``q > 2`` options raises a ``ValueError``."""
        inference = self.inference
        pairs = answers.mode == "pairs"
        if inference is None:
            untied = answers.binary and not ties
            graded = answers.graded and answers.ratings is None
            inference = DEFAULT_INFERENCE if pairs and (untied or graded) else "laplace"
        elif inference == "ep" and not pairs:
            raise ValueError(
                "inference='ep' needs probit pair answers (answers='pairs' or 'graded'); "
                "use inference='laplace'."
            )
        return (
            self if inference == self.inference else dataclasses.replace(self, inference=inference)
        )

    def __call__(
        self,
        datapoints: Tensor,
        comparisons: Tensor | PreferenceData,
        likelihood: PairwiseLikelihood | None = None,
    ) -> tuple[Model, MarginalLogLikelihood]:
        """The model of ``datapoints`` and ``comparisons`` and its evidence (see
        :func:`~botorch_pref.models.factories.laplace_model`)."""
        factory = laplace_box_model if self.box else laplace_model
        return factory(
            datapoints,
            comparisons,
            likelihood,
            base_kernel=self.kernel,
            inference="laplace" if self.inference is None else self.inference,
        )


def model_from_settings(
    model: str | ModelFactory = "laplace",
    *,
    kernel: str | None = None,
    inference: str | None = None,
) -> str | ModelFactory:
    """A run's model from its keyword settings: ``model`` with the Laplace factory's arguments.

    Args:
        model: A name in :data:`~botorch_pref.models.factories.MODEL_FACTORIES`, a
            :class:`LaplaceFactory` or a factory of one's own.
        kernel: The :class:`LaplaceFactory`'s kernel (``None``: its default).
        inference: Its posterior approximation (``None``: resolved for the answers);
            ``"laplace"`` is accepted, and ignored, for other models (their own).

    Returns:
        ``model`` itself without ``kernel`` and ``inference``, else the
        :class:`LaplaceFactory` they give.

    Raises:
        ValueError: For ``kernel`` or ``inference="ep"`` with a model other than the Laplace
            ones.
    """
    if kernel is None and inference is None:
        return model
    if isinstance(model, str) and model in LAPLACE_MODELS:
        model = LaplaceFactory(box=model == "laplace-box")
    if isinstance(model, LaplaceFactory):
        given = {"kernel": kernel, "inference": inference}
        return dataclasses.replace(model, **{k: v for k, v in given.items() if v is not None})
    name = model if isinstance(model, str) else getattr(model, "__name__", type(model).__name__)
    if inference is not None and inference not in INFERENCES:
        raise ValueError(f"inference must be one of {', '.join(INFERENCES)}, got {inference!r}.")
    for setting, value in (("kernel", kernel), ("inference", inference)):
        if value is not None and (setting, value) != ("inference", "laplace"):
            raise ValueError(
                f"{setting}={value!r} needs model='laplace' or 'laplace-box', got {name!r}."
            )
    return model


def answers_from_settings(
    answers: str | AnswerFormat = "auto",
    *,
    levels: int | None = None,
    ratings: int | None = None,
) -> str | AnswerFormat:
    """A run's ``answers`` from its keyword settings: the answer format they name.

    Args:
        answers: ``"auto"``, ``"choice"``, ``"pairs"`` (binary answers, how ``q > 2`` answers
            are modelled), ``"graded"`` (pairs on a graded scale of ``levels`` levels,
            default :data:`DEFAULT_GRADED_LEVELS`) or an
            :class:`~botorch_pref.loop.answers.AnswerFormat`.
        levels: The graded scale's number of levels (``>= 2``; with ``"auto"`` or ``"pairs"``
            it makes the answers graded too).
        ratings: The rating scale's number of levels (``>= 2``), or ``None`` for no ratings.

    Returns:
        ``answers`` itself without ``levels`` and ``ratings`` (a name :class:`LoopConfig`
        resolves for ``q``), else the :class:`~botorch_pref.loop.answers.AnswerFormat`.

    Raises:
        ValueError: For an unknown name, a scale that is not an integer ``>= 2``, a scale with
            ``answers="choice"`` (choices among ``q`` options are not graded or rated), or an
            :class:`~botorch_pref.loop.answers.AnswerFormat` with ``levels`` or ``ratings``.
    """
    if isinstance(answers, AnswerFormat):
        if levels is not None or ratings is not None:
            raise ValueError("give levels and ratings in the AnswerFormat, not beside it.")
        return answers
    if answers not in ANSWER_KEYWORDS:
        raise ValueError(f"answers must be one of {', '.join(ANSWER_KEYWORDS)}, got {answers!r}.")
    if answers == "graded" and levels is None:
        levels = DEFAULT_GRADED_LEVELS
    if levels is None and ratings is None:
        return answers
    if answers == "choice":
        raise ValueError(
            f"levels={levels!r} and ratings={ratings!r} need answers='pairs' or 'graded': "
            "choices among q options are neither graded nor rated."
        )
    return AnswerFormat("pairs", levels, ratings)


#: The keyword settings of a run that are the model factory's arguments
#: (:func:`model_from_settings`).
MODEL_SETTINGS = tuple(
    name
    for name, p in inspect.signature(model_from_settings).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
)
#: The keyword settings that shape the ``answers`` field (:func:`answers_from_settings`).
ANSWER_SETTINGS = tuple(
    name
    for name, p in inspect.signature(answers_from_settings).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
)


@dataclass(frozen=True)
class LoopConfig:
    """Validated settings of a preference-optimisation run (defaults in the module docstring).

    Every field given as ``None`` (or ``"auto"``) is resolved on construction, so a config
    holds the values the run uses; ``num_restarts`` and ``raw_samples`` stay ``None`` until
    :meth:`with_effort` resolves them for the query policy's strategy. Invalid values raise
    ``ValueError``. What each query asks (the strategy, the random initial queries, the local
    and lookahead queries) is the query policy's (:mod:`~botorch_pref.loop.policy`).

    Args:
        dim: The design dimension :math:`d`.
        q: Options per query.
        model: A name in :data:`~botorch_pref.models.factories.MODEL_FACTORIES` or a
            :data:`~botorch_pref.models.factories.ModelFactory`, resolved to the factory:
            ``"laplace"`` and ``"laplace-box"`` to a :class:`LaplaceFactory` (with the loop's
            kernel, and its inference resolved for the answers).
        answers: ``"choice"``, ``"pairs"`` or ``"auto"`` (how ``q > 2`` answers are modelled),
            ``"graded"`` (pairs on a :data:`DEFAULT_GRADED_LEVELS`-level scale), or an
            :class:`~botorch_pref.loop.answers.AnswerFormat` (graded levels, rating levels;
            :func:`answers_from_settings` makes one from ``levels=`` and ``ratings=``):
            resolved to an :class:`~botorch_pref.loop.answers.AnswerFormat`.
        ties: Accept "no preference" answers to pairs (needs ``answers="pairs"``); on a
            graded scale resolved to whether the scale has a middle level (odd ``levels``).
        refit_every: After ``refit_all_until`` answers, refit every this many answers.
        refit_all_until: Refit after every answer up to this many answers.
        num_restarts: Acquisition optimiser restarts (``None``: :func:`acquisition_effort`).
        raw_samples: Acquisition optimiser raw samples (``None``: likewise).
        device: Device of the model and of every tensor the loop returns.
        dtype: ``torch.float64`` or ``torch.float32``.
        seed: Seed of all randomness; ``None`` draws one from torch's global generator.
    """

    dim: int
    q: int = 2
    model: str | ModelFactory = "laplace"
    answers: str | AnswerFormat = "auto"
    ties: bool = False
    refit_every: int = 5
    refit_all_until: int = 30
    num_restarts: int | None = None
    raw_samples: int | None = None
    device: torch.device | str | None = None
    dtype: torch.dtype = torch.float64
    seed: int | None = None

    def __post_init__(self) -> None:
        values = _resolve(self)
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def model_name(self) -> str:
        """The model's name (a factory's ``__name__`` for a factory of one's own)."""
        return _model_name(self.model)

    @property
    def packaged_model(self) -> bool:
        """Whether the model is one the package names (``"laplace"``, ``"laplace-box"``,
        ``"pairwisegp"``), not a factory of one's own."""
        return isinstance(self.model, LaplaceFactory) or self.model is pairwisegp_model

    @property
    def settings(self) -> dict[str, Any]:
        """The keyword settings that rebuild the config with its ``dim`` and ``q``: the model
        by name with its factory's arguments (:data:`MODEL_SETTINGS`; ``None`` for other
        models), then the other fields, the answer format as its keywords
        (:data:`ANSWER_SETTINGS`: ``answers`` a name, ``levels``, ``ratings``)."""
        factory = self.model if isinstance(self.model, LaplaceFactory) else None
        values: dict[str, Any] = {
            "model": self.model_name if self.packaged_model else self.model,
            "kernel": None if factory is None else factory.kernel,
            "inference": None if factory is None else factory.inference,
        }
        for f in dataclasses.fields(self):
            if f.name not in ("dim", "q", "model"):
                values[f.name] = getattr(self, f.name)
        form = self.answers
        values["answers"] = "graded" if form.graded else form.mode
        values["levels"], values["ratings"] = form.levels, form.ratings
        return values

    @property
    def tkwargs(self) -> dict[str, Any]:
        """``{"device": ..., "dtype": ...}`` of the run's tensors."""
        return {"device": self.device, "dtype": self.dtype}

    def with_effort(self, q_opt: int) -> LoopConfig:
        """The config with ``num_restarts`` and ``raw_samples`` resolved for a strategy that
        optimises ``q_opt`` points jointly (:func:`acquisition_effort`; given values stay)."""
        restarts, raw = acquisition_effort(self.dim, q_opt)
        return dataclasses.replace(
            self,
            num_restarts=restarts if self.num_restarts is None else self.num_restarts,
            raw_samples=raw if self.raw_samples is None else self.raw_samples,
        )

    def refit_due(self, k: int) -> bool:
        """Whether the schedule refits the hyperparameters after the ``k``-th answer."""
        return k <= self.refit_all_until or k % self.refit_every == 0

    def likelihood(self) -> PairwiseLikelihood | None:
        """A fresh likelihood for the answers, or ``None`` for the model's default probit."""
        form = self.answers
        if form.mode == "choice":
            return Ranking()
        if not form.binary:
            tie = 0.5 if self.ties and not form.graded else None
            return PairwiseProbit(
                tie_threshold=tie, graded_levels=form.levels, rating_levels=form.ratings
            )
        return PairwiseProbit(tie_threshold=0.5) if self.ties else None

    def model_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the model factory besides the data: the likelihood, where the
        answers need one other than the model's default probit."""
        likelihood = self.likelihood()
        return {} if likelihood is None else {"likelihood": likelihood}


def _model_name(model: Any) -> str:
    if isinstance(model, str):
        return model
    if isinstance(model, LaplaceFactory):
        return model.name
    if model is pairwisegp_model:
        return "pairwisegp"
    return getattr(model, "__name__", type(model).__name__)


def _resolve(config: LoopConfig) -> dict[str, Any]:
    """Validated and resolved field values of ``config``."""
    if config.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {config.dtype}.")
    q = positive_int(config.q, "q")
    if q < 2:
        raise ValueError(f"A query needs q >= 2 options, got q = {config.q}.")
    model = _factory(config.model)
    answers, ties = _answers(config, q, model)
    if isinstance(model, LaplaceFactory):
        model = model.for_answers(answers, ties)
    seed = config.seed
    seed = int(torch.randint(0, 2**62, (1,)).item()) if seed is None else seed
    optional = {"num_restarts": config.num_restarts, "raw_samples": config.raw_samples}
    return {
        "dim": positive_int(config.dim, "dim"),
        "q": q,
        "model": model,
        "answers": answers,
        "ties": ties,
        "refit_every": positive_int(config.refit_every, "refit_every"),
        "refit_all_until": nonnegative_int(config.refit_all_until, "refit_all_until"),
        **{k: v if v is None else positive_int(v, k) for k, v in optional.items()},
        "device": torch.device(config.device if config.device is not None else "cpu"),
        "seed": nonnegative_int(seed, "seed"),
    }


def _answers(config: LoopConfig, q: int, model: ModelFactory) -> tuple[AnswerFormat, bool]:
    """The validated ``(answers, ties)`` of ``config`` for ``q`` options per query."""
    form = answers_from_settings(config.answers)
    if not isinstance(form, AnswerFormat):
        form = AnswerFormat(("choice" if q > 2 else "pairs") if form == "auto" else form)
    ties = bool(config.ties)
    if form.graded:
        if q != 2:
            raise ValueError(
                f"graded comparisons (levels={form.levels}) are about pairs: q = 2, not {q}."
            )
        if ties and form.levels % 2 == 0:
            raise ValueError(
                f"ties=True needs a middle level ('about the same'); a {form.levels}-level scale "
                "has none: use an odd number of levels."
            )
        ties = form.levels % 2 == 1
    if ties and form.mode == "choice":
        raise ValueError(
            "ties=True needs answers='pairs': no tie model is defined for choices among "
            "more than two options."
        )
    if (form.mode == "choice" or ties or not form.binary) and model is pairwisegp_model:
        raise ValueError(
            "model='pairwisegp' models binary pairs only; use answers='pairs' and ties=False, "
            "or model='laplace'."
        )
    return form, ties


def _factory(model: Any) -> ModelFactory:
    """The factory of ``model``: a :class:`LaplaceFactory` for the Laplace models' names."""
    if isinstance(model, str):
        if model not in MODEL_FACTORIES:
            raise ValueError(
                f"model must be one of {', '.join(MODEL_FACTORIES)} or a factory; got {model!r}."
            )
        if model in LAPLACE_MODELS:
            return LaplaceFactory(box=model == "laplace-box")
        return MODEL_FACTORIES[model]
    if callable(model):
        return model
    raise ValueError(f"model must be a name or a factory callable, got {model!r}.")
