r"""Where a suite run's questions go: the log10 regret of the designs it asks.

The suite's main table scores the recommendation; this module scores the questions themselves.
For each acquisition query, :func:`log_regret_asked` averages the log10 regret of its options
(floored as the regret curves are), and :func:`questions` tabulates the mean of that over
blocks of queries for two sets of runs on the same seeds: ours against BoTorch's pipeline
(``pbo.py --tabulate``), or a lever against the defaults (``pbo.py --compare``). A curve that
falls late in a run means the questions close in on the optimum; one that stays high means they
keep exploring, or keep asking about a basin the recommendation has left.
"""

from __future__ import annotations

import statistics

import torch

from benchmarks.suite_stats import fmt_mean_se
from botorch_pref.loop.replications import log10_regret
from botorch_pref.test_functions import get_utility


def log_regret_asked(problem: str, designs: torch.Tensor) -> torch.Tensor:
    """The mean over each query's options of their log10 regret.

    Args:
        problem: The utility's name.
        designs: ``... x Q x q x d`` asked designs in the unit cube.

    Returns:
        A ``... x Q`` float64 tensor.
    """
    regret = get_utility(problem).regret(designs.to(torch.float64))
    return log10_regret(regret).mean(-1)


def _asked_by_seed(cell: dict | None, queries: int) -> dict[int, list[float]]:
    """A cell's recorded curves keyed by seed (runs without them, ``None``, left out)."""
    if not cell or "log_regret_asked" not in cell:
        return {}
    pairs = zip(cell["seeds"], cell["log_regret_asked"], strict=True)
    return {s: c for s, c in pairs if c is not None and len(c) >= queries}


def _block_mean(curves: dict[int, list[float]], seeds: list[int], i: int, j: int) -> float:
    """The mean over ``seeds`` of each curve's mean over queries ``i`` to ``j - 1``."""
    return statistics.fmean(statistics.fmean(curves[s][i:j]) for s in seeds)


def questions(pairs: dict[tuple[str, str], tuple[dict | None, dict | None]], queries: int,
              block: int = 10, labels: tuple[str, str] = ("ours", "BoTorch")) -> str:  # fmt: skip
    """The table (markdown) of where two sets of runs' questions go.

    Args:
        pairs: ``(problem, strategy)`` to the two cells compared (each with ``seeds`` and
            ``log_regret_asked``, one curve per seed, ``None`` for a run that did not record
            its designs; a cell may be ``None``).
        queries: The acquisition queries per run.
        block: Queries per column.
        labels: The two sides' names.

    Returns:
        Per problem and strategy, over the seeds both sides recorded: the mean of
        :func:`log_regret_asked` in each block, first side / second side, and the paired
        difference in the last block with its standard error. ``""`` if no pair shares a seed.
    """
    spans = [(a, min(a + block, queries)) for a in range(0, queries, block)]
    head = "| problem | strategy | seeds | " + " | ".join(f"queries {a + 1}-{b}" for a, b in spans)
    head += f" | {labels[0]} - {labels[1]}, queries {spans[-1][0] + 1}-{queries} |"
    lines = []
    for (problem, strategy), (x, y) in pairs.items():
        a, b = _asked_by_seed(x, queries), _asked_by_seed(y, queries)
        seeds = sorted(a.keys() & b.keys())
        if not seeds:
            continue
        means = [f"{_block_mean(a, seeds, i, j):+.2f} / {_block_mean(b, seeds, i, j):+.2f}"
                 for i, j in spans]  # fmt: skip
        i, j = spans[-1]
        diff = [statistics.fmean(a[s][i:j]) - statistics.fmean(b[s][i:j]) for s in seeds]
        lines.append(f"| {problem} | {strategy} | {len(seeds)} | {' | '.join(means)} | "
                     f"{fmt_mean_se(diff)} |")  # fmt: skip
    if not lines:
        return ""
    title = f"Where the questions go: mean log10 regret of the designs asked, {' / '.join(labels)}"
    return "\n".join([title, head, "|" + "---|" * (head.count("|") - 1), *lines])
