r"""Simulated users that answer on a graded scale and rate designs.

:class:`GradedUser` is a :class:`~botorch_pref.users.SimulatedUser` (the same utility, noise and
calibration, :meth:`~botorch_pref.users.SimulatedUser.choose` and the rest unchanged) that also
answers graded comparisons and ratings.

**Graded answers and ratings.** A user with grade thresholds :math:`0 < \tau_1 < \dots <
\tau_h` answers a pair on a scale of :math:`k = 2h + 1` levels (:meth:`SimulatedUser.grade`):
the direction is the sign of the perceived difference :math:`D = \tilde u_0 - \tilde u_1` (the
draw :meth:`SimulatedUser.choose` makes, so a graded answer that takes a side errs exactly when
the binary answer does: 20% of top-design pairs for a calibrated user), and the strength
:math:`m` is the number of thresholds below :math:`|D_s|`, with :math:`D_s = D` plus optional
extra noise (``grade_noise > 1``: a person whose grades are noisier than their direction).
Strength 0 is the middle level ("about the same"), strength :math:`m` the level
:math:`h \pm m`. :func:`calibrate_grades` puts the thresholds at the quantiles
:math:`i/(h+1)` of :math:`|f(x) - f(x')|` over pairs of random designs, so that on such pairs
every strength is about equally frequent. A rating (:meth:`SimulatedUser.rate`) is the number
of cut points below a perceived utility :math:`f(x) + \varepsilon`; :func:`calibrate_ratings`
puts the ``k - 1`` cut points at the quantiles :math:`i/k` of the utility over random designs.
Grade and rating noise come from a second generator (seeded from the user's seed), so a graded
or rating user's directions are a binary user's, answer for answer (common random numbers).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Unpack

import torch
from torch import Tensor

from botorch_pref.checks import nonnegative_real, whole_number
from botorch_pref.test_functions import check_tensor
from botorch_pref.users import SimulatedUser, UserNoise, random_utilities, top_pair_gaps

__all__ = ["GradedUser", "calibrate_grades", "calibrate_ratings"]

#: Mixed into the user's seed for the generator of grade and rating noise.
_SIDE_SEED = 0x5EED60


def _side_generator(seed: int | torch.Generator | None) -> torch.Generator | None:
    """The generator of grade and rating noise: seeded from the user's seed (``None``: global)."""
    if seed is None:
        return None
    base = seed.initial_seed() if isinstance(seed, torch.Generator) else int(seed)
    return torch.Generator().manual_seed((base ^ _SIDE_SEED) % 2**63)


