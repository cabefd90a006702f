"""A tiny vLLM-shaped block pool, written from vLLM 0.32.0's ``v1/core`` alone, to check the ``vllm`` rules against.

It shares no code or state layout with ``spec.model`` or ``impl``: blocks are found by a chained hash
of their prefix (``kv_cache_utils.hash_block_tokens``), every block has a reference count, and the
blocks whose count is zero wait in a doubly linked free queue (``FreeKVCacheBlockQueue``).  It knows
no nodes: a "request" is a list of blocks it holds, which is what vLLM's ``KVCacheManager`` knows.

- ``lookup`` is ``find_longest_cache_hit``: the first block under each hash, touching nothing
  (``single_type_kv_cache_manager.py:743-786``, ``block_pool.py:62-71`` returns the first of a hash's blocks).
- ``run`` is a request that computed ``blocks`` for ``tokens``: it holds each (``touch``, ``block_pool.py:752-768``),
  caches the ones without a hash, a second block under a hash included (``cache_full_blocks``,
  ``block_pool.py:226-301``, NOTE #1 at ``block_pool.py:48-52``), and returns them as a request.
- ``free`` lets a request go, its blocks in reverse (``single_type_kv_cache_manager.py:581-589``); a block whose
  count falls to zero joins the queue's tail (``block_pool.py:774-803``).
- ``allocate(n)`` pops exactly n blocks off the queue's head and uncaches them (``get_new_blocks``,
  ``block_pool.py:666-700``, ``_maybe_evict_cached_block`` at ``block_pool.py:729-750``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

BlockHash = Hashable


@dataclass(eq=False)
class PoolBlock:
    block_id: int
    ref_cnt: int = 0
    block_hash: BlockHash | None = None
    prev: PoolBlock | None = None
    next: PoolBlock | None = None


class FreeQueue:
    """vLLM's free queue: a doubly linked list between a fake head and a fake tail, in eviction order."""

    def __init__(self) -> None:
        self.head = PoolBlock(-1)
        self.tail = PoolBlock(-1)
        self.head.next = self.tail
        self.tail.prev = self.head
        self.size = 0

    def append(self, block: PoolBlock) -> None:
        last = self.tail.prev
        assert last is not None
        last.next, block.prev, block.next, self.tail.prev = block, last, self.tail, block
        self.size += 1

    def remove(self, block: PoolBlock) -> None:
        before, after = block.prev, block.next
        assert before is not None and after is not None, f"block {block.block_id} is not in the free queue"
        before.next, after.prev = after, before
        block.prev = block.next = None
        self.size -= 1

    def popleft(self) -> PoolBlock:
        first = self.head.next
        assert first is not None and first is not self.tail
        self.remove(first)
        return first

    def ids(self) -> list[int]:
        found: list[int] = []
        walker = self.head.next
        while walker is not None and walker is not self.tail:
            found.append(walker.block_id)
            walker = walker.next
        return found


def chain_hash(parent: BlockHash | None, tokens: Sequence[int], salt: Hashable) -> BlockHash:
    """A block's hash: its parent's, its tokens, and the cache salt (the namespace) for the first block."""
    return (parent, tuple(tokens), salt if parent is None else None)


@dataclass
class Events:
    stored: list[tuple[int | None, tuple[int, ...], int]] = field(default_factory=list)
    """(parent block, the block's tokens, the block), in order, one per block."""
    removed: list[int] = field(default_factory=list)


class VllmPool:
    """The block pool; ``blocks`` are made as ids are first seen (the adapter's mapping of the caller's ids)."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.blocks: dict[int, PoolBlock] = {}
        self.cached: dict[BlockHash, dict[int, PoolBlock]] = {}
        self.queue = FreeQueue()
        self.events = Events()

    def hashes(self, tokens: Sequence[int], salt: Hashable) -> list[BlockHash]:
        found: list[BlockHash] = []
        parent: BlockHash | None = None
        for end in range(self.block_size, len(tokens) + 1, self.block_size):
            parent = chain_hash(parent, tokens[end - self.block_size : end], salt)
            found.append(parent)
        return found

    def lookup(self, tokens: Sequence[int], salt: Hashable = None) -> list[int]:
        """The longest cache hit of all but the last token, the first block under each hash."""
        hit: list[int] = []
        for block_hash in self.hashes(tokens[: max(len(tokens) - 1, 0)], salt):
            under = self.cached.get(block_hash)
            if not under:
                break
            hit.append(next(iter(under.values())).block_id)
        return hit

    def hold(self, block: PoolBlock) -> None:
        if block.ref_cnt == 0:
            self.queue.remove(block)
        block.ref_cnt += 1

    def valid_run(self, tokens: Sequence[int], ids: Sequence[int], salt: Hashable = None) -> bool:
        """Whether a request may hold ``ids`` for ``tokens``: one id per whole block, none twice, none cached elsewhere,
        and the cached ones first: its block list is the computed blocks, then new ones
        (``single_type_kv_cache_manager.py:290-313``, ``:399-406``)."""
        hashes = self.hashes(tokens, salt)
        if len(ids) != len(hashes) or len(set(ids)) != len(ids):
            return False
        reusing = True  # a request reuses the cached blocks its lookup found, then computes new ones
        for block_id, block_hash in zip(ids, hashes):
            block = self.blocks.get(block_id)
            held_hash = block.block_hash if block is not None else None
            if held_hash is not None and (held_hash != block_hash or not reusing):
                return False
            reusing = reusing and held_hash is not None
        return True

    def run(self, tokens: Sequence[int], ids: Sequence[int], salt: Hashable = None) -> list[PoolBlock]:
        """A request that computed ``ids`` for ``tokens``: it holds them, and the ones without a hash are cached."""
        request: list[PoolBlock] = []
        parent_id: int | None = None
        for index, (block_id, block_hash) in enumerate(zip(ids, self.hashes(tokens, salt))):
            block = self.blocks.setdefault(block_id, PoolBlock(block_id))
            if block.block_hash is None:
                block.block_hash = block_hash
                self.cached.setdefault(block_hash, {})[block_id] = block
                start = index * self.block_size
                self.events.stored.append((parent_id, tuple(tokens[start : start + self.block_size]), block_id))
                block.ref_cnt += 1
            else:
                self.hold(block)
            request.append(block)
            parent_id = block_id
        return request

    def request_for(self, ids: Sequence[int]) -> list[PoolBlock]:
        """A request holding cached blocks a lookup returned (a lock)."""
        request = [self.blocks[block_id] for block_id in ids]
        for block in request:
            self.hold(block)
        return request

    def free(self, request: list[PoolBlock]) -> None:
        for block in reversed(request):
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                self.queue.append(block)

    def allocate(self, count: int) -> list[int]:
        """Pop exactly ``min(count, free)`` blocks off the head of the queue, uncaching each."""
        taken: list[int] = []
        for _ in range(min(count, self.queue.size)):
            block = self.queue.popleft()
            assert block.block_hash is not None
            under = self.cached[block.block_hash]
            del under[block.block_id]
            if not under:
                del self.cached[block.block_hash]
            block.block_hash = None
            del self.blocks[block.block_id]
            taken.append(block.block_id)
            self.events.removed.append(block.block_id)
        return taken

    def cached_blocks(self) -> int:
        return sum(len(under) for under in self.cached.values())

    def copies_by_hash(self) -> dict[BlockHash, list[int]]:
        return {block_hash: list(under) for block_hash, under in self.cached.items()}
