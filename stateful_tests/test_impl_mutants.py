"""Tests that kill the mutants of ``impl/`` which the agreement tests let survive.

``make mutation`` runs mutmut over ``impl/`` with a fast selection of tests
(``docs/mutation.md``).  Lockstep agreement with the spec catches every
mutant that changes a result, an error or a snapshot; what it cannot see is
the code it never reaches (the sparse ids of ``HeldIds``, tokens given as
bytes), what no snapshot shows (error messages, node reprs, the clock's
values, the dense map's growth) and ``check_invariants`` itself, the oracle
the agreement tests lean on (``test_impl_invariants.py``).  Each test below names in its docstring the
mutations it kills; the survivors that no test can kill are explained in
``docs/mutation.md``.

Every test here is white-box where it must be (it reads ``HeldIds`` and the
LRU queue directly) and runs in milliseconds.
"""

from __future__ import annotations

import re
from array import array

import pytest

from impl import RadixCache
from impl.blocks import block_span, usable_prefix
from impl.ids import DENSE_MINIMUM, DENSE_SLACK, HeldIds
from impl.radix import Node
from spec.api import InvalidArgument, NodeId, NotLocked, UnknownNode

TOP_ID = 2**32 - 1
"""The largest valid id (R1): always above the dense map, so always a sparse id."""


def node_of(handle: NodeId) -> Node:
    """The tree node behind an impl NodeId (impl's NodeIds are its nodes)."""
    assert isinstance(handle, Node)
    return handle


