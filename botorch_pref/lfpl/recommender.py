r"""LFPL/IF as a recommender in the original user and item ids: fit, score, recommend, save, load.

:class:`LFPLRecommender` wraps an :class:`~botorch_pref.lfpl.factor_model.LFPL` model fitted with
:func:`~botorch_pref.lfpl.implicit.fit_implicit`, the maps between original ids and the model's
contiguous indices, the training interactions (to leave a user's seen items out of the
recommendations) and the settings. The score of item :math:`j` for user :math:`u` is the
log-skill :math:`U_u^\top V_j`; :meth:`LFPLRecommender.recommend` returns the :math:`k` items of
highest score, best first.

A saved recommender is one file written by ``torch.save`` holding only tensors and a JSON
string (settings and id maps), read back with ``torch.load(..., weights_only=True)``: loading
never runs pickled code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from botorch_pref.data.movielens import Interactions
from botorch_pref.lfpl.dyads import check_int
from botorch_pref.lfpl.factor_model import LFPL
from botorch_pref.lfpl.implicit import (
    LR_SCHEDULES,
    NEGATIVE_SAMPLERS,
    ImplicitFeedback,
    fit_implicit,
)
from botorch_pref.lfpl.training import METHODS, FitResult, check_number

__all__ = ["FORMAT", "LFPLRecommender", "Recommendations"]

FORMAT = "botorch-pref-lfpl-recommender/1"

# The defaults of LFPLRecommender, the CLI and the benchmarks. On MovieLens-100K (random
# leave-one-out, three split seeds, benchmarks/RESULTS-lfpl.md) K = 64 and L = 5 are where AUC
# stopped improving for the cost; 16 epochs with a rate decaying linearly from 0.3 to zero reach
# the AUC of 25 constant-rate epochs at 0.1 in 0.64 of the steps (fewer epochs or other rates
# lost AUC); the joint step costs less than the alternating one at the same AUC.
DEFAULTS: dict[str, Any] = {
    "dim": 64,
    "n_negatives": 5,
    "epochs": 16,
    "batch_size": 4096,
    "lr": 0.3,
    "reg": 0.03,
    "method": "joint",
    "negatives": "uniform",
    "lr_schedule": "linear",
    "init_scale": 0.1,
    "seed": 0,
}


@dataclass
class Recommendations:
    """Top-k items per user, in original ids.

    Attributes:
        users: The users asked for.
        items: For each user, up to ``k`` item ids, best first (fewer when the user has fewer
            unseen items).
        scores: The matching scores :math:`U_u^\\top V_j`.
    """

    users: list[int | str]
    items: list[list[int | str]]
    scores: list[list[float]]


class LFPLRecommender:
    """LFPL/IF with original ids: ``fit``, ``score_items``, ``recommend``, ``save``, ``load``.

    Example:
        >>> rec = LFPLRecommender(dim=4, epochs=5).fit([("a", 1), ("a", 2), ("b", 2), ("b", 3)])
        >>> rec.recommend(["a"], k=1).items[0] in ([3],)
        True
    """

    def __init__(
        self,
        dim: int = DEFAULTS["dim"],
        *,
        n_negatives: int = DEFAULTS["n_negatives"],
        epochs: int = DEFAULTS["epochs"],
        batch_size: int = DEFAULTS["batch_size"],
        lr: float = DEFAULTS["lr"],
        reg: float = DEFAULTS["reg"],
        method: str = DEFAULTS["method"],
        negatives: str = DEFAULTS["negatives"],
        lr_schedule: str = DEFAULTS["lr_schedule"],
        init_scale: float = DEFAULTS["init_scale"],
        seed: int = DEFAULTS["seed"],
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        threads: int | str | None = "auto",
    ) -> None:
        """Set the model and training settings (checked here, before any data is read).

        Args:
            dim: Latent dimension ``K``.
            n_negatives: Unobserved items each interaction is chosen against (``L``).
            epochs: Passes over the interactions.
            batch_size: Interactions per step.
            lr: AdaGrad learning rate (the default 0.3 goes with the linear schedule; with
                ``lr_schedule="constant"`` 0.1 did best on MovieLens-100K).
            reg: Penalty weight ``lambda``.
            method: ``"joint"`` or ``"alternating"`` (the LFPL paper's; see
                :func:`fit_implicit`).
            negatives: ``"uniform"`` or ``"hard"`` (see :func:`fit_implicit`).
            lr_schedule: ``"linear"`` (decays to zero over the epochs) or ``"constant"``.
            init_scale: Standard deviation of the initial factors.
            seed: Seed of the initial factors, the shuffling and the negatives.
            device: Training and scoring device.
            dtype: ``torch.float32`` or ``torch.float64``.
            threads: CPU threads while fitting (see :mod:`botorch_pref.lfpl.openmp`).
        """
        for name, value, minimum in (
            ("dim", dim, 1),
            ("n_negatives", n_negatives, 1),
            ("epochs", epochs, 1),
            ("batch_size", batch_size, 1),
            ("seed", seed, 0),
        ):
            check_int(name, value, minimum)
        check_number("lr", lr, positive=True)
        check_number("reg", reg, positive=False)
        check_number("init_scale", init_scale, positive=False)
        for name, value, allowed in (
            ("method", method, METHODS),
            ("negatives", negatives, NEGATIVE_SAMPLERS),
            ("lr_schedule", lr_schedule, LR_SCHEDULES),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}.")
        if dtype not in (torch.float32, torch.float64):
            raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}.")
        self.params: dict[str, Any] = {
            "dim": int(dim),
            "n_negatives": int(n_negatives),
            "epochs": int(epochs),
            "batch_size": int(batch_size),
            "lr": float(lr),
            "reg": float(reg),
            "method": method,
            "negatives": negatives,
            "lr_schedule": lr_schedule,
            "init_scale": float(init_scale),
            "seed": int(seed),
        }
        self.device = _device(device)
        self.dtype = dtype
        self.threads = threads
        self.model_: LFPL | None = None
        self.train_: ImplicitFeedback | None = None
        self.user_ids: list[int | str] = []
        self.item_ids: list[int | str] = []
        self.fit_result_: FitResult | None = None
        self.info: dict[str, Any] = {}

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        interactions: Interactions | Iterable[tuple[object, object]],
        *,
        progress: bool = False,
    ) -> LFPLRecommender:
        """Fit on interactions given in original ids.

        Args:
            interactions: An :class:`~botorch_pref.data.Interactions` (e.g. from
                :func:`~botorch_pref.data.load_movielens`), ``(user id, item id)`` pairs,
                or an ``(n, 2)`` array or tensor of them; ids of one kind are all integers or
                all strings.
            progress: Show a progress bar (only on a terminal).

        Returns:
            ``self``.
        """
        if not isinstance(interactions, Interactions):
            if isinstance(interactions, (Tensor, np.ndarray)):
                if interactions.ndim != 2 or interactions.shape[1] != 2:
                    raise ValueError(
                        "an array of interactions must have shape (n, 2), got "
                        f"{tuple(interactions.shape)}."
                    )
                interactions = interactions.tolist()
            pairs = list(interactions)
            for n, pair in enumerate(pairs):
                if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                    raise ValueError(
                        f"interaction {n} must be a (user id, item id) pair, got {pair!r}."
                    )
            interactions = Interactions.from_ids([p[0] for p in pairs], [p[1] for p in pairs])
        feedback = ImplicitFeedback(interactions.pairs, interactions.n_users, interactions.n_items)
        return self.fit_feedback(
            feedback, interactions.user_ids, interactions.item_ids, progress=progress
        )

    def fit_feedback(
        self,
        train: ImplicitFeedback,
        user_ids: Sequence[int | str],
        item_ids: Sequence[int | str],
        *,
        progress: bool = False,
        process_group: Any = None,
    ) -> LFPLRecommender:
        """Fit on indexed interactions with the maps from indices to original ids.

        Args:
            train: Training interactions (indices).
            user_ids: Original id of each user index (``len == train.n_users``).
            item_ids: Original id of each item index (``len == train.n_items``).
            progress: Show a progress bar (only on a terminal).
            process_group: Train data-parallel on this ``torch.distributed`` group
                (``"default"``: the default group): every process passes all of ``train``,
                keeps its users' share (:func:`~botorch_pref.lfpl.distributed.fit_data_parallel`)
                and ends with the same model; ``batch_size`` is per process.

        Returns:
            ``self``.

        Raises:
            TypeError: If an id is neither an integer nor a string.
            ValueError: If an id is listed twice, or the numbers of ids do not match ``train``.
        """
        user_ids, item_ids = _original_ids(user_ids, "user"), _original_ids(item_ids, "item")
        if len(user_ids) != train.n_users or len(item_ids) != train.n_items:
            raise ValueError(
                f"{len(user_ids)} user ids and {len(item_ids)} item ids for interactions with "
                f"{train.n_users} users and {train.n_items} items."
            )
        if train.saturated_user is not None:
            raise ValueError(
                f"user {user_ids[train.saturated_user]!r} has interacted with every one of the "
                f"{train.n_items} items: LFPL/IF learns from items a user has not interacted "
                "with, so every user needs at least one."
            )
        p = self.params
        model = LFPL(
            train.n_users,
            train.n_items,
            p["dim"],
            init_scale=p["init_scale"],
            seed=p["seed"],
            device=self.device,
            dtype=self.dtype,
        )
        if process_group is not None:
            from botorch_pref.lfpl.distributed import fit_data_parallel

            fit = partial(fit_data_parallel, process_group=process_group)
        else:
            fit = fit_implicit
        self.fit_result_ = fit(
            model,
            train,
            epochs=p["epochs"],
            batch_size=p["batch_size"],
            n_negatives=p["n_negatives"],
            negatives=p["negatives"],
            lr=p["lr"],
            lr_schedule=p["lr_schedule"],
            reg=p["reg"],
            method=p["method"],
            seed=p["seed"],
            progress=progress,
            threads=self.threads,
        )
        self.model_ = model
        self.train_ = train.to(self.device)
        self.user_ids, self.item_ids = user_ids, item_ids
        self._user_index = {raw: i for i, raw in enumerate(self.user_ids)}
        return self

    # ------------------------------------------------------------------ prediction
    def user_index(self, users: Iterable[int | str]) -> Tensor:
        """Indices of original user ids; unknown ids raise a ``ValueError`` naming them.

        Args:
            users: Original user ids.

        Returns:
            ``(n,)`` long tensor on the model's device.
        """
        model = self._fitted()
        users = _as_list(users, "users")
        odd = [u for u in users if isinstance(u, bool) or not isinstance(u, (int, str, Integral))]
        if odd:
            raise TypeError(f"user ids must be integers or strings, got {odd[0]!r}.")
        unknown = [u for u in users if u not in self._user_index]
        if unknown:
            raise ValueError(
                f"unknown user id(s) {unknown[:5]!r}: not among the {len(self.user_ids)} users "
                "the recommender was fitted on."
            )
        index = torch.tensor([self._user_index[u] for u in users], dtype=torch.long)
        index = index.to(model.U.device)
        unseen = ~model.seen_rows[index]
        if bool(unseen.any()):
            bad = [users[i] for i in unseen.nonzero().squeeze(-1).tolist()][:5]
            raise ValueError(f"user id(s) {bad!r} have no training interaction.")
        return index

    @torch.no_grad()
    def score_items(self, users: Iterable[int | str]) -> Tensor:
        """Scores of every item for each user, in the order of :attr:`item_ids`.

        Args:
            users: Original user ids.

        Returns:
            ``(n_users, n_items)`` scores, detached from autograd.
        """
        model = self._fitted()
        return model.score_items(self.user_index(users))

    @torch.no_grad()
    def recommend(
        self, users: Iterable[int | str], k: int = 10, exclude_seen: bool = True
    ) -> Recommendations:
        """The ``k`` items of highest score for each user, in original ids.

        Args:
            users: Original user ids.
            k: Items per user.
            exclude_seen: Leave out the items a user interacted with in training.

        Returns:
            :class:`Recommendations`; with ``exclude_seen`` a user with fewer than ``k``
            unseen items gets all of them.
        """
        check_int("k", k, 1)
        if not isinstance(exclude_seen, bool):
            raise TypeError(f"exclude_seen must be a bool, got {exclude_seen!r}.")
        users = _as_list(users, "users")
        index = self.user_index(users)
        scores = self._fitted().score_items(index)
        if exclude_seen:
            seen = self.train_.exclusion_mask(index)  # type: ignore[union-attr]
            scores = scores.masked_fill(seen, -torch.inf)
        top = scores.topk(min(k, scores.shape[1]), dim=-1)
        values, items = top.values.cpu(), top.indices.cpu()
        finite = torch.isfinite(values)
        out_items, out_scores = [], []
        for row in range(len(users)):
            keep = finite[row]
            out_items.append([self.item_ids[j] for j in items[row][keep].tolist()])
            out_scores.append(values[row][keep].tolist())
        return Recommendations(users=users, items=out_items, scores=out_scores)

    def _fitted(self) -> LFPL:
        if self.model_ is None:
            raise ValueError("the recommender is not fitted: call fit() or load() first.")
        return self.model_

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        """Write the fitted recommender to one file (tensors and JSON; no pickled objects).

        Args:
            path: The file to write.
        """
        model = self._fitted()
        meta = {
            "format": FORMAT,
            "params": self.params,
            "dtype": str(self.dtype).removeprefix("torch."),
            "user_ids": self.user_ids,
            "item_ids": self.item_ids,
            "info": self.info,
            "fit": None
            if self.fit_result_ is None
            else {
                "train_loss": self.fit_result_.train_loss,
                "epochs_run": self.fit_result_.epochs_run,
                "seconds": self.fit_result_.seconds,
            },
        }
        train = self.train_
        payload = {
            "meta": json.dumps(meta),
            "U": model.U.detach().cpu(),
            "V": model.V.detach().cpu(),
            "seen_rows": model.seen_rows.cpu(),
            "seen_cols": model.seen_cols.cpu(),
            "train_pairs": train.pairs.cpu(),  # type: ignore[union-attr]
        }
        torch.save(payload, Path(path))

    @classmethod
    def load(cls, path: str | Path, device: torch.device | str = "cpu") -> LFPLRecommender:
        """Read a recommender written by :meth:`save` (``torch.load(weights_only=True)``).

        Args:
            path: The file.
            device: Where to put the model.

        Returns:
            The fitted recommender.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        try:
            payload = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # any unreadable file gets one clear message
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ValueError(f"{path}: not a saved LFPL recommender ({first})") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("meta"), str):
            raise ValueError(f"{path}: not a saved LFPL recommender.")
        meta = json.loads(payload["meta"])
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: unknown format {meta.get('format')!r}, expected {FORMAT}.")
        dtype = {"float32": torch.float32, "float64": torch.float64}[meta["dtype"]]
        rec = cls(**meta["params"], device=device, dtype=dtype)
        U, V = payload["U"].to(dtype), payload["V"].to(dtype)
        model = LFPL.from_factors(U, V).to(rec.device)
        model.seen_rows.copy_(payload["seen_rows"].to(rec.device))
        model.seen_cols.copy_(payload["seen_cols"].to(rec.device))
        model.eval()
        rec.model_ = model
        rec.user_ids, rec.item_ids = list(meta["user_ids"]), list(meta["item_ids"])
        rec._user_index = {raw: i for i, raw in enumerate(rec.user_ids)}
        rec.train_ = ImplicitFeedback(
            payload["train_pairs"], len(rec.user_ids), len(rec.item_ids)
        ).to(rec.device)
        rec.info = dict(meta.get("info") or {})
        if meta.get("fit") is not None:
            rec.fit_result_ = FitResult(
                train_loss=list(meta["fit"]["train_loss"]),
                epochs_run=int(meta["fit"]["epochs_run"]),
                best_epoch=int(meta["fit"]["epochs_run"]) - 1,
                seconds=float(meta["fit"]["seconds"]),
            )
        return rec

    def __repr__(self) -> str:
        state = (
            "unfitted"
            if self.model_ is None
            else f"{len(self.user_ids)} users, {len(self.item_ids)} items"
        )
        settings = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"LFPLRecommender({settings}; {state})"


