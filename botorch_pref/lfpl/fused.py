r"""A training step for LFPL/IF without autograd: hand-derived gradients and row-sparse AdaGrad.

One training example is a user :math:`u`, an item :math:`p` the user interacted with and
:math:`L` items :math:`n_1, \dots, n_L` the user did not interact with. Its loss is the
Plackett-Luce (choice) negative log-likelihood that :math:`p` comes first among the
:math:`L + 1` dyads :math:`(u, p), (u, n_1), \dots, (u, n_L)` -- the top-1 stage of a
Plackett-Luce ranking, so ``L = 1`` is the BPR pair loss -- plus a penalty on the factors it
touches:

.. math::

    \ell = \log\Big(e^{s_0} + \sum_{l=1}^{L} e^{s_l}\Big) - s_0
        + \frac{\lambda}{2}\Big(\lVert U_u\rVert^2 + \lVert V_p\rVert^2
        + \sum_l \lVert V_{n_l}\rVert^2\Big),
    \qquad s_0 = U_u^\top V_p,\ s_l = U_u^\top V_{n_l}.

With the softmax :math:`\pi_l = e^{s_l} / \sum_{m=0}^{L} e^{s_m}` the gradients are

.. math::

    \frac{\partial \ell}{\partial U_u} = (\pi_0 - 1) V_p + \sum_l \pi_l V_{n_l} + \lambda U_u,
    \quad
    \frac{\partial \ell}{\partial V_p} = (\pi_0 - 1) U_u + \lambda V_p,
    \quad
    \frac{\partial \ell}{\partial V_{n_l}} = \pi_l U_u + \lambda V_{n_l}.

A mini-batch :math:`B` minimises the mean :math:`\frac{1}{|B|}\sum_B \ell`. With the items of
an example in one row :math:`i_0 = p, i_1 = n_1, \dots, i_L = n_L` and the weights
:math:`w_0 = (\pi_0 - 1) / |B|`, :math:`w_l = \pi_l / |B|`, the user gradient is
:math:`\sum_m w_m V_{i_m}` (a weighted ``embedding_bag``, no ``(B, L + 1, K)`` product) and the
item gradients :math:`w_m U_u` are summed per row without a ``(B, L + 1, K)`` product either
(:meth:`RowAdagrad.accumulate_outer`: on the CPU a radix sort of the batch's item ids and one
weighted ``embedding_bag`` over the ``U_u``, elsewhere a sparse-dense product); the penalty
terms are added per row from occurrence counts. AdaGrad then moves only the rows the batch
touched (:class:`RowAdagrad`): for a row :math:`r` with summed gradient :math:`g_r`,

.. math::

    G_r \leftarrow G_r + g_r \odot g_r, \qquad
    W_r \leftarrow W_r - \eta\, g_r / (\sqrt{G_r} + \epsilon),

which is exactly ``torch.optim.Adagrad`` on the full table (rows without gradient do not move
there either), at a cost that grows with the batch, not with the table. Nothing in a step reads
a value back to the host, so a step is a fixed sequence of kernels on CPU or CUDA.

The *alternating* step (Schaefer 2017) moves ``U`` with ``V`` fixed and then ``V`` with the new
``U``; the *joint* step moves both from the same gradients.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["RowAdagrad", "choice_step", "hardest_negatives"]

#: Tables with at most this many rows sum their gradient rows through a radix sort on the CPU.
GROUPED_MAX_ROWS = 2**15


def _grouped_by_row(flat: Tensor, n_rows: int) -> tuple[Tensor, Tensor]:
    """The positions of ``flat`` in the order of their row ids, and where each row's run starts.

    The sort is stable, so each row's occurrences keep their order in ``flat``; ids below
    :data:`GROUPED_MAX_ROWS` sort as 16-bit integers, which numpy sorts by radix
    (linear time, about ten times faster than a comparison sort at a batch's size).

    Args:
        flat: ``(n,)`` row ids on the CPU, each below :data:`GROUPED_MAX_ROWS`.
        n_rows: Number of rows of the table.

    Returns:
        ``(n,)`` positions into ``flat`` and ``(n_rows,)`` offsets of the runs.
    """
    keys = flat.numpy().astype(np.int16)
    order = torch.from_numpy(np.argsort(keys, kind="stable"))
    counts = torch.bincount(flat, minlength=n_rows)
    return order, counts.cumsum(0).sub_(counts)


class RowAdagrad:
    """AdaGrad on the rows of a factor table, in place, touching only the rows given.

    Attributes:
        table: The factor table (updated in place).
        sum_sq: The running sums of squared gradients, same shape as ``table``.
        eps: The term added to the root in the denominator.
    """

    def __init__(self, table: Tensor, eps: float = 1e-10, initial_accumulator: float = 0.0):
        """Wrap ``table``.

        Args:
            table: ``(n, K)`` floating tensor to update in place (e.g. ``model.U.data``).
            eps: Denominator term, as ``torch.optim.Adagrad``'s ``eps``.
            initial_accumulator: Initial value of the squared-gradient sums.
        """
        self.table = table
        self.sum_sq = torch.full_like(table, float(initial_accumulator))
        self._grad = torch.zeros_like(table)
        self._decay: Tensor | None = None
        self.eps = float(eps)

    @property
    def grad(self) -> Tensor:
        """The summed gradient buffer (zero between steps); data-parallel training reduces it."""
        return self._grad

    def accumulate(self, ids: Tensor, grads: Tensor) -> None:
        """Add gradient contributions to the buffer.

        Args:
            ids: ``(n,)`` row ids, repeats allowed (their gradients add up).
            grads: ``(n, K)`` gradient contributions, one per id.
        """
        if self._groups(ids):
            # The rows' sums by a radix sort and an embedding_bag, in the order of ids.
            order, offsets = _grouped_by_row(ids, self.table.shape[0])
            self._grad.add_(F.embedding_bag(order, grads, offsets, mode="sum"))
        else:
            self._grad.index_add_(0, ids, grads)

    def _groups(self, flat: Tensor) -> bool:
        """Whether to sum per row by grouping ``flat``: on the CPU, a small table, most rows hit.

        The grouped sums fill a whole-table buffer, which pays only when the ids touch a good
        part of the table.
        """
        n_rows = self.table.shape[0]
        small = n_rows <= GROUPED_MAX_ROWS and flat.shape[0] * 4 >= n_rows
        return flat.device.type == "cpu" and small and flat.shape[0] > 0

    def accumulate_outer(self, ids: Tensor, weights: Tensor, factors: Tensor) -> None:
        r"""Add :math:`w_{bm} x_b` to the gradient of row ``ids[b, m]``, for every ``b, m``.

        When the ids touch a good part of the table no ``(B, M, K)`` tensor of products is
        built: on the CPU, for tables of at most :data:`GROUPED_MAX_ROWS` rows, the
        occurrences are sorted by row (a radix sort) and each row's sum
        :math:`\sum_{(b, m) : \mathrm{ids}_{bm} = r} w_{bm} x_b` is one bag of a weighted
        ``embedding_bag`` over the ``x_b``; otherwise it is one sparse-dense product
        :math:`S x` with :math:`S_{r b} = \sum_{m : \mathrm{ids}_{bm} = r} w_{bm}` (a COO matrix
        of ``B M`` entries). Both add each row's terms in the order of ``ids``. When few rows are
        touched the products are summed per row with ``index_add_``, at a cost that does not
        grow with the table.

        Args:
            ids: ``(B, M)`` row ids, repeats allowed.
            weights: ``(B, M)`` weights.
            factors: ``(B, K)`` vectors ``x_b``.
        """
        n, m = ids.shape
        flat = ids.reshape(-1)
        n_rows = self.table.shape[0]
        if flat.shape[0] * 4 < n_rows:
            products = weights.unsqueeze(-1) * factors.unsqueeze(1)
            self._grad.index_add_(0, flat, products.reshape(n * m, -1))
        elif self._groups(flat):
            order, offsets = _grouped_by_row(flat, n_rows)
            examples = torch.div(order, m, rounding_mode="floor")
            row_weights = weights.reshape(-1).index_select(0, order)
            self._grad.add_(
                F.embedding_bag(
                    examples, factors, offsets, mode="sum", per_sample_weights=row_weights
                )
            )
        else:
            cols = torch.arange(n, device=ids.device).repeat_interleave(m)
            matrix = torch.sparse_coo_tensor(
                torch.stack([flat, cols]),
                weights.reshape(-1),
                (n_rows, n),
                check_invariants=False,
            )
            self._grad.add_(torch.sparse.mm(matrix, factors))

    def accumulate_decay(self, ids: Tensor, weight: float) -> None:
        """Add ``weight * table[id]`` to the gradient of each id occurrence (a penalty term).

        The term is summed per row as an occurrence count and read when the step is taken,
        so it costs one number per occurrence instead of a row.

        Args:
            ids: ``(n,)`` row ids, repeats allowed.
            weight: Weight per occurrence.
        """
        if self._decay is None:
            self._decay = torch.zeros(
                self.table.shape[0], dtype=self.table.dtype, device=ids.device
            )
        self._decay.add_(torch.bincount(ids, minlength=self.table.shape[0]), alpha=weight)

    def reduce_pending(self) -> None:
        """Fold the pending penalty terms into the gradient buffer (before a reduction)."""
        if self._decay is not None:
            self._grad.addcmul_(self._decay.unsqueeze(-1), self.table)
            self._decay.zero_()

    def apply(self, ids: Tensor | None, lr: float) -> None:
        """One AdaGrad step from the buffer, which is then cleared.

        Args:
            ids: The rows that may have a gradient (repeats allowed), or ``None`` for the whole
                table; rows without gradient do not move either way.
            lr: Learning rate.
        """
        if ids is None or ids.shape[0] * 4 >= self.table.shape[0]:
            # Most rows are touched: whole-table arithmetic is cheaper than indexing.
            self.reduce_pending()
            g = self._grad
            self.sum_sq.addcmul_(g, g)
            self.table.addcdiv_(g, self.sum_sq.sqrt().add_(self.eps), value=-lr)
            g.zero_()
            return
        g = self._grad[ids]
        if self._decay is not None:
            g.addcmul_(self._decay[ids].unsqueeze(-1), self.table[ids])
            self._decay[ids] = 0.0
        # Repeated ids read the same summed gradient and write the same new values.
        sum_sq = self.sum_sq[ids].addcmul_(g, g)
        self.sum_sq[ids] = sum_sq
        self.table[ids] = self.table[ids].addcdiv_(g, sum_sq.sqrt_().add_(self.eps), value=-lr)
        self._grad[ids] = 0.0

    def step(self, ids: Tensor, grads: Tensor, lr: float) -> None:
        """Sum ``grads`` per row id and take one AdaGrad step on those rows.

        Args:
            ids: ``(n,)`` row ids, repeats allowed (their gradients add up).
            grads: ``(n, K)`` gradient contributions, one per id.
            lr: Learning rate.
        """
        self.accumulate(ids, grads)
        self.apply(ids, lr)


def _choice_weights(u: Tensor, v: Tensor, scale: float) -> tuple[Tensor, Tensor]:
    """``(d loss / d s, summed nll)`` of a batch, the mean loss scaled by ``scale``.

    Args:
        u: ``(B, K)`` user factors.
        v: ``(B, 1 + L, K)`` item factors, the observed item first.
        scale: ``1 / B``.

    Returns:
        The ``(B, 1 + L)`` weights ``scale * (pi - e_0)`` of the module docstring and the summed
        negative log-likelihood (a 0-d tensor).
    """
    # A batched matrix-vector product: about twice as fast as multiply-and-sum on CPU.
    logits = torch.bmm(v, u.unsqueeze(-1)).squeeze(-1)
    lse = torch.logsumexp(logits, dim=-1, keepdim=True)
    nll = (lse - logits[:, :1]).sum()
    weights = (logits - lse).exp_().mul_(scale)
    weights[:, 0] -= scale
    return weights, nll


def choice_step(
    opt_u: RowAdagrad,
    opt_v: RowAdagrad,
    users: Tensor,
    items: Tensor,
    reg: float,
    lr: float,
    alternating: bool = True,
    reduce_v: Callable[[Tensor], None] | None = None,
) -> Tensor:
    r"""One AdaGrad step on a batch of choice examples (the gradients of the module docstring).

    The observed and the unobserved items of an example are one row of ``items``: one gather of
    their factors, one batched product for the scores, the user gradient
    :math:`\sum_m w_m V_{i_m}` as a weighted ``embedding_bag`` (no ``(B, 1 + L, K)`` product)
    and the item gradients :math:`w_m U_u` summed per row by :meth:`RowAdagrad.accumulate_outer`.

    Args:
        opt_u: AdaGrad state of the user factors.
        opt_v: AdaGrad state of the item factors.
        users: ``(B,)`` user ids.
        items: ``(B, 1 + L)`` item ids: the observed item of each example, then its ``L``
            unobserved ones.
        reg: Penalty weight ``lambda``.
        lr: Learning rate of this step.
        alternating: Step on ``U`` first and recompute the gradients of ``V`` with the new
            ``U`` (Schaefer 2017); otherwise one joint step from the same gradients.
        reduce_v: Data-parallel training: called on the summed gradient buffer of ``V`` before
            the step, in place (an all-reduce over processes); ``V`` then takes a whole-table
            step. The ``U`` rows of a batch must belong to this process alone.

    Returns:
        The summed choice negative log-likelihood of the batch before the step, without the
        penalty (a 0-d tensor on the device; no host sync).
    """
    U, V = opt_u.table, opt_v.table
    n, dim = users.shape[0], U.shape[1]
    scale = 1.0 / n
    decay = reg * scale
    flat = items.reshape(-1)
    # index_select: several times faster than advanced indexing for row gathers on CPU.
    u = U.index_select(0, users)
    v = V.index_select(0, flat).view(n, -1, dim)
    weights, nll = _choice_weights(u, v, scale)
    grad_u = F.embedding_bag(items, V, per_sample_weights=weights, mode="sum")
    opt_u.step(users, grad_u.add_(u, alpha=decay), lr)
    if alternating:
        # V has not moved: only the user rows are read again.
        u = U.index_select(0, users)
        weights, _ = _choice_weights(u, v, scale)
    opt_v.accumulate_outer(items, weights, u)
    # The penalty's gradient, lambda / B * V_j per occurrence, is added per row from
    # occurrence counts instead of per occurrence.
    opt_v.accumulate_decay(flat, decay)
    if reduce_v is not None:
        opt_v.reduce_pending()
        reduce_v(opt_v.grad)
        opt_v.apply(None, lr)
    else:
        opt_v.apply(flat, lr)
    return nll


@torch.no_grad()
def hardest_negatives(U: Tensor, V: Tensor, users: Tensor, candidates: Tensor, n: int) -> Tensor:
    """The ``n`` highest-scoring of each user's candidate negatives (adaptive sampling).

    Dynamic negative sampling (Zhang et al. 2013): of ``C`` uniformly drawn unobserved items
    keep those the current model ranks highest, the ones the loss learns most from.

    Args:
        U: ``(n_users, K)`` user factors.
        V: ``(n_items, K)`` item factors.
        users: ``(B,)`` user ids.
        candidates: ``(B, C)`` unobserved items.
        n: How many to keep, at most ``C``.

    Returns:
        ``(B, n)`` item ids.
    """
    vc = V.index_select(0, candidates.reshape(-1)).view(*candidates.shape, -1)
    scores = torch.bmm(vc, U.index_select(0, users).unsqueeze(-1)).squeeze(-1)
    top = scores.topk(n, dim=-1, sorted=False).indices
    return candidates.gather(-1, top)
