"""``check_invariants`` itself, the oracle the agreement tests lean on: each invariant it states, broken on purpose.

Split from ``test_impl_mutants.py`` (the mutants of ``impl/`` the agreement tests let survive): ``make mutation``
runs both (``docs/mutation.md``).  White-box: each corruption writes the tree's fields directly.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

import pytest

from impl import RadixCache
from impl.radix import Node, RadixTree
from stateful_tests.test_impl_mutants import exactly, node_of


# ------------------------------------------------------- check_invariants itself


def queued_cache() -> tuple[RadixCache, dict[str, Node]]:
    """A cache (B = 2) with a split, four unpinned leaves, stale entries and two heap entries.

    Leaves ``a`` (the lower half of a split), ``c``, ``d``, ``e`` under ``u`` or the root; the
    FIFO holds ``a``'s entry, ``c``'s stale and live ones and the stale ones of ``d`` and
    ``e``, whose live entries sit in the heap (each was locked and unlocked after later
    calls).
    """
    cache = RadixCache(2)
    a = node_of(cache.insert([1, 1, 2, 2, 3, 3], [10, 11, 12]).node)
    c = node_of(cache.insert([1, 1, 2, 2, 4, 4], [10, 11, 13]).node)
    d = node_of(cache.insert([5, 5], [20]).node)
    e = node_of(cache.insert([6, 6], [30]).node)
    assert node_of(cache.match_prefix([1, 1, 2, 2, 4, 4, 0]).node) is c
    for node in (d, e):
        cache.lock(node)
        cache.unlock(node)
    tree = cache.tree()
    assert len(tree._heap) == 2 and tree._stale == 3 and len(tree._fifo) == 5
    return cache, {"a": a, "u": c.parent, "c": c, "d": d, "e": e}


def test_the_queued_cache_is_sound() -> None:
    """The starting point of the corruptions below passes every check."""
    cache, _ = queued_cache()
    cache.check_invariants()


def test_the_lru_queue_is_rebuilt_once_stale_entries_outnumber_live_ones() -> None:
    """Kills, in ``_compact_if_stale``, ``2 * self._stale`` -> ``3 *``, ``>`` -> ``>=`` and
    ``len(fifo) + len(heap)`` -> ``-``: the queue keeps its stale entries while they are no
    more than the live ones (3 against 4 here) and drops them all as soon as they outnumber
    them (``RadixTree``'s docstring), so it stays within twice the unpinned leaves without
    being rebuilt on every call."""
    cache, nodes = queued_cache()
    tree = cache.tree()
    assert (tree._stale, len(tree._fifo) + len(tree._heap)) == (3, 7), "3 stale of 7: no rebuild"
    cache.lock(nodes["a"])  # 4 stale of 7: rebuilt down to the 3 live entries
    assert (tree._stale, len(tree._fifo) + len(tree._heap)) == (0, 3)
    assert {entry[2] for entry in [*tree._fifo, *tree._heap]} == {nodes["c"], nodes["d"], nodes["e"]}
    cache.check_invariants()


Corruption = Callable[[RadixCache, RadixTree, dict[str, Node]], None]


def break_root_owner(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    tree.root.owner = None


def break_root_end(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    tree.root.end = 2


def break_root_queue_seq(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    tree.root.queue_seq = 0


def share_a_block_id(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    nodes["e"].blocks = array("I", nodes["d"].blocks)


def hold_a_stray_id(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    tree.held_ids.dense[99] = 1


def miscount_held_ids(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    tree.held_ids.count += 1


def repeat_a_leaf_use(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    nodes["e"].last_use = nodes["d"].last_use


def duplicate_a_live_entry(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    tree._fifo.append(tree._fifo[-1])


def swap_a_live_entry(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    tree._fifo.append(tree._fifo[-1])  # c twice ...
    nodes["e"].queue_seq = 99  # ... and e's entry no longer live: as many live entries, other leaves


def move_a_leaf_use(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    nodes["d"].last_use = 0


def miscount_stale(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    tree._stale += 1


def pile_up_stale(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    tree._heap.extend([(9, 50, nodes["e"]), (9, 51, nodes["e"])])
    tree._stale += 2


def reuse_a_seq(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    tree._fifo.append((6, tree._fifo[0][1], nodes["c"]))  # a's seq, on a stale entry of c
    tree._stale += 1


def invent_a_seq(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    tree._fifo.append((6, tree._last_seq + 1, nodes["c"]))
    tree._stale += 1


def swap_the_fifo_front(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    fifo = tree._fifo
    fifo[0], fifo[1] = fifo[1], fifo[0]


def swap_the_heap_top(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    heap = tree._heap
    heap[0], heap[1] = heap[1], heap[0]


def miscount_inserted(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    cache._inserted_blocks += 1


def hit_more_than_queried(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    cache._hit_tokens = cache._query_tokens + 2


def hit_half_a_block(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    cache._hit_tokens -= 1


def use_in_the_future(cache: RadixCache, tree: RadixTree, nodes: dict[str, Node]) -> None:
    nodes["u"].last_use = cache._clock + 1


CORRUPTIONS: list[tuple[Corruption, str]] = [
    (break_root_owner, "root links"),
    (break_root_end, "root holds nothing"),
    (break_root_queue_seq, "root is never locked or queued"),
    (share_a_block_id, "a block id is held at two positions"),
    (hold_a_stray_id, "held_ids matches the nodes"),
    (miscount_held_ids, "held_ids counts the ids held"),
    (repeat_a_leaf_use, "leaves have distinct last uses"),
    (duplicate_a_live_entry, "one live queue entry per unpinned leaf"),
    (swap_a_live_entry, "live queue entries are the unpinned leaves"),
    (move_a_leaf_use, "queue entries carry the eviction key"),
    (miscount_stale, "stale entry count"),
    (pile_up_stale, "stale entries never outnumber live ones"),
    (reuse_a_seq, "queue seqs are unique"),
    (invent_a_seq, "queue seqs were issued"),
    (swap_the_fifo_front, "FIFO order"),
    (swap_the_heap_top, "heap order"),
    (miscount_inserted, "blocks in = blocks held"),
    (hit_more_than_queried, "hit tokens within query tokens"),
    (hit_half_a_block, "hits are whole blocks"),
    (use_in_the_future, "uses are in the past"),
]


@pytest.mark.parametrize(("corrupt", "message"), CORRUPTIONS, ids=[corrupt.__name__ for corrupt, _ in CORRUPTIONS])
def test_check_invariants_names_each_broken_invariant(corrupt: Corruption, message: str) -> None:
    """Kills the mutations of ``check_invariants`` (``RadixTree``'s and ``RadixCache``'s) that
    weaken a check (``and`` -> ``or`` in the root checks, ``range(1, ...)`` -> ``range(2, ...)``
    in the FIFO and heap order checks) or change its message: the agreement tests trust
    ``check_invariants`` to fail on a broken tree, so each assertion is shown to fire, with
    its own message, on a tree broken in just that way."""
    cache, nodes = queued_cache()
    corrupt(cache, cache.tree(), nodes)
    with pytest.raises(AssertionError, match=exactly(message)):
        cache.check_invariants()
