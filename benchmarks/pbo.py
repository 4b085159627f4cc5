r"""Preferential BO benchmark: the qEUBO protocol, our model next to BoTorch's PairwiseGP.

Protocol (the qEUBO paper's, Astudillo et al. 2023): a Gumbel user whose noise is calibrated
so that two designs from the top 1% of :math:`10^6` random designs are answered wrongly 20% of
the time; :math:`4d` random initial queries, then ``--queries`` acquisition queries (50, or 150
for the long version); after every answer the recommendation is the compared design with the
highest posterior mean, scored by :math:`\log_{10}` of its regret :math:`f^\star - f(x^\star)`.

Common random numbers: replication ``r`` uses the optimiser seed ``seed + r`` (so the initial
queries, and every random query, are the same for every strategy and model) and a user whose
noise generator is seeded with ``seed + r`` as well (the same noise stream for every strategy and
model; the answers differ only where the queries differ). Each model (``laplace`` for
:class:`~botorch_pref.PairwiseLaplaceGP`, ``pairwisegp`` for ``botorch.models.PairwiseGP``) runs
in the same :class:`~botorch_pref.PreferenceOptimizer` with the same acquisition, refit schedule
and ``optimize_acqf`` settings: by default (``--effort protocol``) the :math:`d q` restarts and
:math:`30 d q` raw samples of BoTorch's own PBO pipeline (``--effort loop``
uses the optimiser's clipped defaults), and the optimiser's refit schedule (after each of the
first 30 answers, then every 5th); ``--refit-every 1`` refits after every answer, as BoTorch's
pipeline does.

Output: per run, a line as it finishes; at the end, per problem, mean log10 regret +- standard
error after 25 and 50 (and 150) acquisition queries and the median seconds per acquisition
query (ask + tell, the tell including any refit), with the ratio of our model's time to
PairwiseGP's for the same strategy. A JSON with every run's regret and time per query is
rewritten after every run (so an interrupted benchmark keeps what it did), and a PNG of the
regret curves is written at the end.

Examples::

    python -m benchmarks.pbo                               # everything: several hours
    python -m benchmarks.pbo --problems branin --strategies eubo random \
        --models laplace --replications 1 --queries 5      # a smoke test, under a minute
    python -m benchmarks.pbo --problems hartmann6 --runs laplace:eubo laplace:random \
        laplace:champion-challenger pairwisegp:eubo --replications 5

``--merge a.json b.json --out c`` summarises runs made in several invocations (for instance
seeds split across processes) as one table and one plot.

``--suite`` runs the question-quality suite: our strategies through the batched loop next to
BoTorch's own pipeline on the same seeds (see ``benchmarks/suite.py``).

``--batched`` runs all replications in lockstep on one batched model next to the sequential
loop and ``--choice-study`` compares q = 4 answers as choices, as pairs, and q = 2 (see
``benchmarks/pbo_batched.py``).

Leave torch's thread count at its default: ``torch.set_num_threads`` breaks PairwiseGP's batched
posteriors on some CPU builds (an MKL ``lu_solve`` pivot error). Set ``OMP_WAIT_POLICY=PASSIVE``
on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from benchmarks import (
    pbo_batched,  # the --batched and --choice-study modes
    suite,  # the --suite mode
)
from benchmarks.suite_stats import fmt_mean_se
from botorch_pref.loop import MODEL_FACTORIES, STRATEGIES, PreferenceOptimizer
from botorch_pref.loop.policy import SETTINGS
from botorch_pref.loop.replications import log10_regret
from botorch_pref.test_functions import Utility, get_utility
from botorch_pref.users import SimulatedUser, calibrate_noise

PROBLEMS = ("hartmann6", "ackley6", "branin")
# Reference: BoTorch's PBO pipeline (PairwiseGP) on this machine, mean log10 regret
# after 50 queries over 5 replications, and the calibrated Gumbel scales at 20% error.
REFERENCE = {
    "hartmann6": {"scale": 0.164, "eubo": -0.35, "qeubo": -0.69, "random": 0.29},
    "ackley6": {"scale": 0.140, "eubo": -0.14, "qeubo": -0.19, "random": 0.63},
    "branin": {"scale": 0.096, "eubo": 0.20, "qeubo": -0.43, "random": 0.37},
}


@dataclass
class Run:
    """One replication of one (problem, model, strategy)."""

    problem: str
    model: str
    strategy: str
    replication: int
    seed: int
    n_initial: int
    regret: list[float] = field(default_factory=list)  # after each answer, initial included
    seconds: list[float] = field(default_factory=list)  # per query (ask + tell)
    best_x: list[float] | None = None
    error: str | None = None
    wall: float = 0.0

    def log_regret_after(self, k: int) -> float | None:
        """log10 regret after ``k`` acquisition queries, or None if the run is shorter."""
        i = self.n_initial + k - 1
        if i < 0 or i >= len(self.regret):
            return None
        return float(log10_regret(self.regret[i]))

    def acquisition_seconds(self) -> list[float]:
        return self.seconds[self.n_initial :]


def run_one(
    utility: Utility,
    scale: float,
    model: str,
    strategy: str,
    replication: int,
    seed: int,
    queries: int,
    q: int,
    *,
    effort: str = "protocol",
    refit_every: int | None = None,
) -> Run:
    """One benchmark run; exceptions are caught and recorded in ``Run.error``.

    ``effort="protocol"`` gives ``optimize_acqf`` the protocol's :math:`d q` restarts and
    :math:`30 d q` raw samples (:math:`q` the number of points optimised jointly), ``"loop"``
    the optimiser's own (clipped) defaults. ``refit_every`` (default: the optimiser's schedule)
    refits the hyperparameters after every ``refit_every``-th answer from the first on.
    """
    d = utility.dim
    kwargs: dict = {}
    if effort == "protocol":
        q_opt = 1 if strategy == "champion-challenger" else q
        kwargs |= {"num_restarts": d * q_opt, "raw_samples": 30 * d * q_opt}
    elif effort != "loop":
        raise ValueError(f"effort must be 'protocol' or 'loop', got {effort!r}.")
    if refit_every is not None:
        kwargs |= {"refit_every": refit_every, "refit_all_until": 0}
    run = Run(utility.name, model, strategy, replication, seed + replication, 4 * d)
    user = SimulatedUser(utility, noise="gumbel", scale=scale, seed=seed + replication)
    bounds = torch.stack([torch.zeros(d), torch.ones(d)]).to(torch.float64)
    start = time.perf_counter()
    try:
        opt = PreferenceOptimizer(
            bounds,
            strategy=strategy,
            q=q,
            n_initial=4 * d,
            model=model,
            seed=seed + replication,
            **kwargs,
        )
        for _ in range(4 * d + queries):
            t0 = time.perf_counter()
            X = opt.ask()
            opt.tell(X, int(user.choose(X)))
            run.seconds.append(time.perf_counter() - t0)
            best = opt.best()
            run.regret.append(float(utility.regret(best.x)))
        run.best_x = best.x.tolist()
    except Exception as err:  # a failed run is reported, the benchmark goes on
        run.error = f"{type(err).__name__}: {err}"
        traceback.print_exc(file=sys.stderr)
    run.wall = time.perf_counter() - start
    return run


def summarise(runs: list[Run], checkpoints: list[int]) -> str:
    """The results table, one block per problem."""
    lines = []
    for problem in dict.fromkeys(r.problem for r in runs):
        pruns = [r for r in runs if r.problem == problem]
        configs = list(dict.fromkeys((r.model, r.strategy) for r in pruns))
        medians = {}
        for cfg in configs:
            secs = [
                s for r in pruns if (r.model, r.strategy) == cfg for s in r.acquisition_seconds()
            ]
            medians[cfg] = statistics.median(secs) if secs else math.nan
        head = f"{'model':<11} {'strategy':<20} {'runs':>4}"
        head += "".join(f" {'log10 regret @' + str(k):>22}" for k in checkpoints)
        head += f" {'s/query':>8} {'time vs PairwiseGP':>19}"
        lines += [f"\n{problem}", head, "-" * len(head)]
        for cfg in configs:
            cruns = [r for r in pruns if (r.model, r.strategy) == cfg]
            ok = [r for r in cruns if r.error is None]
            row = f"{cfg[0]:<11} {cfg[1]:<20} {len(ok):>4}"
            for k in checkpoints:
                vals = [v for r in ok if (v := r.log_regret_after(k)) is not None]
                row += f" {fmt_mean_se(vals):>22}"
            ratio = ""
            other = medians.get(("pairwisegp", cfg[1]))
            if cfg[0] != "pairwisegp" and other and not math.isnan(other):
                ratio = f"{medians[cfg] / other:.2f}"
            row += f" {medians[cfg]:>8.2f} {ratio:>19}"
            if len(ok) < len(cruns):
                row += f"  ({len(cruns) - len(ok)} failed)"
            lines.append(row)
        lines += _paired_lines(pruns, configs, checkpoints[-1])
        ref = REFERENCE.get(problem)
        if ref:
            refs = ", ".join(f"{k} {v:+.2f}" for k, v in ref.items() if k != "scale")
            lines.append(f"reference (BoTorch PBO pipeline, 5 runs, @50): {refs}")
    return "\n".join(lines)


def _paired_lines(runs: list[Run], configs: list[tuple[str, str]], k: int) -> list[str]:
    """Per strategy, our model minus PairwiseGP after ``k`` queries, paired by seed.

    Common random numbers make the paired difference far less noisy than the difference of
    the two means; seeds that only one of the two models ran are left out.
    """
    lines = []
    for model, strategy in configs:
        if model == "pairwisegp" or ("pairwisegp", strategy) not in configs:
            continue
        ours = {r.seed: r for r in runs if (r.model, r.strategy) == (model, strategy)}
        theirs = {r.seed: r for r in runs if (r.model, r.strategy) == ("pairwisegp", strategy)}
        diffs, ratios = [], []
        for seed in sorted(ours.keys() & theirs.keys()):
            a, b = ours[seed], theirs[seed]
            if a.error or b.error:
                continue
            va, vb = a.log_regret_after(k), b.log_regret_after(k)
            if va is not None and vb is not None:
                diffs.append(va - vb)
            sa, sb = a.acquisition_seconds(), b.acquisition_seconds()
            if sa and sb:
                ratios.append(statistics.median(sa) / statistics.median(sb))
        if diffs:
            ratio = f"{statistics.median(ratios):.2f}" if ratios else "-"
            lines.append(
                f"{model} - pairwisegp, {strategy}, paired over {len(diffs)} seeds: "
                f"log10 regret @{k} {fmt_mean_se(diffs)}; time per query, median of the "
                f"per-seed ratios {ratio}"
            )
    return lines


def load_runs(paths: list[str]) -> tuple[list[Run], list[int]]:
    """Runs and checkpoints from JSON files written by earlier invocations (``--merge``)."""
    runs: list[Run] = []
    checkpoints: set[int] = set()
    for path in paths:
        payload = json.loads(Path(path).read_text())
        checkpoints.update(payload["config"]["checkpoints"])
        new = [Run(**r) for r in payload["runs"]]
        keys = {(r.problem, r.model, r.strategy, r.seed) for r in runs}
        shared = [r for r in new if (r.problem, r.model, r.strategy, r.seed) in keys]
        if shared:
            r = shared[0]
            raise SystemExit(
                f"{path} repeats the run {r.problem} {r.model} {r.strategy} seed {r.seed}: "
                "merge runs of other seeds only."
            )
        runs += new
    return runs, sorted(checkpoints)


def plot(runs: list[Run], path: Path) -> None:
    """Mean log10 regret (+- s.e.) per query, one panel per problem.

    Colour: strategy; solid lines: PairwiseLaplaceGP, dashed: PairwiseGP, dotted: other models.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    problems = list(dict.fromkeys(r.problem for r in runs))
    fig = Figure(figsize=(5.2 * len(problems), 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(problems), squeeze=False)[0]
    for ax, problem in zip(axes, problems, strict=True):
        pruns = [r for r in runs if r.problem == problem and r.error is None]
        colour = {s: f"C{i}" for i, s in enumerate(STRATEGIES)}
        for cfg in dict.fromkeys((r.model, r.strategy) for r in pruns):
            cruns = [r for r in pruns if (r.model, r.strategy) == cfg]
            n0 = cruns[0].n_initial
            length = min(len(r.regret) for r in cruns)
            curves = log10_regret([r.regret[:length] for r in cruns])
            mean = curves.mean(0)
            se = curves.std(0) / math.sqrt(len(cruns)) if len(cruns) > 1 else 0 * mean
            x = torch.arange(length) - n0 + 1
            style = {"laplace": "-", "pairwisegp": "--"}.get(cfg[0], ":")
            c = colour[cfg[1]]
            ax.plot(x, mean, style, color=c, label=f"{cfg[0]} {cfg[1]}")
            ax.fill_between(x, mean - se, mean + se, color=c, alpha=0.15)
        ax.axvline(0.5, color="0.6", linestyle=":")
        ax.set_title(problem)
        ax.set_xlabel("acquisition query (random ones at <= 0)")
        ax.set_ylabel("log10 regret of the recommendation")
        ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def _parse_runs(args: argparse.Namespace) -> list[tuple[str, str]]:
    if args.runs:
        configs = []
        for item in args.runs:
            model, _, strategy = item.partition(":")
            if model not in MODEL_FACTORIES or strategy not in STRATEGIES:
                raise SystemExit(f"--runs takes MODEL:STRATEGY pairs, got {item!r}.")
            configs.append((model, strategy))
        return configs
    return [(m, s) for m in args.models for s in args.strategies]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--problems",
        nargs="+",
        help="default: hartmann6 ackley6 branin (--suite: the suite; 'holdout': the problems "
        "outside it that check its defaults)",
    )
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument(
        "--models", nargs="+", choices=list(MODEL_FACTORIES), default=list(MODEL_FACTORIES)
    )
    parser.add_argument(
        "--runs", nargs="+", metavar="MODEL:STRATEGY", help="explicit pairs (overrides both)"
    )
    parser.add_argument("--replications", type=int, help="default 5 (--suite: 16)")
    parser.add_argument("--queries", type=int, default=50, help="after 4d initial (or 150)")
    parser.add_argument("--error-rate", type=float, default=0.2)
    parser.add_argument("--q", type=int, default=2, help="options per query")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--effort",
        choices=("protocol", "loop"),
        default="protocol",
        help="optimize_acqf restarts/raw samples: d*q and 30*d*q, or the optimiser's defaults",
    )
    parser.add_argument(
        "--refit-every",
        type=int,
        default=None,
        help="refit after every N-th answer (default: the optimiser's schedule)",
    )
    parser.add_argument("--out", default="benchmarks/out/pbo", help="prefix of .json and .png")
    parser.add_argument(
        "--merge",
        nargs="+",
        metavar="JSON",
        help="summarise and plot the runs of earlier JSON outputs together (run nothing)",
    )
    pbo_batched.add_arguments(parser)
    suite.add_arguments(parser)
    return parser


