r"""Batched PBO replications next to the sequential loop (``benchmarks/pbo.py --batched``).

For each problem and strategy, the same ``R`` replications (seeds ``seed .. seed + R - 1`` for the
optimiser and the user, the qEUBO protocol of ``benchmarks/pbo.py``) run twice in one process:

* batched: :func:`botorch_pref.experiments.run_replications`, all replications in lockstep on one
  batched :class:`~botorch_pref.PairwiseLaplaceGP` (``--device``, ``--dtype``);
* sequential: one :class:`~botorch_pref.PreferenceOptimizer` per replication, one after another,
  on the CPU in float64, with the same ``optimize_acqf`` effort (restarts and raw samples) and the
  same refit schedule.

Printed: mean log10 regret +- standard error after 25 and 50 queries for both, total wall time,
seconds per query per replication, and the speed-up (sequential wall / batched wall). Timing all
sequential replications of a large ``R`` takes long; ``--sequential-replications K`` times the
first ``K`` and scales their wall time by ``R / K`` (the sequential loop's cost is linear in the
number of replications), which the table marks as extrapolated.

``--choice-study`` compares, per question, qEUBO with ``q = 4`` answers modelled as choices
(:class:`~botorch_pref.likelihoods.Choice`), the same answers decomposed into the winner beating
each other option (probit pairs), and ``q = 2`` (all batched, same seeds and users).

Examples::

    python benchmarks/pbo.py --choice-study --problems hartmann6 --replications 8
    python benchmarks/pbo.py --batched --problems hartmann6 --strategies eubo \
        --replications 32 --queries 50
    python benchmarks/pbo.py --batched --problems hartmann6 --strategies eubo \
        --replications 256 --sequential-replications 8 --device cuda --dtype float32
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import torch

from botorch_pref.experiments import run_replications
from botorch_pref.loop import PreferenceOptimizer, acquisition_effort
from botorch_pref.test_functions import get_utility
from botorch_pref.users import SimulatedUser, calibrate_noise

REGRET_FLOOR = 1e-12


def _mean_se(values: list[float]) -> str:
    if not values:
        return "-"
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:+.2f}"
    return f"{mean:+.2f} +- {statistics.stdev(values) / math.sqrt(len(values)):.2f}"


def sequential_run(
    problem: str,
    strategy: str,
    seed: int,
    n_queries: int,
    q: int,
    scale: float,
    num_restarts: int,
    raw_samples: int,
) -> tuple[list[float], float]:
    """One sequential replication: regret after every answer, and wall seconds."""
    utility = get_utility(problem)
    d = utility.dim
    user = SimulatedUser(utility, noise="gumbel", scale=scale, seed=seed)
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).to(torch.float64)
    start = time.perf_counter()
    opt = PreferenceOptimizer(
        bounds,
        strategy=strategy,
        q=q,
        n_initial=4 * d,
        seed=seed,
        num_restarts=num_restarts,
        raw_samples=raw_samples,
    )
    regret = []
    for _ in range(4 * d + n_queries):
        X = opt.ask()
        opt.tell(X, int(user.choose(X)))
        regret.append(float(utility.regret(opt.best().x)))
    return regret, time.perf_counter() - start


def _log_regret_after(regret: list[float], n_initial: int, k: int) -> float:
    return math.log10(max(regret[n_initial + k - 1], REGRET_FLOOR))


def run(args: argparse.Namespace) -> int:
    """Run the batched benchmark for ``pbo.py --batched``; print and save the table."""
    device = torch.device(args.device)
    dtype = {"float64": torch.float64, "float32": torch.float32}[args.dtype]
    R = args.replications
    K = min(args.sequential_replications or R, R)
    checkpoints = [k for k in (25, 50, 150) if k <= args.queries] or [args.queries]
    out = Path(args.out + "-batched")
    out.parent.mkdir(parents=True, exist_ok=True)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"batched PBO: {R} replications x (4d + {args.queries}) queries; device {device_name} "
        f"({args.dtype}); sequential: {K} replications on the CPU (float64); torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads",
        flush=True,
    )
    results = []
    lines = []
    for problem in args.problems:
        utility = get_utility(problem)
        scale = calibrate_noise(utility, error_rate=args.error_rate, noise="gumbel")
        d = utility.dim
        for strategy in args.strategies:
            q_opt = {"eubo": 2, "champion-challenger": 1}.get(strategy, args.q)
            restarts, raw = acquisition_effort(d, q_opt)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            res = run_replications(
                problem,
                strategy,
                R,
                args.queries,
                q=args.q,
                scale=scale,
                seed=args.seed,
                device=device,
                dtype=dtype,
                num_restarts=restarts,
                raw_samples=raw,
            )
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            batched_wall = time.perf_counter() - t0
            print(f"{problem} {strategy}: batched {batched_wall:.1f} s", flush=True)
            seq_regret, seq_walls = [], []
            if not args.no_sequential:
                for r in range(K):
                    regret, wall = sequential_run(
                        problem, strategy, args.seed + r, args.queries, args.q, scale, restarts, raw
                    )
                    seq_regret.append(regret)
                    seq_walls.append(wall)
                    print(f"  sequential replication {r}: {wall:.1f} s", flush=True)
            seq_total = sum(seq_walls) * R / K if seq_walls else math.nan
            T = res.regret.shape[1]
            row = {
                "problem": problem,
                "strategy": strategy,
                "replications": R,
                "device": device_name,
                "dtype": args.dtype,
                "batched_wall": batched_wall,
                "batched_s_per_query": batched_wall / (R * T),
                "sequential_replications": len(seq_walls),
                "sequential_wall_total": seq_total,
                "sequential_s_per_query": (
                    sum(seq_walls) / (len(seq_walls) * T) if seq_walls else math.nan
                ),
                "speedup": seq_total / batched_wall,
                "batched_regret": res.regret.tolist(),
                "sequential_regret": seq_regret,
                "n_initial": res.n_initial,
            }
            results.append(row)
            n0 = res.n_initial
            b_cells = [_mean_se([float(v) for v in res.log_regret_after(k)]) for k in checkpoints]
            s_cells = [
                _mean_se([_log_regret_after(r_, n0, k) for r_ in seq_regret]) for k in checkpoints
            ]
            extrap = "" if len(seq_walls) == R else f" (timed {len(seq_walls)}, scaled x{R / K:g})"
            lines.append(
                f"| {problem} | {strategy} | batched ({device_name}, {args.dtype}) | {R} | "
                + " | ".join(b_cells)
                + f" | {batched_wall:.0f} | {row['batched_s_per_query']:.3f} | "
                f"{row['speedup']:.1f}x |"
            )
            lines.append(
                f"| {problem} | {strategy} | sequential (CPU, float64) | {len(seq_walls)} | "
                + " | ".join(s_cells)
                + f" | {seq_total:.0f}{extrap} | {row['sequential_s_per_query']:.3f} | 1 |"
            )
            out.with_suffix(".json").write_text(json.dumps(results))
    _write_table(
        "| problem | strategy | mode | replications | ",
        checkpoints,
        " | wall s (all replications) | s per query per replication | speed-up |",
        lines,
        out,
    )
    return 0


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
                answers=answers,
                scale=scale,
                seed=args.seed,
                device=device,
                dtype=dtype,
            )
            wall = time.perf_counter() - t0
            cells = [_mean_se([float(v) for v in res.log_regret_after(k)]) for k in checkpoints]
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
