r"""Rankings of dyads: a validated, padded container.

A dyad :math:`z = (i, j)` pairs a row entity :math:`i \in \{0, \dots, |R|-1\}` with a column
entity :math:`j \in \{0, \dots, |C|-1\}`. A ranking lists :math:`M \ge 2` distinct dyads in
preference order. A batch of rankings of different lengths is stored as two ``(N, M_max)`` long
tensors (row ids and column ids, padded with zeros) and an ``(N,)`` tensor of lengths.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["DyadRankings"]


class TensorRecords:
    """Base of the id-tensor containers: the length, the device and a one-line ``repr``.

    A subclass names the tensor whose first dimension counts its records (``_anchor``) and the
    numbers its ``repr`` shows (``_summary``).
    """

    def _anchor(self) -> Tensor:
        raise NotImplementedError

    def _summary(self) -> dict[str, object]:
        raise NotImplementedError

    def __len__(self) -> int:
        return int(self._anchor().shape[0])

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value}" for name, value in self._summary().items())
        return f"{type(self).__name__}({fields}, device={self.device})"

    @property
    def device(self) -> torch.device:
        """The device of the tensors."""
        return self._anchor().device


class DyadRankings(TensorRecords):
    """Rankings of dyads ``(row id, column id)`` in preference order.

    Example:
        >>> r = DyadRankings.from_lists([[(0, 1), (2, 0)], [(1, 1), (0, 0), (2, 1)]])
        >>> len(r), r.max_length, r.n_rows, r.n_cols
        (2, 3, 3, 2)
    """

    def __init__(
        self,
        rows: Tensor,
        cols: Tensor,
        lengths: Tensor | None = None,
        n_rows: int | None = None,
        n_cols: int | None = None,
        validate: bool = True,
    ) -> None:
        """Wrap padded tensors of rankings.

        Args:
            rows: ``(N, M)`` integer row ids in preference order (padding after ``lengths``).
            cols: ``(N, M)`` integer column ids, same layout as ``rows``.
            lengths: ``(N,)`` lengths of the rankings; ``None`` means all have length ``M``.
            n_rows: Number of row entities; defaults to one more than the largest row id.
            n_cols: Number of column entities; defaults to one more than the largest column id.
            validate: Check ids, lengths and duplicates (see :meth:`validate`).

        Raises:
            TypeError: If ``n_rows`` or ``n_cols`` is given but not an integer.
            ValueError: If the tensors have the wrong shape or dtype, or (with ``validate``)
                the rankings fail :meth:`validate`.
        """
        for name, size in (("n_rows", n_rows), ("n_cols", n_cols)):
            if size is not None:
                check_int(name, size, minimum=None)  # validate() checks the range
        rows = torch.as_tensor(rows)
        cols = torch.as_tensor(cols, device=rows.device)
        if rows.dim() != 2 or rows.shape != cols.shape:
            raise ValueError(
                "rows and cols must be 2-d tensors of the same shape (rankings x positions), "
                f"got {tuple(rows.shape)} and {tuple(cols.shape)}."
            )
        if not (holds_integers(rows) and holds_integers(cols)):
            raise ValueError(
                f"row and column ids must be integers, got dtypes {rows.dtype} and {cols.dtype}."
            )
        rows, cols = rows.long(), cols.long()
        if lengths is None:
            lengths = torch.full((rows.shape[0],), rows.shape[1], device=rows.device)
        lengths = torch.as_tensor(lengths, device=rows.device)
        if not holds_integers(lengths):
            raise ValueError(f"lengths must be integers, got dtype {lengths.dtype}.")
        lengths = lengths.long()
        if lengths.shape != rows.shape[:1]:
            raise ValueError(
                f"lengths must have shape ({rows.shape[0]},), got {tuple(lengths.shape)}."
            )
        valid = torch.arange(rows.shape[1], device=rows.device) < lengths.unsqueeze(-1)
        # Canonical zero padding, so padded ids are always safe to gather with.
        self.rows = torch.where(valid, rows, torch.zeros_like(rows))
        self.cols = torch.where(valid, cols, torch.zeros_like(cols))
        self.lengths = lengths
        self.n_rows = int(n_rows) if n_rows is not None else _infer_size(rows, valid)
        self.n_cols = int(n_cols) if n_cols is not None else _infer_size(cols, valid)
        if validate:
            self.validate(raw_rows=rows, raw_cols=cols)

    @classmethod
    def from_lists(
        cls,
        rankings: Sequence[Sequence[tuple[int, int]]],
        n_rows: int | None = None,
        n_cols: int | None = None,
        device: torch.device | str | None = None,
    ) -> DyadRankings:
        """Build rankings from Python lists of ``(row id, column id)`` pairs.

        Args:
            rankings: One sequence of dyads per ranking, most preferred first.
            n_rows: Number of row entities (default: inferred from the ids).
            n_cols: Number of column entities (default: inferred from the ids).
            device: Device of the tensors.

        Returns:
            The validated rankings.
        """
        rankings = [list(r) for r in rankings]
        width = max((len(r) for r in rankings), default=0)
        rows = torch.zeros(len(rankings), width, dtype=torch.long)
        cols = torch.zeros(len(rankings), width, dtype=torch.long)
        lengths = torch.zeros(len(rankings), dtype=torch.long)
        for n, ranking in enumerate(rankings):
            for m, dyad in enumerate(ranking):
                if len(dyad) != 2:
                    raise ValueError(
                        f"ranking {n}: each dyad must be a (row id, column id) pair, got {dyad!r}."
                    )
                rows[n, m], cols[n, m] = _int_id(dyad[0], n, m), _int_id(dyad[1], n, m)
            lengths[n] = len(ranking)
        return cls(rows.to(device), cols.to(device), lengths.to(device), n_rows, n_cols)

    # ------------------------------------------------------------------ validation
    def validate(self, raw_rows: Tensor | None = None, raw_cols: Tensor | None = None) -> None:
        """Check the rankings; raise a ``ValueError`` naming the first problem found.

        Checks: lengths between 2 and the padded width, row ids in ``[0, n_rows)``, column ids
        in ``[0, n_cols)``, and no dyad listed twice in one ranking.
        """
        rows = self.rows if raw_rows is None else raw_rows
        cols = self.cols if raw_cols is None else raw_cols
        if self.n_rows < 1 or self.n_cols < 1:
            raise ValueError(
                f"n_rows and n_cols must be positive, got {self.n_rows} and {self.n_cols}."
            )
        if len(self) == 0:
            return
        width = self.rows.shape[1]
        short = (self.lengths < 2).nonzero()
        if short.numel() > 0:
            n = int(short[0, 0])
            raise ValueError(
                f"ranking {n} has length {int(self.lengths[n])}: every ranking needs at least "
                "2 dyads."
            )
        if int(self.lengths.max()) > width:
            n = int(self.lengths.argmax())
            raise ValueError(f"ranking {n}: length exceeds the padded width {width}.")
        valid = self.mask
        for name, ids, size in (("row", rows, self.n_rows), ("column", cols, self.n_cols)):
            bad = (valid & ((ids < 0) | (ids >= size))).nonzero()
            if bad.numel() > 0:
                n, m = int(bad[0, 0]), int(bad[0, 1])
                raise ValueError(
                    f"ranking {n}, position {m}: {name} id {int(ids[n, m])} is out of range "
                    f"[0, {size})."
                )
        keys = self.rows * self.n_cols + self.cols
        # Distinct negative keys on padding, so padding never collides.
        positions = torch.arange(width, device=keys.device).expand_as(keys)
        keys = torch.where(valid, keys, -1 - positions)
        sorted_keys = keys.sort(dim=-1).values
        dup = (sorted_keys[:, 1:] == sorted_keys[:, :-1]).nonzero()
        if dup.numel() > 0:
            n, m = int(dup[0, 0]), int(dup[0, 1])
            key = int(sorted_keys[n, m])
            raise ValueError(
                f"ranking {n} lists the dyad ({key // self.n_cols}, {key % self.n_cols}) twice."
            )

    # ------------------------------------------------------------------ views
    def _anchor(self) -> Tensor:
        return self.rows

    def _summary(self) -> dict[str, object]:
        return {
            "n_rankings": len(self),
            "max_length": self.max_length,
            "n_rows": self.n_rows,
            "n_cols": self.n_cols,
        }

    @property
    def max_length(self) -> int:
        """The padded width ``M``."""
        return int(self.rows.shape[1])

    @property
    def mask(self) -> Tensor:
        """``(N, M)`` boolean mask of the real (non-padding) entries."""
        width = self.rows.shape[1]
        return torch.arange(width, device=self.device) < self.lengths.unsqueeze(-1)

    def to(self, device: torch.device | str) -> DyadRankings:
        """Return a copy on ``device``."""
        return DyadRankings(
            self.rows.to(device),
            self.cols.to(device),
            self.lengths.to(device),
            self.n_rows,
            self.n_cols,
            validate=False,
        )

    def __getitem__(self, index: Tensor | slice | Sequence[int] | int) -> DyadRankings:
        """Select rankings (same id spaces); the padded width shrinks to the longest one."""
        if not isinstance(index, slice):
            index = torch.as_tensor(index, device=self.device)
            if index.dim() == 0:
                index = index.reshape(1)
            if index.numel() == 0:
                index = index.long()
        lengths = self.lengths[index]
        width = int(lengths.max()) if lengths.numel() > 0 else 0
        return DyadRankings(
            self.rows[index, :width],
            self.cols[index, :width],
            lengths,
            self.n_rows,
            self.n_cols,
            validate=False,
        )

    def to_lists(self) -> list[list[tuple[int, int]]]:
        """The rankings as Python lists of ``(row id, column id)`` tuples."""
        rows, cols, lengths = self.rows.tolist(), self.cols.tolist(), self.lengths.tolist()
        return [
            list(zip(r[:n], c[:n], strict=True))
            for r, c, n in zip(rows, cols, lengths, strict=True)
        ]

    def seen_rows(self) -> Tensor:
        """``(n_rows,)`` boolean mask of the row ids that occur in some ranking."""
        return _seen(self.rows[self.mask], self.n_rows)

    def seen_cols(self) -> Tensor:
        """``(n_cols,)`` boolean mask of the column ids that occur in some ranking."""
        return _seen(self.cols[self.mask], self.n_cols)

    # ------------------------------------------------------------------ splitting
    def kfold(self, n_folds: int, seed: int = 0) -> list[tuple[DyadRankings, DyadRankings]]:
        """Split by ranking into ``n_folds`` (train, test) pairs; every ranking is tested once.

        Args:
            n_folds: Number of folds, between 2 and the number of rankings.
            seed: Seed of the random permutation of the rankings.

        Returns:
            A list of ``(train, test)`` pairs; fold sizes differ by at most one.

        Raises:
            TypeError: If ``n_folds`` is not an integer.
            ValueError: If ``n_folds`` lies outside ``[2, len(self)]``.
        """
        check_int("n_folds", n_folds, minimum=None)
        n_folds = int(n_folds)
        if not 2 <= n_folds <= len(self):
            raise ValueError(
                f"n_folds must lie in [2, {len(self)}] (the number of rankings), got {n_folds}."
            )
        order = self._permutation(seed)
        folds = torch.tensor_split(order, n_folds)
        splits = []
        for f, test in enumerate(folds):
            train = torch.cat([folds[g] for g in range(n_folds) if g != f])
            splits.append((self[train], self[test]))
        return splits

    def split(self, test_fraction: float, seed: int = 0) -> tuple[DyadRankings, DyadRankings]:
        """Split by ranking into (train, test) with a random ``test_fraction`` held out.

        Args:
            test_fraction: Fraction in ``(0, 1)`` of the rankings to hold out (at least one,
                and at least one is kept for training).
            seed: Seed of the random permutation.

        Returns:
            ``(train, test)``.
        """
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}.")
        if len(self) < 2:
            raise ValueError("splitting needs at least 2 rankings.")
        n_test = min(max(1, round(test_fraction * len(self))), len(self) - 1)
        order = self._permutation(seed)
        return self[order[n_test:]], self[order[:n_test]]

    def _permutation(self, seed: int) -> Tensor:
        generator = torch.Generator().manual_seed(seed)
        return torch.randperm(len(self), generator=generator).to(self.device)


def _int_id(value: object, n: int, m: int) -> int:
    """An id as an int; fractional, boolean and non-numeric ids raise (never truncate)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, Tensor) and value.numel() == 1 and holds_integers(value):
        return int(value)
    raise ValueError(f"ranking {n}, position {m}: ids must be integers, got {value!r}.")


def holds_integers(values: Tensor) -> bool:
    """Whether a tensor's dtype holds integers (not floating, complex or boolean): ids,
    lengths and counts must."""
    return not (values.is_floating_point() or values.is_complex() or values.dtype == torch.bool)


def check_int(name: str, value: object, minimum: int | None) -> None:
    """Raise unless ``value`` is an integer (not a bool) of at least ``minimum`` (if given).

    Args:
        name: The argument's name, for the message.
        value: The value to check.
        minimum: The smallest allowed value, or ``None`` for no lower bound.

    Raises:
        TypeError: If ``value`` is a bool or not an integer.
        ValueError: If ``value`` is below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}.")
    if minimum is not None and int(value) < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}.")


def _infer_size(ids: Tensor, valid: Tensor) -> int:
    real = ids[valid]
    return int(real.max()) + 1 if real.numel() > 0 else 0


def _seen(ids: Tensor, size: int) -> Tensor:
    seen = torch.zeros(size, dtype=torch.bool, device=ids.device)
    seen[ids] = True
    return seen
