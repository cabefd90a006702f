"""The vLLM adapter's translation (``examples/vllm/translation.py``), without vLLM: ids, hash-keyed events, nodes.

These run in ``make test`` whether or not vLLM is installed; ``test_vllm_adapter.py`` runs the adapter
over vLLM's real KVCacheManager where vLLM imports (``.venv-vllm``) and skips elsewhere.
"""

from __future__ import annotations

import pytest

from spec.api import Namespace
from examples.places import PlaceKeys
from examples.vllm.translation import BlockIds, HashIndex, Place, PlaceTree, TranslationError, stored_places

B = 2
KEYS = PlaceKeys()
"""One numbering of places for every tree and index of these tests (a place is the same key in each)."""


def place(*tokens: int, namespace: Namespace = None) -> Place:
    return KEYS.along(namespace, tokens, B)[-1] if tokens else KEYS.root(namespace)


# BlockIds: the caller's ids and vLLM's blocks ---------------------------------------------------


def test_an_id_is_bound_to_one_vllm_block_until_vllm_evicts_it() -> None:
    ids = BlockIds()
    ids.bind(10, 1)
    assert ids.cached(10) and ids.vllm_of[10] == 1 and ids.caller_of[1] == 10
    assert ids.release(1) == 10
    assert not ids.cached(10) and 1 not in ids.caller_of


def test_a_vllm_block_evicted_and_reused_lives_anew() -> None:
    ids = BlockIds()
    ids.bind(10, 1)
    first = ids.lifetime(1)
    ids.release(1)
    ids.bind(20, 1)
    assert ids.lifetime(1) != first, "a node over the old lifetime must be stale (R6)"


@pytest.mark.parametrize(("caller", "vllm_block"), [(10, 2), (11, 1)])
def test_binding_twice_is_refused(caller: int, vllm_block: int) -> None:
    ids = BlockIds()
    ids.bind(10, 1)
    with pytest.raises(TranslationError):
        ids.bind(caller, vllm_block)


def test_evicting_a_block_that_stands_for_no_id_is_a_translation_error() -> None:
    with pytest.raises(TranslationError, match="stands for no id"):
        BlockIds().release(3)


# HashIndex: a router's index of hash-keyed events ---------------------------------------------------


def test_a_block_stored_names_the_ids_the_insert_left_at_its_places() -> None:
    index = HashIndex(KEYS)
    index.expect(place(1, 2), 10)
    index.expect(place(1, 2, 3, 4), 11)
    parent, parent_place = index.parent(None)
    assert (parent, parent_place) == (None, None)
    first, second = stored_places(KEYS, None, None, [1, 2, 3, 4], B)
    assert index.store(b"h1", first) == 10
    assert index.store(b"h2", second) == 11
    assert index.parent(b"h2") == (11, place(1, 2, 3, 4))
    assert not index.awaiting


def test_copies_under_one_hash_are_kept_oldest_first_and_removed_by_the_evicted_id() -> None:
    index = HashIndex(KEYS)
    for caller in (11, 21, 31):
        index.expect(place(1, 2), caller)
        index.store(b"h", place(1, 2))
    assert index.ids_of[b"h"] == [11, 21, 31]
    assert index.parent(b"h") == (11, place(1, 2)), "a child follows the copy vLLM's lookup serves: the oldest"
    assert index.remove(b"h", 21) == 21
    assert index.ids_of[b"h"] == [11, 31]
    index.remove(b"h", 11)
    assert index.parent(b"h") == (31, place(1, 2))
    index.remove(b"h", 31)
    assert b"h" not in index.ids_of and b"h" not in index.place_of


def test_events_the_router_cannot_place_are_translation_errors() -> None:
    index = HashIndex(KEYS)
    with pytest.raises(TranslationError, match="no insert left a block"):
        index.store(b"h", place(1, 2))
    with pytest.raises(TranslationError, match="parent hash"):
        index.parent(b"unknown")
    index.expect(place(1, 2), 10)
    index.store(b"h", place(1, 2))
    with pytest.raises(TranslationError, match="not stored under it"):
        index.remove(b"h", 99)
    index.expect(place(3, 4), 12)
    with pytest.raises(TranslationError, match="stands for"):
        index.store(b"h", place(3, 4))


def test_a_later_block_takes_its_parents_namespace_and_a_first_block_the_events() -> None:
    assert stored_places(KEYS, None, "salt", [1, 2, 3, 4], B) == [place(1, 2, namespace="salt"), place(1, 2, 3, 4, namespace="salt")]
    assert stored_places(KEYS, place(7, 7, namespace="tenant"), None, [1, 2], B) == [place(7, 7, 1, 2, namespace="tenant")]
    assert KEYS.tokens(place(7, 7, 1, 2, namespace="tenant")) == (7, 7, 1, 2) and KEYS.namespace(place(7, 7, namespace="tenant")) == "tenant"


# PlaceTree: where nodes begin and end ----------------------------------------------------------------


def cached_chain(tree: PlaceTree, tokens: tuple[int, ...], blocks: list[int], namespace: Namespace = None) -> None:
    for index, block in enumerate(blocks):
        tree.cache(place(*tokens[: (index + 1) * B], namespace=namespace), block)


def views(tree: PlaceTree) -> set[tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, ...], ...]]]:
    return {(KEYS.tokens(end), tuple(own), tuple(tuple(at) for at in copies)) for end, _node, own, copies in tree.nodes()}


