"""The engine's conservation and lock-safety check: from scratch, and kept up to date as the snapshots change.

``check_from_scratch`` is the definition: from the cache's snapshot, the map of every cached whole-block
prefix to its block, then every pool id in exactly one place (the free list, the cache, one running
request) and every locked prefix still holding the request's block.  It reads the whole snapshot and
slices every locked prefix again: O(cache size + locked tokens²) an engine step.

``KeptCheck`` gives the same verdict at a cost of what changed.  A snapshot's nodes are frozen views; the
lockstep's snapshots reuse the view of every node no call touched (``SpecCache.kept_snapshot``), so the
views that differ from the last check's by identity are the nodes that changed, and only their prefixes
enter or leave the kept map.  A request's locked prefixes are cut once, when its lock moves; after that
only the prefixes whose block changed are looked at again.  Whatever the cost, a violation is always
reported by ``check_from_scratch`` (so in its words), every ``scratch_every``-th check is made from scratch
too, and a kept check that passes where the scratch one fails, or the other way, is a defect of the checker
(``KeptCheckDiverged``): the tests hold the two equal on caches that break each guarantee.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from spec.api import BlockId, Namespace, NodeView, Snapshot

Key = tuple[Namespace, tuple[int, ...]]
"""A cached whole-block prefix with its namespace (R12)."""

SCRATCH_EVERY = 64
"""Of the kept checks, every this-many-th is made from scratch as well (``KeptCheck.scratch_every``)."""


class EngineViolation(AssertionError):
    """A guarantee the engine relies on was broken by the cache."""


class KeptCheckDiverged(AssertionError):
    """The kept check and the one from scratch gave different verdicts on one state: a defect of the checker."""


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
    """Conservation and lock safety, from the cache's snapshot (the definition ``KeptCheck`` is held to)."""
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


class _Lock:
    """What the kept check knows of one running request's lock: the prefixes and blocks it holds locked."""

    def __init__(self, request: Holder, size: int) -> None:
        self.request = request
        self.locked = request.locked_blocks
        self.blocks = request.table[: self.locked]
        self.keys = locked_keys(request, size)


