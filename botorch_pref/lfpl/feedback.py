r"""Implicit feedback: observed (user, item) interactions, negative sampling, leave-one-out.

:class:`ImplicitFeedback` holds the interactions deduplicated and sorted by user, with the
offsets of each user's items. An item a user never interacted with is drawn uniformly and only
the draws that hit an observed item are redrawn (membership is a bitmap lookup, or a binary
search in the sorted interaction keys ``u * n_items + i`` for large data, all in torch, on the
device of the data); the last collisions are drawn exactly from the user's unobserved items.

:func:`leave_one_out` holds out one interaction per user for the leave-one-out protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from botorch_pref.lfpl.dyads import TensorRecords, check_int

__all__ = ["ImplicitFeedback", "LeaveOneOutSplit", "leave_one_out"]

BITMAP_LIMIT = 2**26


def _as_id_tensor(ids: object, name: str) -> Tensor:
    """``ids`` as an integer tensor; fractional, boolean or complex ids raise naming one."""
    if not isinstance(ids, Tensor):
        try:
            ids = torch.as_tensor(ids)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"{name} must be integer ids, got {type(ids).__name__}: {err}"
            ) from None
    if ids.dtype == torch.bool or ids.is_complex():
        raise TypeError(f"{name} must be integer ids, got dtype {ids.dtype}.")
    if ids.is_floating_point():
        fractional = (ids != ids.round()) | ~torch.isfinite(ids)
        if bool(fractional.any()):
            bad = ids[fractional][0].item()
            raise ValueError(f"{name} must be integers, got {bad}.")
        raise ValueError(f"{name} must be integers, got dtype {ids.dtype} (convert with .long()).")
    return ids


def _checked_timestamps(timestamps: object, n: int, device: torch.device) -> Tensor:
    """``timestamps`` as an ``(n,)`` tensor of real, finite numbers on ``device``, or raise."""
    timestamps = torch.as_tensor(timestamps, device=device)
    if timestamps.shape != (n,):
        raise ValueError(f"timestamps must have shape ({n},), got {tuple(timestamps.shape)}.")
    if timestamps.is_complex() or timestamps.dtype == torch.bool:
        raise TypeError(f"timestamps must be real numbers, got dtype {timestamps.dtype}.")
    if timestamps.is_floating_point():
        bad = (~torch.isfinite(timestamps)).nonzero()
        if bad.numel() > 0:
            i = int(bad[0, 0])
            raise ValueError(f"interaction {i}: timestamp {float(timestamps[i])} is not finite.")
    return timestamps


class ImplicitFeedback(TensorRecords):
    """Observed (user, item) interactions, deduplicated and sorted by user then item.

    Attributes:
        users: ``(n,)`` user ids.
        items: ``(n,)`` item ids.
        timestamps: ``(n,)`` timestamps (the latest one of merged duplicates) or ``None``.
        keys: ``(n,)`` sorted keys ``user * n_items + item``.
        indptr: ``(n_users + 1,)`` offsets: user ``u`` owns entries ``indptr[u]:indptr[u+1]``.
    """

    def __init__(
        self,
        pairs: Tensor,
        n_users: int | None = None,
        n_items: int | None = None,
        timestamps: Tensor | None = None,
    ) -> None:
        """Validate and index interactions.

        Args:
            pairs: ``(n, 2)`` integer tensor (or nested list) of ``(user id, item id)``.
            n_users: Number of users (default: one more than the largest user id).
            n_items: Number of items (default: one more than the largest item id).
            timestamps: Optional ``(n,)`` timestamps of the interactions.
        """
        pairs = _as_id_tensor(pairs, "pairs")
        if pairs.dim() != 2 or pairs.shape[1] != 2:
            raise ValueError(f"pairs must have shape (n, 2), got {tuple(pairs.shape)}.")
        if pairs.shape[0] == 0:
            raise ValueError("no interactions.")
        pairs = pairs.long()
        users, items = pairs[:, 0], pairs[:, 1]
        for name, value in (("n_users", n_users), ("n_items", n_items)):
            if value is not None:
                check_int(name, value, 1)
        self.n_users = int(users.max()) + 1 if n_users is None else int(n_users)
        self.n_items = int(items.max()) + 1 if n_items is None else int(n_items)
        for name, ids, size in (("user", users, self.n_users), ("item", items, self.n_items)):
            bad = ((ids < 0) | (ids >= size)).nonzero()
            if bad.numel() > 0:
                n = int(bad[0, 0])
                raise ValueError(
                    f"interaction {n}: {name} id {int(ids[n])} is out of range [0, {size})."
                )
        keys = users * self.n_items + items
        self.keys, inverse = torch.unique(keys, sorted=True, return_inverse=True)
        self.users = torch.div(self.keys, self.n_items, rounding_mode="floor")
        self.items = self.keys - self.users * self.n_items
        self.timestamps = None
        if timestamps is not None:
            timestamps = _checked_timestamps(timestamps, len(users), pairs.device)
            lowest = (
                -torch.inf if timestamps.is_floating_point() else torch.iinfo(timestamps.dtype).min
            )
            latest = torch.full(
                self.keys.shape, lowest, dtype=timestamps.dtype, device=timestamps.device
            )
            self.timestamps = latest.scatter_reduce(0, inverse, timestamps, reduce="amax")
        counts = torch.bincount(self.users, minlength=self.n_users)
        self.indptr = torch.zeros(self.n_users + 1, dtype=torch.long, device=pairs.device)
        self.indptr[1:] = torch.cumsum(counts, 0)
        self._shifted_keys: Tensor | None = None
        self._bitmap: Tensor | None = None
        if self.n_users * self.n_items <= BITMAP_LIMIT:
            self._bitmap = torch.zeros(
                self.n_users * self.n_items, dtype=torch.bool, device=pairs.device
            )
            self._bitmap[self.keys] = True
        saturated = (counts >= self.n_items).nonzero()
        self._saturated_user = int(saturated[0, 0]) if saturated.numel() > 0 else None

    @property
    def saturated_user(self) -> int | None:
        """The first user who interacted with every item (no negative exists), or ``None``."""
        return self._saturated_user

    # ------------------------------------------------------------------ basics
    def _anchor(self) -> Tensor:
        return self.keys

    def _summary(self) -> dict[str, object]:
        return {"n_interactions": len(self), "n_users": self.n_users, "n_items": self.n_items}

    @property
    def pairs(self) -> Tensor:
        """``(n, 2)`` deduplicated ``(user, item)`` pairs."""
        return torch.stack([self.users, self.items], dim=-1)

    def to(self, device: torch.device | str) -> ImplicitFeedback:
        """Return a copy on ``device``."""
        ts = None if self.timestamps is None else self.timestamps.to(device)
        return ImplicitFeedback(self.pairs.to(device), self.n_users, self.n_items, ts)

    def user_counts(self) -> Tensor:
        """``(n_users,)`` number of interactions of each user."""
        return self.indptr[1:] - self.indptr[:-1]

    def item_counts(self) -> Tensor:
        """``(n_items,)`` number of users who interacted with each item (popularity)."""
        return torch.bincount(self.items, minlength=self.n_items)

    def contains(self, users: Tensor, items: Tensor) -> Tensor:
        """Whether each ``(users[k], items[k])`` was observed (same shape).

        A lookup in a ``n_users * n_items`` bitmap when that has at most ``2**26`` entries, a
        binary search in the sorted keys otherwise.
        """
        query = users * self.n_items + items
        # index_select: an order of magnitude faster than advanced indexing on CPU.
        if self._bitmap is not None:
            return self._bitmap.index_select(0, query.reshape(-1)).view(query.shape)
        pos = torch.searchsorted(self.keys, query).clamp_max(len(self) - 1)
        return self.keys.index_select(0, pos.reshape(-1)).view(query.shape) == query

    def _user_ids(self, users: Tensor | Sequence[int]) -> Tensor:
        """``users`` as a 1-d long tensor on the device of the data.

        Args:
            users: User ids (a tensor or a sequence of integers).

        Returns:
            ``(B,)`` long tensor.

        Raises:
            TypeError: If the ids are boolean, complex or not numbers.
            ValueError: If they are fractional or floating, not 1-d, or out of range.
        """
        users = _as_id_tensor(users, "users")
        if users.dim() != 1:
            raise ValueError(
                f"users must be a 1-d tensor of user ids, got shape {tuple(users.shape)}."
            )
        users = users.to(self.device).long()
        if users.numel() > 0:
            low, high = torch.aminmax(users)
            if bool((low < 0) | (high >= self.n_users)):
                bad = users[(users < 0) | (users >= self.n_users)].unique()[:5].tolist()
                raise ValueError(f"user id(s) {bad} out of range [0, {self.n_users}).")
        return users

    def exclusion_mask(self, users: Tensor | Sequence[int]) -> Tensor:
        """``(len(users), n_items)`` boolean mask of each user's observed items.

        Args:
            users: ``(B,)`` user ids.

        Returns:
            ``(B, n_items)`` mask, ``True`` where the user interacted with the item.

        Raises:
            TypeError: If the ids are boolean, complex or not numbers.
            ValueError: If they are fractional or floating, not 1-d, or out of range.
        """
        users = self._user_ids(users)
        counts = self.indptr[users + 1] - self.indptr[users]
        local = torch.repeat_interleave(torch.arange(users.shape[0], device=self.device), counts)
        starts = torch.repeat_interleave(self.indptr[users], counts)
        offsets = torch.arange(local.shape[0], device=self.device)
        offsets = offsets - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
        mask = torch.zeros(users.shape[0], self.n_items, dtype=torch.bool, device=self.device)
        mask[local, self.items[starts + offsets]] = True
        return mask

    # ------------------------------------------------------------------ sampling
    def sample_negatives(
        self,
        users: Tensor | Sequence[int],
        generator: torch.Generator | None = None,
        max_rounds: int = 4,
    ) -> Tensor:
        r"""Draw, for each user, an item uniformly among the items the user did not interact with.

        Items are drawn uniformly from all items and only the draws that hit an observed item are
        redrawn; draws still colliding after ``max_rounds`` rounds (users who saw most items)
        are drawn exactly from their complement: with the user's observed items
        :math:`o_0 < o_1 < \dots` and :math:`r` uniform on the number of unobserved items, the
        :math:`r`-th unobserved item is :math:`r + \#\{i : o_i - i \le r\}` (a binary search).

        Args:
            users: ``(B,)`` user ids.
            generator: Random generator on the device of the data.
            max_rounds: Rejection rounds before the exact fallback.

        Returns:
            ``(B,)`` item ids, none of them observed for its user.

        Raises:
            TypeError: If the user ids are boolean, complex or not numbers.
            ValueError: If they are fractional or floating, not 1-d, or out of range, or a
                user has interacted with every item.
        """
        users = self._user_ids(users)
        if self._saturated_user is not None:
            full = self.user_counts()[users] >= self.n_items
            if bool(full.any()):
                user = int(users[full][0])
                raise ValueError(
                    f"user {user} has interacted with every item: no negative item exists."
                )
        negatives = self._draw_items(users.shape, generator)
        bad = self.contains(users, negatives).nonzero().squeeze(-1)
        for _ in range(max_rounds):
            if bad.numel() == 0:
                return negatives
            redraw = self._draw_items(bad.shape, generator)
            negatives[bad] = redraw
            bad = bad[self.contains(users.index_select(0, bad), redraw)]
        if bad.numel() > 0:
            negatives[bad] = self._sample_complement(users.index_select(0, bad), generator)
        return negatives

    def _draw_items(self, shape: torch.Size, generator: torch.Generator | None) -> Tensor:
        """Uniform item ids (drawn as 32-bit integers where they fit: about twice as fast)."""
        dtype = torch.int32 if self.n_items < 2**31 else torch.long
        draws = torch.randint(
            self.n_items, shape, device=self.device, generator=generator, dtype=dtype
        )
        return draws.long()

    def _sample_complement(self, users: Tensor, generator: torch.Generator | None) -> Tensor:
        """Exact uniform draws from each user's unobserved items (see :meth:`sample_negatives`)."""
        if self._shifted_keys is None:
            local = torch.arange(len(self), device=self.device) - self.indptr[self.users]
            self._shifted_keys = self.users * (self.n_items + 1) + (self.items - local)
        free = self.n_items - self.user_counts()[users]
        uniform = torch.rand(
            users.shape, generator=generator, device=self.device, dtype=torch.float64
        )
        r = torch.minimum((uniform * free).long(), free - 1)
        query = users * (self.n_items + 1) + r
        below = torch.searchsorted(self._shifted_keys, query, right=True) - self.indptr[users]
        return r + below

    def batches(
        self, batch_size: int, generator: torch.Generator | None = None
    ) -> list[tuple[Tensor, Tensor, Tensor]]:
        """One epoch of ``(users, positives, negatives)`` batches.

        Every interaction is a positive exactly once, in a random order; each gets a fresh
        negative from :meth:`sample_negatives`.

        Args:
            batch_size: Pairs per batch (the last batch may be smaller).
            generator: Random generator on the device of the data.

        Returns:
            A list of ``(users, positive items, negative items)`` triples of ``(B,)`` tensors.

        Raises:
            TypeError: If ``batch_size`` is not an integer.
            ValueError: If ``batch_size`` is below 1, or a user has interacted with every item.
        """
        check_int("batch_size", batch_size, 1)
        batch_size = int(batch_size)
        order = torch.randperm(len(self), device=self.device, generator=generator)
        users, positives = self.users[order], self.items[order]
        negatives = self.sample_negatives(users, generator)
        return [
            (u, p, n)
            for u, p, n in zip(
                users.split(batch_size),
                positives.split(batch_size),
                negatives.split(batch_size),
                strict=True,
            )
        ]


