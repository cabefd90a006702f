"""vLLM 0.32.0's real ``KVCacheManager`` (and its ``BlockPool``) behind ``spec.api.PrefixCache``.

The adapter translates; it never fixes behaviour.  Each call of the interface is what
vLLM's scheduler does with the manager (``docs/adapters.md``, "Engines that are not trees"):

- ``match_prefix``: ``KVCacheManager.get_computed_blocks`` of a request for the tokens
  (kv_cache_manager.py:264-321), which reads the hash map and touches nothing; its
  ``max_cache_hit_length = num_tokens - 1`` (line 295) is R3's usable prefix;
- ``insert``: a request that ran and finished: ``allocate_slots`` with the blocks it reused
  (the leading ids cached at their places: its lookup at admission found them) and new blocks
  for the rest (lines 371-618: it touches the former, takes the latter from the head of the
  free queue, and ``cache_blocks`` hashes them, copies included), then ``free`` (line 620:
  ``free_blocks(reversed(...))``, single_type_kv_cache_manager.py:588-589);
- ``lock`` / ``unlock``: a request holding the node's blocks (``allocate_slots`` with the
  node's blocks as its computed blocks, which ``BlockPool.touch`` takes out of the free
  queue, block_pool.py:752-768) and its ``free``;
- ``evict(n)``: ``BlockPool.get_new_blocks(n)`` (block_pool.py:666-700), which is how vLLM
  evicts: it pops the first n free blocks and drops their hashes
  (``_maybe_evict_cached_block``, lines 729-750);
- events: ``KVCacheManager.take_events`` (line 696), hash-keyed, translated to ids as a
  router would (``translation.HashIndex``).

Block ids: vLLM picks its blocks; the caller chose its ids.  Every vLLM block that holds
no cached id stays *out* of the free queue, allocated to the adapter (the caller holds
the KV it stands for), so that vLLM's free queue is exactly its eviction order over cached
blocks.  An insert hands vLLM the blocks for its new positions by freeing them just
before ``allocate_slots``: ``free_blocks`` puts blocks without a hash at the *front* of the
queue (block_pool.py:792-801), in the order given, and ``get_new_blocks`` pops them from
there, so vLLM caches the caller's blocks at the caller's positions.  The pool grows by a
block whenever the caller's ids need one more than it has (vLLM sizes it by GPU memory).

Namespaces (R12) are vLLM's ``cache_salt`` (request.py:73): it seeds the hash of a
prompt's first block (``generate_block_hash_extra_keys``, kv_cache_utils.py:647-651) and
so every hash after it, and reaches the events as the first block's ``extra_keys``.  The
salt is ``examples.sglang.adapter.namespace_key`` of the namespace (an injective JSON
text, never empty: vLLM ignores an empty salt).  Needs vLLM (``make engines-vllm``
installs it into ``.venv-vllm``).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from spec.api import (
    BlockId,
    BlockRemoved,
    BlockStored,
    AllBlocksCleared,
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
from examples.sglang.adapter import namespace_key, namespace_of
from examples.vllm.loading import Vllm, import_failure, load_vllm
from examples.places import PlaceKeys
from examples.vllm.translation import BlockIds, HashIndex, Place, PlaceTree, TranslationError, node_views, stored_places


load_vllm()  # vLLM's import takes about 20 s: at the target's import, not inside its first (timed) call


def _loaded() -> Vllm:
    vllm = load_vllm()
    if vllm is None:
        raise RuntimeError(f"vLLM cannot be imported here ({import_failure()}): make engines-vllm installs it into .venv-vllm")
    return vllm


@dataclass(eq=False)
class VllmNode:
    """A node of the interface; vLLM has none (``translation.PlaceTree`` says where they end).

    A lock is a vLLM request holding the first block of every place from the root to the node's
    end (what a lookup of that prefix finds), until its unlock frees it.
    """

    serial: int
    locks: list[Any] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"vllm-node{self.serial}"


class VllmCache:
    """vLLM's ``KVCacheManager`` (block size B, full attention, prefix caching and KV events on) as a PrefixCache."""

    def __init__(self, block_size: int) -> None:
        if not isinstance(block_size, int) or isinstance(block_size, bool) or block_size < 1:
            raise InvalidArgument(f"block_size must be an int >= 1, got {block_size!r}")
        self.vllm = _loaded()
        self.size = block_size
        self.manager: Any = self.vllm.new_manager(block_size)
        self.pool: Any = self.manager.block_pool
        self.hasher = self.vllm.block_hasher(block_size)
        self.ids = BlockIds()
        self.keys = PlaceKeys()  # every (namespace, whole-block prefix) seen, as a small int
        self.index = HashIndex(self.keys)
        self.spare: list[Any] = []  # vLLM blocks allocated to the adapter, standing for no cached id
        self.places: dict[BlockId, Place] = {}  # where each cached id lies (the adapter's own record, not the events')
        self.tree = PlaceTree(self.keys)
        self.views: tuple[NodeView, ...] | None = None  # the snapshot's nodes, until a call changes them
        # (hash key, id) of each block evict took, in order; the key is turned into the events' hash only when an
        # event names it (vLLM reads an environment variable for each, about 10 us a block)
        self.evicted_order: deque[tuple[Any, BlockId]] = deque()
        self.root_node = VllmNode(0)
        self.serials = itertools.count(1)
        self.requests = itertools.count()
        self.lookups = self.query_tokens = self.hit_tokens = self.inserted = self.evicted = 0

    @property
    def root(self) -> NodeId:
        return self.root_node

    def block_size(self) -> int:
        return self.size

    # Requests ---------------------------------------------------------------------------------

    def request(self, tokens: Sequence[int], namespace: Namespace) -> Any:
        """A vLLM request for ``tokens`` with the namespace as its ``cache_salt``; its block hashes computed as vLLM's do."""
        return self.vllm.Request(
            request_id=f"prefixspec-{next(self.requests)}",
            prompt_token_ids=list(tokens),
            sampling_params=self.vllm.sampling,
            pooling_params=None,
            cache_salt=namespace_key(namespace),
            block_hasher=self.hasher,
        )

    def computed(self, request: Any) -> tuple[list[Any], int]:
        """``get_computed_blocks``: the cached blocks a request may reuse (up to ``num_tokens - 1``) and their tokens."""
        blocks, tokens, _boundary = self.manager.get_computed_blocks(request)
        found: list[Any] = list(blocks.blocks[0]) if blocks.blocks else []
        return found, int(tokens)

    def node_at(self, place: Place) -> VllmNode:
        """R4: the node ending at ``place`` (a cached prefix), made when none ends there; the root for the empty prefix."""
        if self.keys.is_root(place):
            return self.root_node
        made = VllmNode(next(self.serials))
        node = self.tree.end_node(place, made)
        assert isinstance(node, VllmNode)
        if node is made:
            self.views = None
        return node

    def live(self, node: object) -> tuple[VllmNode, Place]:
        """R6: a node of this cache still in its tree, and where it ends; else UnknownNode (vLLM cannot tell)."""
        if isinstance(node, VllmNode) and node in self.tree.end_of:
            return node, self.tree.end_of[node]
        raise UnknownNode(f"{node!r} is not in the cache")

    def blocks_at(self, place: Place) -> list[Any]:
        """vLLM's blocks a lookup of ``place`` finds: the first at each place from the root."""
        return [self.pool.blocks[vllm_id] for vllm_id in self.tree.chain(place)]

    def callers(self, blocks: Sequence[Any]) -> list[BlockId]:
        return [self.ids.caller_of[block.block_id] for block in blocks]

    # The calls ---------------------------------------------------------------------------------

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        prompt = caller_ids(tokens, "tokens")
        space = caller_namespace(namespace)
        self.lookups += 1
        self.query_tokens += len(prompt)
        if not prompt:
            return PrefixMatch(0, [], self.root_node)
        found, matched = self.computed(self.request(prompt, space))
        self.hit_tokens += matched
        end = self.keys.along(space, prompt[:matched], self.size)[-1] if matched else self.keys.root(space)
        return PrefixMatch(matched, self.callers(found), self.node_at(end))

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        """A request for ``tokens`` that ran and finished: ``allocate_slots`` with the blocks it reused (the
        leading cached ids, as its lookup at admission found them) and new blocks for the rest, the caller's,
        which ``cache_blocks`` caches even where a place holds a block already (a copy, block_pool.py:48-52;
        vLLM looks up once, at admission, kv_cache_manager.py:264-321), then ``free``."""
        prompt, given = caller_ids(tokens, "tokens"), caller_ids(blocks, "blocks")
        space = caller_namespace(namespace)
        size = self.size
        whole = len(prompt) // size
        if len(given) != whole:
            raise InvalidArgument(f"{len(prompt)} tokens take {whole} blocks, got {len(given)}")
        if len(set(given)) != len(given):
            raise InvalidArgument("a block id is repeated within the call")
        places: list[Place] = self.keys.along(space, prompt, size)
        for place, block in zip(places, given):
            if self.ids.cached(block) and self.places[block] != place:
                raise InvalidArgument(f"block {block} is cached at another position")
        if not whole:
            return Inserted(self.root_node, [])
        branch = self.tree.longest_cached(places[-1])
        request = self.request(prompt, space)
        # The request's lookup ran at its admission (the caller's match); the ids say what it reused: the leading
        # positions whose id is a block cached at that very place are its computed blocks, and it computed the
        # rest into new blocks, which vLLM caches even where the place holds a block already.
        computed: list[Any] = []
        for place, block in zip(places, given):
            if not (self.ids.cached(block) and self.places[block] == place):
                break
            computed.append(self.pool.blocks[self.ids.vllm_of[block]])
        kept = len(computed)
        fresh = given[kept:]
        if any(self.ids.cached(block) for block in fresh):
            # R5 dup=keep: a request's blocks are the cached ones it reuses, then new ones (single_type_kv_cache_manager.py:290-313, :399-406).
            raise InvalidArgument("a vLLM request cannot reuse a cached block after a block it computed: its reused blocks lead")
        self.views = None
        duplicates: list[BlockId] = []
        handed: list[Any] = []
        for position, block in enumerate(fresh, start=kept):
            vllm_block = self.spare.pop() if self.spare else self.grow()
            self.ids.bind(block, vllm_block.block_id)
            self.places[block] = places[position]
            self.index.expect(places[position], block)
            handed.append(vllm_block)
        # Blocks without a hash go to the front of the free queue, in this order (block_pool.py:792-801);
        # allocate_slots takes exactly these for the new positions (single_type_kv_cache_manager.py:399-409).
        self.pool.free_blocks(handed)
        allocated = self.manager.allocate_slots(
            request,
            len(fresh) * size,
            num_new_computed_tokens=len(computed) * size,
            new_computed_blocks=self.manager.create_kv_cache_blocks((computed,)),
        )
        if allocated is None:
            raise TranslationError("vLLM refused to allocate the blocks the adapter put at the head of its free queue")
        held = list(self.manager.coordinator.get_blocks(request.request_id)[0])
        if [block.block_id for block in held[len(computed) :]] != [block.block_id for block in handed]:
            raise TranslationError("vLLM did not take the caller's blocks from the head of its free queue")
        self.manager.free(request)
        for position, vllm_block in enumerate(handed, start=kept):
            self.tree.cache(places[position], vllm_block.block_id)
        self.inserted += len(handed)
        if not self.keys.is_root(branch) and branch != places[-1]:
            self.node_at(branch)  # R4: the insert leaves the cached prefix inside a node: a branch point
        return Inserted(self.node_at(places[-1]), duplicates)

    def grow(self) -> Any:
        """One more vLLM block, allocated (``ref_cnt`` 1) to the adapter like every block that holds no cached id."""
        block = self.vllm.KVCacheBlock(len(self.pool.blocks), pool=self.pool)
        block.ref_cnt = 1
        self.pool.blocks.append(block)
        self.pool.num_gpu_blocks += 1
        return block

    def lock(self, node: NodeId) -> None:
        if node is self.root_node:
            return
        live, place = self.live(node)
        namespace, prefix = cast(Namespace, self.keys.namespace(place)), self.keys.tokens(place)
        request = self.request(prefix, namespace)
        allocated = self.manager.allocate_slots(
            request,
            0,
            num_new_computed_tokens=len(prefix),
            new_computed_blocks=self.manager.create_kv_cache_blocks((self.blocks_at(place),)),
        )
        if allocated is None:
            raise TranslationError("vLLM refused a request holding only cached blocks")
        live.locks.append(request)
        self.views = None

    def unlock(self, node: NodeId) -> None:
        if node is self.root_node:
            return
        live, _ = self.live(node)
        if not live.locks:
            raise NotLocked(f"{node!r} holds no lock of its own")
        self.manager.free(live.locks.pop())
        self.views = None

    def evict(self, n_blocks: int) -> list[BlockId]:
        wanted = caller_count(n_blocks)
        count = min(wanted, self.pool.get_num_free_blocks())
        going = list(itertools.islice(self.pool.free_block_queue.iter_blocks_after(None), count))
        keys = [block.block_hash for block in going]
        taken = self.pool.get_new_blocks(count)
        if [block.block_id for block in taken] != [block.block_id for block in going]:
            raise TranslationError("vLLM's get_new_blocks did not pop the head of its free queue")
        self.views = None
        freed = [self.ids.release(block.block_id) for block in taken]
        for block, caller in zip(taken, freed):
            self.tree.evict(block.block_id)
            del self.places[caller]
        self.evicted_order.extend(zip(keys, freed))
        self.spare.extend(taken)
        self.evicted += len(freed)
        return freed

    # Counters (R9): vLLM keeps its own prefix-cache stats per scheduler step; these are the interface's.

    def cached_blocks(self) -> int:
        return len(self.ids.caller_of)

    def cached_tokens(self) -> int:
        return self.cached_blocks() * self.size

    def evictable_blocks(self) -> int:
        """The free queue holds exactly the cached blocks no request holds (uncached ones stay out of it)."""
        return int(self.pool.get_num_free_blocks())

    def stats(self) -> PrefixStats:
        return PrefixStats(self.lookups, self.query_tokens, self.hit_tokens, self.inserted, self.evicted)

    def hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0

    def snapshot(self) -> Snapshot:
        """R11 under ``use=release``: every node (``translation.PlaceTree``) by namespace and prefix, with its
        own first blocks, the further copies at each position, and its lock requests; ``released`` is vLLM's
        free queue from its head: the unpinned blocks in the order ``evict`` (``get_new_blocks``) takes them.

        The nodes are the adapter's own record (no vLLM state in them): built again only after a call changed
        them (``views``), so a snapshot of an unchanged tree costs the free queue's walk alone."""
        if self.views is None:
            self.views = node_views(self.tree, self.ids.caller_of, lambda node: len(cast(VllmNode, node).locks))
        released = tuple(self.ids.caller_of[block.block_id] for block in self.pool.free_block_queue.iter_blocks_after(None))
        return Snapshot(self.size, self.views, self.stats(), released)

    # R13 -----------------------------------------------------------------------------------------

    def take_events(self) -> list[KVEvent]:
        """R13: vLLM's events since the last take (``KVCacheManager.take_events``, kv_cache_manager.py:696),
        one for one, in order, translated as a router would (``translation.HashIndex``):

        - ``BlockStored(block_hashes, parent_block_hash, token_ids, extra_keys, ...)``: the parent is the id
          stored under the parent hash; each block's place is the parent's tokens and a block of the event's
          tokens, in the parent's namespace, or, for a prompt's first block, the namespace its ``extra_keys``
          carry (the cache_salt, ``to_event_extra_keys``, kv_cache_utils.py:666-692); its id is the one the
          insert left at that place;
        - ``BlockRemoved(block_hashes)``: the id vLLM's pool evicted under that hash;
        - ``AllBlocksCleared`` passes through (vLLM publishes it on ``reset_prefix_cache`` only, never here).
        """
        translated: list[KVEvent] = []
        for event in self.manager.take_events():
            kind = type(event).__name__
            if kind == "BlockStored":
                translated.append(self.translate_stored(event))
            elif kind == "BlockRemoved":
                removed = []
                for block_hash in event.block_hashes:
                    if not self.evicted_order:
                        raise TranslationError(f"vLLM's BlockRemoved of hash {block_hash!r} where evict took no block")
                    taken_key, caller = self.evicted_order.popleft()
                    taken_hash = self.vllm.external_hash(taken_key)
                    if taken_hash != block_hash:
                        raise TranslationError(f"vLLM's BlockRemoved names hash {block_hash!r}; the block evict took had {taken_hash!r}")
                    removed.append(self.index.remove(block_hash, caller))
                translated.append(BlockRemoved(tuple(removed)))
            elif kind == "AllBlocksCleared":
                translated.append(AllBlocksCleared())
            else:
                raise TranslationError(f"vLLM published an event of an unknown kind: {event!r}")
        return translated

    def translate_stored(self, event: Any) -> BlockStored:
        if event.lora_id is not None or event.lora_name is not None:
            raise TranslationError(f"vLLM's BlockStored carries a LoRA adapter the adapter never named: {event!r}")
        hashes = list(event.block_hashes)
        tokens = [int(token) for token in event.token_ids]
        if not hashes or len(tokens) != len(hashes) * self.size:
            raise TranslationError(f"vLLM's BlockStored of {len(hashes)} hashes and {len(tokens)} tokens is not one block a hash: {event!r}")
        parent, parent_place = self.index.parent(event.parent_block_hash)
        salt: str | None = None
        if parent_place is None and event.extra_keys and event.extra_keys[0]:
            salt = event.extra_keys[0][0]
        namespace = cast(Namespace, self.keys.namespace(parent_place)) if parent_place is not None else namespace_of(salt)
        places = stored_places(self.keys, parent_place, namespace, tokens, self.size)
        stored = [self.index.store(block_hash, place) for block_hash, place in zip(hashes, places)]
        return BlockStored(parent, tuple(tokens), tuple(stored), namespace)


def make_cache(block_size: int) -> VllmCache:
    """``prefixspec check examples.vllm.adapter:make_cache --rules vllm``."""
    return VllmCache(block_size)
