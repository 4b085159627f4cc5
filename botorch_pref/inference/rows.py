r"""Difference rows: the matrix ``A`` that maps utilities at the designs to utility differences.

Every observation the Laplace engines handle is a function of differences
:math:`f_i - f_j` of the latent utility at designs ``i`` and ``j``. A list of ``r`` index pairs
``rows`` (``B x r x 2``) defines the matrix ``A`` (``r x n`` per batch member) whose row ``k`` is
:math:`a_k = e_{i_k} - e_{j_k}`. A row ``(0, 0)`` is a zero row: engines use it as padding, and
it changes no result. A row ``(i, -1)`` is a row *against the origin*, :math:`a_k = e_i`: the
utility :math:`f_i` itself, as a rating sees it (a design whose utility is zero, with no prior
variance, in place of :math:`j`).

``A`` is never formed densely on the hot path. The products the Newton iterations need are
gathers and scatters:

.. math::

    (A M)_{k\cdot} = M_{i_k \cdot} - M_{j_k \cdot}, \qquad
    A^\top v = \sum_k v_k (e_{i_k} - e_{j_k}), \qquad
    [A K A^\top]_{kl} = K_{i_k i_l} - K_{i_k j_l} - K_{j_k i_l} + K_{j_k j_l},

each linear in the size of its output. Tensors carry one leading (flat) batch dimension ``B``.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["difference_matrix", "row_differences", "row_gram", "rows_times", "scatter_rows"]


def _flat_index(rows: Tensor, n: int) -> tuple[Tensor, Tensor, Tensor]:
    """Row indices of ``i`` and ``j`` in a ``(B * n)``-row view of a batch of matrices, and the
    mask of rows with a real ``j`` (not the origin)."""
    offset = (torch.arange(rows.shape[0], device=rows.device) * n).unsqueeze(-1)
    j = rows[..., 1]
    has_j = j >= 0
    return (
        (rows[..., 0] + offset).reshape(-1),
        (j.clamp_min(0) + offset).reshape(-1),
        has_j.reshape(-1),
    )


def rows_times(M: Tensor, rows: Tensor) -> Tensor:
    """``A M`` for a ``B x n x k`` tensor ``M``: row ``i`` minus row ``j`` of each row pair.

    Args:
        M: ``B x n x k`` tensor.
        rows: ``B x r x 2`` index pairs.

    Returns:
        The ``B x r x k`` product.
    """
    B, n, k = M.shape
    ii, jj, has_j = _flat_index(rows, n)
    flat = M.reshape(B * n, k)
    second = torch.where(has_j.unsqueeze(-1), flat.index_select(0, jj), 0.0)
    return (flat.index_select(0, ii) - second).reshape(B, -1, k)


def row_gram(K: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    r"""Gather :math:`A K` (``B x r x n``) and :math:`K_A = A K A^\top` (``B x r x r``).

    Args:
        K: ``B x n x n`` symmetric prior covariance at the designs.
        rows: ``B x r x 2`` index pairs.

    Returns:
        ``(AK, K_A)``; :math:`K A^\top` is ``AK.mT`` by symmetry.
    """
    AK = rows_times(K, rows)
    return AK, rows_times(AK.transpose(-1, -2), rows)


def scatter_rows(values: Tensor, rows: Tensor, n: int) -> Tensor:
    r""":math:`A^\top v`: row values (``B x r`` or ``B x r x k``) to design values.

    Args:
        values: ``B x r`` or ``B x r x k`` values, one per row.
        rows: ``B x r x 2`` index pairs.
        n: Number of designs.

    Returns:
        ``B x n`` (or ``B x n x k``) design values.
    """
    vector = values.dim() == 2
    v = values.unsqueeze(-1) if vector else values
    B, r, k = v.shape
    ii, jj, has_j = _flat_index(rows, n)
    v = v.reshape(B * r, k)
    out = v.new_zeros(B * n, k)
    out.index_add_(0, ii, v)
    out.index_add_(0, jj, torch.where(has_j.unsqueeze(-1), v, 0.0), alpha=-1)
    out = out.reshape(B, n, k)
    return out.squeeze(-1) if vector else out


def row_differences(f: Tensor, rows: Tensor) -> Tensor:
    """Differences ``f_i - f_j`` (``B x r``) of a ``B x n`` vector: :math:`A f`."""
    j = rows[..., 1]
    second = torch.where(j >= 0, f.gather(-1, j.clamp_min(0)), 0.0)
    return f.gather(-1, rows[..., 0]) - second


def difference_matrix(rows: Tensor, n: int, like: Tensor) -> Tensor:
    """The dense ``B x r x n`` matrix ``A`` (for factors formed once per data set).

    Args:
        rows: ``B x r x 2`` index pairs.
        n: Number of designs.
        like: A tensor whose dtype and device ``A`` takes.

    Returns:
        ``A``; a row ``(i, i)`` is zero.
    """
    B, r = rows.shape[0], rows.shape[1]
    A = like.new_zeros(B, r, n)
    ones = like.new_ones(B, r, 1)
    A.scatter_add_(-1, rows[..., :1], ones)
    j = rows[..., 1:]
    A.scatter_add_(-1, j.clamp_min(0), torch.where(j >= 0, -ones, 0.0))
    return A
