"""Record the loop's queries and recommendations, bit for bit, to check a refactor.

Runs :class:`~botorch_pref.PreferenceOptimizer` and
:func:`~botorch_pref.loop.run_replications` (both back ends) on small budgets for several
seeds, strategies, ``q``, kinds of answer (winners, choices among three, rankings,
"no preference") and models (kernels, posterior approximations, ``PairwiseGP``), and writes
every query, recommendation, replayed next query (as hexadecimal floats) and the optimiser's
settings to a JSON file. The same code on the same machine must write the same file:
``python -m benchmarks.record_trajectories out.json`` before and after a change, then
``cmp`` the two files (or ``--compare before.json``, which names the first difference).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any

import torch
from torch import Tensor

from botorch_pref import PreferenceOptimizer
from botorch_pref.loop import run_replications
from botorch_pref.test_functions import get_utility
from botorch_pref.users import SimulatedUser

#: Small acquisition budgets: the recording checks identity, not quality.
BUDGET = {"num_restarts": 2, "raw_samples": 32}
#: Acquisition queries after the initial ones (enough for local and lookahead queries).
QUERIES = 7

#: Settings of the model factory away from their defaults.
RBF, BOX = {"kernel": "rbf"}, {"model": "laplace-box"}
MATERN52_LAPLACE = {"kernel": "matern52", "inference": "laplace"}
#: ``(name, problem, strategy, q, answer kind, seeds, extra settings)`` of the optimiser runs.
OPTIMIZER_CASES = [
    ("eubo", "branin", "eubo", 2, "winner", (0, 1), {}),
    ("eubo-hartmann3", "hartmann3", "eubo", 2, "winner", (2,), {}),
    ("eubo-ties", "branin", "eubo", 2, "tie", (0,), {"ties": True}),
    ("qeubo-pairs", "branin", "qeubo", 2, "winner", (0,), {}),
    ("qeubo-choice", "branin", "qeubo", 3, "winner", (0,), {}),
    ("qeubo-ranking", "hartmann3", "qeubo", 3, "ranking", (1,), {}),
    ("qeubo-q3-pairs", "branin", "qeubo", 3, "winner", (0,), {"answers": "pairs"}),
    ("champion-challenger", "branin", "champion-challenger", 2, "winner", (0, 3), {}),
    ("random", "branin", "random", 2, "winner", (0,), {}),
    ("eubo-float32", "branin", "eubo", 2, "winner", (0,), {"dtype": torch.float32}),
    # the model factory's settings (kernel, inference), each away from its default
    ("eubo-rbf-laplace", "branin", "eubo", 2, "winner", (0,), {**RBF, "inference": "laplace"}),
    ("eubo-ties-ep", "branin", "eubo", 2, "tie", (1,), {"ties": True, "inference": "ep"}),
    ("eubo-laplace-box", "hartmann3", "eubo", 2, "winner", (0,), {**BOX, "kernel": "matern52"}),
    ("eubo-pairwisegp", "branin", "eubo", 2, "winner", (0,), {"model": "pairwisegp"}),
]

#: ``(name, problem, strategy, q, extra arguments)`` of the replication runs (both back ends).
REPLICATION_CASES = [
    ("eubo", "branin", "eubo", 2, {}),
    ("eubo-ties", "branin", "eubo", 2, {"ties": True, "tie_band": 0.5}),
    ("qeubo-choice", "branin", "qeubo", 3, {}),
    ("champion-challenger", "hartmann3", "champion-challenger", 2, {}),
    ("random", "branin", "random", 2, {}),
    ("eubo-matern52-laplace", "branin", "eubo", 2, MATERN52_LAPLACE),
]


def hexes(x: Any) -> list[str]:
    """The values of a tensor or number as exact hexadecimal float strings."""
    values = torch.as_tensor(x).detach().cpu().to(torch.float64).reshape(-1).tolist()
    return [float(v).hex() for v in values]


def _answer(user: SimulatedUser, X: Tensor, kind: str) -> dict[str, Any]:
    if kind == "tie":
        w = int(user.answer_pair(X, 0.5 * user.scale))
        return {"tie": True} if w < 0 else {"winner": w}
    if kind == "ranking":
        return {"ranking": user.rank(X).tolist()}
    return {"winner": int(user.choose(X))}


def record_optimizer(problem: str, strategy: str, q: int, kind: str, seed: int, extra: dict):
    """One optimiser run: queries, answers, recommendations, the replayed next query."""
    f = get_utility(problem)
    bounds = torch.stack([torch.zeros(f.dim), torch.ones(f.dim)]).double()
    bounds[1] *= 2.0  # not the unit cube: the maps to and from it are part of the check
    kwargs = {"strategy": strategy, "q": q, "seed": seed, "n_initial": 4, **BUDGET, **extra}
    opt = PreferenceOptimizer(bounds, **kwargs)
    user = SimulatedUser(lambda X: f(X / 2.0), "gumbel", 0.1, seed=seed)
    steps = []
    for _ in range(4 + QUERIES):
        X = opt.ask()
        answer = _answer(user, X.double(), kind)
        opt.tell(X, **answer)
        best = opt.best()
        steps.append(
            {
                "query": hexes(X),
                "answer": answer,
                "best": hexes([*best.x, best.mean, best.std]),
                "index": best.index,
            }
        )
    anywhere = opt.best(among="anywhere")
    replayed = PreferenceOptimizer.replay(opt.history, bounds, **kwargs)
    return {
        "steps": steps,
        "anywhere": hexes([*anywhere.x, anywhere.mean, anywhere.std]),
        "next": hexes(opt.ask()),
        "replayed_next": hexes(replayed.ask()),
        "refits": opt.n_refits,
        "settings": {name: str(value) for name, value in sorted(opt.settings.items())},
    }


def record_replications(problem: str, strategy: str, q: int, backend: str, extra: dict):
    """One study of two replications: queries, winners and recommendations."""
    res = run_replications(
        problem,
        strategy,
        n_replications=2,
        n_queries=QUERIES,
        q=q,
        seed=5,
        backend=backend,
        n_initial=4,
        anywhere_after=(QUERIES,),
        **BUDGET,
        **extra,
    )
    return {
        "queries": hexes(res.queries),
        "winners": res.winners.reshape(-1).tolist(),
        "best_x": hexes(res.best_x),
        "regret": hexes(res.regret),
        "regret_anywhere": hexes(res.regret_anywhere),
        "fits": res.fits,
    }


def record() -> dict[str, Any]:
    """Every case's recording."""
    out: dict[str, Any] = {}
    for name, problem, strategy, q, kind, seeds, extra in OPTIMIZER_CASES:
        for seed in seeds:
            out[f"optimizer/{name}/{seed}"] = record_optimizer(
                problem, strategy, q, kind, seed, extra
            )
            print(f"optimizer/{name}/{seed}", flush=True, file=sys.stderr)
    for name, problem, strategy, q, extra in REPLICATION_CASES:
        for backend in ("sequential", "batched"):
            out[f"replications/{name}/{backend}"] = record_replications(
                problem, strategy, q, backend, extra
            )
            print(f"replications/{name}/{backend}", flush=True, file=sys.stderr)
    return out


