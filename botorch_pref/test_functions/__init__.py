r"""Utilities to maximise on the unit cube, for benchmarking preferential BO.

Every utility :math:`f: [0, 1]^d \to \mathbb{R}` here is a function to MAXIMISE whose inputs
live in the unit cube. Functions that are usually stated on another box (Branin on
:math:`[-5, 10] \times [0, 15]`, Ackley on :math:`[-2, 2]^6`, ...) are composed with the affine map
:math:`x \mapsto l + (u - l) x` from the unit cube onto that box, and functions that are usually
minimised are negated. Each utility knows its optimal value (and the unit-cube location of an
optimiser), so that the regret :math:`f^* - f(x)` of a recommendation can be reported.

Where BoTorch has the function (``botorch.test_functions.synthetic``: Branin, Hartmann, Ackley,
Levy) it is wrapped with ``negate=True``; Alpine1 and the 1-D two-bump function are written here.

Domains follow the qEUBO paper (Astudillo et al., 2023, "qEUBO: a decision-theoretic acquisition
function for preferential Bayesian optimization", AISTATS) and its public experiment scripts,
which map the unit cube as ``X_unnorm = 4 X - 2`` for Ackley (d = 6), ``20 X - 10`` for Alpine1
(d = 7) and ``20 X - 10`` for Levy, and use Hartmann-6 on its native :math:`[0, 1]^6`.

All evaluations are carried out in float64 (the result is cast back to the input's dtype and
lives on the input's device), so that a float32 call never perturbs the constants the functions
are built from.

Example:
    >>> import torch
    >>> f = get_utility("hartmann6")
    >>> X = torch.rand(5, 6, dtype=torch.float64)
    >>> f(X).shape, f.regret(X).min() >= 0
    (torch.Size([5]), tensor(True))
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from botorch_pref.test_functions.classic import Ackley, Alpine1, Branin, Hartmann, Levy
from botorch_pref.test_functions.synthetic import Embedded, TwoBump
from botorch_pref.test_functions.utility import BoxUtility, Utility, check_tensor

__all__ = [
    "Ackley",
    "Alpine1",
    "BoxUtility",
    "Branin",
    "Embedded",
    "Hartmann",
    "Levy",
    "TwoBump",
    "Utility",
    "check_tensor",
    "get_utility",
    "list_utilities",
    "utility_name",
]


_FIXED: dict[str, Callable[..., Utility]] = {
    "branin": lambda **kw: Branin(**kw),
    "branin-standardized": lambda **kw: Branin(standardize=True, **kw),
    "hartmann3": lambda **kw: Hartmann(dim=3, **kw),
    "hartmann6": lambda **kw: Hartmann(dim=6, **kw),
    "ackley6": lambda **kw: Ackley(dim=6, **kw),
    "alpine1-7": lambda **kw: Alpine1(dim=7, **kw),
    "levy": lambda **kw: Levy(**kw),
    "two-bump": lambda **kw: TwoBump(**kw),
    "hartmann6-in-20": lambda **kw: Embedded(Hartmann(dim=6), 20, **kw),
}

# Fixed names whose dimension is a keyword rather than part of the name.
_DIM_KEYWORD = frozenset({"levy"})

_PATTERNS: list[tuple[str, Callable[..., Utility]]] = [
    (r"ackley(\d+)", lambda d, **kw: Ackley(dim=int(d), **kw)),
    (r"alpine1-(\d+)", lambda d, **kw: Alpine1(dim=int(d), **kw)),
    (r"levy(\d+)", lambda d, **kw: Levy(dim=int(d), **kw)),
]


def list_utilities() -> list[str]:
    r"""The names :func:`get_utility` accepts: fixed names, then name patterns."""
    return [
        *_FIXED,
        "ackley<d>",
        "alpine1-<d>",
        "levy<d>",
        "<name>-in-<D>",
    ]


def get_utility(name: str, **kwargs: Any) -> Utility:
    r"""Build a utility by name.

    Fixed names: ``branin``, ``branin-standardized``, ``hartmann3``, ``hartmann6``, ``ackley6``,
    ``alpine1-7``, ``levy`` (``dim`` keyword, default 2), ``two-bump``, ``hartmann6-in-20``.
    Patterns: ``ackley<d>``, ``alpine1-<d>``, ``levy<d>`` and ``<name>-in-<D>`` (the utility
    ``<name>`` embedded in ``D`` dimensions; keywords go to :class:`Embedded`, e.g. ``seed``).
    Every utility's ``name`` is accepted, so ``get_utility(f.name)`` rebuilds ``f``, except an
    :class:`Embedded` utility built with ``seed`` or ``active_dims``: its name does not record
    them, so pass the same keyword again. Names are case-insensitive. A name other than ``levy``
    fixes the dimension; a ``dim`` keyword is then accepted only if it agrees.

    Args:
        name: The utility's name.
        **kwargs: Passed to the constructor.

    Returns:
        The utility.

    Raises:
        ValueError: For an unknown name (the message lists the valid ones), or a ``dim`` keyword
            that differs from the dimension the name fixes.
    """
    key = name.strip().lower()
    if key in _FIXED:
        if key in _DIM_KEYWORD:
            return _FIXED[key](**kwargs)
        f = _FIXED[key](**_without_dim(kwargs))
        _check_named_dim(name, f.dim, kwargs)
        return f
    for pattern, factory in _PATTERNS:
        m = re.fullmatch(pattern, key)
        if m:
            _check_named_dim(name, int(m.group(1)), kwargs)
            return factory(*m.groups(), **_without_dim(kwargs))
    m = re.fullmatch(r"(.+)-in-(\d+)", key)
    if m:
        try:
            base = get_utility(m.group(1))
        except ValueError:
            pass
        else:
            _check_named_dim(name, int(m.group(2)), kwargs)
            return Embedded(base, int(m.group(2)), **_without_dim(kwargs))
    raise ValueError(f"Unknown utility {name!r}. Valid names: {', '.join(list_utilities())}.")


def _without_dim(kwargs: dict[str, Any]) -> dict[str, Any]:
    r"""``kwargs`` less a ``dim`` keyword."""
    return {key: value for key, value in kwargs.items() if key != "dim"}


def _check_named_dim(name: str, dim: int, kwargs: dict[str, Any]) -> None:
    r"""Check that a ``dim`` keyword, if any, agrees with the dimension ``dim`` that ``name`` fixes.

    Raises:
        ValueError: If ``kwargs["dim"]`` differs from ``dim``.
    """
    if "dim" in kwargs and kwargs["dim"] != dim:
        raise ValueError(f"{name!r} fixes dim = {dim}; got dim={kwargs['dim']!r}.")


def utility_name(text: str) -> str:
    """An ``argparse`` type: a name :func:`get_utility` knows.

    Raises:
        argparse.ArgumentTypeError: For an unknown name (the message lists the valid ones).
    """
    try:
        get_utility(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text
