r"""The latent-feature Plackett-Luce model (LFPL, Schaefer 2017).

Each row entity :math:`i` has a latent vector :math:`U_i \in \mathbb{R}^K` and each column entity
:math:`j` a latent vector :math:`V_j \in \mathbb{R}^K`. The log-skill of the dyad :math:`(i, j)` is

.. math::

    \log v(i, j) = U_i^\top V_j ,

and a ranking of dyads follows the Plackett-Luce model with these log-skills. A dyad ``(i, j)``
that never occurred can be scored as long as ``i`` and ``j`` each occurred in training.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor, nn

from botorch_pref.lfpl.dyads import DyadRankings, holds_integers
from botorch_pref.lfpl.plackett_luce import plackett_luce_nll

__all__ = ["LFPL"]


class LFPL(nn.Module):
    """Latent-feature Plackett-Luce model with factors ``U`` (``n_rows x dim``) and ``V``.

    The buffers ``seen_rows`` and ``seen_cols`` record which ids the model was trained on;
    :meth:`score` and :meth:`rank` refuse the others.
    """

    def __init__(
        self,
        n_rows: int,
        n_cols: int,
        dim: int,
        init_scale: float = 0.1,
        seed: int | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        """Create a model with factors drawn i.i.d. from ``N(0, init_scale^2)``.

        Args:
            n_rows: Number of row entities ``|R|``.
            n_cols: Number of column entities ``|C|``.
            dim: Latent dimension ``K``.
            init_scale: Standard deviation of the initial factors.
            seed: Seed of the initial factors (``None``: torch's global generator).
            device: Device of the parameters.
            dtype: Floating dtype of the parameters (default: torch's default, float32).
        """
        super().__init__()
        for name, value in (("n_rows", n_rows), ("n_cols", n_cols), ("dim", dim)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"{name} must be an integer, got {value!r}.")
            if int(value) < 1:
                raise ValueError(f"{name} must be a positive integer, got {value}.")
        if isinstance(init_scale, bool) or not isinstance(init_scale, numbers.Real):
            raise TypeError(f"init_scale must be a number, got {init_scale!r}.")
        if not (math.isfinite(init_scale) and init_scale >= 0):
            raise ValueError(f"init_scale must be finite and non-negative, got {init_scale}.")
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating dtype, got {dtype}.")
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        u = torch.randn(n_rows, dim, generator=generator, dtype=dtype) * init_scale
        v = torch.randn(n_cols, dim, generator=generator, dtype=dtype) * init_scale
        self.U = nn.Parameter(u.to(device))
        self.V = nn.Parameter(v.to(device))
        self.register_buffer("seen_rows", torch.zeros(n_rows, dtype=torch.bool, device=device))
        self.register_buffer("seen_cols", torch.zeros(n_cols, dtype=torch.bool, device=device))

    @classmethod
    def from_factors(cls, U: Tensor, V: Tensor) -> LFPL:
        """A model with the given factors; every id counts as seen.

        Args:
            U: ``(n_rows, K)`` row factors.
            V: ``(n_cols, K)`` column factors.

        Returns:
            The model (parameters are copies of ``U`` and ``V``).
        """
        for name, factor in (("U", U), ("V", V)):
            if not isinstance(factor, Tensor) or not factor.is_floating_point():
                raise TypeError(f"{name} must be a floating tensor, got {factor!r:.80}.")
        if U.dim() != 2 or V.dim() != 2 or U.shape[1] != V.shape[1]:
            raise ValueError(
                f"U and V must be 2-d with the same number of columns, got {tuple(U.shape)} "
                f"and {tuple(V.shape)}."
            )
        if U.dtype != V.dtype or U.device != V.device:
            raise ValueError(
                f"U and V must share dtype and device, got {U.dtype} on {U.device} and "
                f"{V.dtype} on {V.device}."
            )
        for name, factor in (("U", U), ("V", V)):
            bad = (~torch.isfinite(factor)).nonzero()
            if bad.numel() > 0:
                i, k = int(bad[0, 0]), int(bad[0, 1])
                raise ValueError(
                    f"{name}[{i}, {k}] is {float(factor[i, k])}: factors must be finite."
                )
        model = cls(
            U.shape[0], V.shape[0], U.shape[1], init_scale=0.0, device=U.device, dtype=U.dtype
        )
        with torch.no_grad():
            model.U.data = U.detach().clone()
            model.V.data = V.detach().clone()
        model.seen_rows.fill_(True)
        model.seen_cols.fill_(True)
        return model

    @property
    def n_rows(self) -> int:
        """Number of row entities."""
        return int(self.U.shape[0])

    @property
    def n_cols(self) -> int:
        """Number of column entities."""
        return int(self.V.shape[0])

    @property
    def dim(self) -> int:
        """Latent dimension ``K``."""
        return int(self.U.shape[1])

    def mark_seen(self, rankings: DyadRankings | None = None) -> None:
        """Record the ids of ``rankings`` as seen (all ids when ``rankings`` is ``None``)."""
        if rankings is None:
            self.seen_rows.fill_(True)
            self.seen_cols.fill_(True)
            return
        self._check_sizes(rankings)
        self.seen_rows |= rankings.seen_rows().to(self.seen_rows.device)
        self.seen_cols |= rankings.seen_cols().to(self.seen_cols.device)

    def _check_sizes(self, rankings: DyadRankings) -> None:
        if rankings.n_rows != self.n_rows or rankings.n_cols != self.n_cols:
            raise ValueError(
                f"the rankings have {rankings.n_rows} rows and {rankings.n_cols} columns, the "
                f"model {self.n_rows} and {self.n_cols}."
            )

    def forward(self, rows: Tensor, cols: Tensor) -> Tensor:
        """Log-skills ``U[rows] . V[cols]`` without any check (for training loops)."""
        return (self.U[rows] * self.V[cols]).sum(dim=-1)

    def score(self, rows: Tensor, cols: Tensor, check_seen: bool = True) -> Tensor:
        r"""Log-skills :math:`U_i^\top V_j` of dyads.

        Args:
            rows: Integer row ids (any shape broadcastable with ``cols``).
            cols: Integer column ids.
            check_seen: Refuse ids the model was not trained on.

        Returns:
            Scores with the broadcast shape of ``rows`` and ``cols``.
        """
        rows = self._check_ids(rows, "row", self.n_rows, self.seen_rows if check_seen else None)
        cols = self._check_ids(cols, "column", self.n_cols, self.seen_cols if check_seen else None)
        return self(rows, cols)

    def rank(self, rows: Tensor, cols: Tensor, check_seen: bool = True) -> Tensor:
        """Rank dyads by decreasing score.

        Args:
            rows: ``(..., n)`` integer row ids.
            cols: ``(..., n)`` integer column ids.
            check_seen: Refuse ids the model was not trained on.

        Returns:
            ``(..., n)`` positions into the last dimension, the best dyad first; dyads of
            equal score keep their input order (the earlier position first).
        """
        scores = self.score(rows, cols, check_seen)
        return torch.argsort(scores, dim=-1, descending=True, stable=True)

    @torch.no_grad()
    def score_items(self, rows: Tensor) -> Tensor:
        """Scores of every column for each of the given rows: ``U[rows] @ V.T``.

        Columns never seen in training keep their initial factors.

        Args:
            rows: ``(b,)`` row ids, each seen in training.

        Returns:
            ``(b, n_cols)`` scores, detached from autograd.

        Raises:
            ValueError: If ``rows`` is not 1-d, holds non-integer ids, or ids out of range or
                not seen in training.
        """
        rows = self._check_ids(rows, "row", self.n_rows, self.seen_rows)
        if rows.dim() != 1:
            raise ValueError(
                f"rows must be a 1-d tensor of row ids, got shape {tuple(rows.shape)}."
            )
        return self.U[rows] @ self.V.T

    def nll(self, rankings: DyadRankings, reduction: str = "sum") -> Tensor:
        """Plackett-Luce negative log-likelihood of ``rankings`` (no penalty, no id check)."""
        self._check_sizes(rankings)
        scores = self(rankings.rows.to(self.U.device), rankings.cols.to(self.U.device))
        lengths = rankings.lengths.to(self.U.device)
        return plackett_luce_nll(scores, lengths, reduction=reduction, validate=False)

    def _check_ids(self, ids: Tensor, name: str, size: int, seen: Tensor | None) -> Tensor:
        ids = torch.as_tensor(ids, device=self.U.device)
        if not holds_integers(ids):
            raise ValueError(f"{name} ids must be integers, got dtype {ids.dtype}.")
        ids = ids.long()
        if ids.numel() == 0:
            return ids
        out = (ids < 0) | (ids >= size)
        if bool(out.any()):
            bad = ids[out].unique()[:5].tolist()
            raise ValueError(f"{name} id(s) {bad} out of range [0, {size}).")
        if seen is not None:
            unseen = ~seen[ids]
            if bool(unseen.any()):
                bad = ids[unseen].unique()[:5].tolist()
                raise ValueError(
                    f"{name} id(s) {bad} were not seen in training: the model has no factors "
                    "learned for them."
                )
        return ids
