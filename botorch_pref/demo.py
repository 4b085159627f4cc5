r"""The ``botorch-pref demo`` command: preferential BO against a simulated user.

A simulated user with a known utility (Branin by default, on its native box
:math:`[-5, 10] \times [0, 15]`) answers pairwise queries with Gumbel noise calibrated so that
two designs from the top 1% are answered wrongly 20% of the time (the qEUBO protocol).
:class:`~botorch_pref.loop.PreferenceOptimizer` asks, the user answers, and after every answer
the recommendation (the compared design with the highest posterior mean) is scored by its regret

.. math::

    r = f^\star - f(x^\star) \ge 0.

The command prints one table row per query (query number, regret, :math:`\log_{10}` regret,
seconds for ask + tell + recommendation) under a progress bar, and writes a PNG: the regret curve
and, for 1-D and 2-D problems, the learned posterior mean next to the true utility.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import torch
from torch import Tensor
from tqdm import tqdm

from botorch_pref.loop import STRATEGIES, PreferenceOptimizer, Recommendation
from botorch_pref.runtime import entry_threads
from botorch_pref.test_functions import Utility, get_utility
from botorch_pref.users import SimulatedUser, calibrate_noise

__all__ = ["DemoResult", "add_arguments", "plot_demo", "run_demo"]

DEFAULT_OUTPUT = "botorch-pref-demo.png"


@dataclass
class DemoResult:
    """What :func:`run_demo` measured.

    Attributes:
        problem: The utility's name.
        strategy: The acquisition strategy.
        scale: The user's calibrated noise scale.
        n_initial: Random queries before the acquisition took over.
        regrets: Regret of the recommendation after each query.
        seconds: Seconds per query (ask, tell and recommendation).
        best: The final recommendation (design in user units).
        optimizer: The optimiser, with its data and model.
        figure: The PNG written, or ``None``.
    """

    problem: str
    strategy: str
    scale: float
    n_initial: int
    regrets: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    best: Recommendation | None = None
    optimizer: PreferenceOptimizer | None = None
    figure: Path | None = None

    @property
    def final_regret(self) -> float:
        """The regret after the last query."""
        return self.regrets[-1]


def _log10(r: float) -> float:
    return math.log10(r) if r > 0 else -math.inf


def _bounds_of(utility: Utility) -> Tensor:
    """The utility's native box (``2 x d``) if it has one, else the unit cube."""
    b = getattr(utility, "bounds", None)
    if b is not None:
        return b.to(torch.float64).clone()
    return torch.stack([torch.zeros(utility.dim), torch.ones(utility.dim)]).to(torch.float64)


