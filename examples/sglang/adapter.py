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
- the snapshot: every node with its prefix, blocks, own locks and namespace, in
  SGLang's own eviction order, its strategy's ``get_priority`` (ties by
  prefix length, as they lie on one path);
- namespaces (R12): a namespace becomes the ``extra_key`` of every ``RadixKey``
  the adapter builds (``namespace_key``; None stays None), or, with
  ``namespace_field="cache_salt"``, its ``cache_salt``; see ``namespace_key`` (``namespaces.py``);
- events (R13): SGLang records them when ``CacheInitParams.enable_kv_cache_events``
  is set (``RadixCache.__init__``, radix_cache.py:292-297); ``take_events``
  translates SGLang's ``BlockStored`` / ``BlockRemoved`` / ``AllBlocksCleared``
  as a router would, from the events alone plus the ids the adapter passed to
  ``insert`` (see ``take_events``, ``router_events.py``).

The eviction policy is a parameter (``SglangCache(B, "lfu")``); the factories
below name each one SGLang ships that needs no call argument.  Needs SGLang
(``make engines`` installs it into ``.venv-bench``).
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Sequence
from typing import Any

from spec.api import (
    BlockId,
    Inserted,
    InvalidArgument,
    Namespace,
    NodeId,
    NodeView,
    NotLocked,
    PrefixMatch,
    PrefixStats,
    Snapshot,
    UnknownNode,
    checked_block_size,
)
from bench.sglang_loading import FreedSlots, Sglang, load_sglang
from examples.arguments import caller_count, caller_ids, caller_namespace
from examples.sglang.namespaces import NamespaceField as NamespaceField  # re-exported: imported from here
from examples.sglang.namespaces import namespace_key as namespace_key
from examples.sglang.namespaces import namespace_of as namespace_of
from examples.sglang.router_events import RouterEvents

# SGLang, and torch with it, load with this module: a target's import has no time limit, its factory's calls
# have --timeout (5 s), which the import overran on a loaded machine ("did not return within 5 s").
load_sglang()

POLICIES = ("lru", "lfu", "fifo", "mru", "filo", "slru", "priority")
"""SGLang's eviction strategies the plain ``RadixCache`` runs under the kit's calls: ``slru`` at its default
threshold; ``priority`` with every insert at SGLang's default priority 0 (the interface's insert carries none).
``tlru`` raises in ``evict`` on this cache (``tlru`` below, ``examples/sglang/defects.py``)."""


def _loaded() -> Sglang:
    sglang = load_sglang()
    if sglang is None:
        raise RuntimeError("SGLang cannot be imported here: make engines installs it into .venv-bench")
    return sglang


