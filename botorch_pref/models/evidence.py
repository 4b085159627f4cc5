r"""Laplace evidence of the preference GP as a GPyTorch marginal log-likelihood.

:class:`LaplaceEvidence` makes ``botorch.fit.fit_gpytorch_mll`` fit a
:class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP`'s hyperparameters by maximising

.. math::

    \log Z(\theta) + \log p(\theta) = \log p(C \mid \hat f) - \tfrac12 \hat f^\top K^{-1}\hat f
    - \tfrac12 \log\det(I + K W) + \log p(\theta),

summed over batch members (like BoTorch's ``PairwiseLaplaceMarginalLogLikelihood``, it is not
divided by the number of comparisons). Its gradients are exact: the mode is found without
autograd and one Newton step with autograd carries the implicit-function-theorem derivative.
"""

from __future__ import annotations

from typing import Any

import torch
from gpytorch.mlls import MarginalLogLikelihood
from torch import Tensor

from botorch_pref.likelihoods import PairwiseLikelihood
from botorch_pref.models.pairwise import PairwiseLaplaceGP

__all__ = ["LaplaceEvidence"]


class LaplaceEvidence(MarginalLogLikelihood):
    """Laplace-approximated log evidence (plus hyperparameter log-priors) of a preference GP.

    Args:
        likelihood: The model's likelihood (``model.likelihood``).
        model: A :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with data.
    """

    def __init__(self, likelihood: PairwiseLikelihood, model: PairwiseLaplaceGP) -> None:
        """The evidence of ``model``'s data under its hyperparameters, for ``fit_gpytorch_mll``.

        Raises:
            TypeError: ``model`` is not a :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP`.
            ValueError: ``likelihood`` is not ``model.likelihood``.
        """
        if not isinstance(model, PairwiseLaplaceGP):
            raise TypeError(f"LaplaceEvidence needs a PairwiseLaplaceGP, got {type(model)}.")
        if likelihood is not model.likelihood:
            raise ValueError("likelihood must be the model's own likelihood (model.likelihood).")
        super().__init__(likelihood, model)

    def forward(self, *args: Any, **kwargs: Any) -> Tensor:
        """The evidence plus log-priors, a scalar.

        Called as GPyTorch does, ``mll(output, targets)``, the arguments must be the model's
        training-mode output at its training data and its training targets
        (``model.train_targets``), otherwise a ``RuntimeError`` (as
        ``PairwiseLaplaceMarginalLogLikelihood``); the value is that of ``mll()``, a function
        of the model's own data and hyperparameters.
        """
        if args:
            self._check_training_data(*args)
        value = self.model.laplace_evidence().sum()
        for _, module, prior, closure, _ in self.model.named_priors():
            value = value + prior.log_prob(closure(module)).sum()
        return value

    def _check_training_data(self, output: Any, targets: Any = None, *rest: Any) -> None:
        model = self.model
        if not model._has_data():
            raise RuntimeError("Must train on training data: the model is prior-only.")
        own = model.train_targets
        same = targets is own or (
            torch.is_tensor(targets)
            and targets.shape == own.shape
            and torch.equal(targets.to(own.device), own)
        )
        if rest or not same:
            raise RuntimeError(
                "Must train on training data: LaplaceEvidence(model)(output, targets) needs the "
                "model's own targets (model.train_targets); the evidence of other data needs a "
                "model of those data."
            )
        event = getattr(output, "event_shape", None)
        if event is None or event[-1:] != torch.Size([model.n]):
            raise RuntimeError(
                "Must train on training data: output must be the model's output at its "
                f"training datapoints ({model.n} of them), got event shape {event}."
            )

    def compute_custom_loss(self, **kwargs: Any) -> Tensor:
        """The loss that ``fit_gpytorch_mll`` minimises: minus :meth:`forward`."""
        return -self.forward()
