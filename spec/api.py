"""The interface every prefix cache in this project satisfies.

This module holds only types and errors: the vocabulary shared by the
specification (``spec.model.SpecCache``), the optimised implementation
(``impl.RadixCache``) and any engine's cache checked against them, with the two
shapes every one of them tests its arguments against, said once: a block size
(``checked_block_size``, R1) and a namespace (``is_namespace``, R12).  It holds
no other rule and no arithmetic, so an implementation may import it without
reaching its answers through the spec's code.

The interface is in three modules beside this one, each re-exported here, where every user imports it from:
``spec.api_values`` (ids, namespaces, errors, results, events, the snapshot), ``spec.api_rules`` (the rule sets
and their presets) and ``spec.api_digest`` (R11's snapshot digest).  ``impl`` imports these interface modules
and nothing else of ``spec``.

The rules R1-R13 that give these calls their meaning are stated in prose in
``spec/README.md`` and implemented, in the same order, by the modules of ``spec/model/``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from spec.api_values import (
    BlockId as BlockId,
    NodeId as NodeId,
    ID_LIMIT as ID_LIMIT,
    NamespacePart as NamespacePart,
    Namespace as Namespace,
    is_namespace_part as is_namespace_part,
    is_namespace as is_namespace,
    NAMESPACE_SHAPE as NAMESPACE_SHAPE,
    PrefixCacheError as PrefixCacheError,
    InvalidArgument as InvalidArgument,
    checked_block_size as checked_block_size,
    UnknownNode as UnknownNode,
    NotLocked as NotLocked,
    TargetFailure as TargetFailure,
    ERROR_TYPES as ERROR_TYPES,
    PrefixMatch as PrefixMatch,
    Inserted as Inserted,
    PrefixStats as PrefixStats,
    NodeView as NodeView,
    BlockStored as BlockStored,
    BlockRemoved as BlockRemoved,
    AllBlocksCleared as AllBlocksCleared,
    KVEvent as KVEvent,
    Snapshot as Snapshot,
)
from spec.api_rules import (
    UseRule as UseRule,
    EvictRule as EvictRule,
    UnitRule as UnitRule,
    DupRule as DupRule,
    SplitRule as SplitRule,
    SLRU_DEFAULT_THRESHOLD as SLRU_DEFAULT_THRESHOLD,
    RuleField as RuleField,
    RULE_FIELDS as RULE_FIELDS,
    USE_RULES as USE_RULES,
    EVICT_RULES as EVICT_RULES,
    SPLIT_RULES as SPLIT_RULES,
    RULE_REQUIREMENTS as RULE_REQUIREMENTS,
    Rules as Rules,
    rules_problem as rules_problem,
    RULE_PRESETS as RULE_PRESETS,
    parse_rules as parse_rules,
)
from spec.api_digest import (
    DIGEST_FEATURE as DIGEST_FEATURE,
    DIGEST_BITS as DIGEST_BITS,
    hashable_key as hashable_key,
    node_shape_hash as node_shape_hash,
    node_digest_term as node_digest_term,
    block_digest_term as block_digest_term,
    snapshot_digest_of as snapshot_digest_of,
    Counters as Counters,
    counters_digest_of as counters_digest_of,
)


@runtime_checkable
class PrefixCache(Protocol):
    """The calls of a block-granular prefix cache; see R1-R13 for their rules."""

    @property
    def root(self) -> NodeId:
        """The node of the empty prefix; locking it does nothing (R6)."""
        ...

    def block_size(self) -> int:
        """Tokens per KV block, B (R1)."""
        ...

    def match_prefix(self, tokens: Sequence[int]) -> PrefixMatch:
        """The longest cached whole-block prefix of the usable prefix (R3, R4, R7, R9); see ``TakesNamespaces`` for R12."""
        ...

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId]) -> Inserted:
        """Cache the whole blocks of ``tokens``; one id per whole block (R4, R5, R7, R9); see ``TakesNamespaces`` for R12."""
        ...

    def lock(self, node: NodeId) -> None:
        """Add one lock to ``node``, pinning its whole prefix (R6)."""
        ...

    def unlock(self, node: NodeId) -> None:
        """Remove one lock from ``node`` (R6)."""
        ...

    def evict(self, n_blocks: int) -> list[BlockId]:
        """Free at least ``n_blocks`` unpinned blocks, least recently used leaves first (R8)."""
        ...

    def cached_tokens(self) -> int:
        """Tokens covered by cached blocks: ``cached_blocks() * block_size()`` (R9)."""
        ...

    def cached_blocks(self) -> int:
        """Blocks the cache holds (R9)."""
        ...

    def evictable_blocks(self) -> int:
        """Cached blocks that no lock pins (R9)."""
        ...

    def stats(self) -> PrefixStats:
        """The counters (R9)."""
        ...

    def hit_rate(self) -> float:
        """hit_tokens / query_tokens, 0.0 before any query token (R9)."""
        ...

    def snapshot(self) -> Snapshot:
        """The canonical state (R11)."""
        ...


class TakesNamespaces(Protocol):
    """A cache whose prefixes live in namespaces (R12); optional: a cache without them is called without the argument."""

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        """R3 within ``namespace``."""
        ...

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        """R5 within ``namespace``."""
        ...


@runtime_checkable
class PublishesEvents(Protocol):
    """A cache that publishes its KV events (R13); optional beside ``PrefixCache``."""

    def take_events(self) -> list[KVEvent]:
        """The events since the last call of ``take_events`` (since the cache was made, the first time), oldest first."""
        ...


CacheFactory = Callable[[int], PrefixCache]
"""How a cache is made: ``factory(block_size)`` returns a fresh, empty cache of that block size."""

