"""The ``botorch-pref lfpl`` command: LFPL on synthetic rankings and on implicit feedback."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from botorch_pref.lfpl.openmp import lfpl_threads, reexec_with_passive_openmp
from botorch_pref.runtime import add_command, nonnegative_int, positive_int

__all__ = ["add_arguments"]


def add_arguments(lfpl: argparse.ArgumentParser) -> None:
    """Add the sub-commands of ``botorch-pref lfpl`` to its parser."""
    sub = lfpl.add_subparsers(dest="lfpl_command", metavar="SUBCOMMAND")
    sub.required = True
    for name, help_line, description, add_options, run in SUBCOMMANDS:
        parser = add_command(sub, name, help=help_line, description=description)
        add_options(parser)
        parser.set_defaults(func=run)


def _synthetic_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-rankings", type=int, default=1000, help="rankings to draw")
    parser.add_argument("--length", type=int, default=10, help="dyads in each ranking")
    parser.add_argument("--rows", type=int, default=50, help="number of row entities |R|")
    parser.add_argument("--cols", type=int, default=50, help="number of column entities |C|")
    parser.add_argument("--true-dim", type=int, default=5, help="latent dimension of the truth")
    parser.add_argument(
        "--dim", type=int, default=None, help="fitted latent dimension (default: --true-dim)"
    )
    parser.add_argument("--folds", type=int, default=10, help="cross-validation folds")
    parser.add_argument(
        "--method",
        choices=("alternating", "joint", "both"),
        default="both",
        help="optimiser: alternating (AdaGrad on U, then on V, as the paper), joint (both at "
        "once), or both, one after the other",
    )
    parser.add_argument(
        "--epochs", type=int, default=200, help="most passes over the training rankings"
    )
    parser.add_argument("--batch-size", type=int, default=128, help="rankings per step")
    parser.add_argument(
        "--lr", type=float, default=None, help="AdaGrad learning rate (default: the method's own)"
    )
    parser.add_argument(
        "--reg", type=float, default=1e-3, help="Frobenius penalty weight on U and V"
    )
    _common(parser, progress=False)


def _implicit_options(parser: argparse.ArgumentParser) -> None:
    _data(
        parser,
        ("random", "latest"),
        "random",
        "which interaction of each user is held out: random, or latest (by timestamp)",
    )
    _hyper(parser)
    parser.add_argument(
        "--optimizer",
        choices=("adagrad", "adam"),
        default="adagrad",
        help="adagrad (the paper's, fused) or adam (torch's, for comparison)",
    )
    parser.add_argument("--k", type=int, default=10, help="cut-off of HR and NDCG (items)")
    _common(parser, progress=False)


def _train_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="file to write the model to")
    _data(
        parser,
        ("none", "random", "latest"),
        "none",
        "none (train on all), or hold one interaction per user out for 'evaluate': random, or "
        "latest (by timestamp)",
    )
    _hyper(parser)
    _common(parser, progress=True)
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="data-parallel training under torchrun (gloo on cpu, nccl on cuda); rank 0 saves",
    )


def _recommend_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="file written by 'lfpl train'")
    parser.add_argument("--users", required=True, nargs="+", help="original user ids")
    parser.add_argument("--k", type=int, default=10, help="items per user")
    parser.add_argument("--include-seen", action="store_true", help="keep items seen in training")
    _device_arg(parser)


def _evaluate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="file written by 'lfpl train --holdout ...'")
    parser.add_argument("--data", required=True, help="the file the model was trained on")
    parser.add_argument("--k", type=int, default=10, help="cut-off of HR and NDCG")
    _device_arg(parser)


def _data(
    parser: argparse.ArgumentParser, holdouts: tuple[str, ...], holdout: str, help: str
) -> None:
    """The ratings file, the rating threshold and the held-out interaction of each user."""
    parser.add_argument("--data", required=True, help="u.data, ratings.dat, ratings.csv, *.inter")
    parser.add_argument(
        "--min-rating",
        type=float,
        default=None,
        help="keep ratings >= this as interactions (default: every rating)",
    )
    parser.add_argument("--holdout", choices=holdouts, default=holdout, help=help)


def _device_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")


#: The hyperparameters of ``implicit`` and ``train``, each an option ``--<name>`` whose default is
#: the recommender's (:data:`~botorch_pref.lfpl.recommender.DEFAULTS`): its type or its choices,
#: and its help.
_HYPERPARAMETERS = {
    "dim": (int, "latent dimension K"),
    "epochs": (int, "passes over the interactions"),
    "batch_size": (int, "interactions per step"),
    "n_negatives": (int, "sampled unobserved items per interaction (L; 1 is BPR's pair loss)"),
    "negatives": (
        ("uniform", "hard"),
        "how unobserved items are drawn: uniform, or hard (the highest-scoring of a larger "
        "uniform draw)",
    ),
    "lr": (float, "AdaGrad learning rate at the start (0.1 suits --lr-schedule constant)"),
    "lr_schedule": (
        ("constant", "linear"),
        "constant, or linear (decays to zero over the epochs)",
    ),
    "reg": (float, "Frobenius penalty weight on the factors"),
    "method": (
        ("alternating", "joint"),
        "AdaGrad step: joint (users and items at once) or alternating (the paper's)",
    ),
}


def _hyper(parser: argparse.ArgumentParser) -> None:
    from botorch_pref.lfpl.recommender import DEFAULTS

    for name, (kind, help_text) in _HYPERPARAMETERS.items():
        how = {"choices": kind} if isinstance(kind, tuple) else {"type": kind}
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, default=DEFAULTS[name], help=help_text, **how)


def _training_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The training hyperparameters of ``args`` (all but the dimension), by keyword."""
    return {name: getattr(args, name) for name in _HYPERPARAMETERS if name != "dim"}


