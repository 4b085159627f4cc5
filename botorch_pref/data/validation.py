r"""The checks of preference data: indices, observation rows, levels (one error type).

:class:`PreferenceDataError` is what every check raises, with a message naming the problem;
:func:`check_observations` checks the tensor form of
:class:`~botorch_pref.data.PreferenceData` once, when the answers enter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
from botorch.exceptions.errors import InputDataError
from torch import Tensor

from botorch_pref.checks import is_bool, whole_number
from botorch_pref.likelihoods import ObservationKind

__all__ = [
    "LEVELLED_KINDS",
    "PreferenceDataError",
    "as_index_tensor",
    "check_observations",
    "index_list",
    "joined_levels",
    "levels_number",
    "record_tensors",
    "whole_index",
]

#: The kinds that carry a level.
LEVELLED_KINDS = (int(ObservationKind.GRADED), int(ObservationKind.RATING))


class PreferenceDataError(ValueError, InputDataError):
    """Invalid preference data: raised with a message naming the problem."""


def as_index_tensor(values: Tensor, name: str, what: str = "design indices") -> Tensor:
    """``values`` as a long tensor of design indices, or a :class:`PreferenceDataError`.

    Floating tensors must hold finite whole numbers; booleans and complex numbers are refused.

    Args:
        values: A tensor of indices.
        name: The argument's name, for the error message.
        what: What the integers are, for the error message.

    Returns:
        The long tensor.

    Raises:
        PreferenceDataError: For fractional or non-finite values, booleans or complex numbers.
    """
    if values.is_floating_point():
        if not bool(torch.isfinite(values).all()) or not bool((values == values.round()).all()):
            raise PreferenceDataError(f"{name} must hold integer {what}.")
    elif values.dtype == torch.bool or values.is_complex():
        raise PreferenceDataError(f"{name} must be integers, got {values.dtype}.")
    return values.long()


def index_list(values: Iterable[int] | Tensor, name: str) -> list[int]:
    if torch.is_tensor(values):
        if values.is_floating_point():
            if not bool(torch.isfinite(values).all()) or not bool((values == values.round()).all()):
                raise PreferenceDataError(f"{name} must hold integer design indices.")
        values = values.reshape(-1).tolist()
    try:
        values = list(values)
        out = [int(v) for v in values]
    except (TypeError, ValueError) as err:
        raise PreferenceDataError(f"{name} must be a sequence of integer design indices.") from err
    if any(map(is_bool, values)):
        raise PreferenceDataError(f"{name} must hold integer design indices, not booleans.")
    if any(v != w for v, w in zip(out, values, strict=True)):
        raise PreferenceDataError(f"{name} must hold integer design indices, got {values}.")
    if any(v < 0 for v in out):
        raise PreferenceDataError(f"{name} must hold non-negative design indices, got {out}.")
    if len(set(out)) != len(out):
        raise PreferenceDataError(f"{name} lists a design more than once: {out}.")
    return out


def whole_index(value: object, name: str) -> int:
    """``value`` as an int (:func:`~botorch_pref.checks.whole_number`), else this module's error."""
    try:
        return whole_number(value, name)
    except ValueError as err:
        raise PreferenceDataError(str(err)) from None


def levels_number(value: object, name: str) -> int | None:
    """A number of levels (``None``, or a whole number ``>= 2``), else this module's error."""
    if value is None:
        return None
    try:
        return whole_number(value, name, 2)
    except ValueError as err:
        raise PreferenceDataError(str(err)) from None


def joined_levels(items: Sequence[Any], attr: str) -> int | None:
    """The common number of levels ``attr`` of data sets (``None`` agrees with any)."""
    found = {getattr(d, attr) for d in items} - {None}
    if len(found) > 1:
        raise PreferenceDataError(
            f"cannot join data of different {attr}: {sorted(found)} (one scale per data set)."
        )
    return found.pop() if found else None