def _device(device: torch.device | str) -> torch.device:
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"device {device!r} is not a torch device (e.g. cpu, cuda).") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} was asked for, but CUDA is not available.")
    return device


def _original_ids(ids: Sequence[int | str], name: str) -> list[int | str]:
    """Original ids as a list of distinct Python ints and strings.

    Arrays and tensors are unpacked and numpy integers become ints, so the ids are JSON-ready
    for :meth:`LFPLRecommender.save` and match lookups by value.

    Args:
        ids: The original id of each index.
        name: ``"user"`` or ``"item"``, for the messages.

    Returns:
        The ids, in order.

    Raises:
        TypeError: If an id is a bool or neither an integer nor a string.
        ValueError: If an id is listed twice (two indices would share it).
    """
    if isinstance(ids, (Tensor, np.ndarray)):
        ids = ids.reshape(-1).tolist()
    out: list[int | str] = []
    seen: set[int | str] = set()
    for raw in ids:
        if isinstance(raw, bool) or not isinstance(raw, (str, Integral)):
            raise TypeError(f"{name} ids must be integers or strings, got {raw!r}.")
        value = raw if isinstance(raw, str) else int(raw)
        if value in seen:
            raise ValueError(f"{name} id {value!r} is listed twice: every index needs its own id.")
        seen.add(value)
        out.append(value)
    return out


def _as_list(users: Iterable[int | str], name: str) -> list[int | str]:
    if isinstance(users, (str, int)):
        return [users]
    if isinstance(users, Tensor):
        return users.reshape(-1).tolist()
    try:
        return list(users)
    except TypeError:
        raise TypeError(f"{name} must be ids or an iterable of ids, got {users!r}.") from None
