"""LFPL benchmarks: parameter recovery on synthetic rankings, and LFPL/IF on MovieLens-100K.

Not run by CI. Run with::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/lfpl.py

* Synthetic: 1000 rankings of length 10 drawn from an LFPL with K=5, 10-fold cross-validation,
  mean held-out Kendall tau of the fitted LFPL next to the tau of the true U, V, for the
  alternating AdaGrad fit and the joint Adam fit.
* MovieLens-100K (the copy shipped in the ``recbole==1.2.1`` wheel: install it with
  ``pip install recbole==1.2.1 --no-deps``; the data are never copied into this repository):
  random leave-one-out, per-user AUC over all unobserved items, HR@10 and NDCG@10 of LFPL/IF,
  MostPopular, Random and cornac's BPR-MF (skipped when cornac is not installed), same split.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import time
from pathlib import Path

import torch

from botorch_pref.data import load_movielens
from botorch_pref.lfpl import (
    LFPL,
    ImplicitFeedback,
    LeaveOneOutSplit,
    MostPopular,
    Random,
    cross_validate_lfpl,
    evaluate,
    fit_implicit,
    leave_one_out,
    sample_lfpl,
)


def table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def synthetic(sizes: list[int], folds: int, seed: int) -> None:
    rows = []
    for size in sizes:
        rankings, truth = sample_lfpl(1000, 10, size, size, 5, seed=seed)
        for method in ("alternating", "joint"):
            start = time.perf_counter()
            cv = cross_validate_lfpl(
                rankings, truth, dim=5, n_folds=folds, seed=seed, method=method, epochs=300
            )
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
            print(f"  done: |R|=|C|={size}, {method}", flush=True)
    print(
        f"\nSynthetic LFPL: 1000 rankings of length 10, K=5, U and V entries N(0, 1), "
        f"{folds}-fold CV, fitted K=5, reg=1e-3, batch 128, up to 300 epochs with early "
        "stopping on 10% of each training fold\n"
    )
    header = ["|R| x |C|", "method", "mean tau", "true tau", "ratio", "seconds (all folds)"]
    print(table(header, rows))


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


def movielens(args: argparse.Namespace) -> None:
    path = recbole_ml100k() if args.data is None else Path(args.data)
    if path is None:
        print("\nMovieLens-100K: skipped (pip install recbole==1.2.1 --no-deps to get the file)")
        return
    raw = load_movielens(path)
    data = ImplicitFeedback(raw.pairs, raw.n_users, raw.n_items)
    split = leave_one_out(data, seed=args.seed)
    unseen = int((split.train.item_counts()[split.items] == 0).sum())
    rows = []

    for method in ("joint", "alternating"):
        model = LFPL(data.n_users, data.n_items, args.dim, seed=args.seed)
        fit = fit_implicit(
            model,
            split.train,
            epochs=args.epochs,
            batch_size=args.batch_size,
            lr=args.lr,
            reg=args.reg,
            method=method,
            seed=args.seed,
        )
        result = evaluate(model, split)
        name = f"LFPL/IF K={args.dim} AdaGrad {method}, {args.epochs} epochs"
        rows.append([name, result.auc, result.hr, result.ndcg, f"{fit.seconds:.1f}"])
        print(f"  done: {name}", flush=True)
    for name, scorer in (
        ("MostPopular", MostPopular(split.train)),
        ("Random", Random(data.n_items, seed=args.seed)),
    ):
        result = evaluate(scorer, split)
        rows.append([name, result.auc, result.hr, result.ndcg, "0.0"])
    if importlib.util.find_spec("cornac") is None:
        rows.append(["cornac BPR: not installed (pip install cornac)", "-", "-", "-", "-"])
    else:
        scorer, seconds, version = cornac_bpr(
            split, k=64, epochs=300, lr=0.01, reg=0.01, seed=args.seed
        )
        result = evaluate(scorer, split)
        name = f"cornac {version} BPR k=64, 300 epochs"
        rows.append([name, result.auc, result.hr, result.ndcg, f"{seconds:.1f}"])
    print(
        f"\nMovieLens-100K ({path.name}): {len(data)} interactions, {data.n_users} users, "
        f"{data.n_items} items, every rating a positive; random leave-one-out (seed "
        f"{args.seed}) for {split.users.numel()} users ({unseen} held-out items have no "
        "training interaction); AUC over all unobserved items (ties 1/2), HR@10 and NDCG@10 "
        f"over all items but the user's training positives; torch threads "
        f"{torch.get_num_threads()}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}\n"
    )
    formatted = [
        [r[0]] + [f"{v:.4f}" if isinstance(v, float) else v for v in r[1:4]] + [r[4]] for r in rows
    ]
    print(table(["model", "AUC", "HR@10", "NDCG@10", "train seconds"], formatted))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("all", "synthetic", "movielens"), default="all")
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100], help="|R| = |C|")
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--data", default=None, help="MovieLens file (default: recbole's copy)")
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--reg", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}"
    )
    if args.part in ("all", "synthetic"):
        synthetic(args.sizes, args.folds, args.seed)
    if args.part in ("all", "movielens"):
        movielens(args)


if __name__ == "__main__":
    main()
