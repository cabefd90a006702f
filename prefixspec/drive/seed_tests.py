"""The seed's eight tests, under its names and with its numbers, for any cache factory.

Each takes ``make_cache(block_size)`` and fails with an AssertionError (or the
cache's own unexpected error).  ``stateful_tests/test_seed.py`` runs them on
the spec and the implementation; ``prefixspec hunt`` runs them on mutants, so
they live in the installed package and use no pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from spec.api import CacheFactory, InvalidArgument, NotLocked, PrefixStats
from prefixspec.formats.trace import read_trace, replay
from prefixspec.drive.engine import Workload, run_engine
from prefixspec.shipped import GOLDEN_TRACE


@contextmanager
def raises(error: type[BaseException]) -> Iterator[None]:
    """The block must raise ``error``."""
    try:
        yield
    except error:
        return
    raise AssertionError(f"expected {error.__name__}, nothing was raised")


def hand_example_shared_system_prompt(make_cache: CacheFactory) -> None:
    """Section 3 of the seed, by hand, at B = 2."""
    cache = make_cache(2)
    inserted = cache.insert([1, 2, 3, 4, 5], [10, 11])
    assert inserted.duplicates == []
    assert cache.cached_tokens() == 4
    assert cache.cached_blocks() == 2

    request_b = cache.match_prefix([1, 2, 3, 4, 9, 9])
    assert (request_b.matched_tokens, request_b.blocks) == (4, [10, 11])
    assert request_b.node == inserted.node

    request_c = cache.match_prefix([1, 2, 3, 4])
    assert (request_c.matched_tokens, request_c.blocks) == (2, [10])
    assert request_c.node not in (cache.root, inserted.node)  # the node was split at 2 tokens

    # The tree: the node split at 2 tokens, and nothing of the partial tail (token 5) stored.
    assert [(view.prefix, view.blocks) for view in cache.snapshot().nodes] == [((1, 2, 3, 4), (11,)), ((1, 2), (10,))]

    miss = cache.match_prefix([7, 7, 7])
    assert (miss.matched_tokens, miss.blocks, miss.node) == (0, [], cache.root)

    assert cache.stats() == PrefixStats(lookups=3, query_tokens=13, hit_tokens=6, inserted_blocks=2, evicted_blocks=0)
    assert cache.hit_rate() == 6 / 13
    assert cache.cached_tokens() == 4


def the_last_prompt_token_is_never_covered(make_cache: CacheFactory) -> None:
    """Prompts of 0 to 7 tokens over 6 cached tokens at B = 2 match 0, 0, 0, 2, 2, 4, 4, 6."""
    cache = make_cache(2)
    cache.insert([1, 2, 3, 4, 5, 6], [10, 11, 12])
    tokens = [1, 2, 3, 4, 5, 6, 7]
    matched = [cache.match_prefix(tokens[:length]).matched_tokens for length in range(8)]
    assert matched == [0, 0, 0, 2, 2, 4, 4, 6]


def insert_takes_exactly_the_full_blocks(make_cache: CacheFactory) -> None:
    """A block for the partial tail is refused, and the tail's tokens are never cached."""
    cache = make_cache(2)
    before = cache.snapshot()
    with raises(InvalidArgument):
        cache.insert([1, 2, 3, 4, 5], [10, 11, 12])  # a block for the partial tail
    with raises(InvalidArgument):
        cache.insert([1, 2, 3, 4, 5], [10])  # a whole block without its id
    assert cache.snapshot() == before

    cache.insert([1, 2, 3, 4, 5], [10, 11])
    assert cache.cached_blocks() == 2
    found = cache.match_prefix([1, 2, 3, 4, 5, 6, 7])
    assert (found.matched_tokens, found.blocks) == (4, [10, 11])  # token 5 was not cached

    tail_only = cache.insert([8], [])
    assert tail_only == type(tail_only)(node=cache.root, duplicates=[])
    assert cache.cached_blocks() == 2


