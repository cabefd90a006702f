"""A second adapter over vLLM 0.32.0, built on other choices than ``adapter.py``, to show the verdict is vLLM's.

``adapter.py`` drives vLLM's ``KVCacheManager`` as the scheduler does.  This one drives the layer below,
vLLM's real ``BlockPool``, as a maintainer who knows it might, and decides each thing an adapter decides
another way:

- **Calls**: a match is ``BlockPool.get_cached_block`` of each of the request's block hashes, up to
  ``num_tokens - 1`` tokens (what ``find_longest_cache_hit`` does for full attention,
  single_type_kv_cache_manager.py:743-786); an insert ``touch``es the reused blocks, takes new ones with
  ``get_new_blocks``, caches them with ``cache_full_blocks`` (block_pool.py:226-301) and frees them all
  tail first (``free_blocks(reversed(...))``, as ``KVCacheManager.free`` does).
- **Ids**: the blocks standing for no cached id stay *in* vLLM's free queue, at its head where
  ``free_blocks`` puts blocks without a hash (block_pool.py:792-801); the adapter only counts them.  So
  ``evict(n)`` takes those spare blocks and the n after them with one ``get_new_blocks``, and frees the
  spares straight back; ``evictable_blocks`` is the queue's length less the spares.
- **Locks**: no request: ``lock`` ``touch``es the node's chain of blocks and keeps that list, ``unlock``
  frees it tail first.
- **Events**: vLLM's ``BlockPool.take_events`` is read at the end of every call that changes the pool and
  translated at once (a ``BlockRemoved`` paired with the block that very call evicted); ``take_events``
  hands over what accumulated.

What both share is the bookkeeping that needs no vLLM (``translation``: caller ids, where nodes end,
the router's hash index).  ``stateful_tests/test_vllm_second_adapter.py`` checks that the kit's verdicts
on the two agree.  Needs vLLM (``make engines-vllm``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from spec.api import (
    AllBlocksCleared,
    BlockId,
    BlockRemoved,
    BlockStored,
    Inserted,
    InvalidArgument,
    KVEvent,
    Namespace,
    NodeId,
    NodeView,
    NotLocked,
    PrefixMatch,
    PrefixStats,
    Snapshot,
    UnknownNode,
)
from examples.arguments import caller_count, caller_ids, caller_namespace
from examples.places import PlaceKeys
from examples.sglang.adapter import namespace_key, namespace_of
from examples.vllm.loading import Vllm, import_failure, load_vllm
from examples.vllm.translation import BlockIds, HashIndex, Place, PlaceTree, TranslationError, node_views, stored_places

GROUP = 0
"""The one KV cache group (full attention)."""

load_vllm()  # vLLM's import takes about 20 s: at the target's import, not inside its first (timed) call


@dataclass(eq=False)
class PoolNode:
    """A node; each lock is the list of blocks it touched."""

    serial: int
    locks: list[list[Any]] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"pool-node{self.serial}"


class PoolCache:
    """vLLM's ``BlockPool`` (prefix caching and KV events on) as a PrefixCache, with no KVCacheManager."""

    def __init__(self, block_size: int) -> None:
        if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
            raise InvalidArgument(f"block_size must be an int >= 1, got {block_size!r}")
        vllm = load_vllm()
        if vllm is None:
            raise RuntimeError(f"vLLM cannot be imported here ({import_failure()}): make engines-vllm installs it into .venv-vllm")
        self.vllm: Vllm = vllm
        self.size = block_size
        self.pool: Any = vllm.BlockPool(num_gpu_blocks=1, enable_caching=True, hash_block_size=block_size, enable_kv_cache_events=True)
        self.hasher = vllm.block_hasher(block_size)
        self.spares = 0  # blocks at the head of the free queue that hold no cached id
        self.ids = BlockIds()
        self.keys = PlaceKeys()
        self.index = HashIndex(self.keys)
        self.tree = PlaceTree(self.keys)
        self.places: dict[BlockId, Place] = {}
        self.events: list[KVEvent] = []
        self.root_node = PoolNode(0)
        self.serials = itertools.count(1)
        self.requests = itertools.count()
        self.lookups = self.query_tokens = self.hit_tokens = self.inserted = self.evicted = 0

    @property
    def root(self) -> NodeId:
        return self.root_node

    def block_size(self) -> int:
        return self.size

    def hashes(self, tokens: Sequence[int], namespace: Namespace) -> tuple[Any, list[Any]]:
        """A request for ``tokens`` salted with the namespace, and its block hashes as vLLM computes them."""
        request = self.vllm.Request(
            request_id=f"pool-{next(self.requests)}",
            prompt_token_ids=list(tokens),
            sampling_params=self.vllm.sampling,
            pooling_params=None,
            cache_salt=namespace_key(namespace),
            block_hasher=self.hasher,
        )
        return request, list(request.block_hashes)

    def node_at(self, place: Place) -> PoolNode:
        if self.keys.is_root(place):
            return self.root_node
        node = self.tree.end_node(place, PoolNode(next(self.serials)))
        assert isinstance(node, PoolNode)
        return node

    def live(self, node: object) -> tuple[PoolNode, Place]:
        if isinstance(node, PoolNode) and node in self.tree.end_of:
            return node, self.tree.end_of[node]
        raise UnknownNode(f"{node!r} is not in the cache")

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        prompt = caller_ids(tokens, "tokens")
        space = caller_namespace(namespace)
        self.lookups += 1
        self.query_tokens += len(prompt)
        if not prompt:
            return PrefixMatch(0, [], self.root_node)
        _, hashes = self.hashes(prompt, space)
        found: list[Any] = []
        for block_hash in hashes[: (len(prompt) - 1) // self.size]:
            hit = self.pool.get_cached_block(block_hash, [GROUP])
            if hit is None:
                break
            found.append(hit[0])
        matched = len(found) * self.size
        self.hit_tokens += matched
        end = self.keys.along(space, prompt[:matched], self.size)[-1] if found else self.keys.root(space)
        return PrefixMatch(matched, [self.ids.caller_of[block.block_id] for block in found], self.node_at(end))

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        prompt, given = caller_ids(tokens, "tokens"), caller_ids(blocks, "blocks")
        space = caller_namespace(namespace)
        whole = len(prompt) // self.size
        if len(given) != whole:
            raise InvalidArgument(f"{len(prompt)} tokens take {whole} blocks, got {len(given)}")
        if len(set(given)) != len(given):
            raise InvalidArgument("a block id is repeated within the call")
        places = self.keys.along(space, prompt, self.size)
        reused = 0  # the leading ids cached at their own places: the blocks the request's lookup found
        for place, block in zip(places, given):
            if self.ids.cached(block) and self.places[block] != place:
                raise InvalidArgument(f"block {block} is cached at another position")
        while reused < whole and self.ids.cached(given[reused]):
            reused += 1
        if any(self.ids.cached(block) for block in given[reused:]):
            raise InvalidArgument("a vLLM request cannot reuse a cached block after a block it computed: its reused blocks lead")
        if not whole:
            return Inserted(self.root_node, [])
        branch = self.tree.longest_cached(places[-1])
        request, _ = self.hashes(prompt, space)
        computed = [self.pool.blocks[self.ids.vllm_of[block]] for block in given[:reused]]
        fresh = whole - reused
        while self.spares < fresh:  # one more block, free and without a hash, at the queue's head
            block = self.vllm.KVCacheBlock(len(self.pool.blocks), pool=self.pool)
            self.pool.blocks.append(block)
            self.pool.num_gpu_blocks += 1
            self.pool.free_block_queue.prepend_n([block])
            self.spares += 1
        self.pool.touch(computed)
        new = self.pool.get_new_blocks(fresh)
        self.spares -= fresh
        if any(block.block_hash is not None for block in new):
            raise TranslationError("vLLM's get_new_blocks handed out a cached block where spare ones lead its free queue")
        for position, (caller, block) in enumerate(zip(given[reused:], new), start=reused):
            self.ids.bind(caller, block.block_id)
            self.places[caller] = places[position]
            self.index.expect(places[position], caller)
        held = computed + new
        self.pool.cache_full_blocks(request, held, reused, whole, self.size, GROUP)
        self.pool.free_blocks(reversed(held))
        for position, block in enumerate(new, start=reused):
            self.tree.cache(places[position], block.block_id)
        self.inserted += fresh
        self.translate_events([])
        if not self.keys.is_root(branch) and branch != places[-1]:
            self.node_at(branch)
        return Inserted(self.node_at(places[-1]), [])

    def lock(self, node: NodeId) -> None:
        if node is self.root_node:
            return
        live, place = self.live(node)
        blocks = [self.pool.blocks[vllm_id] for vllm_id in self.tree.chain(place)]
        self.pool.touch(blocks)
        live.locks.append(blocks)

    def unlock(self, node: NodeId) -> None:
        if node is self.root_node:
            return
        live, _ = self.live(node)
        if not live.locks:
            raise NotLocked(f"{node!r} holds no lock of its own")
        self.pool.free_blocks(reversed(live.locks.pop()))

    def evict(self, n_blocks: int) -> list[BlockId]:
        wanted = caller_count(n_blocks)
        count = min(wanted, self.pool.get_num_free_blocks() - self.spares)
        taken = self.pool.get_new_blocks(self.spares + count)
        spare, going = taken[: self.spares], taken[self.spares :]
        if any(block.block_hash is not None for block in spare):
            raise TranslationError("a block the adapter counted spare was cached")
        freed = [self.ids.release(block.block_id) for block in going]
        for block, caller in zip(going, freed):
            self.tree.evict(block.block_id)
            del self.places[caller]
        self.translate_events(freed)
        self.pool.free_blocks(taken)  # none holds a hash now: all back at the queue's head
        self.spares += len(going)
        self.evicted += len(freed)
        return freed

    def translate_events(self, evicted: list[BlockId]) -> None:
        """vLLM's events of the call that just ended, translated; ``evicted`` the ids it evicted, in order."""
        left = list(reversed(evicted))
        for event in self.pool.take_events():
            kind = type(event).__name__
            if kind == "BlockStored":
                hashes, tokens = list(event.block_hashes), [int(token) for token in event.token_ids]
                parent, parent_place = self.index.parent(event.parent_block_hash)
                salt = event.extra_keys[0][0] if parent_place is None and event.extra_keys and event.extra_keys[0] else None
                space = cast(Namespace, self.keys.namespace(parent_place)) if parent_place is not None else namespace_of(salt)
                places = stored_places(self.keys, parent_place, space, tokens, self.size)
                stored = [self.index.store(block_hash, place) for block_hash, place in zip(hashes, places)]
                self.events.append(BlockStored(parent, tuple(tokens), tuple(stored), space))
            elif kind == "BlockRemoved":
                removed = []
                for block_hash in event.block_hashes:
                    if not left:
                        raise TranslationError(f"vLLM's BlockRemoved of hash {block_hash!r} where the call evicted no more blocks")
                    removed.append(self.index.remove(block_hash, left.pop()))
                self.events.append(BlockRemoved(tuple(removed)))
            elif kind == "AllBlocksCleared":
                self.events.append(AllBlocksCleared())
            else:
                raise TranslationError(f"vLLM published an event of an unknown kind: {event!r}")
        if left:
            raise TranslationError(f"vLLM evicted {len(left)} blocks it published no BlockRemoved for")

    def take_events(self) -> list[KVEvent]:
        taken, self.events = self.events, []
        return taken

    def cached_blocks(self) -> int:
        return len(self.ids.caller_of)

    def cached_tokens(self) -> int:
        return self.cached_blocks() * self.size

    def evictable_blocks(self) -> int:
        return int(self.pool.get_num_free_blocks()) - self.spares

    def stats(self) -> PrefixStats:
        return PrefixStats(self.lookups, self.query_tokens, self.hit_tokens, self.inserted, self.evicted)

    def hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0

    def snapshot(self) -> Snapshot:
        caller_of = self.ids.caller_of
        views = node_views(self.tree, caller_of, lambda node: len(cast(PoolNode, node).locks))  # built afresh each time
        queue = self.pool.free_block_queue.iter_blocks_after(None)
        released = tuple(caller_of[block.block_id] for block in queue if block.block_hash is not None)
        return Snapshot(self.size, views, self.stats(), released)


def make_cache(block_size: int) -> PoolCache:
    """``prefixspec check examples.vllm.pool_adapter:make_cache --rules vllm``."""
    return PoolCache(block_size)
