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
        if not isinstance(model, PairwiseLaplaceGP):
            raise TypeError(f"LaplaceEvidence needs a PairwiseLaplaceGP, got {type(model)}.")
        if likelihood is not model.likelihood:
            raise ValueError("likelihood must be the model's own likelihood (model.likelihood).")
        super().__init__(likelihood, model)

    def forward(self, *args: Any, **kwargs: Any) -> Tensor:
        """The evidence plus log-priors, a scalar.

        Positional arguments (a model output and the training targets, as GPyTorch passes them)
        are accepted for compatibility and ignored: the evidence is a function of the model's
        own data and hyperparameters.
        """
        value = self.model.laplace_evidence().sum()
        for _, module, prior, closure, _ in self.named_priors():
            value = value + prior.log_prob(closure(module)).sum()
        return value

    def compute_custom_loss(self, **kwargs: Any) -> Tensor:
        """The loss that ``fit_gpytorch_mll`` minimises: minus :meth:`forward`."""
        return -self.forward()
