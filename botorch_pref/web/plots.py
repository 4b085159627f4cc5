"""The results view's pictures: the learned utility and the comparison graph (PNG, matplotlib).

Both are drawn on :class:`matplotlib.figure.Figure` objects (no pyplot state, no GUI backend),
in the worker processes that hold the sessions' models (see :func:`botorch_pref.web.held.call`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import torch

from botorch_pref.sessions import Session

__all__ = ["GraphSummary", "comparison_graph_png", "comparison_graph_summary", "utility_png"]


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
    x0 = torch.tensor([best.x[n] for n in names], dtype=torch.float64)
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
    """The comparison graph's numbers (see :func:`botorch_pref.diagnostics.comparison_graph`).

    Attributes:
        designs: Distinct designs compared.
        pairs: Distinct compared pairs.
        components: Connected components.
        connectivity: Algebraic connectivity at the mode.
        note: Why the graph is not available, or ``""``.
    """

    designs: int = 0
    pairs: int = 0
    components: int = 0
    connectivity: float = 0.0
    note: str = ""


def _graph(session: Session):
    from botorch_pref.diagnostics import comparison_graph
    from botorch_pref.models.pairwise import PairwiseLaplaceGP

    opt = session.optimizer
    model = opt.model
    if model is None:
        return None, "no choices yet"
    if not isinstance(model, PairwiseLaplaceGP):
        return None, f"not available for a {type(model).__name__} model"
    if not opt.preference_data.is_pairwise:
        return None, (
            "not available: the answers include 'no preference' or choices among more than two "
            "options, and the diagnostics cover pairwise answers only"
        )
    try:
        return comparison_graph(model), ""
    except (ValueError, RuntimeError, TypeError) as err:
        return None, f"not available: {err}"


def comparison_graph_summary(session: Session) -> GraphSummary:
    """The comparison-graph diagnostics of the session's model.

    Args:
        session: The session.

    Returns:
        The numbers, or a note saying why there are none.
    """
    graph, note = _graph(session)
    if graph is None:
        return GraphSummary(note=note)
    return GraphSummary(
        graph.n, len(graph.edges), graph.num_components, float(graph.algebraic_connectivity)
    )


def comparison_graph_png(session: Session) -> bytes | None:
    """The comparison graph drawn by :func:`botorch_pref.diagnostics.plot_comparison_graph`.

    Args:
        session: The session.

    Returns:
        PNG bytes, or ``None`` when there is no graph.
    """
    from matplotlib.figure import Figure

    from botorch_pref.diagnostics import plot_comparison_graph

    graph, _ = _graph(session)
    if graph is None:
        return None
    fig = Figure(figsize=(5.5, 5))
    ax = fig.add_subplot(1, 1, 1)
    plot_comparison_graph(graph, session.optimizer.datapoints, ax=ax)
    ax.title.set_fontsize(9)
    return _png(fig)
