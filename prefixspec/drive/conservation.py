"""The engine's conservation and lock-safety check: from scratch, and by the paths of the locks.

``check_from_scratch`` is the definition: from the cache's snapshot, the map of every cached whole-block
prefix to its block, then every pool id in exactly one place (the free list, the cache, one running
request) and every locked prefix still holding the request's block.  It cuts and hashes every cached prefix
and every locked one: O(cached tokens + locked tokens²) a check, at Python speed a prefix.

``PathCheck`` gives the same verdict from the snapshot's nodes as they are.  Where the nodes form a tree (every
node ends a whole number of blocks below its parent's end, and no two children of one node start with the same
block), no two of them cache one prefix, so the map of the definition holds every node's blocks: conservation is
then every pool id counted once over the free list, the nodes and the requests, and a request's locked prefix
holds its blocks exactly when, node by node up its path, the node that holds its deepest block not yet checked
ends on the prompt's tokens there and holds the table's blocks from its own first one up to there.  It cuts two
prefixes a node and two a node on each lock's path, and compares the rest at C speed.  A snapshot that is no
such tree (a broken cache's) is judged by the check from scratch alone.  Whatever the cost, a violation is always reported
by ``check_from_scratch`` (so in its words), every ``scratch_every``-th check is made from scratch too, and a
path check that passes where the scratch one fails, or the other way, is a defect of the checker
(``PathCheckDiverged``): the tests hold the two equal on caches that break each guarantee.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Protocol

from spec.api import BlockId, Namespace, NodeView, Snapshot

Key = tuple[Namespace, tuple[int, ...]]
"""A cached whole-block prefix with its namespace (R12)."""

SCRATCH_EVERY = 64
"""Of the path checks, every this-many-th is made from scratch as well (``PathCheck.scratch_every``)."""


class EngineViolation(AssertionError):
    """A guarantee the engine relies on was broken by the cache."""


class PathCheckDiverged(AssertionError):
    """The path check and the one from scratch gave different verdicts on one state: a defect of the checker."""


class Holder(Protocol):
    """A running request as the check reads it (``engine.Request``)."""

    prompt: tuple[int, ...]
    table: list[BlockId]
    own: list[BlockId]
    locked_blocks: int
    namespace: Namespace


def cached_block_by_prefix(snapshot: Snapshot) -> dict[Key, BlockId]:
    """Every cached whole-block prefix, with its namespace (R12), and its last block's id, read off a snapshot."""
    found: dict[Key, BlockId] = {}
    for view in snapshot.nodes:
        found.update(view_entries(view, snapshot.block_size))
    return found


def copies_by_prefix(snapshot: Snapshot) -> dict[Key, tuple[BlockId, ...]]:
    """R5 ``dup=keep``: the further copies cached at each whole-block prefix that holds any, read off a snapshot."""
    found: dict[Key, tuple[BlockId, ...]] = {}
    for view in snapshot.nodes:
        found.update(view_copies(view, snapshot.block_size))
    return found


def view_entries(view: NodeView, size: int) -> list[tuple[Key, BlockId]]:
    """The whole-block prefixes one node caches, each with its block."""
    start = len(view.prefix) - len(view.blocks) * size
    return [((view.namespace, view.prefix[: start + (index + 1) * size]), block) for index, block in enumerate(view.blocks)]


def view_copies(view: NodeView, size: int) -> list[tuple[Key, tuple[BlockId, ...]]]:
    """R5 ``dup=keep``: the further copies one node holds, by whole-block prefix."""
    start = len(view.prefix) - len(view.blocks) * size
    return [((view.namespace, view.prefix[: start + (index + 1) * size]), copies) for index, copies in enumerate(view.copies) if copies]


def locked_keys(request: Holder, size: int) -> list[Key]:
    """The prefixes ``request`` holds locked, one a locked block."""
    return [(request.namespace, request.prompt[: (position + 1) * size]) for position in range(request.locked_blocks)]


def check_from_scratch(snapshot: Snapshot, free: Sequence[BlockId], running: Sequence[Holder], pool_size: int) -> None:
    """Conservation and lock safety, from the cache's snapshot (the definition ``PathCheck`` is held to)."""
    cached = cached_block_by_prefix(snapshot)
    places: dict[BlockId, str] = {}
    held = list(cached.values())
    for copies in copies_by_prefix(snapshot).values():
        held.extend(copies)
    holders: list[tuple[str, Sequence[BlockId]]] = [("the free list", free), ("the cache", held)]
    for index, request in enumerate(running):
        holders.append((f"running request {index}", request.own))
    for where, blocks in holders:
        for block in blocks:
            if block in places:
                raise EngineViolation(f"block {block} is in both {places[block]} and {where}")
            places[block] = where
    lost = sorted(set(range(pool_size)) - set(places))
    if lost:
        raise EngineViolation(f"blocks {lost} are nowhere: not free, not running, not cached")
    strays = sorted(set(places) - set(range(pool_size)))
    if strays:
        raise EngineViolation(f"blocks {strays} are not ids of the pool")
    for request in running:
        for position, prefix in enumerate(locked_keys(request, snapshot.block_size)):
            if cached.get(prefix) != request.table[position]:
                raise EngineViolation(
                    f"a locked prefix lost block {position} (id {request.table[position]}): "
                    f"the cache holds {cached.get(prefix)} there"
                )