#: Options the suite's modes (``--suite``, ``--compare``, ``--tabulate``) do not read, and the
#: options only they read: either given where it would be ignored is an error.
NOT_IN_SUITE = (
    "strategies", "models", "runs", "q", "effort", "refit_every", "merge", "batched",
    "choice_study", "device", "dtype", "sequential_replications", "no_sequential",
)  # fmt: skip
SUITE_ONLY = ("suite_strategies", "set", "anchor", "tie_band", "answers", "backend")


def _check_unused(parser: argparse.ArgumentParser, args: argparse.Namespace, suite: bool) -> None:
    """Refuse, in one line, options given on the command line that this mode would ignore."""
    ignored = NOT_IN_SUITE if suite else SUITE_ONLY
    given = [name for name in ignored if getattr(args, name) != parser.get_default(name)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        where = "the suite (--suite, --compare, --tabulate)" if suite else "this mode (no --suite)"
        parser.error(f"{flags}: not used by {where}.")


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace, suite: bool) -> None:
    """One-line errors (exit status 2) for settings no run can use, or this mode would ignore."""
    _check_unused(parser, args, suite)
    for name in ("replications", "sequential_replications"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {value}.")
    if args.queries < 1 or args.q < 2:
        parser.error(f"need --queries >= 1 and --q >= 2, got {args.queries} and {args.q}.")
    if not 0 < args.error_rate < 0.5:
        parser.error(f"--error-rate must lie in (0, 0.5), got {args.error_rate}.")
    for problem in args.problems:
        try:
            get_utility(problem)
        except ValueError as err:
            parser.error(str(err))
    fields = set(SETTINGS) - {"seed"}
    names = [setting.partition("=")[0] for setting in args.set or []]
    for setting, name in zip(args.set or [], names, strict=True):
        if "=" not in setting:
            parser.error(f"--set {setting}: expected NAME=VALUE.")
        if name not in fields:
            parser.error(f"--set {name}: not a loop setting ({', '.join(sorted(fields))}).")
        if names.count(name) > 1:
            parser.error(f"--set {name}: given more than once.")
    _check_tie_band(parser, args)


def _check_tie_band(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Users who answer "no preference" need a model of ties, and BoTorch's pipeline has none."""
    if not 0 <= args.tie_band < math.inf:
        parser.error(f"--tie-band must be a finite number >= 0, got {args.tie_band}.")
    ties = dict(suite.setting(s) for s in args.set or []).get("ties") is True
    if args.tie_band > 0 and (not ties or args.anchor != "none"):
        parser.error("--tie-band needs --set ties=true and --anchor none.")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    suite_mode = args.suite or args.compare or args.tabulate
    args.problems = suite.expand_problems(args.problems) if suite_mode else args.problems
    args.problems = args.problems or list(PROBLEMS)
    _check(parser, args, bool(suite_mode))
    if suite_mode:
        args.replications = args.replications or 16
        if not args.suite:  # --compare and --tabulate read files: their errors are one line
            try:
                return suite.run(args)
            except ValueError as err:
                parser.error(str(err))
        return suite.run(args)
    args.replications = args.replications or 5
    if args.merge:
        runs, checkpoints = load_runs(args.merge)
        print(summarise(runs, checkpoints), flush=True)
        plot(runs, Path(args.out).with_suffix(".png"))
        print(f"\nwrote {Path(args.out).with_suffix('.png')}", flush=True)
        return 0
    if args.choice_study:
        return pbo_batched.choice_study(args)
    if args.batched:
        return pbo_batched.run(args)
    return sequential(args)


def sequential(args: argparse.Namespace) -> int:
    """Run every (problem, model, strategy, replication); print and save as they finish."""
    configs = _parse_runs(args)
    checkpoints = [k for k in (25, 50, 150) if k <= args.queries] or [args.queries]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"PBO benchmark: {', '.join(args.problems)}; {len(configs)} model/strategy pairs; "
        f"{args.replications} replications; 4d random + {args.queries} queries; q = {args.q}; "
        f"Gumbel user at {args.error_rate:.0%} error; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads",
        flush=True,
    )
    runs: list[Run] = []
    scales: dict[str, float] = {}
    for problem in args.problems:
        utility = get_utility(problem)
        scales[problem] = calibrate_noise(utility, error_rate=args.error_rate, noise="gumbel")
        ref = REFERENCE.get(problem, {}).get("scale")
        print(
            f"{problem}: Gumbel scale {scales[problem]:.4f}"
            + (f" (reference {ref})" if ref else ""),
            flush=True,
        )
        for r in range(args.replications):
            for model, strategy in configs:
                run = run_one(
                    utility, scales[problem], model, strategy, r, args.seed, args.queries,
                    args.q, effort=args.effort, refit_every=args.refit_every,
                )  # fmt: skip
                runs.append(run)
                _report(run, checkpoints, args.replications)
                payload = {
                    "config": vars(args) | {"scales": scales, "checkpoints": checkpoints},
                    "runs": [asdict(x) for x in runs],
                }
                out.with_suffix(".json").write_text(json.dumps(payload, indent=1))
    print(summarise(runs, checkpoints), flush=True)
    plot(runs, out.with_suffix(".png"))
    print(f"\nwrote {out.with_suffix('.json')} and {out.with_suffix('.png')}", flush=True)
    return 0


def _report(run: Run, checkpoints: list[int], replications: int) -> None:
    """One line for a finished run."""
    at = "  ".join(
        f"@{k} {v:+.2f}" for k in checkpoints if (v := run.log_regret_after(k)) is not None
    )
    secs = run.acquisition_seconds()
    med = statistics.median(secs) if secs else math.nan
    status = f"FAILED ({run.error})" if run.error else at
    print(
        f"  {run.problem} {run.model} {run.strategy} rep {run.replication + 1}/{replications}: "
        f"{status}; median {med:.2f} s/query; {run.wall:.0f} s",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
