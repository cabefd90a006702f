"""The spec alone on a path 300 nodes deep: CPU per call, the least of three runs.

``python -m bench.spec_deep_path`` builds the path with 300 nested inserts (block size 2), then matches,
locks, unlocks and snapshots along it and evicts it whole: calls every tree of the project has, so that
``PYTHONPATH=OTHER_TREE python -m bench.spec_deep_path`` measures another commit on the same calls, to be
run in turn with this tree's (a ratio of runs made one after the other, not one time alone).
"""

from __future__ import annotations

import time

from spec.api import Rules
from spec.model import SpecCache

DEPTH = 300


def microseconds_per_call() -> float:
    cache = SpecCache(2, Rules())
    calls = 0
    started = time.process_time()
    prompt: list[int] = []
    for depth in range(DEPTH):
        prompt = prompt + [depth % 7, depth % 5]
        cache.insert(list(prompt), list(range(depth + 1)))
        calls += 1
    for depth in range(0, DEPTH, 3):
        found = cache.match_prefix(prompt[: 2 * depth + 1])
        cache.lock(found.node)
        cache.unlock(found.node)
        cache.snapshot()
        calls += 4
    cache.evict(10**6)
    calls += 1
    return 1e6 * (time.process_time() - started) / calls


if __name__ == "__main__":
    print(f"{min(microseconds_per_call() for _ in range(3)):.1f} us per call")
