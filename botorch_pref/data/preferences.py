r"""A container for mixed preference answers: pairs, choices, rankings, ties, graded, ratings.

:class:`PreferenceData` records what people answered about designs known by their row index in
the model's ``datapoints``. Every answer is one *observation*, a row of options listed best
first:

==============================  ===================================  ==========  ==========
answer                          recorded as                          kind        n_stages
==============================  ===================================  ==========  ==========
"v beat u"                      ``add_comparison(v, u)``: ``[v, u]``  ``PAIR``   1
picked ``c`` among ``q > 2``    ``add_choice(options, c)``:          ``CHOICE`` 1
                                ``[c, others...]``
ranked ``q`` options            ``add_ranking(options, order)``:     ``RANKING`` ``q - 1``
                                ``order`` (best first)
top-k of ``q`` options          ``add_ranking(options, order,        ``RANKING`` ``k``
                                top_k=k)``: ``[order[:k], rest...]``
"no preference" between i, j    ``add_tie(i, j)``: ``[i, j]``        ``TIE``     0
level l of k about a vs b       ``add_graded(a, b, l)``: ``[a, b]``  ``GRADED``  0
rating l of k of design i       ``add_rating(i, l)``: ``[i]``        ``RATING``  0
==============================  ===================================  ==========  ==========

Graded comparisons and ratings carry their level in :attr:`~PreferenceData.level` (``-1`` on
every other row), from 0 ("``b`` much better", or the worst rating) to ``k - 1`` ("``a`` much
better", the best rating); a graded comparison's levels are symmetric, so ``(a, b, l)`` and
``(b, a, k - 1 - l)`` say the same (:mod:`~botorch_pref.likelihoods.ordinal`). The numbers of
levels ``k`` are the data's :attr:`~PreferenceData.graded_levels` and
:attr:`~PreferenceData.rating_levels`, set once (by the constructor or the first
``add_graded``/``add_rating`` with ``levels=``) and checked against each answer as it enters;
a model takes them to its likelihood, which makes its thresholds for them (or raises if it was
built for another number).

A choice between two options and a ranking of two options are stored as the pair they are;
a top-1 ranking of ``q > 2`` options is a choice. In tensor form (:attr:`options`,
:attr:`kind`, :attr:`n_stages`) rows are padded with ``-1`` to the largest option count ``Q``;
a row of ``-1`` only is a padding observation (it lets the members of a batch hold different
numbers of answers, like the ``(-1, -1)`` rows of pairwise comparisons).

Example (a qEUBO round with ``q = 4`` and a "no preference" answer):

    >>> data = PreferenceData.from_comparisons(torch.tensor([[0, 1]]))
    >>> data.add_choice([2, 3, 4, 5], chosen=4)      # the person picked design 4
    >>> data.add_ranking([2, 3, 4, 5], order=[5, 2, 3, 4])
    >>> data.add_tie(0, 2)
    >>> model = PairwiseLaplaceGP(X, data, likelihood=...)

Graded answers on a 5-point scale and 3-level ratings, fitted with the default likelihood:

    >>> data = PreferenceData(graded_levels=5, rating_levels=3)
    >>> data.add_graded(0, 1, 4).add_graded(2, 1, 1)   # 0 much better than 1; 1 a bit better than 2
    >>> data.add_rating(0, 2).add_rating(2, 0)
    >>> model = PairwiseLaplaceGP(X, data)

The likelihood must model every kind present: pairs and ties need
``PairwiseProbit(tie_threshold=...)`` or ``PairwiseLogit(tie_threshold=...)``; choices need
:class:`~botorch_pref.likelihoods.Choice`, rankings :class:`~botorch_pref.likelihoods.Ranking`;
graded comparisons and ratings ``PairwiseProbit`` or ``PairwiseLogit``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from botorch_pref.data.validation import (
    LEVELLED_KINDS,
    PreferenceDataError,
    as_index_tensor,
    check_observations,
    index_list,
    joined_levels,
    levels_number,
    record_tensors,
    whole_index,
)
from botorch_pref.likelihoods import ObservationKind

__all__ = ["ObservationKind", "PreferenceData", "PreferenceDataError", "as_index_tensor"]


class PreferenceData:
    r"""Mixed preference observations over designs indexed ``0 .. n-1`` (see module docstring).

    The tensor form the Laplace engine uses:

    * :attr:`options`: ``batch_shape x m x Q`` long, each row best first, ``-1`` padding.
    * :attr:`kind`: ``batch_shape x m`` long, :class:`~botorch_pref.likelihoods.ObservationKind`.
    * :attr:`n_stages`: ``batch_shape x m`` long, ranked stages (1 for a pair or a choice,
      ``k`` for a top-k ranking, 0 for a tie, a graded comparison, a rating and padding).
    * :attr:`level`: ``batch_shape x m`` long, the level of a graded comparison or a rating,
      ``-1`` on every other row.

    The ``add_*`` methods append one answer in place (unbatched data only) and return ``self``,
    so calls chain. :meth:`cat` and :meth:`extend` join data sets (widening ``Q`` as needed).

    Args:
        options: ``batch_shape x m x Q`` integer tensor, or ``None`` for empty data.
        kind: ``batch_shape x m`` kinds (default: every row a ``PAIR``, which needs ``Q = 2``).
        n_stages: ``batch_shape x m`` stages (default: 1 for pairs and choices, ``q - 1`` for
            rankings, 0 for ties, graded comparisons, ratings and padding).
        level: ``batch_shape x m`` levels of graded comparisons and ratings, ``-1`` elsewhere
            (default: ``-1`` everywhere, which needs data without either).
        graded_levels: The number of levels ``k >= 2`` of graded comparisons, or ``None``
            (set by the first :meth:`add_graded` with ``levels=``).
        rating_levels: The number of levels ``k >= 2`` of ratings, or ``None``.

    Raises:
        PreferenceDataError: Naming the problem: a level out of ``[0, k - 1]``, a fractional
            level, a level on a row that takes none, a graded comparison or a rating without
            its number of levels, among the checks of the options.
    """

    def __init__(
        self,
        options: Tensor | None = None,
        kind: Tensor | None = None,
        n_stages: Tensor | None = None,
        level: Tensor | None = None,
        *,
        graded_levels: int | None = None,
        rating_levels: int | None = None,
    ) -> None:
        if options is None:
            if kind is not None or n_stages is not None or level is not None:
                raise PreferenceDataError("kind, n_stages and level need options.")
            options = torch.empty(0, 2, dtype=torch.long)
        if not torch.is_tensor(options):
            options = torch.as_tensor(options)
        options = as_index_tensor(options, "options")
        if options.dim() < 2 or options.shape[-1] < 2:
            raise PreferenceDataError(
                f"options must have shape (batch x) m x Q with Q >= 2, got {tuple(options.shape)}."
            )
        padding = (options < 0).all(-1)
        q = (options >= 0).sum(-1)
        if kind is None:
            if options.shape[-1] != 2:
                raise PreferenceDataError("kind is required when rows hold more than two options.")
            kind = torch.full(options.shape[:-1], int(ObservationKind.PAIR), device=options.device)
        kind = as_index_tensor(torch.as_tensor(kind, device=options.device), "kind", "kinds")
        if kind.shape != options.shape[:-1]:
            raise PreferenceDataError(
                f"kind must have shape {tuple(options.shape[:-1])}, got {tuple(kind.shape)}."
            )
        if n_stages is None:
            no_stage = (kind == ObservationKind.TIE) | torch.isin(
                kind, torch.tensor(LEVELLED_KINDS, device=kind.device)
            )
            n_stages = torch.where(
                kind == ObservationKind.RANKING, q - 1, torch.where(no_stage, 0, 1)
            )
            n_stages = torch.where(padding, 0, n_stages)
        n_stages = torch.as_tensor(n_stages, device=options.device)
        n_stages = as_index_tensor(n_stages, "n_stages", "stage counts")
        if n_stages.shape != options.shape[:-1]:
            raise PreferenceDataError(
                f"n_stages must have shape {tuple(options.shape[:-1])}, got "
                f"{tuple(n_stages.shape)}."
            )
        if level is None:
            level = torch.full(options.shape[:-1], -1, dtype=torch.long, device=options.device)
        level = as_index_tensor(torch.as_tensor(level, device=options.device), "level", "levels")
        if level.shape != options.shape[:-1]:
            raise PreferenceDataError(
                f"level must have shape {tuple(options.shape[:-1])}, got {tuple(level.shape)}."
            )
        self._options, self._kind, self._n_stages, self._level = options, kind, n_stages, level
        self.graded_levels = levels_number(graded_levels, "graded_levels")
        self.rating_levels = levels_number(rating_levels, "rating_levels")
        self._check()

    @classmethod
    def from_checked(
        cls,
        options: Tensor,
        kind: Tensor,
        n_stages: Tensor,
        level: Tensor | None = None,
        *,
        graded_levels: int | None = None,
        rating_levels: int | None = None,
    ) -> PreferenceData:
        """Data from parts of data that were checked already, without checking them again.

        For joining and slicing :class:`PreferenceData` (:meth:`cat`, the loop's record of
        answers): each answer is checked once, when it enters, and the history it joins never
        again. The parts must be the tensors of valid data (or rows and columns of them, with
        ``-1`` padding); anything else gives data the model would misread.

        Args:
            options: ``batch_shape x m x Q`` long option indices.
            kind: ``batch_shape x m`` long kinds.
            n_stages: ``batch_shape x m`` long stages.
            level: ``batch_shape x m`` long levels (``-1`` where none), or ``None`` for data
                without graded comparisons and ratings.
            graded_levels: The data's number of graded levels, or ``None``.
            rating_levels: The data's number of rating levels, or ``None``.
        """
        data = cls.__new__(cls)
        if level is None:
            level = torch.full_like(kind, -1)
        data._options, data._kind, data._n_stages, data._level = options, kind, n_stages, level
        data.graded_levels, data.rating_levels = graded_levels, rating_levels
        return data

    def _check(self) -> None:
        check_observations(
            self._options,
            self._kind,
            self._n_stages,
            self._level,
            self.graded_levels,
            self.rating_levels,
        )

    def validate(self, n: int) -> None:
        """Check that every index lies in ``[0, n)`` and that there is at least one answer.

        Args:
            n: Number of designs.

        Raises:
            PreferenceDataError: naming the problem.
        """
        if self.num_observations == 0 or bool((self._options[..., 0] < 0).all()):
            raise PreferenceDataError(
                "the preference data hold no answer (only padding rows): a model needs one."
            )
        high = int(self._options.max())
        if high >= n:
            raise PreferenceDataError(
                f"option indices must lie in [0, {n - 1}] (n = {n} datapoints); found {high}."
            )

    # ---------------------------------------------------------- constructors
    @classmethod
    def from_comparisons(cls, comparisons: Tensor) -> PreferenceData:
        """Pairwise comparisons ``(batch x) m x 2`` of (winner, loser); ``(-1, -1)`` pads.

        Args:
            comparisons: Integer tensor of (winner, loser) rows.

        Returns:
            The data, every row a ``PAIR``.
        """
        comparisons = torch.as_tensor(comparisons)
        if comparisons.dim() < 2 or comparisons.shape[-1] != 2:
            raise PreferenceDataError(
                "comparisons must have shape (batch x) m x 2 of (winner, loser) rows, got "
                f"{tuple(comparisons.shape)}."
            )
        if comparisons.is_floating_point() or comparisons.dtype == torch.bool:
            cls(comparisons)  # validates the values and raises
        c = comparisons.long()
        padding = (c == -1).all(-1)
        if bool(((c < 0) & ~padding.unsqueeze(-1)).any()):
            raise PreferenceDataError(
                "comparison indices must be >= 0 (only whole rows (-1, -1) may mark padding)."
            )
        return cls(c)

    def _append(
        self, row: list[int], kind: ObservationKind, stages: int, level: int = -1
    ) -> PreferenceData:
        if len(self.batch_shape) > 0:
            raise PreferenceDataError("add_* methods need unbatched data (options m x Q).")
        Q = max(self.max_options, len(row))
        opts = torch.full((1, Q), -1, dtype=torch.long, device=self.device)
        opts[0, : len(row)] = torch.tensor(row, dtype=torch.long)
        new = PreferenceData(
            opts,
            torch.tensor([int(kind)], device=self.device),
            torch.tensor([stages], device=self.device),
            torch.tensor([level], device=self.device),
            graded_levels=self.graded_levels,
            rating_levels=self.rating_levels,
        )
        self._take(PreferenceData.cat([self, new]))
        return self

    def _take(self, other: PreferenceData) -> None:
        self._options, self._kind, self._n_stages = other.options, other.kind, other.n_stages
        self._level = other.level
        self.graded_levels, self.rating_levels = other.graded_levels, other.rating_levels

    def _set_levels(self, attr: str, levels: object) -> None:
        """Set the number of levels ``attr`` (the first time), or check it against the data's."""
        if levels is None:
            return
        levels = levels_number(levels, "levels")
        current = getattr(self, attr)
        if current is not None and current != levels:
            raise PreferenceDataError(
                f"levels={levels} differs from the data's {attr} = {current} (one scale per "
                "data set)."
            )
        setattr(self, attr, levels)

    def add_comparison(self, winner: int, loser: int) -> PreferenceData:
        """Append "``winner`` beat ``loser``" (a ``PAIR``). Returns ``self``."""
        row = index_list([winner, loser], "a comparison")
        return self._append(row, ObservationKind.PAIR, 1)

    def add_choice(self, options: Sequence[int] | Tensor, chosen: int) -> PreferenceData:
        """Append "``chosen`` was picked as the best of ``options``".

        Args:
            options: The designs shown (distinct indices, ``q >= 2``), in any order.
            chosen: The design picked: an element of ``options`` (a design index, not a
                position).

        Returns:
            ``self``. A choice between two options is stored as the pair it is.
        """
        opts = index_list(options, "options")
        if len(opts) < 2:
            raise PreferenceDataError(f"a choice needs at least two options, got {opts}.")
        chosen = whole_index(chosen, "chosen")
        if chosen not in opts:
            raise PreferenceDataError(f"chosen design {chosen} is not one of the options {opts}.")
        row = [chosen] + [o for o in opts if o != chosen]
        kind = ObservationKind.PAIR if len(row) == 2 else ObservationKind.CHOICE
        return self._append(row, kind, 1)

    def add_ranking(
        self,
        options: Sequence[int] | Tensor,
        order: Sequence[int] | Tensor,
        top_k: int | None = None,
    ) -> PreferenceData:
        """Append a full or top-k ranking of ``options``.

        Args:
            options: The designs shown (distinct indices, ``q >= 2``).
            order: Designs in preference order, best first (design indices, all in
                ``options``): either all of them (or all but the last), a full ranking, or
                only the first ``k``, a top-k ranking (the rest unordered behind them).
            top_k: Count only the first ``top_k`` places of ``order`` (default: all that
                ``order`` gives, at most ``q - 1``).

        Returns:
            ``self``. A ranking of two options is stored as a pair and a top-1 ranking as a
            choice.
        """
        opts = index_list(options, "options")
        ranked = index_list(order, "order")
        q = len(opts)
        if q < 2:
            raise PreferenceDataError(f"a ranking needs at least two options, got {opts}.")
        missing = [o for o in ranked if o not in opts]
        if missing:
            raise PreferenceDataError(f"order lists designs {missing} that are not in options.")
        if not ranked:
            raise PreferenceDataError("order must rank at least one design.")
        k = min(len(ranked), q - 1)
        if top_k is not None:
            top_k = whole_index(top_k, "top_k")
            if top_k < 1 or top_k > len(ranked):
                raise PreferenceDataError(
                    f"top_k must lie in [1, {len(ranked)}] (the length of order), got {top_k}."
                )
            k = min(top_k, q - 1)
        row = ranked[:k] + [o for o in opts if o not in ranked[:k]]
        if q == 2:
            return self._append(row, ObservationKind.PAIR, 1)
        if k == 1:
            return self._append(row, ObservationKind.CHOICE, 1)
        return self._append(row, ObservationKind.RANKING, k)

    def add_tie(self, i: int, j: int) -> PreferenceData:
        """Append "no preference between designs ``i`` and ``j``" (a ``TIE``). Returns ``self``."""
        row = index_list([i, j], "a tie")
        return self._append(row, ObservationKind.TIE, 0)

    def add_graded(self, a: int, b: int, level: int, levels: int | None = None) -> PreferenceData:
        """Append a graded comparison of designs ``a`` and ``b`` (a ``GRADED`` row).

        Args:
            a: The first design.
            b: The second design.
            level: The answer on the scale, from 0 ("``b`` much better") to ``k - 1``
                ("``a`` much better"); for odd ``k``, ``(k - 1) // 2`` is "about the same".
            levels: The scale's number of levels ``k``; needed on the first graded comparison
                unless the data were made with ``graded_levels=``, checked afterwards.

        Returns:
            ``self``.

        Raises:
            PreferenceDataError: For a level out of ``[0, k - 1]`` or not a whole number, an
                unknown ``k``, or a ``k`` other than the data's (the data stay unchanged).
        """
        row = index_list([a, b], "a graded comparison")
        return self._append_levelled(row, ObservationKind.GRADED, level, levels)

    def add_rating(self, i: int, level: int, levels: int | None = None) -> PreferenceData:
        """Append a rating of design ``i`` (a ``RATING`` row).

        Args:
            i: The design rated.
            level: The rating, from 0 (worst) to ``k - 1`` (best).
            levels: The rating scale's number of levels ``k``; needed on the first rating
                unless the data were made with ``rating_levels=``, checked afterwards.

        Returns:
            ``self``.

        Raises:
            PreferenceDataError: As :meth:`add_graded`.
        """
        row = index_list([i], "a rating")
        return self._append_levelled(row, ObservationKind.RATING, level, levels)

    def _append_levelled(
        self, row: list[int], kind: ObservationKind, level: object, levels: object
    ) -> PreferenceData:
        """Append a graded comparison or a rating; on an error the data stay unchanged."""
        level = whole_index(level, "level")
        attr = "graded_levels" if kind == ObservationKind.GRADED else "rating_levels"
        before = getattr(self, attr)
        self._set_levels(attr, levels)
        try:
            return self._append(row, kind, 0, level)
        except PreferenceDataError:
            setattr(self, attr, before)
            raise

    # ------------------------------------------------------------- joining
    @classmethod
    def cat(cls, items: Sequence[PreferenceData]) -> PreferenceData:
        """Concatenate observations (same batch shape), padding rows to the widest ``Q``."""
        items = list(items)
        if not items:
            return cls()
        Q = max(d.max_options for d in items)
        batch = items[0].batch_shape
        graded = joined_levels(items, "graded_levels")
        rating = joined_levels(items, "rating_levels")
        opts, kinds, stages, levels = [], [], [], []
        for d in items:
            if d.batch_shape != batch:
                raise PreferenceDataError(
                    f"cannot concatenate data of batch shapes {tuple(batch)} and "
                    f"{tuple(d.batch_shape)}."
                )
            o = d.options.to(items[0].device)
            if o.shape[-1] < Q:
                pad = o.new_full((*o.shape[:-1], Q - o.shape[-1]), -1)
                o = torch.cat([o, pad], -1)
            opts.append(o)
            kinds.append(d.kind.to(o.device))
            stages.append(d.n_stages.to(o.device))
            levels.append(d.level.to(o.device))
        return cls.from_checked(
            torch.cat(opts, -2),
            torch.cat(kinds, -1),
            torch.cat(stages, -1),
            torch.cat(levels, -1),
            graded_levels=graded,
            rating_levels=rating,
        )

    def extend(self, other: PreferenceData) -> PreferenceData:
        """Append ``other``'s observations in place; returns ``self``."""
        self._take(PreferenceData.cat([self, other]))
        return self

    def __add__(self, other: PreferenceData) -> PreferenceData:
        return PreferenceData.cat([self, other])

    # ------------------------------------------------------------ tensors
    @property
    def options(self) -> Tensor:
        """``batch_shape x m x Q`` option indices, best first, ``-1`` padding."""
        return self._options

    @property
    def kind(self) -> Tensor:
        """``batch_shape x m`` observation kinds."""
        return self._kind

    @property
    def n_stages(self) -> Tensor:
        """``batch_shape x m`` ranked stages."""
        return self._n_stages

    @property
    def level(self) -> Tensor:
        """``batch_shape x m`` levels of graded comparisons and ratings (``-1`` elsewhere)."""
        return self._level

    @property
    def device(self) -> torch.device:
        return self._options.device

    @property
    def batch_shape(self) -> torch.Size:
        return self._options.shape[:-2]

    @property
    def num_observations(self) -> int:
        """Number of observation rows ``m`` (padding included)."""
        return self._options.shape[-2]

    def __len__(self) -> int:
        return self.num_observations

    @property
    def max_options(self) -> int:
        """``Q``, the padded option count."""
        return self._options.shape[-1]

    @property
    def kinds_present(self) -> frozenset[ObservationKind]:
        """The kinds of the real (non-padding) observations."""
        real = self._options[..., 0] >= 0
        return frozenset(ObservationKind(int(k)) for k in self._kind[real].unique().tolist())

    @property
    def is_pairwise(self) -> bool:
        """Whether every real observation is a ``PAIR`` (the pairwise fast path applies)."""
        return self.kinds_present <= {ObservationKind.PAIR}

    def as_comparisons(self) -> Tensor:
        """``batch_shape x m x 2`` (winner, loser) rows of pairwise data (padding ``(-1, -1)``).

        Raises:
            PreferenceDataError: if an observation is not a pair.
        """
        if not self.is_pairwise:
            kinds = sorted(k.name for k in self.kinds_present - {ObservationKind.PAIR})
            raise PreferenceDataError(f"the data hold {', '.join(kinds)} observations, not pairs.")
        return self._options[..., :2].clone()

    def to(self, device: torch.device | str | None = None, *args, **kwargs) -> PreferenceData:
        """A copy on ``device`` (indices stay long; a floating dtype argument is ignored)."""
        if isinstance(device, torch.dtype):
            device = None
        device = kwargs.get("device", device)
        if device is None:
            return self
        return self._like(
            self._options.to(device),
            self._kind.to(device),
            self._n_stages.to(device),
            self._level.to(device),
        )

    def _like(self, options: Tensor, kind: Tensor, stages: Tensor, level: Tensor) -> PreferenceData:
        """Data of these numbers of levels from (checked) tensors."""
        return PreferenceData(
            options,
            kind,
            stages,
            level,
            graded_levels=self.graded_levels,
            rating_levels=self.rating_levels,
        )

    def shift(self, offset: int) -> PreferenceData:
        """A copy with every design index increased by ``offset`` (padding stays ``-1``).

        Raises:
            PreferenceDataError: When ``offset`` is fractional or an index would turn negative.
        """
        offset = whole_index(offset, "offset")
        real = self._options >= 0
        if offset < 0 and bool((real & (self._options + offset < 0)).any()):
            low = int(self._options[real].min())
            raise PreferenceDataError(f"shift({offset}) would make design index {low} negative.")
        opts = torch.where(real, self._options + offset, self._options)
        return self._like(opts, self._kind, self._n_stages, self._level)

    def expand(self, *batch_shape: int) -> PreferenceData:
        """Broadcast to ``batch_shape`` (a view of the same observations)."""
        shape = torch.Size(batch_shape)
        m, Q = self.num_observations, self.max_options
        return self._like(
            self._options.expand(*shape, m, Q),
            self._kind.expand(*shape, m),
            self._n_stages.expand(*shape, m),
            self._level.expand(*shape, m),
        )

    def reshape(self, *batch_shape: int) -> PreferenceData:
        """Reshape the batch dimensions (e.g. ``reshape(-1)`` for a flat batch)."""
        m, Q = self.num_observations, self.max_options
        return self._like(
            self._options.reshape(*batch_shape, m, Q),
            self._kind.reshape(*batch_shape, m),
            self._n_stages.reshape(*batch_shape, m),
            self._level.reshape(*batch_shape, m),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PreferenceData):
            return NotImplemented
        return (
            self._options.shape == other._options.shape
            and torch.equal(self._options, other._options.to(self.device))
            and torch.equal(self._kind, other._kind.to(self.device))
            and torch.equal(self._n_stages, other._n_stages.to(self.device))
            and torch.equal(self._level, other._level.to(self.device))
            and self.graded_levels == other.graded_levels
            and self.rating_levels == other.rating_levels
        )

    __hash__ = None  # mutable

    def to_dict(self) -> dict[str, Any]:
        """The data as plain lists and numbers (JSON-ready); :meth:`from_dict` reads it back.

        Returns:
            ``{"options", "kind", "n_stages", "level", "graded_levels", "rating_levels"}``.
        """
        return {
            "options": self._options.tolist(),
            "kind": self._kind.tolist(),
            "n_stages": self._n_stages.tolist(),
            "level": self._level.tolist(),
            "graded_levels": self.graded_levels,
            "rating_levels": self.rating_levels,
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> PreferenceData:
        """Data from :meth:`to_dict`'s record (``level`` and the numbers of levels may be
        missing, as in data without graded comparisons and ratings), checked as on entry.

        Raises:
            PreferenceDataError: For a record that is not valid data.
        """
        options, kind, stages, level = record_tensors(record)
        graded, rating = record.get("graded_levels"), record.get("rating_levels")
        return cls(options, kind, stages, level, graded_levels=graded, rating_levels=rating)

    def __repr__(self) -> str:
        kinds = ", ".join(sorted(k.name for k in self.kinds_present)) or "none"
        return (
            f"PreferenceData(batch_shape={tuple(self.batch_shape)}, m={self.num_observations}, "
            f"Q={self.max_options}, kinds={kinds})"
        )
