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

The tree is built in layers, one module each: ``impl.node`` (a node, the
eviction key), ``impl.leaf_queue`` (the queue of evictable leaves),
``impl.eviction`` (the tree's fields and how blocks leave it), this module
(lookup, splits, new leaves, locks, uses) and ``impl.tree_check`` (the
invariants).  Names of ``impl.node`` are re-exported here.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import TypeGuard

from impl.blocks import block_span, segment_blocks
from impl.eviction import EvictableTree
from impl.node import TOKEN_BYTES as TOKEN_BYTES
from impl.node import TOKEN_TYPECODE as TOKEN_TYPECODE
from impl.node import ChildKey as ChildKey
from impl.node import Key as Key
from impl.node import Node as Node
from impl.node import eviction_key as eviction_key
from impl.tree_check import check_tree
from spec.api import Namespace


class RadixTree(EvictableTree):
    """The tree of cached prefixes of one cache, with pins and an LRU queue.

    Public counters, read only outside the tree, kept exact by every method:
    ``cached_blocks`` (blocks held), ``evictable_blocks`` (blocks of unpinned
    nodes) and ``held_ids`` (the block ids held, see ``impl.ids``).

    The LRU queue of unpinned leaves is ``impl.leaf_queue``; the fields and eviction are ``impl.eviction``.
    """

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
        """Assert every structural fact of the tree (``impl.tree_check.check_tree`` says which); meant for tests."""
        check_tree(self)
