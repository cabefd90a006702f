"""Deliberately broken caches: the negative controls that every gate must be seen to fail on."""

from __future__ import annotations

from impl import RadixCache
from spec.api import NodeId


class LockPinsNothing(RadixCache):
    """A lock that pins nothing: a running request's blocks can be evicted under it (the seed's s07)."""

    def lock(self, node: NodeId) -> None:
        return None


def lock_pins_nothing(block_size: int) -> LockPinsNothing:
    return LockPinsNothing(block_size)
