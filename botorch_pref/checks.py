"""Argument checks shared by every layer of the package (it imports nothing from the package).

A count (``n_candidates``, ``chunk_size``, ``max_iter``, a dimension, an offset) is a whole
number: a Python or NumPy integer, or a float without a fractional part (``4.0``, as a
computation may produce one). A bool is not a count, nor is a string, and a fraction is never
truncated (:func:`whole_number`). The loop's settings and answers are stricter
(:func:`strict_int`: floats are refused there): they are read from people and from stored
sessions, where ``2.0`` hints at a mistake. A yes/no field is a bool, ``0``/``1`` or ``None``
(:func:`strict_flag`): the string ``"False"`` is refused, not taken as true.

Each check raises ``ValueError`` by default, or the ``error`` it is given (a subclass that the
caller's layer documents, such as the loop's ``InvalidAnswerError``), so a layer uses these
checks without restating them.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch

__all__ = ["is_bool", "nonnegative_real", "strict_flag", "strict_int", "whole_number"]

_KINDS = {0: "a non-negative integer", 1: "a positive integer"}


def strict_int(
    value: Any, name: str, minimum: int | None = None, *, error: type[Exception] = ValueError
) -> int:
    """``value`` as an int, if it is an integer of at least ``minimum``: a Python or NumPy
    integer, or a one-element integer tensor; not a bool, not a float (not even ``2.0``).

    Args:
        value: The value.
        name: The argument's name, for the message.
        minimum: The least value allowed; ``None`` for none.
        error: The exception to raise.

    Returns:
        ``int(value)``.

    Raises:
        ValueError: (or ``error``) Naming ``name``, for anything else.
    """
    if is_bool(value):
        raise error(f"{name} must be an integer, got {value!r}.")
    try:
        if torch.is_tensor(value):
            if value.numel() != 1 or value.is_floating_point() or value.is_complex():
                raise TypeError
            number = int(value.item())
        else:
            number = operator.index(value)
    except TypeError:
        raise error(f"{name} must be an integer, got {value!r}.") from None
    if minimum is not None and number < minimum:
        kind = _KINDS.get(minimum, f"an integer >= {minimum}")
        raise error(f"{name} must be {kind}, got {number}.")
    return number


def whole_number(
    value: Any, name: str, minimum: int | None = None, *, error: type[Exception] = ValueError
) -> int:
    """``value`` as an int, if it is a whole number of at least ``minimum``.

    Args:
        value: An integer (Python's, NumPy's, a one-element integer tensor) or a float with no
            fractional part.
        name, minimum, error: As :func:`strict_int`.

    Returns:
        ``int(value)``.

    Raises:
        ValueError: (or ``error``) Naming ``name``, for a bool, a string, a fraction, NaN or
            infinity, anything that is not a number, or a value below ``minimum``.
    """
    try:
        text = isinstance(value, (str, bytes))
        ok = not (text or is_bool(value)) and bool(int(value) == value)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        ok = False
    if ok and (minimum is None or int(value) >= minimum):
        return int(value)
    kind = "an integer" if minimum is None else _KINDS.get(minimum, f"an integer >= {minimum}")
    raise error(f"{name} must be {kind}, got {value!r}.")


def strict_flag(value: Any, name: str, *, error: type[Exception] = ValueError) -> bool:
    """``value`` as a bool, if it is a yes/no value: ``True``, ``False``, ``None`` (no),
    ``0``, ``1``, or a NumPy or torch boolean.

    Args:
        value: The value.
        name: The argument's name, for the message.
        error: The exception to raise.

    Returns:
        ``bool(value)``.

    Raises:
        ValueError: (or ``error``) Naming ``name``, for anything else (the string ``"False"``
            would be true, an array's truth is ambiguous).
    """
    try:
        is_flag = value is None or value in (True, False)
    except (TypeError, ValueError, RuntimeError):  # an array's truth is ambiguous
        is_flag = False
    if not is_flag:
        raise error(f"{name} must be True or False, got {value!r:.40}.")
    return bool(value)


def is_bool(value: Any) -> bool:
    """Whether ``value`` is a bool (Python's, NumPy's or a torch one), which is not a number."""
    return isinstance(value, bool) or str(getattr(value, "dtype", "")) in ("bool", "torch.bool")


def nonnegative_real(value: Any, name: str) -> float:
    """``value`` as a float, if it is a finite real number of at least zero (a noise scale, a
    band).

    Args:
        value: A number, or a string that spells one.
        name: The argument's name, for the message.

    Returns:
        ``float(value)``.

    Raises:
        TypeError: Naming ``name``, for something that is not a number (``None``, say).
        ValueError: Naming ``name``, for a negative or non-finite value, or a string that is not
            a number.
    """
    try:
        number = float(value)
    except (TypeError, ValueError) as err:
        raise type(err)(f"{name} must be a real number, got {value!r}.") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {number!r}.")
    return number
