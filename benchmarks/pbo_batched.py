r"""Batched PBO replications next to the sequential loop (``benchmarks/pbo.py --batched``).

For each problem and strategy, the same ``R`` replications (seeds ``seed .. seed + R - 1`` for the
optimiser and the user, the qEUBO protocol of ``benchmarks/pbo.py``) run twice in one process:

* batched: :func:`botorch_pref.experiments.run_replications`, all replications in lockstep on one
  batched :class:`~botorch_pref.PairwiseLaplaceGP` (``--device``, ``--dtype``);
* sequential: the same function with ``backend="sequential"``: one model per replication, one
  after another, on the CPU in float64 -- exactly the run of
  :class:`~botorch_pref.PreferenceOptimizer` with that seed -- with the same settings (the
  optimiser's defaults, and the protocol's ``n_initial = 4 d``).

Printed: mean log10 regret +- standard error after 25 and 50 queries for both, how far apart the
two mean regret curves are query by query (in standard errors of their difference), total wall time,
seconds per query per replication, and the speed-up (sequential wall / batched wall). Timing all
sequential replications of a large ``R`` takes long; ``--sequential-replications K`` times the
first ``K`` and scales their wall time by ``R / K`` (the sequential loop's cost is linear in the
number of replications), which the table marks as extrapolated.

``--choice-study`` compares, per question, qEUBO with ``q = 4`` answers modelled as choices
(:class:`~botorch_pref.likelihoods.Ranking`, which models choices), the same answers decomposed
into the winner beating each other option (probit pairs), and ``q = 2`` (all batched, same
seeds and users).

Examples::

    python -m benchmarks.pbo --choice-study --problems hartmann6 --replications 8
    python -m benchmarks.pbo --batched --problems hartmann6 --strategies eubo \
        --replications 32 --queries 50
    python -m benchmarks.pbo --batched --problems hartmann6 --strategies eubo \
        --replications 256 --sequential-replications 8 --device cuda --dtype float32
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
from torch import Tensor

from benchmarks.suite_stats import fmt_mean_se
from botorch_pref.loop import run_replications
from botorch_pref.test_functions import get_utility
from botorch_pref.users import calibrate_noise


def _curves_agree(batched: Tensor, sequential: Tensor) -> str:
    r"""How far apart two sets of log10 regret curves (``R x T``) are, query by query.

    The difference of the mean curves at each query, in units of its standard error
    (:math:`\sqrt{se_b^2 + se_s^2}`); printed: the largest such z, and the share of queries with
    :math:`|z| \le 1` and :math:`|z| \le 2` (about 68% and 95% if the curves agree).
    """
    if min(batched.shape[0], sequential.shape[0]) < 2:
        return "not compared (standard errors need two replications on each side)"
    diff = batched.mean(0) - sequential.mean(0)
    se = (batched.var(0) / batched.shape[0] + sequential.var(0) / sequential.shape[0]).sqrt()
    z = (diff / se.clamp_min(1e-12)).abs()
    return (
        f"max |z| {float(z.max()):.2f}; |z| <= 1 at {float((z <= 1).double().mean()):.0%} "
        f"and <= 2 at {float((z <= 2).double().mean()):.0%} of {z.numel()} queries"
    )


def _replications(args, problem, strategy, R, scale, backend, **kw):
    """``run_replications`` with the protocol's settings; the result and its wall seconds."""
    d = get_utility(problem).dim
    device = torch.device(kw.pop("device", "cpu"))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    res = run_replications(
        problem, strategy, R, args.queries, q=args.q, scale=scale, seed=args.seed,
        n_initial=4 * d, backend=backend, device=device, **kw,
    )  # fmt: skip
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return res, time.perf_counter() - t0


def run(args: argparse.Namespace) -> int:
    """Run the batched benchmark for ``pbo.py --batched``; print and save the table."""
    dtype = {"float64": torch.float64, "float32": torch.float32}[args.dtype]
    R = args.replications
    K = min(args.sequential_replications or R, R)
    checkpoints = [k for k in (25, 50, 150) if k <= args.queries] or [args.queries]
    out = Path(args.out + "-batched")
    out.parent.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"batched PBO: {R} replications x (4d + {args.queries}) queries; device {device_name} "
        f"({args.dtype}); sequential: {K} replications on the CPU (float64); torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads",
        flush=True,
    )
    results, lines = [], []
    for problem in args.problems:
        scale = calibrate_noise(get_utility(problem), error_rate=args.error_rate, noise="gumbel")
        for strategy in args.strategies:
            res, wall = _replications(
                args, problem, strategy, R, scale, "batched", device=device, dtype=dtype
            )
            print(f"{problem} {strategy}: batched {wall:.1f} s", flush=True)
            seq, seq_wall = None, math.nan
            if not args.no_sequential:
                seq, seq_wall = _replications(args, problem, strategy, K, scale, "sequential")
                print(f"{problem} {strategy}: sequential {seq_wall:.1f} s", flush=True)
                print(f"  curves: {_curves_agree(res.log_regret(), seq.log_regret())}")
            row = _row(problem, strategy, res, wall, seq, seq_wall, device_name, args.dtype)
            results.append(row)
            lines += _table_lines(row, res, seq, checkpoints, device_name, args.dtype)
            out.with_suffix(".json").write_text(json.dumps(results))
    _write_table(
        "| problem | strategy | mode | replications | ",
        checkpoints,
        " | wall s (all replications) | s per query per replication | speed-up |",
        lines,
        out,
    )
    return 0


