r"""Back ends of the loop: how hyperparameters are fitted and acquisition functions maximised.

The loop (:class:`~botorch_pref.loop.state.LoopState`) runs ``R`` members; a back end decides
how their models are held and solved:

* :class:`SequentialBackend`: one model per member; BoTorch's ``fit_gpytorch_mll`` (maximum a
  posteriori evidence by L-BFGS-B, stopped at a relative change of :data:`FIT_FTOL`, with
  retries from random starts) and ``optimize_acqf`` (raw samples, Boltzmann-selected restarts,
  L-BFGS-B), with torch's global generators seeded per member, query and
  :class:`~botorch_pref.loop.seeding.Stream`. A person's run is this back end with ``R = 1``.
* :class:`BatchedBackend`: one batched model (``batch_shape = (R,)``, independent
  hyperparameters per member) for all members; one batched L-BFGS-B run fits every member
  (:func:`~botorch_pref.optim.fit_evidence_batched`) and one maximises every member's
  acquisition function (:func:`~botorch_pref.optim.optimize_acqf_batched`, raw samples seeded
  per member). Each member solves its own problem -- its own line search and stopping test --
  but the numbers differ from the sequential solvers', so the results agree in distribution,
  not bit for bit.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from botorch.acquisition import AcquisitionFunction
from botorch.exceptions.warnings import OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models.model import Model
from botorch.optim import optimize_acqf
from botorch.optim.initializers import initialize_q_batch
from botorch.utils.sampling import draw_sobol_samples
from gpytorch.mlls import MarginalLogLikelihood
from torch import Tensor

from botorch_pref.acquisition import lean_kernels
from botorch_pref.loop.config import LoopConfig
from botorch_pref.loop.seeding import Stream, derived_seed
from botorch_pref.optim import fit_evidence_batched, optimize_acqf_batched

__all__ = [
    "BACKENDS",
    "FIT_FTOL",
    "Acquisition",
    "Backend",
    "BatchedBackend",
    "ModelGroup",
    "SequentialBackend",
    "seeded",
]

#: The sequential fitter's stopping test: L-BFGS-B stops once an iteration lowers the negative
#: log posterior of the hyperparameters by less than this fraction of its value (SciPy's
#: ``ftol``; its default, 2.2e-9, asks for about 1e-7 nats on a typical evidence and spends
#: three or more evaluations of the evidence confirming an optimum a warm start already sits
#: at). At 1e-6 the fit stops within about 1e-4 nats of the optimum, far inside the evidence's
#: own uncertainty about the hyperparameters.
FIT_FTOL = 1e-6


@dataclass
class ModelGroup:
    """A model and the members it serves (one member, or all of them for a batched model)."""

    members: list[int]
    model: Model
    mll: MarginalLogLikelihood


@contextmanager
def seeded(seed: int, k: int, stream: int, device: torch.device) -> Iterator[None]:
    """Fork torch's and numpy's global generators and seed them for query ``k`` and ``stream``.

    Numpy's too because BoTorch's ``PairwiseGP`` draws the start of its mode search from
    numpy's global generator; both are restored on exit, so the caller's streams do not move.
    """
    devices = [device] if device.type == "cuda" else []
    derived = derived_seed(seed, k, stream)
    numpy_state = np.random.get_state()  # noqa: NPY002 (the global one PairwiseGP draws from)
    try:
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(derived)
            np.random.seed(derived % 2**32)  # noqa: NPY002
            yield
    finally:
        np.random.set_state(numpy_state)  # noqa: NPY002


class Acquisition(NamedTuple):
    """What an acquisition step asks the optimiser to maximise.

    Attributes:
        acqf: The acquisition function on the unit cube (a ``LocalBox`` maps its maximiser
            into the box with ``to_box``).
        q_opt: The number of points it places.
        champions: Each member's champion (its index among the member's designs) for a query
            that compares the champion, else ``None``.
        initial: ``members x m x q_opt x d`` candidates the optimiser starts from besides its
            raw samples, or ``None``.
    """

    acqf: AcquisitionFunction
    q_opt: int
    champions: list[int] | None = None
    initial: Tensor | None = None


class Backend:
    """A fitter and an acquisition optimiser for the models of a group of members.

    Args:
        config: The run's settings (the acquisition optimiser's effort resolved).
    """

    #: Whether one batched model serves all members (else one model per member).
    batched: bool = False

    def __init__(self, config: LoopConfig) -> None:
        self.config = config

    def fit(self, mll: MarginalLogLikelihood, seeds: Sequence[int], k: int) -> None:
        """Fit the hyperparameters of the model of members seeded ``seeds`` after answer ``k``."""
        raise NotImplementedError

    def optimize(
        self, acquisition: Acquisition, seeds: Sequence[int], k: int, stream: int = Stream.ACQF
    ) -> Tensor:
        """Maximise ``acquisition.acqf`` on the unit cube for query ``k``: ``len(seeds) x q_opt
        x d`` points.

        Its random draws come from the seeds of ``stream`` (the acquisition's by default).
        ``acquisition.initial`` (``len(seeds) x m x q_opt x d``, unit cube) are candidates each
        member considers as starting points besides its random raw samples.
        """
        raise NotImplementedError


class SequentialBackend(Backend):
    """One model per member: ``fit_gpytorch_mll`` and ``optimize_acqf``."""

    def fit(self, mll: MarginalLogLikelihood, seeds: Sequence[int], k: int) -> None:
        with seeded(seeds[0], k, Stream.FIT, self.config.device):
            fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"ftol": FIT_FTOL}})

    def optimize(
        self, acquisition: Acquisition, seeds: Sequence[int], k: int, stream: int = Stream.ACQF
    ) -> Tensor:
        config, (acqf, q, _, initial) = self.config, acquisition
        unit = torch.zeros(2, config.dim, **config.tkwargs)
        unit[1] = 1.0
        with seeded(seeds[0], k, stream, config.device), warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizationWarning)
            with lean_kernels():
                starts = None if initial is None else _starts(acqf, unit, q, config, initial[0])
                candidates, _ = optimize_acqf(
                    acqf,
                    bounds=unit,
                    q=q,
                    num_restarts=config.num_restarts,
                    raw_samples=None if starts is not None else config.raw_samples,
                    batch_initial_conditions=starts,
                    # In float32 L-BFGS-B's line search ends "ABNORMAL" near an optimum because
                    # the acquisition's values are exact only to ~1e-7: its point stands, and a
                    # retry from new raw samples would only double the work (and warn). Given
                    # starts, optimize_acqf cannot retry: it would only warn that it does not.
                    retry_on_optimization_warning=starts is None and config.dtype != torch.float32,
                )
        return candidates.detach().reshape(1, q, config.dim).clamp(0.0, 1.0)


class BatchedBackend(Backend):
    """One batched model: ``fit_evidence_batched`` and ``optimize_acqf_batched``."""

    batched = True

    def fit(self, mll: MarginalLogLikelihood, seeds: Sequence[int], k: int) -> None:
        fit_evidence_batched(mll.model)

    def optimize(
        self, acquisition: Acquisition, seeds: Sequence[int], k: int, stream: int = Stream.ACQF
    ) -> Tensor:
        config = self.config
        with lean_kernels():
            X, _ = optimize_acqf_batched(
                acquisition.acqf,
                len(seeds),
                acquisition.q_opt,
                config.dim,
                num_restarts=config.num_restarts,
                raw_samples=config.raw_samples,
                seeds=[derived_seed(s, k, stream) for s in seeds],
                dtype=config.dtype,
                device=config.device,
                initial=acquisition.initial,
            )
        return X.detach()


#: Raw samples evaluated per call by :func:`_starts` (as ``optimize_acqf_batched``'s default).
_RAW_BATCH = 128


def _starts(
    acqf: AcquisitionFunction, unit: Tensor, q: int, config: LoopConfig, initial: Tensor
) -> Tensor:
    """``optimize_acqf``'s restarts from its raw samples and the candidates ``initial``.

    BoTorch's own initialisation (``gen_batch_initial_conditions``) with ``initial``
    (``m x q x d``) among the raw samples: scrambled Sobol samples seeded from torch's global
    generator, and restarts drawn by ``initialize_q_batch``'s Boltzmann weights, which keep the
    best candidate.
    """
    raw = draw_sobol_samples(bounds=unit, n=config.raw_samples, q=q)
    raw = torch.cat([raw.to(unit), initial.to(unit)])
    with torch.no_grad():
        values = torch.cat([acqf(chunk) for chunk in raw.split(_RAW_BATCH)])
    return initialize_q_batch(raw, values, min(config.num_restarts, len(raw)))[0]


#: The back ends by name (each is built with the run's config).
BACKENDS: dict[str, type[Backend]] = {
    "sequential": SequentialBackend,
    "batched": BatchedBackend,
}
