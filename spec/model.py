"""The executable specification: ``SpecCache``, rules R1-R13 in order.

The state is flat, so that each rule reads as a plain statement about it:

- ``_block_at``: a dict from every cached prefix (a namespace and a tuple of
  tokens a whole number of blocks long, R12) to the id of its last block (R2), and its two
  indexes: ``_extensions``, the cached prefixes one block longer than each
  cached prefix (the empty one included), and ``_cached_at``, where each id is
  cached (R2, R5);
- ``_node_at`` / ``_prefix_of``: where the nodes end, and their NodeIds (R4);
- ``_own_locks`` (the nodes that hold locks of their own), ``_last_use``,
  ``_hits`` and ``_created``: per node, keyed by
  the node's prefix (R6, R7, R8);
- the clock and the five counters (R7, R9);
- ``_rules``: the variant of each rule in force (``spec.api.Rules``; R7, R8);
- ``_events``: the events published since the last ``take_events`` (R13).

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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import SupportsIndex, cast

from spec import arith
from spec.api import (
    ID_LIMIT,
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
    checked: list[int] = []
    for value in values:
        checked.append(as_id(value, what[:-1] if what.endswith("s") else what))
    return tuple(checked)


def as_namespace(value: object) -> Namespace:
    """R12: ``value`` as a namespace (None, an int, a str, or a flat tuple of those), or InvalidArgument."""
    if isinstance(value, tuple):
        for part in value:
            if part is not None and not is_namespace_word(part):
                raise InvalidArgument(f"a namespace tuple holds None, ints and strs, got {type(part).__name__}")
        return value
    if value is None or is_namespace_word(value):
        return cast(Namespace, value)
    raise InvalidArgument(f"a namespace is None, an int, a str or a tuple of those, got {type(value).__name__}")


def is_namespace_word(value: object) -> bool:
    """R12: an int that is not a bool, or a str."""
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


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
        size = as_count(block_size, "block_size")
        if size < 1:
            raise InvalidArgument(f"block_size must be >= 1, got {size}")
        self._block_size = size
        self._issuer = object()
        self.root: NodeId = SpecNode(self._issuer, 0)
        self._block_at: dict[Prefix, BlockId] = {}
        self._extensions: dict[Prefix, set[Prefix]] = {}
        self._namespaces: set[Namespace] = set()
        self._cached_at: dict[BlockId, Prefix] = {}
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
        """R2, R5: every id the cache holds, in no particular order."""
        return list(self._block_at.values())

    def cache_block(self, prefix: Prefix, block: BlockId) -> None:
        """R2: cache ``block`` as the last block of ``prefix``, whose shorter whole-block prefixes are cached."""
        self._block_at[prefix] = block
        self._cached_at[block] = prefix
        self._extensions[prefix] = set()
        self._extensions.setdefault(self.one_block_shorter(prefix), set()).add(prefix)
        self._namespaces.add(prefix[0])

    def drop_block(self, prefix: Prefix) -> None:
        """R2: forget the block of ``prefix``, which no cached prefix extends."""
        block = self._block_at.pop(prefix)
        del self._cached_at[block]
        del self._extensions[prefix]
        self._extensions[self.one_block_shorter(prefix)].discard(prefix)

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
        if lower is not None:
            self._split_by_this_call = lower
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

        self.next_call()
        if not positions:
            return Inserted(node=self.root, duplicates=[])
        inserted = positions[-1]
        branch_point = self.longest_cached_prefix(inserted)
        if branch_point[1] and branch_point != inserted:
            self.split_at(branch_point)
        duplicates: list[BlockId] = []
        stored: list[BlockId] = []
        for prefix, block in zip(positions, given):
            cached = self._block_at.get(prefix)
            if cached is None:
                self.cache_block(prefix, block)
                self._inserted_blocks += 1
                stored.append(block)
            elif cached != block:
                duplicates.append(block)
        if stored:
            self.publish_stored(branch_point, prompt, stored)
        node = self.split_at(inserted)
        self.use_path(inserted, hit=True)
        return Inserted(node=node, duplicates=duplicates)

    def publish_stored(self, below: Prefix, prompt: Tokens, stored: list[BlockId]) -> None:
        """R13: the blocks an insert cached (the whole-block positions after ``below``, the longest prefix
        cached before it) as one BlockStored, under the block ``below`` ends with (None: the namespace's first)."""
        namespace, tokens = below
        parent = self._block_at[below] if tokens else None
        end = len(tokens) + arith.cached_tokens(len(stored), self._block_size)
        self._events.append(BlockStored(parent, prompt[len(tokens) : end], tuple(stored), namespace))

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

    def unlock(self, node: NodeId) -> None:
        """R6: one lock fewer on ``node``; NotLocked when it holds none of its own."""
        if node == self.root:
            return
        prefix = self.prefix_of_node(node)
        if prefix not in self._own_locks:
            raise NotLocked(f"node {node!r} holds no lock")
        self._own_locks[prefix] -= 1
        if self._own_locks[prefix] == 0:
            del self._own_locks[prefix]

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
                if hit:
                    self._hits[node_prefix] += 1
        if split_tail and self._split_by_this_call is not None:
            self._last_use[self._split_by_this_call] = (self._clock, 0)

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
        self._evicted_blocks += len(freed)
        if freed:
            self._events.append(BlockRemoved(tuple(freed)))
        return freed

    # R9: counters --------------------------------------------------------------------

    def cached_blocks(self) -> int:
        """R9: one block per cached whole-block prefix."""
        return len(self._block_at)

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
        walk: list[tuple[Prefix, tuple[BlockId, ...]]] = []
        for namespace in self._namespaces:
            for prefix in self._extensions.get((namespace, ()), set()):
                walk.append((prefix, ()))
        while walk:
            prefix, since_node = walk.pop()
            blocks = since_node + (self._block_at[prefix],)
            if prefix in self._node_at:
                yield NodeView(prefix[1], blocks, self._own_locks.get(prefix, 0), prefix[0])
                blocks = ()
            for longer in self._extensions[prefix]:
                walk.append((longer, blocks))

    def snapshot(self) -> Snapshot:
        """R11: every node, in eviction order (R8's key), then prefix length."""
        order: list[tuple[tuple[int, ...], int, NodeView]] = []
        for view in self.node_views():
            order.append((self.eviction_key((view.namespace, view.prefix)), len(view.prefix), view))
        order.sort(key=lambda entry: (entry[0], entry[1]))
        nodes: list[NodeView] = []
        for _key, _length, view in order:
            nodes.append(view)
        return Snapshot(self._block_size, tuple(nodes), self.stats())

    # R13: events ------------------------------------------------------------------------

    def take_events(self) -> list[KVEvent]:
        """R13: the events published since the last take, oldest first; folded over an empty mirror from the
        cache's start they give exactly ``cached_contents()``."""
        taken, self._events = self._events, []
        return taken
