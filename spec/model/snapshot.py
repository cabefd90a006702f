"""R11: the snapshot and its digest: built from scratch, and kept up to date as calls mark what they change."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from operator import itemgetter

from spec.api import (
    BlockId,
    NodeView,
    Snapshot,
    block_digest_term,
    counters_digest_of,
    node_digest_term,
    node_shape_hash,
    snapshot_digest_of,
)
from spec.model.counters import Counting
from spec.model.state import KeptNode, Prefix, Stamp


class Snapshotting(Counting):
    """``Counting`` and R11, below."""

    # R11: snapshot ---------------------------------------------------------------------

    def node_views(self) -> Iterator[NodeView]:
        """R4, R11: every node as (prefix, own blocks, own locks), walking the cached prefixes down from the root.

        A node's own blocks are those of the prefixes since the node above it.
        """
        walk: list[tuple[Prefix, tuple[BlockId, ...], tuple[tuple[BlockId, ...], ...]]] = []
        for namespace in self.namespaces():
            for prefix in self._extensions.get((namespace, ()), set()):
                walk.append((prefix, (), ()))
        while walk:
            prefix, since_node, copies_since = walk.pop()
            blocks = since_node + (self._block_at[prefix],)
            copies = copies_since + (tuple(self.copies_at(prefix)),)
            if prefix in self._node_at:
                shown = copies if any(copies) else ()  # R5 dup=keep: a node without copies shows none
                yield NodeView(prefix[1], blocks, self._own_locks.get(prefix, 0), prefix[0], shown)
                blocks, copies = (), ()
            for longer in self._extensions[prefix]:
                walk.append((longer, blocks, copies))

    def snapshot(self) -> Snapshot:
        """R11: every node, in eviction order (R8's key), then prefix length.

        Under ``use=release`` the order is the blocks' own: the nodes come by namespace and prefix, and
        ``released`` lists the unpinned blocks in the order ``evict`` frees them (R7, R8).  Built from
        scratch, the definition that ``kept_snapshot`` is held to.
        """
        entries: list[tuple[tuple[int, ...], int, NodeView]] = []
        for view in self.node_views():
            entries.append((self.order_key((view.namespace, view.prefix)), len(view.prefix), view))
        return self.snapshot_of(entries)

    def snapshot_of(self, entries: Iterable[tuple[tuple[int, ...], int, NodeView]]) -> Snapshot:
        """R11: the snapshot of every node's (order key, prefix length, view), put in the order ``snapshot`` states."""
        if self._rules.use == "release":
            ordered = sorted((view for _key, _length, view in entries), key=lambda view: (repr(view.namespace), view.prefix))
            pinned = self.pinned_prefixes()
            waiting: list[tuple[Stamp, BlockId]] = []
            for block, prefix in self._cached_at.items():
                if not (prefix in pinned and self._block_at[prefix] == block):
                    waiting.append((self._released[block], block))
            waiting.sort()
            return Snapshot(self._block_size, tuple(ordered), self.stats(), tuple(block for _stamp, block in waiting))
        order = sorted(entries, key=itemgetter(0, 1))
        return Snapshot(self._block_size, tuple(view for _key, _length, view in order), self.stats())

    def order_key(self, prefix: Prefix) -> tuple[int, ...]:
        """R11: what puts the node at ``prefix`` in its place in the snapshot: R8's key, none under ``use=release``."""
        return () if self._rules.use == "release" else self.eviction_key(prefix)

    # Kept for R11: the same snapshot, and its digest, kept up to date as calls change the nodes, so that a lockstep
    # reads them after every call at the cost of what the call changed.  Bookkeeping, not a rule: the rules above
    # only mark what they change (``_reshaped``, ``_restamped``, ``_restamped_blocks``), and what is kept is held to
    # ``snapshot()`` and ``digest_from_scratch()`` (stateful_tests/test_snapshot_digest.py).

    def own_view(self, prefix: Prefix) -> NodeView:
        """R4, R11: the view of the node at ``prefix`` alone, its blocks read up from its end to the node above it."""
        own = self.own_prefixes(prefix)
        own.reverse()
        blocks = tuple(self.blocks_of(own))
        copies = tuple([tuple(self.copies_at(at)) for at in own]) if self._copies else ()  # R5: only dup=keep keeps any
        shown = copies if any(copies) else ()  # R5 dup=keep: a node without copies shows none
        return NodeView(prefix[1], blocks, self._own_locks.get(prefix, 0), prefix[0], shown)

    def marked_prefixes(self) -> set[Prefix]:
        """R11: the prefixes the calls since the last refresh marked, the ones ``refresh_kept`` will look at again:
        what a call touched, whatever the cache's size."""
        return self._reshaped | self._restamped

    def refresh_kept(self) -> None:
        """R11: bring the kept views and digest terms up to date with the prefixes the calls since the last refresh
        marked: a node marked in its shape gets its view again, one marked in its locks or order its term.

        Each node's kept state is one ``KeptNode``, reached by one lookup of its prefix: a prefix's hash is made
        anew at every lookup (a tuple keeps none), and the four dicts this state was kept in cost a match some
        2 us a node of its path (timeit on a path of nine nodes)."""
        reshaped, restamped, blocks = self._reshaped, self._restamped, self._restamped_blocks
        if not (reshaped or restamped or blocks):  # the digest refreshed them already, or a query changed nothing
            return
        if not reshaped:
            # No shape changed (a lock, an unlock, a match or an insert that made no node): each marked prefix ends a
            # node that was there at the last refresh, whose kept record still holds its shape, so only its term is
            # made again, and its view where its locks changed.  Nearly every refresh of an engine's calls, without
            # the sorting out below of which nodes get their view again (a lock's refresh: 2.6 -> 2.1 us, timeit).  A
            # node is marked in its shape when it is made, cut or removed, so with none so marked every node marked
            # here is one of the kept ones.
            for node in restamped:
                self.refresh_term(node, self._kept[node], self._own_locks.get(node, 0), self.order_key(node))
        else:
            self.refresh_shapes()
        if self._rules.use == "release":
            for block in blocks:
                self._block_sum -= self._block_terms.pop(block, 0)
                if block in self._cached_at:
                    self._block_terms[block] = block_digest_term(block, self._released[block])
                    self._block_sum += self._block_terms[block]
        # Emptied in place, not made anew, now that all is read (nothing above marks): three new sets a refresh were
        # some 0.15 us of a lock's 2.5 (timeit).
        reshaped.clear()
        restamped.clear()
        blocks.clear()

    def refresh_shapes(self) -> None:
        """R11, ``refresh_kept`` where some shape changed: the nodes the marked prefixes end or lie in, a node marked in
        its shape given its view again, one marked in its locks or order its term."""
        reshaped, restamped = self._reshaped, self._restamped
        node_at, kept = self._node_at, self._kept
        touched: dict[Prefix, KeptNode | None] = {}
        """The nodes to refresh, each with its kept state, or None where it gets its view again (its shape
        changed, or it has none yet)."""
        for prefix in reshaped | restamped:
            if prefix in node_at:
                node = prefix
            else:
                if prefix in kept:
                    self.forget_view(prefix)  # the node is gone, or now ends elsewhere
                if prefix not in self._block_at:
                    continue
                found = self.node_below(prefix)
                if found is None:
                    continue
                node = found
            record = kept.get(node)
            if record is None or prefix in reshaped:
                touched[node] = None
            else:
                touched.setdefault(node, record)
        views, own_locks = self._views, self._own_locks
        for node, record in touched.items():
            locks = own_locks.get(node, 0)
            key = self.order_key(node)
            if record is None:  # its view made again (its locks read there), and those it had forgotten
                view = self.own_view(node)
                shape = node_shape_hash(view.namespace, view.prefix, view.blocks, view.copies)
                term = node_digest_term(shape, locks, key)
                record = kept.get(node)
                if record is None:
                    kept[node] = KeptNode(view, shape, key, term, {locks: view})
                    self._node_sum += term
                else:
                    self._node_sum += term - record.term
                    record.view, record.shape, record.key, record.term, record.by_locks = view, shape, key, term, {locks: view}
                views[node] = view
            else:
                self.refresh_term(node, record, locks, key)

    def refresh_term(self, node: Prefix, record: KeptNode, locks: int, key: tuple[int, ...]) -> None:
        """R11: the digest term of the node at ``node``, whose shape is its record's, with ``locks`` own locks and
        order ``key``; its view too where its locks changed: the one it had with as many locks, if it had one.

        A lock and its unlock give the view back: a NodeView made anew at each was a third of a lock's digest
        (0.7 of 2.1 us, timeit)."""
        view = record.view
        if view.locks != locks:
            known = record.by_locks.get(locks)
            if known is None:
                known = record.by_locks[locks] = NodeView(view.prefix, view.blocks, locks, view.namespace, view.copies)
            record.view = self._views[node] = known
        term = node_digest_term(record.shape, locks, key)
        self._node_sum += term - record.term
        record.key, record.term = key, term

    def forget_view(self, prefix: Prefix) -> None:
        """R11: drop the kept view and digest term of ``prefix``, if any."""
        self._views.pop(prefix, None)
        record = self._kept.pop(prefix, None)
        if record is not None:
            self._node_sum -= record.term

    def kept_snapshot(self) -> Snapshot:
        """R11: ``snapshot()``, from the views kept as calls change the nodes: it costs the nodes, not their prefixes."""
        self.refresh_kept()
        return self.snapshot_of((record.key, len(record.view.prefix), record.view) for record in self._kept.values())

    def kept_views(self) -> dict[Prefix, NodeView]:
        """R4, R11: the nodes of ``kept_snapshot`` by where they end, in no order, for a reader that orders nothing (a
        coverage of the rules' events): it costs a copy of the kept views, not their sort, and the copy keeps the
        hashes of their prefixes, so two readings are compared by place without hashing a prefix again."""
        self.refresh_kept()
        return self._views.copy()

    def snapshot_digest(self) -> int:
        """R11: ``spec.api.snapshot_digest_of`` the state, from the terms kept as calls change it: it costs what the
        calls since the last digest changed, not the cache's size."""
        self.refresh_kept()
        return counters_digest_of(self._block_size, self.counter_values(), self._node_sum, self._block_sum)

    def digest_from_scratch(self) -> int:
        """R11: the digest of ``snapshot_digest``, from every node's view and every block's release made anew."""
        node_terms = 0
        for view in self.node_views():
            shape = node_shape_hash(view.namespace, view.prefix, view.blocks, view.copies)
            node_terms += node_digest_term(shape, view.locks, self.order_key((view.namespace, view.prefix)))
        block_terms = 0
        if self._rules.use == "release":
            for block in self._cached_at:
                block_terms += block_digest_term(block, self._released[block])
        return snapshot_digest_of(self._block_size, self.stats(), node_terms, block_terms)
