"""The ``botorch-pref lfpl`` command: LFPL on synthetic rankings and on implicit feedback."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import torch

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``lfpl`` command and its ``synthetic`` and ``implicit`` sub-commands.

    Args:
        subparsers: The sub-parsers object of the ``botorch-pref`` parser.
    """
    lfpl = subparsers.add_parser(
        "lfpl",
        help="latent-feature Plackett-Luce models",
        description="Latent-feature Plackett-Luce (LFPL) models for rankings of dyads.",
    )
    sub = lfpl.add_subparsers(dest="lfpl_command", metavar="SUBCOMMAND")
    sub.required = True

    syn = sub.add_parser(
        "synthetic",
        help="cross-validate LFPL on rankings drawn from a known LFPL",
        description="Draw rankings from a random LFPL, cross-validate, and print the held-out "
        "Kendall tau of the fitted model next to the true model's.",
    )
    syn.add_argument("--n-rankings", type=int, default=1000)
    syn.add_argument("--length", type=int, default=10)
    syn.add_argument("--rows", type=int, default=50, help="number of row entities |R|")
    syn.add_argument("--cols", type=int, default=50, help="number of column entities |C|")
    syn.add_argument("--true-dim", type=int, default=5, help="latent dimension of the truth")
    syn.add_argument("--dim", type=int, default=None, help="fitted dimension (default: true)")
    syn.add_argument("--folds", type=int, default=10)
    syn.add_argument(
        "--method", choices=("alternating", "joint", "both"), default="both", help="optimiser"
    )
    syn.add_argument("--epochs", type=int, default=200)
    syn.add_argument("--batch-size", type=int, default=128)
    syn.add_argument("--lr", type=float, default=None)
    syn.add_argument("--reg", type=float, default=1e-3)
    _common(syn)
    syn.set_defaults(func=run_synthetic)

    imp = sub.add_parser(
        "implicit",
        help="LFPL/IF on MovieLens-style interactions, leave-one-out",
        description="Fit LFPL/IF on interactions read from a MovieLens or RecBole file and "
        "print leave-one-out AUC, HR@k and NDCG@k next to MostPopular and Random.",
    )
    imp.add_argument("--data", required=True, help="u.data, ratings.dat, ratings.csv, *.inter")
    imp.add_argument("--min-rating", type=float, default=None, help="keep ratings >= this")
    imp.add_argument("--holdout", choices=("random", "latest"), default="random")
    imp.add_argument("--dim", type=int, default=32)
    imp.add_argument("--epochs", type=int, default=50)
    imp.add_argument("--batch-size", type=int, default=4096)
    imp.add_argument("--lr", type=float, default=0.1)
    imp.add_argument("--reg", type=float, default=1e-2)
    imp.add_argument("--method", choices=("joint", "alternating"), default="joint")
    imp.add_argument("--optimizer", choices=("adagrad", "adam"), default="adagrad")
    imp.add_argument("--k", type=int, default=10, help="cut-off of HR and NDCG")
    _common(imp)
    imp.set_defaults(func=run_implicit)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    parser.add_argument("--progress", action="store_true", help="show progress bars")


def _device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for, but CUDA is not available.")
    return device


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def run_synthetic(args: argparse.Namespace) -> int:
    """Cross-validate LFPL on synthetic rankings and print a table; returns the exit code."""
    from botorch_pref.lfpl.synthetic import cross_validate_lfpl, sample_lfpl

    device = _device(args.device)
    rankings, truth = sample_lfpl(
        args.n_rankings,
        args.length,
        args.rows,
        args.cols,
        args.true_dim,
        seed=args.seed,
        device=device,
    )
    methods = ("alternating", "joint") if args.method == "both" else (args.method,)
    print(
        f"LFPL synthetic: {args.n_rankings} rankings of length {args.length}, "
        f"|R|={args.rows}, |C|={args.cols}, true K={args.true_dim}, {args.folds}-fold CV"
    )
    rows = []
    for method in methods:
        start = time.perf_counter()
        cv = cross_validate_lfpl(
            rankings,
            truth,
            dim=args.dim or args.true_dim,
            n_folds=args.folds,
            seed=args.seed,
            method=method,
            epochs=args.epochs,
            batch_size=args.batch_size,
            lr=args.lr,
            reg=args.reg,
            progress=args.progress,
        )
        seconds = time.perf_counter() - start
        rows.append(
            (
                method,
                f"{cv.mean_tau:.4f}",
                f"{cv.mean_true_tau:.4f}",
                f"{cv.ratio:.3f}",
                sum(cv.skipped),
                f"{seconds:.1f}",
            )
        )
    header = ("method", "mean tau", "true tau", "ratio", "skipped", "seconds")
    print(_table(header, rows))
    return 0


def run_implicit(args: argparse.Namespace) -> int:
    """Fit LFPL/IF with leave-one-out evaluation and print a table; returns the exit code."""
    from botorch_pref.data import load_movielens
    from botorch_pref.lfpl.implicit import (
        ImplicitFeedback,
        MostPopular,
        Random,
        evaluate,
        fit_implicit,
        leave_one_out,
    )
    from botorch_pref.lfpl.model import LFPL

    device = _device(args.device)
    raw = load_movielens(args.data, min_rating=args.min_rating)
    data = ImplicitFeedback(raw.pairs, raw.n_users, raw.n_items, raw.timestamps).to(device)
    split = leave_one_out(data, seed=args.seed, by=args.holdout)
    print(
        f"LFPL/IF: {len(data)} interactions, {data.n_users} users, {data.n_items} items; "
        f"leave-one-out ({args.holdout}) for {split.users.numel()} users"
    )
    model = LFPL(data.n_users, data.n_items, args.dim, seed=args.seed, device=device)
    fit = fit_implicit(
        model,
        split.train,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        reg=args.reg,
        method=args.method,
        optimizer=args.optimizer,
        seed=args.seed,
        progress=args.progress,
    )
    scorers = [
        (f"LFPL/IF (K={args.dim})", model, fit.seconds),
        ("MostPopular", MostPopular(split.train), 0.0),
        ("Random", Random(data.n_items, seed=args.seed, device=device), 0.0),
    ]
    rows = []
    for name, scorer, seconds in scorers:
        result = evaluate(scorer, split, k=args.k)
        rows.append(
            (name, f"{result.auc:.4f}", f"{result.hr:.4f}", f"{result.ndcg:.4f}", f"{seconds:.1f}")
        )
    header = ("model", "AUC", f"HR@{args.k}", f"NDCG@{args.k}", "train s")
    print(_table(header, rows))
    return 0
