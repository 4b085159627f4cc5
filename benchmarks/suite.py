r"""The question-quality suite (``benchmarks/pbo.py --suite``): the product's loop against BoTorch.

Problems (:data:`SUITE`): Hartmann-6, Ackley-6, Branin on its own box, Levy-4, Alpine1-3 and
Hartmann-3 embedded in 10 dimensions (7 irrelevant inputs). Protocol (the qEUBO paper's): a
Gumbel user calibrated to 20% wrong answers on pairs of top-1% designs, :math:`4 d` random
initial queries, ``--queries`` (50) acquisition queries, the recommendation after every answer
the compared design with the highest posterior mean, scored by :math:`\log_{10}` regret.

Ours: every strategy's ``R`` replications run in lockstep through the product's own loop,
:func:`botorch_pref.loop.run_replications` with ``backend="batched"`` and the settings of
:data:`~botorch_pref.loop.policy.SETTINGS` (their defaults, or ``--set NAME=VALUE`` for a lever).
The anchor: BoTorch's pipeline in BoTorch's own classes (``benchmarks/suite_anchor.py``, cached
in ``benchmarks/out/anchor/``) on the same seeds, with the same initial queries and user noise.

Printed: per problem and strategy, mean log10 regret +- standard error after 10, 25 and 50
acquisition queries, the regret of the best design compared by then (an oracle's pick among
the same designs: the questions' share of the regret; ours and BoTorch's), BoTorch's after
50, the paired difference to BoTorch's same strategy
(ours minus theirs, by seed) with its standard error, and seconds per acquisition query (ours:
a batched step's wall time over ``R``; BoTorch's: one run's median). A JSON of every curve and a
PNG of the mean curves are written; ``--compare A.json B.json`` prints the paired difference of
two suite runs (a lever's A/B with common random numbers), and ``--tabulate JSON...`` merges suite
runs into one table and plot with the BoTorch runs cached by then. Both also print where the
questions go for runs that recorded their designs (``benchmarks/suite_questions.py``).
``--problems holdout`` runs the problems outside the suite (:data:`HOLDOUT`) on which the
defaults are checked. ``--answers binary graded5 ...`` adds the answers axis (binary, graded and
rated answers, paired by seed: ``benchmarks/suite_answers.py``) and its own table.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import statistics
import time
from pathlib import Path

import torch

from benchmarks import suite_anchor, suite_answers
from benchmarks.suite_questions import log_regret_asked, questions
from benchmarks.suite_stats import fmt_mean_se
from botorch_pref.loop import run_replications
from botorch_pref.loop.replications import log10_regret
from botorch_pref.test_functions import get_utility
from botorch_pref.users import calibrate_noise


def expand_problems(names: list[str] | None) -> list[str]:
    """The problems named, ``suite`` and ``holdout`` standing for :data:`SUITE` and
    :data:`HOLDOUT`; the suite when none are named."""
    groups = {"suite": SUITE, "holdout": HOLDOUT}
    out = [p for name in names or ["suite"] for p in groups.get(name.lower(), (name,))]
    return list(dict.fromkeys(out))


SUITE = ("hartmann6", "ackley6", "branin", "levy4", "alpine1-3", "hartmann3-in-10")
#: Problems outside the suite, on which the defaults chosen on the suite are checked
#: (``--problems holdout``); no default was tuned on them.
HOLDOUT = ("hartmann3", "levy6", "ackley3", "alpine1-5", "two-bump")
SUITE_STRATEGIES = ("eubo", "qeubo", "champion-challenger", "random")
CHECKPOINTS = (10, 25, 50)


def setting(text: str) -> tuple[str, object]:
    """``NAME=VALUE`` of ``--set`` as ``(name, value)``: int, float, bool, ``None`` or text."""
    name, _, value = text.partition("=")
    for cast in (int, float):
        try:
            return name, cast(value)
        except ValueError:
            pass
    return name, {"true": True, "false": False, "none": None}.get(value.lower(), value)


def run_ours(problem: str, strategy: str, R: int, queries: int, seed: int, scale: float,
             settings: dict, tie_band: float = 0.0, **options) -> dict:  # fmt: skip
    """``R`` lockstep replications of the product's loop: log10 regret curves and timing
    (``tie_band``: the users' "no preference" band in noise scales; ``options``: further
    arguments of ``run_replications``, ``backend`` and ``grade_noise``)."""
    d = get_utility(problem).dim
    after = [k for k in CHECKPOINTS if k <= queries]
    res = run_replications(
        problem, strategy, R, queries, scale=scale, seed=seed, n_initial=4 * d,
        anywhere_after=after, tie_band=tie_band, **options, **settings,
    )  # fmt: skip
    n0 = res.n_initial - 1  # curves start at the last initial answer
    return {
        "log_regret": res.log_regret()[:, n0:].tolist(),
        "log_regret_compared": res.log_regret_compared()[:, n0:].tolist(),
        "log_regret_asked": log_regret_asked(problem, res.queries[:, res.n_initial :]).tolist(),
        "anywhere_after": after,
        "log_regret_anywhere": res.log_regret_anywhere().tolist() if after else [],
        "seconds_per_query": float(res.seconds[res.n_initial :].mean()) / R,
        "seeds": res.seeds,
        "no_preference": (res.winners == -1).sum(-1).tolist(),  # per run (--tie-band)
    }


def _log10_from(regret: list, start: int) -> list[float]:
    """Log10 of a cached run's regrets from answer ``start`` on (floored as our runs' are)."""
    return log10_regret(regret[start:]).tolist()


def run_anchor(problem: str, strategy: str, R: int, queries: int, seed: int, scale: float,
               mode: str) -> dict | None:  # fmt: skip
    """BoTorch's pipeline on the same seeds (``mode``: ``run``, ``cached`` or ``none``)."""
    if mode == "none" or strategy not in suite_anchor.ANCHOR_STRATEGIES:
        return None
    curves, compared, asked, secs, seeds = [], [], [], [], []
    for s in range(seed, seed + R):
        path = suite_anchor.cache_path(problem, strategy, 2, s, queries, scale)
        if mode == "cached" and not path.exists():
            continue
        run = suite_anchor.run_anchor(problem, strategy, s, queries, scale=scale)
        n0 = run["n_initial"]
        curves.append(_log10_from(run["regret"], n0 - 1))
        if "regret_compared" in run:  # runs cached before it was recorded lack it
            compared.append(_log10_from(run["regret_compared"], n0 - 1))
        asked.append(None)  # likewise the designs asked (``None`` for a run without them)
        if "designs" in run:
            designs = torch.tensor(run["designs"], dtype=torch.float64)
            designs = designs[run["q"] * n0 :].reshape(-1, run["q"], designs.shape[-1])
            asked[-1] = log_regret_asked(problem, designs).tolist()
        secs.append(statistics.median(run["seconds"]))
        seeds.append(s)
    if not curves:
        return None
    out = {"log_regret": curves, "seconds_per_query": statistics.median(secs), "seeds": seeds}
    if len(compared) == len(curves):
        out["log_regret_compared"] = compared
    if any(a is not None for a in asked):
        out["log_regret_asked"] = asked
    return out


