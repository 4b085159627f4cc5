r"""The collectives of data-parallel LFPL/IF training (see :mod:`botorch_pref.lfpl.distributed`).

:class:`GroupSync` wraps the three ``torch.distributed`` reductions a training step needs on one
process group: the largest step count over the processes, an in-place sum of gradient buffers,
and the mean of a loss over every process's examples. The fit calls it only when it is given a
process group.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = ["GroupSync"]


class GroupSync:
    """The collectives data-parallel training needs, on one process group."""

    def __init__(self, group: Any, device: torch.device) -> None:
        """Args: ``group`` (a process group, or ``"default"``) and the training ``device``."""
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError(
                "process_group was given but torch.distributed is not initialised "
                "(call torch.distributed.init_process_group, or init_from_env under torchrun)."
            )
        self.group = None if group == "default" else group
        self.device = device
        self.rank = dist.get_rank(self.group)
        self.world_size = dist.get_world_size(self.group)

    def max_int(self, value: int) -> int:
        """The largest ``value`` over the processes."""
        t = torch.tensor([value], dtype=torch.long, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
        return int(t)

    def sum_(self, tensor: Tensor) -> None:
        """Sum ``tensor`` over the processes, in place."""
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=self.group)

    def mean_loss(self, total: Tensor, n_local: int) -> float:
        """The mean over all processes' examples of a loss summed per process."""
        t = torch.stack([total.double(), torch.tensor(float(n_local), device=total.device)])
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self.group)
        return float(t[0] / t[1].clamp_min(1.0))
