"""``docs/perf.md``'s plots (matplotlib, when it can be imported): evict scaling, and match against the read floor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.figures import TARGET_MATCH, medians_at
from bench.replay import median


def plot(results: dict[str, Any], docs: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    styles = {"impl": ("tab:blue", "o"), "sglang": ("tab:red", "s"), "spec": ("tab:gray", "^")}

    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    for name, data in results["evict_scaling"].items():
        sizes = data["sizes"]
        values = [median(medians_at(data, size)) / 1000 for size in sizes]
        color, marker = styles.get(name, ("black", "x"))
        axes.plot(sizes, values, marker=marker, color=color, label=name)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("cached leaves")
    axes.set_ylabel("evict(1): microseconds per freed block (median)")
    axes.set_title("Evict cost against cached leaves (B = 16, one-block leaves)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path = docs / "perf-evict.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    written.append(path)

    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    for name, points in results["match_floor"].items():
        color, marker = styles.get(name, ("black", "x"))
        axes.plot([p["length"] for p in points], [median(p["ratios"]) for p in points], marker=marker, color=color, label=name)
    axes.axhline(TARGET_MATCH, color="tab:green", linestyle="--", label=f"target {TARGET_MATCH}x")
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("prompt tokens (cached as a path of 4 nodes)")
    axes.set_ylabel("match_prefix / read floor (median)")
    axes.set_title("match_prefix against the read floor of its prompt")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path = docs / "perf-match.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    written.append(path)
    return written
