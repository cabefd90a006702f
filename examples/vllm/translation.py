"""What the vLLM adapter translates, with no vLLM in it: ids, nodes, events.

vLLM's ``KVCacheManager`` speaks of ``KVCacheBlock`` objects with ids it picks
itself, of requests, of block hashes; the interface speaks of the caller's block
ids, of nodes and of prefixes.  The parts of the translation that need no vLLM
live here, so that ``make test`` checks them without vLLM installed:

- ``BlockIds``: the caller's block ids and the vLLM block standing for each while
  it is cached (and the generation of that vLLM block, so that a node over a
  block that was evicted and reused is stale, R6);
- ``HashIndex``: KV events keyed by block hash turned into block ids as a router
  would (``BlockStored`` names hashes and tokens, never ids);
- ``NodeTable``: the adapter's nodes (vLLM has none), each a chain of vLLM blocks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from spec.api import BlockId, Namespace, NodeView
from examples.places import PlaceKey, PlaceKeys

Place = PlaceKey
"""A cached prefix: its namespace and its tokens, a whole number of blocks long, as ``PlaceKeys`` numbers it (a
tuple of its tokens would make an insert of n blocks quadratic in time and memory)."""


NO_PLACES: frozenset[Place] = frozenset()


class TranslationError(RuntimeError):
    """vLLM did something the adapter cannot translate (an event naming an unknown hash, a block out of place)."""


@dataclass
class BlockIds:
    """The caller's block ids and the vLLM block ids standing for them while they are cached.

    vLLM allocates its blocks itself (``BlockPool.get_new_blocks`` pops the head of its free
    queue, block_pool.py:666-700); the caller of the interface chose its ids already.  So a
    caller's id is mapped to a vLLM block when an insert caches it, and unmapped when vLLM
    evicts that block; the vLLM blocks that stand for no cached id are the adapter's ``spare``.
    Each vLLM block's ``generation`` counts its evictions, so a chain of (block, generation)
    names one lifetime of those blocks.
    """

    vllm_of: dict[BlockId, int] = field(default_factory=dict)
    caller_of: dict[int, BlockId] = field(default_factory=dict)
    generation: dict[int, int] = field(default_factory=dict)

    def bind(self, caller: BlockId, vllm_block: int) -> None:
        if caller in self.vllm_of or vllm_block in self.caller_of:
            raise TranslationError(f"caller id {caller} or vLLM block {vllm_block} is bound already")
        self.vllm_of[caller] = vllm_block
        self.caller_of[vllm_block] = caller
        self.generation.setdefault(vllm_block, 0)

    def release(self, vllm_block: int) -> BlockId:
        """vLLM evicted ``vllm_block``: its caller id is free again, and the block lives anew."""
        caller = self.caller_of.pop(vllm_block, None)
        if caller is None:
            raise TranslationError(f"vLLM evicted block {vllm_block}, which stands for no id the caller cached")
        del self.vllm_of[caller]
        self.generation[vllm_block] += 1
        return caller

    def cached(self, caller: BlockId) -> bool:
        return caller in self.vllm_of

    def lifetime(self, vllm_block: int) -> tuple[int, int]:
        return (vllm_block, self.generation.get(vllm_block, 0))


class HashIndex:
    """A router's index of vLLM's KV events: block hash -> the caller's ids cached under it.

    vLLM's ``BlockStored`` carries block hashes, the parent's hash and the tokens
    (block_pool.py:363-374), never a block id; ``BlockRemoved`` carries a hash
    (block_pool.py:617-624).  A router keys its index by hash; the ids come from the
    inserts the caller made: each new block of an insert waits under its place
    (namespace and tokens) until the ``BlockStored`` that stores that place names its
    hash.  vLLM caches a second block under a hash it holds already (``BlockHashToBlockMap``,
    block_pool.py:48-52 and 85-99), so a hash may name several ids, oldest first, as vLLM's
    map keeps them (``get_one_block`` serves the first, block_pool.py:62-71).
    """

    def __init__(self, keys: PlaceKeys) -> None:
        self.keys = keys
        self.ids_of: dict[Hashable, list[BlockId]] = {}
        self.place_of: dict[Hashable, Place] = {}
        self.awaiting: dict[Place, deque[BlockId]] = {}

    def expect(self, place: Place, caller: BlockId) -> None:
        """An insert handed ``caller`` to vLLM at ``place``; its BlockStored will name it by hash."""
        self.awaiting.setdefault(place, deque()).append(caller)

    def parent(self, parent_hash: Hashable | None) -> tuple[BlockId | None, Place | None]:
        """The id and place a BlockStored's parent hash stands for (None, None for a first block).

        With copies under the hash, the oldest: the one vLLM's lookup served the request."""
        if parent_hash is None:
            return None, None
        ids = self.ids_of.get(parent_hash)
        if not ids:
            raise TranslationError(f"vLLM's BlockStored names parent hash {parent_hash!r}, which no live BlockStored stored")
        return ids[0], self.place_of[parent_hash]

    def store(self, block_hash: Hashable, place: Place) -> BlockId:
        """A BlockStored stores ``place`` under ``block_hash``: the id the insert left waiting there."""
        waiting = self.awaiting.get(place)
        if not waiting:
            raise TranslationError(f"vLLM's BlockStored stores {list(self.keys.tokens(place))} (namespace {self.keys.namespace(place)!r}), where no insert left a block")
        caller = waiting.popleft()
        if not waiting:
            del self.awaiting[place]
        known = self.place_of.setdefault(block_hash, place)
        if known != place:
            raise TranslationError(f"vLLM's hash {block_hash!r} stands for {list(self.keys.tokens(known))} and {list(self.keys.tokens(place))}")
        self.ids_of.setdefault(block_hash, []).append(caller)
        return caller

    def remove(self, block_hash: Hashable, evicted: BlockId) -> BlockId:
        """A BlockRemoved of ``block_hash``: the id that vLLM's pool evicted, which must be one stored under it.

        A hash names a prefix, not a block: where copies share it, the event cannot say which
        went, so the adapter names the one ``get_new_blocks`` handed back, in the order vLLM
        emits the events (one per evicted block, block_pool.py:744-749)."""
        ids = self.ids_of.get(block_hash)
        if not ids or evicted not in ids:
            raise TranslationError(f"vLLM's BlockRemoved of hash {block_hash!r} while the block it evicted, {evicted}, is not stored under it")
        ids.remove(evicted)
        if not ids:
            del self.ids_of[block_hash]
            del self.place_of[block_hash]
        return evicted


