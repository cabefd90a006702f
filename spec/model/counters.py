"""R9: the counters; R10, that no refused call changes anything, holds by the order of every call's checks."""

from __future__ import annotations

from spec import arith
from spec.api import PrefixStats
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
        """R9: the counters."""
        return PrefixStats(
            lookups=self._lookups,
            query_tokens=self._query_tokens,
            hit_tokens=self._hit_tokens,
            inserted_blocks=self._inserted_blocks,
            evicted_blocks=self._evicted_blocks,
        )

    def hit_rate(self) -> float:
        """R9: hit tokens over query tokens."""
        return arith.hit_rate(self._hit_tokens, self._query_tokens)

    # R10 holds because every public call above checks its arguments before its
    # first change.