@dataclass
class LeaveOneOutSplit:
    """A leave-one-out split.

    Attributes:
        train: The training interactions.
        users: ``(T,)`` the users with a held-out interaction.
        items: ``(T,)`` their held-out items (not in ``train``).
    """

    train: ImplicitFeedback
    users: Tensor
    items: Tensor


def leave_one_out(
    data: ImplicitFeedback, seed: int = 0, by: str = "random", min_interactions: int = 2
) -> LeaveOneOutSplit:
    """Hold out one interaction of every user with at least ``min_interactions`` of them.

    Args:
        data: The interactions.
        seed: Seed of the random choice (and of tie-breaking with ``by="latest"``).
        by: ``"random"`` (uniform over the user's interactions) or ``"latest"`` (largest
            timestamp; needs ``data.timestamps``).
        min_interactions: Users with fewer interactions keep all of them for training.

    Returns:
        A :class:`LeaveOneOutSplit`.

    Raises:
        TypeError: If ``min_interactions`` is not an integer.
        ValueError: If ``by`` is unknown, ``by="latest"`` lacks timestamps, or
            ``min_interactions`` is below 2.
    """
    if by not in ("random", "latest"):
        raise ValueError(f"by must be 'random' or 'latest', got {by!r}.")
    if by == "latest" and data.timestamps is None:
        raise ValueError("by='latest' needs interactions with timestamps.")
    check_int("min_interactions", min_interactions, 2)
    generator = torch.Generator().manual_seed(seed)
    noise = torch.rand(len(data), generator=generator, dtype=torch.float64).to(data.device)
    # Order by (user, key): the held-out one is the last of each user's group.
    order = torch.argsort(noise, stable=True)
    if by == "latest":
        order = order[torch.argsort(data.timestamps[order], stable=True)]
    order = order[torch.argsort(data.users[order], stable=True)]
    counts = data.user_counts()
    eligible = (counts >= min_interactions).nonzero().squeeze(-1)
    held = order[data.indptr[eligible + 1] - 1]
    keep = torch.ones(len(data), dtype=torch.bool, device=data.device)
    keep[held] = False
    timestamps = None if data.timestamps is None else data.timestamps[keep]
    train = ImplicitFeedback(data.pairs[keep], data.n_users, data.n_items, timestamps)
    return LeaveOneOutSplit(train=train, users=data.users[held], items=data.items[held])
