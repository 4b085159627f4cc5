r"""Expectation propagation (EP) for probit answers about one row each: posterior factors, evidence.

Comparison ``k`` says that design :math:`w_k` beat design :math:`l_k`; its difference is
:math:`c_k = f(w_k) - f(l_k) = a_k^\top f`, with likelihood :math:`\Phi(c_k / s)` (the probit
link, :class:`~botorch_pref.likelihoods.PairwiseProbit`). With a tie threshold :math:`\theta`
a win has likelihood :math:`\Phi((c_k - \theta) / s)` and a tie ("no preference" between
:math:`w_k` and :math:`l_k`, in either order) :math:`\Phi((\theta - c_k)/s) -
\Phi((-\theta - c_k)/s)`. Stacking the rows :math:`a_k` into
:math:`A_C` (``m x n``, one row per comparison, repeated pairs included), the prior
:math:`f \sim N(0, K)` gives :math:`c \sim N(0, K_C)` with :math:`K_C = A_C K A_C^\top`.

EP (Minka, 2001) replaces each likelihood term by a Gaussian *site*
:math:`\tilde t_k(c_k) \propto \exp(-\tau_k c_k^2 / 2 + \nu_k c_k)`, so the approximate
posterior of :math:`c` is :math:`N(\mu, \Sigma)` with

.. math::

    \Sigma = K_C - K_C S B^{-1} S K_C, \qquad \mu = \Sigma \nu, \qquad
    B = I + S K_C S, \quad S = \operatorname{diag}(\sqrt\tau),

(``B``'s eigenvalues are at least one: its Cholesky needs no jitter and no inverse of
:math:`K_C`, which is singular when there are more comparisons than designs). Each sweep updates
every site at once (*parallel* EP): from the marginal :math:`N(\mu_k, v_k)` it forms the
cavity :math:`v_{-k} = (v_k^{-1} - \tau_k)^{-1}`, :math:`m_{-k} = v_{-k}(\mu_k / v_k - \nu_k)`,
matches the moments of the tilted distribution :math:`p_k(c)\,N(c; m_{-k}, v_{-k})`, with
:math:`p_k` the comparison's likelihood. Both likelihoods are differences of probit terms, and
:math:`\int \Phi((c - t)/s)\,N(c; m, v)\,dc = \Phi((m - t)/\sqrt{s^2 + v})`, so the tilted
normaliser :math:`Z_k(m)` is the comparison's likelihood at the cavity mean with the scale
:math:`r = \sqrt{s^2 + v_{-k}}`, and its moments are its derivatives there:

.. math::

    \hat m = m_{-k} + v_{-k} \frac{\partial \log Z_k}{\partial m}, \qquad
    \hat v = v_{-k} + v_{-k}^2 \frac{\partial^2 \log Z_k}{\partial m^2}

(for a win without ties, with :math:`z = m_{-k}/r` and the inverse Mills ratio
:math:`\lambda = \phi(z)/\Phi(z)`: :math:`\hat m = m_{-k} + v_{-k}\lambda / r`,
:math:`\hat v = v_{-k} - v_{-k}^2 \lambda(z + \lambda)/r^2`); the likelihood's own
:meth:`~botorch_pref.likelihoods.PairwiseLikelihood.derivatives` and
:meth:`~botorch_pref.likelihoods.PairwiseLikelihood.tie_derivatives` at the scale :math:`r`
compute them, with their tail-safe formulas. The sweep then moves the site towards
:math:`\tau = \hat v^{-1} - v_{-k}^{-1}`, :math:`\nu = \hat m / \hat v - m_{-k} / v_{-k}`: all
the way in the first 20 sweeps (a member's steps are halved whenever its largest one grows),
half-way after that. Undamped
parallel EP converges in a few sweeps on most data, but where sites are strongly coupled (many
answers about a few designs, a large outputscale) it can oscillate, slowly decaying or not; the
half-way steps converge there (a median of 15 sweeps, at most 75, on 60 random data sets where
half-way steps from the start took a median of 35). The sites start from the
Laplace approximation's (the curvature and gradient of each answer's log-likelihood at the mode:
:func:`laplace_sites`), or from an earlier run's.

**Posterior factors.** The posterior of :math:`f` is :math:`N(K A_C^\top \beta, K - K A_C^\top S
B^{-1} S A_C K)` with :math:`\beta = \nu - S B^{-1} S K_C \nu`, which is the Laplace
posterior's form (:class:`~botorch_pref.inference.engine.LaplaceFactors`) with representer
weights :math:`\alpha = A_C^\top \beta` and :math:`M = L_B^{-1} S A_C`: predictions are made by
the same code.

**Evidence** (Rasmussen & Williams, 2006, eq. 3.65, in the coordinates :math:`c`):

.. math::

    \log Z_{EP} = -\tfrac12 \log\det(K_C + \tilde\Sigma) - \tfrac12 \tilde\mu^\top
    (K_C + \tilde\Sigma)^{-1} \tilde\mu + \sum_k \Big[\log\Phi(z_k)
    + \tfrac12 \log(v_{-k} + \tau_k^{-1}) + \frac{(m_{-k} - \tilde\mu_k)^2}
    {2 (v_{-k} + \tau_k^{-1})}\Big],

with :math:`\tilde\Sigma = \operatorname{diag}(\tau)^{-1}` and :math:`\tilde\mu = \nu / \tau`;
:math:`\log\Phi(z_k)` is a win's tilted normaliser :math:`\log Z_k` (a tie's is the log of its
difference of probit terms). At a fixed point of EP it is stationary in the sites, so its
gradient in the hyperparameters is the derivative with the sites held fixed (Seeger, 2005):
:func:`ep_log_evidence` is differentiable in :math:`K_C` and in the tie threshold through
everything but the sites.

**Graded comparisons and ratings** (:mod:`~botorch_pref.likelihoods.ordinal`) are probit
interval likelihoods of one row as well, :math:`\Phi((t_{hi} - c)/s) - \Phi((t_{lo} - c)/s)`,
and :math:`\int [\Phi((t_{hi} - c)/s) - \Phi((t_{lo} - c)/s)]\,N(c; m, v)\,dc` is the same
difference at the scale :math:`\sqrt{s^2 + v}`: the tilted moments are again the likelihood's
derivatives there (:meth:`~botorch_pref.likelihoods.PairwiseLikelihood.row_derivatives`; a
rating's row is its design's utility, with the per-option scale :math:`s/\sqrt 2`, so
:math:`\sqrt{s^2/2 + v}`). The rows then carry their kinds and levels (:class:`RowAnswers`).

Padding comparisons (rows ``(0, 0)`` of a batch whose members hold different numbers of
comparisons) keep :math:`\tau = \nu = 0` and change nothing.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import torch
from torch import Tensor

from botorch_pref.inference.blocks import ObservationStructure
from botorch_pref.inference.engine import LaplaceFactors, cholesky_of_system
from botorch_pref.inference.pairs import PairStructure
from botorch_pref.inference.rows import difference_matrix, scatter_rows
from botorch_pref.likelihoods import (
    SCALAR_KINDS,
    ObservationKind,
    PairwiseLikelihood,
    PairwiseProbit,
)

__all__ = [
    "ComparisonRows",
    "EPSites",
    "RowAnswers",
    "comparison_derivatives",
    "comparison_rows",
    "ep_factors",
    "ep_log_evidence",
    "fit_tolerance",
    "laplace_sites",
    "run_ep",
    "tilted_moments",
]

#: The first sweeps move the sites all the way to their updates (a member's steps are halved
#: whenever its largest one grows); later sweeps move them a fraction :data:`DAMPING` of the way.
UNDAMPED_SWEEPS = 20
#: The damping of the later sweeps (module docstring).
DAMPING = 0.5
#: Default stopping tolerance on the largest change of a site parameter, relative to the
#: largest site parameter (and at least 1), per dtype.
_TOLERANCE = {torch.float64: 1e-8, torch.float32: 1e-4}
#: The looser tolerance of a run inside an evidence evaluation: the evidence is stationary in the
#: sites, so its error is of the order of the square of theirs and its gradient's of theirs.
_FIT_TOLERANCE = {torch.float64: 1e-5, torch.float32: 1e-3}


def fit_tolerance(dtype: torch.dtype) -> float:
    """The stopping tolerance of :func:`run_ep` inside an evidence evaluation, per dtype."""
    return _FIT_TOLERANCE.get(dtype, 1e-3)


class EPSites(NamedTuple):
    """The Gaussian sites of a flat batch of comparison sets.

    Attributes:
        tau: ``B x m`` site precisions (zero at padding).
        nu: ``B x m`` site precisions times site means (zero at padding).
        sweeps: Parallel sweeps taken.
        converged: ``B`` bool tensor.
    """

    tau: Tensor
    nu: Tensor
    sweeps: int
    converged: Tensor


class RowAnswers(NamedTuple):
    """What each row answers, where graded comparisons or ratings are among the answers.

    Attributes:
        kind: ``B x m`` :class:`~botorch_pref.likelihoods.ObservationKind` of each row.
        level: ``B x m`` levels (``-1`` on pairs, ties and padding).
        kinds: The kinds present.
    """

    kind: Tensor
    level: Tensor
    kinds: tuple[int, ...]


#: What the rows answer: ``None`` (wins only), a ``B x m`` bool mask of ties, or
#: :class:`RowAnswers` (graded comparisons and ratings among them).
Answers = Tensor | RowAnswers | None


class ComparisonRows(NamedTuple):
    """The comparisons EP has a site for.

    Attributes:
        rows: ``B x m x 2`` index pairs, the winner first (either order for a tie; ``(a, b)``
            for a graded comparison, ``(i, -1)`` for a rating; ``(0, 0)`` for padding).
        real: ``B x m`` bool mask of real comparisons.
        tie: What the rows answer (:data:`Answers`): ``None`` when they are all wins, a bool
            mask of ties, or :class:`RowAnswers` with graded comparisons or ratings.
    """

    rows: Tensor
    real: Tensor
    tie: Answers = None


def comparison_rows(structure: PairStructure | ObservationStructure) -> ComparisonRows:
    """One winner-first difference row per comparison, and which rows are real or ties.

    Args:
        structure: The merged comparisons of a :class:`~botorch_pref.inference.pairs.PairEngine`,
            or the observations of a :class:`~botorch_pref.inference.blocks.BlockEngine` that
            hold only answers about one row each (pairs, ties, graded comparisons, ratings).

    Returns:
        The :class:`ComparisonRows`.

    Raises:
        ValueError: For observations with choices among more than two options or rankings.
    """
    if isinstance(structure, ObservationStructure):
        other = set(structure.kinds) - {int(k) for k in SCALAR_KINDS}
        if other:
            names = ", ".join(ObservationKind(k).name for k in sorted(other))
            raise ValueError(
                f"EP models pairs, ties, graded comparisons and ratings, not {names} observations."
            )
        B, m = structure.kind.shape
        rows = structure.rows.reshape(B, m, structure.width, 2)[:, :, 0]
        rating = structure.kind == int(ObservationKind.RATING)
        real = structure.valid[..., 1] | (structure.valid[..., 0] & rating)
        levelled = {int(ObservationKind.GRADED), int(ObservationKind.RATING)}
        if levelled & set(structure.kinds):
            answers = RowAnswers(structure.kind, structure.level, structure.kinds)
            return ComparisonRows(rows, real, answers)
        tie = None
        if int(ObservationKind.TIE) in structure.kinds:
            tie = real & (structure.kind == int(ObservationKind.TIE))
        return ComparisonRows(rows, real, tie)
    pairs = structure.pairs.gather(1, structure.comp_pair.unsqueeze(-1).expand(-1, -1, 2))
    rows = torch.where((structure.comp_sign < 0).unsqueeze(-1), pairs.flip(-1), pairs)
    if structure.comp_weight is None:
        real = torch.ones(rows.shape[:2], dtype=torch.bool, device=rows.device)
    else:
        real = structure.comp_weight > 0
    if structure.comp_kind is not None:
        answers = RowAnswers(structure.comp_kind, structure.comp_level, structure.kinds)
        return ComparisonRows(rows, real, answers)
    return ComparisonRows(rows, real)


def comparison_derivatives(
    likelihood: PairwiseLikelihood, c: Tensor, tie: Answers, scale: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Log-likelihood of each comparison at its difference ``c``, and its first and negative
    second derivatives: a win's, a tie's where ``tie`` is set, or each row's own answer's.

    Args:
        likelihood: The pair likelihood.
        c: ``B x m`` row values (winner minus loser; a rating's design's utility).
        tie: What the rows answer (:data:`Answers`).
        scale: The pair scale to evaluate the link at (default: the likelihood's).

    Returns:
        ``(log_p, grad, neg_hess)`` shaped like ``c``.
    """
    if isinstance(tie, RowAnswers):
        return likelihood.row_derivatives(c, tie.kind, tie.level, tie.kinds, scale)
    terms = likelihood.derivatives(c, scale)
    if tie is None:
        return terms
    tied = likelihood.tie_derivatives(c, scale)
    log_p, grad, neg_hess = (torch.where(tie, t, w) for t, w in zip(tied, terms, strict=True))
    return log_p, grad, neg_hess


