"""``RadixCache``: the rules R1-R13 of the prefix cache on top of ``impl.radix``.

Every call validates all of its arguments before it changes anything (R10),
then drives the tree.  The logical clock is per cache and advances once per
successful ``match_prefix`` or ``insert``; nothing reads the wall clock.
"""

from __future__ import annotations

import operator
import reprlib
from array import array
from collections.abc import Sequence

from impl.blocks import cached_tokens, full_blocks, hit_rate, usable_prefix
from impl.arguments import id_array, namespace_argument
from impl.digest import DigestKeeper
from impl.snapshot import snapshot_of
from impl.radix import TOKEN_TYPECODE, RadixTree
from spec.api import (
    DIGEST_FEATURE,
    BlockId,
    BlockRemoved,
    BlockStored,
    Counters,
    Inserted,
    KVEvent,
    Namespace,
    InvalidArgument,
    NodeId,
    NotLocked,
    PrefixMatch,
    PrefixStats,
    Rules,
    Snapshot,
    UnknownNode,
    checked_block_size,
)


class RadixCache:
    """A block-granular prefix cache (R1-R13), as SGLang's RadixCache or vLLM's
    automatic prefix caching, with NodeIds that are the tree's node objects.

    A NodeId is checked on every use to be a live node of this very cache, so
    an evicted node, another cache's node or any other value is an UnknownNode.
    It publishes its KV events (R13): take them with ``take_events``, or they pile up.  It keeps the digest of
    its snapshot (``snapshot_digest``, R11) and says so in ``prefixspec_features``.
    """

    prefixspec_features = frozenset({"events", "namespaces", DIGEST_FEATURE})
    """What a checker may use (``prefixspec.vocabulary.features_of``): its events, its namespaces, its digest."""

    def __init__(self, block_size: int, rules: Rules = Rules()) -> None:
        """An empty cache of ``block_size`` tokens a block (R1), following the variants ``rules`` of R7 and R8.

        ``block_size`` is any value ``operator.index`` accepts, at least 1;
        anything else raises InvalidArgument.

        Runtime complexity: O(1).
        """
        size = checked_block_size(block_size)
        self._block_size = size
        self._rules = rules
        self._split_tails = rules.use == "path+split-tail"
        self._release = rules.use == "release"
        self._keep = rules.dup == "keep"
        self._cut = rules.unit == "block"
        self._tree = RadixTree(size, rules)
        self._digest = DigestKeeper(self._tree, rules)
        self._clock = 0
        self._lookups = 0
        self._query_tokens = 0
        self._hit_tokens = 0
        self._inserted_blocks = 0
        self._evicted_blocks = 0
        self._counters: tuple[int, ...] = ()
        self._stats = PrefixStats(0, 0, 0, 0, 0)
        # Events wait as raw records and become BlockStored / BlockRemoved when taken: making an insert's
        # token tuple at once cost the default namespace's match+insert 20% (benchmark: the note of issue 14).
        self._events: list[tuple[int | None, array[int], int, int, array[int], Namespace] | list[BlockId]] = []

    @property
    def root(self) -> NodeId:
        """The node of the empty prefix; locking it does nothing (R6)."""
        return self._tree.root

    def block_size(self) -> int:
        """Tokens per KV block, B (R1). Runtime complexity: O(1)."""
        return self._block_size

    def tree(self) -> RadixTree:
        """The radix tree behind the cache, for inspection only. Runtime complexity: O(1)."""
        return self._tree

    # -------------------------------------------------------------- matching

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        """The longest cached whole-block prefix of the usable prefix of ``tokens``
        in ``namespace`` (R1, R3, R4, R7, R9, R12).

        All tokens are validated (R1), but only the first
        ``usable_prefix(n, B)`` are searched, so the last token is always left
        to compute (R3).  A match ending inside a node splits it there (R4) and
        the returned node ends exactly at the match; every node from the root
        down to it is used now (R7).

        Runtime complexity: O(n) in C to read the tokens, plus O(d + m / B +
        log s) Python steps for a match through d nodes of m tokens (see
        ``RadixTree.descend``); no Python step per token.
        """
        query = id_array(tokens, "tokens")
        if namespace is not None:
            namespace = namespace_argument(namespace)
        n_tokens = len(query)
        tree = self._tree
        path, partial, matched = tree.descend(query.tobytes(), usable_prefix(n_tokens, self._block_size), namespace)
        self._clock += 1
        if partial is not None:
            path.append(tree.split(partial, matched, self._clock))
        if not self._release:  # variant use=release (R7, vLLM): a lookup touches nothing
            tree.touch(path, self._clock, split_tail=partial if self._split_tails else None, ranked=self._split_tails)
        blocks = array(TOKEN_TYPECODE)
        for node in path:
            blocks.extend(node.blocks)
        self._lookups += 1
        self._query_tokens += n_tokens
        self._hit_tokens += matched
        return PrefixMatch(matched, blocks.tolist(), path[-1] if path else tree.root)

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        """Cache the whole blocks of ``tokens`` in ``namespace`` with ``blocks[i]`` for tokens
        ``[iB, (i+1)B)`` (R1, R2, R4, R5, R7, R9, R10, R12); the new blocks are published as one BlockStored (R13).

        ``blocks`` must hold exactly ``n // B`` distinct ids (none for the
        partial tail, which is never stored).  Where a position is already
        cached the cache keeps its block: a different id passed there is
        returned in ``duplicates`` for the caller to free, the cached id itself
        nowhere; an id cached at another position is refused.  The rest is
        stored in one new leaf, below a node split where the insert leaves the
        cached path inside it (R4).  Returns the node ending at the inserted
        prefix, ``root`` (and no change) when ``n < B``.

        Runtime complexity: O(n) in C, plus O(d + k) Python steps for a cached
        path of d nodes and k new blocks (see ``RadixTree.descend`` and
        ``HeldIds.claim``).
        """
        query = id_array(tokens, "tokens")
        new_ids = id_array(blocks, "blocks")
        if namespace is not None:
            namespace = namespace_argument(namespace)
        block_size = self._block_size
        n_blocks = full_blocks(len(query), block_size)
        if len(new_ids) != n_blocks:
            raise InvalidArgument(f"{len(query)} tokens need exactly {n_blocks} blocks, got {len(new_ids)}")
        tree = self._tree
        if n_blocks == 0:
            self._clock += 1  # a call, as the spec's clock counts them (its digest's stamps, R11)
            return Inserted(tree.root, [])
        buffer = query.tobytes()
        path, partial, matched = tree.descend(buffer, n_blocks * block_size, namespace)
        held = tree.held_blocks(path, partial, matched)
        given = new_ids[: len(held)]
        fresh = new_ids[len(held) :]
        # The ids passed for cached positions are compared with the cached
        # ones in one C comparison first: an engine passes back the ids its
        # match returned, so they are almost always the same, and a Python
        # step per matched block cost a third of insert (benchmark: bench/
        # workload small, issue 7).
        copies: list[tuple[int, int, int]] = []  # dup=keep: (position, the copy, the block a match returns there)
        if given == held:
            duplicates: list[int] = []
        elif self._keep:
            # Variant dup=keep (R5, vLLM): a block offered at a cached position is cached too, another copy;
            # a copy cached at this very position already is passed back, as the first one would be.
            copy_of = tree.copy_of
            duplicates = []
            for index, (new, kept) in enumerate(zip(given.tolist(), held.tolist())):
                if new != kept and copy_of.get(new) != kept:
                    copies.append((index, new, kept))
                    duplicates.append(new)
            if copies and len(copies) != len(held) - copies[0][0]:
                # R5 dup=keep: past the first copy every cached position takes a copy (a vLLM request reuses a
                # leading run of cached blocks and computes the rest anew), so a cached id after a copy is refused.
                raise InvalidArgument("under dup=keep the blocks passed back cached at their positions lead the call")
        else:
            duplicates = [new for new, kept in zip(given.tolist(), held.tolist()) if new != kept]
        # Claiming the fresh ids (and, for the check only, the duplicates)
        # refuses an id repeated in the call or cached at another position,
        # and changes nothing when it refuses.
        if not tree.held_ids.claim(duplicates + fresh.tolist() if duplicates else fresh):
            raise InvalidArgument("blocks repeats an id, or holds an id already cached at another position")
        if self._keep:
            for _index, new, kept in copies:
                tree.add_copy(kept, new)
            duplicates = []
        else:
            tree.held_ids.release(duplicates)

        self._clock += 1
        if partial is not None:
            path.append(tree.split(partial, matched, self._clock))
        for index, new, _kept in copies:
            # One BlockStored per copy (a run of them is one per block, which R13 counts as the same),
            # under the block the caller passed before it, cached at that position.
            start = index * block_size
            self._events.append((int(given[index - 1]) if index else None, query, start, start + block_size, array(TOKEN_TYPECODE, [new]), namespace))
        if fresh:
            path.append(tree.add_leaf(path[-1] if path else tree.root, buffer, fresh, self._clock, namespace))
            parent = (int(new_ids[len(held) - 1]) if self._keep else held[-1]) if held else None
            # A copy of the ids: under dup=keep the tree's own array of a node's blocks changes in place as copies
            # take a place over, and a record is read only when the events are taken (found by takes spanning calls).
            self._events.append((parent, query, len(held) * block_size, n_blocks * block_size, fresh[:], namespace))
        self._inserted_blocks += len(fresh) + len(copies)
        if self._release:
            tree.release_blocks((new_ids if self._keep else held + fresh).tolist(), self._clock)
        else:
            tree.touch(path, self._clock, hit=True, split_tail=partial if self._split_tails else None, ranked=self._split_tails)
        return Inserted(path[-1], duplicates)

    # ----------------------------------------------------------------- locks

    def lock(self, node: NodeId) -> None:
        """Add one lock to ``node``, pinning it and its whole prefix (R6).

        ``root`` does nothing; anything that is not a live node of this cache
        raises UnknownNode.

        Runtime complexity: O(depth of node).
        """
        tree = self._tree
        if node is tree.root:
            return
        if not tree.owns(node):
            raise UnknownNode(f"{reprlib.repr(node)} is not a live node of this cache")
        tree.add_lock(node)

    def unlock(self, node: NodeId) -> None:
        """Remove one lock of ``node``'s own (R6).

        ``root`` does nothing; a node holding no lock of its own raises
        NotLocked; anything that is not a live node of this cache raises
        UnknownNode.

        Runtime complexity: O(depth of node).
        """
        tree = self._tree
        if node is tree.root:
            return
        if not tree.owns(node):
            raise UnknownNode(f"{reprlib.repr(node)} is not a live node of this cache")
        if node.locks == 0:
            raise NotLocked(f"{node!r} holds no lock of its own")
        if self._release:
            self._clock += 1  # variant use=release: an unlock releases blocks, stamped by its call (R7)
            tree.release_clock = self._clock
        tree.remove_lock(node)

    # -------------------------------------------------------------- eviction

    def evict(self, n_blocks: int) -> list[BlockId]:
        """Free at least ``n_blocks`` blocks, whole unpinned leaves, least recently
        used first, or every unpinned block if there are fewer (R8).

        ``n_blocks`` is a value ``operator.index`` accepts, at least 0.
        Returns the freed ids leaf by leaf in eviction order, each leaf's in
        token order.

        Runtime complexity: O(k + l) amortised for k blocks freed from l
        leaves, plus O(log q) for a leaf that waits in the LRU queue's heap
        (see ``RadixTree``), q its entries; independent of the leaves kept.
        """
        try:
            wanted = operator.index(n_blocks)
        except TypeError as exc:
            raise InvalidArgument(f"n_blocks must be an integer, not {type(n_blocks).__name__}") from exc
        if wanted < 0:
            raise InvalidArgument(f"n_blocks must be at least 0, got {wanted}")
        tree = self._tree
        freed: list[BlockId] = []
        if self._release:
            # Variants use=release and unit=block (R7, R8, vLLM): exactly n blocks, oldest release first.
            while len(freed) < wanted:
                block = tree.evict_released()
                if block is None:
                    break
                freed.append(block)
            wanted = 0
        elif self._cut:
            # Variant unit=block (R8): exactly n blocks, the first leaf cut from its tail.
            while len(freed) < wanted:
                leaf = tree.front_leaf()
                if leaf is None:
                    break
                if len(leaf.blocks) <= wanted - len(freed):
                    whole = tree.remove_leaf(leaf)
                    whole.reverse()
                    freed.extend(whole)
                else:
                    freed.extend(tree.cut_leaf(leaf, wanted - len(freed)))
            wanted = 0
        while len(freed) < wanted:
            leaf_blocks = tree.evict_first_leaf()
            if leaf_blocks is None:
                break
            freed.extend(leaf_blocks)
        self._evicted_blocks += len(freed)
        if freed:
            self._events.append(freed)
        return freed

    def take_events(self) -> list[KVEvent]:
        """The KV events since the last take, oldest first (R13). Runtime complexity: O(1)."""
        taken, self._events = self._events, []
        events: list[KVEvent] = []
        for record in taken:
            if isinstance(record, list):
                events.append(BlockRemoved(tuple(record)))
            else:
                parent, query, start, end, fresh, namespace = record
                events.append(BlockStored(parent, tuple(query[start:end]), tuple(fresh), namespace))
        return events

    # -------------------------------------------------------------- counters

    def cached_tokens(self) -> int:
        """Tokens covered by cached blocks: ``cached_blocks() * B`` (R9). Runtime complexity: O(1)."""
        return cached_tokens(self._tree.cached_blocks, self._block_size)

    def cached_blocks(self) -> int:
        """Blocks the cache holds (R9). Runtime complexity: O(1)."""
        return self._tree.cached_blocks

    def evictable_blocks(self) -> int:
        """Cached blocks of unpinned nodes: what ``evict(10**9)`` would free (R9).

        Runtime complexity: O(1).
        """
        return self._tree.evictable_blocks

    def stats(self) -> PrefixStats:
        """The monotone counters (R9). Runtime complexity: O(1)."""
        counters = self._counter_values()
        # The frozen counters made again only when one changed: a lockstep reads the digest after every call, most of
        # which change none (snapshot_digest took 1.6-2.2 us, 0.8 so, timeit on a small tree).
        if counters != self._counters:
            self._counters = counters
            self._stats = PrefixStats(*counters)
        return self._stats

    def hit_rate(self) -> float:
        """hit_tokens / query_tokens, 0.0 before any query token (R9). Runtime complexity: O(1)."""
        return hit_rate(self._hit_tokens, self._query_tokens)

    # ------------------------------------------------------------ inspection

    def snapshot(self) -> Snapshot:
        """The canonical state (R11): every non-root node as a NodeView, oldest
        last use first, a call's nodes (one path) shortest prefix first (``impl.snapshot``).

        Runtime complexity: O(sum of the prefix lengths + N log N) for N nodes.
        """
        return snapshot_of(self._tree, self._rules, self._block_size, self.stats())

    def snapshot_digest(self) -> int:
        """``spec.api.snapshot_digest_of`` the cache's state (R11), kept as calls change it.

        Runtime complexity: O(1) plus, for each node changed since the last digest, O(depth + prefix) if its
        shape changed, else O(1).
        """
        # The counters as ints, without the PrefixStats ``stats`` makes (0.6 us at each change of one: a match, an
        # insert, an evict; bench.instructions).
        return self._digest.digest(self._block_size, self._counter_values())

    def _counter_values(self) -> Counters:
        """R9's counters in ``PrefixStats``' order."""
        return (self._lookups, self._query_tokens, self._hit_tokens, self._inserted_blocks, self._evicted_blocks)

    def check_invariants(self) -> None:
        """Assert the tree's invariants and those tying the counters to it.

        Runtime complexity: that of ``RadixTree.check_invariants``; for tests.
        """
        self._tree.check_invariants()
        assert self._inserted_blocks - self._evicted_blocks == self._tree.cached_blocks, "blocks in = blocks held"
        assert 0 <= self._hit_tokens <= self._query_tokens, "hit tokens within query tokens"
        assert self._hit_tokens % self._block_size == 0, "hits are whole blocks"
        assert all(node.last_use <= self._clock for node, _, _ in self._tree.prefixes()), "uses are in the past"