def _common(parser: argparse.ArgumentParser, progress: bool) -> None:
    """Seed, device, threads and ``--progress/--no-progress`` (on by default if ``progress``)."""
    parser.add_argument(
        "--seed", type=nonnegative_int, default=0, help="seed of the data split and the fit"
    )
    _device_arg(parser)
    parser.add_argument(
        "--threads",
        type=_threads,
        default="auto",
        help="CPU threads: auto (the command restarts itself with OMP_WAIT_POLICY=PASSIVE and "
        "keeps torch's thread count, unless OMP_NUM_THREADS, MKL_NUM_THREADS or "
        "OMP_WAIT_POLICY is set) or a number",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=progress,
        help="show progress bars",
    )


def _threads(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(f"{err} (or 'auto')") from None


def _device(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ValueError(
            f"--device {name!r} is not a torch device (e.g. cpu, cuda, cuda:1)."
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for, but CUDA is not available.")
    return device


def _training_device(args: argparse.Namespace, command: str) -> torch.device:
    """The device of a training command; with ``--threads auto`` on the CPU, first restart the
    command under passive OpenMP (:func:`~botorch_pref.lfpl.openmp.reexec_with_passive_openmp`).
    """
    device = _device(args.device)
    if args.threads == "auto" and device.type == "cpu":
        reexec_with_passive_openmp(["lfpl", command])
    return device


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def run_synthetic(args: argparse.Namespace) -> int:
    """Cross-validate LFPL on synthetic rankings and print a table; returns the exit code."""
    device = _training_device(args, "synthetic")
    with lfpl_threads(args.threads, device):
        return _run_synthetic(args)


def _run_synthetic(args: argparse.Namespace) -> int:
    from botorch_pref.lfpl.simulation import cross_validate_lfpl, sample_lfpl

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
            dim=args.true_dim if args.dim is None else args.dim,
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
    device = _training_device(args, "implicit")
    with lfpl_threads(args.threads, device):
        return _run_implicit(args)


def _run_implicit(args: argparse.Namespace) -> int:
    from botorch_pref.data import load_movielens
    from botorch_pref.lfpl.factor_model import LFPL
    from botorch_pref.lfpl.implicit import (
        ImplicitFeedback,
        MostPopular,
        Random,
        evaluate,
        fit_implicit,
        leave_one_out,
    )

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
        **_training_settings(args),
        optimizer=args.optimizer,
        seed=args.seed,
        progress=args.progress,
        threads=args.threads,
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


def _load_data(path: str, min_rating: float | None) -> tuple[Any, Any]:
    from botorch_pref.data import load_movielens
    from botorch_pref.lfpl.implicit import ImplicitFeedback

    raw = load_movielens(path, min_rating=min_rating)
    return raw, ImplicitFeedback(raw.pairs, raw.n_users, raw.n_items, raw.timestamps)


def run_train(args: argparse.Namespace) -> int:
    """Fit an :class:`LFPLRecommender` on a ratings file and save it; returns the exit code."""
    from botorch_pref.lfpl.implicit import leave_one_out
    from botorch_pref.lfpl.recommender import LFPLRecommender

    device = _training_device(args, "train")
    group = None
    if args.distributed:
        from botorch_pref.lfpl.distributed import init_from_env

        _, _, device = init_from_env(device.type)
        group = "default"
    rec = LFPLRecommender(
        args.dim,
        **_training_settings(args),
        seed=args.seed,
        device=device,
        threads=args.threads,
    )
    out = Path(args.out)
    if not out.parent.is_dir():
        raise FileNotFoundError(f"no such directory for --out: {out.parent}")
    if out.is_dir():
        raise ValueError(f"--out {out} is a directory; give the file to write the model to.")
    raw, data = _load_data(args.data, args.min_rating)
    train = data
    if args.holdout != "none":
        train = leave_one_out(data, seed=args.seed, by=args.holdout).train
        rec.info["holdout"] = {"by": args.holdout, "seed": args.seed}
    rec.info["data"] = {"file": Path(args.data).name, "min_rating": args.min_rating}
    rec.fit_feedback(train, raw.user_ids, raw.item_ids, progress=args.progress, process_group=group)
    fit = rec.fit_result_
    assert fit is not None
    if group is not None:
        import torch.distributed as dist

        rank, world = dist.get_rank(), dist.get_world_size()
        dist.destroy_process_group()
        if rank != 0:
            return 0
        rec.info["processes"] = world
    _save(rec, out)
    print(
        f"LFPL/IF: {len(train)} training interactions, {data.n_users} users, {data.n_items} "
        f"items; {fit.epochs_run} epochs in {fit.seconds:.1f} s (final loss "
        f"{fit.train_loss[-1]:.4f}; {fit.threads} threads, OMP_WAIT_POLICY="
        f"{os.environ.get('OMP_WAIT_POLICY')}); saved to {out}"
    )
    return 0


def _save(rec: Any, out: Path) -> None:
    """Write ``rec`` to ``out``; a file that cannot be written is one ``ValueError``."""
    try:
        rec.save(out)
    except (OSError, RuntimeError) as err:  # torch.save reports some OS errors as RuntimeError
        reason = getattr(err, "strerror", None) or str(err).strip().splitlines()[-1]
        raise ValueError(f"cannot write --out {out}: {reason}") from None


def run_recommend(args: argparse.Namespace) -> int:
    """Print the top-k items of users from a saved model; returns the exit code."""
    from botorch_pref.lfpl.recommender import LFPLRecommender

    rec = LFPLRecommender.load(args.model, device=_device(args.device))
    users: list[int | str] = list(args.users)
    if rec.user_ids and all(isinstance(u, int) for u in rec.user_ids):
        parsed = []
        for text in users:
            try:
                parsed.append(int(str(text)))
            except ValueError:
                raise ValueError(
                    f"user id {text!r} is not an integer, and this model's user ids are."
                ) from None
        users = parsed
    result = rec.recommend(users, k=args.k, exclude_seen=not args.include_seen)
    rows = []
    for user, items, scores in zip(result.users, result.items, result.scores, strict=True):
        for rank, (item, score) in enumerate(zip(items, scores, strict=True)):
            rows.append((user, rank + 1, item, f"{score:.4f}"))
    print(_table(("user", "rank", "item", "score"), rows))
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    """Evaluate a saved model on the leave-one-out split it was trained on."""
    from botorch_pref.lfpl.implicit import MostPopular, Random, evaluate, leave_one_out
    from botorch_pref.lfpl.recommender import LFPLRecommender

    device = _device(args.device)
    rec = LFPLRecommender.load(args.model, device=device)
    holdout = rec.info.get("holdout")
    if not holdout:
        raise ValueError(
            f"{args.model} was trained on all interactions: train it with --holdout random "
            "(or latest) to evaluate it."
        )
    min_rating = (rec.info.get("data") or {}).get("min_rating")
    raw, data = _load_data(args.data, min_rating)
    if raw.user_ids != rec.user_ids or raw.item_ids != rec.item_ids:
        raise ValueError(f"{args.data} has other users or items than {args.model} was fitted on.")
    split = leave_one_out(data.to(device), seed=holdout["seed"], by=holdout["by"])
    assert rec.train_ is not None
    if not torch.equal(split.train.keys, rec.train_.keys.to(device)):
        raise ValueError(f"{args.model} was not trained on this split of {args.data}.")
    model = rec.model_
    rows = []
    for name, scorer in (
        (f"LFPL/IF (K={rec.params['dim']})", model),
        ("MostPopular", MostPopular(split.train)),
        ("Random", Random(data.n_items, seed=holdout["seed"], device=device)),
    ):
        result = evaluate(scorer, split, k=args.k)  # type: ignore[arg-type]
        rows.append((name, f"{result.auc:.4f}", f"{result.hr:.4f}", f"{result.ndcg:.4f}"))
    print(
        f"leave-one-out ({holdout['by']}, seed {holdout['seed']}) for {split.users.numel()} "
        f"users, {data.n_items} items"
    )
    print(_table(("model", "AUC", f"HR@{args.k}", f"NDCG@{args.k}"), rows))
    return 0


#: The sub-commands of ``botorch-pref lfpl``: ``(name, one line for the list, --help text,
#: function that adds the options, function that runs it)``; :func:`add_arguments` reads it.
SUBCOMMANDS = (
    (
        "synthetic",
        "cross-validate LFPL on rankings drawn from a known LFPL",
        "Draw rankings from a random LFPL, cross-validate, and print the held-out "
        "Kendall tau of the fitted model next to the true model's.",
        _synthetic_options,
        run_synthetic,
    ),
    (
        "implicit",
        "LFPL/IF on MovieLens-style interactions, leave-one-out",
        "Fit LFPL/IF on interactions read from a MovieLens or RecBole file and "
        "print leave-one-out AUC, HR@k and NDCG@k next to MostPopular and Random.",
        _implicit_options,
        run_implicit,
    ),
    (
        "train",
        "fit an LFPL/IF recommender on a ratings file and save it",
        "Fit LFPL/IF on every interaction of a MovieLens or RecBole file (or on the "
        "training part of a leave-one-out split, for 'evaluate') and save it to one file.",
        _train_options,
        run_train,
    ),
    (
        "recommend",
        "top-k items for users from a saved model",
        "Print the k items of highest score for each user (original ids).",
        _recommend_options,
        run_recommend,
    ),
    (
        "evaluate",
        "leave-one-out AUC, HR@k and NDCG@k of a saved model",
        "Rebuild the leave-one-out split a model was trained on (train --holdout) "
        "from the same file and print its metrics next to MostPopular and Random.",
        _evaluate_options,
        run_evaluate,
    ),
)