def tilted_moments(
    likelihood: PairwiseProbit, mean: Tensor, var: Tensor, tie: Answers = None
) -> tuple[Tensor, Tensor, Tensor]:
    r"""Log-normaliser, mean and variance of :math:`p(c)\,N(c; m, v)` (normalised), for the
    probit likelihood :math:`p` of a win (or of a tie where ``tie`` is set).

    Args:
        likelihood: The probit pair likelihood (with its tie threshold, if any).
        mean: Cavity means :math:`m`.
        var: Cavity variances :math:`v > 0`.
        tie: What the rows answer (:data:`Answers`).

    Returns:
        ``(log_z, mean, var)`` shaped like ``mean``: :math:`\log Z`, :math:`\hat m`,
        :math:`\hat v` (module docstring).
    """
    root = torch.sqrt(likelihood.scale**2 + var)
    log_z, grad, neg_hess = comparison_derivatives(likelihood, mean, tie, root)
    return log_z, mean + var * grad, var - var * var * neg_hess


def laplace_sites(grad: Tensor, neg_hess: Tensor, c: Tensor, real: Tensor) -> tuple[Tensor, Tensor]:
    r"""Sites of the Laplace approximation: the second-order expansion of each answer's
    log-likelihood :math:`\log p` at the mode, :math:`\tau = -(\log p)''`,
    :math:`\nu = \tau \hat c + (\log p)'` (:func:`comparison_derivatives`).

    Args:
        grad: ``B x m`` first derivatives of each comparison's log-likelihood at the mode.
        neg_hess: ``B x m`` negative second derivatives there.
        c: ``B x m`` comparison differences at the mode.
        real: ``B x m`` mask of real comparisons.

    Returns:
        ``(tau, nu)``, zero at padding.
    """
    zero = torch.zeros_like(c)
    return torch.where(real, neg_hess, zero), torch.where(real, neg_hess * c + grad, zero)