def _by_seed(cell: dict) -> dict[int, list[float]]:
    """A cell's log10 regret curves keyed by seed."""
    return dict(zip(cell["seeds"], cell["log_regret"], strict=True))


def paired(a: dict, b: dict, k: int) -> list[float]:
    """Per common seed, ``a``'s log10 regret minus ``b``'s after ``k`` acquisition queries."""
    ia = {s: c[k] for s, c in _by_seed(a).items() if len(c) > k}
    ib = {s: c[k] for s, c in _by_seed(b).items() if len(c) > k}
    return [ia[s] - ib[s] for s in sorted(ia.keys() & ib.keys())]


def anywhere(ours: dict, k: int) -> list[float]:
    """Log10 regrets of the posterior-mean maximisers after ``k`` queries (none if not run)."""
    after = ours.get("anywhere_after", [])
    return [c[after.index(k)] for c in ours["log_regret_anywhere"]] if k in after else []


def answers_to_match(ours: dict, anchor: dict, queries: int) -> int | None:
    """How many acquisition queries ours needs to reach BoTorch's figure after ``queries``.

    The first ``k`` from which our mean log10 regret, over the seeds both have, stays at or
    below the anchor's mean after ``queries`` queries up to the end of our curves: "ours finds
    as good a design with ``k`` answers as BoTorch's pipeline with ``queries``, and keeps it".
    A mean curve that only touches the target and rises above it again has not matched it.
    ``None`` if our curves do not stay there (or no seed is shared).
    """
    theirs, mine = _by_seed(anchor), _by_seed(ours)
    seeds = [s for s in mine if s in theirs and len(theirs[s]) > queries]
    if not seeds:
        return None
    target = statistics.fmean(theirs[s][queries] for s in seeds)
    horizon = min(len(mine[s]) for s in seeds)
    means = [statistics.fmean(mine[s][k] for s in seeds) for k in range(horizon)]
    above = [k for k, m in enumerate(means) if m > target]
    first = above[-1] + 1 if above else 0
    return first if first < horizon else None


