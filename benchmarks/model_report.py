"""Timing, summaries and tables for ``benchmarks/model.py`` (the model benchmark's report).

A stage's value is a number, or ``("failed", reason)`` when the stage raised; :func:`summarise`
reduces the values of several seeds to their median, the number of failures and the first
reason, and :func:`cell` / :func:`time_cell` write that summary into a table cell.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import botorch
import gpytorch
import torch

__all__ = [
    "cell",
    "clock",
    "environment_lines",
    "failed",
    "failure_reason",
    "summarise",
    "table",
    "time_cell",
    "timed_warm",
]


# ------------------------------------------------------------------------- timing


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def clock(fn: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    """Seconds taken by one call of ``fn`` (device synchronised), and its result."""
    _sync(device)
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    return time.perf_counter() - t0, out


def timed_warm(fn: Callable[[], Any], device: torch.device, max_calls: int = 5) -> float:
    """One warm-up call, then the median of up to ``max_calls`` timed calls (fewer if slow)."""
    fn()
    times: list[float] = []
    total = 0.0
    while len(times) < max_calls and (not times or total < 1.0):
        t, _ = clock(fn, device)
        times.append(t)
        total += t
    return statistics.median(times)


def failure_reason(err: BaseException) -> str:
    """A failure's reason for a table cell: the exception's type and message, on one line."""
    text = " ".join(str(err).split()) or type(err).__name__
    text = f"{type(err).__name__}: {text}"
    return text if len(text) <= 60 else text[:57] + "..."


# ------------------------------------------------------------------------ summary


def failed(v: Any) -> bool:
    """Whether a stage's value is a failure ``("failed", reason)``."""
    return isinstance(v, tuple)


def summarise(values: list[Any]) -> dict[str, Any]:
    """Median of the successful values, the number of failures and the first failure reason."""
    ok = [v for v in values if not failed(v)]
    bad = [v[1] for v in values if failed(v)]
    return {
        "median": statistics.median(ok) if ok else None,
        "n_ok": len(ok),
        "n_failed": len(bad),
        "reason": bad[0] if bad else None,
    }


def cell(s: dict[str, Any] | None, fmt: str | Callable[[float], str]) -> str:
    """A summary as a table cell: the median in ``fmt`` (a format spec or a function), with
    the failures; ``"skipped"`` for no summary."""
    if s is None:
        return "skipped"
    if s["median"] is None:
        return f"failed: {s['reason']}"
    text = fmt(s["median"]) if callable(fmt) else format(s["median"], fmt)
    if s["n_failed"]:
        text += f" ({s['n_failed']} failed: {s['reason']})"
    return text


def _time_fmt(x: float) -> str:
    return f"{x:.4f}" if x < 0.1 else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def time_cell(s: dict[str, Any] | None) -> str:
    """A summary of seconds as a table cell (4 significant figures at most)."""
    return cell(s, _time_fmt)


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; columns of numbers are right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    right = [False] * len(header)
    for i in range(len(header)):
        right[i] = all(_numeric(r[i]) for r in rows)

    def line(cells: list[str]) -> str:
        out = [
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)
        ]
        return "| " + " | ".join(out) + " |"

    sep = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if r else ("-" * (w + 2))
            for w, r in zip(widths, right, strict=True)
        )
        + "|"
    )
    return "\n".join([line(header), sep, *(line(r) for r in rows)])


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text in ("-", "skipped")
    return True


def environment_lines(dtype: str, device: torch.device) -> list[str]:
    """The report's header lines on the software, the machine, the threads, dtype and device."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for ln in fh:
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return [
        f"- torch {torch.__version__}, botorch {botorch.__version__}, gpytorch "
        f"{gpytorch.__version__}, python {platform.python_version()}",
        f"- machine: {platform.system()} {platform.machine()}, {cpu}, "
        f"{os.cpu_count()} logical CPUs",
        f"- torch threads: {torch.get_num_threads()} intra-op, {torch.get_num_interop_threads()} "
        f"inter-op; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}",
        f"- dtype {dtype}, device {device}"
        + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""),
    ]
