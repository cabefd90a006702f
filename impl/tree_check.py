"""Every structural fact of impl's radix tree, asserted: what ``RadixTree.check_invariants`` checks (tests call it)."""

from __future__ import annotations

from impl.blocks import segment_blocks
from impl.eviction import EvictableTree
from impl.node import TOKEN_BYTES, Node


def check_tree(self: EvictableTree) -> None:
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
    step = self.block_size * TOKEN_BYTES
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
    self.check_queue(unpinned_leaves)
