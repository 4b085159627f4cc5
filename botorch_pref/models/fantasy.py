r"""Fantasies of the preference GP: conditioning on new comparisons, ``fantasize``.

A preference model observes comparisons, so its fantasies are comparisons too:
:meth:`FantasyMixin.condition_on_observations` appends designs and comparisons among them (as
``PairwiseGP`` does, with ``Y`` indexing the new designs), and :meth:`FantasyMixin.fantasize`
draws those comparisons from the posterior with a pairwise sampler (BoTorch's standard normal
samplers are taken as their pairwise counterparts,
:func:`~botorch_pref.models.compat.as_pairwise_sampler`).

The host class (:class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP`) provides the data, the
mode and ``set_train_data``.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

import torch
from botorch.models.model import Model
from botorch.sampling.base import MCSampler
from torch import Tensor

from botorch_pref.models.compat import as_pairwise_sampler
from botorch_pref.models.data import (
    PreferenceInputError,
    append_comparisons,
    validate_fantasy_comparisons,
)
from botorch_pref.models.posterior import problem_size
from botorch_pref.runtime import with_problem_threads

__all__ = ["FantasyMixin"]


class FantasyMixin:
    """``fantasize`` and ``condition_on_observations`` for a preference GP (mixed in before
    BoTorch's ``Model``)."""

    def fantasize(
        self,
        X: Tensor,
        sampler: MCSampler,
        observation_noise: Tensor | None = None,
        **kwargs: Any,
    ) -> Model:
        r"""A fantasy model conditioned on comparisons among ``X`` drawn from the posterior.

        As BoTorch's ``Model.fantasize`` with a pairwise sampler: utilities at the ``q`` rows of
        ``X`` are drawn from the posterior and the comparisons they imply are appended
        (:meth:`condition_on_observations`). BoTorch's ``PairwiseSobolQMCNormalSampler`` and
        ``PairwiseIIDNormalSampler`` are used as given; a standard ``SobolQMCNormalSampler`` or
        ``IIDNormalSampler`` (what BoTorch's acquisition functions build by default) is taken
        as its pairwise counterpart with the same sample shape and seed
        (:func:`~botorch_pref.models.compat.as_pairwise_sampler`), where ``PairwiseGP`` would
        fail on real-valued fantasies.

        Args:
            X: ``batch_shape x q x d`` fantasy designs (``q >= 2``).
            sampler: The sampler.
            observation_noise: Ignored by the posterior (the answer noise acts on
                comparisons); passed on as in BoTorch.
            kwargs: Passed to :meth:`condition_on_observations`.

        Returns:
            The fantasy model, with batch shape ``sample_shape x batch_shape``.
        """
        sampler = as_pairwise_sampler(sampler)
        return super().fantasize(X, sampler, observation_noise=observation_noise, **kwargs)

    @with_problem_threads(problem_size)
    def condition_on_observations(self, X: Tensor, Y: Tensor, **kwargs: Any) -> Model:
        r"""A new model with designs ``X`` appended and comparisons ``Y`` among them.

        As in ``PairwiseGP``, ``Y`` holds integer comparisons (``batch x m' x 2``) that index the
        rows of ``X``; they are shifted past the existing datapoints. The new model is
        warm-started from this one's mode.

        Args:
            X: ``batch_shape x n' x d`` new designs (untransformed).
            Y: ``batch_shape x m' x 2`` comparisons among the rows of ``X``.

        Returns:
            The conditioned (deep-copied) model.

        Raises:
            PreferenceInputError: (a ``ValueError`` and a ``RuntimeError``) for non-pairwise
                or invalid ``Y``; this model is left unchanged.
        """
        if not torch.is_tensor(X) or X.dim() < 2:
            raise PreferenceInputError(f"X must be a batch_shape x n' x d tensor, got {X!r:.80}.")
        validate_fantasy_comparisons(Y, X.shape[-2])
        if self._has_data() and X.shape[-1] != self.dim:
            raise PreferenceInputError(
                f"X has {X.shape[-1]} input dimensions, the model's data have {self.dim}."
            )
        new_model = deepcopy(self)
        if not self._has_data():
            new_model.set_train_data(X, Y, update_model=True)
            return new_model
        batch = torch.broadcast_shapes(Y.shape[:-2], X.shape[:-2], self.batch_shape)
        old_X = self._datapoints.expand(*batch, *self._datapoints.shape[-2:])
        new_X = torch.cat([old_X, X.to(old_X).expand(*batch, *X.shape[-2:])], dim=-2)
        new_C = append_comparisons(self._comparisons, Y, self.n, batch)
        # warm start: old rows keep their indices, broadcast over the new batch
        self._ensure_current()
        warm = self._laplace().warm_start(new_X.shape[-2])
        new_model._mode = None  # no warm start from the copied data: the one below is better
        new_model.set_train_data(new_X, new_C, update_model=False)
        new_model._mode.warm = warm.expand(self.batch_shape, batch)
        new_model._update_mode()
        return new_model
