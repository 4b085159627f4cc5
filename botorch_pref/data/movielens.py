"""Loaders for MovieLens ratings in the GroupLens and RecBole formats.

Supported files (the format is recognised from the file name, then from the first line):

* ``u.data`` (ML-100K): tab-separated ``user item rating timestamp``, no header;
* ``ratings.dat`` (ML-1M, ML-10M): ``user::item::rating::timestamp``, no header;
* ``ratings.csv`` (ML-20M, ML-25M, ML-latest): comma-separated with the header
  ``userId,movieId,rating,timestamp``;
* RecBole atomic ``.inter`` files: tab-separated with a typed header such as
  ``user_id:token<TAB>item_id:token<TAB>rating:float<TAB>timestamp:float``.

MovieLens may not be redistributed: point the loader at your own copy, never commit one.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

__all__ = ["Interactions", "load_movielens"]

KNOWN_FILES = ("u.data", "ratings.dat", "ratings.csv")


@dataclass
class Interactions:
    """User-item interactions with contiguous ids and the maps back to the original ids.

    Attributes:
        users: ``(n,)`` user indices in ``[0, n_users)``.
        items: ``(n,)`` item indices in ``[0, n_items)``.
        ratings: ``(n,)`` ratings (float64), NaN where the file has none.
        timestamps: ``(n,)`` timestamps (int64), or ``None`` where the file has none.
        user_ids: Original id of each user index (``user_ids[u]``).
        item_ids: Original id of each item index.
    """

    users: Tensor
    items: Tensor
    ratings: Tensor
    timestamps: Tensor | None
    user_ids: list[int | str]
    item_ids: list[int | str]

    @property
    def n_users(self) -> int:
        """Number of distinct users."""
        return len(self.user_ids)

    @property
    def n_items(self) -> int:
        """Number of distinct items."""
        return len(self.item_ids)

    def __len__(self) -> int:
        return int(self.users.shape[0])

    @property
    def pairs(self) -> Tensor:
        """``(n, 2)`` long tensor of ``(user, item)`` indices."""
        return torch.stack([self.users, self.items], dim=-1)

    @property
    def user_index(self) -> dict[int | str, int]:
        """Map from an original user id to its index."""
        return {raw: i for i, raw in enumerate(self.user_ids)}

    @property
    def item_index(self) -> dict[int | str, int]:
        """Map from an original item id to its index."""
        return {raw: i for i, raw in enumerate(self.item_ids)}


def load_movielens(path: str | Path, min_rating: float | None = None) -> Interactions:
    """Read MovieLens ratings into interactions with contiguous user and item indices.

    Args:
        path: A ratings file (``u.data``, ``ratings.dat``, ``ratings.csv`` or ``*.inter``) or a
            directory holding one of them.
        min_rating: Keep only the interactions rated at least this much (``None``: keep all,
            which is the usual implicit-feedback reading of MovieLens).

    Returns:
        The :class:`Interactions`; indices follow the sorted original ids.
    """
    path = _resolve(Path(path))
    text = path.read_text(encoding="utf-8", errors="replace")
    first = text.split("\n", 1)[0].strip()
    if not first:
        raise ValueError(f"{path}: the file is empty.")
    kind = _detect(path, first)
    if kind == "inter":
        columns, text = _inter_columns(path, first), text.split("\n", 1)[1]
        delimiter = "\t"
    elif kind == "csv":
        header = [c.strip() for c in first.split(",")]
        columns = _csv_columns(path, header)
        text, delimiter = text.split("\n", 1)[1], ","
    elif kind == "dat":
        columns, delimiter = {"user": 0, "item": 1, "rating": 2, "timestamp": 3}, "\t"
        text = text.replace("::", "\t")
    else:
        columns, delimiter = {"user": 0, "item": 1, "rating": 2, "timestamp": 3}, "\t"
    table = _read_table(path, text, delimiter, columns)
    users_raw, items_raw = table["user"], table["item"]
    ratings = table.get("rating")
    ratings = (
        np.full(users_raw.shape, np.nan) if ratings is None else _to_float(path, ratings, "rating")
    )
    timestamps = table.get("timestamp")
    if timestamps is not None:
        timestamps = _to_float(path, timestamps, "timestamp").astype(np.int64)
    if min_rating is not None:
        keep = ratings >= min_rating
        users_raw, items_raw, ratings = users_raw[keep], items_raw[keep], ratings[keep]
        timestamps = timestamps[keep] if timestamps is not None else None
        if users_raw.size == 0:
            raise ValueError(f"{path}: no interaction is rated at least {min_rating}.")
    user_ids, users = _index(users_raw)
    item_ids, items = _index(items_raw)
    return Interactions(
        users=torch.from_numpy(users),
        items=torch.from_numpy(items),
        ratings=torch.from_numpy(ratings),
        timestamps=None if timestamps is None else torch.from_numpy(timestamps),
        user_ids=user_ids,
        item_ids=item_ids,
    )


def _resolve(path: Path) -> Path:
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {path}")
    if path.is_file():
        return path
    for name in KNOWN_FILES:
        if (path / name).is_file():
            return path / name
    inter = sorted(path.glob("*.inter"))
    if inter:
        return inter[0]
    raise FileNotFoundError(
        f"{path} holds none of {', '.join(KNOWN_FILES)} or a RecBole *.inter file."
    )


def _detect(path: Path, first: str) -> str:
    name = path.name.lower()
    if name.endswith(".inter") or ":token" in first:
        return "inter"
    if name.endswith(".csv") or "userId" in first:
        return "csv"
    if name.endswith(".dat") or "::" in first:
        return "dat"
    if name == "u.data" or "\t" in first:
        return "data"
    raise ValueError(
        f"{path}: unknown ratings format; expected u.data, ratings.dat, ratings.csv or a RecBole "
        ".inter file."
    )


def _inter_columns(path: Path, header: str) -> dict[str, int]:
    names = [field.split(":", 1)[0].strip() for field in header.split("\t")]
    wanted = {"user": "user_id", "item": "item_id", "rating": "rating", "timestamp": "timestamp"}
    columns = {key: names.index(name) for key, name in wanted.items() if name in names}
    if "user" not in columns or "item" not in columns:
        raise ValueError(f"{path}: the .inter header needs user_id and item_id columns: {names}.")
    return columns


def _csv_columns(path: Path, header: list[str]) -> dict[str, int]:
    wanted = {"user": "userId", "item": "movieId", "rating": "rating", "timestamp": "timestamp"}
    columns = {key: header.index(name) for key, name in wanted.items() if name in header}
    if "user" not in columns or "item" not in columns:
        raise ValueError(f"{path}: the CSV header needs userId and movieId columns: {header}.")
    return columns


def _read_table(
    path: Path, text: str, delimiter: str, columns: dict[str, int]
) -> dict[str, np.ndarray]:
    keys = list(columns)
    try:
        table = np.loadtxt(
            io.StringIO(text),
            delimiter=delimiter,
            dtype=str,
            usecols=[columns[k] for k in keys],
            ndmin=2,
            comments=None,
        )
    except ValueError as err:
        raise ValueError(f"{path}: malformed ratings file: {err}") from None
    if table.shape[0] == 0:
        raise ValueError(f"{path}: the file has no interactions.")
    return {k: np.char.strip(table[:, i]) for i, k in enumerate(keys)}


def _to_float(path: Path, values: np.ndarray, name: str) -> np.ndarray:
    try:
        return values.astype(np.float64)
    except ValueError:
        raise ValueError(f"{path}: the {name} column holds non-numeric values.") from None


def _index(raw: np.ndarray) -> tuple[list[int | str], np.ndarray]:
    """Contiguous indices of the raw ids (integers when every id is one), sorted by id."""
    try:
        values: np.ndarray = raw.astype(np.int64)
    except ValueError:
        values = raw
    uniques, inverse = np.unique(values, return_inverse=True)
    return uniques.tolist(), inverse.astype(np.int64).reshape(-1)
