"""The one matrix of ``docs/engines.md``: every engine and core checked, under every rule set.

Each engine's runner (``examples/<engine>/engines.py``) returns its rows and the prose sections that
explain them; ``make engines`` gathers them all and renders the page once, so the matrix has one shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MatrixRow:
    """One check of one engine (and core) under one rule set."""

    engine: str
    """The engine and the class checked, with its version: ``SGLang 0.5.23 RadixCache``."""
    core: str
    """The core or factory behind it (``rust``, ``python``, ``salted_lru``), ``-`` when there is one."""
    rules: str
    """The rule set the check ran under (a preset's name or ``use=...``), or ``identify``."""
    verdict: str
    """``PASSED``, ``differs: N calls, R7/R8 ...``, or what ``identify`` named."""
    calls: int
    """Calls checked (0 when the check stopped at its first difference)."""
    seconds: float
    """Wall-clock seconds of the check."""
    cpu_seconds: float | None = None
    """CPU seconds of the check's process (threads included) while it ran, None where not measured: on a shared,
    loaded machine the wall-clock seconds say more about the load than about the check."""


@dataclass(frozen=True)
class EngineSection:
    """An engine's rows and the markdown that explains them (source lines, counterexamples, reports)."""

    title: str
    rows: tuple[MatrixRow, ...]
    prose: str


def render_matrix(rows: Sequence[MatrixRow]) -> str:
    """The matrix as one markdown table, in the order given."""
    lines = [
        "| engine | core / factory | rule set | verdict | calls checked | seconds (CPU seconds) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        cpu = "" if row.cpu_seconds is None else f" ({row.cpu_seconds:.1f})"
        lines.append(
            f"| {row.engine} | {row.core} | `{row.rules}` | {row.verdict} | {row.calls:,} | {row.seconds:.1f}{cpu} |"
        )
    return "\n".join(lines)


def render_page(sections: Sequence[EngineSection], total_seconds: float) -> str:
    """``docs/engines.md``: the one matrix first, then each engine's section."""
    rows = [row for section in sections for row in section.rows]
    parts = [
        "# Real engines through the kit",
        "",
        "Written by `make engines` (`examples/engines.py`); do not edit by hand.",
        "",
        render_matrix(rows),
        "",
        f"All of it in {total_seconds:.0f} s.",
    ]
    for section in sections:
        parts += ["", f"## {section.title}", "", section.prose.strip()]
    return "\n".join(parts) + "\n"