def exactly(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern for exactly ``message``."""
    return f"^{re.escape(message)}$"


# ------------------------------------------------------------------ impl.blocks


def test_block_arithmetic_at_its_edges() -> None:
    """Kills, in ``usable_prefix``, ``n_tokens == 0`` -> ``== 1`` and ``return 0`` -> ``return 1``
    (the cache cannot show them: an empty prompt searches nothing either way), and, in
    ``block_span``, ``index * block_size`` -> ``index / block_size`` (the tree reads only a
    span's end)."""
    for block_size in (1, 2, 3):
        assert usable_prefix(0, block_size) == 0
        assert usable_prefix(1, block_size) == 0
        assert usable_prefix(block_size + 1, block_size) == block_size
    assert block_span(3, 2) == (6, 8)
    assert block_span(0, 5) == (0, 5)


# ------------------------------------------------------------- argument checks


def test_tokens_and_blocks_may_be_any_sequence_of_ints() -> None:
    """Kills, in ``_id_array``, every mutation of the bytes branch (``array(None, ...)``,
    ``array(TOKEN_TYPECODE, None)``, ``array(list(values))``, an empty array, ``list(None)``)
    and of the generic ``Sequence`` branch (``and isinstance(values, str)`` and the same
    argument mutations): bytes, bytearrays, ranges and arrays are sequences of ints (R1)."""
    cache = RadixCache(2)
    assert cache.insert(range(1, 6), array("I", [10, 11])).duplicates == []
    for tokens in (bytes([1, 2, 3, 4, 5]), bytearray([1, 2, 3, 4, 5]), range(1, 6), array("I", [1, 2, 3, 4, 5])):
        found = cache.match_prefix(tokens)
        assert (found.matched_tokens, found.blocks) == (4, [10, 11]), tokens
    assert cache.insert(bytes([1, 2, 3, 4]), range(10, 12)).duplicates == []
    assert cache.insert([1, 2, 3, 4], bytes([10, 12])).duplicates == [12]


@pytest.mark.parametrize("tokens", [iter([1, 2, 3]), {1, 2, 3}, {1: 0, 2: 0, 3: 0}], ids=["iterator", "set", "dict"])
def test_iterables_that_are_not_sequences_are_refused(tokens: object) -> None:
    """Kills ``isinstance(values, Sequence) and not isinstance(values, str)`` -> ``or``, which
    accepts any iterable, and ``type(values)`` -> ``type(None)`` in the message."""
    cache = RadixCache(1)
    with pytest.raises(InvalidArgument, match=exactly(f"tokens must be a sequence of integers, not {type(tokens).__name__}")):
        cache.match_prefix(tokens)  # type: ignore[arg-type]  # deliberately not a sequence


def test_error_messages_name_the_argument_and_the_fault() -> None:
    """Kills every mutation of a constant error message or of the argument name passed to
    ``_id_array`` (``None``, ``"XXtokensXX"``, ``"TOKENS"``, ``"blocks"`` likewise), and the
    ``type(None)``/``reprlib.repr(None)`` mutations, in ``__init__``, ``match_prefix``,
    ``insert``, ``lock``, ``unlock`` and ``evict``: an engine's log shows these messages."""
    with pytest.raises(InvalidArgument, match=exactly("block_size must be an int, got str")):
        RadixCache("2")  # type: ignore[arg-type]  # deliberately bad
    with pytest.raises(InvalidArgument, match=exactly("block_size must be >= 1, got 0")):
        RadixCache(0)
    cache = RadixCache(2)
    with pytest.raises(InvalidArgument, match=r"^tokens must hold integers in \[0, 2\*\*32\): "):
        cache.match_prefix([1, -1])
    with pytest.raises(InvalidArgument, match=r"^tokens must hold integers in \[0, 2\*\*32\): "):
        cache.insert([1, 2**32], [5])
    with pytest.raises(InvalidArgument, match=r"^blocks must hold integers in \[0, 2\*\*32\): "):
        cache.insert([1, 2], [2**32])
    with pytest.raises(InvalidArgument, match=exactly("tokens must be a sequence of integers, not str")):
        cache.insert("12", [5])  # type: ignore[arg-type]  # deliberately bad
    with pytest.raises(InvalidArgument, match=exactly("blocks must be a sequence of integers, not str")):
        cache.insert([1, 2], "5")  # type: ignore[arg-type]  # deliberately bad
    with pytest.raises(InvalidArgument, match=exactly("3 tokens need exactly 1 blocks, got 2")):
        cache.insert([1, 2, 3], [5, 6])
    with pytest.raises(
        InvalidArgument, match=exactly("blocks repeats an id, or holds an id already cached at another position")
    ):
        cache.insert([1, 2, 3, 4], [5, 5])
    with pytest.raises(UnknownNode, match=exactly("'n1' is not a live node of this cache")):
        cache.lock("n1")
    with pytest.raises(UnknownNode, match=exactly("'n1' is not a live node of this cache")):
        cache.unlock("n1")
    node = cache.insert([1, 2], [5]).node
    with pytest.raises(NotLocked, match=exactly("<Node live end=2 blocks=1 locks=0> holds no lock of its own")):
        cache.unlock(node)
    with pytest.raises(InvalidArgument, match=exactly("n_blocks must be an integer, not float")):
        cache.evict(1.5)  # type: ignore[arg-type]  # deliberately bad
    with pytest.raises(InvalidArgument, match=exactly("n_blocks must be at least 0, got -1")):
        cache.evict(-1)


def test_node_reprs_say_what_the_node_is() -> None:
    """Kills the twelve mutations of ``Node.__repr__`` (the root test negated, each string
    constant, the live/evicted test negated or forced) and, in ``evict_lru_leaf``,
    ``leaf.owner = None`` -> ``leaf.owner = ""`` (which leaves an evicted node looking live).
    The repr is what NotLocked's message shows."""
    cache = RadixCache(2)
    assert repr(cache.root) == "<Node root>"
    node = cache.insert([1, 2, 3, 4], [10, 11]).node
    assert repr(node) == "<Node live end=4 blocks=2 locks=0>"
    cache.lock(node)
    assert repr(node) == "<Node live end=4 blocks=2 locks=1>"
    cache.unlock(node)
    assert cache.evict(1) == [10, 11]
    assert repr(node) == "<Node evicted end=4 blocks=2 locks=0>"


def test_the_clock_advances_once_per_successful_match_or_insert() -> None:
    """Kills ``self._clock = 0`` -> ``1`` in ``__init__`` and ``self._clock += 1`` -> ``+= 2`` in
    ``match_prefix`` and in ``insert``: the last uses are the logical times 1, 2, 3, ... of
    the calls (impl/cache.py's module docstring), which no snapshot shows (it keeps only
    their order)."""
    cache = RadixCache(1)
    first = node_of(cache.insert([1, 2], [10, 11]).node)
    assert first.last_use == 1
    assert node_of(cache.match_prefix([1, 2, 3]).node).last_use == 2
    with pytest.raises(InvalidArgument):
        cache.insert([1, 2], [10])  # a refused call is no use
    assert node_of(cache.insert([1, 5], [10, 12]).node).last_use == 3
    assert node_of(cache.match_prefix([7]).node) is cache.root  # a match of nothing still ticks
    assert node_of(cache.insert([9], [20]).node).last_use == 5


# ------------------------------------------------------------------- HeldIds


def test_held_ids_membership() -> None:
    """Kills the four mutations of ``HeldIds.__contains__`` (``<`` -> ``<=``, ``== 1`` -> ``!= 1``
    and ``== 2``, ``in`` -> ``not in``), which no call of the cache makes."""
    held = HeldIds()
    assert held.claim([1, 3])
    assert 1 in held and 3 in held
    assert 2 not in held
    assert len(held.dense) not in held
    assert held.claim([TOP_ID])
    assert TOP_ID in held
    assert TOP_ID - 1 not in held


def test_held_ids_refused_claim_in_the_dense_map_changes_nothing() -> None:
    """Kills, in ``claim``: ``break`` -> ``return`` (the ids before the held one stay claimed),
    the undo writing 1 instead of 0, ``dense[block] = 1`` -> ``= 2``, and ``refused = True`` ->
    ``None``/``False`` (a refusal inside the dense map would then grow the map)."""
    held = HeldIds()
    assert held.claim([1, 2])
    size = len(held.dense)
    assert not held.claim([3, 4, 1])
    assert held.as_set() == {1, 2} and len(held) == 2
    assert len(held.dense) == size, "a refused claim grew the dense map"
    assert not held.claim([5, 5])
    assert held.as_set() == {1, 2}
    assert held.claim([3, 4])
    assert 3 in held and 4 in held and len(held) == 4


def test_held_ids_refused_claim_after_growing_the_map_changes_nothing() -> None:
    """Kills every mutation of ``claim_covered``: ``break`` -> ``return``, the undo's slice
    (``- 1`` -> ``+ 1`` and ``- 2``, ``len - hint`` -> ``len + hint``, ``length_hint(None)``), the
    undo writing ``None`` or 1, ``return False`` -> ``True``, ``dense[block] = 1`` -> ``= 2`` and
    ``count += len(ids)`` -> ``count = len(ids)``."""
    held = HeldIds()
    assert held.claim([1])
    size = len(held.dense)
    above = [size + 10, size + 11, size + 12]
    assert not held.claim([*above, 1, size + 13])
    assert held.as_set() == {1} and len(held) == 1
    size = len(held.dense)
    assert held.claim([size + 5, size + 6])
    assert size + 5 in held and size + 6 in held
    assert len(held) == 3


def test_held_ids_dense_map_growth_and_sparse_ids() -> None:
    """Kills the mutations of ``_cover`` (``+ DENSE_SLACK`` -> ``-``, ``8 *`` -> ``8 /`` and ``9 *``,
    ``count + adding`` -> ``-``, ``top >= limit`` -> ``>``, each term of the new size's ``max``
    dropped or changed, ``new_size - size`` -> ``+``, the move of sparse ids ``<`` -> ``<=`` and
    writing ``None`` or 2, ``return True`` -> ``False``) and of ``release``'s sparse branch
    (``size = None``, ``<`` -> ``<=``, writing ``None`` or 1, ``discard(None)``): the map doubles,
    stays within 8 bytes an id held plus DENSE_SLACK, and ids past that bound live in
    ``sparse`` until the map grows over them."""
    held = HeldIds()
    assert held.claim([1])
    assert len(held.dense) == DENSE_MINIMUM and not held.sparse
    assert held.claim([DENSE_MINIMUM + 5])
    assert len(held.dense) == 2 * DENSE_MINIMUM, "the map doubles"
    top = 4 * DENSE_MINIMUM + 7
    assert held.claim([top])
    assert len(held.dense) == top + 1, "the map reaches the id it must hold"
    assert not held.sparse

    # The bound: 8 bytes an id held (those of the claim included) plus DENSE_SLACK.
    slack = DENSE_SLACK
    assert DENSE_MINIMUM < slack // 2
    held = HeldIds()
    half = slack // 2 + 64
    assert held.claim([half])  # 1 id: the bound is slack + 8
    assert len(held.dense) == half + 1
    edge = slack + 16  # exactly the bound with 2 ids held
    assert held.claim([edge])
    assert held.sparse == {edge}
    far = slack + 32  # past the bound (slack + 24) with 3 ids held
    assert held.claim([far])
    assert held.sparse == {edge, far}
    # 4 ids: the bound is slack + 32, below twice the map, so the map grows to it exactly.
    assert held.claim([slack + 20])
    assert len(held.dense) == slack + 32
    assert held.sparse == {far}, "sparse ids below the new size move into the map, the others stay"
    assert held.as_set() == {half, edge, far, slack + 20}
    assert edge in held and far in held and len(held) == 4

    held.release([half, far, edge])
    assert held.as_set() == {slack + 20}
    assert len(held) == 1 and not held.sparse


def test_held_ids_claims_with_sparse_ids() -> None:
    """Kills the mutations of ``_claim_mixed``: ``or`` -> ``and``, the dense test forced to the
    sparse set, ``== 1`` -> ``!= 1`` and ``== 2``, ``return False`` -> ``True``,
    ``seen.add(None)``, ``dense[block] = 1`` -> ``None``/``2``, ``sparse.add(None)`` and
    ``count += len(ids)`` -> ``=``/``-=``."""
    held = HeldIds()
    assert held.claim([1])
    assert not held.claim([TOP_ID, TOP_ID]), "an id repeated in the call"
    assert not held.claim([TOP_ID, 1]), "an id held in the dense map"
    assert held.as_set() == {1} and len(held) == 1
    assert held.claim([TOP_ID, 2])
    assert held.as_set() == {1, 2, TOP_ID}
    assert 2 in held and TOP_ID in held and len(held) == 3
    assert not held.claim([TOP_ID - 1, TOP_ID]), "an id held in the sparse set"
    assert held.as_set() == {1, 2, TOP_ID}
