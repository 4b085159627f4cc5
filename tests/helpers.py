"""Small data generators and readers shared by the tests."""

from __future__ import annotations

import math
import shutil
import sqlite3

import torch

#: A two-parameter session and settings that never fit (random queries): fast session tests.
SESSION_PARAMS = [("x", 0.0, 1.0), ("y", -2.0, 3.0)]
SESSION_FAST = {"strategy": "random", "seed": 3, "refit_all_until": 0, "refit_every": 10**6}


def same_recommendation(a, b) -> bool:
    """Whether two :class:`~botorch_pref.loop.Recommendation` s are equal, exactly (its design
    is a tensor, which ``==`` of the tuples cannot compare); ``None`` equals only ``None``."""
    if a is None or b is None:
        return a is b
    return torch.equal(a.x, b.x) and (a.mean, a.std, a.index) == (b.mean, b.std, b.index)


def random_comparisons(
    n: int,
    m: int,
    d: int = 2,
    noise: float = 0.5,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    utility=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random designs in the unit cube and ``m`` noisy answers about random distinct pairs."""
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=gen, dtype=torch.float64)
    if utility is None:
        u = -((X - 0.3) ** 2).sum(-1) * 4.0
    else:
        u = utility(X)
    i = torch.randint(n, (m,), generator=gen)
    j = (i + torch.randint(1, n, (m,), generator=gen)) % n
    noisy = noise * torch.randn(m, 2, generator=gen, dtype=torch.float64)
    win = torch.where(u[i] + noisy[:, 0] > u[j] + noisy[:, 1], i, j)
    lose = torch.where(win == i, j, i)
    return X.to(dtype), torch.stack([win, lose], -1)


def optimizer_run(problem: str, seed: int, steps: int, scale: float = 0.1, **settings):
    """A :class:`~botorch_pref.PreferenceOptimizer` on the unit cube answered by a Gumbel user.

    Both are seeded ``seed`` (the protocol of ``run_replications``'s replication ``seed``).

    Returns:
        ``(optimizer, queries, winners, recommendations)``: the ``steps x q x d`` queries, the
        ``steps`` answers and the ``steps x d`` recommendations after each answer.
    """
    from botorch_pref import PreferenceOptimizer
    from botorch_pref.test_functions import get_utility
    from botorch_pref.users import SimulatedUser

    utility = get_utility(problem)
    d = utility.dim
    user = SimulatedUser(utility, noise="gumbel", scale=scale, seed=seed)
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).to(torch.float64)
    opt = PreferenceOptimizer(bounds, seed=seed, **settings)
    queries, winners, best = [], [], []
    for _ in range(steps):
        X = opt.ask()
        w = int(user.choose(X))
        opt.tell(X, w)
        queries.append(X)
        winners.append(w)
        best.append(opt.best().x)
    return opt, torch.stack(queries), torch.tensor(winners), torch.stack(best)


def snapshot(path) -> tuple:
    """Everything stored, read with plain SQL."""
    con = sqlite3.connect(path)
    out = tuple(
        tuple(con.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall())
        for t in ("sessions", "queries", "designs", "answers", "retractions")
    )
    con.close()
    return out


def assert_hyperparameters_close(batch, i: int, single, atol: float) -> None:
    """Member ``i`` of a batched model has the log lengthscales and log outputscale of
    ``single`` (a scaled kernel), to ``atol``."""
    torch.testing.assert_close(
        batch.covar_module.base_kernel.lengthscale[i].log(),
        single.covar_module.base_kernel.lengthscale.reshape(1, -1).log(),
        rtol=0,
        atol=atol,
    )
    torch.testing.assert_close(
        batch.covar_module.outputscale[i].log(),
        single.covar_module.outputscale.log(),
        rtol=0,
        atol=atol,
    )


def monte_carlo_evidence(model, log_likelihood, X: torch.Tensor) -> float:
    """log Z = log E_prior[p(data | f)] of ``model`` at the designs ``X``, by Monte Carlo from
    the prior (8 million seeded draws, in four rounds).

    Args:
        model: A ``PairwiseLaplaceGP`` with data about the designs ``X`` only.
        log_likelihood: ``(f, model) -> log p(data | f)`` for draws ``f`` (``N x n``), written
            independently of the library.
        X: The ``n x d`` designs.
    """
    n = X.shape[0]
    K = model.covar_module(X).to_dense().detach() + 1e-9 * torch.eye(n, dtype=X.dtype)
    L = torch.linalg.cholesky(K)
    g = torch.Generator().manual_seed(1)
    log_p = torch.cat(
        [
            log_likelihood((L @ torch.randn(n, 2_000_000, generator=g, dtype=X.dtype)).T, model)
            for _ in range(4)
        ]
    )
    return (torch.logsumexp(log_p, 0) - math.log(log_p.numel())).item()


def approximation_errors(model_of, log_likelihood, X: torch.Tensor) -> dict:
    """How far the Laplace and the EP posteriors at ``X`` are from the exact one.

    The exact posterior is estimated by importance sampling (1e6 seeded draws from the Laplace
    posterior, its covariance doubled). Utilities are identified up to a shift, so the errors
    are of the centred moments.

    Args:
        model_of: ``inference -> PairwiseLaplaceGP`` with data about the designs ``X`` only.
        log_likelihood: ``(f, model) -> log p(data | f)`` for draws ``f`` (``N x n``), written
            independently of the library.
        X: The ``n x d`` designs.

    Returns:
        ``{inference: (mean error, relative covariance error)}``.
    """
    n = X.shape[0]
    P = torch.eye(n, dtype=X.dtype) - 1.0 / n
    errors = {}
    for inference in ("laplace", "ep"):
        model = model_of(inference).eval()
        post = model.posterior(X)
        mean, cov = post.mean.squeeze(-1).detach(), post.distribution.covariance_matrix.detach()
        if inference == "laplace":
            K = model.covar_module(X).to_dense().detach() + 1e-9 * torch.eye(n, dtype=X.dtype)
            prior = torch.distributions.MultivariateNormal(torch.zeros(n, dtype=X.dtype), K)
            proposal = torch.distributions.MultivariateNormal(mean, 2.0 * cov)
            torch.manual_seed(0)
            f = proposal.sample((1_000_000,))
            log_w = log_likelihood(f, model) + prior.log_prob(f) - proposal.log_prob(f)
            w = torch.softmax(log_w, 0)
            exact_mean = (w.unsqueeze(-1) * f).sum(0)
            centred = f - exact_mean
            exact_cov = (w.unsqueeze(-1) * centred).T @ centred
        errors[inference] = (
            (P @ (mean - exact_mean)).abs().max().item(),
            (P @ (cov - exact_cov) @ P).abs().max().item() / (P @ exact_cov @ P).diag().max(),
        )
        torch.testing.assert_close(model.utility, mean)  # EP's utility is its posterior mean
    return errors


#: Debian's Chromium and its driver (``.ci/run`` installs them), or ``None``.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def assert_ep_closer(model_of, log_likelihood, X: torch.Tensor, ep_bounds, factors) -> None:
    """EP's (mean, covariance) errors (:func:`approximation_errors`, same arguments) are below
    ``ep_bounds`` and Laplace's are more than ``factors`` times EP's."""
    errors = approximation_errors(model_of, log_likelihood, X)
    pairs = zip(errors["ep"], errors["laplace"], ep_bounds, factors, strict=True)
    for ep, laplace, bound, factor in pairs:
        assert ep < bound, (ep, bound)
        assert laplace > factor * ep, (laplace, factor, ep)


def headless_chromium(*extra_args: str, logging: dict | None = None, prefs: dict | None = None):
    """Headless Chromium driven by selenium, as the browser tests launch it.

    Args:
        extra_args: Command-line switches besides the common headless ones.
        logging: selenium's ``goog:loggingPrefs`` (e.g. ``{"browser": "ALL"}``).
        prefs: Chromium preferences (e.g. JavaScript off).

    Returns:
        The driver, with a 120 s page-load timeout.
    """
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-extensions",
        *extra_args,
    ):
        options.add_argument(arg)
    if logging:
        options.set_capability("goog:loggingPrefs", logging)
    if prefs:
        options.add_experimental_option("prefs", prefs)
    driver = webdriver.Chrome(
        service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options
    )
    driver.set_page_load_timeout(120)
    return driver
