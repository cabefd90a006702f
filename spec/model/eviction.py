"""R8: eviction: the key leaves go by, whole leaves freed (``unit=leaf``) or one block at a time (``unit=block``)."""

from __future__ import annotations

import heapq

from spec.api import BlockId, BlockRemoved
from spec.model.state import Prefix, Stamp, as_count
from spec.model.use import Using


class Evicting(Using):
    """``Using`` and R8, below."""

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
        if evict == "lru":
            return last_use
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
        raise AssertionError(f"no eviction rule {evict!r}")  # Rules admits none other

    def remove_leaf(self, prefix: Prefix) -> list[BlockId]:
        """R8: remove a leaf node whole, returning its blocks in token order."""
        own = self.own_prefixes(prefix)
        freed = self.blocks_of(reversed(own))
        for at in own:  # its own blocks, the last first
            self.drop_block(at)
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
        if self._rules.unit == "block":
            freed = self.evict_blocks(wanted)
        else:
            freed = self.evict_leaves(wanted)
        self._evicted_blocks += len(freed)
        if freed:
            self._events.append(BlockRemoved(tuple(freed)))
        return freed

    def evict_leaves(self, wanted: int) -> list[BlockId]:
        """R8, variant ``unit=leaf`` (strict): whole unpinned leaves, first to go first, until ``wanted`` blocks are freed."""
        waiting: list[tuple[tuple[int, ...], Prefix]] = []
        for prefix in self._node_at:
            if self.is_leaf(prefix) and not self.leaf_is_pinned(prefix):
                waiting.append((self.eviction_key(prefix), prefix))
        heapq.heapify(waiting)
        freed: list[BlockId] = []
        while len(freed) < wanted and waiting:
            _key, leaf = heapq.heappop(waiting)
            blocks = self.remove_leaf(leaf)
            freed.extend(blocks)
            # A node's own blocks are those since its parent's end (R4), so the parent ends as many blocks above it.
            parent = (leaf[0], leaf[1][: len(leaf[1]) - len(blocks) * self._block_size])
            if parent[1] and self.is_leaf(parent) and not self.leaf_is_pinned(parent):
                heapq.heappush(waiting, (self.eviction_key(parent), parent))
        return freed

    def evict_blocks(self, wanted: int) -> list[BlockId]:
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
            pinned = self.pinned_prefixes()
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
            if self.is_leaf(prefix) and not self.leaf_is_pinned(prefix):
                leaves.append((self.eviction_key(prefix), prefix))
        heapq.heapify(leaves)
        while len(freed) < wanted and leaves:
            key, leaf = heapq.heappop(leaves)
            parent = (leaf[0], leaf[1][: self.parent_end(leaf)])
            freed.append(self._block_at[leaf])
            shorter = self.cut_leaf(leaf)
            if shorter is not None:
                heapq.heappush(leaves, (key, shorter))
            elif parent[1] and self.is_leaf(parent) and not self.leaf_is_pinned(parent):
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
