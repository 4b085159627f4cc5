r"""BOPE benchmark: the BoTorch BOPE flow with ``PairwiseGP`` and with ``PairwiseLaplaceGP``.

Both preference models run the same flow (:func:`botorch_pref.integrations.bope.run_bope`, after
BoTorch's ``bope`` tutorial) on the same seeds, from the same fitted initial outcome model (fitted
once per seed, not timed):

* outcomes: DTLZ2 with ``d = 4`` inputs and ``k = 2`` outcomes; the decision maker's utility is
  minus the L1 distance of the outcome vector to (0.5, 0.5), answers are noiseless;
* preference exploration (PE): 2 random initial pairs, then ``--pe`` EUBO pairs with
  ``outcome_model=FixedSingleSampleModel(outcome model)``, the preference model refitted (by its
  Laplace evidence) after each answer;
* experimentation: one qNEI and one qLogNEI iteration with ``LearnedObjective(pref_model=...)``
  (``optimize_acqf`` with 2 restarts, 64 raw samples, 50 L-BFGS iterations per call).

Reported per model: the wall time of the PE stage (acquisition optimisation and model fits) and
of the experimentation stage (which also refits the outcome model once; the same work for both
models), medians over seeds, and their ratio PairwiseGP / ours (above 1 when ours is faster);
the true utility reached (PE: of the outcome vector the model ranks highest; the design BOPE
recommends at the end). A run that exceeds ``--timeout`` seconds is stopped and reported as such
(its seed is left out of both models' medians).

Run::

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.bope
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m benchmarks.bope --seeds 0 1 2 3 4 --pe 5
"""

from __future__ import annotations

import argparse
import signal
import statistics
import time
import warnings
from copy import deepcopy

import botorch
import torch
from botorch.models import PairwiseGP
from botorch.test_functions.multi_objective import DTLZ2

from botorch_pref.integrations.bope import fit_outcome_model, initial_designs, run_bope
from botorch_pref.models.pairwise import PairwiseLaplaceGP

DIM = 4


class RunTimeout(Exception):
    """A run exceeded the time limit."""


def utility(Y: torch.Tensor) -> torch.Tensor:
    return -(Y - 0.5).abs().sum(-1)


def _alarm(signum, frame):
    raise RunTimeout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--pe", type=int, default=5, help="EUBO preference-exploration iterations")
    p.add_argument("--initial", type=int, default=8, help="initial designs")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per run before giving up")
    args = p.parse_args()
    if not args.timeout > 0:
        p.error(f"--timeout must be positive, not {args.timeout}")
    warnings.simplefilter("ignore")
    problem = DTLZ2(dim=DIM, num_objectives=2)
    settings = {
        "n_initial": args.initial,
        "n_pe": args.pe,
        "raw_samples": 64,
        "num_restarts": 2,
        "mc_samples": 16,
        "pref_samples": 4,
    }
    models = {"PairwiseGP": PairwiseGP, "PairwiseLaplaceGP": PairwiseLaplaceGP}
    rows: dict[str, dict[int, dict[str, float] | None]] = {name: {} for name in models}
    signal.signal(signal.SIGALRM, _alarm)
    print(
        f"# torch {torch.__version__}, botorch {botorch.__version__}, threads "
        f"{torch.get_num_threads()}; DTLZ2 d={DIM} k=2, {args.initial} initial designs, "
        f"{args.pe} EUBO pairs, qNEI + qLogNEI"
    )
    for seed in args.seeds:
        X, Y = initial_designs(problem, DIM, args.initial, seed)
        outcome_model = fit_outcome_model(X, Y)
        for name, cls in models.items():
            start = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, args.timeout)
            try:
                result = run_bope(
                    problem,
                    utility,
                    DIM,
                    cls,
                    seed=seed,
                    outcome_model=deepcopy(outcome_model),
                    **settings,
                )
            except RunTimeout:
                rows[name][seed] = None
                print(f"seed {seed} {name:>17}: stopped after {args.timeout:.0f} s")
                continue
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            rows[name][seed] = {
                "pe": result.seconds["pe"],
                "experiment": result.seconds["experiment"],
                "total": time.perf_counter() - start,
                "pe_utility": result.pe_utility[-1] if result.pe_utility else float("nan"),
                "recommended": result.recommended_utility,
            }
            r = rows[name][seed]
            print(
                f"seed {seed} {name:>17}: PE {r['pe']:6.2f} s, experimentation "
                f"{r['experiment']:6.2f} s; utility PE {r['pe_utility']:.3f}, recommended "
                f"{r['recommended']:.3f}"
            )
    done = [s for s in args.seeds if all(rows[n].get(s) is not None for n in models)]
    stopped = {n: [s for s in args.seeds if rows[n].get(s) is None] for n in models}
    print(f"\n# medians over seeds {done} (stopped runs: {stopped})\n")
    if not done:
        print("No seed finished with both models: no table (raise --timeout).")
        raise SystemExit(1)
    print("| stage | PairwiseGP | PairwiseLaplaceGP | ratio |")
    print("|---|---|---|---|")
    for key, label in [
        ("pe", "PE stage (s)"),
        ("experiment", "experimentation stage (s)"),
        ("total", "whole flow (s)"),
    ]:
        ref = statistics.median(rows["PairwiseGP"][s][key] for s in done)
        ours = statistics.median(rows["PairwiseLaplaceGP"][s][key] for s in done)
        print(f"| {label} | {ref:.2f} | {ours:.2f} | {ref / ours:.2f} |")
    for key, label in [("pe_utility", "utility after PE"), ("recommended", "recommended")]:
        ref = statistics.mean(rows["PairwiseGP"][s][key] for s in done)
        ours = statistics.mean(rows["PairwiseLaplaceGP"][s][key] for s in done)
        print(f"| {label} (mean utility) | {ref:.3f} | {ours:.3f} | |")


if __name__ == "__main__":
    main()
