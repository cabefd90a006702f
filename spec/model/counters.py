"""R9: the counters; R10, that no refused call changes anything, holds by the order of every call's checks."""

from __future__ import annotations

from spec import arith
from spec.api import Counters, PrefixStats
from spec.model.eviction import Evicting


class Counting(Evicting):
    """``Evicting`` and R9 and R10, below."""

    # R9: counters --------------------------------------------------------------------

    def cached_blocks(self) -> int:
        """R9: one block per cached whole-block prefix, and its copies (``dup=keep``)."""
        return len(self._cached_at)

    def cached_tokens(self) -> int:
        """R9: the tokens the cached blocks cover."""
        return arith.cached_tokens(self.cached_blocks(), self._block_size)

    def evictable_blocks(self) -> int:
        """R9: the cached blocks no lock pins, exactly what ``evict(10**9)`` would free."""
        return self.cached_blocks() - len(self.pinned_prefixes())

    def stats(self) -> PrefixStats:
        """R9: the counters.

        One value, made again only when a counter changed: a lockstep reads them after every call (its digest, its
        observer), and most calls change none; a frozen dataclass made anew each time cost the engine machine
        some 2% of its time (``bench.stage_throughput``: 1.02x, 1.04x)."""
        counters = self.counter_values()
        if counters != self._counted:
            self._counted = counters
            self._stats = PrefixStats(*counters)
        return self._stats

    def counter_values(self) -> Counters:
        """R9: the five counters, in ``PrefixStats``' order, as ints."""
        return (self._lookups, self._query_tokens, self._hit_tokens, self._inserted_blocks, self._evicted_blocks)

    def hit_rate(self) -> float:
        """R9: hit tokens over query tokens."""
        return arith.hit_rate(self._hit_tokens, self._query_tokens)

    # R10 holds because every public call above checks its arguments before its
    # first change.
