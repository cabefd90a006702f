"""R4: the nodes: where they end, their NodeIds, and what a split makes; a node's blocks, parent and leafhood computed when asked."""

from __future__ import annotations

from spec.model.match import Matching
from spec.model.state import Prefix, SpecNode


class Nodes(Matching):
    """``Matching`` and R4, below."""

    # R4: nodes ------------------------------------------------------------------------

    def split_at(self, prefix: Prefix) -> SpecNode:
        """R4: make a node end at a cached ``prefix``, splitting the node that covers it; returns that node.

        When a node already ends there it is returned unchanged.  Creating a
        node at a prefix is the whole of a split: the node below keeps
        its NodeId, its locks and its last use, and now holds only the blocks
        below the new node, because a node's blocks are those between its
        parent's end and its own.  NodeIds are never reused.  The new node is
        the k-th this call creates, and starts with the hits of the node it
        splits (R7, R8).  Its creation stamp (what R8's ``fifo`` and ``filo``
        key by):

        - variant ``split=fresh`` (strict, SGLang's RadixCache): ``(clock, k)``;
        - variant ``split=inherit`` (SGLang's UnifiedRadixCache): a split's
          upper node takes the stamp of the node it splits, as if it had been
          there since that node was made; a node no other extends (the end of
          an insert) is stamped ``(clock, k)``.
        """
        existing = self._node_at.get(prefix)
        if existing is not None:
            return existing
        lower = self.node_below(prefix)
        node = SpecNode(self._issuer, self._next_serial)
        self._next_serial += 1
        self._node_at[prefix] = node
        self._prefix_of[node] = prefix
        self._created_by_this_call[prefix] = len(self._created_by_this_call) + 1
        if self._rules.split == "inherit" and lower is not None:
            self._created[prefix] = self._created[lower]
        else:
            self._created[prefix] = (self._clock, self._created_by_this_call[prefix])
        self._last_use[prefix] = (self._clock, 0)
        self._hits[prefix] = 0 if lower is None else self._hits[lower]
        self._reshaped.add(prefix)
        if lower is not None:
            self._split_by_this_call = lower
            self._reshaped.add(lower)  # it now holds only the blocks below the new node
        return node

    def own_prefixes(self, prefix: Prefix) -> list[Prefix]:
        """R4: the cached prefixes the node at ``prefix`` holds itself, its own end first: read up from it one block at
        a time down to just past its parent's end (the longest shorter prefix that is a node, or the root's).

        It costs the node's own blocks, not every prefix of its path (a path hundreds of nodes deep made each call
        quadratic in its length); what reads a node's blocks, where its parent ends, or removes it reads them once.
        """
        own = [prefix]
        namespace, tokens = prefix
        end = len(tokens) - self._block_size
        while end > 0:  # one block shorter at each step (``one_block_shorter``, read in line)
            at = (namespace, tokens[:end])
            if at in self._node_at:
                break
            own.append(at)
            end -= self._block_size
        return own

    def parent_end(self, prefix: Prefix) -> int:
        """R4: where the parent of the node at ``prefix`` ends: the longest shorter prefix that is a node, or 0 (the root)."""
        return len(self.own_prefixes(prefix)[-1][1]) - self._block_size

    def node_below(self, prefix: Prefix) -> Prefix | None:
        """R4: the node a cached ``prefix`` lies inside, or None when no node extends it.

        Between a node's parent and the node no cached prefix branches, so
        the cached prefixes that extend ``prefix`` lead, one block at a time,
        to the first node below it.
        """
        at = prefix
        while True:
            longer = self._extensions[at]
            if not longer:
                return None
            (at,) = longer  # exactly one: no cached prefix branches inside a node
            if at in self._node_at:
                return at

    def is_leaf(self, prefix: Prefix) -> bool:
        """R4, R8: a node no cached prefix extends (so no node lies below it)."""
        return not self._extensions[prefix]
