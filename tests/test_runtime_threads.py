"""The model's and the loop's thread setting: one intra-op thread on small problems, restored
after the call, and PairwiseGP unharmed in the same process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
from botorch.fit import fit_gpytorch_mll

from botorch_pref import LaplaceEvidence, PairwiseLaplaceGP
from botorch_pref.runtime import (
    SMALL_PROBLEM_DESIGNS,
    get_model_threads,
    model_threads,
    problem_threads,
    set_model_threads,
)

from .helpers import random_comparisons

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def no_user_threads(monkeypatch):
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)


def test_fit_and_posterior_run_on_one_thread_and_restore(no_user_threads, monkeypatch):
    """Inside the evidence, its backward pass and the posterior, torch sees one thread; after
    the call, the count it had."""
    seen = []
    evidence = PairwiseLaplaceGP.laplace_evidence

    def spy(self):
        seen.append(torch.get_num_threads())
        value = evidence(self)
        value.register_hook(lambda grad: seen.append(torch.get_num_threads()))
        return value

    monkeypatch.setattr(PairwiseLaplaceGP, "laplace_evidence", spy)
    before = torch.get_num_threads()
    model = PairwiseLaplaceGP(*random_comparisons(20, 40, seed=1))
    fit_gpytorch_mll(LaplaceEvidence(model.likelihood, model))
    assert len(seen) > 2 and set(seen) == {1}
    assert torch.get_num_threads() == before
    with problem_threads(model.n) as inside:
        assert inside == 1 == torch.get_num_threads()
    assert torch.get_num_threads() == before


def test_setting_changes_the_count_and_large_problems_keep_torchs(no_user_threads):
    before = torch.get_num_threads()
    assert get_model_threads() == "auto"
    with problem_threads(SMALL_PROBLEM_DESIGNS + 1) as inside:
        assert inside == before
    with model_threads(None), problem_threads(5) as inside:
        assert inside == before
    with model_threads(3), problem_threads(5) as inside:
        assert inside == 3 == torch.get_num_threads()
    assert get_model_threads() == "auto" and torch.get_num_threads() == before
    with pytest.raises(ValueError, match="at least 1"):
        set_model_threads(0)
    with pytest.raises(TypeError, match="'auto', None or an int"):
        set_model_threads("two")
    assert get_model_threads() == "auto"


def test_the_users_environment_setting_stands(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    before = torch.get_num_threads()
    with problem_threads(5) as inside:
        assert inside == before


SCRIPT = textwrap.dedent(
    """
    import torch
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import PairwiseGP
    from botorch_pref import LaplaceEvidence, PairwiseLaplaceGP, PreferenceOptimizer
    from tests.helpers import random_comparisons

    before = torch.get_num_threads()
    X, C = random_comparisons(200, 600, seed=0)
    model = PairwiseLaplaceGP(X, C)
    fit_gpytorch_mll(LaplaceEvidence(model.likelihood, model))
    model.posterior(torch.rand(8, 2, 2, dtype=torch.float64))
    opt = PreferenceOptimizer(torch.tensor([[0.0, 0.0], [1.0, 1.0]]), seed=0)
    for _ in range(2):
        opt.tell(opt.ask(), 0)
    assert torch.get_num_threads() == before, (before, torch.get_num_threads())
    # the model's setting is the calling thread's: another thread keeps torch's count
    import threading
    from botorch_pref.runtime import problem_threads
    seen = []
    with problem_threads(10) as inside:
        probe = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        probe.start()
        probe.join()
    assert inside == 1 and seen == [before], (inside, seen, before)
    post = PairwiseGP(X, C).posterior(torch.rand(100, 2, 2, dtype=torch.float64))
    assert bool(torch.isfinite(post.mean).all())
    print("ok", before)
    """
)


def test_pairwise_gp_batched_posterior_still_works_after_our_calls():
    """The model's setting applies to the calling thread only, and restoring the count must
    not switch torch to an explicit thread count: after
    ``torch.set_num_threads(2)`` this torch build's MKL fails PairwiseGP's batched posterior
    ("Pivots given to lu_solve ..."). A fresh process, so that no other test's setting leaks in."""
    user = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")
    env = {k: v for k, v in os.environ.items() if k not in user}
    env["PYTHONPATH"] = ROOT
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("ok")


def _posterior_grads(model, X):
    """d(sum of mean and covariance)/d(X, raw lengthscale) of the model's posterior at X."""
    X = X.clone().requires_grad_(True)
    post = model.posterior(X)
    total = post.mean.sum() + post.distribution.covariance_matrix.sum()
    raw = model.covar_module.base_kernel.raw_lengthscale
    return total.detach(), torch.autograd.grad(total, [X, raw])


def test_posterior_backward_runs_on_the_models_threads_and_restores(no_user_threads, monkeypatch):
    """An acquisition optimiser differentiates the posterior after ``posterior`` returned: that
    backward pass, too, runs on one thread for a small problem, and the count is restored."""
    import botorch_pref.models.posterior as posterior_module

    seen = []
    predict = posterior_module.laplace_predict

    def spy(*args, **kwargs):
        mean, cov = predict(*args, **kwargs)
        if mean.requires_grad:
            mean.register_hook(lambda grad: seen.append(torch.get_num_threads()))
        return mean, cov

    monkeypatch.setattr(posterior_module, "laplace_predict", spy)
    model = PairwiseLaplaceGP(*random_comparisons(20, 40, seed=2))
    with model_threads(2):  # the caller's count differs from the model's below
        before = torch.get_num_threads()
        with model_threads(1):
            _posterior_grads(model, torch.rand(3, 2, 2, dtype=torch.float64))
        assert seen == [1]
        assert torch.get_num_threads() == before


def test_threaded_backward_gives_the_plain_gradients(no_user_threads, monkeypatch):
    """Values and gradients (in X and in a hyperparameter) are those of the unwrapped graph;
    under ``no_grad`` nothing is wrapped."""
    import botorch_pref.models.posterior as posterior_module

    model = PairwiseLaplaceGP(*random_comparisons(20, 40, seed=3))
    X = torch.rand(4, 2, 2, dtype=torch.float64)
    value, grads = _posterior_grads(model, X)
    monkeypatch.setattr(posterior_module, "threaded_backward", lambda fn, inputs, *_: fn(*inputs))
    plain_value, plain_grads = _posterior_grads(model, X)
    torch.testing.assert_close(value, plain_value)
    for got, want in zip(grads, plain_grads, strict=True):
        torch.testing.assert_close(got, want)
    monkeypatch.undo()
    with torch.no_grad():
        mean = model.posterior(X.requires_grad_(True)).mean
    assert mean.grad_fn is None