def match_cell(ours: dict, anchor: dict, queries: int) -> str:
    """:func:`answers_to_match` as a table cell: ``"> N"`` past our horizon ``N``."""
    k = answers_to_match(ours, anchor, queries)
    return f"> {min(len(c) for c in ours['log_regret']) - 1}" if k is None else str(k)


def table(results: dict, queries: int) -> str:
    """The suite's table (markdown), one row per problem and strategy.

    "anywhere" is the regret of the posterior-mean maximiser over the box
    (``best(among="anywhere")``) after the last checkpoint, "best compared" the regret of the
    best design compared by then (what a recommender that knew the utility would pick: the
    questions' share of the regret; the difference to the recommendation is the model's),
    ours and BoTorch's (for anchor runs that recorded it); "ours matches BoTorch @Q after" is
    :func:`answers_to_match`; the other columns score the loop's recommendation, the compared
    design with the highest posterior mean.
    """
    ks = [k for k in CHECKPOINTS if k <= queries] or [queries]
    head = (
        "| problem | strategy | R | "
        + " | ".join(f"ours @{k}" for k in ks)
        + f" | ours anywhere @{queries} | ours best compared @{queries}"
        + f" | BoTorch @{queries} (R) | BoTorch best compared @{queries}"
        + f" | ours - BoTorch @{queries} | ours matches BoTorch @{queries} after"
        + " | s/query ours | s/query BoTorch |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for problem, cells in results.items():
        for strategy, cell in cells.items():
            ours, anchor = cell["ours"], cell.get("anchor")
            row = f"| {problem} | {strategy} | {len(ours['seeds'])} | "
            row += " | ".join(fmt_mean_se([c[k] for c in ours["log_regret"]]) for k in ks)
            row += f" | {fmt_mean_se(anywhere(ours, queries))}"
            compared = ours.get("log_regret_compared", [])  # runs before it was recorded: none
            row += f" | {fmt_mean_se([c[queries] for c in compared])}"
            if anchor:
                theirs = fmt_mean_se([c[queries] for c in anchor["log_regret"] if len(c) > queries])
                diffs = paired(ours, anchor, queries)
                diff = fmt_mean_se(diffs)
                their_compared = anchor.get("log_regret_compared", [])
                their_best = fmt_mean_se([c[queries] for c in their_compared])
                match = match_cell(ours, anchor, queries) if diffs else "-"  # no shared seed
                row += f" | {theirs} ({len(anchor['seeds'])}) | {their_best} | {diff} | {match} | "
                row += f"{ours['seconds_per_query']:.3f} | {anchor['seconds_per_query']:.2f} |"
            else:
                row += f" | - | - | - | - | {ours['seconds_per_query']:.3f} | - |"
            lines.append(row)
    return "\n".join(lines)


def error_rate(payload: dict) -> float:
    """The user's error rate of a suite JSON (runs written before it was recorded: 0.2)."""
    return float(payload["config"].get("error_rate", 0.2))


def common_error_rate(payloads: list[dict]) -> float:
    """The users' error rate that suite JSONs share.

    Raises:
        ValueError: For runs made with users of different error rates.
    """
    rates = {error_rate(payload) for payload in payloads}
    if len(rates) > 1:
        raise ValueError(f"the runs' users err at different rates {sorted(rates)}.")
    return rates.pop()


def compare(a: dict, b: dict, queries: int) -> str:
    """Paired (by seed) difference of two suite runs ``a - b`` after each checkpoint.

    Raises:
        ValueError: For runs made with users of different error rates.
    """
    common_error_rate([a, b])
    ks = [k for k in CHECKPOINTS if k <= queries] or [queries]
    lines = ["| problem | strategy | " + " | ".join(f"A - B @{k}" for k in ks) + " |"]
    lines.append("|---|---|" + "---|" * len(ks))
    means = []
    for problem, cells in a["results"].items():
        for strategy, cell in cells.items():
            other = b["results"].get(problem, {}).get(strategy)
            if other is None:
                continue
            diffs = [paired(cell["ours"], other["ours"], k) for k in ks]
            if not diffs[-1]:  # no seed in common
                lines.append(f"| {problem} | {strategy} | " + " | ".join("-" for _ in ks) + " |")
                continue
            means.append((strategy, statistics.fmean(diffs[-1])))
            cells = " | ".join(map(fmt_mean_se, diffs))
            lines.append(f"| {problem} | {strategy} | {cells} |")
    for strategy in dict.fromkeys(s for s, _ in means):
        vals = [m for s, m in means if s == strategy]
        lines.append(f"mean over problems @{ks[-1]}, {strategy}: {statistics.fmean(vals):+.3f}")
    pairs = {(p, s): (c["ours"], b["results"].get(p, {}).get(s, {}).get("ours"))
             for p, cs in a["results"].items() for s, c in cs.items()}  # fmt: skip
    asked = questions(pairs, queries, labels=("A", "B"))
    return "\n".join(lines) + ("\n\n" + asked if asked else "")


def plot(results: dict, path: Path) -> None:
    """Mean log10 regret curves, one panel per problem (solid: ours, dashed: BoTorch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    problems = list(results)
    cols = min(3, len(problems))
    rows = math.ceil(len(problems) / cols)
    fig = Figure(figsize=(5 * cols, 4 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False).reshape(-1)
    labels = dict.fromkeys(name for cells in results.values() for name in cells)
    colour = {name: f"C{i % 10}" for i, name in enumerate(labels)}
    for ax, problem in zip(axes, problems, strict=False):
        for strategy, cell in results[problem].items():
            for who, style in (("ours", "-"), ("anchor", "--")):
                if not cell.get(who):
                    continue
                curves = cell[who]["log_regret"]
                n = min(len(c) for c in curves)
                mean = torch.tensor([c[:n] for c in curves]).mean(0)
                label = f"{'ours' if who == 'ours' else 'BoTorch'} {strategy}"
                ax.plot(range(n), mean, style, color=colour[strategy], label=label)
        ax.set_title(problem)
        ax.set_xlabel("acquisition queries")
        ax.set_ylabel("mean log10 regret")
        ax.legend(fontsize=7)
    for ax in axes[len(problems) :]:
        ax.set_visible(False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def run(args: argparse.Namespace) -> int:
    """Run the suite (or ``--compare``); print the table, write the JSON and the PNG."""
    if args.compare:
        a, b = (pool(read_runs(pattern)) for pattern in args.compare)
        print(compare(a, b, a["config"]["queries"]), flush=True)
        return 0
    if args.tabulate:
        return tabulate(args)
    settings = dict(setting(s) for s in args.set or [])
    problems, strategies, R = args.problems, args.suite_strategies, args.replications
    arms = args.answers or ["binary"]
    backend = suite_answers.backend(arms, args.backend)
    out = Path(args.out + "-suite")
    config = {"problems": list(problems), "strategies": strategies, "replications": R,
              "queries": args.queries, "seed": args.seed, "settings": settings,
              "error_rate": args.error_rate, "tie_band": args.tie_band, "answers": arms,
              "backend": backend}  # fmt: skip
    print(f"suite: {config}; torch {torch.__version__}", flush=True)
    results: dict = {}
    for problem in problems:
        scale = calibrate_noise(get_utility(problem), args.error_rate, noise="gumbel", seed=0)
        results[problem] = {}
        for strategy in strategies:
            anchor = run_anchor(problem, strategy, R, args.queries, args.seed, scale, args.anchor)
            for arm in arms:
                t0 = time.perf_counter()
                arm_settings, grade_noise = suite_answers.ARMS[arm]
                ours = run_ours(
                    problem, strategy, R, args.queries, args.seed, scale,
                    {**settings, **arm_settings}, args.tie_band, backend=backend,
                    grade_noise=grade_noise,
                )  # fmt: skip
                name = suite_answers.label(strategy, arm)
                results[problem][name] = {"ours": ours, "anchor": anchor}
                final = [c[args.queries] for c in ours["log_regret"]]
                print(f"  {problem} {name}: ours @{args.queries} {fmt_mean_se(final)}; "
                      f"{time.perf_counter() - t0:.0f} s", flush=True)  # fmt: skip
                payload = {"config": config, "results": results}
                out.with_suffix(".json").write_text(json.dumps(payload))
    print(table(results, args.queries), flush=True)
    if arms != ["binary"]:
        print("\n" + suite_answers.answers_table(results, args.queries), flush=True)
    plot(results, out.with_suffix(".png"))
    print(f"\nwrote {out.with_suffix('.json')} and {out.with_suffix('.png')}", flush=True)
    return 0


def merge(a: dict | None, b: dict) -> dict:
    """One cell from two runs of the same problem and strategy on other seeds (``a`` may be
    ``None``); a run without anywhere recommendations drops them from the merged cell."""
    if a is None:
        return b
    out = {}
    for who in ("ours", "anchor"):
        x, y = a.get(who), b.get(who)
        if not x or not y:
            out[who] = x or y
            continue
        if set(x["seeds"]) & set(y["seeds"]):
            raise ValueError(
                f"runs to merge share seeds: {sorted(set(x['seeds']) & set(y['seeds']))}"
            )
        m = {key: x[key] + y[key] for key in ("log_regret", "seeds")}
        if "log_regret_compared" in x and "log_regret_compared" in y:
            m["log_regret_compared"] = x["log_regret_compared"] + y["log_regret_compared"]
        if "log_regret_asked" in x or "log_regret_asked" in y:  # per run, None where unrecorded
            m["log_regret_asked"] = [
                *x.get("log_regret_asked", [None] * len(x["seeds"])),
                *y.get("log_regret_asked", [None] * len(y["seeds"])),
            ]
        m["seconds_per_query"] = statistics.fmean([x["seconds_per_query"], y["seconds_per_query"]])
        if x.get("anywhere_after") and x.get("anywhere_after") == y.get("anywhere_after"):
            m["anywhere_after"] = x["anywhere_after"]
            m["log_regret_anywhere"] = x["log_regret_anywhere"] + y["log_regret_anywhere"]
        out[who] = m
    return out


def read_runs(pattern: str) -> list[dict]:
    """The suite JSONs a path or a glob pattern names (in sorted order)."""
    paths = sorted(glob.glob(pattern)) or [pattern]
    return [json.loads(Path(path).read_text()) for path in paths]


def pool(payloads: list[dict]) -> dict:
    """One suite JSON from runs on other seeds: cells of the same problem and strategy are
    merged (:func:`merge`), so an A/B over several batches of seeds is one paired comparison.

    Raises:
        ValueError: For runs of different error rates or numbers of queries, or that share a
            seed.
    """
    rate = common_error_rate(payloads)
    queries = {payload["config"]["queries"] for payload in payloads}
    if len(queries) > 1:
        raise ValueError(f"the runs ask different numbers of queries {sorted(queries)}.")
    results: dict = {}
    for payload in payloads:
        for problem, cells in payload["results"].items():
            merged = results.setdefault(problem, {})
            for strategy, cell in cells.items():
                merged[strategy] = merge(merged.get(strategy), cell)
    return {"config": {"queries": queries.pop(), "error_rate": rate}, "results": results}


def tabulate(args: argparse.Namespace) -> int:
    """Pool suite JSONs (:func:`pool`: cells of the same problem and strategy on other seeds),
    each with BoTorch's runs on its seeds cached since, print the table, plot."""
    payloads = [json.loads(Path(path).read_text()) for path in args.tabulate]
    rate = common_error_rate(payloads)  # BoTorch's runs at the same users' noise
    scales: dict[str, float] = {}
    for payload in payloads:
        cfg = payload["config"]
        for problem, cells in payload["results"].items():
            if problem not in scales:
                utility = get_utility(problem)
                scales[problem] = calibrate_noise(utility, rate, noise="gumbel", seed=0)
            for name, cell in cells.items():
                R = len(cell["ours"]["seeds"])
                strategy = suite_answers.split(name)[0]
                cell["anchor"] = run_anchor(
                    problem, strategy, R, cfg["queries"], cfg["seed"], scales[problem], "cached"
                )
    pooled = pool(payloads)
    print(table(pooled["results"], pooled["config"]["queries"]), flush=True)
    if any(suite_answers.split(n)[1] != "binary" for c in pooled["results"].values() for n in c):
        print("\n" + suite_answers.answers_table(pooled["results"], pooled["config"]["queries"]))
    pairs = {(p, s): (c["ours"], c.get("anchor")) for p, cs in pooled["results"].items()
             for s, c in cs.items()}  # fmt: skip
    asked = questions(pairs, pooled["config"]["queries"])
    if asked:
        print("\n" + asked, flush=True)
    out = Path(args.out + "-suite-table.png")
    plot(pooled["results"], out)
    print(f"\nwrote {out}", flush=True)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The suite's options of ``benchmarks/pbo.py``."""
    parser.add_argument("--suite", action="store_true", help="run the question-quality suite")
    parser.add_argument(
        "--suite-strategies", nargs="+", choices=SUITE_STRATEGIES, default=list(SUITE_STRATEGIES)
    )
    parser.add_argument(
        "--set",
        nargs="+",
        action="extend",
        metavar="NAME=VALUE",
        help="loop settings of our runs (repeatable: every --set adds its settings)",
    )
    parser.add_argument(
        "--tie-band",
        type=float,
        default=0.0,
        help="our runs' users answer 'no preference' to pairs whose perceived utilities differ "
        "by less than this many noise scales (needs --set ties=true and --anchor none: "
        "BoTorch's pipeline has no such answers)",
    )
    parser.add_argument(
        "--answers",
        nargs="+",
        choices=list(suite_answers.ARMS),
        help="the answers axis: our runs with each answer format, paired by seed "
        "(benchmarks/suite_answers.py); default: binary only",
    )
    parser.add_argument(
        "--backend",
        choices=("auto", "batched", "sequential"),
        default="auto",
        help="our runs' back end; auto: batched for binary answers only, else sequential",
    )
    parser.add_argument(
        "--anchor",
        choices=("run", "cached", "none"),
        default="run",
        help="BoTorch's pipeline: run missing runs, use cached runs only, or skip it",
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar="JSON",
        help="A/B of two suite runs (each a path or a quoted glob of runs on other seeds, pooled)",
    )
    parser.add_argument(
        "--tabulate", nargs="+", metavar="JSON", help="table and plot of suite runs (run nothing)"
    )
