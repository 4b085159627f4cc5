"""The power-law interaction generator."""

from __future__ import annotations

import pytest
import torch

from botorch_pref.lfpl import power_law_interactions


def test_power_law_interactions_shape_skew_and_seed():
    data, truth = power_law_interactions(400, 200, 8000, dim=4, seed=3)
    again, _ = power_law_interactions(400, 200, 8000, dim=4, seed=3)
    assert torch.equal(data.keys, again.keys)
    assert (truth.n_rows, truth.n_cols, truth.dim) == (400, 200, 4)
    counts, pop = data.user_counts(), data.item_counts()
    assert int(counts.min()) >= 1 and int(counts.max()) <= 199
    assert 0.7 * 8000 < len(data) <= 8000 + 400
    # Skewed: the top 10% of users and of items hold far more than 10% of the interactions.
    assert counts.sort(descending=True).values[:40].sum() > 0.3 * len(data)
    assert pop.sort(descending=True).values[:20].sum() > 0.25 * len(data)
    flat, _ = power_law_interactions(400, 200, 8000, user_exponent=0.0, item_exponent=0.0)
    assert flat.user_counts().max() < counts.max()


def test_power_law_interactions_bad_arguments():
    with pytest.raises(ValueError, match="n_items must be at least 2, got 1"):
        power_law_interactions(10, 1, 5)
    with pytest.raises(ValueError, match="scale must be positive and finite"):
        power_law_interactions(10, 5, 5, scale=float("nan"))
