r"""The loop's recommendations: the best compared design, or the posterior mean's maximiser.

Member :math:`r` has compared the designs :math:`\mathcal D_r` and holds the posterior mean
:math:`\mu_r` of its latent utility. Its recommendation is a design the person has seen, the
**champion**

.. math::

    x^\star_r = \arg\max_{x_i \in \mathcal D_r} \mu_r(x_i),

or, asked for with ``among="anywhere"``, the maximiser of :math:`\mu_r` over the unit cube
(the qEUBO paper's recommendation), found by the back end's acquisition optimiser on
``PosteriorMean`` started from random designs and from the 8 compared designs with the highest
posterior means, and never worse (by :math:`\mu_r`) than :math:`x^\star_r`. The same 8
designs are the set a lookahead query looks at
(:class:`~botorch_pref.acquisition.LookaheadBestCompared`).

:class:`Recommending` holds these for :class:`~botorch_pref.loop.state.LoopState`; it reads
the state's answer record, model groups, back end and settings and changes none of them.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from botorch.acquisition import PosteriorMean
from torch import Tensor

from botorch_pref.loop.backends import Backend, ModelGroup
from botorch_pref.loop.config import LOOKAHEAD_DESIGNS, LoopConfig
from botorch_pref.loop.records import AnswerRecord, Recommendation
from botorch_pref.loop.seeding import Stream

__all__ = ["Recommending"]


class Recommending:
    """Recommendations of the members of a loop state (a mixin of
    :class:`~botorch_pref.loop.state.LoopState`, which provides the attributes below and
    ``group_of``, ``n_members``, ``n_answers`` and ``from_unit``)."""

    config: LoopConfig
    record: AnswerRecord
    seeds: list[int]
    backend: Backend
    groups: list[ModelGroup] | None

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
        cfg, k, members = self.config, self.n_answers, group.members
        seeds = [self.seeds[r] for r in members]
        starts = self.top_compared(members, LOOKAHEAD_DESIGNS).unsqueeze(-2)  # members x k x 1 x d
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x = self.backend.optimize(
                PosteriorMean(group.model), seeds, k, cfg, 1, Stream.RECOMMEND, starts
            )
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
