r"""Quasi-Monte-Carlo base samples with one seed per member of a batched model.

A Monte-Carlo acquisition function on a model with ``batch_shape = (R,)`` (``R`` independent
replications, each with its own data and hyperparameters) needs base samples :math:`z`. BoTorch's
``SobolQMCNormalSampler(S, seed)`` draws one set and shares it across every t-batch, so member
``r``'s acquisition surface would depend on the seed of whichever member the set was drawn for,
and a member's run on which members it is batched with. Here member ``r`` draws its own
scrambled-Sobol normal samples from ``seeds[r]``:

.. math::

    z^{(r)}_s = \Phi^{-1}\big(u^{(r)}_s\big), \quad u^{(r)} = \text{Sobol}(\text{seeds}[r]),

exactly the base samples ``SobolQMCNormalSampler(S, seeds[r])`` draws for the same model
without the batch, so a member of a batch sees the acquisition surface it would see alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from botorch.posteriors import Posterior
from botorch.sampling import SobolQMCNormalSampler
from botorch.utils.sampling import draw_sobol_normal_samples
from torch import Tensor

__all__ = ["MemberSobolSampler", "member_seeds", "member_sobol_normal"]


def member_seeds(seeds: Sequence[int]) -> list[int]:
    """Validate one integer seed per member.

    Raises:
        ValueError: If ``seeds`` is empty or holds a value that is not an integer.
    """
    out = []
    for s in seeds:
        try:
            ok = not isinstance(s, (bool, str)) and int(s) == s
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f"seeds must be integers, got {s!r}.")
        out.append(int(s))
    if not out:
        raise ValueError("need at least one seed.")
    return out


def member_sobol_normal(
    seeds: Sequence[int], n: int, d: int, *, dtype: torch.dtype, device: torch.device
) -> Tensor:
    """Scrambled-Sobol standard normal samples, ``n x R x d``, member ``r``'s from ``seeds[r]``.

    Args:
        seeds: ``R`` seeds, one per member.
        n: Samples per member.
        d: Dimension of each sample.
        dtype: The samples' dtype.
        device: The samples' device.

    Returns:
        ``n x R x d`` samples; ``[:, r]`` equals ``draw_sobol_normal_samples(d, n, seed=seeds[r])``.
    """
    draws = [draw_sobol_normal_samples(d=d, n=n, device=device, dtype=dtype, seed=s) for s in seeds]
    return torch.stack(draws, dim=1)


class MemberSobolSampler(SobolQMCNormalSampler):
    r"""``SobolQMCNormalSampler`` with one seed per member of a batched model.

    The posterior's last t-batch dimension indexes the members; along the other t-batch
    dimensions the base samples are shared, as BoTorch's sampler shares them. Member ``r``'s base
    samples are those of ``SobolQMCNormalSampler(sample_shape, seeds[r])`` on its own model.

    Args:
        sample_shape: The sample shape (e.g. ``torch.Size([128])``).
        seeds: One seed per member.

    Example:
        >>> sampler = MemberSobolSampler(torch.Size([128]), seeds=[3, 8])  # a 2-member model
    """

    def __init__(self, sample_shape: torch.Size, seeds: Sequence[int]) -> None:
        self.seeds = member_seeds(seeds)
        super().__init__(sample_shape=sample_shape, seed=self.seeds[0])

    def _construct_base_samples(self, posterior: Posterior) -> None:
        start, end = self._get_batch_range(posterior)
        base = posterior.base_sample_shape
        batch, event, R = base[start:end], base[end:], len(self.seeds)
        if len(batch) == 0 or batch[-1] != R:
            raise ValueError(
                f"MemberSobolSampler has {R} seeds but the posterior's t-batch shape is "
                f"{tuple(batch)}; its last dimension must index the {R} members."
            )
        # BoTorch's collapsed shape, with the members' dimension kept
        shape = self.sample_shape + base[:start] + torch.Size([1] * (len(batch) - 1) + [R]) + event
        if self.base_samples is None or self.base_samples.shape != shape:
            n = self.sample_shape.numel()
            kw = {"dtype": posterior.dtype, "device": posterior.device}
            samples = member_sobol_normal(self.seeds, n, event.numel(), **kw)
            self.register_buffer("base_samples", samples.reshape(shape))
        self.to(device=posterior.device, dtype=posterior.dtype)
