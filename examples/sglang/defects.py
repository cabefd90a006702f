"""Two defects of SGLang 0.5.23 found by the kit, each replayable: ``python -m examples.sglang.defects``.

1. ``RadixCache`` under ``tlru`` raises in ``evict``: ``TLRUStrategy.get_priority`` reads
   ``node._tlru_history_len`` and ``node._tlru_cached_prefix_len`` (``mem_cache/evict_policy.py:68-81``),
   which only the unified core's ``UnifiedTreeNode`` has (``unified_cache/unified_tree_core.py:134-135``);
   the plain ``TreeNode`` (``mem_cache/radix_cache.py``) never sets them.  Replay:
   ``prefixspec replay examples/sglang/defect_traces/radix_tlru_evict.trace --target examples.sglang.adapter:tlru --timeout 600``.
2. The Rust TreeCore panics when a lock receipt is released twice (``UnifiedRadixCache.unlock`` of
   one ``TreeLock`` twice: ``src/components/full.rs:402``, "FULL segment release hit lock_ref=0"), the
   binding raises ``RuntimeError("Rust TreeCore panicked: ...")`` and its mutex is poisoned: every later
   call raises "Rust TreeCore mutex poisoned; refusing to reuse state after an earlier panic".  The Python core raises
   ``AssertionError`` (``components/full.py:366``) and carries on.  Both are a caller's misuse, but a
   panic that takes the whole cache down (the scheduler's every later request) is a defect of
   robustness.  ``double_release(core)`` replays it in a process of its own.

``main`` runs both, each in a subprocess (a panic cannot reach this process), and prints what happened.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TLRU_TRACE = HERE / "defect_traces" / "radix_tlru_evict.trace"
BACKTRACE = re.compile(r"WARNING|stack backtrace:|note: Some details|\s+\d+: |\s+at ")
"""Lines of a replay's output left out of its report: pip's warnings and Rust's backtrace frames."""


@dataclass(frozen=True)
class Outcome:
    name: str
    command: str
    output: str
    returncode: int


def double_release(core: str) -> None:
    """Lock a node of a UnifiedRadixCache on ``core``, release the receipt twice, then match: print each step's outcome."""
    from examples.sglang.unified import UnifiedCache

    cache = UnifiedCache(1, "lru", core=core)  # type: ignore[arg-type]  # core is checked by UnifiedCache
    sglang = cache.cache
    node = cache.live(cache.insert([1, 2, 3], [0, 1, 2]).node)  # SGLang's own NodeId
    lock = sglang.lock(node)
    print(f"{core}: insert [1 2 3] [0 1 2] -> node {node}; lock -> receipt {lock.receipt}")
    for attempt in ("first", "second"):
        try:
            sglang.unlock(lock)
            print(f"{core}: {attempt} unlock -> ok")
        except BaseException as error:  # a pyo3 PanicException is a BaseException
            print(f"{core}: {attempt} unlock -> {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
    try:
        matched = cache.match_prefix([1, 2, 3, 4])
        print(f"{core}: match [1 2 3 4] after it -> {matched.matched_tokens} tokens")
    except BaseException as error:
        print(f"{core}: match [1 2 3 4] after it -> {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")


def run(arguments: list[str], name: str) -> Outcome:
    command = [sys.executable, *arguments]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip() and not BACKTRACE.match(line)]
    return Outcome(name, " ".join(["python", *arguments]), "\n".join(lines[-12:]), done.returncode)


def outcomes() -> list[Outcome]:
    found = [
        run(["-m", "prefixspec", "replay", str(TLRU_TRACE.relative_to(ROOT)), "--target", "examples.sglang.adapter:tlru", "--timeout", "600"], "RadixCache tlru evict")
    ]
    for core in ("rust", "python"):
        found.append(run(["-m", "examples.sglang.defects", "double-release", core], f"double release, {core} core"))
    return found


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["double-release"] and len(arguments) == 2:
        double_release(arguments[1])
        return 0
    for outcome in outcomes():
        print(f"## {outcome.name}\n$ {outcome.command}\n{outcome.output}\n(exit {outcome.returncode})\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