def _posterior(K_C: Tensor, tau: Tensor) -> tuple[Tensor, Tensor]:
    """``(L_B, S)``: the Cholesky factor of :math:`B = I + S K_C S` and :math:`\\sqrt\\tau`."""
    root = tau.clamp_min(0.0).sqrt()
    system = root.unsqueeze(-1) * K_C * root.unsqueeze(-2)
    system.diagonal(dim1=-2, dim2=-1).add_(1.0)
    return cholesky_of_system(system), root


def _marginals(K_C: Tensor, L: Tensor, root: Tensor, nu: Tensor) -> tuple[Tensor, Tensor]:
    """Means and variances (``B x m``) of the approximate posterior of the differences, from
    the factors of :func:`_posterior` (with autograd when ``K_C`` has it)."""
    V = torch.linalg.solve_triangular(L, root.unsqueeze(-1) * K_C, upper=False)
    # only the diagonal of Sigma = K_C - V^T V, and Sigma nu as products with vectors
    prior_mean = (K_C @ nu.unsqueeze(-1)).squeeze(-1)
    mean = prior_mean - (V.transpose(-1, -2) @ (V @ nu.unsqueeze(-1))).squeeze(-1)
    return mean, K_C.diagonal(dim1=-2, dim2=-1) - (V * V).sum(-2)


