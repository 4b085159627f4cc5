r"""Batched optimisers: many independent problems in one run.

A batched model (``batch_shape = (b,)``) poses ``b`` independent problems at once: fitting each
member's hyperparameters, and maximising each member's acquisition function. Both are solved
here with BoTorch's batched L-BFGS-B (:func:`botorch.optim.batched_lbfgs_b.fmin_l_bfgs_b_batched`),
which runs one L-BFGS-B recursion per problem, each with its own line search and its own stopping
test, while every function evaluation is a single batched torch call over the problems that are
still running. A member that converges early stops moving; it does not hold the others back, and
the others do not change its answer (unlike minimising the sum of all members' objectives with one
L-BFGS-B, whose joint stopping test and shared line search couple them).

* :func:`minimize_batched`: the generic driver.
* :func:`fit_evidence_batched`: independent hyperparameters of every member of a batched
  :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP`, by maximum a posteriori Laplace
  evidence.
* :func:`optimize_acqf_batched`: for a batch of ``b`` independent acquisition problems, a
  multi-start optimiser in the manner of BoTorch's ``optimize_acqf`` (raw samples, Boltzmann
  selection of restarts, L-BFGS-B on the unit cube), with one raw-sample seed per member.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import torch
from botorch.acquisition import AcquisitionFunction
from botorch.optim.batched_lbfgs_b import fmin_l_bfgs_b_batched
from linear_operator.utils.errors import NotPSDError
from threadpoolctl import threadpool_limits
from torch import Tensor

from botorch_pref.checks import whole_number
from botorch_pref.models.pairwise import PairwiseLaplaceGP

__all__ = [
    "FIT_ERRORS",
    "fit_evidence_batched",
    "isolating",
    "minimize_batched",
    "optimize_acqf_batched",
]

#: Linear-algebra errors of an evidence evaluation: :func:`fit_evidence_batched` charges them to
#: the members whose hyperparameters raise them (:func:`isolating`), so one member's failing
#: trial step does not end every member's fit.
FIT_ERRORS = (torch.linalg.LinAlgError, NotPSDError)


def minimize_batched(
    objective: Callable[[Tensor], Tensor],
    x0: Tensor,
    bounds: tuple[float, float] | None = None,
    *,
    maxiter: int = 200,
    pgtol: float = 1e-5,
    factr: float = 1e7,
    isolate: tuple[type[BaseException], ...] = (),
) -> tuple[Tensor, Tensor]:
    r"""Minimise ``N`` independent problems with one batched L-BFGS-B run.

    Args:
        objective: Maps an ``N x P`` tensor (row ``i`` is problem ``i``'s variables) to the ``N``
            objective values; it must be differentiable, and problem ``i``'s value may depend on
            row ``i`` only. Every call evaluates all ``N`` rows (rows of finished problems are
            held at their final values).
        x0: ``N x P`` finite starting points (``N, P >= 1``).
        bounds: Optional ``(lower, upper)`` bounds for every variable.
        maxiter: Maximum L-BFGS-B iterations per problem.
        pgtol: Projected-gradient stopping tolerance.
        factr: Relative function-decrease stopping factor (times machine epsilon).
        isolate: Errors of an evaluation to charge to the problems that cause them instead of
            ending the run (a Cholesky factorisation failing for one member of a batched
            model): see :func:`isolating`.

    Returns:
        ``(x, values)``: the ``N x P`` minimisers and the ``N`` values there. The variables are
        always finite: should L-BFGS-B's recursion for a problem break down into non-finite
        variables (its line search can, after trial points charged :math:`+\infty`), that
        problem gets the point of lowest finite value it evaluated (its start if none), with
        a ``RuntimeWarning``.

    Raises:
        ValueError: If ``x0`` is not a non-empty ``N x P`` tensor of finite values.
    """
    if x0.dim() != 2 or x0.numel() == 0:
        raise ValueError(f"x0 must be N x P with N, P >= 1, got shape {tuple(x0.shape)}.")
    rows = (~torch.isfinite(x0)).any(-1)
    if bool(rows.any()):
        raise ValueError(f"x0 must be finite; rows {rows.nonzero().flatten().tolist()} are not.")
    if isolate:
        objective = isolating(objective, isolate)
    current = x0.detach().clone()
    best_x = x0.detach().clone()  # each problem's evaluated point of lowest finite value
    best_value = torch.full((x0.shape[0],), math.inf, dtype=torch.float64, device=x0.device)

    def func(x: np.ndarray, batch_indices: list[int]) -> tuple[np.ndarray, np.ndarray]:
        rows = torch.as_tensor(batch_indices, dtype=torch.long, device=current.device)
        current[rows] = torch.from_numpy(np.ascontiguousarray(x)).to(current)
        X = current.clone().requires_grad_(True)
        values = objective(X)
        if values.shape != (X.shape[0],):
            raise ValueError(
                f"objective must return {X.shape[0]} values, got shape {tuple(values.shape)}."
            )
        (grad,) = torch.autograd.grad(values.sum(), X)
        values, grad = values.detach()[rows], grad[rows]
        as_double = values.double()
        lower = torch.isfinite(as_double) & (as_double < best_value[rows])
        best_value[rows] = torch.where(lower, as_double, best_value[rows])
        best_x[rows] = torch.where(lower.unsqueeze(-1), current[rows], best_x[rows])
        bad = ~torch.isfinite(values)
        if bool(bad.any()):  # let the line search back off instead of accepting NaN
            values = torch.where(bad, torch.full_like(values, math.inf), values)
            grad = torch.where(bad.unsqueeze(-1), 0.0, grad)
        return values.double().cpu().numpy(), grad.double().cpu().numpy()

    n_var = x0.shape[1]
    lbfgs_bounds = None if bounds is None else [bounds] * n_var
    # L-BFGS-B's own linear algebra is tiny: threaded BLAS only adds synchronisation (several
    # times slower per iteration on a small CPU), as BoTorch's gen_candidates_scipy also notes.
    with threadpool_limits(limits=1, user_api="blas"):
        xs, _, _ = fmin_l_bfgs_b_batched(
            func,
            x0.detach().double().cpu().numpy(),
            bounds=lbfgs_bounds,
            maxiter=maxiter,
            pgtol=pgtol,
            factr=factr,
            pass_batch_indices=True,
        )
    x = _finite_or_best(torch.from_numpy(xs).to(x0), best_x)
    values = objective(x.clone().requires_grad_(True)).detach()
    return x, values


def _finite_or_best(x: Tensor, best_x: Tensor) -> Tensor:
    """``x`` with each problem whose variables are not all finite at ``best_x`` (the point of
    lowest finite value it evaluated), with a ``RuntimeWarning`` naming them."""
    broken = ~torch.isfinite(x).all(-1)
    if not bool(broken.any()):
        return x
    warnings.warn(
        f"L-BFGS-B broke down into non-finite variables for problem(s) "
        f"{broken.nonzero().flatten().tolist()}: returning the best point each evaluated.",
        RuntimeWarning,
        stacklevel=3,
    )
    return torch.where(broken.unsqueeze(-1), best_x, x)


def isolating(
    objective: Callable[[Tensor], Tensor], errors: tuple[type[BaseException], ...]
) -> Callable[[Tensor], Tensor]:
    r"""``objective`` with the ``errors`` of an evaluation charged to the rows that raise them.

    An evaluation of ``N`` independent problems at once fails as a whole when one problem's
    linear algebra fails. The wrapper then finds the failing rows by bisection -- evaluating
    the trial rows of one half of the suspects with every other row at its last point that
    evaluated without error -- and returns :math:`+\infty` for them (a line search backs off)
    and the other rows' values at their trial points. Problem ``i``'s value must depend on row
    ``i`` only. An error before any evaluation succeeded is raised, as is one that the last
    good points raise too. The first isolated error is reported as a ``RuntimeWarning``.
    """
    good: Tensor | None = None
    warned = False

    def evaluate(x: Tensor) -> Tensor:
        nonlocal good, warned
        try:
            values = objective(x)
        except errors as err:
            if good is None:
                raise
            bad = _failing_rows(objective, x, good, errors)
            if not warned:
                warned = True
                warnings.warn(
                    f"{err} at trial points of problem(s) "
                    f"{bad.nonzero().flatten().tolist()}: charged +inf there, the other "
                    "problems go on.",
                    RuntimeWarning,
                    stacklevel=2,
                )
            safe = torch.where(bad.unsqueeze(-1), good, x)
            values = torch.where(bad, math.inf, objective(safe))
            ok = ~bad
        else:
            ok = torch.isfinite(values.detach())
        good = torch.where(ok.unsqueeze(-1), x.detach(), x.detach() if good is None else good)
        return values

    return evaluate


def _failing_rows(
    objective: Callable[[Tensor], Tensor],
    x: Tensor,
    good: Tensor,
    errors: tuple[type[BaseException], ...],
) -> Tensor:
    """Rows whose trial points in ``x`` make ``objective`` raise (the others held at ``good``)."""
    bad = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)
    suspects = [torch.arange(x.shape[0], device=x.device)]
    while suspects:
        rows = suspects.pop()
        trial = good.clone()
        trial[rows] = x.detach()[rows]
        try:
            objective(trial.requires_grad_(x.requires_grad))
        except errors:
            if len(rows) == 1:
                bad[rows] = True
            else:
                half = len(rows) // 2
                suspects += [rows[:half], rows[half:]]
    return bad


def _member_log_prior(model: torch.nn.Module, size: int) -> Tensor:
    """Sum of every hyperparameter log-prior, per member of a flat batch of ``size``."""
    total = None
    for name, module, prior, closure, _ in model.named_priors():
        lp = prior.log_prob(closure(module))
        if lp.numel() % size != 0 or (lp.dim() > 0 and lp.shape[0] != size and size > 1):
            raise ValueError(
                f"prior {name!r} is not batched over the {size} members; independent "
                "hyperparameters need a covar_module with batch_shape equal to the model's."
            )
        lp = lp.reshape(size, -1).sum(-1) if lp.dim() > 0 else lp.expand(size) / size
        total = lp if total is None else total + lp
    return total if total is not None else torch.zeros(size)


def fit_evidence_batched(model: PairwiseLaplaceGP, *, maxiter: int = 200) -> Tensor:
    r"""Fit each member's hyperparameters by maximum a posteriori Laplace evidence, at once.

    Member ``i`` maximises :math:`\log Z_i(\theta_i) + \log p(\theta_i)`, independently of the
    others (one L-BFGS-B recursion per member, see :func:`minimize_batched`); each function
    evaluation is one batched Newton solve and one batched evidence with autograd. Every
    trainable parameter must carry the model's (one-dimensional) batch shape in front, as a
    kernel built with ``batch_shape=model.batch_shape`` does.

    Args:
        model: A :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` with ``batch_shape
            = (b,)`` and batched hyperparameters.
        maxiter: Maximum L-BFGS-B iterations.

    Returns:
        The ``b`` maximised objectives (evidence plus log-priors).
    """
    if len(model.batch_shape) != 1:
        raise ValueError(
            f"fit_evidence_batched needs a model with batch_shape (b,), got {model.batch_shape}."
        )
    b = model.batch_shape[0]
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        if p.dim() == 0 or p.shape[0] != b:
            raise ValueError(
                f"a hyperparameter of shape {tuple(p.shape)} is not batched over the {b} members; "
                "build the kernel with batch_shape=model.batch_shape."
            )
    sizes = [p[0].numel() for p in params]
    x0 = torch.cat([p.detach().reshape(b, -1) for p in params], dim=-1)
    model.train()

    def objective(x: Tensor) -> Tensor:
        with torch.no_grad():
            for p, chunk in zip(params, x.detach().split(sizes, dim=-1), strict=True):
                p.copy_(chunk.reshape(p.shape))
        return -_evidence_with_params(model, params, x, sizes, b)

    x, values = minimize_batched(objective, x0, maxiter=maxiter, isolate=FIT_ERRORS)
    with torch.no_grad():
        for p, chunk in zip(params, x.split(sizes, dim=-1), strict=True):
            p.copy_(chunk.reshape(p.shape))
    model.eval()
    return -values


def _evidence_with_params(
    model: PairwiseLaplaceGP, params: list[Tensor], x: Tensor, sizes: list[int], b: int
) -> Tensor:
    """Per-member evidence plus log-prior, with gradients flowing to ``x``."""
    # The parameters hold x's values; their gradients are x's gradients (the objective of
    # member i depends on row i only), so differentiate in the parameters and route back.
    evidence = model.laplace_evidence().reshape(b) + _member_log_prior(model, b).to(x)
    grads = torch.autograd.grad(evidence.sum(), params, allow_unused=True)
    flat = torch.cat(
        [
            (g if g is not None else torch.zeros_like(p)).reshape(b, -1)
            for g, p in zip(grads, params, strict=True)
        ],
        dim=-1,
    )
    # a value whose gradient in x is `flat` (row i's value depends on row i only)
    return evidence.detach() + (x * flat).sum(-1) - (x.detach() * flat).sum(-1)


def _boltzmann_restarts(
    values: Tensor, n: int, generators: Sequence[torch.Generator], eta: float = 1.0
) -> Tensor:
    """Indices (``b x n``) of raw samples to start from, as BoTorch's ``initialize_q_batch``.

    Samples without replacement with weights ``exp(eta * z)`` of the standardised values (row
    ``i`` from ``generators[i]``, so a member's choice does not depend on the others), and
    always keeps each member's best raw sample.
    """
    raw = values.shape[-1]
    n = min(n, raw)
    finite = torch.isfinite(values)
    v = torch.where(finite, values, values.new_tensor(-math.inf))
    mean = torch.where(finite, v, 0.0).sum(-1, keepdim=True) / finite.sum(-1, keepdim=True).clamp(
        min=1
    )
    dev = torch.where(finite, v - mean, 0.0)
    std = (dev.square().sum(-1, keepdim=True) / finite.sum(-1, keepdim=True).clamp(min=1)).sqrt()
    z = torch.where(finite, dev / std.clamp_min(1e-12), -math.inf)
    weights = torch.exp(eta * (z - z.amax(-1, keepdim=True).clamp_min(-1e30)))
    weights = torch.where(finite, weights, 0.0) + 1e-300
    weights = weights.cpu().double()
    idx = torch.stack(
        [
            torch.multinomial(w, n, replacement=False, generator=g)
            for w, g in zip(weights, generators, strict=True)
        ]
    ).to(values.device)
    best = v.argmax(-1, keepdim=True)
    has_best = (idx == best).any(-1, keepdim=True)
    idx[:, -1:] = torch.where(has_best, idx[:, -1:], best)
    return idx


def _checked_initial(initial: Tensor, b: int, q: int, dim: int) -> Tensor:
    """``initial`` if it is a ``b x m x q x d`` tensor of points in the unit cube."""
    if (
        not torch.is_tensor(initial)
        or initial.dim() != 4
        or initial.shape[:1] + initial.shape[2:] != (b, q, dim)
    ):
        shape = tuple(initial.shape) if torch.is_tensor(initial) else type(initial).__name__
        raise ValueError(f"initial must be a {b} x m x {q} x {dim} tensor, got {shape}.")
    if not bool(((initial >= 0) & (initial <= 1)).all()):
        raise ValueError("initial must hold points of the unit cube (no NaN).")
    return initial


def _check_acqf_args(acq_function: AcquisitionFunction, **counts: int) -> int:
    """Check that every count is a positive integer and ``batch_size`` fits the model.

    Returns:
        The batch size as an int.

    Raises:
        ValueError: If a count is not a positive integer, or ``batch_size`` differs from the
            (one-dimensional) batch shape of ``acq_function.model``.
    """
    b = {name: whole_number(value, name, 1) for name, value in counts.items()}["batch_size"]
    shape = getattr(getattr(acq_function, "model", None), "batch_shape", None)
    if shape is not None and tuple(shape) != (b,):
        raise ValueError(
            f"batch_size {b} does not match the acquisition function's model, whose batch "
            f"shape is {tuple(shape)}."
        )
    return b


def optimize_acqf_batched(
    acq_function: AcquisitionFunction,
    batch_size: int,
    q: int,
    dim: int,
    *,
    num_restarts: int,
    raw_samples: int,
    seeds: Sequence[int],
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    raw_batch_limit: int = 128,
    maxiter: int = 200,
    initial: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    r"""Maximise ``b`` independent acquisition problems on the unit cube at once.

    ``acq_function`` belongs to a batched model with ``batch_shape = (b,)``: evaluated at a
    ``r x b x q x d`` tensor it returns ``r x b`` values, column ``i`` depending on member ``i``'s
    model and inputs only (BoTorch's analytic and Monte-Carlo acquisition functions on a batched
    model do). Member ``i`` draws ``raw_samples`` scrambled Sobol points from ``seeds[i]``, keeps
    ``num_restarts`` of them by Boltzmann sampling on their values (always including the best),
    and improves each with L-BFGS-B (every restart of every member an independent problem of
    one batched run); the best restart is returned. Candidates in ``initial`` join each
    member's raw samples: where one of them is the best raw sample it is always a restart, so
    the result is at least as good as the best of them.

    Args:
        acq_function: The acquisition function of the batched model.
        batch_size: Number of members ``b``.
        q: Points per candidate.
        dim: Input dimension ``d``.
        num_restarts: Restarts per member.
        raw_samples: Raw samples per member.
        seeds: ``b`` integer seeds (raw samples and restart selection).
        dtype: Dtype of the candidates and their values.
        device: Device of the candidates.
        raw_batch_limit: Raw samples evaluated per call (bounds memory).
        maxiter: Maximum L-BFGS-B iterations.
        initial: ``b x m x q x d`` candidates in the unit cube (``m >= 0``) that member ``i``
            considers besides its raw samples (row ``i``), or ``None``.

    Returns:
        ``(candidates, values)``: ``b x q x d`` and ``b``, both in ``dtype`` (the values are the
        acquisition function's at the candidates, cast to ``dtype`` when its model computes in
        another dtype).

    Raises:
        ValueError: If a count is not a positive integer, ``batch_size`` differs from the batch
            shape of ``acq_function``'s model, ``seeds`` does not hold ``b`` seeds, or
            ``initial`` is not ``b x m x q x d`` or holds a point outside the unit cube.
    """
    b = _check_acqf_args(
        acq_function,
        batch_size=batch_size,
        q=q,
        dim=dim,
        num_restarts=num_restarts,
        raw_samples=raw_samples,
        raw_batch_limit=raw_batch_limit,
    )
    if len(seeds) != b:
        raise ValueError(f"need one seed per member: got {len(seeds)} seeds for {b} members.")
    device = torch.device(device) if device is not None else torch.device("cpu")
    tkw = {"dtype": dtype, "device": device}
    raw = torch.stack(
        [
            torch.quasirandom.SobolEngine(q * dim, scramble=True, seed=int(s) % 2**31)
            .draw(raw_samples, dtype=torch.float64)
            .reshape(raw_samples, q, dim)
            for s in seeds
        ],
        dim=1,
    ).to(**tkw)  # raw x b x q x d
    if initial is not None:
        raw = torch.cat([raw, _checked_initial(initial, b, q, dim).transpose(0, 1).to(raw)])
    with torch.no_grad():
        raw_values = torch.cat([acq_function(chunk) for chunk in raw.split(raw_batch_limit)])
    generators = [torch.Generator().manual_seed(int(s) % 2**63 + 1) for s in seeds]
    pick = _boltzmann_restarts(raw_values.T, num_restarts, generators)  # b x r
    r = pick.shape[1]
    members = torch.arange(b, device=device)
    x0 = raw[pick.T, members.unsqueeze(0)]  # r x b x q x d

    # One L-BFGS-B problem per (restart, member), as optimize_acqf's per-restart solver: each
    # stops on its own test. (Summing a member's restarts into one problem took twice the
    # iterations to the same values.)
    def objective(x: Tensor) -> Tensor:
        return -acq_function(x.reshape(r, b, q, dim)).reshape(-1)

    x, _ = minimize_batched(objective, x0.reshape(r * b, q * dim), (0.0, 1.0), maxiter=maxiter)
    X = x.reshape(r, b, q, dim).clamp(0.0, 1.0)
    with torch.no_grad():
        values = acq_function(X)  # r x b
    best = values.argmax(0)
    candidates = X[best, members]
    return candidates, values[best, members].to(dtype)
