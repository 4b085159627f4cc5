"""LFPL's thread default: one intra-op thread on CPU unless the user chose, restored on exit."""

from __future__ import annotations

import pytest
import torch

from botorch_pref.lfpl.openmp import default_lfpl_threads, lfpl_threads


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


def test_reexec_only_for_the_command_line(clean_env, monkeypatch):
    import os

    from botorch_pref.lfpl import openmp

    calls = []
    monkeypatch.setattr(os, "execve", lambda *a: calls.append(a))
    monkeypatch.setattr(openmp.sys, "argv", ["pytest", "-q"])
    openmp.reexec_with_passive_openmp(["lfpl", "train"])
    assert calls == []
    monkeypatch.setattr(openmp.sys, "argv", ["botorch-pref", "lfpl", "train", "--data", "x"])
    openmp.reexec_with_passive_openmp(["lfpl", "train"])
    ((_exe, argv, env),) = calls
    assert argv[1:] == ["-m", "botorch_pref.cli", "lfpl", "train", "--data", "x"]
    assert env["OMP_WAIT_POLICY"] == "PASSIVE" and env[openmp.REEXEC_MARKER] == "1"
    for name, value in (("OMP_NUM_THREADS", "1"), (openmp.REEXEC_MARKER, "1")):
        monkeypatch.setenv(name, value)
        openmp.reexec_with_passive_openmp(["lfpl", "train"])
        monkeypatch.delenv(name)
    assert len(calls) == 1


def test_train_command_runs_with_a_passive_openmp_runtime(tmp_path, clean_env):
    import subprocess
    import sys

    data = tmp_path / "u.data"
    lines = [f"{u}\t{(u + d) % 6 + 1}\t4\t{u * 10 + d}\n" for u in range(1, 9) for d in range(3)]
    data.write_text("".join(lines))
    out = subprocess.run(
        [sys.executable, "-m", "botorch_pref.cli", "lfpl", "train", "--data", str(data),
         "--out", str(tmp_path / "m.pt"), "--epochs", "1", "--dim", "2", "--no-progress"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    assert "OMP_WAIT_POLICY=PASSIVE" in out
