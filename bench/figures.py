"""The figures ``docs/perf.md`` is made of: the targets, and medians, spreads and ratios of the raw results."""

from __future__ import annotations

from typing import Any

from bench.replay import median

TARGET_TOTAL = 1.5
TARGET_MATCH = 1.3
TARGET_EVICT = 1.5
TARGET_MEMORY = 8.0


def spread(values: list[float], digits: int = 2, unit: str = "") -> str:
    """``median (min-max)``."""
    if not values:
        return "-"
    return f"{median(values):.{digits}f}{unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def ok(passed: bool) -> str:
    return "met" if passed else "**missed**"


def ratios(runs: list[dict[str, Any]], op: str | None = None) -> list[float]:
    """Per repetition: cache time over read floor, of all calls or of one kind."""
    found = []
    for run in runs:
        if run["divergence"]:
            continue
        if op is None:
            found.append(sum(run["ns"].values()) / sum(run["floor_ns"].values()))
        else:
            found.append(run["ns"][op] / run["floor_ns"][op])
    return found


def per_call_us(runs: list[dict[str, Any]], op: str) -> list[float]:
    return [run["ns"][op] / run["count"][op] / 1000 for run in runs if run["count"][op] and not run["divergence"]]


def totals_s(runs: list[dict[str, Any]], floor: bool = False) -> list[float]:
    key = "floor_ns" if floor else "ns"
    return [sum(run[key].values()) / 1e9 for run in runs if not run["divergence"]]


def speedups(slow: list[dict[str, Any]], fast: list[dict[str, Any]]) -> list[float]:
    """Per repetition: total time of ``slow`` over that of ``fast``, each over its own read floor
    (the two replay different recordings of one workload, see Method)."""
    return [s / f for s, f in zip(ratios(slow), ratios(fast))]


def medians_at(data: dict[str, Any], size: int) -> list[float]:
    """The medians of one size of a scaling series (its sizes are strings once read back from JSON)."""
    medians = data["medians_ns"]
    return list(medians[str(size)] if str(size) in medians else medians[size])