def stored_places(keys: PlaceKeys, parent: Place | None, namespace: Namespace, tokens: Sequence[int], block_size: int) -> list[Place]:
    """The place of each block of a BlockStored under ``parent`` (its namespace wins when there is one)."""
    at = keys.root(namespace) if parent is None else parent
    places: list[Place] = []
    for end in range(block_size, len(tokens) + 1, block_size):
        at = keys.extend(at, tokens[end - block_size : end])
        places.append(at)
    return places


class PlaceTree:
    """Where the interface's nodes begin and end over vLLM's hash-chained blocks.

    vLLM keeps blocks by hash and no tree.  A hash names a *place*: a namespace and a
    whole-block token prefix, chained through its parent's hash (kv_cache_utils.py:695-725).
    The places form the tree.  The *first* block cached at a place is the one vLLM's lookup
    serves (``get_one_block``, block_pool.py:62-71), so it is the parent of every block cached
    after its place (a request's new blocks follow the blocks its lookup found).  Further
    blocks at a place are *copies* (vLLM does not de-duplicate, block_pool.py:48-52), shown
    at their position of the node that holds it (``NodeView.copies``).

    Nodes end (R4) where a call returned a node (a match's or an insert's end) and where an
    insert left the cached prefix (a branch point); ``node_at`` holds them by their end.  vLLM
    evicts blocks one at a time (R8 ``unit=block``): the first block of a place that goes
    hands the place to the next copy; a place's last block cuts its leaf, whose node then ends
    one block higher (it keeps its handle), or is gone when it held that block alone.
    """

    def __init__(self, keys: PlaceKeys) -> None:
        self.keys = keys
        self.copies: dict[Place, list[int]] = {}
        self.place_of: dict[int, Place] = {}
        self.extensions: dict[Place, set[Place]] = {}  # the cached places one block longer, for places that have any
        self.node_at: dict[Place, object] = {}
        self.end_of: dict[object, Place] = {}
        self.roots: set[Place] = set()  # the namespaces' empty prefixes that places were cached under

    def parent(self, place: Place) -> Place:
        return self.keys.parent(place)

    def first(self, place: Place) -> int | None:
        blocks = self.copies.get(place)
        return blocks[0] if blocks else None

    def above(self, place: Place) -> list[Place]:
        """``place`` and every place above it up to its namespace's root (excluded), deepest first."""
        found: list[Place] = []
        at = place
        while not self.keys.is_root(at):
            found.append(at)
            at = self.parent(at)
        return found

    def chain(self, place: Place) -> list[int]:
        """The first blocks of ``place`` and of every place above it, in token order (what a lookup finds)."""
        return [self.copies[at][0] for at in reversed(self.above(place))]

    def longest_cached(self, place: Place) -> Place:
        """The longest whole-block prefix of ``place`` that is cached (its namespace's root when none is)."""
        path = self.above(place)
        longest = self.parent(path[-1]) if path else place
        for at in reversed(path):
            if at not in self.copies:
                break
            longest = at
        return longest

    def cache(self, place: Place, block: int) -> None:
        """vLLM cached ``block`` at ``place`` (a copy when the place holds a block already)."""
        blocks = self.copies.setdefault(place, [])
        if not blocks:
            above = self.parent(place)
            self.extensions.setdefault(above, set()).add(place)
            if self.keys.is_root(above):
                self.roots.add(above)
        blocks.append(block)
        self.place_of[block] = place

    def end_node(self, place: Place, new_node: object) -> object:
        """The node ending at ``place``: the one there, else ``new_node``, which ends there from now on."""
        node = self.node_at.setdefault(place, new_node)
        self.end_of[node] = place
        return node

    def parent_end(self, place: Place) -> Place:
        """The end of the node above the node ending at ``place`` (the namespace's empty prefix: the root)."""
        at = self.parent(place)
        while not self.keys.is_root(at) and at not in self.node_at:
            at = self.parent(at)
        return at

    def evict(self, block: int) -> None:
        """vLLM evicted ``block``: a copy goes alone, a first block hands its place to the next copy, a place's
        last block cuts its leaf (TranslationError if blocks cached after it live: vLLM would have broken a chain)."""
        place = self.place_of.pop(block)
        blocks = self.copies[place]
        blocks.remove(block)
        if blocks:
            return
        if self.extensions.get(place):
            raise TranslationError(f"vLLM evicted the block at {list(self.keys.tokens(place))} while blocks cached after it live")
        node = self.node_at.pop(place, None)
        if node is None:
            raise TranslationError(f"vLLM evicted the block at {list(self.keys.tokens(place))}, which ends no leaf")
        del self.end_of[node]
        above = self.parent(place)
        if not self.keys.is_root(above) and above not in self.node_at:
            self.node_at[above] = node  # the cut leaf keeps its handle, one block shorter
            self.end_of[node] = above
        del self.copies[place]
        self.extensions.pop(place, None)
        self.extensions[above].discard(place)

    def nodes(self) -> list[tuple[Place, object, list[int], list[list[int]]]]:
        """Every node as (its end, its handle, its own first blocks in token order, the further copies at each),
        walking the places down from each namespace's root once.

        A node's lists grow in place down its chain of places (copied only where a place with no node ends
        branches): a node of n blocks costs O(n), not the O(n^2) of a fresh list at each block."""
        found: list[tuple[Place, object, list[int], list[list[int]]]] = []
        walk: list[tuple[Place, list[int], list[list[int]]]] = []
        for top in self.roots:
            walk.extend((place, [], []) for place in self.extensions[top])
        while walk:
            place, own, copies = walk.pop()
            while True:  # down one chain of places, to the node that ends it
                blocks = self.copies[place]
                own.append(blocks[0])
                copies.append(blocks[1:])
                node = self.node_at.get(place)
                below = self.extensions.get(place, NO_PLACES)
                if node is not None:
                    found.append((place, node, own, copies))
                    walk.extend((longer, [], []) for longer in below)
                    break
                if len(below) != 1:
                    walk.extend((longer, list(own), list(copies)) for longer in below)
                    break
                (place,) = below
        return found


def node_views(tree: PlaceTree, caller_of: Mapping[int, BlockId], locks_of: Callable[[object], int]) -> tuple[NodeView, ...]:
    """R11's nodes of a ``PlaceTree``: each by namespace and prefix, with its own first blocks and the further copies
    at each position as the caller's ids, and ``locks_of`` its handle; sorted by namespace, then prefix."""
    keys = tree.keys
    views: list[NodeView] = []
    for place, node, own, copies in tree.nodes():
        shown = tuple(tuple(map(caller_of.__getitem__, at)) for at in copies) if any(copies) else ()
        namespace = cast(Namespace, keys.namespace(place))
        views.append(NodeView(keys.tokens(place), tuple(map(caller_of.__getitem__, own)), locks_of(node), namespace, shown))
    views.sort(key=lambda view: (repr(view.namespace), view.prefix))
    return tuple(views)
