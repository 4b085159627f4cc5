r"""Data-parallel LFPL/IF training with ``torch.distributed``, interactions sharded by user.

With :math:`P` processes, process :math:`r` holds the interactions of the users
:math:`u \equiv r \pmod P`. Every step, each process draws its own mini-batch and computes the
gradients of its examples (:mod:`botorch_pref.lfpl.fused`):

* a user's factor :math:`U_u` only ever gets gradients on the process that owns ``u``, so each
  process moves its own rows of ``U`` with no communication;
* the item factors ``V`` are shared: the summed gradient buffers of ``V`` are all-reduced
  (summed over processes) and every process takes the same whole-table AdaGrad step, so the
  copies of ``V`` and of its AdaGrad sums stay identical (they start identical from the seed).

That is synchronous SGD on the union of the processes' batches: a step with :math:`P`
processes and local batch :math:`b` sees :math:`P b` examples. The number of steps per epoch
is set by the largest shard, so every process joins every all-reduce. At the end the rows of
``U`` are gathered by one more all-reduce (each row is non-zero on its owner only).

Launch with ``torchrun --nproc-per-node P ...``: the backend is ``gloo`` on CPU and ``nccl`` on
CUDA (each process on ``cuda:LOCAL_RANK``).
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist

from botorch_pref.lfpl.collectives import GroupSync
from botorch_pref.lfpl.factor_model import LFPL
from botorch_pref.lfpl.implicit import ImplicitFeedback, fit_implicit
from botorch_pref.lfpl.training import FitResult

__all__ = ["GroupSync", "fit_data_parallel", "init_from_env", "shard_by_user"]


def shard_by_user(data: ImplicitFeedback, rank: int, world_size: int) -> ImplicitFeedback:
    """The interactions of the users ``u`` with ``u % world_size == rank`` (same id spaces).

    Args:
        data: All interactions.
        rank: This process's rank.
        world_size: Number of processes.

    Returns:
        The shard.

    Raises:
        ValueError: If any process's shard would hold no interaction (a tiny data set). Every
            process raises, not only the empty one: the others would otherwise wait for it in
            the first collective.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must lie in [0, {world_size}), got {rank}.")
    owners = data.users % world_size
    empty = (torch.bincount(owners, minlength=world_size) == 0).nonzero()
    if empty.numel() > 0:
        raise ValueError(
            f"process {int(empty[0, 0])} of {world_size} gets no interaction: too few users."
        )
    keep = owners == rank
    return ImplicitFeedback(data.pairs[keep], data.n_users, data.n_items)


def fit_data_parallel(
    model: LFPL, data: ImplicitFeedback, *, process_group: Any = "default", seed: int = 0, **kwargs
) -> FitResult:
    """Fit LFPL/IF on this process's shard of ``data`` and gather the user factors.

    Every process calls this with the same model initialisation (the same seed) and the same
    ``data``; afterwards every process holds the same fitted model.

    Args:
        model: The model, identical on every process.
        data: All interactions (each process keeps its users' share).
        process_group: The process group (``"default"``: the default group).
        seed: Seed; process ``r`` shuffles and samples with ``seed + r``.
        **kwargs: Passed to :func:`fit_implicit` (``epochs``, ``batch_size`` per process, ...).

    Returns:
        This process's :class:`FitResult` (train losses are means over all processes).
    """
    if "validation" in kwargs and kwargs["validation"] is not None:
        raise ValueError("validation (early stopping) is not supported in data-parallel fits.")
    sync = GroupSync(process_group, model.U.device)
    shard = shard_by_user(data, sync.rank, sync.world_size)
    result = fit_implicit(
        model, shard, seed=seed + sync.rank, process_group=process_group, **kwargs
    )
    own = (torch.arange(model.n_rows, device=model.U.device) % sync.world_size) == sync.rank
    with torch.no_grad():
        model.U.mul_(own.unsqueeze(-1).to(model.U.dtype))
        sync.sum_(model.U.data)
        seen_rows, seen_cols = model.seen_rows.long(), model.seen_cols.long()
        sync.sum_(seen_rows)
        sync.sum_(seen_cols)
        model.seen_rows.copy_(seen_rows > 0)
        model.seen_cols.copy_(seen_cols > 0)
    return result


def init_from_env(device: str | None = None) -> tuple[int, int, torch.device]:
    """Initialise the default process group from ``torchrun``'s environment variables.

    Args:
        device: ``"cpu"``, ``"cuda"`` or ``None`` (CUDA when available).

    Returns:
        ``(rank, world_size, device)``; CUDA processes use ``cuda:LOCAL_RANK`` and ``nccl``,
        CPU processes ``gloo``.
    """
    missing = [
        k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ
    ]
    if missing:
        raise ValueError(
            f"{', '.join(missing)} not set: launch data-parallel training with torchrun."
        )
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    kind = torch.device(device).type
    if kind == "cuda":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        target = torch.device("cuda", local)
        backend = "nccl"
    elif kind == "cpu":
        target, backend = torch.device("cpu"), "gloo"
    else:
        raise ValueError(f"data-parallel training runs on cpu or cuda, got device {device!r}.")
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    return dist.get_rank(), dist.get_world_size(), target
