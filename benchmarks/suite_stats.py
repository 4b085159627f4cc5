"""The benchmarks' summary of a sample: its mean and standard error, and how tables print them."""

from __future__ import annotations

import math
import statistics


def mean_se(values: list[float]) -> tuple[float, float]:
    """The mean and its standard error (NaN for an empty sample; the error NaN for one value)."""
    if not values:
        return math.nan, math.nan
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return statistics.fmean(values), se


def fmt_mean_se(values: list[float]) -> str:
    """``"+m.mm +- s.ss"``; ``"+m.mm"`` for one value, ``"-"`` for an empty sample."""
    mean, se = mean_se(values)
    if math.isnan(mean):
        return "-"
    return f"{mean:+.2f}" if math.isnan(se) else f"{mean:+.2f} +- {se:.2f}"