class KeptCheck:
    """``check_from_scratch``'s verdict, from what changed since the last check (see the module's docstring)."""

    def __init__(self, pool_size: int, scratch_every: int = SCRATCH_EVERY) -> None:
        self.pool_size = pool_size
        self.pool = set(range(pool_size))
        self.scratch_every = scratch_every
        self.checks = 0
        self._snapshot: Snapshot | None = None
        self._views: dict[int, tuple[NodeView, list[tuple[Key, BlockId]], list[tuple[Key, tuple[BlockId, ...]]]]] = {}
        """The last snapshot's nodes by identity (the view kept, so that its id is not reused), with their entries."""
        self.cached: dict[Key, BlockId] = {}
        self.copies: dict[Key, tuple[BlockId, ...]] = {}
        self._locks: dict[int, _Lock] = {}
        """The running requests' locks by the request's identity."""
        self._watch: dict[Key, dict[int, BlockId]] = {}
        """Every locked prefix: the requests (by identity) that hold it, and the block each holds there."""
        self._told = False
        self._moved: dict[int, Holder] = {}
        """The requests whose lock moved or ended since the last check, as the engine told (``moved``)."""

    def moved(self, request: Holder) -> None:
        """``request``'s lock is new, moved or released: an engine that tells every such change spares the check
        a look at every running request (one that does not tell any is followed all the same)."""
        self._told = True
        self._moved[id(request)] = request

    def check(self, snapshot: Snapshot, free: Sequence[BlockId], running: Sequence[Holder]) -> None:
        """Raise ``EngineViolation`` (in ``check_from_scratch``'s words) where ``check_from_scratch`` would."""
        self.checks += 1
        changed = self._follow(snapshot)
        holds = self._requests_hold(running, snapshot.block_size)  # first: a finished request's prefixes are no longer watched
        if changed is None:  # a snapshot the kept map cannot follow: the check from scratch alone judges it
            check_from_scratch(snapshot, free, running, self.pool_size)
            return
        holds = holds and self._locks_hold(changed) and self._conserved(free, running)
        if holds and self.checks % self.scratch_every:
            return
        check_from_scratch(snapshot, free, running, self.pool_size)  # raises where the kept check found a violation
        if not holds:
            raise KeptCheckDiverged("the kept engine check found a violation that the check from scratch does not find")

    def _follow(self, snapshot: Snapshot) -> list[Key] | None:
        """Bring the kept map up to date with ``snapshot``: the prefixes whose block changed, or None for a
        snapshot that caches one prefix twice (``check_from_scratch`` judges it, and the map is read again)."""
        if snapshot is self._snapshot:
            return []
        self._snapshot = snapshot
        size = snapshot.block_size
        views = self._views
        current = dict(zip(map(id, snapshot.nodes), snapshot.nodes))
        touched: dict[Key, BlockId | None] = {}
        cached, copies = self.cached, self.copies
        gone = [views.pop(ident) for ident in views.keys() - current.keys()]
        added = [current[ident] for ident in current.keys() - views.keys()]
        if gone and added:
            # A node whose locks alone changed has a new view of the same prefix and blocks (the very tuples): its
            # entries stay as they are.
            same_shape = {(id(old[0].prefix), id(old[0].blocks)): old for old in gone}
            moved = []
            for view in added:
                old = same_shape.pop((id(view.prefix), id(view.blocks)), None)
                if old is not None and old[0].namespace == view.namespace and old[0].copies == view.copies:
                    views[id(view)] = (view, old[1], old[2])
                    moved.append(view)
                elif old is not None:
                    same_shape[(id(view.prefix), id(view.blocks))] = old
            if moved:
                gone = list(same_shape.values())
                kept = set(map(id, moved))
                added = [view for view in added if id(view) not in kept]
        for _, entries, held_copies in gone:
            for key, block in entries:
                touched.setdefault(key, block)
                del cached[key]
            for key, _ in held_copies:
                del copies[key]
        twice = False
        for view in added:
            entries, held_copies = view_entries(view, size), view_copies(view, size) if view.copies else []
            views[id(view)] = (view, entries, held_copies)
            for key, block in entries:
                if key in cached:
                    twice = True
                touched.setdefault(key, None)
                cached[key] = block
            copies.update(held_copies)
        if twice or len(current) != len(snapshot.nodes):
            self._snapshot, self._views, self.cached, self.copies = None, {}, {}, {}
            return None
        return [key for key, block in touched.items() if cached.get(key) != block]

    def _locks_hold(self, changed: list[Key]) -> bool:
        """The locked prefixes among ``changed`` still hold their requests' blocks."""
        cached, watch = self.cached, self._watch
        for key in changed:
            holders = watch.get(key)
            if holders is not None and any(cached.get(key) != block for block in holders.values()):
                return False
        return True

    def _requests_hold(self, running: Sequence[Holder], size: int) -> bool:
        """Follow the requests' locks: a lock that is new or moved is checked whole, a finished one forgotten."""
        if self._told:
            moved, self._moved = self._moved, {}
            holds = True
            # By identity: ``moved`` holds each request, so no other live object has its id (a scan of the running
            # requests for each moved one ran 166,000 generators in a ci engine machine, cProfile).
            running_ids = set(map(id, running))
            for ident, request in moved.items():
                if ident in running_ids:
                    holds = self._relock(request, size) and holds
                elif ident in self._locks:
                    self._unwatch(ident, self._locks.pop(ident))
            if len(self._locks) == len(running):
                return holds
            return self._poll(running, size) and holds  # a request it was not told of: every one is looked at
        return self._poll(running, size)

    def _relock(self, request: Holder, size: int) -> bool:
        """Watch ``request``'s locked prefixes anew; whether they hold its blocks now."""
        ident = id(request)
        lock = self._locks.get(ident)
        if lock is not None:
            self._unwatch(ident, lock)
        lock = self._locks[ident] = _Lock(request, size)
        holds = True
        for key, block in zip(lock.keys, lock.blocks):
            self._watch.setdefault(key, {})[ident] = block
            if self.cached.get(key) != block:
                holds = False
        return holds

    def _poll(self, running: Sequence[Holder], size: int) -> bool:
        """``_requests_hold`` by a look at every running request."""
        holds = True
        locks = self._locks
        for request in running:
            lock = locks.get(id(request))
            if lock is not None and lock.request is request and lock.locked == request.locked_blocks and lock.blocks == request.table[: lock.locked]:
                continue
            holds = self._relock(request, size) and holds
        if len(locks) > len(running):  # every running request is among them now: the rest have finished
            live = set(map(id, running))
            for gone in [ident for ident in locks if ident not in live]:
                self._unwatch(gone, locks.pop(gone))
        return holds

    def _unwatch(self, ident: int, lock: _Lock) -> None:
        for key in lock.keys:
            holders = self._watch.get(key)
            if holders is not None:
                holders.pop(ident, None)
                if not holders:
                    del self._watch[key]

    def _conserved(self, free: Sequence[BlockId], running: Sequence[Holder]) -> bool:
        """Every pool id in exactly one place: as many ids as the pool, and they are the pool's (at C speed)."""
        every = [*free, *self.cached.values()]
        for copies in self.copies.values():
            every.extend(copies)
        for request in running:
            every.extend(request.own)
        return len(every) == self.pool_size and self.pool.issuperset(every) and len(set(every)) == self.pool_size