class GradedUser(SimulatedUser):
    r"""A simulated user who also grades pairs and rates designs (module docstring).

    Example:
        >>> from botorch_pref.test_functions import get_utility
        >>> user = GradedUser.calibrated(get_utility("branin"), graded_levels=5, seed=0)
        >>> user.grade(torch.rand(10, 2, 2, dtype=torch.float64)).shape
        torch.Size([10])
    """

    def __init__(
        self,
        utility: Callable[[Tensor], Tensor],
        *,
        grade_thresholds: Tensor | None = None,
        rating_cut_points: Tensor | None = None,
        grade_noise: float = 1.0,
        **user: Unpack[UserNoise],
    ) -> None:
        r"""
        Args:
            utility: As :class:`~botorch_pref.users.SimulatedUser`.
            grade_thresholds: Increasing positive thresholds :math:`\tau_1 < \dots < \tau_h`
                on the perceived difference (:func:`calibrate_grades`), for :meth:`grade`.
            rating_cut_points: Increasing cut points on the perceived utility
                (:func:`calibrate_ratings`), for :meth:`rate`.
            grade_noise: The ratio (``>= 1``) of the noise on a grade's strength to the noise
                on its direction (module docstring); 1 reads both from the same difference.
            **user: ``noise``, ``scale`` and ``seed`` as :class:`~botorch_pref.users.
                SimulatedUser` (:class:`~botorch_pref.users.UserNoise`); grade and rating noise
                come from a second generator seeded from ``seed``.

        Raises:
            ValueError: As :class:`~botorch_pref.users.SimulatedUser`, and for thresholds or
                cut points that are not increasing (thresholds: and positive), or a grade noise
                below 1.
        """
        super().__init__(utility, **user)
        self.side_generator = _side_generator(user.get("seed"))
        self.grade_thresholds = _increasing(grade_thresholds, "grade_thresholds", positive=True)
        self.rating_cut_points = _increasing(rating_cut_points, "rating_cut_points")
        self.grade_noise = nonnegative_real(grade_noise, "grade_noise")
        if self.grade_noise < 1.0:
            raise ValueError(f"grade_noise must be at least 1, got {grade_noise!r}.")

    @classmethod
    def calibrated(
        cls,
        utility: Callable[[Tensor], Tensor],
        *,
        graded_levels: int | None = None,
        rating_levels: int | None = None,
        grade_noise: float = 1.0,
        **settings: Any,
    ) -> GradedUser:
        r"""A user calibrated as :meth:`SimulatedUser.calibrated
        <botorch_pref.users.SimulatedUser.calibrated>`, with grade thresholds and cut points.

        Args:
            utility: The user's utility.
            graded_levels: Levels of graded answers (odd; thresholds by
                :func:`calibrate_grades`), or ``None`` for none.
            rating_levels: Levels of ratings (cut points by :func:`calibrate_ratings`), or
                ``None`` for none.
            grade_noise: See :class:`GradedUser`.
            **settings: Those of :meth:`SimulatedUser.calibrated
                <botorch_pref.users.SimulatedUser.calibrated>` (``error_rate``, ``noise``,
                ``seed``, ``calibration_seed``, ``dim``, ...); ``calibration_seed`` (default 0)
                and ``dim`` also seed and size the thresholds' and cut points' designs.

        Returns:
            The calibrated user.
        """
        base = SimulatedUser.calibrated(utility, **settings)
        seed, dim = settings.get("calibration_seed", 0), settings.get("dim")
        thresholds = cuts = None
        if graded_levels is not None:
            thresholds = calibrate_grades(utility, graded_levels, seed=seed, dim=dim)
        if rating_levels is not None:
            cuts = calibrate_ratings(utility, rating_levels, seed=seed, dim=dim)
        return cls(
            utility,
            grade_thresholds=thresholds,
            rating_cut_points=cuts,
            grade_noise=grade_noise,
            noise=base.noise,
            scale=base.scale,
            seed=settings.get("seed"),
        )

    @property
    def graded_levels(self) -> int | None:
        """The number of levels ``2h + 1`` of :meth:`grade`'s scale (``None`` without
        thresholds)."""
        return None if self.grade_thresholds is None else 2 * len(self.grade_thresholds) + 1

    def grade(self, X: Tensor) -> Tensor:
        r"""Graded answers to pairs: the level of option 0 against option 1 (module docstring).

        Level ``k - 1`` says "option 0 much better", level 0 "option 1 much better"; the data's
        ``add_graded(a, b, level)`` with ``a``, ``b`` the designs of options 0 and 1.

        Args:
            X: A ``2 x d`` or ``batch x 2 x d`` pair query.

        Returns:
            A LongTensor of shape ``(batch)`` with values in ``[0, k - 1]``.

        Raises:
            ValueError: Without grade thresholds, or for a query that is not a pair.
        """
        if self.grade_thresholds is None:
            raise ValueError("this user has no grade_thresholds (see calibrate_grades).")
        if X.dim() >= 2 and X.shape[-2] != 2:
            raise ValueError(f"graded answers are to pairs, got q = {X.shape[-2]}.")
        u = self.perceived_utility(X)  # the draw choose() makes: the same direction
        D = u[..., 0] - u[..., 1]
        extra = self._side_noise(u.shape)
        extra = (extra[..., 0] - extra[..., 1]).to(D)
        spread = math.sqrt(max(self.grade_noise**2 - 1.0, 0.0)) * self.scale
        strength = torch.bucketize((D + spread * extra).abs(), self.grade_thresholds.to(D))
        better = u.argmax(dim=-1) == 0  # choose()'s answer: ties go to option 0
        h = len(self.grade_thresholds)
        return torch.where(better, h + strength, h - strength)

    def rate(self, X: Tensor) -> Tensor:
        r"""Ratings of each design: the number of cut points below its perceived utility.

        Args:
            X: ``... x d`` designs (any batch shape, one rating each).

        Returns:
            A LongTensor of shape ``X.shape[:-1]`` with values in ``[0, k - 1]``.

        Raises:
            ValueError: Without cut points.
        """
        if self.rating_cut_points is None:
            raise ValueError("this user has no rating_cut_points (see calibrate_ratings).")
        check_tensor(X, 1, None, "Designs must be a `... x d` tensor")
        with torch.no_grad():
            u = self.utility(X).to(torch.float64)
        eps = self._side_noise(u.shape).to(u.device)
        return torch.bucketize(u + self.scale * eps, self.rating_cut_points.to(u.device))

    def _side_noise(self, shape: torch.Size) -> Tensor:
        """Standard noise of the user's kind from the grade-and-rating generator."""
        main, self.generator = self.generator, self.side_generator
        try:
            return self._standard_noise(shape)
        finally:
            self.generator = main