class SglangCache(RouterEvents):
    """SGLang's ``RadixCache`` (page size B, eviction ``policy``) as a PrefixCache with namespaces and events.

    ``namespace_field`` is the ``RadixKey`` field a namespace goes to: ``extra_key`` (the default,
    SGLang's namespace of the tree, radix_cache.py:73) or ``cache_salt`` (which namespaces the tree
    and SGLang's KV events too, radix_cache.py:75).  ``dynamo_format`` is SGLang's
    ``dynamo_kv_event_format`` (``--kv-events-config`` with ``format=dynamo``): it seeds the event
    hashes with the extra_key too (events.py:199-211).
    """

    def __init__(
        self,
        block_size: int,
        policy: str = "lru",
        *,
        namespace_field: NamespaceField = "extra_key",
        dynamo_format: bool = False,
        policy_config: dict[str, Any] | None = None,
    ) -> None:
        block_size = checked_block_size(block_size)
        if namespace_field not in ("extra_key", "cache_salt"):
            raise ValueError(f"namespace_field is extra_key or cache_salt, got {namespace_field!r}")
        self.sg = self.load()
        self.size = block_size
        self.policy = policy
        self.allocator = FreedSlots()
        self.namespace_field: NamespaceField = namespace_field
        self.cache: Any = self.build_cache(
            dict(
                disable=False,
                req_to_token_pool=None,
                token_to_kv_pool_allocator=self.allocator,
                page_size=block_size,
                eviction_policy=policy,
                eviction_policy_config=policy_config,
                enable_kv_cache_events=True,
                dynamo_kv_event_format=dynamo_format,
            )
        )
        torch = self.sg.torch
        self.offsets = torch.arange(block_size, dtype=torch.int64)
        self.held: set[int] = set()  # the ids SGLang holds: it does not check R5's "cached elsewhere"
        self.lookups = self.query_tokens = self.hit_tokens = self.inserted = self.evicted = 0
        super().__init__()  # R13, the router's side (RouterEvents)

    def load(self) -> Any:
        """The SGLang names this adapter uses (``loading.Sglang``); RuntimeError when SGLang cannot be imported."""
        return _loaded()

    def build_cache(self, params: dict[str, Any]) -> Any:
        """SGLang's cache of ``CacheInitParams(**params)``: here its ``RadixCache``."""
        return self.sg.RadixCache(self.sg.CacheInitParams(**params))

    @property
    def root(self) -> NodeId:
        root: NodeId = self.cache.root_node
        return root

    def block_size(self) -> int:
        return self.size

    # Translating namespaces, slots and nodes.

    def radix_key(self, tokens: list[int], namespace: Namespace, limit: int | None = None) -> Any:
        """R12: SGLang's key of ``tokens`` in ``namespace`` (``namespace_key`` in the chosen field)."""
        key = namespace_key(namespace)
        if self.namespace_field == "cache_salt":
            return self.sg.RadixKey(array("q", tokens), limit=limit, cache_salt=key)
        return self.sg.RadixKey(array("q", tokens), extra_key=key, limit=limit)

    def namespace_of_node(self, node: Any) -> Namespace:
        key: str | None = getattr(node.key, self.namespace_field)
        return namespace_of(key)

    def slots(self, blocks: list[int]) -> Any:
        torch = self.sg.torch
        if not blocks:
            return torch.zeros(0, dtype=torch.int64)
        return (torch.tensor(blocks, dtype=torch.int64)[:, None] * self.size + self.offsets).reshape(-1)

    def block_ids(self, slots: Any) -> list[int]:
        """The block ids of a tensor of KV slots: each page's first slot divided by B, in Python (a few slots a
        node: a tensor division costs more than it saves)."""
        firsts: list[int] = slots[:: self.size].tolist()
        return firsts if self.size == 1 else list(map(self.size.__rfloordiv__, firsts))

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

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        prompt = caller_ids(tokens, "tokens")
        space = caller_namespace(namespace)
        key = self.radix_key(prompt, space, limit=max(len(prompt) - 1, 0))
        result = self.cache.match_prefix(self.sg.MatchPrefixParams(key=key))
        node = result.last_device_node
        matched = int(result.device_prefix_len)
        self.lookups += 1
        self.query_tokens += len(prompt)
        self.hit_tokens += matched
        if not matched:
            return PrefixMatch(0, [], self.root)
        return PrefixMatch(matched, self.path_blocks(node), node)

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        prompt, given = caller_ids(tokens, "tokens"), caller_ids(blocks, "blocks")
        space = caller_namespace(namespace)
        whole = len(prompt) // self.size
        if len(given) != whole:
            raise InvalidArgument(f"{len(prompt)} tokens take {whole} blocks, got {len(given)}")
        if len(set(given)) != len(given):
            raise InvalidArgument("a block id is repeated within the call")
        if not whole:
            return Inserted(self.root, [])
        key = self.radix_key(prompt[: whole * self.size], space)
        cached = self.cached_along(prompt[: whole * self.size], space)
        for position, block in enumerate(given):
            if (position >= len(cached) or cached[position] != block) and block in self.held:
                raise InvalidArgument(f"block {block} is cached at another position")
        result = self.cache.insert(self.sg.InsertParams(key=key, value=self.slots(given)))
        node = result.last_device_node
        kept = int(result.prefix_len) // self.size  # positions SGLang held before this insert
        self.took(prompt, given, kept, space)
        self.inserted += whole - kept
        path = self.path_blocks(node)
        duplicates = [new for new, old in zip(given[:kept], path[:kept]) if new != old]
        return Inserted(node, duplicates)

    def took(self, prompt: list[int], given: list[int], kept: int, namespace: Namespace) -> None:
        """SGLang took ``given[kept:]`` for ``prompt``: they are held, and await their BlockStored (R13)."""
        self.held.update(given[kept:])
        keys = self.keys.along(None, prompt, self.size)
        for position in range(kept, len(given)):
            self.awaiting.setdefault(keys[position], deque()).append(given[position])

    def cached_along(self, key: list[int], namespace: Namespace = None) -> list[int]:
        """The ids SGLang holds along ``key`` in ``namespace``, read without touching the tree (no stamp, no split).

        A child is found by SGLang's own child key (``RadixKey.child_key``, which carries the
        extra_key and cache_salt, radix_cache.py:222-247)."""
        node: Any = self.cache.root_node
        position = 0
        found: list[int] = []
        size = self.size
        radix = self.radix_key(key, namespace)
        while position + size <= len(key):
            child = node.children.get(radix.child_key_at(position, size))
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
        wanted = caller_count(n_blocks)
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
                view = NodeView(
                    child_prefix, tuple(self.block_ids(child.value)), self.own_locks(child), self.namespace_of_node(child)
                )
                views.append((priority(child), len(child_prefix), view))
                stack.append((child, child_prefix))
        views.sort(key=lambda entry: (entry[0], entry[1]))
        return Snapshot(self.size, tuple(view for _, _, view in views), self.stats())

    # R13: SGLang's KV events, as a router reads them.


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