def _resolve_device(device: str | torch.device | None) -> torch.device:
    try:
        dev = torch.device("cpu" if device is None else device)
    except RuntimeError as err:
        raise ValueError(f"Unknown device {device!r}: {err}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("CUDA was requested (--device cuda) but is not available.")
    return dev


def run_demo(
    problem: str = "branin",
    strategy: str = "eubo",
    queries: int = 25,
    n_initial: int | None = None,
    error_rate: float = 0.2,
    noise: str = "gumbel",
    seed: int = 0,
    model: str = "laplace",
    device: str | torch.device | None = None,
    output: str | Path | None = DEFAULT_OUTPUT,
    progress: bool = True,
    stream: TextIO | None = None,
) -> DemoResult:
    """Run preferential BO against a calibrated simulated user and report the regret.

    Args:
        problem: A utility name (:func:`~botorch_pref.test_functions.get_utility`).
        strategy: ``"eubo"``, ``"qeubo"``, ``"champion-challenger"`` or ``"random"``.
        queries: Queries after the initial random ones.
        n_initial: Initial random queries (default: the optimiser's, ``min(4 d, 20)``).
        error_rate: The user's error rate on pairs of top-1% designs (sets the noise scale).
        noise: ``"gumbel"`` or ``"probit"``.
        seed: Seed of the optimiser and of the user's answers.
        model: ``"laplace"`` or ``"pairwisegp"``.
        device: Device of the model (default CPU).
        output: PNG path (``.png`` is added to a name without a suffix), or ``None`` for no
            figure.
        progress: Show a progress bar (on stderr).
        stream: Where the table goes (default stdout).

    Returns:
        A :class:`DemoResult`.

    Raises:
        ValueError: For bad options, or an ``output`` that cannot be written (checked before
            the run).
    """
    stream = sys.stdout if stream is None else stream
    if int(queries) != queries or queries < 0:
        raise ValueError(f"queries must be a non-negative integer, got {queries!r}.")
    figure = None if output is None else _figure_path(output)
    dev = _resolve_device(device)
    utility = get_utility(problem)
    scale = calibrate_noise(utility, error_rate=error_rate, noise=noise)
    user = SimulatedUser(utility, noise=noise, scale=scale, seed=seed)
    opt = PreferenceOptimizer(
        _bounds_of(utility).to(dev),
        strategy=strategy,
        n_initial=n_initial,
        model=model,
        device=dev,
        seed=seed,
    )
    total = opt.policy.n_initial + int(queries)
    result = DemoResult(utility.name, strategy, scale, opt.policy.n_initial, optimizer=opt)
    print(
        f"{utility.name} (d={utility.dim}), {strategy}, {noise} user at {error_rate:.0%} error "
        f"(scale {scale:.4g}), {opt.policy.n_initial} random + {queries} queries, seed {seed}",
        file=stream,
    )
    print(f"{'query':>5}  {'regret':>10}  {'log10':>7}  {'seconds':>7}", file=stream)
    _ask_and_answer(result, user, utility, total, progress, stream)
    result.best = opt.best() if total else None
    if result.best is not None:
        x = ", ".join(f"{v:.4g}" for v in result.best.x.tolist())
        print(
            f"recommended design ({x}): utility {utility.optimal_value - result.final_regret:.4g}"
            f" (optimum {utility.optimal_value:.4g}), median {_median(result.seconds):.2f} s per "
            "query",
            file=stream,
        )
    if figure is not None and total:
        try:
            result.figure = plot_demo(result, utility, figure)
        except OSError as err:  # a read-only file system, a full disk
            raise ValueError(f"Cannot write the figure {figure}: {err.strerror or err}") from None
        print(f"figure written to {result.figure}", file=stream)
    return result


def _figure_path(output: str | Path) -> Path:
    """The file the figure will be written to, checked before the run.

    Args:
        output: The path asked for; matplotlib saves a name without a suffix as ``name.png``.

    Returns:
        The path of the file written.

    Raises:
        ValueError: When it is a directory, or its directory cannot be made or written in.
    """
    path = Path(output)
    if path.name and not path.suffix:
        path = path.with_name(path.name.rstrip(".") + ".png")
    try:
        if not path.name or path.is_dir():
            raise ValueError(f"--output {str(output)!r} is a directory; name the PNG file.")
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise ValueError(
                f"Cannot write the figure to {path}: {parent} is not a writable directory."
            )
    except OSError as err:
        raise ValueError(f"Cannot write the figure to {path}: {err.strerror or err}") from None
    return path


def _ask_and_answer(
    result: DemoResult,
    user: SimulatedUser,
    utility: Utility,
    total: int,
    progress: bool,
    stream: TextIO,
) -> None:
    """Run ``total`` queries of ``result.optimizer``; one table row (and regret) per answer."""
    opt = result.optimizer
    bar = tqdm(total=total, desc="queries", unit="q", disable=not progress, file=sys.stderr)
    try:
        for k in range(1, total + 1):
            start = time.perf_counter()
            X = opt.ask()
            opt.tell(X, int(user.choose(opt.to_unit(X))))
            best = opt.best()
            seconds = time.perf_counter() - start
            regret = float(utility.regret(opt.to_unit(best.x).clamp(0.0, 1.0)))
            result.regrets.append(regret)
            result.seconds.append(seconds)
            line = f"{k:>5}  {regret:>10.4g}  {_log10(regret):>7.3f}  {seconds:>7.2f}"
            if k == opt.policy.n_initial:
                line += "  (end of random queries)"
            if progress:
                bar.write(line, file=stream)
                bar.update(1)
            else:
                print(line, file=stream)
    finally:
        bar.close()


def _median(values: list[float]) -> float:
    return float(torch.tensor(values).median()) if values else math.nan


def plot_demo(result: DemoResult, utility: Utility, path: Path) -> Path:
    """Write the demo's figure: regret curve, and the learned vs true utility in 1-D and 2-D.

    Uses matplotlib's object-oriented API with the Agg canvas (no display, no global state).

    Args:
        result: The demo's result (with its optimiser).
        utility: The true utility.
        path: PNG path.

    Returns:
        The path written.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - matplotlib is an optional dependency
        raise ValueError(
            "Plotting needs matplotlib (pip install 'botorch-pref[plot]'); or pass --no-plot."
        ) from None
    d = utility.dim
    panels = {1: 2, 2: 3}.get(d, 1)
    fig = Figure(figsize=(5.0 * panels, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, panels, squeeze=False)[0]
    _plot_regret(axes[0], result)
    if d == 1:
        _plot_1d(axes[1], result, utility)
    elif d == 2:
        _plot_2d(axes[1], axes[2], result, utility)
    fig.suptitle(
        f"{result.problem}: {result.strategy}, noise scale {result.scale:.3g}", fontsize=11
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _plot_regret(ax, result: DemoResult) -> None:
    k = list(range(1, len(result.regrets) + 1))
    floor = 1e-12
    ax.plot(k, [max(r, floor) for r in result.regrets], marker=".", color="C0")
    ax.set_yscale("log")
    ax.axvline(result.n_initial + 0.5, color="0.6", linestyle="--", label="end of random queries")
    ax.set_xlabel("query")
    ax.set_ylabel("regret of the recommendation")
    ax.set_title("regret")
    ax.legend(loc="upper right", fontsize=8)


def _standardise(v: Tensor) -> tuple[Tensor, float, float]:
    mean, std = float(v.mean()), float(v.std()) or 1.0
    return (v - mean) / std, mean, std


def _plot_1d(ax, result: DemoResult, utility: Utility) -> None:
    opt = result.optimizer
    lo, hi = opt.bounds[:, 0].tolist()
    grid = torch.linspace(lo, hi, 400, dtype=torch.float64).unsqueeze(-1)
    true, _, _ = _standardise(utility(opt.to_unit(grid).clamp(0, 1).cpu()))
    mean, std = (t.cpu() for t in opt.predict(grid))
    z, _, s = _standardise(mean)
    x = grid.squeeze(-1).numpy()
    ax.plot(x, true.numpy(), color="k", label="true utility")
    ax.plot(x, z.numpy(), color="C1", label="posterior mean")
    ax.fill_between(x, (z - 2 * std / s).numpy(), (z + 2 * std / s).numpy(), color="C1", alpha=0.2)
    pts = opt.datapoints.cpu().squeeze(-1)
    ax.plot(pts.numpy(), [ax.get_ylim()[0]] * len(pts), "|", color="C0", label="compared")
    ax.axvline(float(result.best.x), color="C2", linestyle=":", label="recommended")
    ax.set_title("utility (standardised)")
    ax.set_xlabel("x")
    ax.legend(fontsize=8)


def _plot_2d(ax_true, ax_mean, result: DemoResult, utility: Utility) -> None:
    opt = result.optimizer
    b = opt.bounds.cpu()
    n = 60
    g0 = torch.linspace(float(b[0, 0]), float(b[1, 0]), n, dtype=torch.float64)
    g1 = torch.linspace(float(b[0, 1]), float(b[1, 1]), n, dtype=torch.float64)
    G0, G1 = torch.meshgrid(g0, g1, indexing="xy")
    grid = torch.stack([G0.reshape(-1), G1.reshape(-1)], dim=-1)
    true = utility(opt.to_unit(grid).clamp(0, 1).cpu()).reshape(n, n)
    mean, _ = opt.predict(grid)
    pts = opt.datapoints.cpu()
    best = result.best.x.cpu()
    optima = None
    if utility.optimizers is not None:
        optima = opt.from_unit(utility.optimizers).cpu()
    for ax, values, title in (
        (ax_true, true, "true utility"),
        (ax_mean, mean.cpu().reshape(n, n), "posterior mean"),
    ):
        cs = ax.contourf(G0.numpy(), G1.numpy(), values.numpy(), levels=30, cmap="viridis")
        ax.figure.colorbar(cs, ax=ax)
        ax.scatter(pts[:, 0], pts[:, 1], s=10, c="w", edgecolors="k", linewidths=0.4)
        if optima is not None:
            ax.scatter(optima[:, 0], optima[:, 1], marker="x", c="r", s=40, label="optima")
        ax.scatter([best[0]], [best[1]], marker="*", c="orange", s=160, edgecolors="k",
                   label="recommended")  # fmt: skip
        ax.set_title(title)
        ax.set_xlabel("x1")
        ax.set_ylabel("x2")
    ax_true.legend(loc="upper right", fontsize=8)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the arguments of ``botorch-pref demo`` to its parser."""
    p.add_argument(
        "--problem",
        default="branin",
        help="the utility the simulated person maximises: a name of "
        "botorch_pref.test_functions.get_utility, e.g. branin, hartmann6, ackley6, levy4",
    )
    p.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="eubo",
        help="how questions are chosen: eubo (the pair whose better option is expected to be "
        "best), qeubo (its Monte-Carlo form), champion-challenger (the recommendation against "
        "the design most likely to beat it), random",
    )
    p.add_argument(
        "--queries", type=int, default=25, help="questions (pairs) asked after the random ones"
    )
    p.add_argument(
        "--initial",
        type=int,
        default=None,
        help="random questions first (default: min(4 d, 20), d the problem's dimension)",
    )
    p.add_argument(
        "--error-rate",
        type=float,
        default=0.2,
        help="the fraction of pairs of top-1%% designs the simulated person answers wrongly "
        "(sets the noise scale)",
    )
    p.add_argument(
        "--noise",
        choices=("gumbel", "probit"),
        default="gumbel",
        help="the person's answer noise: gumbel (a logit choice) or probit (normal noise)",
    )
    p.add_argument(
        "--model",
        choices=("laplace", "pairwisegp"),
        default="laplace",
        help="the preference model: laplace (PairwiseLaplaceGP with the loop's defaults) or "
        "pairwisegp (BoTorch's PairwiseGP)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the loop and of the person")
    p.add_argument("--device", default="cpu", help="torch device of the model, e.g. cpu or cuda")
    p.add_argument("--output", default=DEFAULT_OUTPUT, help="path of the PNG figure")
    p.add_argument(
        "--plot",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="write the figure (needs matplotlib)",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="show a progress bar (never when stderr is not a terminal)",
    )
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    """The command: :func:`run_demo` under the entry points' thread default.

    The default (one intra-op thread on the CPU, see :mod:`botorch_pref.runtime`) is not
    applied to BoTorch's ``PairwiseGP``, whose batched posteriors fail on some CPU builds after
    ``torch.set_num_threads``.
    """
    same = ("problem", "strategy", "queries", "error_rate", "noise", "seed", "model")
    device = _resolve_device(args.device)
    threads = None if args.model == "pairwisegp" else "auto"
    with entry_threads(threads, device):
        run_demo(
            **{name: getattr(args, name) for name in same},
            device=device,
            n_initial=args.initial,
            output=args.output if args.plot else None,
            # a bar's frames only clutter a log or a pipe
            progress=args.progress and sys.stderr.isatty(),
        )
    return 0
