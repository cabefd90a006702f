"""A block-granular radix tree with lock pins and a queue of evictable leaves in eviction order.

This module holds the tree mechanics only: finding the longest stored prefix of
a query, splitting a node at a block boundary, adding and removing leaves,
counting locks, recording uses and keeping the least recently used evictable
leaf at hand.  The rules of the cache API (validation, duplicates, counters,
what a call returns) live in ``impl.cache``.

Tokens are handled as the native bytes of an ``array('I')`` (4 bytes a token):
a query is converted once, and whole segments are then compared with
``bytes.startswith`` at an offset, in C and without copying, so no Python code
ever runs per token.

The tree never recurses: a 100,000-token prompt at block size 1 may make it
100,000 nodes deep.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from heapq import heapify, heappop, heappush
from operator import attrgetter
from typing import TypeGuard

from impl.blocks import block_span, segment_blocks
from impl.ids import HeldIds
from spec.api import Namespace, Rules, block_digest_term

TOKEN_TYPECODE = "I"
"""The array typecode of tokens and block ids: unsigned, 4 bytes, so converting
to it checks R1's range [0, 2**32) in C."""

TOKEN_BYTES = array(TOKEN_TYPECODE).itemsize
if TOKEN_BYTES != 4:
    raise ImportError(f"array('{TOKEN_TYPECODE}') holds {TOKEN_BYTES} bytes here; R1 needs exactly 4")

Key = int | tuple[int, ...]
"""A leaf's place in the eviction order (R8): the smallest goes first."""

QueueEntry = tuple[Key, int, "Node"]

ChildKey = bytes | tuple[Namespace, bytes]
"""A child's key in its parent's ``children``: its first block's bytes; below the root, outside the
default namespace, the namespace and those bytes (R12), so that namespaces meet nowhere below the root."""
"""(eviction key, seq, leaf): seq is unique, so entries never compare their nodes."""



def eviction_key(rules: Rules) -> Callable[[Node], Key]:
    """The key of a leaf in the eviction order of ``rules.evict`` (R8), ranks of a call's uses included (R7).

    The default rule set, ``lru`` with ``use=path``, keys by the last use
    alone: an int, the cheapest to build and compare (benchmark: bench/,
    issue 7, measured with int keys).
    """
    if rules.evict == "lru" and rules.use == "path":
        return attrgetter("last_use")
    if rules.evict == "lru":
        return lambda node: (node.last_use, node.use_rank)
    if rules.evict == "lfu":
        return lambda node: (node.hits, node.last_use, node.use_rank)
    if rules.evict == "fifo":
        return lambda node: (node.created, node.created_rank, node.last_use, node.use_rank)
    if rules.evict == "mru":
        return lambda node: (-node.last_use, -node.use_rank)
    if rules.evict == "slru":
        threshold = rules.slru_threshold
        return lambda node: (int(node.hits >= threshold), node.last_use, node.use_rank)
    return lambda node: (-node.created, -node.created_rank, node.last_use, node.use_rank)