def first_difference(
    before: Any, after: Any, path: str = "", new: list | None = None
) -> str | None:
    """The path of the first value of ``before`` that differs in ``after``, or ``None``.

    Keys ``after`` adds (cases or fields a later recorder records) are not differences; their
    paths are appended to ``new`` when it is given.
    """
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after)):
            if key not in before:
                if new is not None:
                    new.append(f"{path}/{key}")
                continue
            if key not in after:
                return f"{path}/{key} (missing)"
            found = first_difference(before[key], after[key], f"{path}/{key}", new)
            if found:
                return found
        return None
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for i, (x, y) in enumerate(zip(before, after, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]", new)
            if found:
                return found
        return None
    return None if before == after else f"{path}: {before!r} != {after!r}"


def main(argv: list[str]) -> int:
    """Write the recording; with ``--compare`` also say whether it matches an earlier one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the JSON file to write")
    parser.add_argument("--compare", help="an earlier recording to compare with")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    recording = record()
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(recording, fh, indent=0, sort_keys=True)
    if args.compare:
        with open(args.compare, encoding="utf-8") as fh:
            before = json.load(fh)
        added: list[str] = []
        diff = first_difference(before, recording, new=added)
        print("identical" if diff is None else f"differs at {diff}")
        if added:
            more = f" and {len(added) - 4} more" if len(added) > 4 else ""
            print(f"not in the earlier recording, not compared: {', '.join(added[:4])}{more}")
        return 0 if diff is None else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
