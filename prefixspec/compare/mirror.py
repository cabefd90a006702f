"""The router's side of R13: a prefix index built from a cache's KV events alone.

A router does not see the cache; it folds the events the engine publishes into
a mirror and routes a request to the replica whose mirror holds the longest
prefix of its prompt.  ``Mirror`` is that index, kept by block id (block ids
are one pool across namespaces, R5 and R12): each stored block knows its
namespace, its parent block and its tokens.  R13's law is that the mirror,
folded from the first event on, holds exactly the cache's contents after every
call; the lockstep checks it against the spec (``Lockstep``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from spec.api import AllBlocksCleared, BlockId, BlockRemoved, BlockStored, KVEvent, Namespace

Place = tuple[Namespace, tuple[int, ...]]
"""A cached prefix as the spec's ``cached_contents`` keys it: its namespace and its tokens."""


class MirrorError(ValueError):
    """Events that no mirror can fold: a block stored twice, under an unknown parent, or removed unheld."""


class Mirror:
    """The blocks a router believes cached, from the events it folded."""

    def __init__(self, *, copies: bool = False) -> None:
        """``copies``: the cache keeps a second block stored at a held place (R5 ``dup=keep``), and
        removing the first leaves the place to the oldest other, as the cache's matches do."""
        self._entries: dict[BlockId, Place] = {}
        """Where each stored block lies: its namespace and its prefix (a plain tuple, made once a block stored)."""
        self._block_at: dict[Place, BlockId] = {}
        self._copies: dict[Place, list[BlockId]] | None = {} if copies else None

    def fold(self, events: Sequence[KVEvent]) -> None:
        """Apply ``events`` in order; MirrorError names the first that cannot be applied (the events before it stay)."""
        for event in events:
            if isinstance(event, AllBlocksCleared):
                self._entries.clear()
                self._block_at.clear()
                if self._copies is not None:
                    self._copies.clear()
            elif isinstance(event, BlockRemoved):
                for block in event.blocks:
                    place = self._entries.pop(block, None)
                    if place is None:
                        raise MirrorError(f"a BlockRemoved of block {block}, which no event stored (or one removed already)")
                    self.forget(place, block)
            elif isinstance(event, BlockStored):
                self.fold_stored(event)

    def fold_stored(self, event: BlockStored) -> None:
        if not event.blocks or len(event.tokens) % len(event.blocks):
            raise MirrorError(f"a BlockStored of {len(event.blocks)} blocks and {len(event.tokens)} tokens: not one block's worth each")
        size = len(event.tokens) // len(event.blocks)
        namespace = event.namespace
        above: tuple[int, ...] = ()
        if event.parent is not None:
            parent = self._entries.get(event.parent)
            if parent is None:
                raise MirrorError(f"a BlockStored under block {event.parent}, which the mirror does not hold")
            if parent[0] != namespace:
                raise MirrorError(f"a BlockStored in namespace {namespace!r} under block {event.parent} of namespace {parent[0]!r}")
            above = parent[1]
        # Each block's prefix is a slice of one tuple, and its place is looked up once: a router's fold of an
        # insert's blocks, the prefix grown by a block at a time and each place hashed three times, was a fifth of
        # a take's time in the engine machine (bench.stage_throughput).
        whole = above + tuple(event.tokens)
        end = len(above)
        block_at, entries = self._block_at, self._entries
        for block in event.blocks:
            end += size
            if block in entries:
                raise MirrorError(f"a BlockStored of block {block}, which the mirror holds already (a duplicate stored twice)")
            place = (namespace, whole[:end])
            held = block_at.setdefault(place, block)
            if held != block:
                if self._copies is None:
                    raise MirrorError(f"a BlockStored of block {block} where the mirror holds block {held}")
                self._copies.setdefault(place, []).append(block)
            entries[block] = place

    def forget(self, place: Place, block: BlockId) -> None:
        """Drop ``block`` from ``place``; under copies the oldest other copy takes its place."""
        others = None if self._copies is None else self._copies.get(place)
        if not others:
            del self._block_at[place]
            return
        assert self._copies is not None
        if self._block_at[place] == block:
            self._block_at[place] = others.pop(0)
        else:
            others.remove(block)
        if not others:
            del self._copies[place]

    def contents(self) -> Mapping[Place, BlockId]:
        """Every prefix the mirror holds and the block it ends with, as ``SpecCache.cached_contents`` (a read-only view)."""
        return MappingProxyType(self._block_at)

    def reusable_blocks(self, tokens: Sequence[int], block_size: int, namespace: Namespace = None) -> list[BlockId]:
        """The blocks a router believes a prompt can reuse: its longest whole-block prefix the mirror holds."""
        blocks: list[BlockId] = []
        prompt = tuple(tokens)
        for end in range(block_size, len(prompt) + 1, block_size):
            block = self._block_at.get((namespace, prompt[:end]))
            if block is None:
                break
            blocks.append(block)
        return blocks


def contents_difference(expected: Mapping[Place, BlockId], got: Mapping[Place, BlockId]) -> tuple[str, str] | None:
    """The first prefix the mirror gets wrong, as (the cache's, the mirror's) text; None when they are equal."""
    if expected == got:
        return None
    for place in sorted(set(expected) | set(got), key=lambda place: (repr(place[0]), place[1])):
        wanted, actual = expected.get(place), got.get(place)
        if wanted != actual:
            where = f"{list(place[1])}" + ("" if place[0] is None else f" in namespace {place[0]!r}")
            return (f"{where} holds block {wanted}" if wanted is not None else f"{where} holds nothing",
                    f"the mirror: block {actual} (stale)" if actual is not None and wanted is None
                    else f"the mirror: {'nothing (missing)' if actual is None else f'block {actual}'}")
    return None
