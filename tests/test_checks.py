"""botorch_pref.checks: what counts as a whole number."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from botorch_pref.checks import strict_flag, strict_int, whole_number


@pytest.mark.parametrize("value", [3, 3.0, np.int64(3), np.float32(3.0), torch.tensor(3)])
def test_whole_numbers_are_ints(value):
    out = whole_number(value, "n", 0)
    assert out == 3 and type(out) is int


@pytest.mark.parametrize(
    "value",
    [2.5, True, np.True_, torch.tensor(True), "3", b"3", None, math.nan, math.inf, [3],
     torch.tensor([1, 2])],
)  # fmt: skip
def test_anything_else_is_refused_by_name(value):
    with pytest.raises(ValueError, match=r"^n must be an integer, got "):
        whole_number(value, "n")


@pytest.mark.parametrize(
    ("minimum", "kind"),
    [(0, "a non-negative integer"), (1, "a positive integer"), (2, "an integer >= 2")],
)
def test_the_message_names_the_least_value(minimum, kind):
    assert whole_number(minimum, "n", minimum) == minimum
    with pytest.raises(ValueError, match=f"n must be {kind}, got {minimum - 1}"):
        whole_number(minimum - 1, "n", minimum)


class _LayerError(ValueError):
    """A caller's own error type."""


@pytest.mark.parametrize(
    ("check", "value"),
    [(whole_number, 2.5), (strict_int, 2.0), (strict_int, True), (strict_flag, "False")],
)
def test_a_check_raises_the_error_its_caller_names(check, value):
    with pytest.raises(_LayerError, match=r"^n must be "):
        check(value, "n", error=_LayerError)
    with pytest.raises(ValueError, match=r"^n must be ") as raised:
        check(value, "n")
    assert type(raised.value) is ValueError


@pytest.mark.parametrize(
    ("value", "flag"),
    [(True, True), (False, False), (None, False), (0, False), (1, True), (np.True_, True),
     (torch.tensor(False), False)],
)  # fmt: skip
def test_flags_are_bools_or_zero_or_one(value, flag):
    assert strict_flag(value, "tie") is flag


@pytest.mark.parametrize("value", ["False", "yes", 2, [1], torch.tensor([1, 0]), 0.5])
def test_anything_else_is_not_a_flag(value):
    with pytest.raises(ValueError, match="tie must be True or False"):
        strict_flag(value, "tie")
