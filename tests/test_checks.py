"""botorch_pref.checks: what counts as a whole number."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from botorch_pref.checks import whole_number


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
