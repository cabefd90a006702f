"""The executable specification: ``SpecCache``, rules R1-R13 in order.

The state is flat, so that each rule reads as a plain statement about it:

- ``_block_at``: a dict from every cached prefix (a namespace and a tuple of
  tokens a whole number of blocks long, R12) to the id of its last block (R2), and its two
  indexes: ``_extensions``, the cached prefixes one block longer than each
  cached prefix (the empty one included), and ``_cached_at``, where each id is
  cached (R2, R5); under ``dup=keep``, ``_copies``: the further blocks cached at a
  prefix, oldest first, beside the one ``_block_at`` names (R5);
- ``_node_at`` / ``_prefix_of``: where the nodes end, and their NodeIds (R4);
- ``_own_locks`` (the nodes that hold locks of their own), ``_last_use``,
  ``_hits`` and ``_created``: per node, keyed by
  the node's prefix (R6, R7, R8);
- under ``use=release``, ``_released``: when each cached block was last released (R7);
- the clock and the five counters (R7, R9);
- ``_rules``: the variant of each rule in force (``spec.api.Rules``; R7, R8);
- ``_events``: the events published since the last ``take_events`` (R13);
- what the snapshot needs, kept as calls change it (R11): ``_reshaped`` / ``_restamped`` (the prefixes
  whose node a call changed in shape, or in locks and order), ``_restamped_blocks`` (under ``use=release``,
  the blocks a call released or uncached), and the node views and digest terms refreshed from them.  The
  rules above only mark what they change; ``snapshot()`` is still built from scratch beside the kept one.

There is no tree of nodes: a node's blocks, its parent, whether it is a leaf
and whether it is pinned are all computed from these dicts when asked, by
looking up the prefixes the question is about (a parent is the longest
shorter prefix that is a node; a leaf is a node no cached prefix extends), so
a call costs what it touches, not a scan of the cache.  ``impl.RadixCache`` is
the fast radix tree, and the two are compared call by call.  The code is
written for the reader: no recursion, no counters kept in step with the
contents, no ``map``/``filter``, every length computed by the functions of
``spec/arith.py``.
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from types import MappingProxyType
from typing import SupportsIndex, cast

from spec import arith
from spec.api import (
    ID_LIMIT,
    NAMESPACE_SHAPE,
    BlockId,
    BlockRemoved,
    BlockStored,
    KVEvent,
    Namespace,
    Inserted,
    InvalidArgument,
    NodeId,
    NodeView,
    NotLocked,
    PrefixMatch,
    PrefixStats,
    Rules,
    Snapshot,
    UnknownNode,
    block_digest_term,
    checked_block_size,
    is_namespace,
    node_digest_term,
    node_shape_hash,
    snapshot_digest_of,
)

Tokens = tuple[int, ...]

Prefix = tuple[Namespace, Tokens]
"""A prefix of tokens within its namespace (R12): prefixes of two namespaces are different keys of every dict."""

Stamp = tuple[int, int]
"""A moment within the calls: (the call's clock, its order within the call) (R4, R7)."""



@dataclass(frozen=True)
class SpecNode:
    """A NodeId of the spec: the cache that issued it and a serial number it never reuses (R4).

    The issuer makes a node of one cache unknown to every other cache (R6).
    """

    issuer: object
    serial: int

    def __repr__(self) -> str:
        return f"node{self.serial}"


# R1 ---------------------------------------------------------------------------


def as_int(value: object, what: str) -> int:
    """R1: ``value`` as an int, or InvalidArgument.

    Any value ``operator.index`` accepts counts as an int (so bools and numpy
    integers do, floats and strings do not).
    """
    if not hasattr(type(value), "__index__"):
        raise InvalidArgument(f"{what} must be an int, got {type(value).__name__}")
    return operator.index(cast(SupportsIndex, value))


def as_id(value: object, what: str) -> int:
    """R1: ``value`` as an int in [0, 2**32), or InvalidArgument."""
    number = as_int(value, what)
    if number < 0 or number >= ID_LIMIT:
        raise InvalidArgument(f"{what} {number} is outside [0, 2**32)")
    return number


def as_ids(values: object, what: str) -> tuple[int, ...]:
    """R1: a sequence of ids as a tuple of ints, or InvalidArgument."""
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise InvalidArgument(f"{what} must be a sequence of ints, got {type(values).__name__}")
    if type(values) in (tuple, list) and all(type(value) is int for value in values):
        # The common case, read in C: plain ints, each in range when the least and the greatest are.
        ints = tuple(cast(Sequence[int], values))
        if not ints or (min(ints) >= 0 and max(ints) < ID_LIMIT):
            return ints
    checked: list[int] = []
    for value in values:
        checked.append(as_id(value, what[:-1] if what.endswith("s") else what))
    return tuple(checked)


def as_namespace(value: object) -> Namespace:
    """R12: ``value`` as a namespace (``spec.api.is_namespace``: None, an int, a str, or a flat tuple of those), or InvalidArgument."""
    if not is_namespace(value):
        raise InvalidArgument(f"{NAMESPACE_SHAPE}, got {type(value).__name__}")
    return cast(Namespace, value)


def as_count(value: object, what: str) -> int:
    """R1, R8: a non-negative int, or InvalidArgument."""
    number = as_int(value, what)
    if number < 0:
        raise InvalidArgument(f"{what} must be >= 0, got {number}")
    return number


class SpecCache:
    """The reference prefix cache; satisfies ``spec.api.PrefixCache``."""

    def __init__(self, block_size: int, rules: Rules = Rules()) -> None:
        """R1: a block size below 1 (or not an int) raises InvalidArgument; ``rules`` picks the variants of R7 and R8."""
        self._block_size = checked_block_size(block_size)
        self._issuer = object()
        self.root: NodeId = SpecNode(self._issuer, 0)
        self._block_at: dict[Prefix, BlockId] = {}
        self._extensions: dict[Prefix, set[Prefix]] = {}
        self._namespaces: set[Namespace] = set()
        self._cached_at: dict[BlockId, Prefix] = {}
        self._copies: dict[Prefix, list[BlockId]] = {}
        self._released: dict[BlockId, Stamp] = {}
        self._released_by_this_call = 0
        self._node_at: dict[Prefix, SpecNode] = {}
        self._prefix_of: dict[SpecNode, Prefix] = {}
        self._own_locks: dict[Prefix, int] = {}
        self._last_use: dict[Prefix, tuple[int, int]] = {}
        self._hits: dict[Prefix, int] = {}
        self._created: dict[Prefix, Stamp] = {}
        self._created_by_this_call: dict[Prefix, int] = {}
        self._split_by_this_call: Prefix | None = None
        self._rules = rules
        self._clock = 0
        self._next_serial = 1
        self._lookups = 0
        self._query_tokens = 0
        self._hit_tokens = 0
        self._inserted_blocks = 0
        self._evicted_blocks = 0
        self._events: list[KVEvent] = []
        self._reshaped: set[Prefix] = set()
        self._restamped: set[Prefix] = set()
        self._restamped_blocks: set[BlockId] = set()
        self._views: dict[Prefix, NodeView] = {}
        self._shapes: dict[Prefix, int] = {}
        self._entries: dict[Prefix, tuple[tuple[int, ...], int, NodeView]] = {}
        self._node_terms: dict[Prefix, int] = {}
        self._node_sum = 0
        self._block_terms: dict[BlockId, int] = {}
        self._block_sum = 0

    def block_size(self) -> int:
        """R1: B, the tokens of one block."""
        return self._block_size

    @property
    def rules(self) -> Rules:
        """The variants of R7 and R8 this cache follows."""
        return self._rules

    def next_call(self) -> None:
        """R7: a match or an insert is one use, at a logical clock that advances once per call."""
        self._clock += 1
        self._split_by_this_call = None
        self._created_by_this_call = {}
        self._released_by_this_call = 0

    # R2: block-granular contents ------------------------------------------------

    def whole_block_prefixes(self, prefix: Prefix) -> Iterator[Prefix]:
        """R2: the prefixes of ``prefix`` that end at a block boundary, shortest first (made as they are asked for)."""
        namespace, tokens = prefix
        for index in range(arith.full_blocks(len(tokens), self._block_size)):
            start, end = arith.block_span(index, self._block_size)
            yield namespace, tokens[:end]

    def one_block_shorter(self, prefix: Prefix) -> Prefix:
        """R2: the prefix without its last block (the empty prefix of its namespace after one block)."""
        namespace, tokens = prefix
        return namespace, tokens[: len(tokens) - self._block_size]

    def blocks_of(self, prefix: Prefix) -> list[BlockId]:
        """R2: the ids of a cached prefix's blocks, in token order."""
        blocks: list[BlockId] = []
        for shorter in self.whole_block_prefixes(prefix):
            blocks.append(self._block_at[shorter])
        return blocks

    def block_cached_at(self, tokens: Sequence[int], namespace: Namespace = None) -> BlockId | None:
        """R2: the id of the block that ends at ``tokens`` (a whole-block prefix) in ``namespace``, None where none is cached."""
        return self._block_at.get((namespace, tuple(tokens)))

    def cached_contents(self) -> Mapping[Prefix, BlockId]:
        """R2, R12, R13: every cached prefix (namespace, tokens) and the id of its last block: what the events fold to (a read-only view)."""
        return MappingProxyType(self._block_at)

    def cached_block_ids(self) -> list[BlockId]:
        """R2, R5: every id the cache holds, copies included (``dup=keep``), in no particular order."""
        ids = list(self._block_at.values())
        for copies in self._copies.values():
            ids.extend(copies)
        return ids

    def copies_at(self, prefix: Prefix) -> list[BlockId]:
        """R5, ``dup=keep``: the further blocks cached at ``prefix`` besides ``_block_at[prefix]``, oldest first."""
        return self._copies.get(prefix, [])

    def cache_block(self, prefix: Prefix, block: BlockId) -> None:
        """R2: cache ``block`` as the last block of ``prefix``, whose shorter whole-block prefixes are cached."""
        self._block_at[prefix] = block
        self._cached_at[block] = prefix
        self._extensions[prefix] = set()
        self._extensions.setdefault(self.one_block_shorter(prefix), set()).add(prefix)
        self._namespaces.add(prefix[0])
        # Not marked for R11: a block is cached only by an insert, whose new node (R4) ends below it and is marked.

    def drop_block(self, prefix: Prefix) -> None:
        """R2: forget the block of ``prefix``, which no cached prefix extends."""
        block = self._block_at.pop(prefix)
        del self._cached_at[block]
        del self._extensions[prefix]
        self._extensions[self.one_block_shorter(prefix)].discard(prefix)
        self._restamped_blocks.add(block)  # R11: not the prefix: the callers mark the node it ended, once

    def longest_cached_prefix(self, tokens: Prefix) -> Prefix:
        """R2: the longest whole-block prefix of ``tokens`` that is cached.

        Cached prefixes are closed under shortening, so the first uncached block
        ends the search.
        """
        longest: Prefix = (tokens[0], ())
        for prefix in self.whole_block_prefixes(tokens):
            if prefix not in self._block_at:
                break
            longest = prefix
        return longest

    # R3: what a match searches ----------------------------------------------------

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        """R3: the longest cached whole-block prefix of the usable prefix, within ``namespace`` (R12).

        Only the first u = usable_prefix(n, B) tokens are searched, so the last
        prompt token is always left to compute.  A match ending inside a node
        splits it (R4), is one use of its path (R7) and is counted (R9).  It publishes no event (R13).
        """
        prompt = as_ids(tokens, "tokens")
        space = as_namespace(namespace)
        usable = arith.usable_prefix(len(prompt), self._block_size)
        matched = self.longest_cached_prefix((space, prompt[:usable]))
        self.next_call()
        node = self.root
        if matched[1]:
            node = self.split_at(matched)
            if self._rules.use != "release":  # variant use=release: a lookup touches nothing (R7)
                self.use_path(matched, hit=False)
        self._lookups += 1
        self._query_tokens += len(prompt)
        self._hit_tokens += len(matched[1])
        return PrefixMatch(matched_tokens=len(matched[1]), blocks=self.blocks_of(matched), node=node)

    # R4: nodes ------------------------------------------------------------------------

    def split_at(self, prefix: Prefix) -> SpecNode:
        """R4: make a node end at a cached ``prefix``, splitting the node that covers it; returns that node.

        When a node already ends there it is returned unchanged.  Creating a
        node at a prefix is the whole of a split: the node below keeps
        its NodeId, its locks and its last use, and now holds only the blocks
        below the new node, because a node's blocks are those between its
        parent's end and its own.  NodeIds are never reused.  The new node is
        the k-th this call creates, and starts with the hits of the node it
        splits (R7, R8).  Its creation stamp (what R8's ``fifo`` and ``filo``
        key by):

        - variant ``split=fresh`` (strict, SGLang's RadixCache): ``(clock, k)``;
        - variant ``split=inherit`` (SGLang's UnifiedRadixCache): a split's
          upper node takes the stamp of the node it splits, as if it had been
          there since that node was made; a node no other extends (the end of
          an insert) is stamped ``(clock, k)``.
        """
        existing = self._node_at.get(prefix)
        if existing is not None:
            return existing
        lower = self.node_below(prefix)
        node = SpecNode(self._issuer, self._next_serial)
        self._next_serial += 1
        self._node_at[prefix] = node
        self._prefix_of[node] = prefix
        self._created_by_this_call[prefix] = len(self._created_by_this_call) + 1
        if self._rules.split == "inherit" and lower is not None:
            self._created[prefix] = self._created[lower]
        else:
            self._created[prefix] = (self._clock, self._created_by_this_call[prefix])
        self._last_use[prefix] = (self._clock, 0)
        self._hits[prefix] = 0 if lower is None else self._hits[lower]
        self._reshaped.add(prefix)
        if lower is not None:
            self._split_by_this_call = lower
            self._reshaped.add(lower)  # it now holds only the blocks below the new node
        return node

    def parent_end(self, prefix: Prefix) -> int:
        """R4: where the parent of the node at ``prefix`` ends: the longest shorter prefix that is a node, or 0 (the root)."""
        end = 0
        namespace, tokens = prefix
        for shorter in self.whole_block_prefixes((namespace, tokens[: len(tokens) - 1])):
            if shorter in self._node_at:
                end = len(shorter[1])
        return end

    def node_blocks(self, prefix: Prefix) -> list[BlockId]:
        """R4: the blocks the node at ``prefix`` holds itself, in token order."""
        start = arith.full_blocks(self.parent_end(prefix), self._block_size)
        return self.blocks_of(prefix)[start:]

    def node_below(self, prefix: Prefix) -> Prefix | None:
        """R4: the node a cached ``prefix`` lies inside, or None when no node extends it.

        Between a node's parent and the node no cached prefix branches, so
        the cached prefixes that extend ``prefix`` lead, one block at a time,
        to the first node below it.
        """
        at = prefix
        while True:
            longer = self._extensions[at]
            if not longer:
                return None
            (at,) = longer  # exactly one: no cached prefix branches inside a node
            if at in self._node_at:
                return at

    def is_leaf(self, prefix: Prefix) -> bool:
        """R4, R8: a node no cached prefix extends (so no node lies below it)."""
        return not self._extensions[prefix]

    # R5: insert ---------------------------------------------------------------------

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        """R5: cache the whole blocks of ``tokens``, one caller id per block.

        Exactly full_blocks(n, B) ids, so the partial tail is refused.  Where a
        position is cached already the cache keeps its id; a different id passed
        there is a duplicate, handed back in position order.  An id repeated in
        the call, or cached at another position, is refused: the caller would
        otherwise free or share a block the cache holds.  Every check comes
        before the first change (R10).  The returned node ends at the inserted
        prefix (R4 a); where the insert leaves the cached path inside a node,
        that node is split at the branch point (R4 c).  One use (R7); new blocks
        are counted (R9).  The prefix lies in ``namespace`` (R12), and one block id
        is cached at one position of one namespace.  The new blocks, if any, are
        published as one BlockStored (R13).
        """
        prompt = as_ids(tokens, "tokens")
        given = as_ids(blocks, "blocks")
        space = as_namespace(namespace)
        positions = list(self.whole_block_prefixes((space, prompt)))
        if len(given) != len(positions):
            raise InvalidArgument(
                f"insert of {len(prompt)} tokens takes {len(positions)} blocks "
                f"(one per whole block of {self._block_size}), got {len(given)}"
            )
        if len(set(given)) != len(given):
            raise InvalidArgument("a block id is repeated within the call")
        for prefix, block in zip(positions, given):
            if block in self._cached_at and self._cached_at[block] != prefix:
                raise InvalidArgument(f"block {block} is cached at another position")
        if self._rules.dup == "keep":
            self.check_reused_lead(positions, given)

        self.next_call()
        if not positions:
            return Inserted(node=self.root, duplicates=[])
        inserted = positions[-1]
        branch_point = self.longest_cached_prefix(inserted)
        if branch_point[1] and branch_point != inserted:
            self.split_at(branch_point)
        duplicates: list[BlockId] = []
        stored_at: list[int] = []
        held: list[BlockId] = []
        copied = False
        for index, (prefix, block) in enumerate(zip(positions, given)):
            cached = self._block_at.get(prefix)
            if cached is None:
                self.cache_block(prefix, block)
                stored_at.append(index)
            elif cached == block or block in self.copies_at(prefix):
                pass  # the caller passed back a block cached at this very position: it is no duplicate
            elif self._rules.dup == "keep":
                # Variant dup=keep (vLLM): the block is cached too, one more copy of this position's block.
                self._copies.setdefault(prefix, []).append(block)
                self._cached_at[block] = prefix
                copied = True
                stored_at.append(index)
            else:
                duplicates.append(block)
            held.append(self._block_at[prefix] if self._rules.dup == "refuse" else block)
        self._inserted_blocks += len(stored_at)
        self.publish_stored(space, prompt, held, stored_at)
        node = self.split_at(inserted)
        if copied:  # R11: a copy changes the view of the node it lies in, one of the nodes of the inserted path
            for prefix in self.whole_block_prefixes(inserted):
                if prefix in self._node_at:
                    self._reshaped.add(prefix)
        if self._rules.use == "release":
            self.release(list(zip(positions, held)))
        else:
            self.use_path(inserted, hit=True)
        return Inserted(node=node, duplicates=duplicates)

    def check_reused_lead(self, positions: list[Prefix], given: Sequence[BlockId]) -> None:
        """R5, variant ``dup=keep`` (vLLM): the ids passed back cached at their own positions lead the call;
        a cached id after one that is not is refused (InvalidArgument).

        A vLLM request holds the cached blocks its lookup found, then the new blocks it computed into: its
        block list is its computed blocks followed by blocks ``get_new_blocks`` took from the free queue
        (``single_type_kv_cache_manager.py:290-313``, ``:399-406``), and only blocks without a hash are
        cached anew (``cache_blocks``).  So no request reuses a cached block after one it computed: the
        caller would claim a state vLLM cannot be in.
        """
        computed: BlockId | None = None
        for prefix, block in zip(positions, given):
            reused = self._block_at.get(prefix) == block or block in self.copies_at(prefix)
            if not reused:
                computed = block if computed is None else computed
            elif computed is not None:
                raise InvalidArgument(
                    f"block {block} is cached at its position but follows block {computed}, which is not: "
                    "under dup=keep the blocks passed back cached lead the call (a request computes the rest anew)"
                )

    # R6: locks ----------------------------------------------------------------------

    def prefix_of_node(self, node: NodeId) -> Prefix:
        """R6: the prefix of a live node of this cache, or UnknownNode."""
        if not isinstance(node, SpecNode) or node not in self._prefix_of:
            raise UnknownNode(f"node {node!r} is not in the cache (never issued, or evicted)")
        return self._prefix_of[node]

    def lock(self, node: NodeId) -> None:
        """R6: one more lock on ``node``; the root takes none."""
        if node == self.root:
            return
        prefix = self.prefix_of_node(node)
        self._own_locks[prefix] = self._own_locks.get(prefix, 0) + 1
        self._restamped.add(prefix)

    def unlock(self, node: NodeId) -> None:
        """R6: one lock fewer on ``node``; NotLocked when it holds none of its own."""
        if node == self.root:
            return
        prefix = self.prefix_of_node(node)
        if prefix not in self._own_locks:
            raise NotLocked(f"node {node!r} holds no lock")
        self._own_locks[prefix] -= 1
        self._restamped.add(prefix)
        if self._own_locks[prefix] == 0:
            del self._own_locks[prefix]
        if self._rules.use == "release":
            # Variant use=release (vLLM): the lock was a request holding the prefix's blocks; those no other
            # lock pins now are released by this call.
            self.next_call()
            pinned = self.pinned_prefixes()
            unpinned: list[tuple[Prefix, BlockId]] = []
            for shorter in self.whole_block_prefixes(prefix):
                if shorter not in pinned:
                    unpinned.append((shorter, self._block_at[shorter]))
            self.release(unpinned)

    def pinned_prefixes(self) -> set[Prefix]:
        """R6: the cached prefixes a lock pins: a node is pinned while it or any node below it holds a lock,
        so a block is pinned when it lies on the path to a locked node."""
        pinned: set[Prefix] = set()
        for locked in self._own_locks:
            pinned.update(self.whole_block_prefixes(locked))
        return pinned

    # R7: use ------------------------------------------------------------------------

    def use_path(self, prefix: Prefix, *, hit: bool) -> None:
        """R7: the current call is a use of every node from the root down to ``prefix``; an insert is a hit of each.

        Variant ``use=path``: the uses of one call are one moment, ``(clock, 0)``.
        Variant ``use=path+split-tail``: the call walks the nodes that were
        there before it (its path, and the lower part of a node it split) at
        ``(clock, 0)``, and uses each node it created at its creation,
        ``(clock, 1)`` then ``(clock, 2)`` (R4: a split's upper node, then a
        new leaf).
        """
        split_tail = self._rules.use == "path+split-tail"
        for node_prefix in self.whole_block_prefixes(prefix):
            if node_prefix in self._node_at:
                rank = self._created_by_this_call.get(node_prefix, 0) if split_tail else 0
                self._last_use[node_prefix] = (self._clock, rank)
                self._restamped.add(node_prefix)
                if hit:
                    self._hits[node_prefix] += 1
        if split_tail and self._split_by_this_call is not None:
            self._last_use[self._split_by_this_call] = (self._clock, 0)
            self._restamped.add(self._split_by_this_call)

    def release(self, held: list[tuple[Prefix, BlockId]]) -> None:
        """R7, variant ``use=release`` (vLLM): the call lets go of ``held`` (a path's blocks in token order);
        each that no lock pins is released now, tail first, so a deeper block counts as released earlier.

        vLLM 0.32.0 frees a request's blocks in reverse (``single_type_kv_cache_manager.py:589``), and
        ``BlockPool.free_blocks`` appends each block whose reference count falls to zero to the tail of the
        free queue (``block_pool.py:791-803``): a block's place in the queue is when it was last released.
        A lookup touches nothing (``kv_cache_manager.py:264-321`` finds blocks, ``touch`` comes only with an
        allocation, ``single_type_kv_cache_manager.py:303-304``).  A lock pins the blocks a match returns,
        the first copy at each position, so a block that a lock pins is not released here.
        """
        pinned = self.pinned_prefixes()
        for prefix, block in reversed(held):
            if prefix in pinned and self._block_at[prefix] == block:
                continue
            self._released_by_this_call += 1
            self._released[block] = (self._clock, self._released_by_this_call)
            self._restamped_blocks.add(block)

    # R8: eviction ----------------------------------------------------------------------

    def eviction_key(self, prefix: Prefix) -> tuple[int, ...]:
        """R8: the order in which leaves go, smallest first, by the variant ``rules.evict``.

        - ``lru``: the oldest last use;
        - ``lfu``: the fewest hits, then the oldest last use;
        - ``fifo``: the oldest creation, then the oldest last use;
        - ``mru``: the newest last use;
        - ``filo``: the newest creation, then the oldest last use;
        - ``slru``: unprotected nodes first, a node being protected once it has
          ``rules.slru_threshold`` hits or more; then the oldest last use.
        """
        last_use = self._last_use[prefix]
        evict = self._rules.evict
        if evict == "lfu":
            return (self._hits[prefix], *last_use)
        if evict == "fifo":
            return (*self._created[prefix], *last_use)
        if evict == "mru":
            return (-last_use[0], -last_use[1])
        if evict == "filo":
            created = self._created[prefix]
            return (-created[0], -created[1], *last_use)
        if evict == "slru":
            protected = 1 if self._hits[prefix] >= self._rules.slru_threshold else 0
            return (protected, *last_use)
        return last_use

    def remove_leaf(self, prefix: Prefix) -> list[BlockId]:
        """R8: remove a leaf node whole, returning its blocks in token order."""
        freed = self.node_blocks(prefix)
        parent_end = self.parent_end(prefix)
        for shorter in reversed(list(self.whole_block_prefixes(prefix))):
            if len(shorter[1]) > parent_end:
                self.drop_block(shorter)
        node = self._node_at.pop(prefix)
        self._reshaped.add(prefix)
        del self._prefix_of[node]
        del self._last_use[prefix]
        del self._hits[prefix]
        del self._created[prefix]
        return freed

    def evict(self, n_blocks: int) -> list[BlockId]:
        """R8: free whole unpinned leaves, first to go first, until ``n_blocks`` are freed or none is left.

        The unpinned leaves wait in eviction order (a heap by ``eviction_key``);
        a parent that becomes a leaf joins them at its own key.  Nodes sharing
        a key were used (and created) by one call and lie on one path, so at
        most one of them is a leaf: there are no ties.  One order across all
        namespaces (R12).  Counted (R9); the freed blocks, if any, are published
        as one BlockRemoved in the order returned (R13).
        """
        wanted = as_count(n_blocks, "n_blocks")
        pinned = self.pinned_prefixes()
        if self._rules.unit == "block":
            freed = self.evict_blocks(wanted, pinned)
        else:
            freed = self.evict_leaves(wanted, pinned)
        self._evicted_blocks += len(freed)
        if freed:
            self._events.append(BlockRemoved(tuple(freed)))
        return freed

    def evict_leaves(self, wanted: int, pinned: set[Prefix]) -> list[BlockId]:
        """R8, variant ``unit=leaf`` (strict): whole unpinned leaves, first to go first, until ``wanted`` blocks are freed."""
        waiting: list[tuple[tuple[int, ...], Prefix]] = []
        for prefix in self._node_at:
            if self.is_leaf(prefix) and prefix not in pinned:
                waiting.append((self.eviction_key(prefix), prefix))
        heapq.heapify(waiting)
        freed: list[BlockId] = []
        while len(freed) < wanted and waiting:
            _key, leaf = heapq.heappop(waiting)
            parent = (leaf[0], leaf[1][: self.parent_end(leaf)])
            freed.extend(self.remove_leaf(leaf))
            if parent[1] and self.is_leaf(parent) and parent not in pinned:
                heapq.heappush(waiting, (self.eviction_key(parent), parent))
        return freed

    def evict_blocks(self, wanted: int, pinned: set[Prefix]) -> list[BlockId]:
        """R8, variant ``unit=block`` (vLLM): free exactly ``wanted`` unpinned blocks, or all of them, one at a time.

        ``get_new_blocks`` pops exactly the blocks it needs from the front of the free queue
        (``block_pool.py:678-689``, ``kv_cache_utils.py:335-377``), so a leaf is cut, not freed whole.
        Under ``use=release`` the blocks go in the order they were released (R7), a copy's and its
        position's other copies apart; that order only ever reaches a spare copy or the last block of a
        leaf, since a path is released tail first.  Under a node's last use (``use=path``, ...) the
        first leaf of R8's key is cut from its tail, one block a step; a parent that becomes a leaf
        competes at its own key.  A leaf cut to nothing is gone (its NodeId unknown, R6); a cut leaf
        keeps its NodeId and ends one block shorter.
        """
        freed: list[BlockId] = []
        if self._rules.use == "release":
            waiting: list[tuple[Stamp, BlockId]] = []
            for block, prefix in self._cached_at.items():
                if not (prefix in pinned and self._block_at[prefix] == block):
                    waiting.append((self._released[block], block))
            for _stamp, block in heapq.nsmallest(wanted, waiting):
                self.remove_block(block)
                freed.append(block)
            return freed
        leaves: list[tuple[tuple[int, ...], Prefix]] = []
        for prefix in self._node_at:
            if self.is_leaf(prefix) and prefix not in pinned:
                leaves.append((self.eviction_key(prefix), prefix))
        heapq.heapify(leaves)
        while len(freed) < wanted and leaves:
            key, leaf = heapq.heappop(leaves)
            parent = (leaf[0], leaf[1][: self.parent_end(leaf)])
            freed.append(self._block_at[leaf])
            shorter = self.cut_leaf(leaf)
            if shorter is not None:
                heapq.heappush(leaves, (key, shorter))
            elif parent[1] and self.is_leaf(parent) and parent not in pinned:
                heapq.heappush(leaves, (self.eviction_key(parent), parent))
        return freed

    def remove_block(self, block: BlockId) -> None:
        """R8, ``use=release``: uncache ``block``: a spare copy goes alone, the first copy leaves its place to
        the next (the oldest, which a match returns from then on), and a position's last copy is cut from its leaf."""
        prefix = self._cached_at[block]
        copies = self.copies_at(prefix)
        if not copies:
            assert self.is_leaf(prefix) and prefix in self._node_at, f"block {block}: the release order reached a block a cached prefix extends"
            self.cut_leaf(prefix)
            return
        del self._cached_at[block]
        del self._released[block]
        self._reshaped.add(prefix)
        self._restamped_blocks.add(block)
        if self._block_at[prefix] == block:
            self._block_at[prefix] = copies.pop(0)
        else:
            copies.remove(block)
        if not copies:
            del self._copies[prefix]

    def cut_leaf(self, leaf: Prefix) -> Prefix | None:
        """R8, ``unit=block``: uncache the last block of the unpinned leaf ending at ``leaf``; the prefix where
        the leaf now ends, or None when it held that block alone and is gone (R4: NodeIds are never reused)."""
        shorter = self.one_block_shorter(leaf)
        parent_end = self.parent_end(leaf)
        self._released.pop(self._block_at[leaf], None)
        self.drop_block(leaf)
        node = self._node_at.pop(leaf)
        self._reshaped.add(leaf)
        last_use, hits, created = self._last_use.pop(leaf), self._hits.pop(leaf), self._created.pop(leaf)
        if len(shorter[1]) == parent_end:
            del self._prefix_of[node]
            return None
        self._node_at[shorter] = node
        self._prefix_of[node] = shorter
        self._reshaped.add(shorter)
        self._last_use[shorter], self._hits[shorter], self._created[shorter] = last_use, hits, created
        return shorter

    # R9: counters --------------------------------------------------------------------

    def cached_blocks(self) -> int:
        """R9: one block per cached whole-block prefix, and its copies (``dup=keep``)."""
        return len(self._cached_at)

    def cached_tokens(self) -> int:
        """R9: the tokens the cached blocks cover."""
        return arith.cached_tokens(self.cached_blocks(), self._block_size)

    def evictable_blocks(self) -> int:
        """R9: the cached blocks no lock pins, exactly what ``evict(10**9)`` would free."""
        return self.cached_blocks() - len(self.pinned_prefixes())

    def stats(self) -> PrefixStats:
        """R9: the counters."""
        return PrefixStats(
            lookups=self._lookups,
            query_tokens=self._query_tokens,
            hit_tokens=self._hit_tokens,
            inserted_blocks=self._inserted_blocks,
            evicted_blocks=self._evicted_blocks,
        )

    def hit_rate(self) -> float:
        """R9: hit tokens over query tokens."""
        return arith.hit_rate(self._hit_tokens, self._query_tokens)

    # R10 holds because every public call above checks its arguments before its
    # first change.

    # R11: snapshot ---------------------------------------------------------------------

    def node_views(self) -> Iterator[NodeView]:
        """R4, R11: every node as (prefix, own blocks, own locks), walking the cached prefixes down from the root.

        A node's own blocks are those of the prefixes since the node above it.
        """
        walk: list[tuple[Prefix, tuple[BlockId, ...], tuple[tuple[BlockId, ...], ...]]] = []
        for namespace in self.namespaces():
            for prefix in self._extensions.get((namespace, ()), set()):
                walk.append((prefix, (), ()))
        while walk:
            prefix, since_node, copies_since = walk.pop()
            blocks = since_node + (self._block_at[prefix],)
            copies = copies_since + (tuple(self.copies_at(prefix)),)
            if prefix in self._node_at:
                shown = copies if any(copies) else ()  # R5 dup=keep: a node without copies shows none
                yield NodeView(prefix[1], blocks, self._own_locks.get(prefix, 0), prefix[0], shown)
                blocks, copies = (), ()
            for longer in self._extensions[prefix]:
                walk.append((longer, blocks, copies))

    def snapshot(self) -> Snapshot:
        """R11: every node, in eviction order (R8's key), then prefix length.

        Under ``use=release`` the order is the blocks' own: the nodes come by namespace and prefix, and
        ``released`` lists the unpinned blocks in the order ``evict`` frees them (R7, R8).  Built from
        scratch, the definition that ``kept_snapshot`` is held to.
        """
        entries: list[tuple[tuple[int, ...], int, NodeView]] = []
        for view in self.node_views():
            entries.append((self.order_key((view.namespace, view.prefix)), len(view.prefix), view))
        return self.snapshot_of(entries)

    def snapshot_of(self, entries: Iterable[tuple[tuple[int, ...], int, NodeView]]) -> Snapshot:
        """R11: the snapshot of every node's (order key, prefix length, view), put in the order ``snapshot`` states."""
        if self._rules.use == "release":
            ordered = sorted((view for _key, _length, view in entries), key=lambda view: (repr(view.namespace), view.prefix))
            pinned = self.pinned_prefixes()
            waiting: list[tuple[Stamp, BlockId]] = []
            for block, prefix in self._cached_at.items():
                if not (prefix in pinned and self._block_at[prefix] == block):
                    waiting.append((self._released[block], block))
            waiting.sort()
            return Snapshot(self._block_size, tuple(ordered), self.stats(), tuple(block for _stamp, block in waiting))
        order = sorted(entries, key=itemgetter(0, 1))
        nodes: list[NodeView] = []
        for _key, _length, view in order:
            nodes.append(view)
        return Snapshot(self._block_size, tuple(nodes), self.stats())

    def order_key(self, prefix: Prefix) -> tuple[int, ...]:
        """R11: what puts the node at ``prefix`` in its place in the snapshot: R8's key, none under ``use=release``."""
        return () if self._rules.use == "release" else self.eviction_key(prefix)

    # Kept for R11: the same snapshot, and its digest, kept up to date as calls change the nodes, so that a lockstep
    # reads them after every call at the cost of what the call changed.  Bookkeeping, not a rule: the rules above
    # only mark what they change (``_reshaped``, ``_restamped``, ``_restamped_blocks``), and what is kept is held to
    # ``snapshot()`` and ``digest_from_scratch()`` (stateful_tests/test_snapshot_digest.py).

    def own_view(self, prefix: Prefix) -> NodeView:
        """R4, R11: the view of the node at ``prefix`` alone, its blocks read up from its end to the node above it."""
        blocks: list[BlockId] = []
        copies: list[tuple[BlockId, ...]] = []
        at = prefix
        while True:
            blocks.append(self._block_at[at])
            copies.append(tuple(self.copies_at(at)))
            at = self.one_block_shorter(at)
            if not at[1] or at in self._node_at:
                break
        blocks.reverse()
        copies.reverse()
        shown = tuple(copies) if any(copies) else ()  # R5 dup=keep: a node without copies shows none
        return NodeView(prefix[1], tuple(blocks), self._own_locks.get(prefix, 0), prefix[0], shown)

    def marked_prefixes(self) -> set[Prefix]:
        """R11: the prefixes the calls since the last refresh marked, the ones ``refresh_kept`` will look at again:
        what a call touched, whatever the cache's size."""
        return self._reshaped | self._restamped

    def refresh_kept(self) -> None:
        """R11: bring the kept views and digest terms up to date with the prefixes the calls since the last refresh
        marked: a node marked in its shape gets its view again, one marked in its locks or order its term."""
        reshaped, restamped, blocks = self._reshaped, self._restamped, self._restamped_blocks
        self._reshaped, self._restamped, self._restamped_blocks = set(), set(), set()
        renewed: set[Prefix] = set()
        for prefix in reshaped | restamped:
            if prefix in self._views and prefix not in self._node_at:
                self.forget_view(prefix)  # the node is gone, or now ends elsewhere
            if prefix in self._block_at:
                node = prefix if prefix in self._node_at else self.node_below(prefix)
                if node is not None:
                    if prefix in reshaped or node not in self._views:
                        renewed.add(node)
                    restamped.add(node)
        for node in renewed:
            self.forget_view(node)
            view = self.own_view(node)
            self._views[node] = view
            self._shapes[node] = node_shape_hash(view.namespace, view.prefix, view.blocks, view.copies)
        for node in restamped:
            if node not in self._node_at:
                continue
            view = self._views[node]
            locks = self._own_locks.get(node, 0)
            if view.locks != locks:
                view = self._views[node] = NodeView(view.prefix, view.blocks, locks, view.namespace, view.copies)
            self._node_sum -= self._node_terms.get(node, 0)
            key = self.order_key(node)
            self._entries[node] = (key, len(node[1]), view)
            self._node_terms[node] = node_digest_term(self._shapes[node], locks, key)
            self._node_sum += self._node_terms[node]
        if self._rules.use != "release":
            return
        for block in blocks:
            self._block_sum -= self._block_terms.pop(block, 0)
            if block in self._cached_at:
                self._block_terms[block] = block_digest_term(block, self._released[block])
                self._block_sum += self._block_terms[block]

    def forget_view(self, prefix: Prefix) -> None:
        """R11: drop the kept view and digest term of ``prefix``, if any."""
        self._views.pop(prefix, None)
        self._shapes.pop(prefix, None)
        self._entries.pop(prefix, None)
        self._node_sum -= self._node_terms.pop(prefix, 0)

    def kept_snapshot(self) -> Snapshot:
        """R11: ``snapshot()``, from the views kept as calls change the nodes: it costs the nodes, not their prefixes."""
        self.refresh_kept()
        return self.snapshot_of(self._entries.values())

    def snapshot_digest(self) -> int:
        """R11: ``spec.api.snapshot_digest_of`` the state, from the terms kept as calls change it: it costs what the
        calls since the last digest changed, not the cache's size."""
        self.refresh_kept()
        return snapshot_digest_of(self._block_size, self.stats(), self._node_sum, self._block_sum)

    def digest_from_scratch(self) -> int:
        """R11: the digest of ``snapshot_digest``, from every node's view and every block's release made anew."""
        node_terms = 0
        for view in self.node_views():
            shape = node_shape_hash(view.namespace, view.prefix, view.blocks, view.copies)
            node_terms += node_digest_term(shape, view.locks, self.order_key((view.namespace, view.prefix)))
        block_terms = 0
        if self._rules.use == "release":
            for block in self._cached_at:
                block_terms += block_digest_term(block, self._released[block])
        return snapshot_digest_of(self._block_size, self.stats(), node_terms, block_terms)

    # R12: namespaces ----------------------------------------------------------------------
    # Every rule above reads "prefix" as (namespace, tokens): the state's keys hold the namespace, so a prefix
    # of one namespace never meets another's.  What the namespaces share is shared by construction: one
    # ``_cached_at`` (R5's one owner), one clock and one ``eviction_key`` over every leaf (R7, R8), one set
    # of counters (R9).  ``as_namespace`` checks the argument's shape (``spec.api.is_namespace``).

    def namespaces(self) -> set[Namespace]:
        """R12: every namespace a prefix was ever cached in (the roots of the walks of R4 and R11)."""
        return self._namespaces

    # R13: events ------------------------------------------------------------------------

    def publish_stored(self, namespace: Namespace, prompt: Tokens, held: list[BlockId], stored_at: list[int]) -> None:
        """R13: the blocks an insert cached, at the block positions ``stored_at`` of ``prompt``, as one
        BlockStored per run of consecutive positions, each under the block the insert holds just before the run
        (``held``: the cached block, or under ``dup=keep`` the caller's, cached there too; None at the first block).

        Under ``dup=refuse`` the positions stored are the last ones of the insert, one run.
        """
        runs: list[list[int]] = []
        for index in stored_at:
            if runs and runs[-1][-1] == index - 1:
                runs[-1].append(index)
            else:
                runs.append([index])
        for run in runs:
            start, _ = arith.block_span(run[0], self._block_size)
            _, end = arith.block_span(run[-1], self._block_size)
            parent = held[run[0] - 1] if run[0] else None
            self._events.append(BlockStored(parent, prompt[start:end], tuple(held[index] for index in run), namespace))

    def take_events(self) -> list[KVEvent]:
        """R13: the events published since the last take, oldest first; folded over an empty mirror from the
        cache's start they give exactly ``cached_contents()``."""
        taken, self._events = self._events, []
        return taken
