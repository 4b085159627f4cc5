"""Colour spaces for the ``colour`` renderer and the colour demo.

Parameters that name a colour are recognised by their names (case-insensitive for r/g/b and
h/s/l, exact for CIE ``L``/``a``/``b``):

* ``r``, ``g``, ``b`` (or ``red``, ``green``, ``blue``): each channel is the value's place
  within its bounds (so bounds 0..1 and 0..255 both work);
* ``h``, ``s``, ``l`` (or ``hue``, ``saturation``, ``lightness``): the hue's place within its
  bounds is the angle 0..360 degrees, saturation and lightness their places within their bounds;
* ``L``, ``a``, ``b``: CIELAB values in their own units (D65 white), clipped into sRGB.
"""

from __future__ import annotations

import colorsys
from collections.abc import Mapping, Sequence

__all__ = ["COLOUR_NAMES", "colour_space", "hex_colour", "to_rgb"]

#: Named colours of the demo (CSS names and their sRGB values in 0..1).
COLOUR_NAMES: dict[str, tuple[float, float, float]] = {
    "teal": (0.0, 0.502, 0.502),
    "coral": (1.0, 0.498, 0.314),
    "olive": (0.502, 0.502, 0.0),
    "orchid": (0.855, 0.439, 0.839),
    "steel blue": (0.275, 0.510, 0.706),
    "goldenrod": (0.855, 0.647, 0.125),
    "sea green": (0.180, 0.545, 0.341),
    "tomato": (1.0, 0.388, 0.278),
    "slate blue": (0.416, 0.353, 0.804),
    "chocolate": (0.824, 0.412, 0.118),
}

_SPACES: dict[str, tuple[tuple[str, ...], ...]] = {
    "rgb": (("r", "g", "b"), ("red", "green", "blue")),
    "hsl": (("h", "s", "l"), ("hue", "saturation", "lightness")),
}


def colour_space(names: Sequence[str]) -> tuple[str, tuple[str, str, str]] | None:
    """The colour space the parameter names describe.

    Args:
        names: The parameter names.

    Returns:
        ``(space, (name1, name2, name3))`` with the actual names in channel order, or ``None``.
    """
    if {"L", "a", "b"} <= set(names):
        return "lab", ("L", "a", "b")
    lower = {n.lower(): n for n in names}
    for space, spellings in _SPACES.items():
        for spelling in spellings:
            if set(spelling) <= set(lower):
                return space, tuple(lower[c] for c in spelling)  # type: ignore[return-value]
    return None


def _place(value: float, low: float, high: float) -> float:
    return min(1.0, max(0.0, (value - low) / (high - low)))


def _lab_to_rgb(L: float, a: float, b: float) -> tuple[float, float, float]:
    fy = (L + 16.0) / 116.0
    fx = fy + a / 500.0
    fz = fy - b / 200.0

    def inv(t: float) -> float:
        return t**3 if t**3 > 0.008856 else (t - 16.0 / 116.0) / 7.787

    x, y, z = 0.95047 * inv(fx), 1.0 * inv(fy), 1.08883 * inv(fz)
    lin = (
        3.2406 * x - 1.5372 * y - 0.4986 * z,
        -0.9689 * x + 1.8758 * y + 0.0415 * z,
        0.0557 * x - 0.2040 * y + 1.0570 * z,
    )

    def gamma(c: float) -> float:
        c = min(1.0, max(0.0, c))
        return 12.92 * c if c <= 0.0031308 else 1.055 * c ** (1 / 2.4) - 0.055

    return gamma(lin[0]), gamma(lin[1]), gamma(lin[2])


def to_rgb(
    values: Mapping[str, float],
    bounds: Mapping[str, tuple[float, float]],
    space: tuple[str, tuple[str, str, str]],
) -> tuple[float, float, float]:
    """The sRGB colour (channels in 0..1) of a design.

    Args:
        values: The design, ``{name: value}``.
        bounds: ``{name: (low, high)}``.
        space: What :func:`colour_space` returned.

    Returns:
        ``(r, g, b)`` in 0..1.
    """
    kind, names = space
    if kind == "lab":
        return _lab_to_rgb(*(float(values[n]) for n in names))
    p = [_place(float(values[n]), *bounds[n]) for n in names]
    if kind == "hsl":
        r, g, b = colorsys.hls_to_rgb(p[0], p[2], p[1])
        return r, g, b
    return p[0], p[1], p[2]


def hex_colour(rgb: Sequence[float]) -> str:
    """``#rrggbb`` of an sRGB colour.

    Args:
        rgb: Channels in 0..1.

    Returns:
        The hex string.
    """
    return "#" + "".join(f"{round(min(1.0, max(0.0, c)) * 255):02x}" for c in rgb)