def test_an_insert_is_one_node_and_a_match_inside_it_splits_it() -> None:
    tree = PlaceTree(KEYS)
    cached_chain(tree, (1, 2, 3, 4, 5, 6), [0, 1, 2])
    leaf = tree.end_node(place(1, 2, 3, 4, 5, 6), "leaf")
    assert views(tree) == {((1, 2, 3, 4, 5, 6), (0, 1, 2), ((), (), ()))}
    assert tree.end_node(place(1, 2), "upper") == "upper"
    assert tree.end_node(place(1, 2, 3, 4, 5, 6), "another") == leaf, "one node ends at a place"
    assert views(tree) == {((1, 2), (0,), ((),)), ((1, 2, 3, 4, 5, 6), (1, 2), ((), ()))}
    assert tree.chain(place(1, 2, 3, 4)) == [0, 1]
    assert tree.longest_cached(place(1, 2, 3, 4, 9, 9)) == place(1, 2, 3, 4)


def test_a_branch_where_no_node_ends_gives_each_node_below_it_the_blocks_above() -> None:
    """The walk grows a node's lists in place down a chain; at a branch with no node each branch gets its own copy
    (shared lists would show one branch's blocks in the other's node)."""
    tree = PlaceTree(KEYS)
    cached_chain(tree, (1, 2, 3, 4), [0, 1])
    tree.cache(place(1, 2, 5, 6), 2)
    tree.cache(place(1, 2, 5, 6, 7, 8), 3)
    tree.end_node(place(1, 2, 3, 4), "left")
    tree.end_node(place(1, 2, 5, 6, 7, 8), "right")
    assert views(tree) == {((1, 2, 3, 4), (0, 1), ((), ())), ((1, 2, 5, 6, 7, 8), (0, 2, 3), ((), (), ()))}


def test_a_copy_shows_at_its_position_and_takes_over_its_place_when_the_first_goes() -> None:
    tree = PlaceTree(KEYS)
    cached_chain(tree, (1, 2, 3, 4), [0, 1])
    tree.end_node(place(1, 2, 3, 4), "node")
    tree.cache(place(1, 2, 3, 4), 5)  # the same prompt again: vLLM recomputes its last block
    assert tree.first(place(1, 2, 3, 4)) == 1
    assert views(tree) == {((1, 2, 3, 4), (0, 1), ((), (5,)))}
    tree.evict(1)
    assert tree.first(place(1, 2, 3, 4)) == 5
    assert views(tree) == {((1, 2, 3, 4), (0, 5), ((), ()))}
    assert tree.end_of["node"] == place(1, 2, 3, 4)


def test_evicting_a_leafs_last_block_cuts_it_and_the_leaf_keeps_its_node() -> None:
    tree = PlaceTree(KEYS)
    cached_chain(tree, (1, 2, 3, 4, 5, 6), [0, 1, 2])
    tree.end_node(place(1, 2, 3, 4, 5, 6), "leaf")
    tree.evict(2)
    assert views(tree) == {((1, 2, 3, 4), (0, 1), ((), ()))}
    assert tree.end_of["leaf"] == place(1, 2, 3, 4)
    tree.evict(1)
    tree.evict(0)
    assert views(tree) == set() and not tree.copies and not tree.node_at and "leaf" not in tree.end_of


def test_a_cut_leaf_that_held_one_block_below_a_node_is_gone() -> None:
    tree = PlaceTree(KEYS)
    cached_chain(tree, (1, 2, 3, 4), [0, 1])
    tree.end_node(place(1, 2), "upper")
    tree.end_node(place(1, 2, 3, 4), "leaf")
    tree.evict(1)
    assert "leaf" not in tree.end_of and tree.end_of["upper"] == place(1, 2)


def test_a_block_with_blocks_after_it_is_never_evicted_quietly() -> None:
    tree = PlaceTree(KEYS)
    cached_chain(tree, (1, 2, 3, 4), [0, 1])
    tree.end_node(place(1, 2, 3, 4), "leaf")
    with pytest.raises(TranslationError, match="blocks cached after it"):
        tree.evict(0)


def test_namespaces_are_separate_trees() -> None:
    tree = PlaceTree(KEYS)
    cached_chain(tree, (1, 2), [0], namespace="a")
    cached_chain(tree, (1, 2), [1], namespace="b")
    tree.end_node(place(1, 2, namespace="a"), "a")
    tree.end_node(place(1, 2, namespace="b"), "b")
    assert tree.first(place(1, 2, namespace="a")) == 0 and tree.first(place(1, 2, namespace="b")) == 1
    assert sorted((KEYS.namespace(end), KEYS.tokens(end), own) for end, _node, own, _copies in tree.nodes()) == [("a", (1, 2), [0]), ("b", (1, 2), [1])]


def test_place_keys_number_each_prefix_of_each_namespace_once() -> None:
    """``examples/places.py``: one key a (namespace, whole-block prefix); equal values of other types stay apart."""
    keys = PlaceKeys()
    along = keys.along("t", (1, 2, 3, 4, 5), B)
    assert len(along) == 2 and keys.along("t", (1, 2, 3, 4), B) == along, "the partial tail has no key"
    assert [keys.tokens(key) for key in along] == [(1, 2), (1, 2, 3, 4)] and keys.parent(along[1]) == along[0]
    assert keys.is_root(keys.parent(along[0])) and keys.length(along[1]) == 4
    assert len({keys.along(space, (1, 2), B)[0] for space in (None, 7, "7", (7,), ("7",))}) == 5
