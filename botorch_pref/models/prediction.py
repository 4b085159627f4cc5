r"""Batched Laplace predictions: test designs against cached factors, one product for all.

Given the cached factors of a flat batch of ``B`` models (:math:`\alpha`, ``M``:
:class:`~botorch_pref.inference.engine.LaplaceFactors`), the predictive moments at test designs
:math:`X_*` are

.. math::

    \mu = k(X_*, X)\,\alpha, \qquad \Sigma = k(X_*, X_*) - V^\top V, \quad V = M\,k(X, X_*).

A request of shape ``lead x batch_shape x q x d`` (BoTorch's t-batches in front of the model's
batch) is answered with ONE kernel evaluation :math:`k(X, X_*)` per model member, the ``T``
lead members' test points side by side (``T q`` columns), and one product with ``M``: the cost
of a ``b x q x d`` request is that of one solve with ``b q`` right-hand sides.
"""

from __future__ import annotations

import math

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from botorch_pref.inference.engine import LaplaceFactors, predictive_terms

__all__ = ["laplace_predict"]


def laplace_predict(
    kernel: Kernel,
    train_X: Tensor,
    factors: LaplaceFactors,
    X: Tensor,
    full_cov: bool = True,
) -> tuple[Tensor, Tensor]:
    """Predictive mean and covariance (or variance) at ``X``.

    Args:
        kernel: The prior kernel.
        train_X: ``batch_shape x n x d`` transformed training designs.
        factors: The factors of the ``prod(batch_shape)`` flat batch members.
        X: ``... x q x d`` transformed test designs, broadcastable with ``batch_shape``.
        full_cov: Return the ``... x q x q`` covariance; otherwise the ``... x q`` variances.

    Returns:
        ``(mean, cov)`` of shapes ``out_batch x q`` and ``out_batch x q x q`` (or ``x q``), with
        ``out_batch`` the broadcast of ``X``'s batch and ``batch_shape``.
    """
    q, d = X.shape[-2], X.shape[-1]
    model_batch = train_X.shape[:-2]
    out_batch = torch.broadcast_shapes(X.shape[:-2], model_batch)
    nm = len(model_batch)
    model_part = out_batch[len(out_batch) - nm :]
    T = math.prod(out_batch[: len(out_batch) - nm])
    Bp = math.prod(model_part)
    if tuple(model_part) != tuple(model_batch):  # broadcast size-1 model dims
        idx = torch.arange(math.prod(model_batch), device=X.device)
        factors = factors.index(idx.reshape(model_batch).expand(model_part).reshape(-1))
        train_X = train_X.expand(*model_part, *train_X.shape[-2:])
    Xe = X.expand(*out_batch, q, d).reshape(T, *model_part, q, d)
    # training-test covariance: test points of all lead members side by side
    Xt = Xe.movedim(0, -3).reshape(*model_part, T * q, d)
    K_cross = kernel(train_X, Xt).to_dense()
    n = train_X.shape[-2]  # explicit sizes: T * q may be 0 (no test points)
    K_cross = K_cross.expand(*model_part, *K_cross.shape[-2:]).reshape(Bp, n, T * q)
    mean, V = predictive_terms(factors, K_cross)
    mean = mean.reshape(Bp, T, q).transpose(0, 1).reshape(*out_batch, q)
    V = V.reshape(Bp, V.shape[-2], T, q).permute(2, 0, 1, 3)  # T x B x r x q
    if not full_cov:
        var = kernel(Xe, diag=True).reshape(T, Bp, q) - (V * V).sum(-2)
        return mean, var.reshape(*out_batch, q)
    K_test = kernel(Xe).to_dense().expand(T, *model_part, q, q).reshape(T, Bp, q, q)
    cov = K_test - V.transpose(-1, -2) @ V
    return mean, cov.reshape(*out_batch, q, q)
