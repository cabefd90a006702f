"""R7: use: when each node was last used and how often it was hit; the variants ``use=path+split-tail`` and ``use=release`` beside it."""

from __future__ import annotations

from spec.api import BlockId
from spec.model.locks import Locking
from spec.model.state import Prefix


class Using(Locking):
    """``Locking`` and R7, below."""

    # R7: use ------------------------------------------------------------------------

    def use_path(self, path: list[Prefix], *, hit: bool) -> None:
        """R7: the current call is a use of every node of ``path`` (the whole-block prefixes from the root down to
        where the call ends, ``cached_path``); an insert is a hit of each.

        Variant ``use=path``: the uses of one call are one moment, ``(clock, 0)``.
        Variant ``use=path+split-tail``: the call walks the nodes that were
        there before it (its path, and the lower part of a node it split) at
        ``(clock, 0)``, and uses each node it created at its creation,
        ``(clock, 1)`` then ``(clock, 2)`` (R4: a split's upper node, then a
        new leaf).
        """
        split_tail = self._rules.use == "path+split-tail"
        for node_prefix in path:
            if node_prefix in self._node_at:
                rank = self._created_by_this_call.get(node_prefix, 0) if split_tail else 0
                self._last_use[node_prefix] = (self._clock, rank)
                self._restamped.add(node_prefix)
                if hit:
                    self._hits[node_prefix] += 1
        if split_tail and self._split_by_this_call is not None:
            self._last_use[self._split_by_this_call] = (self._clock, 0)
            self._restamped.add(self._split_by_this_call)

    def release(self, held: list[tuple[Prefix, BlockId]]) -> None:
        """R7, variant ``use=release`` (vLLM): the call lets go of ``held`` (a path's blocks in token order);
        each that no lock pins is released now, tail first, so a deeper block counts as released earlier.

        vLLM 0.32.0 frees a request's blocks in reverse (``single_type_kv_cache_manager.py:589``), and
        ``BlockPool.free_blocks`` appends each block whose reference count falls to zero to the tail of the
        free queue (``block_pool.py:791-803``): a block's place in the queue is when it was last released.
        A lookup touches nothing (``kv_cache_manager.py:264-321`` finds blocks, ``touch`` comes only with an
        allocation, ``single_type_kv_cache_manager.py:303-304``).  A lock pins the blocks a match returns,
        the first copy at each position, so a block that a lock pins is not released here.
        """
        pinned = self.pinned_prefixes()
        for prefix, block in reversed(held):
            if prefix in pinned and self._block_at[prefix] == block:
                continue
            self._released_by_this_call += 1
            self._released[block] = (self._clock, self._released_by_this_call)
            self._restamped_blocks.add(block)
