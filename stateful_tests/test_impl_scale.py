"""The implementation on inputs whose size would break recursion or per-token loops."""

from __future__ import annotations

import sys

from impl import RadixCache


def test_a_100000_token_prompt_at_block_size_1() -> None:
    cache = RadixCache(1)
    tokens = list(range(100_000))
    assert cache.insert(tokens, tokens).duplicates == []
    found = cache.match_prefix(tokens)
    assert found.matched_tokens == 99_999 and found.blocks == tokens[:-1]
    cache.lock(found.node)
    assert cache.evictable_blocks() == 1  # the last block, below the lock
    cache.unlock(found.node)
    assert cache.evict(10**9) == [99_999] + tokens[:-1]  # the split's lower leaf, then the upper node
    assert cache.cached_blocks() == 0


def test_a_chain_of_nodes_deeper_than_the_recursion_limit() -> None:
    depth = sys.getrecursionlimit() + 1000
    cache = RadixCache(1)
    tokens = list(range(depth))
    nodes = [cache.insert(tokens[:length], tokens[:length]).node for length in range(1, depth + 1)]
    assert len(set(nodes)) == depth  # each insert past a leaf made a child
    cache.lock(nodes[-1])  # pins the whole chain, walking up every node
    assert cache.evictable_blocks() == 0 and cache.evict(10) == []
    assert len(cache.snapshot().nodes) == depth
    cache.check_invariants()
    cache.unlock(nodes[-1])
    freed = cache.evict(10**9)
    assert freed == tokens[::-1]  # leaf by leaf from the deepest: each parent then becomes the oldest leaf
    cache.check_invariants()
