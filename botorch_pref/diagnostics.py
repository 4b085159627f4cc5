r"""Diagnostics of a preference model: what the answers can and cannot say.

Two facts shape every preference model:

* **Identifiability.** Adding a constant to every utility changes no answer's probability, so
  the posterior keeps the prior's uncertainty about the overall level of :math:`g`. What the
  answers can shrink is the uncertainty of *differences*. :func:`relative_posterior` gives the
  posterior of :math:`g(x) - \bar g_R`, the utility relative to the average over a reference set
  of designs :math:`R` (or to one reference design):

  .. math::

      E = \mu(x) - \bar\mu_R, \qquad
      V = \sigma^2(x) - \tfrac{2}{r}\textstyle\sum_j \Sigma(x, r_j)
          + \tfrac{1}{r^2} 1^\top \Sigma_{RR} 1 .

* **The comparison graph.** Designs are nodes and compared pairs are edges. Designs in different
  connected components are never ordered by the answers, only by the prior; the algebraic
  connectivity (second-smallest eigenvalue) of the curvature Laplacian :math:`W` at the mode says
  how strongly the answers tie the graph together. :func:`comparison_graph` returns it all.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from botorch_pref.checks import whole_number
from botorch_pref.data.preferences import PreferenceData
from botorch_pref.inference.pairs import PairEngine
from botorch_pref.models.pairwise import PairwiseLaplaceGP

__all__ = [
    "ComparisonGraph",
    "RelativePosterior",
    "comparison_graph",
    "plot_comparison_graph",
    "relative_posterior",
]


@dataclass(frozen=True)
class ComparisonGraph:
    """The comparison graph of a model's data.

    Attributes:
        n: Number of designs (nodes).
        edges: ``p x 2`` long tensor of distinct compared pairs ``(i, j)``, ``i < j``.
        wins: ``p x 2`` long tensor: how often ``i`` beat ``j`` and ``j`` beat ``i``.
        degrees: ``n`` long tensor: number of distinct partners of each design.
        components: ``n`` long tensor of component labels ``0 .. k-1`` (by smallest member).
        num_components: Number of connected components ``k`` (isolated designs count).
        laplacian: ``n x n`` curvature Laplacian :math:`W` at the mode.
        algebraic_connectivity: Second-smallest eigenvalue of ``laplacian``; zero when the graph
            is disconnected.
    """

    n: int
    edges: Tensor
    wins: Tensor
    degrees: Tensor
    components: Tensor
    num_components: int
    laplacian: Tensor
    algebraic_connectivity: float

    @property
    def counts(self) -> Tensor:
        """Number of answers on each edge."""
        return self.wins.sum(-1)


def _components(n: int, edges: Tensor) -> Tensor:
    """Connected-component labels by label propagation (min label over neighbours)."""
    labels = torch.arange(n, device=edges.device)
    if edges.numel() == 0:
        return labels
    i, j = edges[:, 0], edges[:, 1]
    while True:
        new = labels.clone()
        new.scatter_reduce_(0, i, labels[j], reduce="amin")
        new.scatter_reduce_(0, j, labels[i], reduce="amin")
        new = new[new]  # pointer jumping
        if torch.equal(new, labels):
            break
        labels = new
    return torch.unique(labels, return_inverse=True)[1]


def comparison_graph(model: PairwiseLaplaceGP) -> ComparisonGraph:
    """The comparison graph of a (non-batched) model's data and the Laplacian at its mode.

    Args:
        model: A :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with data and an empty
            batch shape.

    Returns:
        The :class:`ComparisonGraph`.
    """
    if model.datapoints is None:
        raise ValueError("The model has no data.")
    if len(model.batch_shape) > 0:
        raise ValueError("comparison_graph needs a model with an empty batch shape.")
    C = model.comparisons
    if isinstance(C, PreferenceData):  # pairs alone are kept as a tensor (validate_training_data)
        raise ValueError(
            "comparison_graph needs pairwise comparisons; the model's data hold choices, "
            "rankings or ties."
        )
    n = model.n
    C = C[C[:, 0] >= 0]  # drop padding rows
    engine = PairEngine.from_comparisons(
        model.likelihood, C.unsqueeze(0), n, dtype=model.datapoints.dtype
    )
    structure = engine.structure
    p = int(structure.num_pairs[0])
    edges = structure.pairs[0, :p]
    first = (structure.comp_sign[0] > 0).long()
    wins = torch.zeros(p, 2, dtype=torch.long, device=C.device)
    wins[:, 0].index_add_(0, structure.comp_pair[0], first)
    wins[:, 1].index_add_(0, structure.comp_pair[0], 1 - first)
    degrees = torch.zeros(n, dtype=torch.long, device=C.device)
    degrees.index_add_(0, edges[:, 0], torch.ones_like(edges[:, 0]))
    degrees.index_add_(0, edges[:, 1], torch.ones_like(edges[:, 1]))
    components = _components(n, edges)
    # curvature Laplacian at the mode
    d = model.utility.detach()
    diff = d[edges[:, 0]] - d[edges[:, 1]]
    _, _, w = engine.terms(diff.unsqueeze(0))
    w = w[0, :p].detach()  # a fitted tie threshold carries a gradient
    W = torch.zeros(n, n, dtype=d.dtype, device=d.device)
    W.index_put_((edges[:, 0], edges[:, 0]), w, accumulate=True)
    W.index_put_((edges[:, 1], edges[:, 1]), w, accumulate=True)
    W.index_put_((edges[:, 0], edges[:, 1]), -w, accumulate=True)
    W.index_put_((edges[:, 1], edges[:, 0]), -w, accumulate=True)
    eig = torch.linalg.eigvalsh(W)
    num_components = int(components.max()) + 1
    connectivity = 0.0 if num_components > 1 else float(eig[1].clamp_min(0))
    return ComparisonGraph(
        n=n,
        edges=edges,
        wins=wins,
        degrees=degrees,
        components=components,
        num_components=num_components,
        laplacian=W,
        algebraic_connectivity=connectivity,
    )


@dataclass(frozen=True)
class RelativePosterior:
    """Posterior of the utility relative to a reference.

    Attributes:
        mean: ``t`` means of :math:`g(x) - \\bar g_R`.
        variance: ``t`` variances.
    """

    mean: Tensor
    variance: Tensor

    @property
    def std(self) -> Tensor:
        """Standard deviations."""
        return self.variance.clamp_min(0).sqrt()


def relative_posterior(
    model: PairwiseLaplaceGP,
    X: Tensor,
    reference: Tensor | None = None,
    chunk_size: int = 512,
) -> RelativePosterior:
    r"""Posterior of :math:`g(x) - \bar g_R` at each row of ``X``.

    Args:
        model: A preference model (empty batch shape).
        X: ``t x d`` designs.
        reference: ``r x d`` reference designs whose average utility is subtracted (one row for a
            single reference design). Defaults to the model's datapoints.
        chunk_size: Designs per joint posterior call (memory grows with
            ``(chunk_size + r)^2``).

    Returns:
        The :class:`RelativePosterior`.

    Raises:
        ValueError: If ``X`` or ``reference`` has the wrong shape, ``chunk_size`` is not a
            positive integer, the model is batched, or a prior-only model has no reference.
    """
    chunk_size = whole_number(chunk_size, "chunk_size", 1)
    if X.dim() != 2:
        raise ValueError(f"X must be t x d, got shape {tuple(X.shape)}.")
    if len(getattr(model, "batch_shape", ())) > 0:
        raise ValueError(
            f"relative_posterior needs a model with an empty batch shape, got "
            f"{tuple(model.batch_shape)}."
        )
    if reference is None:
        if model.datapoints is None:
            raise ValueError("A prior-only model needs an explicit reference.")
        reference = model.datapoints
    if reference.dim() != 2 or reference.shape[-1] != X.shape[-1] or reference.shape[0] == 0:
        raise ValueError(
            f"reference must be r x {X.shape[-1]} with r >= 1, got {tuple(reference.shape)}."
        )
    r = reference.shape[0]
    reference = reference.to(X)
    weights = torch.full((r,), 1.0 / r, dtype=X.dtype, device=X.device)
    means, variances = [], []
    with torch.no_grad():
        for chunk in X.split(chunk_size):
            # one joint posterior of the chunk and the reference set
            post = model.posterior(torch.cat([chunk, reference]))
            mu = post.mean.squeeze(-1)
            S = post.distribution.covariance_matrix
            t = chunk.shape[0]
            S_xr = S[:t, t:] @ weights
            level_var = weights @ S[t:, t:] @ weights
            means.append(mu[:t] - mu[t:] @ weights)
            variances.append(S.diagonal()[:t] - 2 * S_xr + level_var)
    return RelativePosterior(mean=torch.cat(means), variance=torch.cat(variances))


def plot_comparison_graph(graph: ComparisonGraph, X: Tensor | None = None, ax=None):
    """Draw the comparison graph with matplotlib.

    Nodes sit at the first two input coordinates of ``X`` when given (on a line for 1-D inputs),
    else on a circle; edge width grows with the number of answers, node colour shows the
    component.

    Args:
        graph: The :class:`ComparisonGraph`.
        X: Optional ``n x d`` designs for node positions.
        ax: Optional matplotlib axes.

    Returns:
        The matplotlib axes.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5, 5))
    n = graph.n
    if X is not None and X.shape[-1] >= 2:
        pos = X[:, :2].detach().cpu()
    elif X is not None:
        pos = torch.stack([X[:, 0].detach().cpu(), torch.zeros(n)], -1)
    else:
        angle = torch.arange(n) * (2 * torch.pi / max(n, 1))
        pos = torch.stack([angle.cos(), angle.sin()], -1)
    counts = graph.counts.cpu()
    for (i, j), c in zip(graph.edges.cpu().tolist(), counts.tolist(), strict=True):
        ax.plot(*pos[[i, j]].T, color="0.5", lw=0.5 + float(c), zorder=1)
    ax.scatter(pos[:, 0], pos[:, 1], c=graph.components.cpu(), cmap="tab10", s=40, zorder=2)
    ax.set_title(
        f"{n} designs, {len(graph.edges)} pairs, {graph.num_components} component(s), "
        f"connectivity {graph.algebraic_connectivity:.3g}"
    )
    return ax