class PathCheck:
    """``check_from_scratch``'s verdict, read off the snapshot's nodes by block id (see the module's docstring)."""

    def __init__(self, pool_size: int, scratch_every: int = SCRATCH_EVERY) -> None:
        self.pool_size = pool_size
        self.pool = frozenset(range(pool_size))
        self.scratch_every = scratch_every
        self.checks = 0

    def check(self, snapshot: Snapshot, free: Sequence[BlockId], running: Sequence[Holder]) -> None:
        """Raise ``EngineViolation`` (in ``check_from_scratch``'s words) where ``check_from_scratch`` would."""
        self.checks += 1
        holds = self.holds(snapshot, free, running)
        if holds and self.checks % self.scratch_every:
            return
        check_from_scratch(snapshot, free, running, self.pool_size)  # raises where this check found a violation
        if holds is False:
            raise PathCheckDiverged("the path check found a violation that the check from scratch does not find")

    def holds(self, snapshot: Snapshot, free: Sequence[BlockId], running: Sequence[Holder]) -> bool | None:
        """Whether conservation and lock safety hold; None where the nodes form no tree (or a request locks more
        blocks than its prompt or table has), which the check from scratch alone judges."""
        size, nodes = snapshot.block_size, snapshot.nodes
        if not self._is_tree(nodes, size) or any(
            request.locked_blocks * size > len(request.prompt) or request.locked_blocks > len(request.table) for request in running
        ):
            return None
        return self._conserved(nodes, free, running) and self._locks_hold(nodes, running, size)

    @staticmethod
    def _is_tree(nodes: Sequence[NodeView], size: int) -> bool:
        """Every node ends a whole number of blocks below the node it hangs from (one ending where it starts, in its
        namespace, or the root), holds at least one block and no more copies than blocks, and no two nodes start
        with one block: then no prefix is cached twice.  (Take the shortest prefix two nodes cache.  Where both
        start at one place, they start with one block.  Else the one that starts later hangs from a node that ends
        at its start, and the other covers that end too: a shorter prefix cached twice, or the other is that node,
        which then ends before the prefix.)"""
        if type(size) is not int or size < 1:
            return False
        ends: set[Key] = set()
        starts: set[Key] = set()
        parents: list[Key] = []
        for view in nodes:
            prefix, count = view.prefix, len(view.blocks)
            start = len(prefix) - count * size
            if not count or start < 0 or len(prefix) % size or len(view.copies) not in (0, count):
                return False
            first = (view.namespace, prefix[: start + size])
            if first in starts:
                return False
            starts.add(first)
            ends.add((view.namespace, prefix))
            if start:
                parents.append((view.namespace, prefix[:start]))
        return ends.issuperset(parents)

    def _conserved(self, nodes: Sequence[NodeView], free: Sequence[BlockId], running: Sequence[Holder]) -> bool:
        """Every pool id in exactly one place: as many ids as the pool, and they are the pool's (at C speed)."""
        every = list(free)
        for view in nodes:
            every += view.blocks
            for copies in view.copies:
                every += copies
        for request in running:
            every += request.own
        return len(every) == self.pool_size and self.pool.issuperset(every) and len(set(every)) == self.pool_size

    @staticmethod
    def _locks_hold(nodes: Sequence[NodeView], running: Sequence[Holder], size: int) -> bool:
        """Every locked prefix holds its request's block, each id being in one place (``_conserved``) and the nodes a
        tree: up each locked path, the node holding the deepest block not yet checked must hold it at the table's
        position, end on the prompt's tokens up to there, and hold the table's blocks from its own first one up to
        there; the path goes on at the block before that node's first."""
        holder: dict[BlockId, NodeView] = {}
        for view in nodes:
            holder.update(zip(view.blocks, itertools.repeat(view)))
        for request in running:
            table, prompt, namespace = request.table, request.prompt, request.namespace
            position = request.locked_blocks - 1
            while position >= 0:
                found = holder.get(table[position])
                if found is None or found.namespace != namespace:
                    return False
                first = len(found.prefix) // size - len(found.blocks)  # the position of its first block (a tree's is >= 0)
                end = (position + 1) * size
                if (
                    not first <= position < first + len(found.blocks)
                    or found.prefix[:end] != prompt[:end]
                    or found.blocks[: position - first + 1] != tuple(table[first : position + 1])
                ):
                    return False
                position = first - 1
        return True