def a_prefix_computed_twice_is_kept_once(make_cache: CacheFactory) -> None:
    """A racing request's blocks come back as duplicates; the cached ids themselves do not."""
    cache = make_cache(2)
    first = cache.insert([1, 2, 3, 4, 5], [10, 11])
    racing = cache.insert([1, 2, 3, 4, 5], [20, 21])
    assert racing.duplicates == [20, 21]
    assert racing.node == first.node

    matched_first = cache.insert([1, 2, 3, 4, 5], [10, 11])
    assert matched_first.duplicates == []

    longer = cache.insert([1, 2, 3, 4, 5, 6, 7], [10, 31, 32])  # position 1 raced, position 2 is new
    assert longer.duplicates == [31]
    assert cache.cached_blocks() == 3
    assert cache.stats().inserted_blocks == 3

    found = cache.match_prefix([1, 2, 3, 4, 5, 6, 7])  # the prefix spans two nodes
    assert (found.matched_tokens, found.blocks) == (6, [10, 11, 32])
    assert found.node == longer.node


def a_locked_prefix_survives_eviction(make_cache: CacheFactory) -> None:
    """Eviction frees only unlocked blocks until the request unlocks; the counts follow."""
    cache = make_cache(2)
    cache.insert([1, 2, 3, 4, 5, 6], [10, 11, 12])
    running = cache.match_prefix([1, 2, 3, 4, 9])  # splits the node at 4 tokens
    assert running.blocks == [10, 11]
    cache.lock(running.node)
    assert cache.evictable_blocks() == 1  # block 12, below the lock

    assert cache.evict(5) == [12]
    assert cache.evictable_blocks() == 0
    assert cache.evict(5) == []
    assert cache.cached_blocks() == 2

    other = cache.insert([7, 8, 9, 9, 9], [20, 21])
    assert cache.evictable_blocks() == 2
    assert cache.evict(1) == [20, 21]  # the whole leaf, though one block was asked for
    assert cache.stats().evicted_blocks == 3
    assert other.node != running.node

    cache.unlock(running.node)
    assert cache.evictable_blocks() == 2
    with raises(NotLocked):
        cache.unlock(running.node)
    assert cache.evict(1) == [10, 11]
    assert cache.stats().evicted_blocks == 5
    assert cache.cached_blocks() == 0


def eviction_frees_the_least_recently_used_first(make_cache: CacheFactory) -> None:
    """Three prompts, one re-used: the other two go first, oldest first."""
    cache = make_cache(2)
    cache.insert([1, 1, 1], [10])
    cache.insert([2, 2, 2, 2], [20, 21])
    cache.insert([3, 3, 3], [30])
    cache.match_prefix([1, 1, 1])  # the first prompt is used again
    assert cache.evict(1) == [20, 21]
    assert cache.evict(1) == [30]
    assert cache.evict(1) == [10]
    assert cache.evict(1) == []


def golden_reference_trace(make_cache: CacheFactory) -> None:
    """The committed golden trace replays without a divergence: every match, duplicate, eviction and count."""
    trace = read_trace(GOLDEN_TRACE)
    assert len(trace.steps) >= 300
    divergence = replay(trace, make_cache(trace.block_size))
    assert divergence is None, divergence.describe()


def blocks_are_conserved_and_locked_prefixes_stay(make_cache: CacheFactory) -> None:
    """3,000 seeded engine steps over 64 block ids; the engine checks every invariant after each step."""
    engine = run_engine(make_cache(2), steps=3000, seed=84, workload=Workload(pool_size=64))
    counts = engine.counts
    assert counts.steps == 3000
    # The run must exercise what it claims to check.
    assert counts.admitted > 500 and counts.prefilled > 300 and counts.finished > 300
    assert counts.refused > 0 and counts.duplicates_freed > 0 and counts.blocks_evicted > 500
    assert sorted(engine.free) == list(range(64))


SEED_TESTS: dict[str, Callable[[CacheFactory], None]] = {
    "hand_example_shared_system_prompt": hand_example_shared_system_prompt,
    "the_last_prompt_token_is_never_covered": the_last_prompt_token_is_never_covered,
    "insert_takes_exactly_the_full_blocks": insert_takes_exactly_the_full_blocks,
    "a_prefix_computed_twice_is_kept_once": a_prefix_computed_twice_is_kept_once,
    "a_locked_prefix_survives_eviction": a_locked_prefix_survives_eviction,
    "eviction_frees_the_least_recently_used_first": eviction_frees_the_least_recently_used_first,
    "golden_reference_trace": golden_reference_trace,
    "blocks_are_conserved_and_locked_prefixes_stay": blocks_are_conserved_and_locked_prefixes_stay,
}
"""The seed's tests by name, in the seed's order."""
