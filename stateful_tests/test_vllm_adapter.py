"""vLLM's real KVCacheManager through ``examples/vllm/adapter.py``, on the scenarios that show its rules.

Skipped where vLLM does not import (``make test`` needs no ``.venv-vllm``); run them with
``.venv-vllm/bin/pytest stateful_tests/test_vllm_adapter.py``.  The vLLM-free parts of the
translation are ``test_vllm_translation.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from spec.api import BlockRemoved, BlockStored, InvalidArgument, NotLocked, PrefixCache, PublishesEvents, UnknownNode
from examples.vllm.loading import import_failure, load_vllm

if load_vllm() is None:
    pytest.skip(f"vLLM is not importable here ({import_failure()}); make engines-vllm builds .venv-vllm", allow_module_level=True)

from examples.vllm.adapter import VllmCache, make_cache  # noqa: E402  (after the skip: it imports vLLM)


def free_queue_is_the_cached_unheld_blocks(cache: VllmCache) -> bool:
    """The adapter's invariant: vLLM's free queue holds exactly the cached blocks no request holds."""
    queued = list(cache.pool.free_block_queue.iter_blocks_after(None))
    return all(block.block_hash is not None and block.ref_cnt == 0 for block in queued) and {
        block.block_id for block in queued
    } == {vllm_id for vllm_id in cache.ids.caller_of if cache.pool.blocks[vllm_id].ref_cnt == 0}


def test_it_is_a_prefix_cache_that_publishes_events() -> None:
    cache = make_cache(2)
    assert isinstance(cache, PrefixCache) and isinstance(cache, PublishesEvents)
    assert cache.block_size() == 2 and cache.cached_blocks() == 0 and cache.take_events() == []


def test_a_request_frees_its_tail_first() -> None:
    """R8, order: insert 5 blocks, evict 5: vLLM frees [4 3 2 1 0] (kv_cache_manager.py:620-629)."""
    cache = make_cache(1)
    cache.insert([1, 2, 3, 4, 5], [0, 1, 2, 3, 4])
    assert cache.evict(5) == [4, 3, 2, 1, 0]
    assert free_queue_is_the_cached_unheld_blocks(cache)


def test_eviction_pops_exactly_n_blocks_and_cuts_a_leaf() -> None:
    """R8, granularity: evict 5 of a 10-block prefix frees 5; the leaf keeps its node, 5 blocks shorter."""
    cache = make_cache(1)
    leaf = cache.insert(list(range(10)), list(range(100, 110))).node
    assert cache.evict(5) == [109, 108, 107, 106, 105]
    assert [(view.prefix, view.blocks) for view in cache.snapshot().nodes] == [((0, 1, 2, 3, 4), (100, 101, 102, 103, 104))]
    found = cache.match_prefix(list(range(10)))
    assert found.blocks == [100, 101, 102, 103, 104] and found.node is leaf


def test_one_prompt_served_three_times_caches_three_copies() -> None:
    """R5: vLLM recomputes the last block of a prompt it holds whole (max_cache_hit_length = n - 1,
    kv_cache_manager.py:295) and caches it again (block_pool.py:48-52); one BlockStored each, one hash."""
    cache = make_cache(4)
    for block in (10, 20, 30):
        assert cache.insert([1, 2, 3, 4], [block]).duplicates == []
    stored = cache.take_events()
    assert stored == [BlockStored(None, (1, 2, 3, 4), (block,), None) for block in (10, 20, 30)]
    assert [(view.blocks, view.copies) for view in cache.snapshot().nodes] == [((10,), ((20, 30),))]
    assert cache.snapshot().released == (10, 20, 30) and cache.cached_blocks() == 3
    assert cache.evict(1) == [10]
    assert cache.take_events() == [BlockRemoved((10,))]
    assert cache.match_prefix([1, 2, 3, 4, 5]).blocks == [20], "another copy still serves hits"


def test_a_lookup_touches_nothing_and_recency_is_the_last_release() -> None:
    """R7: insert A; lock A; insert B; unlock A: A is the most recent (block_pool.py:774-803)."""
    cache = make_cache(2)
    node_a = cache.insert([1, 1], [10]).node
    cache.lock(node_a)
    cache.insert([2, 2], [20])
    cache.match_prefix([2, 2, 9])  # a lookup: no use
    cache.unlock(node_a)
    assert cache.snapshot().released == (20, 10), "vLLM's free queue, head first"
    assert cache.evict(1) == [20]


def test_locks_are_requests_that_hold_the_blocks() -> None:
    cache = make_cache(2)
    node = cache.insert([1, 2, 3, 4], [10, 11]).node
    cache.lock(node)
    cache.lock(node)
    assert cache.evictable_blocks() == 0 and cache.evict(9) == []
    assert [view.locks for view in cache.snapshot().nodes] == [2]
    cache.unlock(node)
    cache.unlock(node)
    with pytest.raises(NotLocked):
        cache.unlock(node)
    assert cache.evict(9) == [11, 10]
    with pytest.raises(UnknownNode):
        cache.lock(node)
    assert free_queue_is_the_cached_unheld_blocks(cache)


def test_namespaces_are_cache_salts_and_reach_the_events() -> None:
    cache = make_cache(2)
    cache.insert([1, 2, 3], [10], namespace="tenant")
    cache.insert([1, 2, 3], [20])
    assert cache.match_prefix([1, 2, 3], namespace="tenant").blocks == [10]
    assert cache.match_prefix([1, 2, 3], namespace=0).blocks == []
    assert cache.take_events() == [BlockStored(None, (1, 2), (10,), "tenant"), BlockStored(None, (1, 2), (20,), None)]


def test_refusals_change_nothing() -> None:
    cache = make_cache(2)
    cache.insert([1, 2, 3, 4], [10, 11])
    before = cache.snapshot()
    for tokens, blocks in (([1, 2], [10, 11]), ([5, 6, 7, 8], [12, 12]), ([5, 6], [11]), ([1, 2], [-1])):
        with pytest.raises(InvalidArgument):
            cache.insert(tokens, blocks)
    assert cache.snapshot() == before and free_queue_is_the_cached_unheld_blocks(cache)


def test_a_request_that_computed_a_cached_prefix_again_caches_copies() -> None:
    """R5: vLLM looks up once, at admission; a request that did not reuse a cached prefix (it ran beside the one
    that cached it) caches its own blocks there too, copies; the leading cached ids are what it reused."""
    cache = make_cache(2)
    cache.insert([1, 2, 3, 4], [10, 11])
    assert cache.insert([1, 2, 3, 4, 5], [20, 21]).duplicates == []
    assert cache.insert([1, 2, 3, 4], [10, 31]).duplicates == []
    assert cache.take_events()[1:] == [BlockStored(None, (1, 2, 3, 4), (20, 21), None), BlockStored(10, (3, 4), (31,), None)]
    assert [(view.blocks, view.copies) for view in cache.snapshot().nodes] == [((10, 11), ((20,), (21, 31)))]


def test_a_cached_block_after_a_computed_one_is_refused_before_vllm_sees_it() -> None:
    """R5 dup=keep: a request's blocks are the reused ones, then new ones (single_type_kv_cache_manager.py:290-313,
    :399-406); the call machine's ``[differing, cached]`` describes no request: InvalidArgument, nothing changed."""
    cache = make_cache(2)
    cache.insert([1, 1, 1, 1], [10, 11])
    before = cache.snapshot()
    with pytest.raises(InvalidArgument):
        cache.insert([1, 1, 1, 1], [20, 11])
    assert cache.snapshot() == before and free_queue_is_the_cached_unheld_blocks(cache)
    assert cache.insert([1, 1, 1, 1], [10, 21]).duplicates == [] and cache.cached_blocks() == 3


def test_the_snapshots_nodes_kept_between_calls_are_the_ones_built_afresh() -> None:
    """The adapter builds its nodes' views again only after a call that changed them: after each kind of call
    (a match that makes a node, a lock, an unlock, an insert, an evict) they are what a fresh build gives."""
    from examples.vllm.translation import node_views

    cache = make_cache(2)

    def fresh() -> tuple[object, ...]:
        return node_views(cache.tree, cache.ids.caller_of, lambda node: len(node.locks))  # type: ignore[attr-defined]

    leaf = cache.insert([1, 2, 3, 4, 5, 6], [10, 11, 12]).node
    steps: list[Callable[[], object]] = [
        lambda: cache.match_prefix([1, 2, 3, 4, 9]),  # a node ends inside the leaf from now on
        lambda: cache.lock(leaf),
        lambda: cache.insert([1, 2, 7, 8], [10, 20]),
        lambda: cache.unlock(leaf),
        lambda: cache.evict(2),
        lambda: cache.match_prefix([1, 2, 3, 4, 9]),  # a match that changes no node
    ]
    for step in steps:
        cache.snapshot()  # the views kept, then the call
        step()
        assert cache.snapshot().nodes == fresh()
