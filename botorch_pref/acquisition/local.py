r"""An acquisition function restricted to a box around each member's incumbent.

A preference model extrapolates: on a problem whose optimum lies near the boundary (Branin on
its own box), the posterior mean can keep rising towards the edge, and a global acquisition
then keeps pairing the edge design with far-away designs instead of comparing it with the
interior point a short step away, whose difference to it has a small posterior variance. A
*local* query maximises the same acquisition function over the box

.. math::

    B = [c - \rho, c + \rho] \cap [0, 1]^d

around the incumbent :math:`c` (the compared design with the highest posterior mean), so that
the best pair *near* the incumbent is asked about. :class:`LocalBox` maps the unit cube onto
``B`` affinely, :math:`x \mapsto \ell + (u - \ell)\,x`, which lets any unit-cube optimiser
(BoTorch's ``optimize_acqf``, :func:`~botorch_pref.optim.optimize_acqf_batched`) search ``B``
unchanged; :func:`local_box` builds the bounds.

The stall needs a champion on or next to the boundary; around an interior champion a global
acquisition already pairs it with its neighbourhood's best rivals, and a local query only spends
an answer near a design the model already ranks well. :func:`near_boundary` tells the two
apart: it flags the champions whose box :math:`B` the cube clips.
"""

from __future__ import annotations

from botorch.acquisition import AcquisitionFunction
from torch import Tensor

__all__ = ["LocalBox", "local_box", "near_boundary"]


def local_box(center: Tensor, radius: float) -> tuple[Tensor, Tensor]:
    r"""The box :math:`[c - \rho, c + \rho] \cap [0, 1]^d` around each centre.

    Args:
        center: ``m x d`` centres on the unit cube.
        radius: The half-width :math:`\rho > 0` on the unit cube.

    Returns:
        ``(lower, upper)``, each ``m x d``.
    """
    if not radius > 0:
        raise ValueError(f"radius must be positive, got {radius}.")
    return (center - radius).clamp(0.0, 1.0), (center + radius).clamp(0.0, 1.0)


def near_boundary(center: Tensor, margin: float) -> Tensor:
    r"""Whether each centre lies within ``margin`` of the unit cube's boundary.

    Centre :math:`c` is near the boundary when :math:`\min(c_i, 1 - c_i) < \text{margin}` for
    some coordinate :math:`i`; with ``margin`` the half-width :math:`\rho` of
    :func:`local_box`, that is exactly when the cube clips the box around :math:`c`.

    Args:
        center: ``m x d`` centres on the unit cube.
        margin: The distance, ``>= 0``.

    Returns:
        ``m`` booleans.
    """
    if not margin >= 0:
        raise ValueError(f"margin must be non-negative, got {margin}.")
    return ((center < margin) | (center > 1.0 - margin)).any(-1)


class LocalBox(AcquisitionFunction):
    r"""``acq_function`` seen through the affine map of the unit cube onto a box per member.

    Evaluated at unit-cube points ``X`` (``batch x m x q x d`` for a batched model with ``m``
    members, or ``batch x q x d`` for one model and ``m = 1``), it returns
    ``acq_function(lower + (upper - lower) * X)``, row ``i`` of ``lower``/``upper`` applying to
    member ``i``. :meth:`to_box` maps the optimiser's answer back.

    Args:
        acq_function: The acquisition function on the unit cube.
        lower: ``m x d`` lower corners.
        upper: ``m x d`` upper corners (``>= lower``).
    """

    def __init__(self, acq_function: AcquisitionFunction, lower: Tensor, upper: Tensor) -> None:
        if lower.shape != upper.shape or lower.dim() != 2:
            raise ValueError(
                f"lower and upper must both be m x d, got {tuple(lower.shape)} and "
                f"{tuple(upper.shape)}."
            )
        if bool((upper < lower).any()):
            raise ValueError("upper must be >= lower in every coordinate.")
        super().__init__(model=acq_function.model)
        self.acq_function = acq_function
        self.register_buffer("lower", lower.unsqueeze(-2))  # m x 1 x d
        self.register_buffer("width", (upper - lower).unsqueeze(-2))

    def to_box(self, X: Tensor) -> Tensor:
        """Map unit-cube points (``... x m x q x d``) into each member's box."""
        return self.lower + self.width * X

    def forward(self, X: Tensor) -> Tensor:
        """The acquisition value at the box points that ``X`` maps to."""
        return self.acq_function(self.to_box(X))
