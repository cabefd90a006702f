"""``impl.RadixCache`` against the spec call by call, quickly: the agreement tests of ``make mutation``.

Each case drives ``Lockstep(SpecCache(B), CheckedRadixCache(B))`` with the
engine workload of ``prefixspec.drive.engine`` for a few hundred steps, so a mutant of
``impl/`` that changes any result, error or snapshot fails within a second.
``CheckedRadixCache`` also runs ``check_invariants()`` after every call that
can change the tree, so a mutant that breaks an internal count, the LRU queue
or the held ids fails even before it shows in a result.  The cases differ in
block size, seed and pool pressure; small, many cases let mutmut stop at the
first failing one.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from impl import RadixCache
from spec.api import Namespace, BlockId, Inserted, NodeId, PrefixMatch
from prefixspec.drive.engine import Workload, run_engine
from prefixspec.compare.lockstep import Lockstep
from spec.model import SpecCache


class CheckedRadixCache(RadixCache):
    """A ``RadixCache`` that checks its invariants after every call that may change it, failed or not."""

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        try:
            return super().match_prefix(tokens, namespace)
        finally:
            self.check_invariants()

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        try:
            return super().insert(tokens, blocks, namespace)
        finally:
            self.check_invariants()

    def lock(self, node: NodeId) -> None:
        try:
            super().lock(node)
        finally:
            self.check_invariants()

    def unlock(self, node: NodeId) -> None:
        try:
            super().unlock(node)
        finally:
            self.check_invariants()

    def evict(self, n_blocks: int) -> list[BlockId]:
        try:
            return super().evict(n_blocks)
        finally:
            self.check_invariants()


# (block size, seed, steps, workload): plenty of hits, splits and evictions in each.
CASES: list[tuple[int, int, int, Workload]] = [
    (1, 11, 400, Workload(block_size=1, longest_prompt_blocks=40)),
    (2, 12, 400, Workload(block_size=2)),
    (3, 13, 400, Workload(block_size=3)),
    (4, 14, 300, Workload(block_size=4, alphabet=2)),
    # a small pool: the engine evicts on almost every admission
    (2, 15, 400, Workload(block_size=2, pool_size=24, max_running=4)),
    # many requests at once: deep lock nesting on shared prefixes
    (1, 16, 400, Workload(block_size=1, pool_size=96, max_running=16, alphabet=2)),
]


@pytest.mark.parametrize(
    ("block_size", "seed", "steps", "workload"),
    CASES,
    ids=[f"B{case[0]}-seed{case[1]}" for case in CASES],
)
def test_impl_agrees_with_the_spec_call_by_call(block_size: int, seed: int, steps: int, workload: Workload) -> None:
    pair = Lockstep(SpecCache(block_size), CheckedRadixCache(block_size))
    engine = run_engine(pair, steps=steps, seed=seed, workload=workload)
    assert engine.counts.steps == steps
    assert engine.counts.prefilled > steps // 10
    assert engine.counts.blocks_evicted > 0
