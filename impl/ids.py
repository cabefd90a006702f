"""``HeldIds``: the set of block ids a tree holds, one byte an id.

A ``set`` of ints costs about 60 bytes an id (its table and the int objects)
and was 4 of the 9.5 bytes per cached token that ``impl`` took at 10^6 cached
blocks (benchmark: bench/ memory, issue 7).  Engines number their blocks from
0 up to the pool size, so a ``bytearray`` indexed by id does the same job in
one byte an id.  Ids far above the number held (anything up to 2**32 is a
valid id, R1) go to a plain ``set`` instead, so memory stays proportional to
the ids held whatever ids the caller uses.

Every method takes a sequence of ints (a list, or an ``array('I')``) and runs
one Python step per id, never one per token.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import length_hint

DENSE_MINIMUM = 1 << 12
"""The smallest dense map: 4 KiB."""

DENSE_SLACK = 1 << 20
"""The dense map may cover this many ids more than 8 bytes per id held."""


class HeldIds:
    """A set of ints in [0, 2**32): ``dense[id] == 1`` below ``len(dense)``, ``sparse`` above."""

    __slots__ = ("dense", "sparse", "count")

    def __init__(self) -> None:
        """An empty set. Runtime complexity: O(1)."""
        self.dense = bytearray()
        self.sparse: set[int] = set()
        self.count = 0

    def __contains__(self, block: int) -> bool:
        """Whether ``block`` is held. Runtime complexity: O(1)."""
        if block < len(self.dense):
            return self.dense[block] == 1
        return block in self.sparse

    def __len__(self) -> int:
        return self.count

    def as_set(self) -> set[int]:
        """Every id held, for tests. Runtime complexity: O(len(dense) + len(sparse))."""
        return {block for block, held in enumerate(self.dense) if held} | self.sparse

    def claim(self, ids: Sequence[int]) -> bool:
        """Hold every id of ``ids`` if none is held yet and none repeats; else change nothing.

        Returns whether the ids were claimed.

        Runtime complexity: O(len(ids)), one Python step an id, amortised over
        the growth of the dense map.
        """
        if not isinstance(ids, list):
            ids = list(ids)
        dense = self.dense
        remaining = iter(ids)  # a list iterator, whose length_hint says where the loop stopped
        try:
            for block in remaining:
                if dense[block]:
                    break
                dense[block] = 1
            else:
                self.count += len(ids)
                return True
            refused = True
        except IndexError:  # an id above the dense map
            refused = False
        # Undo this call's claims: the ids before the one that stopped the loop.
        for block in ids[: len(ids) - length_hint(remaining) - 1]:
            dense[block] = 0
        if refused:
            return False
        if self._cover(max(ids), len(ids)):
            return self.claim_covered(ids)
        return self._claim_mixed(ids)

    def claim_covered(self, ids: list[int]) -> bool:
        """``claim`` for a list of ids that all lie in the dense map.

        Runtime complexity: O(len(ids)).
        """
        dense = self.dense
        remaining = iter(ids)
        for block in remaining:
            if dense[block]:
                break
            dense[block] = 1
        else:
            self.count += len(ids)
            return True
        for block in ids[: len(ids) - length_hint(remaining) - 1]:
            dense[block] = 0
        return False

    def release(self, ids: Sequence[int]) -> None:
        """Stop holding every id of ``ids`` (all held, distinct).

        Runtime complexity: O(len(ids)), one Python step an id.
        """
        dense = self.dense
        try:
            for block in ids:
                dense[block] = 0
        except IndexError:  # an id of the sparse set; clearing again is harmless
            size = len(dense)
            for block in ids:
                if block < size:
                    dense[block] = 0
                else:
                    self.sparse.discard(block)
        self.count -= len(ids)

    def _cover(self, top: int, adding: int) -> bool:
        """Grow the dense map to cover ``top`` while it stays within 8 bytes an id held
        (plus ``DENSE_SLACK``); whether ``top`` is covered now.

        Sparse ids that the grown map covers move into it.

        Runtime complexity: O(new size + len(sparse)), amortised O(1) an id.
        """
        size = len(self.dense)
        limit = 8 * (self.count + adding) + DENSE_SLACK
        if top >= limit:
            return False
        new_size = min(max(2 * size, top + 1, DENSE_MINIMUM), limit)
        self.dense.extend(bytes(new_size - size))
        moved = [block for block in self.sparse if block < new_size]
        for block in moved:
            self.dense[block] = 1
        self.sparse.difference_update(moved)
        return True

    def _claim_mixed(self, ids: Sequence[int]) -> bool:
        """``claim`` for ids some of which lie above the dense map.

        Runtime complexity: O(len(ids)).
        """
        dense = self.dense
        size = len(dense)
        sparse = self.sparse
        seen: set[int] = set()
        for block in ids:
            if block in seen or (dense[block] == 1 if block < size else block in sparse):
                return False
            seen.add(block)
        for block in ids:
            if block < size:
                dense[block] = 1
            else:
                sparse.add(block)
        self.count += len(ids)
        return True