class Node:
    """One node of the tree: the whole blocks of a cached prefix past its parent's end.

    A node object is its own NodeId: it is hashable by identity and never reused.
    Every attribute is read only outside ``RadixTree``.

    - ``owner``: the tree holding the node, ``None`` once it is evicted.
    - ``parent``: the node above; the root is its own parent.
    - ``segment``: the node's own tokens as native ``'I'`` bytes, whole blocks.
    - ``key``: the first block of ``segment``, the node's key in its parent's
      ``children``, kept so that eviction need not slice the segment again;
      a child of the root outside the default namespace is keyed by
      ``(namespace, first block)`` (R12).
    - ``blocks``: one block id per block of ``segment``, in token order, as an
      ``array('I')``: 4 bytes a block where a list of ints took 36, which
      took impl from 7.4 to 5.4 bytes per cached token at 10^6 cached blocks
      (benchmark: bench/ memory, issue 7).  Calls that return ids make the
      ints in one C call (``tolist``).
    - ``end``: the length in tokens of the prefix ending at this node.
    - ``children``: the nodes below, keyed by the bytes of their first block.
    - ``locks``: the node's own lock count.
    - ``pins``: the locks held in the subtree rooted here, own ones included;
      the node is pinned while this is positive.
    - ``last_use``: the logical time of the last use of this node, and
      ``use_rank`` its order within that call: 0 for every use under
      ``use=path``; under ``use=path+split-tail``, 0 for a node the call found
      there, k for the k-th node it created (R7).
    - ``hits``: the inserts that used the node (R7; a split's upper node
      starts with the hits of the node it splits); ``created`` and
      ``created_rank``: the call that created it and the node's order among
      those it created (R4): a split's upper node takes the node's own under
      ``split=inherit``; ``born`` and ``born_rank``: the call that made the node and
      its order among those, whatever its creation stamp (R7 ranks a call's uses
      of the nodes it made by them).
    - ``queue_seq``: the seq of the node's live LRU queue entry, -1 when none;
      exactly the unpinned leaves have one.
    """

    __slots__ = (
        "owner",
        "parent",
        "segment",
        "key",
        "blocks",
        "end",
        "children",
        "locks",
        "pins",
        "last_use",
        "use_rank",
        "hits",
        "created",
        "created_rank",
        "born",
        "born_rank",
        "queue_seq",
    )

    def __init__(
        self,
        owner: RadixTree | None,
        parent: Node | None,
        segment: bytes,
        key: ChildKey,
        blocks: array[int],
        end: int,
        last_use: int,
        created: int,
        created_rank: int = 1,
    ) -> None:
        self.owner = owner
        self.parent: Node = self if parent is None else parent
        self.segment = segment
        self.key = key
        self.blocks = blocks
        self.end = end
        self.children: dict[ChildKey, Node] = {}
        self.locks = 0
        self.pins = 0
        self.last_use = last_use
        self.use_rank = 0
        self.hits = 0
        self.created = created
        self.created_rank = created_rank
        self.born = created
        self.born_rank = created_rank
        self.queue_seq = -1

    def __repr__(self) -> str:
        if self.parent is self:
            return "<Node root>"
        state = "live" if self.owner is not None else "evicted"
        return f"<Node {state} end={self.end} blocks={len(self.blocks)} locks={self.locks}>"


