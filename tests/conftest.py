"""Shared fixtures and markers."""

from __future__ import annotations

import warnings

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def quiet_warnings():
    """Silence every warning for the test (a module opts in with ``pytestmark``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
