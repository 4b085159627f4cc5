"""LFPL's thread default: one intra-op thread on CPU unless the user chose, restored on exit."""

from __future__ import annotations

import pytest
import torch

from botorch_pref.lfpl.runtime import default_lfpl_threads, lfpl_threads


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_default_is_one_thread_on_cpu_only(clean_env):
    assert default_lfpl_threads("cpu") == 1
    assert default_lfpl_threads(None) == 1
    assert default_lfpl_threads("cuda") is None


@pytest.mark.parametrize(
    ("name", "value"),
    [("OMP_NUM_THREADS", "2"), ("MKL_NUM_THREADS", "3"), ("OMP_WAIT_POLICY", "passive")],
)
def test_user_settings_win(clean_env, name, value):
    clean_env.setenv(name, value)
    assert default_lfpl_threads("cpu") is None


def test_context_sets_and_restores(clean_env):
    before = torch.get_num_threads()
    with lfpl_threads("auto", "cpu") as n:
        assert n == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with lfpl_threads(None) as n:
        assert n == before
    with pytest.raises(RuntimeError), lfpl_threads(1):
        raise RuntimeError("restored even on errors")
    assert torch.get_num_threads() == before
