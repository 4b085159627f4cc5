r"""Simulated users that answer preference queries, and the calibration of their noise.

A simulated user holds a utility :math:`f` and answers a query of :math:`q` options
:math:`x_1, \dots, x_q` by perceiving :math:`\tilde u_i = f(x_i) + \varepsilon_i` and choosing
:math:`\arg\max_i \tilde u_i` (or ranking the options by :math:`\tilde u`), with i.i.d. noise

- probit: :math:`\varepsilon_i \sim \mathcal{N}(0, s^2)`, so for a pair with utility gap
  :math:`\Delta = f(x_1) - f(x_2)`, :math:`P(\text{choose } x_1) = \Phi(\Delta / (\sqrt{2} s))`;
- Gumbel: :math:`\varepsilon_i = s\,G_i` with :math:`G_i \sim \mathrm{Gumbel}(0, 1)`, the logit
  (multinomial logit) choice model: :math:`P(\text{choose } x_i) = \mathrm{softmax}(f(x)/s)_i`,
  :math:`P(\text{choose } x_1) = \sigma(\Delta / s)` for a pair.

A scale :math:`s = 0` gives a noiseless user (ties go to the lowest index).

The noise scale is calibrated as in the qEUBO paper (Astudillo et al., 2023): draw :math:`10^6`
uniform designs, keep the top 1% by utility, and choose :math:`s` so that a pair of designs drawn
from that set is answered wrongly with a given probability (10%, 20% or 30%).
See :func:`calibrate_noise`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypedDict

import torch
from torch import Tensor

from botorch_pref.checks import nonnegative_real, whole_number
from botorch_pref.test_functions import check_tensor

__all__ = [
    "SimulatedUser",
    "UserNoise",
    "calibrate_noise",
    "error_probability",
    "random_utilities",
    "simulate_comparisons",
    "top_pair_gaps",
    "top_utilities",
]

_NOISES = {"probit": "probit", "gumbel": "gumbel", "logit": "gumbel"}


def _check_noise(noise: str) -> str:
    r"""Normalise a noise name (``"probit"``, ``"gumbel"`` or its alias ``"logit"``)."""
    key = noise.lower() if isinstance(noise, str) else noise
    if key not in _NOISES:
        raise ValueError(f"Unknown noise {noise!r}; use 'probit' or 'gumbel' (alias 'logit').")
    return _NOISES[key]


def _make_generator(seed: int | torch.Generator | None) -> torch.Generator | None:
    r"""A ``torch.Generator`` from a seed; a generator is used as is; ``None`` stays ``None``."""
    if seed is None or isinstance(seed, torch.Generator):
        return seed
    if isinstance(seed, bool) or int(seed) != seed:
        raise ValueError(f"seed must be an int, a torch.Generator or None, got {seed!r}.")
    return torch.Generator().manual_seed(int(seed))


def error_probability(delta: Tensor, scale: float, noise: str = "gumbel") -> Tensor:
    r"""Probability that a user answers a pair with utility gap ``delta`` wrongly.

    Answering wrongly means choosing the option with the lower true utility:

    .. math::
        P_{\text{wrong}}(\Delta) =
        \begin{cases}
            \Phi\big(-|\Delta| / (\sqrt{2}\, s)\big) & \text{probit}, \\
            \sigma\big(-|\Delta| / s\big) & \text{Gumbel},
        \end{cases}

    which increases with :math:`s`. A tie (:math:`\Delta = 0`) counts as wrong with probability
    1/2 for every scale, including :math:`s = 0`; for :math:`s = 0` and :math:`\Delta \ne 0` the
    probability is 0.

    Args:
        delta: A tensor of utility gaps (any shape, floating).
        scale: The noise scale :math:`s \ge 0`.
        noise: ``"probit"`` or ``"gumbel"``.

    Returns:
        A tensor of probabilities, shaped like ``delta``.

    Raises:
        TypeError: If ``delta`` is not a floating-point tensor.
    """
    if not isinstance(delta, Tensor) or not delta.is_floating_point():
        kind = delta.dtype if isinstance(delta, Tensor) else type(delta).__name__
        raise TypeError(f"delta must be a floating-point tensor, got {kind}.")
    noise = _check_noise(noise)
    scale = nonnegative_real(scale, "scale")
    a = delta.abs()
    if scale == 0.0:
        return torch.where(a == 0, 0.5, 0.0).to(a)
    if noise == "probit":
        # Phi(-y) = erfc(y / sqrt 2) / 2, accurate in the far tail (torch's ndtr is not, there).
        return 0.5 * torch.special.erfc(a / (2.0 * scale))
    return torch.sigmoid(-a / scale)


class UserNoise(TypedDict, total=False):
    """A simulated user's answer noise, as keywords of :class:`SimulatedUser` (all optional).

    Attributes:
        noise: ``"probit"`` or ``"gumbel"`` (default).
        scale: The noise scale :math:`s \\ge 0` (default 0: noiseless answers).
        seed: An int seed, a CPU ``torch.Generator`` or ``None`` (torch's global generator).
    """

    noise: str
    scale: float
    seed: int | torch.Generator | None


class SimulatedUser:
    r"""A simulated user answering preference queries with probit or Gumbel noise.

    Each answer draws fresh noise :math:`\varepsilon` for every option (from the user's own
    generator, on the CPU in float64, so answers are reproducible across devices), and
    :meth:`choose`, :meth:`rank` and :meth:`compare` act on the perceived utilities
    :math:`\tilde u = f(x) + \varepsilon` (:meth:`perceived_utility`). The noise draws do not
    depend on the scale, so users built with the same seed and different scales see the same
    standardised noise (common random numbers).

    Example:
        >>> from botorch_pref.test_functions import get_utility
        >>> f = get_utility("hartmann6")
        >>> user = SimulatedUser(f, noise="gumbel", scale=0.164, seed=0)
        >>> user.choose(torch.rand(10, 2, 6, dtype=torch.float64)).shape
        torch.Size([10])
    """

    def __init__(
        self,
        utility: Callable[[Tensor], Tensor],
        noise: str = "gumbel",
        scale: float = 0.0,
        seed: int | torch.Generator | None = None,
    ) -> None:
        r"""
        Args:
            utility: A callable mapping ``... x d`` designs to ``...`` utilities (for example a
                :class:`~botorch_pref.test_functions.Utility`). If it has a ``dim`` attribute,
                queries are checked against it.
            noise: ``"probit"`` (Gaussian noise with standard deviation ``scale``) or
                ``"gumbel"`` (``scale`` times standard Gumbel noise; alias ``"logit"``).
            scale: The noise scale :math:`s \ge 0`; 0 gives noiseless answers.
            seed: An int seed for a private generator, a CPU ``torch.Generator`` to draw from,
                or ``None`` to use torch's global generator.

        Raises:
            TypeError: If ``utility`` is not callable or ``scale`` is not a number.
            ValueError: For an unknown noise, a negative or non-finite scale, or a bad seed.
        """
        if not callable(utility):
            raise TypeError("utility must be callable.")
        self.utility = utility
        self.noise = _check_noise(noise)
        self.scale = nonnegative_real(scale, "scale")
        self.generator = _make_generator(seed)

    @classmethod
    def calibrated(
        cls,
        utility: Callable[[Tensor], Tensor],
        error_rate: float = 0.2,
        noise: str = "gumbel",
        seed: int | torch.Generator | None = None,
        calibration_seed: int | torch.Generator | None = 0,
        **calibration_kwargs: Any,
    ) -> SimulatedUser:
        r"""A user whose noise scale is set by :func:`calibrate_noise`.

        Args:
            utility: The user's utility.
            error_rate: The target probability of answering a top-design pair wrongly.
            noise: ``"probit"`` or ``"gumbel"``.
            seed: Seed or generator of the user's answers.
            calibration_seed: Seed or generator of the calibration's designs and pairs.
            **calibration_kwargs: Passed to :func:`calibrate_noise` (e.g. ``n_candidates``).

        Returns:
            The calibrated user.
        """
        scale = calibrate_noise(
            utility,
            error_rate=error_rate,
            noise=noise,
            seed=calibration_seed,
            **calibration_kwargs,
        )
        return cls(utility, noise=noise, scale=scale, seed=seed)

    def __repr__(self) -> str:
        return f"SimulatedUser(noise={self.noise!r}, scale={self.scale!r})"

    def _check_query(self, X: Tensor) -> None:
        r"""Validate a query tensor ``... x q x d`` with ``q >= 2``."""
        check_tensor(X, 2, None, "A query must be a `q x d` or `batch x q x d` tensor")
        if X.shape[-2] < 2:
            raise ValueError(f"A query needs q >= 2 options, got q = {X.shape[-2]}.")
        dim = getattr(self.utility, "dim", None)
        if dim is not None and X.shape[-1] != dim:
            raise ValueError(f"Expected designs of dimension {dim}, got {X.shape[-1]}.")

    def _standard_noise(self, shape: torch.Size) -> Tensor:
        r"""Standard (scale-1) noise of the user's kind, float64, on the generator's device."""
        g = self.generator
        device = g.device if g is not None else torch.device("cpu")
        if self.noise == "probit":
            return torch.randn(shape, generator=g, dtype=torch.float64, device=device)
        e = torch.empty(shape, dtype=torch.float64, device=device).exponential_(generator=g)
        # -log(E) with E ~ Exp(1) is standard Gumbel; E == 0 has probability 0 but guard anyway.
        return -torch.log(e.clamp_min(torch.finfo(torch.float64).tiny))

    def perceived_utility(self, X: Tensor) -> Tensor:
        r"""Utilities as perceived in one answer: :math:`f(x_i) + \varepsilon_i`.

        Args:
            X: A ``q x d`` or ``batch x q x d`` query (``q >= 2``).

        Returns:
            A float64 ``(batch) x q`` tensor on ``X``'s device. Each call draws fresh noise.
        """
        self._check_query(X)
        with torch.no_grad():
            u = self.utility(X)
        if u.shape != X.shape[:-1]:
            raise ValueError(
                f"The utility returned shape {tuple(u.shape)} for inputs {tuple(X.shape)}; "
                f"expected {tuple(X.shape[:-1])}."
            )
        eps = self._standard_noise(u.shape).to(X.device)
        return u.to(torch.float64) + self.scale * eps

    def choose(self, X: Tensor) -> Tensor:
        r"""The index of the preferred option of each query.

        Args:
            X: A ``q x d`` or ``batch x q x d`` query (``q >= 2``).

        Returns:
            A LongTensor of shape ``(batch)`` with values in ``[0, q)``.
        """
        return self.perceived_utility(X).argmax(dim=-1)

    def answer_pair(self, X: Tensor, tie_band: float = 0.0) -> Tensor:
        r"""The preferred option of each pair, or ``-1`` for "no preference".

        A person who cannot tell two options apart says so: the answer is "no preference" when
        the perceived utilities differ by less than ``tie_band`` (in utility units), the
        preferred option otherwise. The noise is drawn as in :meth:`choose`, so with
        ``tie_band=0`` the answers are :meth:`choose`'s, and a user with a band answers every
        other query as one without (common random numbers).

        Args:
            X: A ``2 x d`` or ``batch x 2 x d`` pair query.
            tie_band: The band :math:`b \ge 0`: "no preference" when
                :math:`|\tilde u_0 - \tilde u_1| < b`.

        Returns:
            A LongTensor of shape ``(batch)`` with values in ``{-1, 0, 1}``.

        Raises:
            TypeError: For a band that is not a number.
            ValueError: For a query that is not a pair, or a negative or non-finite band.
        """
        band = nonnegative_real(tie_band, "tie_band")
        if X.dim() >= 2 and X.shape[-2] != 2:
            raise ValueError(f"'no preference' answers are to pairs, got q = {X.shape[-2]}.")
        u = self.perceived_utility(X)
        tied = (u[..., 0] - u[..., 1]).abs() < band
        return torch.where(tied, -1, u.argmax(dim=-1))

    def rank(self, X: Tensor) -> Tensor:
        r"""A full ranking of each query's options, best first.

        Under the same random numbers, ``rank(X)[..., 0] == choose(X)`` (ties are broken
        towards the lower index in both).

        Args:
            X: A ``q x d`` or ``batch x q x d`` query (``q >= 2``).

        Returns:
            A LongTensor ``(batch) x q``; each row is a permutation of ``0..q-1``.
        """
        return torch.argsort(self.perceived_utility(X), dim=-1, descending=True, stable=True)

    def compare(self, X: Tensor, offset: int = 0) -> Tensor:
        r"""Answer queries as ``(winner, loser)`` index rows, the format of ``PairwiseGP``.

        The designs are indexed as in ``X.reshape(-1, d)`` (plus ``offset``, for appending to an
        existing datapoints tensor). Each query contributes the ``q - 1`` rows
        (winner, other option), in increasing order of the other option; for ``q = 2`` this is the
        single row of the answered pair. For ``q > 2`` these rows are implied by one top choice and
        are not independent comparisons.

        Args:
            X: A ``q x d`` or ``batch x q x d`` query (``q >= 2``).
            offset: Added to every index.

        Returns:
            A LongTensor of shape ``(batch * (q - 1)) x 2`` on ``X``'s device.

        Raises:
            ValueError: If ``offset`` is not a non-negative integer, or for a bad query.
        """
        offset = whole_number(offset, "offset", 0)
        winner = self.choose(X).reshape(-1)
        b, q = winner.shape[0], X.shape[-2]
        base = torch.arange(b, device=winner.device).unsqueeze(-1) * q
        others = torch.arange(q, device=winner.device).expand(b, q)
        losers = others[others != winner.unsqueeze(-1)].reshape(b, q - 1)
        win_idx = (base + winner.unsqueeze(-1)).expand(b, q - 1)
        rows = torch.stack([win_idx, base + losers], dim=-1).reshape(-1, 2)
        return rows + offset


def simulate_comparisons(X: Tensor, user: SimulatedUser) -> tuple[Tensor, Tensor]:
    r"""Answer a batch of queries and return them as ``PairwiseGP`` training data.

    Args:
        X: A ``q x d`` or ``batch x q x d`` tensor of queries.
        user: The user answering them.

    Returns:
        ``(datapoints, comparisons)``: ``datapoints = X.reshape(-1, d)`` (``n x d``, with
        ``n = batch * q``) and ``comparisons``, an ``m x 2`` LongTensor of (winner, loser) rows
        indexing ``datapoints``, with ``m = batch * (q - 1)`` (see :meth:`SimulatedUser.compare`).
    """
    comparisons = user.compare(X)
    return X.reshape(-1, X.shape[-1]), comparisons


def top_utilities(
    utility: Callable[[Tensor], Tensor],
    dim: int | None = None,
    n_candidates: int = 10**6,
    top_fraction: float = 0.01,
    seed: int | torch.Generator | None = 0,
    chunk_size: int = 2**16,
) -> Tensor:
    r"""The top ``top_fraction`` of the utilities of ``n_candidates`` uniform random designs.

    The designs are drawn in float64 on the CPU, ``chunk_size`` at a time, keeping a running
    top-k, so that memory stays :math:`O(\text{chunk\_size} \cdot d + k)`.

    Args:
        utility: A callable mapping ``n x d`` unit-cube designs to ``n`` utilities.
        dim: The input dimension; defaults to ``utility.dim``.
        n_candidates: The number of random designs.
        top_fraction: The fraction kept, in ``(0, 1]``; :math:`k = \lfloor n \cdot
            \text{top\_fraction} \rceil` (at least 2).
        seed: Seed or generator for the designs.
        chunk_size: Designs evaluated per call of ``utility``.

    Returns:
        A float64 tensor of the :math:`k` largest utilities, in decreasing order.

    Raises:
        ValueError: For bad arguments, if the utility returns NaN, or if an infinite utility is
            among the :math:`k` largest.
    """
    dim = _resolve_dim(utility, dim)
    n_candidates = whole_number(n_candidates, "n_candidates", 2)
    if not 0.0 < top_fraction <= 1.0:
        raise ValueError(f"top_fraction must lie in (0, 1], got {top_fraction!r}.")
    chunk_size = whole_number(chunk_size, "chunk_size", 1)
    k = max(2, round(n_candidates * top_fraction))
    g = _make_generator(seed)
    best = torch.empty(0, dtype=torch.float64)
    with torch.no_grad():
        for start in range(0, n_candidates, chunk_size):
            m = min(chunk_size, n_candidates - start)
            X = torch.rand(m, dim, generator=g, dtype=torch.float64)
            y = utility(X).reshape(-1).to(torch.float64)
            if y.shape[0] != m:
                raise ValueError(f"The utility returned {y.shape[0]} values for {m} designs.")
            if bool(y.isnan().any()):
                raise ValueError(f"The utility returned NaN for {int(y.isnan().sum())} designs.")
            pool = torch.cat([best, y])
            best = pool.topk(min(k, pool.shape[0])).values
    if not bool(best.isfinite().all()):
        raise ValueError("The utility returned infinite values among the top designs.")
    return best


def random_utilities(
    utility: Callable[[Tensor], Tensor],
    n: int,
    dim: int | None = None,
    seed: int | torch.Generator | None = 0,
) -> Tensor:
    """Utilities of ``n`` uniform random designs in the unit cube (float64, CPU, seeded).

    Args:
        utility: A callable mapping ``n x d`` unit-cube designs to ``n`` utilities.
        n: The number of designs.
        dim: The input dimension; defaults to ``utility.dim``.
        seed: Seed or generator of the designs.

    Returns:
        The ``n`` utilities.
    """
    dim = _resolve_dim(utility, dim)
    n = whole_number(n, "n", 1)
    g = _make_generator(seed)
    with torch.no_grad():
        return utility(torch.rand(n, dim, generator=g, dtype=torch.float64)).reshape(-1).double()


def _resolve_dim(utility: Callable[[Tensor], Tensor], dim: int | None) -> int:
    r"""The input dimension: ``dim`` if given, else ``utility.dim``."""
    if dim is None:
        dim = getattr(utility, "dim", None)
        if dim is None:
            raise ValueError("Pass dim: the utility has no `dim` attribute.")
    return whole_number(dim, "dim", 1)


def _mean_error(delta: Tensor, scale: float, noise: str) -> float:
    r"""Mean over pairs of the analytic wrong-answer probability."""
    return error_probability(delta, scale, noise).mean().item()


def top_pair_gaps(
    utility: Callable[[Tensor], Tensor],
    n_pairs: int = 10**5,
    seed: int | torch.Generator | None = 0,
    **top_kwargs: Any,
) -> Tensor:
    """Absolute utility gaps of ``n_pairs`` random pairs of distinct top designs: the pairs
    :func:`calibrate_noise` calibrates the answer noise on.

    Args:
        utility: A callable mapping ``n x d`` unit-cube designs to ``n`` utilities.
        n_pairs: The number of pairs.
        seed: Seed or generator of the designs and the pairs.
        **top_kwargs: Passed to :func:`top_utilities` (``dim``, ``n_candidates``,
            ``top_fraction``, ``chunk_size``).

    Returns:
        ``n_pairs`` float64 gaps.
    """
    g = _make_generator(seed)
    return _pair_gaps(top_utilities(utility, seed=g, **top_kwargs), n_pairs, g)


def _pair_gaps(top: Tensor, n_pairs: int, g: torch.Generator | None) -> Tensor:
    """Absolute utility gaps of ``n_pairs`` uniform pairs of distinct entries of ``top``."""
    k = top.shape[0]
    i = torch.randint(k, (n_pairs,), generator=g)
    j = torch.randint(k - 1, (n_pairs,), generator=g)
    j = j + (j >= i).long()
    return (top[i] - top[j]).abs()


def calibrate_noise(
    utility: Callable[[Tensor], Tensor],
    error_rate: float = 0.2,
    noise: str = "gumbel",
    n_candidates: int = 10**6,
    top_fraction: float = 0.01,
    n_pairs: int = 10**5,
    seed: int | torch.Generator | None = 0,
    dim: int | None = None,
    chunk_size: int = 2**16,
    rtol: float = 1e-10,
) -> float:
    r"""The noise scale at which top designs are compared wrongly at a given rate (qEUBO).

    Draw ``n_candidates`` uniform designs in :math:`[0, 1]^d`, keep the top ``top_fraction``
    by utility (:func:`top_utilities`), draw ``n_pairs`` pairs :math:`(i, j)`, :math:`i \ne j`,
    uniformly from that set, with gaps :math:`\Delta_p = f_i - f_j`, and solve

    .. math::
        \bar e(s) = \frac{1}{P} \sum_{p=1}^{P} P_{\text{wrong}}(\Delta_p; s) = \text{error\_rate}

    for :math:`s`, with the analytic :func:`error_probability` (probit:
    :math:`\Phi(-|\Delta|/(\sqrt{2} s))`; Gumbel: :math:`\sigma(-|\Delta|/s)`). :math:`\bar e` is
    smooth and strictly increasing in :math:`s` from :math:`t/2` (:math:`t` the fraction of tied
    pairs) to 1/2, so the root is unique; it is bracketed by doubling/halving from the median
    gap and found by bisection on :math:`\log s` to relative precision ``rtol``.

    The qEUBO scripts pair the top set off into disjoint pairs and minimise
    :math:`|\bar e(s) - \text{error\_rate}|` with a local optimiser; the random pairs here have
    the same expectation.

    Args:
        utility: A callable mapping ``n x d`` unit-cube designs to ``n`` utilities.
        error_rate: The target mean probability of a wrong answer, in ``(0, 0.5)``.
        noise: ``"probit"`` or ``"gumbel"`` (alias ``"logit"``).
        n_candidates: The number of random designs (:math:`10^6` in the qEUBO paper).
        top_fraction: The fraction of best designs kept (1% in the qEUBO paper).
        n_pairs: The number of random pairs from the top set.
        seed: Seed or generator for the designs and the pairs.
        dim: The input dimension; defaults to ``utility.dim``.
        chunk_size: Designs evaluated per call of ``utility``.
        rtol: Relative precision of the returned scale, a finite number > 0 (below the
            precision of doubles the bisection stops at that precision).

    Returns:
        The calibrated scale :math:`s > 0`.

    Raises:
        ValueError: For bad arguments, if the utility returns NaN (or infinite values on the top
            set), or if it is constant on the top set (or so often tied there that the target
            rate cannot be reached).
    """
    if not 0.0 < error_rate < 0.5:
        raise ValueError(f"error_rate must lie in (0, 0.5), got {error_rate!r}.")
    noise = _check_noise(noise)
    n_pairs = whole_number(n_pairs, "n_pairs", 1)
    if not (math.isfinite(rtol) and rtol > 0):
        raise ValueError(f"rtol must be a finite number > 0, got {rtol!r}.")
    delta = top_pair_gaps(
        utility,
        n_pairs,
        seed,
        dim=dim,
        n_candidates=n_candidates,
        top_fraction=top_fraction,
        chunk_size=chunk_size,
    )
    positive = delta[delta > 0]
    if positive.numel() == 0 or 0.5 * (delta == 0).double().mean().item() >= error_rate:
        raise ValueError(
            "The utility is (nearly always) tied on the top designs; "
            f"an error rate of {error_rate} cannot be reached."
        )
    return _solve_scale(delta, positive.median().item(), error_rate, noise, rtol)


def _solve_scale(delta: Tensor, start: float, error_rate: float, noise: str, rtol: float) -> float:
    r"""The root :math:`s` of :math:`\bar e(s) = \text{error\_rate}`: bracketed by halving and
    doubling from ``start``, then bisected on :math:`\log s` to relative precision ``rtol``."""
    lo = hi = start
    while _mean_error(delta, lo, noise) > error_rate:
        lo /= 2.0
    while _mean_error(delta, hi, noise) < error_rate:
        hi *= 2.0
    log_lo, log_hi = math.log(lo), math.log(hi)
    while log_hi - log_lo > rtol:
        mid = 0.5 * (log_lo + log_hi)
        if mid in (log_lo, log_hi):  # adjacent doubles: rtol is below float precision
            break
        if _mean_error(delta, math.exp(mid), noise) < error_rate:
            log_lo = mid
        else:
            log_hi = mid
    return math.exp(0.5 * (log_lo + log_hi))
