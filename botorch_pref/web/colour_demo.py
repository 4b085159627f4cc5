"""``botorch-pref serve --demo colour``: find a named colour by comparing swatches.

The demo makes a session whose parameters are ``r``, ``g``, ``b`` in 0..1, drawn by the
``colour`` renderer, and asks "Which is closer to <colour>?" for a named colour drawn at
random. Nobody is simulated: the person at the browser answers, and the recommendation should
drift towards the named colour.
"""

from __future__ import annotations

import os
import random

from botorch_pref.sessions import Session, SessionExistsError
from botorch_pref.web.colour import COLOUR_NAMES

__all__ = ["DEMOS", "make_demo"]

#: The demos ``--demo`` knows.
DEMOS = ("colour",)


def make_demo(path: str | os.PathLike[str], demo: str, seed: int | None = None) -> tuple[str, str]:
    """Create the demo's session in a database.

    Args:
        path: The database file.
        demo: One of :data:`DEMOS`.
        seed: Seed for the colour drawn and the optimiser.

    Returns:
        ``(session name, prompt)``.

    Raises:
        ValueError: For an unknown demo.
    """
    if demo not in DEMOS:
        raise ValueError(f"Unknown demo {demo!r}; known: {', '.join(DEMOS)}.")
    rng = random.Random(seed)
    target = rng.choice(sorted(COLOUR_NAMES))
    for k in range(1, 1000):
        name = "colour demo" if k == 1 else f"colour demo {k}"
        try:
            Session.create(
                path,
                name,
                {"r": (0.0, 1.0), "g": (0.0, 1.0), "b": (0.0, 1.0)},
                "eubo",
                2,
                rng.randrange(2**31),
                budget=20,
            ).close()
        except SessionExistsError:
            continue
        return name, f"Which is closer to {target}?"
    raise ValueError("Too many demo sessions in this file.")