def _row(problem, strategy, res, wall, seq, seq_wall, device_name, dtype) -> dict:
    """The JSON record of one batched run and its sequential counterpart."""
    R, T = res.regret.shape
    K = 0 if seq is None else seq.n_replications
    seq_total = seq_wall * R / K if K else math.nan
    return {
        "problem": problem,
        "strategy": strategy,
        "replications": R,
        "device": device_name,
        "dtype": dtype,
        "batched_wall": wall,
        "batched_s_per_query": wall / (R * T),
        "sequential_replications": K,
        "sequential_wall_total": seq_total,
        "sequential_s_per_query": seq_wall / (K * T) if K else math.nan,
        "speedup": seq_total / wall,
        "batched_regret": res.regret.tolist(),
        "sequential_regret": [] if seq is None else seq.regret.tolist(),
        "n_initial": res.n_initial,
    }


def _table_lines(row, res, seq, checkpoints, device_name, dtype) -> list[str]:
    """The markdown rows of one batched run and its sequential counterpart."""
    R, K = row["replications"], row["sequential_replications"]
    cells = [fmt_mean_se([float(v) for v in res.log_regret_after(k)]) for k in checkpoints]
    lines = [
        f"| {row['problem']} | {row['strategy']} | batched ({device_name}, {dtype}) | {R} | "
        + " | ".join(cells)
        + f" | {row['batched_wall']:.0f} | {row['batched_s_per_query']:.3f} | "
        f"{row['speedup']:.1f}x |"
    ]
    if seq is not None:
        cells = [fmt_mean_se([float(v) for v in seq.log_regret_after(k)]) for k in checkpoints]
        extrap = "" if K == R else f" (timed {K}, scaled x{R / K:g})"
        lines.append(
            f"| {row['problem']} | {row['strategy']} | sequential (CPU, float64) | {K} | "
            + " | ".join(cells)
            + f" | {row['sequential_wall_total']:.0f}{extrap} | "
            f"{row['sequential_s_per_query']:.3f} | 1 |"
        )
    return lines


def _write_table(lead: str, checkpoints: list[int], tail: str, rows: list[str], out: Path) -> None:
    """Print a markdown table (a regret column per checkpoint) and write it to ``out.md``."""
    head = lead + " | ".join(f"log10 regret @{k}" for k in checkpoints) + tail
    table = "\n".join([head, "|" + "---|" * (head.count("|") - 1), *rows])
    print(table)
    out.with_suffix(".md").write_text(table + "\n")


def choice_study(args: argparse.Namespace) -> int:
    """qEUBO with q = 4 as choices vs q = 4 decomposed into pairs vs q = 2, per question.

    All three run batched (the same replications, seeds and users); regret is compared after
    the same number of questions.
    """
    device = torch.device(args.device)
    dtype = {"float64": torch.float64, "float32": torch.float32}[args.dtype]
    checkpoints = [k for k in (25, 50, 150) if k <= args.queries] or [args.queries]
    configs = [(4, "choice"), (4, "pairs"), (2, "pairs")]
    out = Path(args.out + "-choice")
    out.parent.mkdir(parents=True, exist_ok=True)
    rows, results = [], []
    for problem in args.problems:
        utility = get_utility(problem)
        scale = calibrate_noise(utility, error_rate=args.error_rate, noise="gumbel")
        for q, answers in configs:
            t0 = time.perf_counter()
            res = run_replications(
                problem,
                "qeubo",
                args.replications,
                args.queries,
                q=q,
                n_initial=4 * utility.dim,
                answers=answers,
                scale=scale,
                seed=args.seed,
                device=device,
                dtype=dtype,
            )
            wall = time.perf_counter() - t0
            cells = [fmt_mean_se([float(v) for v in res.log_regret_after(k)]) for k in checkpoints]
            label = {"choice": "choice likelihood", "pairs": "decomposed into pairs"}[answers]
            if q == 2:
                label = "pairs"
            rows.append(
                f"| {problem} | qEUBO q={q} | {label} | {args.replications} | "
                + " | ".join(cells)
                + f" | {wall:.0f} |"
            )
            print(rows[-1], flush=True)
            results.append(
                {"problem": problem, "q": q, "answers": answers, "regret": res.regret.tolist()}
            )
            out.with_suffix(".json").write_text(json.dumps(results))
    _write_table(
        "| problem | acquisition | answers modelled as | replications | ",
        checkpoints,
        " | wall s |",
        rows,
        out,
    )
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options ``pbo.py --batched`` adds."""
    parser.add_argument(
        "--batched",
        action="store_true",
        help="run all replications in lockstep on one batched model, next to the sequential loop",
    )
    parser.add_argument("--device", default="cpu", help="device of the batched run")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument(
        "--sequential-replications",
        type=int,
        default=None,
        help="time only this many sequential replications and scale (default: all)",
    )
    parser.add_argument(
        "--no-sequential", action="store_true", help="batched run only (no sequential timing)"
    )
    parser.add_argument(
        "--choice-study",
        action="store_true",
        help="qEUBO q=4 as choices vs q=4 as pairs vs q=2 (batched; uses --problems)",
    )


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (``pbo.py --batched`` / ``--choice-study`` call the same code)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", nargs="+", default=["hartmann6"])
    parser.add_argument("--strategies", nargs="+", default=["eubo"])
    parser.add_argument("--replications", type=int, default=32)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--error-rate", type=float, default=0.2)
    parser.add_argument("--q", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/out/pbo")
    add_arguments(parser)
    args = parser.parse_args(argv)
    return choice_study(args) if args.choice_study else run(args)


if __name__ == "__main__":
    raise SystemExit(main())
