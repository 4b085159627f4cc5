"""Fitted hyperparameters, stored next to the answers so that a run resumes without refitting."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import torch
from botorch.models.model import Model
from torch import Tensor

from botorch_pref.checks import strict_int

__all__ = ["Hyperparameters"]


class Hyperparameters(NamedTuple):
    """A model's fitted hyperparameters and the number of answers they were fitted at.

    Storing them next to the answers lets a run be rebuilt without refitting
    (:meth:`~botorch_pref.loop.PreferenceOptimizer.sync`): the answers up to ``n_answers`` are
    recorded without fits, these values are loaded, and the answers after them are recorded as
    usual.

    Attributes:
        values: The model's parameters by name (unconstrained, as ``named_parameters`` gives).
        n_answers: The number of answered queries at the fit.
    """

    values: dict[str, Tensor]
    n_answers: int

    @classmethod
    def of(cls, model: Model, n_answers: int) -> Hyperparameters:
        """A copy of ``model``'s parameters, fitted at ``n_answers`` answers."""
        values = {name: p.detach().clone() for name, p in model.named_parameters()}
        return cls(values, n_answers)

    def check(self, model: Model) -> None:
        """Check that the values fit ``model``'s parameters, changing nothing.

        Raises:
            ValueError: If the names or shapes differ from the model's parameters.
        """
        params = dict(model.named_parameters())
        if set(params) != set(self.values) or any(
            params[name].shape != v.shape for name, v in self.values.items()
        ):
            raise ValueError(
                "stored hyperparameters do not fit this model: expected "
                f"{ {k: tuple(p.shape) for k, p in params.items()} }, got "
                f"{ {k: tuple(v.shape) for k, v in self.values.items()} }."
            )

    def load_into(self, model: Model) -> None:
        """Copy the values into ``model``'s parameters (and put it in eval mode).

        Raises:
            ValueError: If the names or shapes differ from the model's parameters (see
                :meth:`check`); the model is then unchanged.
        """
        self.check(model)
        params = dict(model.named_parameters())
        with torch.no_grad():
            for name, v in self.values.items():
                params[name].copy_(v.to(params[name]))
        model.eval()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (float64 values, shapes kept)."""
        return {
            "n_answers": int(self.n_answers),
            "values": {
                name: {
                    "shape": list(v.shape),
                    "data": v.detach().double().cpu().reshape(-1).tolist(),
                }
                for name, v in self.values.items()
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hyperparameters:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: For a malformed dictionary.
        """
        try:
            n = strict_int(data["n_answers"], "n_answers")
            values = {
                str(name): torch.tensor(v["data"], dtype=torch.float64).reshape(v["shape"])
                for name, v in dict(data["values"]).items()
            }
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"not a stored set of hyperparameters: {err!r}") from None
        if n < 1 or not all(bool(torch.isfinite(v).all()) for v in values.values()):
            raise ValueError("stored hyperparameters need n_answers >= 1 and finite values.")
        return cls(values, n)
