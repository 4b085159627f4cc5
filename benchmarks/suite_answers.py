r"""The suite's answers axis (``pbo.py --suite --answers ...``): what each answer is worth.

Arms (:data:`ARMS`), each the loop with one answer format and everything else the same:

* ``binary``: "which is better" (the default loop);
* ``graded3``, ``graded5``, ``graded7``: a pair's winner and how much better it is on a scale of
  3, 5 or 7 levels, "about the same" in the middle (``answers="graded", levels=k``);
* ``ratings5``: "which is better" plus a rating of each option on 5 levels (``ratings=5``);
* ``graded5-noisy``: 5-level grades from a person whose grades are twice as noisy as their
  direction (``grade_noise=2``, :func:`~botorch_pref.loop.run_replications`): a robustness row.

Paired by seed with common random numbers: replication ``r`` of every arm has the optimiser seed
``seed + r`` (the same random initial queries) and a user seeded ``seed + r`` whose direction is
drawn from the same noise stream in every arm (graded users take the binary user's draw for the
direction, their strength and rating noise come from a second stream), so arm minus binary, seed
by seed, is a paired difference. The user's thresholds and cut points are calibrated on the
problem (:func:`~botorch_pref.users.calibrate_grades`,
:func:`~botorch_pref.users.calibrate_ratings`).
BoTorch's pipeline (``benchmarks/suite_anchor.py``) has binary answers only; every arm is compared
with it on the same seeds. Graded answers and ratings need the sequential back end (the batched
one cannot fit the likelihood's shared thresholds), so ``--backend auto`` runs every arm of such
a study sequentially, binary included, to compare like with like.

:func:`answers_table` prints, per problem and arm: mean log10 regret after ``Q`` acquisition
queries, the paired difference to binary answers and to BoTorch's pipeline (mean +- standard
error over seeds), after how many questions the arm's mean curve reaches BoTorch's ``Q``-answer
figure and stays there, and seconds per query with its ratio to binary answers'; then the means
over problems.
"""

from __future__ import annotations

import statistics

from benchmarks.suite_stats import fmt_mean_se

#: The answer formats of the axis: name -> (the loop's settings, the users' grade noise).
ARMS: dict[str, tuple[dict, float]] = {
    "binary": ({}, 1.0),
    "graded3": ({"answers": "graded", "levels": 3}, 1.0),
    "graded5": ({"answers": "graded", "levels": 5}, 1.0),
    "graded7": ({"answers": "graded", "levels": 7}, 1.0),
    "ratings5": ({"ratings": 5}, 1.0),
    "graded5-noisy": ({"answers": "graded", "levels": 5}, 2.0),
}
#: Separates a strategy from its arm in a cell's label (``"eubo/graded5"``).
SEP = "/"


def label(strategy: str, arm: str) -> str:
    """A result cell's label: the strategy alone for binary answers, else ``strategy/arm``."""
    return strategy if arm == "binary" else f"{strategy}{SEP}{arm}"


def split(cell_label: str) -> tuple[str, str]:
    """``(strategy, arm)`` of a cell's label (:func:`label`)."""
    strategy, _, arm = cell_label.partition(SEP)
    return strategy, arm or "binary"


def backend(arms: list[str], given: str) -> str:
    """The back end of a study of ``arms``: ``given``, or for ``"auto"`` the batched one when
    every arm has binary answers and the sequential one otherwise."""
    if given != "auto":
        return given
    return "batched" if all(not ARMS[a][0] for a in arms) else "sequential"


def answers_table(results: dict, queries: int) -> str:
    """The answers axis' table (markdown): one row per problem, strategy and arm.

    Args:
        results: ``{problem: {label: {"ours": ..., "anchor": ...}}}`` of the suite.
        queries: The acquisition queries ``Q`` the figures are taken after.

    Returns:
        The table, then per arm the means over problems of its paired differences.
    """
    from benchmarks.suite import CHECKPOINTS, match_cell, paired  # the suite's own

    ks = [k for k in CHECKPOINTS if k <= queries and k != queries] + [queries]
    head = (
        f"| problem | strategy | answers | R | ours @{queries} | "
        + " | ".join(f"- binary @{k}" for k in ks)
        + f" | - BoTorch @{queries} | matches BoTorch @{queries} after | s/query | vs binary |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    means: dict[str, list[tuple[float, float]]] = {}
    for problem, cells in results.items():
        for name, cell in cells.items():
            strategy, arm = split(name)
            ours, anchor = cell["ours"], cell.get("anchor")
            base = cells.get(strategy, {}).get("ours")
            against = [paired(ours, base, k) if base and arm != "binary" else [] for k in ks]
            vs_binary = against[-1]
            vs_botorch = paired(ours, anchor, queries) if anchor else []
            match = match_cell(ours, anchor, queries) if vs_botorch else "-"
            ratio = "-"
            if base and arm != "binary":
                ratio = f"{ours['seconds_per_query'] / base['seconds_per_query']:.2f}x"
            final = [c[queries] for c in ours["log_regret"]]
            lines.append(
                f"| {problem} | {strategy} | {arm} | {len(ours['seeds'])} | "
                f"{fmt_mean_se(final)} | {' | '.join(map(fmt_mean_se, against))} | "
                f"{fmt_mean_se(vs_botorch)} | "
                f"{match} | {ours['seconds_per_query']:.2f} | {ratio} |"
            )
            if vs_binary or vs_botorch:
                nan = float("nan")
                means.setdefault(name, []).append(
                    (
                        statistics.fmean(vs_binary) if vs_binary else nan,
                        statistics.fmean(vs_botorch) if vs_botorch else nan,
                    )
                )
    for name, pairs in means.items():
        a = statistics.fmean(p[0] for p in pairs)
        b = statistics.fmean(p[1] for p in pairs)
        binary = "" if split(name)[1] == "binary" else f"{a:+.3f} vs binary, "
        lines.append(
            f"mean over {len(pairs)} problems @{queries}, {name}: {binary}{b:+.3f} vs BoTorch"
        )
    return "\n".join(lines)