def check_observations(
    options: Tensor,
    kind: Tensor,
    stages: Tensor,
    level: Tensor,
    graded_levels: int | None,
    rating_levels: int | None,
) -> None:
    """Check the tensors of :class:`~botorch_pref.data.PreferenceData` (its module docstring).

    Args:
        options: ``batch_shape x m x Q`` long options, best first, ``-1`` padding.
        kind: ``batch_shape x m`` kinds.
        stages: ``batch_shape x m`` ranked stages.
        level: ``batch_shape x m`` levels (``-1`` where none).
        graded_levels: The number of graded levels, or ``None``.
        rating_levels: The number of rating levels, or ``None``.

    Raises:
        PreferenceDataError: Naming the first problem found.
    """
    if options.numel() == 0:
        return
    real = options >= 0
    padding = ~real.any(-1)
    if bool((options < -1).any()):
        raise PreferenceDataError("options must be design indices >= 0 or -1 (padding).")
    # real options first, then padding
    if bool((real[..., 1:] & ~real[..., :-1]).any()):
        raise PreferenceDataError("options rows must list designs first, then -1 padding.")
    q = real.sum(-1)
    known = torch.tensor([int(k) for k in ObservationKind], device=kind.device)
    if not bool(torch.isin(kind, known).all()):
        raise PreferenceDataError(f"kind values must be in {known.tolist()} (ObservationKind).")
    real_obs = ~padding
    rating = kind == ObservationKind.RATING
    if bool((real_obs & rating & (q != 1)).any()):
        raise PreferenceDataError("a RATING observation must have exactly one option.")
    if bool((real_obs & ~rating & (q < 2)).any()):
        raise PreferenceDataError("every observation needs at least two options.")
    two = (
        (kind == ObservationKind.PAIR)
        | (kind == ObservationKind.TIE)
        | (kind == ObservationKind.GRADED)
    )
    if bool((real_obs & two & (q != 2)).any()):
        raise PreferenceDataError(
            "PAIR, TIE and GRADED observations must have exactly two options."
        )
    if bool((real_obs & (kind == ObservationKind.CHOICE) & (q < 3)).any()):
        raise PreferenceDataError(
            "a CHOICE between two options must be recorded as a PAIR (winner, loser)."
        )
    sorted_opts = options.sort(-1).values
    dup = (sorted_opts[..., 1:] == sorted_opts[..., :-1]) & (sorted_opts[..., 1:] >= 0)
    if bool(dup.any()):
        rows = dup.any(-1).nonzero()[:3].tolist()
        raise PreferenceDataError(
            f"an observation lists a design more than once (e.g. a comparison of a design "
            f"with itself) at {rows}."
        )
    no_stage = (kind == ObservationKind.TIE) | (kind == ObservationKind.GRADED) | rating
    lo = torch.where(no_stage, 0, 1)
    hi = torch.where(no_stage, 0, (q - 1).clamp_min(1))
    lo = torch.where(kind == ObservationKind.RANKING, 1, lo)
    hi = torch.where((kind == ObservationKind.PAIR) | (kind == ObservationKind.CHOICE), 1, hi)
    bad = real_obs & ((stages < lo) | (stages > hi))
    if bool(bad.any()):
        raise PreferenceDataError(
            "n_stages out of range (1 for a pair or choice, 1..q-1 for a ranking, 0 for a "
            f"tie, a graded comparison or a rating) at {bad.nonzero()[:3].tolist()}."
        )
    numbers = {"graded_levels": graded_levels, "rating_levels": rating_levels}
    _check_levels(kind, level, real_obs, numbers)


def _check_levels(kind: Tensor, level: Tensor, real_obs: Tensor, numbers: dict) -> None:
    """Levels only on graded comparisons and ratings, each within its number of levels."""
    for k, name, attr in (
        (ObservationKind.GRADED, "graded comparison", "graded_levels"),
        (ObservationKind.RATING, "rating", "rating_levels"),
    ):
        rows = real_obs & (kind == k)
        if not bool(rows.any()):
            continue
        levels = numbers[attr]
        if levels is None:
            raise PreferenceDataError(
                f"the data hold {k.name} observations but no {attr}: say how many levels "
                f"the scale has (PreferenceData({attr}=...))."
            )
        bad = rows & ((level < 0) | (level >= levels))
        if bool(bad.any()):
            where = bad.nonzero()[0].tolist()
            raise PreferenceDataError(
                f"a {name} level must lie in [0, {levels - 1}] ({attr} = {levels}), got "
                f"{int(level[tuple(where)])} at {where}."
            )
    other = real_obs & ~torch.isin(kind, torch.tensor(LEVELLED_KINDS, device=kind.device))
    bad = other & (level != -1)
    if bool(bad.any()):
        where = bad.nonzero()[0].tolist()
        raise PreferenceDataError(
            f"only graded comparisons and ratings take a level (-1 elsewhere), got "
            f"{int(level[tuple(where)])} on a {ObservationKind(int(kind[tuple(where)])).name} "
            f"at {where}."
        )


def record_tensors(record: dict[str, Any]) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """The ``(options, kind, n_stages, level)`` tensors of a
    :meth:`~botorch_pref.data.PreferenceData.to_dict` record (``level`` ``None`` if absent).

    Raises:
        PreferenceDataError: For a record without them or with values that are not integers.
    """
    try:
        options = torch.tensor(record["options"], dtype=torch.long)
        kind = torch.tensor(record["kind"], dtype=torch.long)
        stages = torch.tensor(record["n_stages"], dtype=torch.long)
        level = record.get("level")
        level = None if level is None else torch.tensor(level, dtype=torch.long)
    except (KeyError, TypeError, ValueError) as err:
        raise PreferenceDataError(f"not a PreferenceData record: {err}") from None
    if options.numel() == 0:
        options = options.reshape(*kind.shape, 2)
    return options, kind, stages, level