class RadixTree:
    """The tree of cached prefixes of one cache, with pins and an LRU queue.

    Public counters, read only outside the tree, kept exact by every method:
    ``cached_blocks`` (blocks held), ``evictable_blocks`` (blocks of unpinned
    nodes) and ``held_ids`` (the block ids held, see ``impl.ids``).

    The LRU queue holds ``(last_use, seq, leaf)`` entries with lazy deletion:
    an entry is live while ``leaf.queue_seq == seq``.  Almost every leaf joins
    it at the current time (a new leaf, a leaf just used), later than every
    entry already there, so those entries go to the back of a FIFO ``deque``;
    only the others (a parent left a leaf by an eviction, a leaf unlocked
    after later calls) go to a heap.  The oldest entry is the older of the two
    fronts.  (A single heap cost O(log q) cache misses an eviction: 3.7 us at
    10^6 leaves against 1.2 us at 10^3; benchmark: bench/ evict scaling,
    issue 7.)  Stale entries are dropped when popped, and both are rebuilt
    from their live entries as soon as stale ones outnumber them, so the
    queue never holds more than twice the unpinned leaves and eviction never
    scans every leaf.
    """

    def __init__(self, block_size: int, rules: Rules = Rules()) -> None:
        """An empty tree for ``block_size`` tokens a block (>= 1; the caller checks R1), evicting by ``rules``.

        Runtime complexity: O(1).
        """
        self.block_size = block_size
        self._block_bytes = block_size * TOKEN_BYTES
        self._key = eviction_key(rules)
        self._inherit_creation = rules.split == "inherit"
        self.root = Node(self, None, b"", b"", array(TOKEN_TYPECODE), 0, 0, 0)
        self.cached_blocks = 0
        self.evictable_blocks = 0
        self.held_ids = HeldIds()
        self._fifo: deque[QueueEntry] = deque()
        self._heap: list[QueueEntry] = []
        self._stale = 0
        self._last_seq = -1
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

    # ------------------------------------------------------------------ lookup

    def owns(self, node: object) -> TypeGuard[Node]:
        """Whether ``node`` is a live node of this tree (the root included).

        Anything else (evicted, of another tree, not a node) gives False.
        Runtime complexity: O(1).
        """
        return isinstance(node, Node) and node.owner is self

    def descend(self, query: bytes, limit: int, namespace: Namespace = None) -> tuple[list[Node], Node | None, int]:
        """Follow ``query`` from the root, in ``namespace`` (R12), as far as the tree holds its whole blocks.

        ``query`` holds tokens as native ``'I'`` bytes; only its first ``limit``
        tokens are searched (a multiple of the block size).  Returns
        ``(path, partial, matched)``: ``path`` lists the nodes whose whole
        segments match, top down, root excluded; ``partial`` is the child in
        which the match ends strictly inside (its first ``matched`` tokens of
        prefix match, but not all of it), or None when the match ends at the
        end of ``path``'s last node; ``matched`` is the length in tokens of the
        longest held whole-block prefix of ``query[:limit]``.  Changes nothing.

        Runtime complexity: O(d + m / B + log s) Python steps for a match
        through d nodes, m matched tokens compared in C, and a split point
        found in a segment of s blocks.
        """
        # Byte offsets rather than a block_span() call per node: benchmark:
        # bench/ match vs read floor (issue 7), 2,000 tokens through 16 nodes
        # went from 4.7 to 3.7 us.
        step = self._block_bytes
        limit_bytes = limit * TOKEN_BYTES
        path: list[Node] = []
        node = self.root
        offset = 0
        while offset + step <= limit_bytes:
            piece = query[offset : offset + step]
            child = node.children.get(piece if offset or namespace is None else (namespace, piece))
            if child is None:
                break
            if not query.startswith(child.segment, offset, limit_bytes):
                agreeing = self._agreeing_blocks(child.segment, query, offset, limit_bytes)
                return path, child, offset // TOKEN_BYTES + agreeing * self.block_size
            path.append(child)
            offset += len(child.segment)
            node = child
        return path, None, offset // TOKEN_BYTES

    def _agreeing_blocks(self, segment: bytes, query: bytes, offset: int, limit_bytes: int) -> int:
        """The leading whole blocks of ``segment`` equal to ``query[offset:limit_bytes]``,
        given that the first block is.

        A binary search over prefixes rather than a scan block by block, so a
        mismatch deep in a long segment (block size 1) costs O(log s) steps.

        Runtime complexity: O(log s) Python steps and O(len(segment) log s)
        bytes compared in C, for a segment of s blocks.
        """
        view = memoryview(segment)
        agreeing = 1
        bound = min(len(segment), limit_bytes - offset) // self._block_bytes
        while agreeing < bound:
            middle = (agreeing + bound + 1) // 2
            _, middle_end = block_span(middle - 1, self.block_size)
            if query.startswith(view[: middle_end * TOKEN_BYTES], offset):
                agreeing = middle
            else:
                bound = middle - 1
        return agreeing

    def held_blocks(self, path: list[Node], partial: Node | None, matched: int) -> array[int]:
        """The ids the tree holds for the first ``matched`` tokens of a ``descend``
        result, in token order.

        Runtime complexity: O(len(path) + matched / B), in C but for one step a node.
        """
        held = array(TOKEN_TYPECODE)
        for node in path:
            held.extend(node.blocks)
        if partial is not None:
            held.extend(partial.blocks[: segment_blocks(partial.parent.end, matched, self.block_size)])
        return held

    # ----------------------------------------------------------------- shape

    def split(self, node: Node, at: int, clock: int) -> Node:
        """Split ``node`` where its prefix reaches ``at`` tokens; return the new upper node (R4).

        ``at`` lies strictly inside ``node`` on a block boundary.  ``node``
        keeps its identity, its blocks below the split, its own locks, hits and
        last use; the upper node, created at ``clock``, takes the blocks above,
        holds no lock of its own, is pinned exactly when ``node`` is, and starts
        at ``node``'s hits and last use (the caller records the use of the path
        it lies on).  Counters and
        the LRU queue are unchanged: no block changes pinned state and no leaf
        appears or disappears.

        Runtime complexity: O(1) Python steps, O(len(node.segment)) bytes copied.
        """
        parent = node.parent
        kept = segment_blocks(parent.end, at, self.block_size)
        cut = kept * self._block_bytes
        upper = Node(self, parent, node.segment[:cut], node.key, node.blocks[:kept], at, node.last_use, clock)
        upper.pins = node.pins
        upper.hits = node.hits
        upper.use_rank = node.use_rank
        if self._inherit_creation:  # R4 split=inherit: the upper node counts as made when node was
            upper.created, upper.created_rank = node.created, node.created_rank
        parent.children[upper.key] = upper
        node.segment = node.segment[cut:]
        node.key = node.segment[: self._block_bytes]
        node.blocks = node.blocks[kept:]
        node.parent = upper
        upper.children[node.key] = node
        if self.released is not None:
            self.node_of.update(dict.fromkeys(upper.blocks.tolist(), upper))
        if self.tracking:
            self.reshaped.update((node, upper))
        return upper

    def add_leaf(self, parent: Node, query: bytes, blocks: array[int], last_use: int, namespace: Namespace = None) -> Node:
        """Add a leaf below ``parent`` holding ``blocks`` for the tokens of ``query`` past ``parent``.

        ``query`` holds tokens as native ``'I'`` bytes; the leaf's segment is
        its tokens ``[parent.end, parent.end + len(blocks) * B)``, none of whose
        blocks is held below ``parent`` yet, and ``blocks`` are ids the caller
        has just claimed in ``held_ids``.  The leaf has no lock and last use
        ``last_use``; a parent that was a leaf stops being one, even at the end
        of a leaf (R4).

        Runtime complexity: O(len(blocks)) in C, O(1) Python steps.
        """
        end = parent.end + len(blocks) * self.block_size
        segment = query[parent.end * TOKEN_BYTES : end * TOKEN_BYTES]
        first = segment[: self._block_bytes]
        key: ChildKey = (namespace, first) if parent is self.root and namespace is not None else first
        # The second node a call creates is a leaf below the split it made first (R4).
        leaf = Node(self, parent, segment, key, blocks, end, last_use, last_use, 2 if parent.born == last_use else 1)
        self._dequeue(parent)
        parent.children[key] = leaf
        self.cached_blocks += len(blocks)
        self.evictable_blocks += len(blocks)
        self._enqueue(leaf)
        if self.released is not None:
            self.node_of.update(dict.fromkeys(blocks.tolist(), leaf))
        if self.tracking:
            self.reshaped.add(leaf)
        return leaf

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

    def front_leaf(self) -> Node | None:
        """The unpinned leaf with the smallest eviction key, left in the queue; None when there is none.

        Runtime complexity: O(1) amortised, plus O(log q) to drop stale heap entries.
        """
        fifo = self._fifo
        heap = self._heap
        while True:
            if fifo and (not heap or fifo[0] < heap[0]):
                _, seq, leaf = fifo[0]
                if leaf.queue_seq == seq:
                    return leaf
                fifo.popleft()
            elif heap:
                _, seq, leaf = heap[0]
                if leaf.queue_seq == seq:
                    return leaf
                heappop(heap)
            else:
                return None
            self._stale -= 1

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

    # ------------------------------------------------------------ locks, use

    def add_lock(self, node: Node) -> None:
        """Add one own lock to the non-root ``node``, pinning it and every node above.

        Runtime complexity: O(depth of node) Python steps.
        """
        if self.tracking:
            self.restamped.add(node)
        node.locks += 1
        root = self.root
        walker = node
        while walker is not root:
            walker.pins += 1
            if walker.pins == 1:
                self.evictable_blocks -= len(walker.blocks)
                self._dequeue(walker)
                if self.released is not None:
                    for block in walker.blocks.tolist():
                        del self.released[block]
            walker = walker.parent

    def remove_lock(self, node: Node) -> None:
        """Remove one own lock from the non-root ``node`` (which holds one), by the call at ``release_clock``.

        Nodes left with no lock in their subtree become evictable again; a leaf
        among them joins the LRU queue at its own last use; under use=release their blocks are released.

        Runtime complexity: O(depth of node) Python steps.
        """
        node.locks -= 1
        if self.tracking:
            self.restamped.add(node)
        root = self.root
        walker = node
        while walker is not root:
            walker.pins -= 1
            if walker.pins == 0:
                self.evictable_blocks += len(walker.blocks)
                if not walker.children:
                    self._enqueue(walker)
                if self.released is not None:  # R7 use=release: deeper nodes first, each tail first
                    for block in reversed(walker.blocks.tolist()):
                        self.released[block] = None
                        self.stamp_release(block, self.release_clock)
            walker = walker.parent

    def touch(self, path: list[Node], clock: int, *, hit: bool = False, split_tail: Node | None = None, ranked: bool = False) -> None:
        """Record a use at time ``clock`` of every node of ``path`` (R7), a hit of each when ``hit``.

        ``path`` runs from below the root down, and ``clock`` is later than
        every last use in the tree or equal to the last use of nodes added at
        this time.  With ``ranked`` (variant path+split-tail) a node created at
        ``clock`` is used at its creation rank, the others at rank 0, and
        ``split_tail``, the lower part of a node the call split, at rank 0 too.
        Only the last node of the path and the split tail can be leaves, so at
        most two queue entries change.

        Runtime complexity: O(len(path)) Python steps, O(1) amortised in the queue.
        """
        if not path:
            return
        key = self._key
        watched = [(node, key(node)) for node in (path[-1], split_tail) if node is not None and node.queue_seq >= 0]
        for node in path:
            node.last_use = clock
            node.use_rank = node.born_rank if ranked and node.born == clock else 0
        if hit:
            for node in path:
                node.hits += 1
        if split_tail is not None:
            split_tail.last_use = clock
            split_tail.use_rank = 0
        if self.tracking:
            self.restamped.update(path)
            if split_tail is not None:
                self.restamped.add(split_tail)
        for node, before in watched:
            if key(node) != before:
                self._enqueue(node)

    # ------------------------------------------------------------- LRU queue

    def _enqueue(self, leaf: Node) -> None:
        """Give the unpinned ``leaf`` one live queue entry at its current eviction key.

        Runtime complexity: O(1) amortised when no entry in the FIFO is later
        than the leaf's last use, else O(log q).
        """
        self._dequeue(leaf)
        self._last_seq += 1
        leaf.queue_seq = self._last_seq
        key = self._key(leaf)
        entry = (key, self._last_seq, leaf)
        fifo = self._fifo
        if not fifo or fifo[-1] < entry:  # as keys compare: seqs only grow
            fifo.append(entry)
        else:
            heappush(self._heap, entry)

    def _dequeue(self, node: Node) -> None:
        """Make ``node``'s queue entry stale, if it has one.

        Runtime complexity: O(1) amortised.
        """
        if node.queue_seq >= 0:
            node.queue_seq = -1
            self._stale += 1
            self._compact_if_stale()

    def _compact_if_stale(self) -> None:
        """Rebuild the queue from its live entries once stale ones outnumber them.

        Runtime complexity: O(q) when it rebuilds, which pays for the more than
        q/2 stale entries it drops: O(1) amortised.
        """
        if 2 * self._stale > len(self._fifo) + len(self._heap):
            self._fifo = deque(entry for entry in self._fifo if entry[2].queue_seq == entry[1])
            heap = [entry for entry in self._heap if entry[2].queue_seq == entry[1]]
            heapify(heap)
            self._heap = heap
            self._stale = 0

    # ------------------------------------------------------------ inspection

    def prefixes(self) -> Iterator[tuple[Node, tuple[int, ...], Namespace]]:
        """Every non-root node with its whole prefix of tokens and its namespace, parents before children.

        Runtime complexity: O(sum of the prefix lengths), iterative.
        """
        stack: list[tuple[Node, tuple[int, ...], Namespace]] = [(self.root, (), None)]
        while stack:
            node, prefix, namespace = stack.pop()
            for key, child in node.children.items():
                child_prefix = prefix + tuple(array(TOKEN_TYPECODE, child.segment))
                child_namespace = key[0] if isinstance(key, tuple) else namespace
                yield child, child_prefix, child_namespace
                stack.append((child, child_prefix, child_namespace))

    def check_invariants(self) -> None:
        """Assert every structural fact of the tree; AssertionError names the first broken one.

        Checked: parent links, child keys, segment and block lengths, prefix
        ends, ownership, pins equal to the locks of the subtree, the counters
        and the set of held ids recomputed from the nodes, one owner per block
        id, parents used no earlier than their children, distinct last uses
        among leaves, and an LRU queue whose live entries are exactly the
        unpinned leaves at their last use, with no more stale entries than live
        ones, a FIFO in order and a heap in heap order.

        Runtime complexity: O(total tokens + q log q + the largest id held); meant for tests.
        """
        root = self.root
        step = self._block_bytes
        assert root.owner is self and root.parent is root, "root links"
        assert root.segment == b"" and len(root.blocks) == 0 and root.end == 0, "root holds nothing"
        assert root.locks == 0 and root.pins == 0 and root.queue_seq == -1, "root is never locked or queued"
        preorder: list[Node] = []
        stack = [root]
        while stack:
            node = stack.pop()
            preorder.append(node)
            for key, child in node.children.items():
                assert child.owner is self, f"{child!r} is owned by this tree"
                assert child.parent is node, f"{child!r} links to its parent"
                assert child.blocks, f"{child!r} holds at least one block"
                assert len(child.segment) == len(child.blocks) * step, f"{child!r} has one block per B tokens"
                assert key == child.key, f"{child!r} is keyed by its key"
                bare = key[1] if isinstance(key, tuple) else key
                assert isinstance(key, bytes) or node is root, f"{child!r}: only the root's children carry a namespace"
                assert bare == child.segment[:step], f"{child!r} is keyed by its first block"
                assert segment_blocks(node.end, child.end, self.block_size) == len(child.blocks), f"{child!r} end"
                assert child.end == node.end + len(child.blocks) * self.block_size, f"{child!r} end"
                assert child.locks >= 0, f"{child!r} lock count"
                assert self.released is not None or node is root or node.last_use >= child.last_use, f"{child!r} used after its parent"
                stack.append(child)
        cached = 0
        evictable = 0
        ids: set[int] = set()
        unpinned_leaves: set[Node] = set()
        leaf_uses: list[tuple[int, int]] = []
        for node in reversed(preorder):
            if node is root:
                continue
            subtree_locks = node.locks + sum(child.pins for child in node.children.values())
            assert node.pins == subtree_locks, f"{node!r} pins {node.pins} != {subtree_locks}"
            cached += len(node.blocks)
            if node.pins == 0:
                evictable += len(node.blocks)
            ids.update(node.blocks)
            for block in node.blocks:
                ids.update(self.copies.get(block, ()))
                cached += len(self.copies.get(block, ()))
                evictable += len(self.copies.get(block, ()))
            if not node.children:
                leaf_uses.append((node.last_use, node.use_rank))
            if not node.children and node.pins == 0:
                unpinned_leaves.add(node)
                assert node.queue_seq >= 0, f"unpinned leaf {node!r} is queued"
            else:
                assert node.queue_seq == -1, f"{node!r} is queued but is no unpinned leaf"
        assert len(ids) == cached, "a block id is held at two positions"
        assert set(self.copy_of) == {copy for copies in self.copies.values() for copy in copies}, "copies index"
        assert ids == self.held_ids.as_set(), "held_ids matches the nodes"
        assert len(self.held_ids) == cached, "held_ids counts the ids held"
        assert cached == self.cached_blocks, f"cached_blocks {self.cached_blocks} != {cached}"
        assert evictable == self.evictable_blocks, f"evictable_blocks {self.evictable_blocks} != {evictable}"
        assert self.released is not None or len(set(leaf_uses)) == len(leaf_uses), "leaves have distinct last uses"
        if self.released is not None:
            unpinned = {block for node in preorder if node is not root and node.pins == 0 for block in node.blocks}
            assert set(self.released) == unpinned | set(self.copy_of), "the released order holds exactly the unpinned blocks"
        fifo = list(self._fifo)
        heap = self._heap
        queue = fifo + heap
        live = [entry for entry in queue if entry[2].queue_seq == entry[1]]
        assert len(live) == len(unpinned_leaves), "one live queue entry per unpinned leaf"
        assert {entry[2] for entry in live} == unpinned_leaves, "live queue entries are the unpinned leaves"
        assert all(key == self._key(leaf) for key, _, leaf in live), "queue entries carry the eviction key"
        assert len(queue) - len(live) == self._stale, "stale entry count"
        assert self._stale <= len(live), "stale entries never outnumber live ones"
        assert len({entry[1] for entry in queue}) == len(queue), "queue seqs are unique"
        assert all(entry[1] <= self._last_seq for entry in queue), "queue seqs were issued"
        assert all(fifo[i - 1] < fifo[i] for i in range(1, len(fifo))), "FIFO order"
        assert all(heap[(i - 1) // 2] <= heap[i] for i in range(1, len(heap))), "heap order"
