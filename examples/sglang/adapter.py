"""SGLang 0.5.23's real ``RadixCache`` behind ``spec.api.PrefixCache``, following ``docs/adapters.md``.

The adapter translates; it never fixes behaviour.  What it translates:

- blocks and pages: ``page_size = B``; block id b stands for the KV slots
  ``b*B .. b*B+B-1`` (one slot per token, as SGLang keeps them); a node's
  block ids are its first slot of each page divided by B;
- the last prompt token: a match's key has ``limit = n - 1``, as SGLang's
  scheduler builds it (``Req._compute_max_prefix_len``), and SGLang's
  ``page_aligned`` then rounds down to whole pages;
- eviction in tokens: ``evict(n)`` asks for ``n * B`` tokens and returns the
  slots SGLang handed to its allocator, in the order freed, as block ids;
- locks: SGLang keeps path sums (``inc_lock_ref`` adds one to every node up
  to the root); a node's own locks are its ``lock_ref`` less its children's;
- what SGLang leaves to its caller, checked here as the interface says: R1's
  argument checks, R5's refusals (an id repeated, or cached elsewhere) and
  duplicates (SGLang keeps its own ids and reports how much was cached),
  R6's stale handles and NotLocked, and R9's counters, which SGLang does not
  keep;
- the snapshot: every node with its prefix, blocks and own locks, in
  SGLang's own eviction order, its strategy's ``get_priority`` (ties by
  prefix length, as they lie on one path).

The eviction policy is a parameter (``SglangCache(B, "lfu")``); the factories
below name each one SGLang ships that needs no call argument.  Needs SGLang
(``make engines`` installs it into ``.venv-bench``).
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Sequence
from typing import Any

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
from examples.sglang.loading import FreedSlots, Sglang, load_sglang

POLICIES = ("lru", "lfu", "fifo", "mru", "filo")
"""SGLang's eviction strategies that need no argument of a call (``priority`` takes one at insert)."""


def _ids(values: object, what: str) -> list[int]:
    """R1: a sequence of ints in [0, 2**32), else InvalidArgument (SGLang checks nothing)."""
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise InvalidArgument(f"{what} must be a sequence of ints")
    checked = []
    for value in values:
        try:
            number = operator.index(value)
        except TypeError:
            raise InvalidArgument(f"{what} must be ints, got {type(value).__name__}") from None
        if not 0 <= number < ID_LIMIT:
            raise InvalidArgument(f"{what} must lie in [0, 2**32), got {number}")
        checked.append(number)
    return checked


def _loaded() -> Sglang:
    sglang = load_sglang()
    if sglang is None:
        raise RuntimeError("SGLang cannot be imported here: make engines installs it into .venv-bench")
    return sglang