def salted_lru(block_size: int) -> SglangCache:
    """The namespace as SGLang's ``cache_salt``, not its ``extra_key``: the only RadixKey field SGLang 0.5.23's
    KV events carry (``BlockStored.cache_salt``, kv_events.py:289); ``--rules sglang``."""
    return SglangCache(block_size, "lru", namespace_field="cache_salt")


def salted_lfu(block_size: int) -> SglangCache:
    """``salted_lru`` under ``lfu``; ``--rules sglang-lfu``."""
    return SglangCache(block_size, "lfu", namespace_field="cache_salt")


def salted_fifo(block_size: int) -> SglangCache:
    """``salted_lru`` under ``fifo``; ``--rules sglang-fifo``."""
    return SglangCache(block_size, "fifo", namespace_field="cache_salt")


def salted_mru(block_size: int) -> SglangCache:
    """``salted_lru`` under ``mru``; ``--rules sglang-mru``."""
    return SglangCache(block_size, "mru", namespace_field="cache_salt")


def salted_filo(block_size: int) -> SglangCache:
    """``salted_lru`` under ``filo``; ``--rules sglang-filo``."""
    return SglangCache(block_size, "filo", namespace_field="cache_salt")


def slru(block_size: int) -> SglangCache:
    """``slru`` at SGLang's default ``protected_threshold`` 2 (``evict_policy.py:84-100``); ``--rules sglang-slru``."""
    return SglangCache(block_size, "slru")


def priority(block_size: int) -> SglangCache:
    """``priority`` with every insert at priority 0, SGLang's default (``radix_cache.py:713-715``): its key
    ``(priority, last_access_time)`` (``evict_policy.py:41-46``) orders as ``lru``'s; ``--rules sglang``."""
    return SglangCache(block_size, "priority")


def salted_slru(block_size: int) -> SglangCache:
    """``salted_lru`` under ``slru``; ``--rules sglang-slru``."""
    return SglangCache(block_size, "slru", namespace_field="cache_salt")


def salted_priority(block_size: int) -> SglangCache:
    """``salted_lru`` under ``priority`` (every priority 0); ``--rules sglang``."""
    return SglangCache(block_size, "priority", namespace_field="cache_salt")


def tlru(block_size: int) -> SglangCache:
    """``tlru`` with the server's documented example configuration; its ``evict`` raises AttributeError
    (``examples/sglang/defects.py``): the plain RadixCache's nodes lack the ``_tlru_*`` fields."""
    return SglangCache(block_size, "tlru", policy_config={"threshold": 4096, "next_prompt_estimate": 512})
