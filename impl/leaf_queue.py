"""The queue of evictable leaves of impl's radix tree, in eviction order (R8), with lazy deletion.

The queue holds ``(key, seq, leaf)`` entries: an entry is live while
``leaf.queue_seq == seq``.  Almost every leaf joins it at the current time (a
new leaf, a leaf just used), later than every entry already there, so those
entries go to the back of a FIFO ``deque``; only the others (a parent left a
leaf by an eviction, a leaf unlocked after later calls) go to a heap.  The
oldest entry is the older of the two fronts.  (A single heap cost O(log q)
cache misses an eviction: 3.7 us at 10^6 leaves against 1.2 us at 10^3;
benchmark: bench/ evict scaling, issue 7.)  Stale entries are dropped when
popped, and both are rebuilt from their live entries as soon as stale ones
outnumber them, so the queue never holds more than twice the unpinned leaves
and eviction never scans every leaf.

``LeafQueue`` is the base of the tree (``impl.eviction``, ``impl.radix``): its
methods are the tree's own, so the hot paths pay no call through another object.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from heapq import heapify, heappop, heappush

from impl.node import Key, Node, QueueEntry


class LeafQueue:
    """The unpinned leaves of a tree, each with one live entry at its eviction key ``key(leaf)``."""

    def __init__(self, key: Callable[[Node], Key]) -> None:
        self._key = key
        self._fifo: deque[QueueEntry] = deque()
        self._heap: list[QueueEntry] = []
        self._stale = 0
        self._last_seq = -1

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

    def check_queue(self, unpinned_leaves: set[Node]) -> None:
        """Assert that the queue's live entries are exactly ``unpinned_leaves`` at their eviction keys, with no more
        stale entries than live ones, a FIFO in order and a heap in heap order.

        Runtime complexity: O(q log q); meant for tests.
        """
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