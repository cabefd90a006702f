"""The state of impl's radix tree, and how blocks leave it: eviction (R8), releases (R7 ``use=release``), copies (R5 ``dup=keep``).

``EvictableTree`` holds every field of the tree and the methods that take
blocks out of it or order them for that: removing or cutting a leaf, the
oldest leaf of the queue (``impl.leaf_queue``) or the block released longest
ago, and the release stamps the snapshot digest reads.  ``impl.radix.RadixTree``
adds lookup, splits, new leaves, locks and uses on top.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from heapq import heappop

from impl.ids import HeldIds
from impl.leaf_queue import LeafQueue
from impl.node import TOKEN_BYTES, TOKEN_TYPECODE, Node, eviction_key
from spec.api import Rules, block_digest_term


class EvictableTree(LeafQueue):
    """The fields of a tree of cached prefixes, and its eviction; see ``impl.radix.RadixTree`` for the whole tree.

    Public counters, read only outside the tree, kept exact by every method:
    ``cached_blocks`` (blocks held), ``evictable_blocks`` (blocks of unpinned
    nodes) and ``held_ids`` (the block ids held, see ``impl.ids``).
    """

    def __init__(self, block_size: int, rules: Rules = Rules()) -> None:
        """An empty tree for ``block_size`` tokens a block (>= 1; the caller checks R1), evicting by ``rules``.

        Runtime complexity: O(1).
        """
        super().__init__(eviction_key(rules))
        self.block_size = block_size
        self._block_bytes = block_size * TOKEN_BYTES
        self._inherit_creation = rules.split == "inherit"
        self.root = Node(self, None, b"", b"", array(TOKEN_TYPECODE), 0, 0, 0)
        self.cached_blocks = 0
        self.evictable_blocks = 0
        self.held_ids = HeldIds()
        # Variant use=release (R7, vLLM): the unpinned cached blocks in the order they were released, copies
        # included, as vLLM's free queue; a block's node (for a cut or a copy taking its place) by id.
        self.released: OrderedDict[int, None] | None = OrderedDict() if rules.use == "release" else None
        self.node_of: dict[int, Node] = {}
        # Variant dup=keep (R5): the further copies of a position, keyed by the block a match returns there.
        self.copies: dict[int, list[int]] = {}
        self.copy_of: dict[int, int] = {}
        # What the snapshot digest needs (R11, ``impl.digest``): the nodes changed in shape, or in locks and order,
        # since the digest was last brought up to date; under use=release, every cached block's last release as
        # (the call's clock, its order among the call's releases), and the sum of their digest terms.
        # Marked only once a digest was asked for (``tracking``): a tree nobody digests keeps no set of every node.
        self.tracking = False
        self.reshaped: set[Node] = set()
        self.restamped: set[Node] = set()
        self.release_stamps: dict[int, tuple[int, int]] = {}
        self.block_terms = 0
        self._stamp_clock = -1
        self.release_clock = 0
        """Under use=release, the clock of the unlock being made (set by the cache): its releases' stamps."""
        self._stamp_rank = 0

    def evict_first_leaf(self) -> list[int] | None:
        """Remove the unpinned leaf with the smallest eviction key; return its blocks in token order.

        None when no unpinned leaf is left.  A parent that becomes an unpinned
        leaf joins the queue at its own key (R8).

        Runtime complexity: O(1) amortised, plus O(log q) when the oldest
        entry is in the heap, q the entries of the LRU queue.
        """
        fifo = self._fifo
        heap = self._heap
        while True:
            if fifo and (not heap or fifo[0] < heap[0]):
                _, seq, leaf = fifo.popleft()
            elif heap:
                _, seq, leaf = heappop(heap)
            else:
                return None
            if leaf.queue_seq == seq:
                break
            self._stale -= 1
        leaf.queue_seq = -1
        parent = leaf.parent
        del parent.children[leaf.key]
        leaf.owner = None
        if self.tracking:
            self.reshaped.add(leaf)
        blocks = leaf.blocks.tolist()  # the ints, made once, serve the release and the caller
        self.cached_blocks -= len(blocks)
        self.evictable_blocks -= len(blocks)
        self.held_ids.release(blocks)
        if parent is not self.root and not parent.children and parent.pins == 0:
            self._enqueue(parent)
        self._compact_if_stale()
        return blocks

    def cut_leaf(self, leaf: Node, count: int) -> list[int]:
        """Uncache the last ``count`` blocks of the unpinned ``leaf`` (fewer than it holds); them, tail first (R8 unit=block).

        The leaf keeps its identity, its key and its place in the queue, one block shorter per block cut.
        Runtime complexity: O(count) in C, O(1) Python steps but under use=release (one per block).
        """
        kept = len(leaf.blocks) - count
        cut = leaf.blocks[kept:]
        leaf.blocks = leaf.blocks[:kept]
        leaf.segment = leaf.segment[: kept * self._block_bytes]
        leaf.end -= count * self.block_size
        ids = cut.tolist()
        ids.reverse()
        self.cached_blocks -= count
        self.evictable_blocks -= count
        self.held_ids.release(ids)
        if self.tracking:
            self.reshaped.add(leaf)
        if self.released is not None:
            for block in ids:
                del self.node_of[block]
                self.forget_stamp(block)
        return ids

    def remove_leaf(self, leaf: Node) -> list[int]:
        """Remove the unpinned leaf ``leaf`` whole; its blocks in token order (R8).

        Runtime complexity: O(blocks) in C, O(1) Python steps.
        """
        self._dequeue(leaf)
        parent = leaf.parent
        del parent.children[leaf.key]
        leaf.owner = None
        if self.tracking:
            self.reshaped.add(leaf)
        blocks = leaf.blocks.tolist()
        self.cached_blocks -= len(blocks)
        self.evictable_blocks -= len(blocks)
        self.held_ids.release(blocks)
        if self.released is not None:
            for block in blocks:
                del self.node_of[block]
                self.forget_stamp(block)
        if parent is not self.root and not parent.children and parent.pins == 0:
            self._enqueue(parent)
        return blocks

    def evict_released(self) -> int | None:
        """R8 under use=release: uncache the block released longest ago; None when no block is unpinned.

        A spare copy goes alone; the block a match returns leaves its place to the oldest copy; a position's
        only block is the last block of a leaf (a path is released tail first), which is cut.
        Runtime complexity: O(1) Python steps, O(blocks of the leaf) in C for a cut.
        """
        released = self.released
        assert released is not None
        if not released:
            return None
        block, _ = released.popitem(last=False)
        primary = self.copy_of.pop(block, None)
        if primary is not None:
            if self.tracking:
                self.reshaped.add(self.node_of[primary])
            self.forget_stamp(block)
            others = self.copies[primary]
            others.remove(block)
            if not others:
                del self.copies[primary]
            self.cached_blocks -= 1
            self.evictable_blocks -= 1
            self.held_ids.release([block])
            return block
        node = self.node_of[block]
        others = self.copies.pop(block, [])
        if others:
            successor = others.pop(0)
            del self.copy_of[successor]
            if others:
                self.copies[successor] = others
                self.copy_of.update(dict.fromkeys(others, successor))
            node.blocks[node.blocks.index(block)] = successor
            del self.node_of[block]
            self.node_of[successor] = node
            if self.tracking:
                self.reshaped.add(node)
            self.forget_stamp(block)
            self.cached_blocks -= 1
            self.evictable_blocks -= 1
            self.held_ids.release([block])
            return block
        assert node.blocks[-1] == block and not node.children, f"block {block}: the release order reached a block a cached prefix extends"
        if len(node.blocks) == 1:
            self.remove_leaf(node)
        else:
            self.cut_leaf(node, 1)
        self._compact_if_stale()
        return block

    def release_blocks(self, blocks: list[int], clock: int) -> None:
        """R7 under use=release: the call at ``clock`` lets go of ``blocks`` (a path, token order); each that no
        lock pins goes to the back of the released order, tail first.

        Runtime complexity: O(len(blocks)) Python steps, one per block.
        """
        released = self.released
        assert released is not None
        node_of = self.node_of
        copy_of = self.copy_of
        for block in reversed(blocks):
            if block not in copy_of and node_of[block].pins:
                continue
            released.pop(block, None)
            released[block] = None
            self.stamp_release(block, clock)

    def stamp_release(self, block: int, clock: int) -> None:
        """R7 under use=release: ``block`` was released by the call at ``clock``, after the call's earlier releases
        (the stamp and digest term ``impl.digest`` reads).  Runtime complexity: O(1)."""
        if clock != self._stamp_clock:
            self._stamp_clock, self._stamp_rank = clock, 0
        self._stamp_rank += 1
        self.forget_stamp(block)
        stamp = self.release_stamps[block] = (clock, self._stamp_rank)
        self.block_terms += block_digest_term(block, stamp)

    def forget_stamp(self, block: int) -> None:
        """``block``'s release stamp and digest term are gone (it is uncached, or released anew).  Runtime complexity: O(1)."""
        stamp = self.release_stamps.pop(block, None)
        if stamp is not None:
            self.block_terms -= block_digest_term(block, stamp)

    def add_copy(self, primary: int, block: int) -> None:
        """R5 under dup=keep: ``block`` (claimed in ``held_ids``) is cached as one more copy of ``primary``'s position.

        Runtime complexity: O(1).
        """
        self.copies.setdefault(primary, []).append(block)
        self.copy_of[block] = primary
        self.cached_blocks += 1
        self.evictable_blocks += 1
        if self.tracking:
            self.reshaped.add(self.node_of[primary])  # dup=keep comes with use=release, which keeps node_of
