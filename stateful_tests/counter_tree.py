"""An independent prefix cache stamped the way SGLang 0.5.23's unified tree core stamps its nodes.

Written from ``unified_cache/unified_tree_core.py`` and ``evict_policy.py``, not from ``spec.model``: a
tree of node objects, one global counter that every stamp takes the next value of
(``components/base.py:161`` ``get_and_increase_time_counter``), and SGLang's priority tuples with ties
falling to the older last access (``UnifiedTreeNode.__lt__``, :175).  What it stamps:

- a node made takes a last access, then a creation (:126-127);
- an insert touches every node it walks into, top down (``_touch_node``, :1096, from
  ``_insert_walk_step`` :1291), splits where it leaves a node, counts a hit of each node its walk ends
  at (:1373) and of the new leaf (:1438);
- a split makes the upper node, copies the hits (:1474), takes the creation of the node it splits
  (:1476) under ``inherit`` (keeps its own under ``fresh``, as RadixCache's ``radix_cache.py:680``
  does), and re-stamps the lower part last (:1524);
- a match splits where it ends inside a node and stamps the node it returns and every node above it
  with one counter value, a hair less at each step up (``_match_post_processor``, :1031-1034).

So it orders a call's nodes on one root path unlike the spec (the upper node of a split before the
lower part): a difference no call can observe.  Every pair off one root path it must order as the
spec's presets say; the lockstep checks that it does.
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Sequence
from typing import Literal

from spec.api import ID_LIMIT, BlockId, Inserted, InvalidArgument, NodeId, NodeView, NotLocked, PrefixMatch, PrefixStats, Snapshot, UnknownNode

Policy = Literal["lru", "lfu", "fifo", "mru", "filo", "slru"]


class CounterNode:
    def __init__(self, tree: CounterTree, parent: CounterNode | None, tokens: list[int], blocks: list[int]) -> None:
        self.tree: CounterTree | None = tree
        self.parent = parent
        self.tokens = tokens
        self.blocks = blocks
        self.children: dict[tuple[int, ...], CounterNode] = {}
        self.lock_ref = 0
        self.own_locks = 0
        self.hit_count = 0
        self.last_access_time = tree.tick()
        self.creation_time = tree.tick()

    def __lt__(self, other: CounterNode) -> bool:
        return self.last_access_time < other.last_access_time


def _ints(values: object, what: str) -> list[int]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InvalidArgument(f"{what} must be a sequence of ints")
    out: list[int] = []
    for value in values:
        if not hasattr(type(value), "__index__"):
            raise InvalidArgument(f"{what} holds a {type(value).__name__}")
        number = operator.index(value)
        if not 0 <= number < ID_LIMIT:
            raise InvalidArgument(f"{what} holds {number}, outside [0, 2**32)")
        out.append(number)
    return out


class CounterTree:
    """A ``spec.api.PrefixCache`` under SGLang's strategy ``policy``; ``split`` is R4's creation rule."""

    def __init__(self, block_size: int, policy: Policy = "lru", split: Literal["fresh", "inherit"] = "inherit", threshold: int = 2) -> None:
        if not hasattr(type(block_size), "__index__") or operator.index(block_size) < 1:
            raise InvalidArgument("block size must be an int >= 1")
        self.size = operator.index(block_size)
        self.policy = policy
        self.split_rule = split
        self.threshold = threshold
        self.counter = 0.0
        self.root = CounterNode(self, None, [], [])
        self.held: set[int] = set()
        self.counts = {"lookups": 0, "query_tokens": 0, "hit_tokens": 0, "inserted_blocks": 0, "evicted_blocks": 0}

    def tick(self) -> float:
        value = self.counter
        self.counter += 1.0
        return value

    def block_size(self) -> int:
        return self.size

    def priority(self, node: CounterNode) -> float | tuple[float, float]:
        """``evict_policy.py``'s ``get_priority``, strategy by strategy."""
        if self.policy == "lfu":
            return (node.hit_count, node.last_access_time)
        if self.policy == "fifo":
            return node.creation_time
        if self.policy == "mru":
            return -node.last_access_time
        if self.policy == "filo":
            return -node.creation_time
        if self.policy == "slru":
            return (1 if node.hit_count >= self.threshold else 0, node.last_access_time)
        return node.last_access_time

    # ---------------------------------------------------------------- the walk

    def agreeing(self, node: CounterNode, key: list[int], at: int) -> int:
        """Whole blocks of ``node``'s tokens equal to ``key`` from ``at``, in tokens."""
        length = 0
        while length + self.size <= len(node.tokens) and key[at + length : at + length + self.size] == node.tokens[length : length + self.size]:
            length += self.size
        return length

    def split(self, child: CounterNode, length: int) -> CounterNode:
        assert child.parent is not None
        upper = CounterNode(self, child.parent, child.tokens[:length], child.blocks[: length // self.size])
        upper.hit_count = child.hit_count
        if self.split_rule == "inherit":
            upper.creation_time = child.creation_time
        upper.lock_ref = child.lock_ref
        del child.parent.children[tuple(child.tokens[: self.size])]
        child.parent.children[tuple(upper.tokens[: self.size])] = upper
        child.tokens = child.tokens[length:]
        child.blocks = child.blocks[length // self.size :]
        child.parent = upper
        upper.children[tuple(child.tokens[: self.size])] = child
        child.last_access_time = self.tick()
        return upper

    def match_prefix(self, tokens: Sequence[int]) -> PrefixMatch:
        key = _ints(tokens, "tokens")
        usable = max(0, (len(key) - 1) // self.size * self.size)
        node, at, found = self.root, 0, []
        while at + self.size <= usable and tuple(key[at : at + self.size]) in node.children:
            child = node.children[tuple(key[at : at + self.size])]
            length = self.agreeing(child, key[:usable], at)
            inside = length < len(child.tokens)
            if inside:
                child = self.split(child, length)
            found.extend(child.blocks)
            node, at = child, at + length
            if inside:
                break
        stamp = self.tick()
        walker: CounterNode | None = node
        while walker is not None:
            walker.last_access_time = stamp
            stamp -= 0.00001
            walker = walker.parent
        self.counts["lookups"] += 1
        self.counts["query_tokens"] += len(key)
        self.counts["hit_tokens"] += at
        return PrefixMatch(at, found, node)

    def cached_path(self, key: list[int]) -> list[int]:
        """The ids cached for the leading whole blocks of ``key``, without changing anything."""
        node, at, found = self.root, 0, []
        while at + self.size <= len(key) and tuple(key[at : at + self.size]) in node.children:
            child = node.children[tuple(key[at : at + self.size])]
            length = self.agreeing(child, key, at)
            found.extend(child.blocks[: length // self.size])
            if length < len(child.tokens):
                break
            node, at = child, at + length
        return found

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId]) -> Inserted:
        key = _ints(tokens, "tokens")
        given = _ints(blocks, "blocks")
        whole = len(key) // self.size
        if len(given) != whole:
            raise InvalidArgument(f"{len(key)} tokens take {whole} blocks, got {len(given)}")
        if len(set(given)) != len(given):
            raise InvalidArgument("an id is repeated")
        cached = self.cached_path(key[: whole * self.size])
        for position, block in enumerate(given):
            if block in self.held and (position >= len(cached) or cached[position] != block):
                raise InvalidArgument(f"block {block} is cached elsewhere")
        self.root.last_access_time = self.tick()
        if whole == 0:
            return Inserted(self.root, [])
        key = key[: whole * self.size]
        node, at = self.root, 0
        while at < len(key) and tuple(key[at : at + self.size]) in node.children:
            child = node.children[tuple(key[at : at + self.size])]
            child.last_access_time = self.tick()
            length = self.agreeing(child, key, at)
            if length < len(child.tokens):
                child = self.split(child, length)
            child.hit_count += 1
            node, at = child, at + length
        if at < len(key):
            leaf = CounterNode(self, node, key[at:], given[at // self.size :])
            node.children[tuple(leaf.tokens[: self.size])] = leaf
            leaf.hit_count += 1
            self.held.update(leaf.blocks)
            self.counts["inserted_blocks"] += len(leaf.blocks)
            node = leaf
        duplicates = [block for block, kept in zip(given, cached) if block != kept]
        return Inserted(node, duplicates)

    # ------------------------------------------------------------------ locks

    def live(self, node: NodeId) -> CounterNode:
        if isinstance(node, CounterNode) and node.tree is self:
            return node
        raise UnknownNode(f"{node!r} is not in this cache")

    def lock(self, node: NodeId) -> None:
        if node is self.root:
            return
        live = self.live(node)
        live.own_locks += 1
        walker: CounterNode | None = live
        while walker is not None and walker is not self.root:
            walker.lock_ref += 1
            walker = walker.parent

    def unlock(self, node: NodeId) -> None:
        if node is self.root:
            return
        live = self.live(node)
        if live.own_locks == 0:
            raise NotLocked(f"{node!r} holds no lock")
        live.own_locks -= 1
        walker: CounterNode | None = live
        while walker is not None and walker is not self.root:
            walker.lock_ref -= 1
            walker = walker.parent

    # --------------------------------------------------------------- eviction

    def nodes(self) -> list[CounterNode]:
        found, stack = [], list(self.root.children.values())
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(node.children.values())
        return found

    def evict(self, n_blocks: int) -> list[BlockId]:
        if not hasattr(type(n_blocks), "__index__") or operator.index(n_blocks) < 0:
            raise InvalidArgument("n_blocks must be an int >= 0")
        wanted = operator.index(n_blocks)
        heap = [(self.priority(node), node) for node in self.nodes() if not node.children and node.lock_ref == 0]
        heapq.heapify(heap)
        freed: list[int] = []
        while len(freed) < wanted and heap:
            _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            del parent.children[tuple(leaf.tokens[: self.size])]
            leaf.tree = None
            freed.extend(leaf.blocks)
            self.held.difference_update(leaf.blocks)
            if parent is not self.root and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, (self.priority(parent), parent))
        self.counts["evicted_blocks"] += len(freed)
        return freed

    # --------------------------------------------------------------- counters

    def cached_blocks(self) -> int:
        return sum(len(node.blocks) for node in self.nodes())

    def cached_tokens(self) -> int:
        return self.cached_blocks() * self.size

    def evictable_blocks(self) -> int:
        return sum(len(node.blocks) for node in self.nodes() if node.lock_ref == 0)

    def stats(self) -> PrefixStats:
        return PrefixStats(**self.counts)

    def hit_rate(self) -> float:
        return self.counts["hit_tokens"] / self.counts["query_tokens"] if self.counts["query_tokens"] else 0.0

    def snapshot(self) -> Snapshot:
        """Every node in its own eviction order: SGLang's priority, ties to the older last access."""
        views: list[tuple[float | tuple[float, float], float, NodeView]] = []
        for node in self.nodes():
            prefix: list[int] = []
            walker: CounterNode | None = node
            while walker is not None:
                prefix[:0] = walker.tokens
                walker = walker.parent
            views.append((self.priority(node), node.last_access_time, NodeView(tuple(prefix), tuple(node.blocks), node.own_locks)))
        views.sort(key=lambda entry: (entry[0], entry[1]))
        return Snapshot(self.size, tuple(view for _, _, view in views), self.stats())
