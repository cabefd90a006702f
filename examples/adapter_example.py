"""A worked adapter: a cache whose API differs from ``spec.api.PrefixCache``, checked against the spec.

``ToyRadixCache`` is written the way SGLang's ``RadixCache`` is (paged
``match_prefix`` and ``insert`` on token keys, ``inc_lock_ref``/``dec_lock_ref``
counters kept on the node objects and summed along the path, eviction
counted in tokens through a callback, no duplicate reporting: ``insert``
returns how many tokens were cached already).  ``ToyAdapter`` translates the
spec's calls to it; ``make_cache`` is the factory to check::

    prefixspec check examples.adapter_example:make_cache

``docs/adapters.md`` walks through it; ``stateful_tests/test_adapter_example.py``
checks it.  The cache is a toy (a few dozen lines), but every translation the
adapter makes is one a real engine's cache needs.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Callable, Sequence

from examples.arguments import caller_ids  # R1's id check, shared with the real engines' adapters
from spec.api import (
    ID_LIMIT,
    BlockId,
    Inserted,
    InvalidArgument,
    NodeId,
    NodeView,
    NotLocked,
    PrefixMatch,
    PrefixStats,
    Snapshot,
    UnknownNode,
)

# The engine's cache, as it is ------------------------------------------------------------


class TreeNode:
    """A node: its key (tokens, whole pages), one KV page id per page, and a lock count for its subtree."""

    _ids = itertools.count()

    def __init__(self) -> None:
        self.children: dict[tuple[int, ...], TreeNode] = {}
        self.parent: TreeNode | None = None
        self.key: list[int] = []
        self.value: list[int] = []
        self.lock_ref = 0
        self.last_access_time = 0
        self.id = next(TreeNode._ids)

    def __lt__(self, other: TreeNode) -> bool:
        return self.last_access_time < other.last_access_time


class ToyRadixCache:
    """A paged radix cache in the style of SGLang's, with a logical clock for last access."""

    def __init__(self, page_size: int) -> None:
        self.page_size = page_size
        self.root_node = TreeNode()
        self.clock = 0

    def _child_key(self, key: Sequence[int]) -> tuple[int, ...]:
        return tuple(key[: self.page_size])

    def _match_len(self, a: Sequence[int], b: Sequence[int]) -> int:
        """Tokens in common, in whole pages."""
        length = 0
        page = self.page_size
        while length + page <= min(len(a), len(b)) and a[length : length + page] == b[length : length + page]:
            length += page
        return length

    def _split_node(self, child: TreeNode, split_len: int) -> TreeNode:
        """A new node takes the first ``split_len`` tokens of ``child``; ``child`` keeps the rest."""
        new_node = TreeNode()
        new_node.parent = child.parent
        new_node.key = child.key[:split_len]
        new_node.value = child.value[: split_len // self.page_size]
        new_node.lock_ref = child.lock_ref
        new_node.last_access_time = self.clock
        child.key = child.key[split_len:]
        child.value = child.value[split_len // self.page_size :]
        child.parent = new_node
        new_node.children[self._child_key(child.key)] = child
        assert new_node.parent is not None
        new_node.parent.children[self._child_key(new_node.key)] = new_node
        return new_node

    def match_prefix(self, key: Sequence[int]) -> tuple[list[int], TreeNode]:
        """The KV page ids of the longest cached whole-page prefix of ``key``, and the node ending there."""
        self.clock += 1
        key = list(key[: len(key) // self.page_size * self.page_size])
        node = self.root_node
        value: list[int] = []
        while key and self._child_key(key) in node.children:
            child = node.children[self._child_key(key)]
            prefix_len = self._match_len(child.key, key)
            if prefix_len < len(child.key):
                node = self._split_node(child, prefix_len)  # the new node is used now; the rest is not
                value.extend(node.value)
                break
            child.last_access_time = self.clock
            value.extend(child.value)
            node = child
            key = key[prefix_len:]
        return value, node

    def insert(self, key: Sequence[int], value: Sequence[int]) -> int:
        """Cache ``key`` (whole pages) with ``value`` (one page id per page); returns the tokens cached before."""
        self.clock += 1
        key, value = list(key), list(value)
        node = self.root_node
        cached = 0
        while key and self._child_key(key) in node.children:
            node = node.children[self._child_key(key)]
            prefix_len = self._match_len(node.key, key)
            cached += prefix_len
            key, value = key[prefix_len:], value[prefix_len // self.page_size :]
            if prefix_len < len(node.key):
                node = self._split_node(node, prefix_len)
            else:
                node.last_access_time = self.clock
        if key:
            leaf = TreeNode()
            leaf.parent = node
            leaf.key, leaf.value = key, value
            leaf.last_access_time = self.clock
            node.children[self._child_key(key)] = leaf
        return cached

    def inc_lock_ref(self, node: TreeNode) -> None:
        while node is not self.root_node:
            node.lock_ref += 1
            assert node.parent is not None
            node = node.parent

    def dec_lock_ref(self, node: TreeNode) -> None:
        while node is not self.root_node:
            node.lock_ref -= 1
            assert node.parent is not None
            node = node.parent

    def _nodes(self) -> list[TreeNode]:
        found, stack = [], [self.root_node]
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(node.children.values())
        return found[1:]

    def evict(self, num_tokens: int, evict_callback: Callable[[list[int]], None]) -> None:
        """Free whole unlocked leaves, least recently used first, until ``num_tokens`` tokens are freed."""
        leaves = [node for node in self._nodes() if not node.children and node.lock_ref == 0]
        heapq.heapify(leaves)
        num_evicted = 0
        while num_evicted < num_tokens and leaves:
            leaf = heapq.heappop(leaves)
            evict_callback(leaf.value)
            num_evicted += len(leaf.key)
            parent = leaf.parent
            assert parent is not None
            del parent.children[self._child_key(leaf.key)]
            if parent is not self.root_node and not parent.children and parent.lock_ref == 0:
                heapq.heappush(leaves, parent)

    def total_size(self) -> int:
        return sum(len(node.key) for node in self._nodes())

    def evictable_size(self) -> int:
        return sum(len(node.key) for node in self._nodes() if node.lock_ref == 0)


# The adapter: the spec's calls on the engine's cache ----------------------------------------




class ToyAdapter:
    """``ToyRadixCache`` behind the ``PrefixCache`` interface."""

    def __init__(self, block_size: int) -> None:
        if not isinstance(block_size, int) or block_size < 1:
            raise InvalidArgument(f"block_size must be an int >= 1, got {block_size!r}")
        self.toy = ToyRadixCache(block_size)
        self.size = block_size
        self.held: set[int] = set()  # every cached block id: the toy does not check R5's "cached elsewhere"
        self.lookups = self.query_tokens = self.hit_tokens = self.inserted = self.evicted = 0

    @property
    def root(self) -> NodeId:
        return self.toy.root_node

    def block_size(self) -> int:
        return self.size

    # Reading the toy's tree without changing it.

    def _walk(self, key: Sequence[int]) -> tuple[list[int], TreeNode | None]:
        """The cached page ids along ``key`` and the node ending exactly at ``key`` (None if none does)."""
        toy, node, pos, cached = self.toy, self.toy.root_node, 0, []
        while pos < len(key) and toy._child_key(key[pos:]) in node.children:
            child = node.children[toy._child_key(key[pos:])]
            common = toy._match_len(child.key, key[pos:])
            cached.extend(child.value[: common // self.size])
            if common < len(child.key):
                return cached, None
            node, pos = child, pos + common
        return cached, node if pos == len(key) else None

    def _live(self, node: NodeId) -> TreeNode:
        """R6: a node still in this toy's tree, else UnknownNode (the toy cannot tell)."""
        if isinstance(node, TreeNode):
            at = node
            while at.parent is not None and at.parent.children.get(self.toy._child_key(at.key)) is at:
                at = at.parent
            if at is self.toy.root_node:
                return node
        raise UnknownNode(f"{node!r} is not in the cache")

    @staticmethod
    def _own_locks(node: TreeNode) -> int:
        """The toy sums locks up the path; a node's own locks are what its children do not account for."""
        return node.lock_ref - sum(child.lock_ref for child in node.children.values())

    # The calls.

    def match_prefix(self, tokens: Sequence[int]) -> PrefixMatch:
        prompt = caller_ids(tokens, "tokens")
        usable = max(0, (len(prompt) - 1) // self.size * self.size)  # R3: the last token is left to compute
        value, node = self.toy.match_prefix(prompt[:usable])
        self.lookups += 1
        self.query_tokens += len(prompt)
        self.hit_tokens += len(value) * self.size
        return PrefixMatch(len(value) * self.size, value, node)

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId]) -> Inserted:
        prompt, given = caller_ids(tokens, "tokens"), caller_ids(blocks, "blocks")
        whole = len(prompt) // self.size
        key = prompt[: whole * self.size]
        if len(given) != whole:
            raise InvalidArgument(f"{len(prompt)} tokens take {whole} blocks, got {len(given)}")
        if len(set(given)) != len(given):
            raise InvalidArgument("a block id is repeated within the call")
        cached, _ = self._walk(key)
        for position, block in enumerate(given):
            if (position >= len(cached) or cached[position] != block) and block in self.held:
                raise InvalidArgument(f"block {block} is cached at another position")
        if not whole:
            return Inserted(self.toy.root_node, [])
        self.toy.insert(key, given)
        self.held.update(given[len(cached) :])
        self.inserted += whole - len(cached)
        _, node = self._walk(key)
        assert node is not None, "the toy ends a node at every inserted prefix"
        duplicates = [block for block, kept in zip(given, cached) if block != kept]  # the toy reports none
        return Inserted(node, duplicates)

    def lock(self, node: NodeId) -> None:
        if node is not self.toy.root_node:
            self.toy.inc_lock_ref(self._live(node))

    def unlock(self, node: NodeId) -> None:
        if node is self.toy.root_node:
            return
        live = self._live(node)
        if self._own_locks(live) == 0:
            raise NotLocked(f"{node!r} holds no lock of its own")
        self.toy.dec_lock_ref(live)

    def evict(self, n_blocks: int) -> list[BlockId]:
        try:
            wanted = operator.index(n_blocks)
        except TypeError:
            raise InvalidArgument("n_blocks must be an int") from None
        if wanted < 0:
            raise InvalidArgument(f"n_blocks must be >= 0, got {wanted}")
        freed: list[int] = []
        self.toy.evict(wanted * self.size, freed.extend)  # the toy counts tokens
        self.held.difference_update(freed)
        self.evicted += len(freed)
        return freed

    def cached_blocks(self) -> int:
        return self.toy.total_size() // self.size

    def cached_tokens(self) -> int:
        return self.toy.total_size()

    def evictable_blocks(self) -> int:
        return self.toy.evictable_size() // self.size

    def stats(self) -> PrefixStats:
        return PrefixStats(self.lookups, self.query_tokens, self.hit_tokens, self.inserted, self.evicted)

    def hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0

    def snapshot(self) -> Snapshot:
        views = []
        for node in self.toy._nodes():
            prefix: list[int] = []
            at: TreeNode | None = node
            while at is not None and at is not self.toy.root_node:
                prefix[:0] = at.key
                at = at.parent
            views.append((node.last_access_time, len(prefix), NodeView(tuple(prefix), tuple(node.value), self._own_locks(node))))
        views.sort(key=lambda view: (view[0], view[1]))
        return Snapshot(self.size, tuple(view for _, _, view in views), self.stats())


def make_cache(block_size: int) -> ToyAdapter:
    """The factory ``prefixspec check examples.adapter_example:make_cache`` checks."""
    return ToyAdapter(block_size)
