"""LFPL benchmarks: LFPL/IF against cornac's BPR on the same MovieLens-100K splits, thread
settings, synthetic recovery, and data-parallel scaling on power-law synthetic interactions.

Not run by CI. Parts (``--part``, default ``movielens``)::

    .venv/bin/python -m benchmarks.lfpl --part movielens   # levers x split seeds, next to BPR
    .venv/bin/python -m benchmarks.lfpl --part threads     # the CLI's thread default, timed
    .venv/bin/python -m benchmarks.lfpl --part step        # the default step, op by op
    .venv/bin/python -m benchmarks.lfpl --part synthetic   # recovery on rankings of a known LFPL
    .venv/bin/python -m benchmarks.lfpl --part scale       # s per epoch vs interactions, processes

* MovieLens-100K (the copy shipped in the ``recbole==1.2.1`` wheel: install it with
  ``pip install recbole==1.2.1 --no-deps``; the data are never copied into this repository):
  for each split seed, one random leave-one-out split; every LFPL/IF variant and cornac's BPR
  (``pip install cornac==3.0.1``; skipped when absent) are trained and evaluated on that same
  split, in this one process. Per-user AUC over all unobserved items, HR@10, NDCG@10; the paired
  per-user AUC difference to BPR is averaged over the seeds per user, with its standard error
  over users.
* Threads: ``botorch-pref lfpl train`` with its defaults in fresh processes, with and without
  the environment variables a user might set, timed side by side.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from botorch_pref.data import load_movielens
from botorch_pref.lfpl import (
    LFPL,
    ImplicitFeedback,
    LeaveOneOutSplit,
    MostPopular,
    cross_validate_lfpl,
    evaluate,
    fit_implicit,
    leave_one_out,
    sample_lfpl,
)
from botorch_pref.lfpl.openmp import default_lfpl_threads
from botorch_pref.lfpl.recommender import DEFAULTS

# The levers A/B'd against the defaults (the first entry); each changes one setting.
VARIANTS: dict[str, dict[str, object]] = {
    "default": {},
    "previous defaults (25 epochs, lr 0.1 constant)": {
        "epochs": 25, "lr": 0.1, "lr_schedule": "constant",
    },
    "pairs (L=1, BPR loss)": {"n_negatives": 1},
    "L=10": {"n_negatives": 10},
    "alternating step (the paper's)": {"method": "alternating"},
    "hard negatives (5 of 20)": {"negatives": "hard", "candidates": 20},
    "constant lr 0.1": {"lr_schedule": "constant", "lr": 0.1},
    "15 epochs": {"epochs": 15},
    "18 epochs": {"epochs": 18},
    "12 epochs, lr 0.4": {"epochs": 12, "lr": 0.4},
    "lr 0.25": {"lr": 0.25},
    "lr 0.35": {"lr": 0.35},
    "reg 0.02": {"reg": 0.02},
    "reg 0.04": {"reg": 0.04},
    "K=32": {"dim": 32},
    "K=48": {"dim": 48},
    "K=32, 20 epochs": {"dim": 32, "epochs": 20},
    "L=3": {"n_negatives": 3},
    "batch 2048": {"batch_size": 2048},
    "batch 8192": {"batch_size": 8192},
    "batch 16384, lr 0.5, 25 epochs": {"batch_size": 16384, "lr": 0.5, "epochs": 25},
    "2 threads": {"threads": 2},
    "1 thread": {"threads": 1},
    "prefetch": {"prefetch": True},
    "alternating step, 1 thread": {"method": "alternating", "threads": 1},
    # Levers of earlier rounds, measured against the constant-rate defaults of then.
    "15 epochs, lr 0.15 constant": {"epochs": 15, "lr": 0.15, "lr_schedule": "constant"},
    "20 epochs, lr 0.15 constant": {"epochs": 20, "lr": 0.15, "lr_schedule": "constant"},
    "batch 8192, lr 0.14 constant": {
        "epochs": 25, "batch_size": 8192, "lr": 0.14, "lr_schedule": "constant",
    },
    "30 epochs, lr 0.1 constant": {"epochs": 30, "lr": 0.1, "lr_schedule": "constant"},
}  # fmt: skip


def table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def recbole_ml100k() -> Path | None:
    spec = importlib.util.find_spec("recbole")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "dataset_example" / "ml-100k" / "ml-100k.inter"
    return path if path.is_file() else None


def cornac_bpr(split: LeaveOneOutSplit, k: int, epochs: int, lr: float, reg: float, seed: int):
    """Train cornac's BPR on the split's training pairs; return a scorer and the seconds."""
    import cornac
    import numpy as np

    train = split.train
    triples = [(str(u), str(i), 1.0) for u, i in train.pairs.tolist()]
    dataset = cornac.data.Dataset.from_uir(triples, seed=seed)
    model = cornac.models.BPR(
        k=k, max_iter=epochs, learning_rate=lr, lambda_reg=reg, seed=seed, num_threads=2
    )
    start = time.perf_counter()
    model.fit(dataset)
    seconds = time.perf_counter() - start
    item_of = np.full(train.n_items, -1)
    for raw, idx in dataset.iid_map.items():
        item_of[int(raw)] = idx
    known = torch.from_numpy(item_of >= 0)
    cols = torch.from_numpy(np.maximum(item_of, 0))

    class Scorer:
        def score_items(self, rows: torch.Tensor) -> torch.Tensor:
            out = []
            for user in rows.tolist():
                scores = torch.from_numpy(model.score(dataset.uid_map[str(user)]).astype("float64"))
                full = scores[cols]
                # Items without a training interaction are unknown to cornac: put them last.
                full[~known] = full[known].min() - 1.0
                out.append(full)
            return torch.stack(out)

    return Scorer(), seconds, cornac.__version__


def paired(results: list[dict[str, torch.Tensor]], reference: list[dict[str, torch.Tensor]]) -> str:
    """The per-user AUC difference, averaged over the seeds, as ``mean +- standard error``."""
    if len(results) != len(reference) or not results:
        return "-"
    d = torch.stack([r["auc"] - b["auc"] for r, b in zip(results, reference, strict=True)]).mean(0)
    return f"{float(d.mean()):+.4f} +- {float(d.std() / math.sqrt(d.numel())):.4f}"


def fit_settings(overrides: dict[str, object]) -> dict[str, object]:
    settings = {k: v for k, v in DEFAULTS.items() if k not in ("dim", "init_scale", "seed")}
    settings.update({k: v for k, v in overrides.items() if k != "dim"})
    return settings


def movielens(args: argparse.Namespace) -> None:
    path = recbole_ml100k() if args.data is None else Path(args.data)
    if path is None:
        print("\nMovieLens-100K: skipped (pip install recbole==1.2.1 --no-deps to get the file)")
        return
    raw = load_movielens(path)
    data = ImplicitFeedback(raw.pairs, raw.n_users, raw.n_items)
    names = [n for n in VARIANTS if args.variants is None or n in args.variants]
    has_cornac = importlib.util.find_spec("cornac") is not None and not args.no_bpr
    per_user: dict[str, list[dict[str, torch.Tensor]]] = {n: [] for n in names}
    per_user["BPR"], per_user["MostPopular"] = [], []
    seconds: dict[str, list[float]] = {n: [] for n in per_user}
    cpu_seconds: dict[str, list[float]] = {n: [] for n in per_user}
    version = "-"
    for seed in args.seeds:
        split = leave_one_out(data, seed=seed)
        print(f"  split seed {seed}: {load()}", flush=True)
        for name in names:
            dim = int(VARIANTS[name].get("dim", DEFAULTS["dim"]))  # type: ignore[call-overload]
            model = LFPL(data.n_users, data.n_items, dim, seed=seed)
            cpu = time.process_time()
            fit = fit_implicit(model, split.train, seed=seed, **fit_settings(VARIANTS[name]))
            cpu_seconds[name].append(time.process_time() - cpu)
            per_user[name].append(evaluate(model, split).per_user)
            seconds[name].append(fit.seconds)
            print(
                f"    {name}: AUC {per_user[name][-1]['auc'].mean():.4f}, {fit.seconds:.1f} s, "
                f"CPU {cpu_seconds[name][-1]:.1f} s, {fit.threads} threads ({load()})"
            )
        if has_cornac:
            cpu = time.process_time()
            scorer, sec, version = cornac_bpr(split, k=64, epochs=300, lr=0.01, reg=0.01, seed=seed)
            cpu_seconds["BPR"].append(time.process_time() - cpu)
            per_user["BPR"].append(evaluate(scorer, split).per_user)
            seconds["BPR"].append(sec)
            print(
                f"    BPR: AUC {per_user['BPR'][-1]['auc'].mean():.4f}, {sec:.1f} s, CPU "
                f"{cpu_seconds['BPR'][-1]:.1f} s (incl. its data set)",
                flush=True,
            )
        per_user["MostPopular"].append(evaluate(MostPopular(split.train), split).per_user)
        seconds["MostPopular"].append(0.0)
        cpu_seconds["MostPopular"].append(0.0)
    print(
        f"\nMovieLens-100K ({path.name}): {len(data)} interactions, {data.n_users} users, "
        f"{data.n_items} items, every rating a positive; random leave-one-out, split seeds "
        f"{args.seeds}; means over the seeds. LFPL/IF defaults: {fit_settings({})}, K="
        f"{DEFAULTS['dim']}, float32, torch threads during fits: the lfpl default "
        f"({default_lfpl_threads() or torch.get_num_threads()}). "
        f"BPR: cornac {version} BPR k=64, 300 epochs, lr 0.01, lambda 0.01, 2 threads. "
        "'AUC - BPR' (and '- <the first variant>') is the per-user paired difference averaged "
        f"over the seeds, +- its standard error over users. {load()} at the end.\n"
    )
    rows = []
    for name, results in per_user.items():
        if not results:
            continue
        mean = {m: sum(float(r[m].mean()) for r in results) / len(results) for m in results[0]}
        diff = paired(results, per_user["BPR"]) if name != "BPR" else "-"
        to_first = paired(results, per_user[names[0]]) if name != names[0] else "-"
        seeds = " / ".join(f"{float(r['auc'].mean()):.4f}" for r in results)
        label = f"LFPL/IF {name}" if name in VARIANTS else name
        if name == "BPR":
            label = f"cornac {version} BPR"
        rows.append(
            [
                label,
                f"{mean['auc']:.4f}",
                seeds,
                diff,
                to_first,
                f"{mean['hr']:.4f}",
                f"{mean['ndcg']:.4f}",
                f"{sum(seconds[name]) / len(seconds[name]):.1f}",
                f"{sum(cpu_seconds[name]) / len(cpu_seconds[name]):.1f}",
            ]
        )
    header = [
        "model",
        "AUC",
        "AUC per seed",
        "AUC - BPR",
        f"AUC - {names[0]}",
        "HR@10",
        "NDCG@10",
        "train s",
        "CPU s",
    ]
    print(table(header, rows))


def threads(args: argparse.Namespace) -> None:
    """Time ``botorch-pref lfpl train`` with its defaults in fresh processes."""
    path = recbole_ml100k() if args.data is None else Path(args.data)
    if path is None:
        print("threads: skipped (no MovieLens file)")
        return
    settings = [
        ("defaults, no environment variable", {}, []),
        ("--threads 2, no env (OpenMP spins)", {}, ["--threads", "2"]),
        ("OMP_WAIT_POLICY=PASSIVE (2 threads)", {"OMP_WAIT_POLICY": "PASSIVE"}, []),
    ]
    if args.skip_spinning:
        settings.pop(1)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_"))}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for name, env, extra in settings:
                cmd = [
                    sys.executable, "-m", "botorch_pref.cli", "lfpl", "train", "--data", str(path),
                    "--out", str(Path(tmp) / "m.pt"), "--no-progress", *extra,
                ]  # fmt: skip
                before = load()
                usage = resource.getrusage(resource.RUSAGE_CHILDREN)
                out = subprocess.run(
                    cmd, env={**clean, **env}, capture_output=True, text=True, check=True
                ).stdout
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
                fit_s = float(out.split(" epochs in ")[1].split(" s")[0])
                n_threads = out.split(" threads, ")[0].rsplit(" ", 1)[-1]
                rows.append([name, repeat, f"{fit_s:.2f}", n_threads, f"{cpu:.1f}", before])
                print(f"  {name}: {fit_s:.2f} s, {n_threads} threads ({before})", flush=True)
    print(f"\n`botorch-pref lfpl train` on {path.name}, defaults, fresh process each\n")
    header = ["setting", "repeat", "fit s", "threads", "process CPU s", "load before"]
    print(table(header, rows))


def step(args: argparse.Namespace) -> None:
    """The default fused step on ML-100K's sizes: each operation and its alternatives, timed.

    Every operation runs ``--repeats`` x 10 times interleaved with the others; the minimum is
    the least disturbed by other processes on a shared machine. Then the torch profiler's
    operator table over two epochs of the default fit.
    """
    import torch.nn.functional as F

    from botorch_pref.lfpl.fused import RowAdagrad, _choice_weights

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    n_users, n_items = 943, 1682
    batch, n_neg, dim = int(DEFAULTS["batch_size"]), int(DEFAULTS["n_negatives"]), DEFAULTS["dim"]
    U, V = torch.randn(n_users, dim, generator=gen) * 0.3, torch.randn(n_items, dim, generator=gen)
    users = torch.randint(n_users, (batch,), generator=gen)
    items = torch.randint(n_items, (batch, n_neg + 1), generator=gen)
    flat = items.view(-1)
    u, v = U.index_select(0, users), V.index_select(0, flat).view(batch, n_neg + 1, dim)
    w, _ = _choice_weights(u, v, 1.0 / batch)
    opt_u, opt_v = RowAdagrad(U.clone()), RowAdagrad(V.clone())
    grad_u = F.embedding_bag(items, V, per_sample_weights=w, mode="sum")
    products = (w.unsqueeze(-1) * u.unsqueeze(1)).view(-1, dim)
    ops = {
        "gather U rows (index_select)": lambda: U.index_select(0, users),
        "gather V rows (index_select)": lambda: V.index_select(0, flat),
        "  alternative: V[items] (advanced indexing)": lambda: V[items],
        "scores and weights (bmm, logsumexp)": lambda: _choice_weights(u, v, 1.0 / batch),
        "user gradient (weighted embedding_bag)": lambda: F.embedding_bag(
            items, V, per_sample_weights=w, mode="sum"
        ),
        "  alternative: multiply and sum over items": lambda: (w.unsqueeze(-1) * v).sum(1),
        "U: index_add_ and AdaGrad (whole table)": lambda: opt_u.step(users, grad_u, 0.0),
        "V gradient (sparse-dense product)": lambda: opt_v.accumulate_outer(items, w, u),
        "  alternative: products and index_add_": lambda: opt_v.grad.index_add_(
            0, flat, (w.unsqueeze(-1) * u.unsqueeze(1)).view(-1, dim)
        ),
        "  of which index_add_ alone": lambda: opt_v.grad.index_add_(0, flat, products),
        "V penalty counts (bincount)": lambda: opt_v.accumulate_decay(flat, 0.0),
        "V AdaGrad (whole table)": lambda: opt_v.apply(flat, 0.0),
    }
    times: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(args.repeats * 10):
        for name, op in ops.items():
            start = time.perf_counter()
            op()
            times[name].append(1e3 * (time.perf_counter() - start))
    print(
        f"\nOne default step (B={batch}, L={n_neg}, K={dim}, {n_users} x {n_items}), 1 thread, "
        f"min over {args.repeats * 10} runs, {load()}\n"
    )
    print(table(["operation", "ms"], [[name, f"{min(t):.3f}"] for name, t in times.items()]))
    path = recbole_ml100k() if args.data is None else Path(args.data)
    if path is None:
        return
    from torch.profiler import ProfilerActivity, profile

    raw = load_movielens(path)
    split = leave_one_out(ImplicitFeedback(raw.pairs, raw.n_users, raw.n_items), seed=0)
    model = LFPL(raw.n_users, raw.n_items, dim, seed=0)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fit_implicit(model, split.train, **{**fit_settings({}), "epochs": 2, "threads": 1})
    print(f"\nProfiler, two epochs of the default fit, 1 thread ({load()})\n")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))


def synthetic(args: argparse.Namespace) -> None:
    rows = []
    for size in args.sizes:
        rankings, truth = sample_lfpl(1000, 10, size, size, 5, seed=args.seed)
        for method in ("alternating", "joint"):
            start = time.perf_counter()
            cv = cross_validate_lfpl(
                rankings, truth, dim=5, n_folds=args.folds, seed=args.seed, method=method,
                epochs=300,
            )  # fmt: skip
            seconds = time.perf_counter() - start
            rows.append(
                [
                    f"{size} x {size}",
                    method,
                    f"{cv.mean_tau:.4f}",
                    f"{cv.mean_true_tau:.4f}",
                    f"{cv.ratio:.3f}",
                    f"{seconds:.1f}",
                ]
            )
            print(f"  done: |R|=|C|={size}, {method} ({load()})", flush=True)
    print(
        f"\nSynthetic LFPL: 1000 rankings of length 10, K=5, U and V entries N(0, 1), "
        f"{args.folds}-fold CV, fitted K=5, reg=1e-3, batch 128, up to 300 epochs with early "
        "stopping on 10% of each training fold\n"
    )
    header = ["|R| x |C|", "method", "mean tau", "true tau", "ratio", "seconds (all folds)"]
    print(table(header, rows))


def _scale_worker(rank: int, world: int, port: int, config: dict, queue) -> None:
    import torch.distributed as dist

    from botorch_pref.lfpl.distributed import fit_data_parallel
    from botorch_pref.lfpl.simulation import power_law_interactions

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        data, _ = power_law_interactions(
            config["users"], config["items"], config["interactions"], seed=0
        )
        split = leave_one_out(data, seed=0)
        model = LFPL(data.n_users, data.n_items, 32, seed=0)
        fit = fit_data_parallel(
            model, split.train, epochs=config["epochs"], batch_size=config["batch"] // world,
            seed=0,
        )  # fmt: skip
        if rank == 0:
            auc = evaluate(model, split).auc if config["evaluate"] else float("nan")
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            queue.put((fit.seconds / fit.epochs_run, auc, peak, len(split.train)))
    finally:
        dist.destroy_process_group()


def scale(args: argparse.Namespace) -> None:
    """Time per epoch against interactions and processes on power-law synthetic data."""
    import torch.multiprocessing as mp

    rows = []
    ctx = mp.get_context("spawn")
    for n in args.interactions:
        for world in args.processes:
            config = {
                "users": max(1000, n // 50), "items": max(500, n // 200), "interactions": n,
                "epochs": args.scale_epochs, "batch": 4096, "evaluate": n <= 1_000_000,
            }  # fmt: skip
            queue = ctx.Queue()
            port = 29500 + (os.getpid() % 1000)
            procs = [
                ctx.Process(target=_scale_worker, args=(r, world, port, config, queue))
                for r in range(world)
            ]
            for p in procs:
                p.start()
            per_epoch, auc, peak, n_train = queue.get(timeout=3600)
            for p in procs:
                p.join(timeout=60)
            rows.append(
                [f"{n_train:,}", config["users"], config["items"], world, f"{per_epoch:.2f}",
                 f"{auc:.4f}", f"{peak:.0f}", load()]
            )  # fmt: skip
            print(f"  {rows[-1]}", flush=True)
    print(
        "\nPower-law synthetic interactions (power_law_interactions, exponents 0.8), random "
        "leave-one-out (seed 0), LFPL/IF defaults (K=32), global batch 4096 split over the "
        "processes, gloo on 127.0.0.1, 1 thread per process; peak RSS of rank 0\n"
    )
    header = ["train interactions", "users", "items", "processes", "s / epoch", "AUC", "peak MB"]
    print(table([*header, "load"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--part",
        choices=("movielens", "threads", "step", "synthetic", "scale"),
        default="movielens",
    )
    parser.add_argument("--data", default=None, help="MovieLens file (default: recbole's copy)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="split seeds")
    parser.add_argument("--variants", nargs="+", default=None, help=f"of {list(VARIANTS)}")
    parser.add_argument("--repeats", type=int, default=2, help="threads, step: repetitions")
    parser.add_argument("--no-bpr", action="store_true", help="movielens: leave out cornac's BPR")
    parser.add_argument(
        "--skip-spinning", action="store_true", help="threads: leave out the spinning setting"
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[50], help="|R| = |C|")
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--interactions", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--scale-epochs", type=int, default=3)
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, {load()}; "
        + json.dumps({k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")})
    )
    parts = {"movielens": movielens, "threads": threads, "step": step, "synthetic": synthetic}
    {**parts, "scale": scale}[args.part](args)


if __name__ == "__main__":
    main()