class SglangCache:
    """SGLang's ``RadixCache`` (page size B, eviction ``policy``) as a PrefixCache."""

    def __init__(self, block_size: int, policy: str = "lru") -> None:
        if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
            raise InvalidArgument(f"block_size must be an int >= 1, got {block_size!r}")
        self.sg = _loaded()
        self.size = block_size
        self.allocator = FreedSlots()
        params = self.sg.CacheInitParams(
            disable=False,
            req_to_token_pool=None,
            token_to_kv_pool_allocator=self.allocator,
            page_size=block_size,
            eviction_policy=policy,
        )
        self.cache: Any = self.sg.RadixCache(params)
        torch = self.sg.torch
        self.offsets = torch.arange(block_size, dtype=torch.int64)
        self.held: set[int] = set()  # the ids SGLang holds: it does not check R5's "cached elsewhere"
        self.lookups = self.query_tokens = self.hit_tokens = self.inserted = self.evicted = 0

    @property
    def root(self) -> NodeId:
        root: NodeId = self.cache.root_node
        return root

    def block_size(self) -> int:
        return self.size

    # Translating slots and nodes.

    def slots(self, blocks: list[int]) -> Any:
        torch = self.sg.torch
        if not blocks:
            return torch.zeros(0, dtype=torch.int64)
        return (torch.tensor(blocks, dtype=torch.int64)[:, None] * self.size + self.offsets).reshape(-1)

    def block_ids(self, slots: Any) -> list[int]:
        ids: list[int] = (slots[:: self.size] // self.size).tolist()
        return ids

    def path_blocks(self, node: Any) -> list[int]:
        return self.block_ids(self.cache.path_device_indices(node))

    def live(self, node: object) -> Any:
        """R6: a node still in this cache's tree, else UnknownNode (SGLang never checks a handle)."""
        if isinstance(node, self.sg.TreeNode):
            at: Any = node
            while at is not self.cache.root_node:
                parent = at.parent
                if parent is None or not any(child is at for child in parent.children.values()):
                    break
                at = parent
            if at is self.cache.root_node:
                return node
        raise UnknownNode(f"{node!r} is not in the cache")

    @staticmethod
    def own_locks(node: Any) -> int:
        own: int = node.lock_ref - sum(child.lock_ref for child in node.children.values())
        return own

    # The calls.

    def match_prefix(self, tokens: Sequence[int]) -> PrefixMatch:
        prompt = _ids(tokens, "tokens")
        key = self.sg.RadixKey(array("q", prompt), limit=max(len(prompt) - 1, 0))
        result = self.cache.match_prefix(self.sg.MatchPrefixParams(key=key))
        node = result.last_device_node
        matched = int(result.device_prefix_len)
        self.lookups += 1
        self.query_tokens += len(prompt)
        self.hit_tokens += matched
        if not matched:
            return PrefixMatch(0, [], self.root)
        return PrefixMatch(matched, self.path_blocks(node), node)

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId]) -> Inserted:
        prompt, given = _ids(tokens, "tokens"), _ids(blocks, "blocks")
        whole = len(prompt) // self.size
        if len(given) != whole:
            raise InvalidArgument(f"{len(prompt)} tokens take {whole} blocks, got {len(given)}")
        if len(set(given)) != len(given):
            raise InvalidArgument("a block id is repeated within the call")
        if not whole:
            return Inserted(self.root, [])
        key = self.sg.RadixKey(array("q", prompt[: whole * self.size]))
        cached = self.cached_along(prompt[: whole * self.size])
        for position, block in enumerate(given):
            if (position >= len(cached) or cached[position] != block) and block in self.held:
                raise InvalidArgument(f"block {block} is cached at another position")
        result = self.cache.insert(self.sg.InsertParams(key=key, value=self.slots(given)))
        node = result.last_device_node
        kept = int(result.prefix_len) // self.size  # positions SGLang held before this insert
        self.held.update(given[kept:])
        self.inserted += whole - kept
        path = self.path_blocks(node)
        duplicates = [new for new, old in zip(given[:kept], path[:kept]) if new != old]
        return Inserted(node, duplicates)

    def cached_along(self, key: list[int]) -> list[int]:
        """The ids SGLang holds along ``key``, read without touching the tree (no stamp, no split)."""
        node: Any = self.cache.root_node
        position = 0
        found: list[int] = []
        size = self.size
        while position + size <= len(key):
            page = key[position : position + size]
            child = next((candidate for candidate in node.children.values() if list(candidate.key)[:size] == page), None)
            if child is None:
                break
            segment = list(child.key)
            common = size
            while common + size <= min(len(segment), len(key) - position) and segment[common : common + size] == key[position + common : position + common + size]:
                common += size
            found.extend(self.block_ids(child.value[:common]))
            if common < len(segment):
                break
            node = child
            position += common
        return found

    def lock(self, node: NodeId) -> None:
        if node is not self.cache.root_node:
            self.cache.inc_lock_ref(self.live(node))

    def unlock(self, node: NodeId) -> None:
        if node is self.cache.root_node:
            return
        live = self.live(node)
        if self.own_locks(live) == 0:
            raise NotLocked(f"{node!r} holds no lock of its own")
        self.cache.dec_lock_ref(live)

    def evict(self, n_blocks: int) -> list[BlockId]:
        try:
            wanted = operator.index(n_blocks)
        except TypeError:
            raise InvalidArgument("n_blocks must be an int") from None
        if wanted < 0:
            raise InvalidArgument(f"n_blocks must be >= 0, got {wanted}")
        self.allocator.freed.clear()
        if wanted:
            self.cache.evict(self.sg.EvictParams(num_tokens=wanted * self.size))
        freed: list[int] = []
        for slots in self.allocator.freed:
            freed.extend(self.block_ids(slots))
        self.held.difference_update(freed)
        self.evicted += len(freed)
        return freed

    def cached_blocks(self) -> int:
        return int(self.cache.total_size()) // self.size

    def cached_tokens(self) -> int:
        return int(self.cache.total_size())

    def evictable_blocks(self) -> int:
        return int(self.cache.evictable_size()) // self.size

    def stats(self) -> PrefixStats:
        return PrefixStats(self.lookups, self.query_tokens, self.hit_tokens, self.inserted, self.evicted)

    def hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0

    def snapshot(self) -> Snapshot:
        views: list[tuple[Any, int, NodeView]] = []
        stack: list[tuple[Any, tuple[int, ...]]] = [(self.cache.root_node, ())]
        priority = self.cache.eviction_strategy.get_priority
        while stack:
            node, prefix = stack.pop()
            for child in node.children.values():
                child_prefix = prefix + tuple(child.key)
                view = NodeView(child_prefix, tuple(self.block_ids(child.value)), self.own_locks(child))
                views.append((priority(child), len(child_prefix), view))
                stack.append((child, child_prefix))
        views.sort(key=lambda entry: (entry[0], entry[1]))
        return Snapshot(self.size, tuple(view for _, _, view in views), self.stats())


def lru(block_size: int) -> SglangCache:
    """``prefixspec check examples.sglang.adapter:lru --rules sglang``."""
    return SglangCache(block_size, "lru")


def lfu(block_size: int) -> SglangCache:
    return SglangCache(block_size, "lfu")


def fifo(block_size: int) -> SglangCache:
    return SglangCache(block_size, "fifo")


def mru(block_size: int) -> SglangCache:
    return SglangCache(block_size, "mru")


def filo(block_size: int) -> SglangCache:
    return SglangCache(block_size, "filo")