def _increasing(values: Tensor | None, name: str, positive: bool = False) -> Tensor | None:
    """``values`` as a float64 1-d tensor, checked increasing (and positive), or ``None``."""
    if values is None:
        return None
    t = torch.as_tensor(values, dtype=torch.float64).reshape(-1).cpu()
    ok = t.numel() > 0 and bool(torch.isfinite(t).all()) and bool((t.diff() > 0).all())
    if not ok or (positive and bool((t <= 0).any())):
        need = "positive, finite and increasing" if positive else "finite and increasing"
        raise ValueError(f"{name} must be {need}, got {t.tolist()}.")
    return t


def calibrate_grades(
    utility: Callable[[Tensor], Tensor],
    levels: int,
    n_pairs: int = 10**5,
    seed: int | torch.Generator | None = 0,
    dim: int | None = None,
    among: str = "random",
) -> Tensor:
    r"""Grade thresholds for a ``levels``-level scale at fixed quantiles of utility gaps.

    With :math:`h = \lfloor (k-1)/2 \rfloor` thresholds (:math:`k` = ``levels``), threshold
    :math:`i` is the quantile :math:`i/(h+1)` of :math:`|f(x) - f(x')|` over ``n_pairs`` pairs of
    uniform random designs (``among="random"``), or of pairs of top-1% designs
    (``among="top"``, :func:`~botorch_pref.users.top_pair_gaps`: the pairs the answer noise is
    calibrated on, so that strengths tell good designs apart, where an optimiser asks its
    questions; random pairs' gaps are far wider, on Branin 22 against 0.1), so a noiseless user
    answers such pairs with every strength about equally often; pass them to
    :class:`SimulatedUser` with ``grade_thresholds``.

    Args:
        utility: A callable mapping ``n x d`` unit-cube designs to ``n`` utilities.
        levels: The scale's number of levels ``k >= 3`` (odd: 3, 5, 7, ...).
        n_pairs: Random pairs.
        seed: Seed or generator of the designs.
        dim: The input dimension; defaults to ``utility.dim``.
        among: ``"random"`` or ``"top"``: the pairs whose gaps set the thresholds.

    Returns:
        The ``h`` thresholds (float64).

    Raises:
        ValueError: For an even or too small ``levels``, an unknown ``among``, or a constant
            utility.
    """
    levels = whole_number(levels, "levels", 3)
    if levels % 2 == 0:
        raise ValueError(f"levels must be odd (a middle 'about the same' level), got {levels}.")
    n_pairs = whole_number(n_pairs, "n_pairs", 2)
    if among == "top":
        gaps = top_pair_gaps(utility, n_pairs, seed, dim=dim)
    elif among == "random":
        u = random_utilities(utility, 2 * n_pairs, dim, seed)
        gaps = (u[:n_pairs] - u[n_pairs:]).abs()
    else:
        raise ValueError(f"among must be 'random' or 'top', got {among!r}.")
    h = (levels - 1) // 2
    q = torch.arange(1, h + 1, dtype=torch.float64) / (h + 1)
    thresholds = torch.quantile(gaps, q)
    return _increasing(thresholds, "the calibrated thresholds (is the utility constant?)", True)


def calibrate_ratings(
    utility: Callable[[Tensor], Tensor],
    levels: int,
    n_designs: int = 10**5,
    seed: int | torch.Generator | None = 0,
    dim: int | None = None,
) -> Tensor:
    r"""Rating cut points at the quantiles :math:`i/k` of the utility over random designs.

    Args:
        utility: A callable mapping ``n x d`` unit-cube designs to ``n`` utilities.
        levels: The number of rating levels ``k >= 2``.
        n_designs: Uniform random designs.
        seed: Seed or generator of the designs.
        dim: The input dimension; defaults to ``utility.dim``.

    Returns:
        The ``k - 1`` cut points (float64).

    Raises:
        ValueError: For bad arguments or a constant utility.
    """
    levels = whole_number(levels, "levels", 2)
    u = random_utilities(utility, whole_number(n_designs, "n_designs", 2), dim, seed)
    q = torch.arange(1, levels, dtype=torch.float64) / levels
    return _increasing(torch.quantile(u, q), "the calibrated cut points (is the utility constant?)")
