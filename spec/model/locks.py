"""R6: locks: a node's own locks, the prefixes they pin, and the handles of nodes that are gone; the variant ``use=release``'s unlock beside it."""

from __future__ import annotations

from spec.api import BlockId, NodeId, NotLocked, UnknownNode
from spec.model.insert import Inserting
from spec.model.state import Prefix, SpecNode


class Locking(Inserting):
    """``Inserting`` and R6, below."""

    # R6: locks ----------------------------------------------------------------------

    def prefix_of_node(self, node: NodeId) -> Prefix:
        """R6: the prefix of a live node of this cache, or UnknownNode."""
        if not isinstance(node, SpecNode) or node not in self._prefix_of:
            raise UnknownNode(f"node {node!r} is not in the cache (never issued, or evicted)")
        return self._prefix_of[node]

    def lock(self, node: NodeId) -> None:
        """R6: one more lock on ``node``; the root takes none."""
        if node == self.root:
            return
        prefix = self.prefix_of_node(node)
        self._own_locks[prefix] = self._own_locks.get(prefix, 0) + 1
        self._restamped.add(prefix)

    def unlock(self, node: NodeId) -> None:
        """R6: one lock fewer on ``node``; NotLocked when it holds none of its own."""
        if node == self.root:
            return
        prefix = self.prefix_of_node(node)
        if prefix not in self._own_locks:
            raise NotLocked(f"node {node!r} holds no lock")
        self._own_locks[prefix] -= 1
        self._restamped.add(prefix)
        if self._own_locks[prefix] == 0:
            del self._own_locks[prefix]
        if self._rules.use == "release":
            # Variant use=release (vLLM): the lock was a request holding the prefix's blocks; those no other
            # lock pins now are released by this call.
            self.next_call()
            pinned = self.pinned_prefixes()
            unpinned: list[tuple[Prefix, BlockId]] = []
            for shorter in self.whole_block_prefixes(prefix):
                if shorter not in pinned:
                    unpinned.append((shorter, self._block_at[shorter]))
            self.release(unpinned)

    def pinned_prefixes(self) -> set[Prefix]:
        """R6: the cached prefixes a lock pins: a node is pinned while it or any node below it holds a lock,
        so a block is pinned when it lies on the path to a locked node.

        Each locked path is read up from its end and left at the first prefix pinned already, since the path
        above that one is pinned already: it costs the pinned blocks, not every locked path whole (requests
        that share a long prompt lock paths that share most of their blocks)."""
        pinned: set[Prefix] = set()
        size = self._block_size
        for namespace, tokens in self._own_locks:
            end = len(tokens)
            while end:  # one block shorter at each step (``one_block_shorter``, read in line: a query's every pinned block)
                held = len(pinned)
                pinned.add((namespace, tokens[:end]))
                if len(pinned) == held:  # pinned already: told by the add, which hashes the prefix once, not twice
                    break
                end -= size
        return pinned

    def leaf_is_pinned(self, leaf: Prefix) -> bool:
        """R6 for a leaf: no node lies below it, so it is pinned exactly when it holds a lock of its own."""
        return leaf in self._own_locks
