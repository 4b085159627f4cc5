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

A mini-batch :math:`B` minimises the mean :math:`\frac{1}{|B|}\sum_B \ell`; the per-example
gradients are summed per row with ``index_add_``. AdaGrad then moves only the rows the batch
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

import torch
from torch import Tensor

__all__ = ["RowAdagrad", "choice_gradients", "choice_step", "hardest_negatives"]


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
        self._grad.index_add_(0, ids, grads)

    def apply(self, ids: Tensor | None, lr: float) -> None:
        """One AdaGrad step from the buffer, which is then cleared.

        Args:
            ids: The rows that may have a gradient (repeats allowed), or ``None`` for the whole
                table; rows without gradient do not move either way.
            lr: Learning rate.
        """
        if ids is None or ids.shape[0] * 4 >= self.table.shape[0]:
            # Most rows are touched: whole-table arithmetic is cheaper than indexing.
            g = self._grad
            self.sum_sq.addcmul_(g, g)
            self.table.addcdiv_(g, self.sum_sq.sqrt().add_(self.eps), value=-lr)
            g.zero_()
            return
        g = self._grad[ids]
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


def choice_gradients(
    U: Tensor, V: Tensor, users: Tensor, positives: Tensor, negatives: Tensor, reg: float
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Mean choice loss of a batch and its gradients per example (module docstring).

    Args:
        U: ``(n_users, K)`` user factors.
        V: ``(n_items, K)`` item factors.
        users: ``(B,)`` user ids.
        positives: ``(B,)`` observed items.
        negatives: ``(B, L)`` unobserved items.
        reg: Penalty weight ``lambda``.

    Returns:
        ``(loss, grad_u, grad_pos, grad_neg)``: the scalar mean loss and the gradients of the
        mean loss with respect to ``U[users]`` ``(B, K)``, ``V[positives]`` ``(B, K)`` and
        ``V[negatives]`` ``(B, L, K)``.
    """
    scale = 1.0 / users.shape[0]
    u, vp, vn = U[users], V[positives], V[negatives]
    s_pos = (u * vp).sum(-1, keepdim=True)
    s_neg = torch.bmm(vn, u.unsqueeze(-1)).squeeze(-1)
    logits = torch.cat([s_pos, s_neg], dim=-1)
    lse = torch.logsumexp(logits, dim=-1, keepdim=True)
    prob = (logits - lse).exp_()
    penalty = u.square().sum() + vp.square().sum() + vn.square().sum()
    loss = ((lse - s_pos).sum() + 0.5 * reg * penalty) * scale
    g_pos = (prob[:, :1] - 1.0) * scale
    g_neg = prob[:, 1:] * scale
    grad_u = torch.baddbmm(u.unsqueeze(1), g_neg.unsqueeze(1), vn, alpha=1.0, beta=reg * scale)
    grad_u = grad_u.squeeze(1).addcmul_(g_pos, vp)
    grad_pos = torch.addcmul(vp * (reg * scale), g_pos, u)
    grad_neg = torch.addcmul(vn * (reg * scale), g_neg.unsqueeze(-1), u.unsqueeze(1))
    return loss, grad_u, grad_pos, grad_neg


def choice_step(
    opt_u: RowAdagrad,
    opt_v: RowAdagrad,
    users: Tensor,
    positives: Tensor,
    negatives: Tensor,
    reg: float,
    lr: float,
    alternating: bool = True,
    reduce_v: Callable[[Tensor], None] | None = None,
) -> Tensor:
    """One AdaGrad step on a batch of choice examples.

    Args:
        opt_u: AdaGrad state of the user factors.
        opt_v: AdaGrad state of the item factors.
        users: ``(B,)`` user ids.
        positives: ``(B,)`` observed items.
        negatives: ``(B, L)`` unobserved items.
        reg: Penalty weight ``lambda``.
        lr: Learning rate of this step.
        alternating: Step on ``U`` first and recompute the gradients of ``V`` with the new
            ``U`` (Schaefer 2017); otherwise one joint step from the same gradients.
        reduce_v: Data-parallel training: called on the summed gradient buffer of ``V`` before
            the step, in place (an all-reduce over processes); ``V`` then takes a whole-table
            step. The ``U`` rows of a batch must belong to this process alone.

    Returns:
        The mean batch loss before the step (a 0-d tensor on the device; no host sync).
    """
    U, V = opt_u.table, opt_v.table
    loss, grad_u, grad_pos, grad_neg = choice_gradients(U, V, users, positives, negatives, reg)
    opt_u.step(users, grad_u, lr)
    if alternating:
        _, _, grad_pos, grad_neg = choice_gradients(U, V, users, positives, negatives, reg)
    item_ids = torch.cat([positives, negatives.reshape(-1)])
    item_grads = torch.cat([grad_pos, grad_neg.reshape(-1, grad_neg.shape[-1])])
    opt_v.accumulate(item_ids, item_grads)
    if reduce_v is not None:
        reduce_v(opt_v.grad)
        opt_v.apply(None, lr)
    else:
        opt_v.apply(item_ids, lr)
    return loss


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
    scores = torch.bmm(V[candidates], U[users].unsqueeze(-1)).squeeze(-1)
    top = scores.topk(n, dim=-1, sorted=False).indices
    return candidates.gather(-1, top)
