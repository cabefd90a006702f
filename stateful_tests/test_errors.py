"""Every error of R1, R5, R6 and R8, each checked to change nothing observable (R10)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from spec.api import InvalidArgument, NotLocked, PrefixCache, PrefixCacheError, UnknownNode
from spec.api import CacheFactory


def populated(make_cache: CacheFactory) -> PrefixCache:
    """A cache with two branches, a split, a lock and some counters, so that R10 has state to keep."""
    cache = make_cache(2)
    cache.insert([1, 2, 3, 4, 5], [10, 11])
    cache.insert([1, 2, 7, 7], [10, 12])
    locked = cache.match_prefix([1, 2, 3, 4, 5])
    cache.lock(locked.node)
    cache.match_prefix([9, 9, 9])
    return cache


def assert_refused(cache: PrefixCache, error: type[PrefixCacheError], call: Callable[[], object]) -> None:
    """``call`` raises ``error`` and leaves contents, nodes, locks, last-use order and counters as they were."""
    before = cache.snapshot()
    evictable = cache.evictable_blocks()
    with pytest.raises(error):
        call()
    assert cache.snapshot() == before
    assert cache.evictable_blocks() == evictable


@pytest.mark.parametrize("block_size", [0, -1, 2.0, "2", None])
def test_r1_block_size_below_one_or_not_an_int(make_cache: CacheFactory, block_size: object) -> None:
    with pytest.raises(InvalidArgument):
        make_cache(block_size)  # type: ignore[arg-type]  # the bad argument is the point


BAD_TOKEN_LISTS: list[object] = [[1, -1], [1, 2**32], [1, 2.0], [1, "2"], [1, None], None, 5, "12"]


@pytest.mark.parametrize("tokens", BAD_TOKEN_LISTS, ids=repr)
def test_r1_bad_tokens_in_match(make_cache: CacheFactory, tokens: object) -> None:
    cache = populated(make_cache)
    assert_refused(cache, InvalidArgument, lambda: cache.match_prefix(tokens))  # type: ignore[arg-type]  # deliberately bad


@pytest.mark.parametrize("tokens", BAD_TOKEN_LISTS, ids=repr)
def test_r1_bad_tokens_in_insert(make_cache: CacheFactory, tokens: object) -> None:
    cache = populated(make_cache)
    assert_refused(cache, InvalidArgument, lambda: cache.insert(tokens, [20]))  # type: ignore[arg-type]  # deliberately bad


def test_r1_a_bad_token_beyond_the_searched_prefix_is_refused(make_cache: CacheFactory) -> None:
    cache = populated(make_cache)
    assert_refused(cache, InvalidArgument, lambda: cache.match_prefix([1, 2, 3, 4, 2**32]))


@pytest.mark.parametrize("blocks", [[-1, 21], [2**32, 21], [20, 2.5], [20, None], None], ids=repr)
def test_r1_bad_block_ids(make_cache: CacheFactory, blocks: object) -> None:
    cache = populated(make_cache)
    assert_refused(cache, InvalidArgument, lambda: cache.insert([5, 5, 5, 5], blocks))  # type: ignore[arg-type]  # deliberately bad


def test_r1_the_largest_ids_are_accepted(make_cache: CacheFactory) -> None:
    cache = make_cache(1)
    top = 2**32 - 1
    assert cache.insert([top, 0], [top, 0]).duplicates == []
    assert cache.match_prefix([top, 0, top]).blocks == [top, 0]


@pytest.mark.parametrize("count", [0, 1, 3])
def test_r5_wrong_block_count(make_cache: CacheFactory, count: int) -> None:
    cache = populated(make_cache)
    assert_refused(cache, InvalidArgument, lambda: cache.insert([5, 5, 5, 5, 5], list(range(40, 40 + count))))


def test_r5_an_id_repeated_within_the_call(make_cache: CacheFactory) -> None:
    cache = populated(make_cache)
    assert_refused(cache, InvalidArgument, lambda: cache.insert([5, 5, 6, 6], [40, 40]))


def test_r5_an_id_cached_at_another_position(make_cache: CacheFactory) -> None:
    cache = populated(make_cache)
    assert_refused(cache, InvalidArgument, lambda: cache.insert([5, 5, 6, 6], [40, 11]))
    # also where the position is cached with another id: 11 is not this position's block
    assert_refused(cache, InvalidArgument, lambda: cache.insert([1, 2, 7, 7], [10, 11]))


def test_r6_unlock_without_a_lock(make_cache: CacheFactory) -> None:
    cache = populated(make_cache)
    unlocked = cache.match_prefix([1, 2, 7, 7, 0]).node
    assert_refused(cache, NotLocked, lambda: cache.unlock(unlocked))


def test_r6_unknown_nodes(make_cache: CacheFactory) -> None:
    cache = populated(make_cache)
    other_cache = make_cache(2)
    stranger = other_cache.insert([1, 2, 3], [10]).node
    for node in ["n1", None, 10**9, 2.5, stranger]:
        assert_refused(cache, UnknownNode, lambda: cache.lock(node))
        assert_refused(cache, UnknownNode, lambda: cache.unlock(node))


def test_r6_an_evicted_node_is_unknown(make_cache: CacheFactory) -> None:
    cache = make_cache(2)
    gone = cache.insert([1, 2], [10]).node
    assert cache.evict(1) == [10]
    assert_refused(cache, UnknownNode, lambda: cache.lock(gone))
    assert_refused(cache, UnknownNode, lambda: cache.unlock(gone))
    again = cache.insert([1, 2], [10]).node
    assert again != gone  # a NodeId is never reused
    assert_refused(cache, UnknownNode, lambda: cache.lock(gone))


def test_r6_the_root_takes_no_lock(make_cache: CacheFactory) -> None:
    cache = populated(make_cache)
    before = cache.snapshot()
    cache.lock(cache.root)
    cache.unlock(cache.root)
    cache.unlock(cache.root)  # never NotLocked
    assert cache.snapshot() == before


@pytest.mark.parametrize("count", [-1, 1.5, "3", None])
def test_r8_bad_eviction_count(make_cache: CacheFactory, count: object) -> None:
    cache = populated(make_cache)
    assert_refused(cache, InvalidArgument, lambda: cache.evict(count))  # type: ignore[arg-type]  # deliberately bad
