r"""Laplace inference for Gaussian-process preference models (Chu & Ghahramani 2005).

Pure tensor functions, no GPyTorch classes: the model in :mod:`botorch_pref.models.pairwise`
wraps them. Every function works on a flat batch: tensors carry one leading batch dimension
``B`` (use ``B = 1`` for a single data set).

Notation (DESIGN.md section 2). Designs ``X`` (n x d) with prior :math:`f \sim N(0, K)`.
Comparisons are merged into ``p`` distinct unordered pairs :math:`\{i, j\}` with :math:`i < j`;
pair ``k`` has the row :math:`a_k = e_{i_k} - e_{j_k}`, stacked into ``A`` (p x n), and the
difference :math:`d = A f`. Each comparison row (winner, loser) on pair ``k`` has the sign
:math:`s = +1` if the winner is :math:`i_k` and :math:`-1` otherwise, and contributes
:math:`\log \sigma(s\, d_k)`. Summing over the comparisons on a pair gives the pair-space
gradient :math:`G_k` and curvature :math:`w_k > 0`, so that

.. math::

    \nabla_f \log p(C \mid f) = A^\top G, \qquad
    -\nabla^2_f \log p(C \mid f) = W = A^\top \operatorname{diag}(w) A .

:math:`W` is the weighted Laplacian of the comparison graph: :math:`W 1 = 0`,
:math:`1^\top A^\top G = 0`.

**Comparison space** (used when :math:`p \le n`): with :math:`R = \operatorname{diag}(\sqrt w) A`
and :math:`B = I_p + R K R^\top` (eigenvalues :math:`\ge 1`, so its Cholesky never fails and no
jitter is needed), the Newton step for :math:`\Psi(f) = \log p(C|f) - f^\top K^{-1} f / 2` is

.. math::

    c = w \odot d + G, \quad
    \beta = c - \sqrt w \odot B^{-1}(\sqrt w \odot K_A c), \quad
    f_{\text{new}} = K A^\top \beta, \quad d_{\text{new}} = K_A \beta,

with :math:`K_A = A K A^\top` gathered from ``K``. Every iterate has the form
:math:`f = K A^\top \beta`, so :math:`f^\top K^{-1} f = \beta^\top d` needs no inverse of ``K``.

**Design space** (used when :math:`p > n`): with :math:`L = \operatorname{chol}(K + \epsilon I)`,
:math:`f = L v` and :math:`M = I_n + L^\top W L`, the step is
:math:`v_{\text{new}} = M^{-1} (A L)^\top c`, and :math:`f^\top K^{-1} f = |v|^2`.

At the mode :math:`\hat f = K A^\top \hat G`; the Laplace evidence is
:math:`\log Z = \log p(C|\hat f) - \hat f^\top K^{-1}\hat f/2 - \log\det B / 2` with
:math:`\det B = \det(I_n + K W) = \det M` (Sylvester).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch
from torch import Tensor

from botorch_pref.likelihoods import PairwiseLikelihood

__all__ = [
    "LaplaceFactors",
    "ModeResult",
    "PairStructure",
    "aggregate_pairs",
    "choose_form",
    "comparison_log_lik",
    "damped_newton",
    "evidence_with_gradients",
    "find_mode",
    "laplace_factors",
    "merge_pairs",
    "pair_gram",
    "predictive_terms",
]

Form = Literal["comparison", "design"]


class PairStructure(NamedTuple):
    """Distinct compared pairs of a flat batch of comparison sets.

    Attributes:
        pairs: ``B x p x 2`` long tensor of distinct unordered pairs ``(i, j)``, ``i < j``.
            Members with fewer than ``p`` pairs are padded with ``(0, 0)``, whose row of ``A``
            is zero, so padding never changes a result.
        comp_pair: ``B x m`` long tensor, the pair of each comparison.
        comp_sign: ``B x m`` tensor, ``+1`` where the comparison's winner is ``pairs[..., 0]``.
        num_pairs: ``B`` long tensor, the number of real pairs of each member.
        comp_weight: ``B x m`` tensor, ``1`` for a comparison and ``0`` for a padding row
            (members of a batch with fewer comparisons than others), or ``None`` when no row is
            padding.
    """

    pairs: Tensor
    comp_pair: Tensor
    comp_sign: Tensor
    num_pairs: Tensor
    comp_weight: Tensor | None = None

    @property
    def p(self) -> int:
        """Padded number of pairs."""
        return self.pairs.shape[-2]


def merge_pairs(comparisons: Tensor, n: int, dtype: torch.dtype = torch.float64) -> PairStructure:
    """Merge comparisons on the same unordered pair of designs.

    Args:
        comparisons: ``B x m x 2`` integer tensor of (winner, loser) rows; no row may compare a
            design with itself, and every index must lie in ``[0, n)`` (validated by the model),
            except padding rows ``(-1, -1)``, which let members of a batch hold different
            numbers of comparisons. A padding row is given the null pair ``(0, 0)`` and weight 0.
        n: Number of designs.
        dtype: Floating dtype of the signs.

    Returns:
        The :class:`PairStructure`; pairs are sorted by ``(i, j)`` within each member.
    """
    comparisons = comparisons.long()
    B, m = comparisons.shape[0], comparisons.shape[1]
    device = comparisons.device
    padding = comparisons[..., 0] < 0
    comp_weight = None
    if bool(padding.any()):
        comparisons = comparisons.masked_fill(padding.unsqueeze(-1), 0)
        comp_weight = (~padding).to(dtype)
    lo = comparisons.min(dim=-1).values
    hi = comparisons.max(dim=-1).values
    member = torch.arange(B, device=device).unsqueeze(-1)
    keys = (member * n + lo) * n + hi
    uniq, inverse = torch.unique(keys.reshape(-1), sorted=True, return_inverse=True)
    owner = torch.div(uniq, n * n, rounding_mode="floor")
    counts = torch.bincount(owner, minlength=B)
    p = int(counts.max()) if uniq.numel() else 0
    start = torch.cumsum(counts, 0) - counts
    position = torch.arange(uniq.numel(), device=device) - start[owner]
    local = uniq - owner * n * n
    pairs = torch.zeros(B, max(p, 1), 2, dtype=torch.long, device=device)
    pairs[owner, position, 0] = torch.div(local, n, rounding_mode="floor")
    pairs[owner, position, 1] = local % n
    comp_pair = position[inverse].reshape(B, m)
    comp_sign = torch.where(comparisons[..., 0] == lo, 1.0, -1.0).to(dtype)
    if comp_weight is not None:  # the null pair (0, 0) of padding rows is not a real pair
        slot = torch.arange(pairs.shape[1], device=device)
        null = (pairs == 0).all(-1) & (slot < counts.unsqueeze(-1))
        counts = counts - null.sum(-1)
    return PairStructure(pairs, comp_pair, comp_sign, counts, comp_weight)


def pair_gram(K: Tensor, pairs: Tensor) -> tuple[Tensor, Tensor]:
    r"""Gather :math:`A K` (``B x p x n``) and :math:`K_A = A K A^\top` (``B x p x p``).

    Args:
        K: ``B x n x n`` symmetric prior covariance at the designs.
        pairs: ``B x p x 2`` pairs.

    Returns:
        ``(AK, K_A)``; :math:`K A^\top` is ``AK.mT`` by symmetry.
    """
    AK = _rows_diff(K, pairs)
    return AK, _rows_diff(AK.transpose(-1, -2), pairs)


def _flat_index(pairs: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """Row indices of ``i`` and ``j`` in a ``(B * n)``-row view of a batch of matrices."""
    offset = (torch.arange(pairs.shape[0], device=pairs.device) * n).unsqueeze(-1)
    return (pairs[..., 0] + offset).reshape(-1), (pairs[..., 1] + offset).reshape(-1)


def _rows_diff(M: Tensor, pairs: Tensor) -> Tensor:
    """``A M`` for a ``B x n x k`` tensor ``M``: row ``i`` minus row ``j`` of each pair."""
    B, n, k = M.shape
    ii, jj = _flat_index(pairs, n)
    flat = M.reshape(B * n, k)
    return (flat.index_select(0, ii) - flat.index_select(0, jj)).reshape(B, -1, k)


def _scatter_pairs(values: Tensor, pairs: Tensor, n: int) -> Tensor:
    r""":math:`A^\top` values: ``B x p (x k)`` pair values to ``B x n (x k)`` design values."""
    vector = values.dim() == 2
    v = values.unsqueeze(-1) if vector else values
    B, p, k = v.shape
    ii, jj = _flat_index(pairs, n)
    v = v.reshape(B * p, k)
    out = v.new_zeros(B * n, k)
    out.index_add_(0, ii, v)
    out.index_add_(0, jj, v, alpha=-1)
    out = out.reshape(B, n, k)
    return out.squeeze(-1) if vector else out


def _pair_diff(f: Tensor, pairs: Tensor) -> Tensor:
    """Differences ``f_i - f_j`` (``B x p``) of a ``B x n`` vector."""
    return f.gather(-1, pairs[..., 0]) - f.gather(-1, pairs[..., 1])


def aggregate_pairs(
    likelihood: PairwiseLikelihood, d: Tensor, structure: PairStructure
) -> tuple[Tensor, Tensor, Tensor]:
    """Log-likelihood, pair-space gradient ``G`` and curvature ``w`` at pair differences ``d``.

    Args:
        likelihood: The pairwise likelihood.
        d: ``B x p`` differences :math:`f_i - f_j` of each pair.
        structure: The merged comparisons.

    Returns:
        ``(log_lik, G, w)`` of shapes ``B``, ``B x p``, ``B x p``.
    """
    sign = structure.comp_sign
    delta = sign * d.gather(-1, structure.comp_pair)
    log_p, grad, neg_hess = likelihood.derivatives(delta)
    weight = structure.comp_weight
    if weight is not None:
        log_p, grad, neg_hess = log_p * weight, grad * weight, neg_hess * weight
    G = torch.zeros_like(d).scatter_add(-1, structure.comp_pair, sign * grad)
    w = torch.zeros_like(d).scatter_add(-1, structure.comp_pair, neg_hess)
    return log_p.sum(-1), G, w


def comparison_log_lik(
    likelihood: PairwiseLikelihood, d: Tensor, structure: PairStructure
) -> Tensor:
    """Log-likelihood (``B``) of the comparisons at pair differences ``d`` (``B x p``)."""
    log_p = likelihood.log_prob(structure.comp_sign * d.gather(-1, structure.comp_pair))
    if structure.comp_weight is not None:
        log_p = log_p * structure.comp_weight
    return log_p.sum(-1)


def choose_form(n: int, p: int) -> Form:
    """Comparison space when it is the smaller system (ties go to it: it needs no jitter)."""
    return "comparison" if p <= n else "design"


def default_tolerance(dtype: torch.dtype) -> float:
    """Newton stopping tolerance on ``max |f_new - f|`` (relative to ``max(1, |f|)``)."""
    return 1e-9 if dtype == torch.float64 else 2e-5


def fit_tolerance(dtype: torch.dtype) -> float:
    """Looser tolerance for the mode inside an evidence evaluation.

    :func:`evidence_with_gradients` takes one more Newton step from the mode, which squares its
    error; the hyperparameter gradient's relative error is of the order of this tolerance.
    """
    return 1e-6 if dtype == torch.float64 else 2e-5


class ModeResult(NamedTuple):
    """The Laplace mode of a flat batch.

    Attributes:
        f: ``B x n`` posterior mode at the designs.
        d: ``B x p`` pair differences at the mode.
        beta: ``B x p`` pair-space coefficients, :math:`\\hat f = K A^\\top \\beta`.
        log_lik: ``B`` log-likelihood at the mode.
        prior_quad: ``B`` value of :math:`\\hat f^\\top K^{-1} \\hat f`.
        iterations: Newton iterations taken.
        converged: ``B`` bool tensor.
        form: The Newton form used.
    """

    f: Tensor
    d: Tensor
    beta: Tensor
    log_lik: Tensor
    prior_quad: Tensor
    iterations: int
    converged: Tensor
    form: Form


@dataclass
class _State:
    coef: Tensor  # beta (comparison space) or v (design space)
    d: Tensor
    log_lik: Tensor
    quad: Tensor  # f^T K^-1 f

    @property
    def psi(self) -> Tensor:
        return self.log_lik - 0.5 * self.quad


def _select(mask: Tensor, a: _State, b: _State) -> _State:
    """Per batch member: ``a`` where ``mask`` else ``b``."""
    m = mask.unsqueeze(-1)
    return _State(
        torch.where(m, a.coef, b.coef),
        torch.where(m, a.d, b.d),
        torch.where(mask, a.log_lik, b.log_lik),
        torch.where(mask, a.quad, b.quad),
    )


def damped_newton(
    state: Callable[[Tensor], _State],
    newton_target: Callable[[Tensor], Tensor],
    to_f: Callable[[Tensor], Tensor],
    starts: list[_State],
    *,
    tol: float,
    max_iter: int,
    max_halvings: int,
) -> tuple[_State, Tensor, int, Tensor]:
    r"""Damped Newton iterations with a per-member backtracking line search on :math:`\Psi`.

    Shared by the pair engine and the general one (:mod:`botorch_pref.inference.observations`).
    Each iteration takes the full Newton step for every member, then halves the step of the
    members whose objective decreased. The line-search test and the convergence test of an
    iteration are read from the device together, once (a second read happens only in the
    iterations where some member must backtrack), so on a GPU the loop synchronises with the
    host once per iteration.

    Args:
        state: Maps coefficients (``B x c``) to their :class:`_State`.
        newton_target: Maps differences ``d`` to the Newton iterate's coefficients.
        to_f: Maps coefficients to the utilities ``f`` (``B x n``).
        starts: Candidate starting states; each member starts from its best (highest
            :math:`\Psi`) candidate.
        tol: Stopping tolerance on ``max |f_new - f| / max(1, max |f|)``.
        max_iter: Maximum iterations.
        max_halvings: Maximum step halvings per line search.

    Returns:
        ``(state, f, iterations, converged)``.
    """
    current = starts[0]
    for start in starts[1:]:
        current = _select(start.psi > current.psi, start, current)
    B = current.coef.shape[0]
    converged = torch.zeros(B, dtype=torch.bool, device=current.coef.device)
    f = to_f(current.coef)
    iterations = 0
    for iterations in range(1, max_iter + 1):  # noqa: B007
        target = newton_target(current.d)
        step = target - current.coef
        new = state(target)
        worse = new.psi < current.psi - 1e-12 * current.psi.abs().clamp_min(1.0)
        f_new = to_f(new.coef)
        change = (f_new - f).abs().amax(-1) / f_new.abs().amax(-1).clamp_min(1.0)
        any_worse, all_done = torch.stack([worse.any(), (change <= tol).all()]).tolist()
        if any_worse:  # backtrack the members whose objective decreased
            scale = torch.ones_like(current.psi)
            for _ in range(max_halvings):
                scale = torch.where(worse, 0.5 * scale, scale)
                trial = state(current.coef + scale.unsqueeze(-1) * step)
                new = _select(worse, trial, new)
                worse = new.psi < current.psi - 1e-12 * current.psi.abs().clamp_min(1.0)
                if not bool(worse.any()):
                    break
            f_new = to_f(new.coef)
            change = (f_new - f).abs().amax(-1) / f_new.abs().amax(-1).clamp_min(1.0)
            all_done = bool((change <= tol).all())
        current, f = new, f_new
        converged = change <= tol
        if all_done:
            break
    return current, f, iterations, converged


def _net_wins_guess(structure: PairStructure, K: Tensor) -> Tensor:
    r"""Cold-start guess of the pair differences from each design's net wins.

    Standardised net wins (wins minus losses) scaled by the prior standard deviation, as BoTorch's
    ``PairwiseGP`` starts its solver; one Newton step from this guess is a candidate start that
    usually saves a few iterations over starting from zero.
    """
    B, n = K.shape[0], K.shape[-1]
    pair_wins = torch.zeros(B, structure.p, dtype=K.dtype, device=K.device)
    votes = structure.comp_sign
    if structure.comp_weight is not None:
        votes = votes * structure.comp_weight
    pair_wins = pair_wins.scatter_add(-1, structure.comp_pair, votes)
    net = _scatter_pairs(pair_wins, structure.pairs, n)
    net = (net - net.mean(-1, keepdim=True)) / net.std(-1, keepdim=True).clamp_min(1e-12)
    scale = K.diagonal(dim1=-2, dim2=-1).mean(-1, keepdim=True).sqrt()
    return _pair_diff(net * scale, structure.pairs)


def _design_system(K: Tensor, AK: Tensor, w: Tensor, pairs: Tensor) -> Tensor:
    r""":math:`I + W K`; :math:`W K = A^\top \operatorname{diag}(w) A K` is formed in ``O(pn)``."""
    system = _scatter_pairs(w.unsqueeze(-1) * AK, pairs, K.shape[-1])
    system.diagonal(dim1=-2, dim2=-1).add_(1.0)
    return system


def _comparison_system(K_A: Tensor, sqrt_w: Tensor) -> Tensor:
    r""":math:`B = I + R K R^\top` with :math:`R = \operatorname{diag}(\sqrt w) A`."""
    eye = torch.eye(K_A.shape[-1], dtype=K_A.dtype, device=K_A.device)
    return eye + sqrt_w.unsqueeze(-1) * K_A * sqrt_w.unsqueeze(-2)


def _comparison_step(K_A: Tensor, w: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    r"""Comparison-space Newton target :math:`\beta` and the Cholesky of ``B``."""
    sw = w.sqrt()
    LB = torch.linalg.cholesky(_comparison_system(K_A, sw))
    t = sw * (K_A @ c.unsqueeze(-1)).squeeze(-1)
    return c - sw * torch.cholesky_solve(t.unsqueeze(-1), LB).squeeze(-1), LB


def find_mode(
    likelihood: PairwiseLikelihood,
    structure: PairStructure,
    K: Tensor,
    beta0: Tensor | None = None,
    *,
    d0: Tensor | None = None,
    form: Form | None = None,
    tol: float | None = None,
    max_iter: int = 100,
    max_halvings: int = 30,
) -> ModeResult:
    r"""Posterior mode by damped Newton, with a backtracking line search on :math:`\Psi`.

    Comparison space iterates on :math:`\beta` (:math:`f = K A^\top\beta`) with the Cholesky
    of :math:`B`. Design space iterates on :math:`\alpha` (:math:`f = K\alpha`, so
    :math:`f^\top K^{-1} f = \alpha^\top f`) and solves
    :math:`(I + W K)\,\alpha_{\text{new}} = A^\top c`, which is
    :math:`f_{\text{new}} = (K^{-1} + W)^{-1} b` by :math:`(K^{-1} + W)^{-1} = K (I + WK)^{-1}`:
    :math:`W K` costs :math:`O(pn)` and the system's eigenvalues are those of
    :math:`I + K^{1/2} W K^{1/2}`, all :math:`\ge 1`, so neither form needs jitter.

    Runs without autograd. Members of the batch converge independently (converged members take
    harmless extra steps at their fixed point).

    Args:
        likelihood: The pairwise likelihood.
        structure: Merged comparisons (:func:`merge_pairs`).
        K: ``B x n x n`` prior covariance at the designs.
        beta0: Optional ``B x p`` warm start, :math:`f_0 = K A^\top \beta_0`.
        d0: Optional ``B x p`` guess of the pair differences at the mode (e.g. the previous mode's
            when only the hyperparameters changed): one Newton step from it is a candidate start.
            The Newton step needs only the differences, so this start is available even when
            :math:`f_0` has no :math:`K A^\top\beta` form. Of zero and the given starts, the one
            with the highest objective is used.
        form: ``"comparison"`` or ``"design"``; chosen by size when ``None``.
        tol: Stopping tolerance on ``max |f_new - f| / max(1, max |f|)``; dtype-aware default.
        max_iter: Maximum Newton iterations.
        max_halvings: Maximum step halvings per line search.

    Returns:
        The :class:`ModeResult`.
    """
    with torch.no_grad():
        B, n = K.shape[0], K.shape[-1]
        p = structure.p
        form = form or choose_form(n, p)
        tol = default_tolerance(K.dtype) if tol is None else tol
        pairs = structure.pairs
        comparison = form == "comparison"
        if comparison:
            AK, K_A = pair_gram(K, pairs)
        else:
            AK = _rows_diff(K, pairs)

        def to_f(coef: Tensor) -> Tensor:
            if comparison:  # f = K A^T beta
                return (coef.unsqueeze(-2) @ AK).squeeze(-2)
            return (K @ coef.unsqueeze(-1)).squeeze(-1)

        def state(coef: Tensor) -> _State:
            if comparison:
                d = (K_A @ coef.unsqueeze(-1)).squeeze(-1)
                quad = (coef * d).sum(-1)
            else:
                f = to_f(coef)
                d = _pair_diff(f, pairs)
                quad = (coef * f).sum(-1)
            return _State(coef, d, comparison_log_lik(likelihood, d, structure), quad)

        def newton_target(d: Tensor) -> Tensor:
            _, G, w = aggregate_pairs(likelihood, d, structure)
            c = w * d + G
            if comparison:
                return _comparison_step(K_A, w, c)[0]
            system = _design_system(K, AK, w, pairs)
            b = _scatter_pairs(c, pairs, n)
            # The row-major system's memory is its transpose in LAPACK's column-major order:
            # factor that without a copy and solve with the adjoint.
            LU, pivots, _ = torch.linalg.lu_factor_ex(system.mT)
            return torch.linalg.lu_solve(LU, pivots, b.unsqueeze(-1), adjoint=True).squeeze(-1)

        current = state(K.new_zeros(B, p if comparison else n))
        starts = []
        if beta0 is not None:
            starts.append(state(beta0 if comparison else _scatter_pairs(beta0, pairs, n)))
        if d0 is None and beta0 is None:
            d0 = _net_wins_guess(structure, K)
        if d0 is not None:
            starts.append(state(newton_target(d0)))
        current, f, iterations, converged = damped_newton(
            state,
            newton_target,
            to_f,
            [current, *starts],
            tol=tol,
            max_iter=max_iter,
            max_halvings=max_halvings,
        )

        log_lik, G, _ = aggregate_pairs(likelihood, current.d, structure)
        return ModeResult(
            f=f,
            d=current.d,
            beta=current.coef if comparison else G,
            log_lik=log_lik,
            prior_quad=current.quad,
            iterations=iterations,
            converged=converged,
            form=form,
        )


class LaplaceFactors(NamedTuple):
    r"""Everything a posterior call needs, computed once per data set and hyperparameters.

    The predictive mean is :math:`k(x, X)\,\alpha` with :math:`\alpha = A^\top G` (so that
    :math:`\hat f = K\alpha`), and the predictive covariance is :math:`K_{**} - V^\top V` with
    :math:`V = M\, k(X, X_*)` and :math:`M = L_B^{-1} R`, where ``R`` is a square-root factor of
    the likelihood curvature (:math:`R^\top R = W`) and :math:`L_B` the Cholesky of
    :math:`B = I + R K R^\top`. ``M`` is formed once (one triangular solve), so a posterior call
    costs two kernel evaluations and one matrix product, whatever the batch of test points.

    Attributes:
        alpha: ``B x n`` representer weights.
        M: ``B x r x n`` whitened curvature factor (``r = p`` in comparison space, ``n`` in
            design space).
    """

    alpha: Tensor
    M: Tensor


def laplace_factors(
    likelihood: PairwiseLikelihood, structure: PairStructure, K: Tensor, mode: ModeResult
) -> LaplaceFactors:
    r"""Factor the Laplace posterior at the mode (no autograd).

    In comparison space :math:`R = \operatorname{diag}(\sqrt w) A` (``p x n``). In design space
    ``R`` is the triangular factor of the QR decomposition of that matrix: the same
    :math:`R^\top R = W` with ``n`` rows. Either way :math:`B` has eigenvalues of at least one, so
    no jitter is needed.

    Args:
        likelihood: The pairwise likelihood.
        structure: Merged comparisons.
        K: ``B x n x n`` prior covariance.
        mode: The mode from :func:`find_mode` for the same ``K``.

    Returns:
        The :class:`LaplaceFactors`.
    """
    with torch.no_grad():
        _, G, w = aggregate_pairs(likelihood, mode.d, structure)
        sw = w.sqrt()
        pairs = structure.pairs
        Bsz, p, n = pairs.shape[0], pairs.shape[1], K.shape[-1]
        R = K.new_zeros(Bsz, p, n)
        R.scatter_add_(-1, pairs[..., :1], sw.unsqueeze(-1))
        R.scatter_add_(-1, pairs[..., 1:], -sw.unsqueeze(-1))
        if mode.form == "comparison":
            # B = I + R K R^T from the O(p^2) gather K_A, as in the Newton iterations
            system = _comparison_system(pair_gram(K, pairs)[1], sw)
        else:
            R = torch.linalg.qr(R, mode="r")[1]
            system = R @ K @ R.transpose(-1, -2)
            system = 0.5 * (system + system.transpose(-1, -2))
            system.diagonal(dim1=-2, dim2=-1).add_(1.0)
        L_B = torch.linalg.cholesky(system)
        M = torch.linalg.solve_triangular(L_B, R, upper=False)
        return LaplaceFactors(_scatter_pairs(G, pairs, n), M)


def predictive_terms(factors: LaplaceFactors, K_cross: Tensor) -> tuple[Tensor, Tensor]:
    r"""Predictive mean and the factor ``V`` of the covariance reduction at test designs.

    The covariance of the test designs is :math:`K_{**} - V^\top V`.

    Args:
        factors: The cached :class:`LaplaceFactors` (batch ``B``).
        K_cross: ``B x n x t`` prior covariance between training and test designs.

    Returns:
        ``(mean, V)``: the ``B x t`` mean and the ``B x r x t`` factor.
    """
    mean = (factors.alpha.unsqueeze(-2) @ K_cross).squeeze(-2)
    return mean, factors.M @ K_cross


def evidence_with_gradients(
    likelihood: PairwiseLikelihood,
    structure: PairStructure,
    K: Tensor,
    mode: ModeResult,
) -> tuple[Tensor, Tensor]:
    r"""Laplace evidence with exact hyperparameter gradients, and the differentiable mode.

    Takes ONE Newton step with autograd from the detached mode: the Newton map's Jacobian in
    :math:`f` vanishes at its fixed point, so the step's derivative in the hyperparameters (through
    ``K``) is the implicit-function-theorem derivative of the mode, and evaluating :math:`W` at the
    new point carries the log-determinant's dependence on the mode.

    .. math::

        \log Z = \log p(C \mid \hat f) - \tfrac12 \hat f^\top K^{-1} \hat f
                 - \tfrac12 \log\det(I + K W).

    Args:
        likelihood: The pairwise likelihood.
        structure: Merged comparisons.
        K: ``B x n x n`` prior covariance, differentiable in the hyperparameters.
        mode: The detached mode for (the values of) ``K``.

    Returns:
        ``(log_Z, f)``: ``B`` evidences and the ``B x n`` differentiable mode.
    """
    d0 = mode.d.detach()
    _, G, w = aggregate_pairs(likelihood, d0, structure)
    c = w * d0 + G
    pairs = structure.pairs
    n = K.shape[-1]
    if mode.form == "comparison":
        AK, K_A = pair_gram(K, pairs)
        beta, _ = _comparison_step(K_A, w, c)
        d = (K_A @ beta.unsqueeze(-1)).squeeze(-1)
        f = (beta.unsqueeze(-2) @ AK).squeeze(-2)
        quad = (beta * d).sum(-1)
        log_lik, _, w_new = aggregate_pairs(likelihood, d, structure)
        LB = torch.linalg.cholesky(_comparison_system(K_A, w_new.sqrt()))
        logdet = 2.0 * LB.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    else:
        AK = _rows_diff(K, pairs)
        b = _scatter_pairs(c, pairs, n)
        alpha = torch.linalg.solve(_design_system(K, AK, w, pairs), b.unsqueeze(-1)).squeeze(-1)
        f = (K @ alpha.unsqueeze(-1)).squeeze(-1)
        d = _pair_diff(f, pairs)
        quad = (alpha * f).sum(-1)
        log_lik, _, w_new = aggregate_pairs(likelihood, d, structure)
        logdet = torch.linalg.slogdet(_design_system(K, AK, w_new, pairs))[1]
    return log_lik - 0.5 * quad - 0.5 * logdet, f
