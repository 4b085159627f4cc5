r"""The Laplace mode of a preference GP's data, cached per hyperparameter values.

A :class:`~botorch_pref.models.pairwise.PairwiseLaplaceGP` holds one :class:`LaplaceMode` per
data set: the Laplace engine of the data (:func:`botorch_pref.models.data.build_engine`), and,
for the hyperparameter values it was last found at, the mode :math:`\hat f`
(:class:`~botorch_pref.inference.engine.ModeResult`), the flat-batch prior covariance :math:`K`
it was found with, the transformed training designs, and the posterior factors
(:class:`~botorch_pref.inference.engine.LaplaceFactors`, formed lazily on the first posterior
call). The model compares a key of its hyperparameters (:class:`ModeKey`: their values, its
modules and the link's scale) with the one stored here (:meth:`LaplaceMode.is_current`) and
finds the mode again only when they differ.

With ``inference="ep"`` the factors are expectation propagation's instead
(:mod:`botorch_pref.inference.ep`), its sites started from the Laplace mode's the first time and
from the last run's afterwards (a hyperparameter change moves them little); the Laplace mode is
still found, as that start.

Warm starts: a mode search starts from the previous mode's coefficients when only the
hyperparameters changed, otherwise from a :class:`~botorch_pref.inference.engine.WarmStart`
carried over from the model's previous data (exact when designs were appended; a start worse
than zero is discarded by the Newton driver).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import Module

from botorch_pref.inference import ep
from botorch_pref.inference.engine import LaplaceEngine, LaplaceFactors, ModeResult, WarmStart
from botorch_pref.inference.newton import Form, default_tolerance
from botorch_pref.inference.rows import row_differences, row_gram

__all__ = ["LaplaceMode", "ModeKey"]


@dataclass(frozen=True, eq=False)
class ModeKey:
    """What a mode depends on besides the data: the hyperparameters in the widest sense.

    The parameter values alone do not identify them: a likelihood or kernel replaced by another
    one (of another kind, or another ``nu``) can hold equal raw values, and a probit's
    ``noise_std`` is a plain float, not a parameter. The key therefore also holds the model's
    modules themselves (compared by identity; holding them keeps a replaced module's ``id`` from
    being reused) and the likelihood's link scale.
    """

    values: Tensor
    modules: tuple[Module, ...]
    scale: float

    @classmethod
    def of(cls, model: Module) -> ModeKey:
        """The key of a preference GP's hyperparameters now.

        Args:
            model: The model (its ``likelihood`` has a ``scale``).

        Returns:
            The key.
        """
        params = [p.detach().reshape(-1) for p in model.parameters()]
        values = torch.cat(params).clone() if params else torch.zeros(0)
        return cls(values, tuple(model.modules()), float(model.likelihood.scale))

    def matches(self, other: ModeKey) -> bool:
        """Whether ``other`` describes the same hyperparameters."""
        a, b = self.values, other.values
        return (
            self.scale == other.scale
            and len(self.modules) == len(other.modules)
            and all(m is n for m, n in zip(self.modules, other.modules, strict=True))
            and a.shape == b.shape
            and a.device == b.device
            and torch.equal(a, b)
        )


class LaplaceMode:
    """The engine of one data set and its mode and factors at one set of hyperparameter values.

    Args:
        engine: The Laplace engine of the data.
        form: ``"comparison"`` or ``"design"`` to force a Newton form; ``None`` chooses the
            smaller system.
        tol: Newton stopping tolerance (``None``: dtype-aware default).
        max_iter: Maximum Newton iterations.
        warm: Where the first mode search may start (from the previous data), or ``None``.
        inference: ``"laplace"`` or ``"ep"`` (the data must then be pairs and ties, with a
            probit likelihood).
    """

    def __init__(
        self,
        engine: LaplaceEngine,
        *,
        form: Form | None = None,
        tol: float | None = None,
        max_iter: int = 100,
        warm: WarmStart | None = None,
        inference: str = "laplace",
    ) -> None:
        self.engine = engine
        self.inference = inference
        self.sites: ep.EPSites | None = None  # the last EP run's sites (a warm start)
        self._rows: ep.ComparisonRows | None = None  # EP's comparison rows, once per data
        self.form = form
        self.tol = tol
        self.max_iter = int(max_iter)
        self.warm = warm
        self.result: ModeResult | None = None
        self.K: Tensor | None = None  # flat-batch prior covariance at the mode's hyperparameters
        self.train_X: Tensor | None = None  # transformed datapoints, batch_shape x n x d
        self.snapshot: ModeKey | None = None  # the hyperparameters the mode was found at
        self.loose = False  # found at a looser tolerance than ``tol`` (for the evidence)
        self._factors: LaplaceFactors | None = None

    def is_current(self, snapshot: ModeKey) -> bool:
        """Whether the mode was found, to the full tolerance, at the hyperparameters ``snapshot``.

        Args:
            snapshot: The model's hyperparameters now (:meth:`ModeKey.of`).

        Returns:
            ``True`` when the cached mode and factors can be used as they are.
        """
        return (
            self.result is not None
            and not self.loose
            and self.snapshot is not None
            and self.snapshot.matches(snapshot)
        )

    def find(
        self, K: Tensor, train_X: Tensor, snapshot: ModeKey, tol: float | None = None
    ) -> ModeResult:
        """Find the mode at prior covariance ``K`` (no autograd), warm-started, and cache it.

        Args:
            K: ``B x n x n`` flat-batch prior covariance of the transformed designs (detached).
            train_X: ``batch_shape x n x d`` transformed designs (detached).
            snapshot: The hyperparameters ``K`` was computed at.
            tol: Newton tolerance for this search (default: :attr:`tol`); a looser one marks
                the mode to be polished on the next :meth:`is_current` check.

        Returns:
            The mode.
        """
        tol = tol if tol is not None else self.tol
        d0 = self.result.d if self.result is not None else None
        mode = self.engine.find_mode(
            K, self._start(), d0=d0, form=self.form, tol=tol, max_iter=self.max_iter
        )
        if not bool(mode.converged.all()):
            warnings.warn(
                f"Newton did not converge in {self.max_iter} iterations; the mode may be "
                "inaccurate (consider float64 or different hyperparameters).",
                RuntimeWarning,
                stacklevel=4,
            )
        self.result, self.K, self.train_X, self.snapshot = mode, K, train_X, snapshot
        self._factors = None  # factored lazily, on the first posterior call
        self.warm = None
        self.loose = tol is not None and tol > default_tolerance(K.dtype)
        return mode

    def _start(self) -> Tensor | None:
        """Starting coefficients: the last mode's (same data), else the carried-over ones."""
        if self.result is not None:
            return self.result.beta
        if self.warm is None:
            return None
        return self.engine.warm_beta(self.warm)

    def factors(self) -> LaplaceFactors:
        """The posterior factors at the cached mode (formed on first use, then cached).

        Returns:
            The factors of the flat batch.
        """
        if self.result is None:
            raise RuntimeError("The mode has not been found yet.")
        if self._factors is None:
            if self.inference == "ep":
                rows, K_C = self._comparisons(self.K)
                self._run_ep(K_C, self.tol)
                self._factors = ep.ep_factors(K_C, rows.rows, self.K.shape[-1], self.sites)
            else:
                self._factors = self.engine.laplace_factors(self.K, self.result)
        return self._factors

    def utility(self) -> Tensor:
        """The posterior's centre at the designs (``B x n``): the mode, or EP's mean."""
        if self.inference == "ep":
            return (self.K @ self.factors().alpha.unsqueeze(-1)).squeeze(-1)
        return self.result.f

    def evidence(self, K: Tensor) -> Tensor:
        """The log evidence at prior covariance ``K`` (``B``), differentiable in ``K``.

        Laplace's evidence
        (:meth:`~botorch_pref.inference.engine.LaplaceEngine.evidence_with_gradients`; the mode
        must have been found at ``K``'s values, :meth:`find`), or EP's
        (:func:`~botorch_pref.inference.ep.ep_log_evidence`; the mode is needed only before the
        first EP run on these data, :meth:`needs_mode`, which starts from it), with the sites
        run to :func:`~botorch_pref.inference.ep.fit_tolerance` unless a ``tol`` was given.

        Args:
            K: ``B x n x n`` flat-batch prior covariance, with autograd.

        Returns:
            The evidence of each member.
        """
        if self.inference != "ep":
            return self.engine.evidence_with_gradients(K, self.result)[0]
        rows, K_C = self._comparisons(K)
        self._run_ep(K_C.detach(), self.tol or ep.fit_tolerance(K.dtype))
        return ep.ep_log_evidence(K_C, self.engine.likelihood, self.sites, rows.real, rows.tie)

    def _comparisons(self, K: Tensor) -> tuple[ep.ComparisonRows, Tensor]:
        """EP's comparison rows and their prior covariance ``K_C``."""
        rows = self._comparison_rows()
        return rows, row_gram(K, rows.rows)[1]

    def _comparison_rows(self) -> ep.ComparisonRows:
        """:func:`~botorch_pref.inference.ep.comparison_rows` of the data, formed once."""
        if self._rows is None:
            self._rows = ep.comparison_rows(self.engine.structure)
        return self._rows

    def needs_mode(self) -> bool:
        """Whether :meth:`evidence` needs the mode at its ``K`` (always, except when EP runs
        from an earlier run's sites)."""
        return self.inference != "ep" or not self._sites_usable()

    def _sites_usable(self) -> bool:
        last = self.sites
        return last is not None and bool(
            torch.isfinite(last.tau).all() & torch.isfinite(last.nu).all()
        )

    def _run_ep(self, K_C: Tensor, tol: float | None = None) -> None:
        """Run EP at ``K_C`` (no autograd) from the last sites, or the Laplace mode's."""
        rows, likelihood = self._comparison_rows(), self.engine.likelihood
        with torch.no_grad():  # the tie threshold is a parameter
            if self._sites_usable():
                tau, nu = self.sites.tau, self.sites.nu
            else:
                c = row_differences(self.result.f, rows.rows)
                _, grad, neg_hess = ep.comparison_derivatives(likelihood, c, rows.tie)
                tau, nu = ep.laplace_sites(grad, neg_hess, c, rows.real)
            self.sites = ep.run_ep(K_C, likelihood, tau, nu, rows.real, tie=rows.tie, tol=tol)

    def warm_start(self, n: int) -> WarmStart | None:
        """What a mode search for ``n`` designs (these first) can start from, or ``None``.

        Args:
            n: The number of designs of the next data set.

        Returns:
            The warm start from the cached mode (``None`` before any mode was found).
        """
        if self.result is None:
            return None
        return self.engine.warm_start(self.result, n)
