"""R11's snapshot digest, part of the interface (``spec.api``): the terms a cache that keeps a digest sums, and their sum.

A cache that names ``DIGEST_FEATURE`` keeps ``snapshot_digest()`` up to date from these functions, so a lockstep
compares two caches after every call at a cost independent of their size.
"""

from __future__ import annotations

from collections.abc import Sequence

from spec.api_values import BlockId, Namespace, PrefixStats

DIGEST_FEATURE = "digest"
"""The feature word (``prefixspec_features``) by which a Python cache says it keeps ``snapshot_digest()``: an int
that is ``snapshot_digest_of`` its state, kept up to date as calls change it, so that a lockstep compares two
caches after every call at a cost independent of their size and builds whole snapshots only to explain a
difference.  A cache that does not name the feature is compared by its snapshot alone."""

DIGEST_BITS = 64
_DIGEST_MASK = (1 << DIGEST_BITS) - 1


def hashable_key(values: Sequence[int]) -> tuple[int | None, ...]:
    """An order key as a tuple whose hash tells every two keys apart as well as a tuple's can: Python hashes -1 and
    -2 alike, so a key with a negative int is written ``(None, *zigzag)``, every int as a distinct non-negative one
    (0, -1, 1, -2... as 0, 1, 2, 3...); a key without one stays as it is (no None: the two forms never meet)."""
    if not values or min(values) >= 0:
        return tuple(values)
    return (None, *(2 * value if value >= 0 else -2 * value - 1 for value in values))


def node_shape_hash(namespace: Namespace, prefix: tuple[int, ...], blocks: tuple[BlockId, ...], copies: tuple[tuple[BlockId, ...], ...]) -> int:
    """The part of a node's ``NodeView`` that only a change of the tree's shape changes (R4, R5, R12): where it
    ends, its blocks and their copies.  Made once per change of them, since it reads the whole prefix."""
    return hash((namespace, prefix, blocks, copies))


def node_digest_term(shape: int, locks: int, order_key: Sequence[int]) -> int:
    """One node's share of a digest: its shape, its own locks (R6) and its place in the order, as the key its
    cache orders its snapshot by (R8's ``eviction_key``, ``(last use, rank)`` under lru; ``()`` under
    ``use=release``, whose order is the blocks')."""
    return hash((shape, locks, hashable_key(order_key))) & _DIGEST_MASK


def block_digest_term(block: BlockId, released: tuple[int, int]) -> int:
    """One cached block's share of a digest under ``use=release`` (R7): when it was last released, as the spec
    stamps it (the call's clock, its order within the call); with the nodes' locks this gives ``released``."""
    return hash((block, released)) & _DIGEST_MASK


def snapshot_digest_of(block_size: int, stats: PrefixStats, node_terms: int, block_terms: int) -> int:
    """The digest of a state: its block size and counters (R1, R9), and the sums (mod 2**64) of its nodes'
    ``node_digest_term`` and its blocks' ``block_digest_term``.  The snapshot is a function of what it digests,
    so equal states have equal digests; a different state has a different one but for a hash collision
    (one in 2**64 for terms that behave as random), which the lockstep's full comparisons guard against."""
    counters = (stats.lookups, stats.query_tokens, stats.hit_tokens, stats.inserted_blocks, stats.evicted_blocks)
    return counters_digest_of(block_size, counters, node_terms, block_terms)


Counters = tuple[int, int, int, int, int]
"""R9's five counters in ``PrefixStats``' order: lookups, query_tokens, hit_tokens, inserted_blocks, evicted_blocks."""


def counters_digest_of(block_size: int, counters: Counters, node_terms: int, block_terms: int) -> int:
    """``snapshot_digest_of``, the counters given as the tuple of ``PrefixStats``' fields in order: for a cache that
    keeps them as ints, without a ``PrefixStats`` made at every change of one (a match changes three)."""
    return hash((block_size, counters, node_terms & _DIGEST_MASK, block_terms & _DIGEST_MASK)) & _DIGEST_MASK