def _cavities(
    mean: Tensor, var: Tensor, tau: Tensor, nu: Tensor, real: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Cavity means, variances and the mask of sites whose cavity is proper."""
    tau_cavity = 1.0 / var - tau
    ok = real & (tau_cavity > 0)
    var_cavity = 1.0 / torch.where(ok, tau_cavity, torch.ones_like(tau_cavity))
    return var_cavity * (mean / var - nu), var_cavity, ok


def run_ep(
    K_C: Tensor,
    likelihood: PairwiseProbit,
    tau: Tensor,
    nu: Tensor,
    real: Tensor,
    *,
    tie: Answers = None,
    damping: float = DAMPING,
    tol: float | None = None,
    max_sweeps: int = 200,
) -> EPSites:
    """Parallel EP from the sites ``(tau, nu)`` (no autograd; damping in the module docstring).

    Args:
        K_C: ``B x m x m`` prior covariance of the comparison differences.
        likelihood: The probit pair likelihood (its scale and tie threshold; no autograd).
        tau: ``B x m`` starting site precisions (:func:`laplace_sites`, or an earlier run's).
        nu: ``B x m`` starting site parameters.
        real: ``B x m`` mask of real comparisons.
        tie: What the rows answer (:attr:`ComparisonRows.tie`).
        damping: Fraction of the way the sweeps after the first :data:`UNDAMPED_SWEEPS` move
            the sites, in ``(0, 1]``.
        tol: Stop when no site parameter changes by more than ``tol`` times the largest (and at
            least 1); dtype-aware default.
        max_sweeps: Most sweeps; a warning names a batch that has not converged by then.

    Returns:
        The :class:`EPSites`.
    """
    if not 0 < damping <= 1:
        raise ValueError(f"damping must lie in (0, 1], got {damping!r}.")
    tol = _TOLERANCE.get(K_C.dtype, 1e-4) if tol is None else tol
    zero = torch.zeros_like(tau)
    tau, nu = torch.where(real, tau, zero), torch.where(real, nu, zero)
    converged = torch.zeros(tau.shape[0], dtype=torch.bool, device=tau.device)
    rate = torch.ones_like(tau[:, :1])  # per member
    last = torch.full_like(rate, float("inf"))
    sweeps = 0
    with torch.no_grad():
        while sweeps < max_sweeps:
            sweeps += 1
            mean, var = _marginals(K_C, *_posterior(K_C, tau), nu)
            m_cav, v_cav, ok = _cavities(mean, var, tau, nu, real)
            _, m_hat, v_hat = tilted_moments(likelihood, m_cav, v_cav, tie)
            new_tau = (1.0 / v_hat - 1.0 / v_cav).clamp_min(0.0)
            new_nu = m_hat / v_hat - m_cav / v_cav
            full_tau, full_nu = new_tau - tau, new_nu - nu
            full = torch.maximum(full_tau.abs(), full_nu.abs()).where(ok, zero).amax(-1, True)
            if sweeps <= UNDAMPED_SWEEPS:
                rate = torch.where(full > last, 0.5 * rate, rate)
            else:
                rate = torch.full_like(rate, damping)
            last = full
            step_tau = torch.where(ok, rate * full_tau, zero)
            step_nu = torch.where(ok, rate * full_nu, zero)
            tau, nu = tau + step_tau, nu + step_nu
            size = torch.maximum(tau.abs().amax(-1), nu.abs().amax(-1)).clamp_min(1.0)
            converged = full.squeeze(-1) <= tol * size  # the undamped step: at a fixed point
            if bool(converged.all()):
                break
    if not bool(converged.all()):
        warnings.warn(
            f"EP did not converge in {max_sweeps} sweeps; the posterior may be inaccurate.",
            RuntimeWarning,
            stacklevel=3,
        )
    return EPSites(tau, nu, sweeps, converged)


def ep_log_evidence(
    K_C: Tensor,
    likelihood: PairwiseProbit,
    sites: EPSites,
    real: Tensor,
    tie: Answers = None,
) -> Tensor:
    r"""EP's log evidence :math:`\log Z_{EP}` (``B``), differentiable in ``K_C`` and the tie
    threshold at fixed sites.

    Args:
        K_C: ``B x m x m`` prior covariance of the comparison differences (with autograd).
        likelihood: The probit pair likelihood (its tie threshold with autograd, if any).
        sites: Converged sites for (the values of) ``K_C`` and the tie threshold.
        real: ``B x m`` mask of real comparisons.
        tie: What the rows answer (:attr:`ComparisonRows.tie`).

    Returns:
        The evidence of each member (module docstring).
    """
    tau, nu = sites.tau.detach(), sites.nu.detach()
    on = real & (tau > 0)
    one = torch.ones_like(tau)
    tau_on = torch.where(on, tau, one)
    L, root = _posterior(K_C, torch.where(on, tau, torch.zeros_like(tau)))
    # Gaussian part: log N(mu_tilde; 0, K_C + diag(1/tau)) without its 2 pi, via B
    u = torch.where(on, nu / tau_on.sqrt(), torch.zeros_like(nu))  # S mu_tilde
    w = torch.linalg.solve_triangular(L, u.unsqueeze(-1), upper=False).squeeze(-1)
    log_det = 2.0 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    gauss = -0.5 * log_det + 0.5 * torch.where(on, tau_on.log(), 0.0).sum(-1)
    gauss = gauss - 0.5 * (w * w).sum(-1)
    # site terms, from the cavities of the approximate posterior at these sites
    mean, var = _marginals(K_C, L, root, nu)
    var = torch.where(on, var, one)  # padding: 0, kept off the graph
    m_cav, v_cav, _ = _cavities(mean, var, tau_on, nu, on)
    log_z, _, _ = tilted_moments(likelihood, m_cav, v_cav, tie)
    spread = v_cav + 1.0 / tau_on
    site = log_z + 0.5 * spread.log() + (m_cav - nu / tau_on) ** 2 / (2.0 * spread)
    return gauss + torch.where(on, site, 0.0).sum(-1)


def ep_factors(K_C: Tensor, rows: Tensor, n: int, sites: EPSites) -> LaplaceFactors:
    r"""Posterior factors of the EP approximation, in the Laplace posterior's form.

    Args:
        K_C: ``B x m x m`` prior covariance of the comparison differences.
        rows: ``B x m x 2`` winner-first rows (:func:`comparison_rows`).
        n: Number of designs.
        sites: The converged sites.

    Returns:
        :class:`~botorch_pref.inference.engine.LaplaceFactors` with
        :math:`\alpha = A_C^\top \beta` and :math:`M = L_B^{-1} S A_C` (module docstring).
    """
    with torch.no_grad():
        L, root = _posterior(K_C, sites.tau)
        t = root * (K_C @ sites.nu.unsqueeze(-1)).squeeze(-1)
        beta = sites.nu - root * torch.cholesky_solve(t.unsqueeze(-1), L).squeeze(-1)
        A = difference_matrix(rows, n, K_C)
        M = torch.linalg.solve_triangular(L, root.unsqueeze(-1) * A, upper=False)
        return LaplaceFactors(scatter_rows(beta, rows, n), M)
