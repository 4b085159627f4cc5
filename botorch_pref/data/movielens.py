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
from collections.abc import Sequence
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

    @classmethod
    def from_ids(cls, users: Sequence[object], items: Sequence[object]) -> Interactions:
        """Interactions from parallel sequences of original user and item ids.

        Ids of one kind must be all integers or all non-blank strings; they are indexed in
        sorted order, as :func:`load_movielens` does. Nothing is converted: ``"7"`` stays a
        string, and a float, a bool or a blank id raises.

        Args:
            users: Original user id of each interaction.
            items: Original item id of each interaction.

        Returns:
            The :class:`Interactions` (no ratings, no timestamps).

        Raises:
            TypeError: If ``users`` or ``items`` is a bare string or bytes (one id, not a
                sequence of ids), or holds a float, a bool, another type or a mix of integers
                and strings.
            ValueError: For sequences of different lengths, no interactions, or a blank id.
        """
        for name, ids in (("users", users), ("items", items)):
            if isinstance(ids, (str, bytes)):
                raise TypeError(f"{name} must be a sequence of ids, not the single id {ids!r}.")
        users, items = list(users), list(items)
        if len(users) != len(items):
            raise ValueError(f"got {len(users)} user ids and {len(items)} item ids.")
        if not users:
            raise ValueError("no interactions.")
        user_ids, user_index = _index_python(users, "user")
        item_ids, item_index = _index_python(items, "item")
        return cls(
            users=torch.from_numpy(user_index),
            items=torch.from_numpy(item_index),
            ratings=torch.full((len(users),), float("nan"), dtype=torch.float64),
            timestamps=None,
            user_ids=user_ids,
            item_ids=item_ids,
        )

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

    Raises:
        FileNotFoundError: If ``path`` holds no ratings file.
        ValueError: If the file is malformed or empty, or ``min_rating`` is given for a file
            without ratings or keeps no interaction.
    """
    path = _resolve(Path(path))
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    first = text.split("\n", 1)[0].strip()
    if not first:
        raise ValueError(f"{path}: the file is empty.")
    kind = _detect(path, first)
    # What follows the header line (nothing when the file is only a header, without a break).
    body = text.split("\n", 1)[1] if "\n" in text else ""
    if kind == "inter":
        columns, text, delimiter = _inter_columns(path, first), body, "\t"
    elif kind == "csv":
        header = [c.strip() for c in first.split(",")]
        columns = _csv_columns(path, header)
        text, delimiter = body, ","
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
    for name, raw in (("user", users_raw), ("item", items_raw)):
        blank = np.flatnonzero(raw == "")
        if blank.size > 0:
            raise ValueError(f"{path}: interaction {int(blank[0])} has a blank {name} id.")
    if not np.all(np.isfinite(ratings) | (table.get("rating") is None)):
        row = int(np.flatnonzero(~np.isfinite(ratings))[0])
        raise ValueError(f"{path}: interaction {row} has the rating {ratings[row]}.")
    timestamps = table.get("timestamp")
    if timestamps is not None:
        timestamps = _timestamps(path, _to_float(path, timestamps, "timestamp"))
    if min_rating is not None:
        if table.get("rating") is None:
            raise ValueError(
                f"{path}: min_rating={min_rating} was given, but the file has no ratings."
            )
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
    if not text.strip():
        raise ValueError(f"{path}: the file has no interactions.")
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


def _timestamps(path: Path, values: np.ndarray) -> np.ndarray:
    """Float timestamps as int64; non-finite, fractional or out-of-range values raise."""
    bad = ~np.isfinite(values) | (np.abs(values) >= 2.0**63) | (values != np.round(values))
    if np.any(bad):
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{path}: interaction {row} has the timestamp {float(values[row])!r}, not an integer "
            "number of seconds in the int64 range."
        )
    return values.astype(np.int64)


def _plain_id(x: object) -> bool:
    return isinstance(x, (int, np.integer, str)) and not isinstance(x, bool)


def _index_python(ids: list[object], name: str) -> tuple[list[int | str], np.ndarray]:
    """Contiguous indices of Python ids that are all integers or all non-blank strings."""
    if all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in ids):
        values: np.ndarray = np.asarray([int(x) for x in ids], dtype=np.int64)
    elif all(isinstance(x, str) for x in ids):
        blank = [n for n, x in enumerate(ids) if not x.strip()]
        if blank:
            raise ValueError(f"interaction {blank[0]} has a blank {name} id {ids[blank[0]]!r}.")
        values = np.asarray(ids, dtype=object)
    else:
        kinds = sorted({type(x).__name__ for x in ids})
        bad = next((x for x in ids if not _plain_id(x)), None)
        detail = f"e.g. {bad!r}" if bad is not None else "a mix of integers and strings"
        raise TypeError(
            f"{name} ids must be all integers or all strings, got {', '.join(kinds)} ({detail})."
        )
    uniques, inverse = np.unique(values, return_inverse=True)
    return [x if isinstance(x, str) else int(x) for x in uniques.tolist()], inverse.astype(
        np.int64
    ).reshape(-1)


def _index(raw: np.ndarray) -> tuple[list[int | str], np.ndarray]:
    """Contiguous indices of the raw ids (the file's strings), sorted by id.

    The ids are integers when every one is an integer written plainly (``"7"``, ``"-3"``) and
    within int64; otherwise they stay the strings of the file, so ``"007"`` and ``"7"`` remain
    two ids.
    """
    try:
        values: np.ndarray = raw.astype(np.int64)
    except (ValueError, OverflowError):
        values = raw
    else:
        if not np.array_equal(values.astype(str), raw):
            values = raw
    uniques, inverse = np.unique(values, return_inverse=True)
    return uniques.tolist(), inverse.astype(np.int64).reshape(-1)
