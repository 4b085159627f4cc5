"""The results view's diagnostics: the learned utility, the comparison graph of the answers
(numbers, a plain-language reading, and a picture for every pair of parameters).

The pictures are drawn on :class:`matplotlib.figure.Figure` objects (no pyplot state, no GUI
backend), in the worker processes that hold the sessions' models (see
:func:`botorch_pref.web.held.call`).
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from botorch_pref.sessions import Session
from botorch_pref.sessions.records import SessionState
from botorch_pref.web.renderers import format_value

__all__ = [
    "GraphSummary",
    "comparison_graph_png",
    "comparison_graph_summary",
    "parameter_reading",
    "utility_png",
]


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def utility_png(session: Session, points: int = 60) -> bytes | None:
    """The posterior utility along each parameter through the recommended design.

    One panel per parameter: the mean and a band of two standard deviations as that parameter
    sweeps its bounds with the others held at the recommendation (marked).

    Args:
        session: The session (its model is refreshed from the stored answers).
        points: Grid points per panel.

    Returns:
        PNG bytes, or ``None`` before the first choice.
    """
    from matplotlib.figure import Figure

    best = session.best()
    if best is None:
        return None
    opt = session.optimizer
    names = session.names
    d = len(names)
    cols = min(d, 3)
    rows = (d + cols - 1) // cols
    fig = Figure(figsize=(4.0 * cols, 2.8 * rows))
    x0 = best.x
    for j, (name, low, high) in enumerate(session.parameters):
        ax = fig.add_subplot(rows, cols, j + 1)
        grid = torch.linspace(low, high, points, dtype=torch.float64)
        X = x0.repeat(points, 1)
        X[:, j] = grid
        mean, std = opt.predict(X)
        mean, std = mean.detach().cpu(), std.detach().cpu()
        ax.fill_between(grid, mean - 2 * std, mean + 2 * std, color="C0", alpha=0.25, lw=0)
        ax.plot(grid, mean, color="C0", lw=2, label="mean ± 2 sd")
        ax.axvline(float(x0[j]), color="C3", lw=1, ls="--", label="recommended")
        ax.set_xlabel(name, parse_math=False)  # a "$" in a name is not maths markup
        ax.set_ylabel("utility")
        if j == 0:
            ax.legend(loc="best", fontsize=8)
    fig.suptitle("Learned utility through the recommended design")
    fig.tight_layout()
    return _png(fig)


@dataclass(frozen=True)
class GraphSummary:
    """The comparison graph of a session's standing answers, and what it means.

    Designs are the distinct options shown; two designs are joined when an answer compared
    them: a choice joins the chosen option with each other option, a ranking each option with
    the next, a "no preference" answer the options it found alike (ties are kept: a tie says
    the two are close, which orders them as much as a choice does). Skips join nothing.

    Attributes:
        designs: Distinct designs compared.
        pairs: Distinct compared pairs.
        components: Connected components (groups of designs linked by answers).
        connectivity: Algebraic connectivity of the graph's Laplacian (edge weight: answers on
            the pair); ``0`` when it falls apart into several components.
        ties: "No preference" answers among them.
        repeated: Designs compared more than once.
        reading: Plain-language sentences: what the answers do and do not pin down.
        note: Why there is no graph yet, or ``""``.
    """

    designs: int = 0
    pairs: int = 0
    components: int = 0
    connectivity: float = 0.0
    ties: int = 0
    repeated: int = 0
    reading: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class _Graph:
    points: list[tuple[float, ...]]
    edges: dict[tuple[int, int], int]
    tied: set[tuple[int, int]]
    labels: list[int]


def _answer_graph(state: SessionState) -> _Graph:
    """The comparison graph of a session snapshot's standing answers."""
    index: dict[tuple[float, ...], int] = {}
    edges: dict[tuple[int, int], int] = {}
    tied: set[tuple[int, int]] = set()

    def node(x: tuple[float, ...]) -> int:
        return index.setdefault(tuple(x), len(index))

    def join(a: int, b: int, tie: bool = False) -> None:
        if a != b:
            key = (min(a, b), max(a, b))
            edges[key] = edges.get(key, 0) + 1
            if tie:
                tied.add(key)

    for entry in state.history(include_retracted=False):
        if entry.answer.kind == "skip":
            continue  # compares nothing
        a, options = entry.answer, [node(tuple(x)) for x in entry.query.options]
        if a.kind == "winner" and a.winner is not None:
            for k, other in enumerate(options):
                if k != a.winner:
                    join(options[a.winner], other)
        elif a.kind == "ranking" and a.ranking is not None:
            for first, second in itertools.pairwise(a.ranking):
                join(options[first], options[second])
        elif a.kind == "tie":
            for first, second in itertools.combinations(options, 2):
                join(first, second, tie=True)
    points = list(index)
    parent = list(range(len(points)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in edges:
        parent[root(i)] = root(j)
    roots = [root(i) for i in range(len(points))]
    order = {r: k for k, r in enumerate(dict.fromkeys(roots))}
    return _Graph(points, edges, tied, [order[r] for r in roots])


def _connectivity(graph: _Graph) -> float:
    n = len(graph.points)
    if n < 2 or max(graph.labels) > 0:
        return 0.0
    L = torch.zeros(n, n, dtype=torch.float64)
    for (i, j), count in graph.edges.items():
        L[i, i] += count
        L[j, j] += count
        L[i, j] -= count
        L[j, i] -= count
    return float(torch.linalg.eigvalsh(L)[1].clamp_min(0))


def comparison_graph_summary(session: Session) -> GraphSummary:
    """The comparison graph of the session's standing answers, with a plain reading.

    It reads the stored answers only (no model): call it anywhere.

    Args:
        session: The session.

    Returns:
        The numbers and the reading, or a note saying why there are none.
    """
    state = session.state()
    graph = _answer_graph(state)
    if not graph.edges:
        return GraphSummary(note="No comparisons yet (skips compare nothing).")
    n, k = len(graph.points), max(graph.labels) + 1
    degree = [0] * n
    for i, j in graph.edges:
        degree[i] += 1
        degree[j] += 1
    repeated = sum(d > 1 for d in degree)
    ties = sum(1 for e in state.history(include_retracted=False) if e.answer.kind == "tie")
    were = "answer was" if ties == 1 else "answers were"
    tie_note = f"; {ties} {were} “no preference” (kept: alike tells too)" if ties else ""
    reading = [f"The answers compared {n} different designs in {len(graph.edges)} pairs{tie_note}."]
    if k == 1:
        reading.append(
            "Every design is linked to every other through the answers: they can all be ordered "
            "by what was answered, not only by the model's assumptions."
        )
    else:
        reading.append(
            f"The designs fall into {k} groups never compared with each other, directly or "
            "through other designs. Within a group the answers order the designs; across groups "
            "only the model's assumption that similar designs are liked similarly does."
        )
    if repeated < n / 2:
        reading.append(
            f"Only {repeated} of the {n} designs were compared more than once: most questions "
            "showed new designs, as the question strategy explores. The recommendation rests "
            "on how the answers fit together across the parameters, not on repeated checks of "
            "the same design."
        )
    return GraphSummary(
        n, len(graph.edges), k, _connectivity(graph), ties, repeated, tuple(reading)
    )


def parameter_reading(session: Session, points: int = 25) -> tuple[str, ...]:
    """What the answers say about each parameter, in words.

    For each parameter, the posterior mean and standard deviation of the utility as it sweeps
    its bounds with the others at the recommendation: when the mean changes by more than
    twice the largest standard deviation along the sweep, the answers show that it matters;
    else they do not tell yet.

    Args:
        session: The session (its model is refreshed from the stored answers).
        points: Grid points per parameter.

    Returns:
        One sentence per parameter (none before the first choice).
    """
    best = session.best()
    if best is None:
        return ()
    opt = session.optimizer
    x0 = best.x
    out = []
    for j, (name, low, high) in enumerate(session.parameters):
        X = x0.repeat(points, 1)
        X[:, j] = torch.linspace(low, high, points, dtype=torch.float64)
        mean, std = (t.detach().cpu() for t in opt.predict(X))
        change, spread = float(mean.max() - mean.min()), float(std.max())
        at = format_value(float(X[int(mean.argmax()), j]), low, high)
        if change > 2 * spread:
            out.append(
                f"{name}: the answers show it matters (the utility changes by "
                f"{format_value(change)} across its range, uncertainty ± {format_value(spread)}); "
                f"best near {at}."
            )
        else:
            out.append(
                f"{name}: the answers do not tell yet whether it matters (change "
                f"{format_value(change)}, uncertainty ± {format_value(spread)}); more answers "
                "about it would."
            )
    return tuple(out)


def _pairs(names: Sequence[str], chosen: Sequence[str] | None, most: int) -> list[tuple[int, int]]:
    """The parameter pairs to draw: those among ``chosen`` (or all), at most ``most``."""
    keep = [i for i, n in enumerate(names) if chosen is None or n in chosen]
    if len(keep) == 1:
        return [(keep[0], keep[0])]
    return list(itertools.combinations(keep, 2))[:most]


def comparison_graph_png(
    session: Session, chosen: Sequence[str] | None = None, most: int = 15
) -> bytes | None:
    """The comparison graph drawn once for every pair of parameters.

    Each panel puts the designs at their values of two parameters (axes labelled with the
    parameters' names, in their units); a line joins two designs an answer compared (dashed:
    "no preference"; wider: more answers), and a design's colour is its group (component).
    One parameter gives one panel along it.

    Args:
        session: The session.
        chosen: Parameter names to draw (default: all), e.g. from the results page's picker.
        most: Most panels.

    Returns:
        PNG bytes, or ``None`` when no answer compared anything.
    """
    from matplotlib.figure import Figure

    graph = _answer_graph(session.state())
    if not graph.edges:
        return None
    names = session.names
    bounds = {n: (lo, hi) for n, lo, hi in session.parameters}
    pairs = _pairs(names, chosen, most)
    if not pairs:
        return None
    cols = min(len(pairs), 3)
    rows = (len(pairs) + cols - 1) // cols
    fig = Figure(figsize=(4.2 * cols, 3.8 * rows))
    P = torch.tensor(graph.points, dtype=torch.float64)
    colours = torch.tensor(graph.labels)
    for k, (a, b) in enumerate(pairs):
        ax = fig.add_subplot(rows, cols, k + 1)
        ys = P[:, b] if a != b else torch.zeros(len(P))
        for (i, j), count in graph.edges.items():
            style = "--" if (i, j) in graph.tied else "-"
            ax.plot(P[[i, j], a], ys[[i, j]], style, color="0.55", lw=0.5 + count, zorder=1)
        ax.scatter(P[:, a], ys, c=colours % 10, cmap="tab10", vmin=0, vmax=9, s=30, zorder=2)
        ax.set_xlabel(names[a], parse_math=False)
        ax.set_xlim(*bounds[names[a]])
        if a != b:
            ax.set_ylabel(names[b], parse_math=False)
            ax.set_ylim(*bounds[names[b]])
        else:
            ax.set_yticks([])
    fig.suptitle(
        f"Comparison graph: {len(graph.points)} designs, {len(graph.edges)} compared pairs "
        "(dashed: no preference; colour: group)",
        fontsize=10,
    )
    fig.tight_layout()
    return _png(fig)
