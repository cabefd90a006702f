"""The interface every prefix cache in this project satisfies.

This module holds only types and errors: the vocabulary shared by the
specification (``spec.model.SpecCache``), the optimised implementation
(``impl.RadixCache``) and any engine's cache checked against them.  It holds no
rule and no arithmetic, so an implementation may import it without reaching its
answers through the spec's code.

The rules R1-R13 that give these calls their meaning are stated in prose in
``spec/README.md`` and implemented, in the same order, by ``spec/model.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

BlockId = int
"""A KV block id: an int with 0 <= id < 2**32 (R1)."""

NodeId = Hashable
"""An opaque, hashable handle of a node; each cache has its own ``root``."""

ID_LIMIT = 2**32
"""Tokens and block ids lie in [0, ID_LIMIT) (R1)."""

NamespacePart = None | int | str
Namespace = NamespacePart | tuple[NamespacePart, ...]
"""R12: the namespace of a prefix (a tenant, a LoRA adapter, a cache salt): None (the default
namespace), an int, a str, or a flat tuple of those.  Two namespaces are the same only when they are
equal values of the same shape: ``0`` is not ``"0"``, ``None`` is not ``""``, ``("a", "bc")`` is not
``("ab", "c")``.  A bool is not an int here (``True == 1`` in Python), nor is a float."""


class PrefixCacheError(Exception):
    """Base of every error a prefix cache raises on purpose."""


class InvalidArgument(PrefixCacheError, ValueError):
    """An argument breaks R1, R5 or R8; the call changed nothing (R10)."""


class UnknownNode(PrefixCacheError, KeyError):
    """A node handle that this cache never issued, or whose node was evicted (R6)."""

    def __str__(self) -> str:
        # KeyError quotes its argument; a sentence reads better in reports.
        return Exception.__str__(self)


class NotLocked(PrefixCacheError, RuntimeError):
    """``unlock`` of a node that holds no lock of its own (R6)."""


class TargetFailure(BaseException):
    """The cache under test failed as a program, not as a cache: it gave no answer to compare.

    An engine driven over a pipe that crashes, hangs, prints garbage or answers
    another call raises a subclass (``prefixspec.targets.pipe.EngineProtocolError``); its
    message is the whole report.  It derives from ``BaseException``, as
    ``KeyboardInterrupt`` does, so that no ``except Exception`` of a checker (nor
    Hypothesis, which would shrink it) mistakes it for the answer of a call: it
    stops the whole run, and ``prefixspec check`` reports it.
    """


ERROR_TYPES: dict[str, type[PrefixCacheError]] = {
    "InvalidArgument": InvalidArgument,
    "UnknownNode": UnknownNode,
    "NotLocked": NotLocked,
}
"""The errors by name, as traces and the line protocol write them."""


@dataclass(frozen=True)
class PrefixMatch:
    """What ``match_prefix`` found (R3).

    ``matched_tokens`` is a multiple of the block size, ``blocks`` holds one id
    per matched block in token order, and ``node`` is the node ending exactly at
    the matched prefix (the cache's ``root`` when nothing matched).
    """

    matched_tokens: int
    blocks: list[BlockId]
    node: NodeId


@dataclass(frozen=True)
class Inserted:
    """What ``insert`` did (R5).

    ``node`` ends at the inserted whole-block prefix (``root`` when the tokens
    hold no whole block); ``duplicates`` are the caller's ids that the cache did
    not take because it already holds a block at that position, in position
    order, for the caller to free.
    """

    node: NodeId
    duplicates: list[BlockId]


@dataclass(frozen=True)
class PrefixStats:
    """The counters of R9, all monotone."""

    lookups: int
    query_tokens: int
    hit_tokens: int
    inserted_blocks: int
    evicted_blocks: int


@dataclass(frozen=True)
class NodeView:
    """One node in a snapshot: where it ends, the blocks it holds, its own locks, and its namespace (R12)."""

    prefix: tuple[int, ...]
    blocks: tuple[BlockId, ...]
    locks: int
    namespace: Namespace = None


@dataclass(frozen=True)
class BlockStored:
    """R13: ``blocks`` are now cached, one per block of ``tokens``, in token order, in ``namespace``;
    the first extends the cached block ``parent`` (None: it is the namespace's first block)."""

    parent: BlockId | None
    tokens: tuple[int, ...]
    blocks: tuple[BlockId, ...]
    namespace: Namespace = None


@dataclass(frozen=True)
class BlockRemoved:
    """R13: ``blocks`` are no longer cached."""

    blocks: tuple[BlockId, ...]


@dataclass(frozen=True)
class AllBlocksCleared:
    """R13: nothing is cached any more (a cache may open its stream with it)."""


KVEvent = BlockStored | BlockRemoved | AllBlocksCleared
"""One event of the stream a cache publishes (R13)."""


@dataclass(frozen=True)
class Snapshot:
    """The canonical, implementation-independent state of a cache (R11).

    ``nodes`` lists every node but the root, ordered by last use, oldest first;
    nodes used by the same call lie on one path and are ordered by prefix
    length, shortest first.  Two caches in the same logical state have equal
    snapshots, whatever their NodeIds or internal layout.
    """

    block_size: int
    nodes: tuple[NodeView, ...]
    stats: PrefixStats


@runtime_checkable
class PrefixCache(Protocol):
    """The calls of a block-granular prefix cache; see R1-R11 for their rules."""

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


UseRule = Literal["path", "path+split-tail"]
"""R7: what a match or insert uses (see ``Rules``)."""

EvictRule = Literal["lru", "lfu", "fifo", "mru", "filo", "slru"]
"""R8: which unpinned leaf goes first (see ``Rules``)."""

SplitRule = Literal["fresh", "inherit"]
"""R4: the creation stamp of a split's upper node (see ``Rules``)."""

USE_RULES: tuple[UseRule, ...] = ("path", "path+split-tail")
EVICT_RULES: tuple[EvictRule, ...] = ("lru", "lfu", "fifo", "mru", "filo", "slru")
SPLIT_RULES: tuple[SplitRule, ...] = ("fresh", "inherit")
SLRU_DEFAULT_THRESHOLD = 2
"""R8 ``slru``: the hits at which a node becomes protected, SGLang 0.5.23's default (``SLRUStrategy(protected_threshold=2)``)."""


@dataclass(frozen=True)
class Rules:
    """A rule set: the named variant of each rule that real engines implement differently.

    - ``use`` (R7): ``path``, a call uses every node from the root to the node
      it returns; ``path+split-tail``, the lower part of a node the call split
      counts as used by it too, just before the call's own nodes (SGLang).
    - ``evict`` (R8): ``lru`` (oldest last use first), ``lfu`` (fewest hits,
      then oldest last use), ``fifo`` (oldest creation, then oldest last use),
      ``mru`` (newest last use), ``filo`` (newest creation, then oldest last use),
      ``slru`` (unprotected before protected, a node being protected from
      ``slru_threshold`` hits on; then oldest last use).
    - ``split`` (R4): ``fresh``, a split's upper node is stamped with its
      creation; ``inherit``, it takes the creation stamp of the node it splits
      (SGLang's UnifiedRadixCache).
    - ``slru_threshold`` (R8 ``slru`` only): the hits that protect a node.

    ``spec/README.md`` states each under its rule; the default is ``strict``,
    R1-R11 as first written.
    """

    use: UseRule = "path"
    evict: EvictRule = "lru"
    split: SplitRule = "fresh"
    slru_threshold: int = SLRU_DEFAULT_THRESHOLD

    def __post_init__(self) -> None:
        if self.slru_threshold < 1:
            raise ValueError(f"slru_threshold must be at least 1, got {self.slru_threshold}")

    @property
    def evict_text(self) -> str:
        """``evict`` as rules text writes it: ``slru:N`` for a threshold other than the default."""
        if self.evict == "slru" and self.slru_threshold != SLRU_DEFAULT_THRESHOLD:
            return f"slru:{self.slru_threshold}"
        return self.evict

    @property
    def name(self) -> str:
        """The preset's name when the rule set is a preset, else ``use=...,evict=...`` (and ``,split=inherit``)."""
        for name, preset in RULE_PRESETS.items():
            if preset == self:
                return name
        split = "" if self.split == "fresh" else f",split={self.split}"
        return f"use={self.use},evict={self.evict_text}{split}"


RULE_PRESETS: dict[str, Rules] = {
    "strict": Rules(),
    "sglang": Rules("path+split-tail", "lru"),
    "sglang-lfu": Rules("path+split-tail", "lfu"),
    "sglang-fifo": Rules("path+split-tail", "fifo"),
    "sglang-mru": Rules("path+split-tail", "mru"),
    "sglang-filo": Rules("path+split-tail", "filo"),
    "sglang-slru": Rules("path+split-tail", "slru"),
    "sglang-unified-fifo": Rules("path+split-tail", "fifo", "inherit"),
    "sglang-unified-filo": Rules("path+split-tail", "filo", "inherit"),
}
"""The named rule sets: ``strict`` (the default); SGLang 0.5.23's RadixCache (``sglang``...) under each
eviction strategy that needs no new call argument, and its UnifiedRadixCache where it differs: only
``fifo`` and ``filo`` key by creation, so only they see R4's ``split=inherit`` (under lru, lfu, mru and
slru the unified cache follows the RadixCache presets).  ``slru`` is at SGLang's default threshold (2);
another is ``evict=slru:N``.  The
server accepts lru, lfu, slru, priority and tlru; ``fifo``, ``mru`` and ``filo`` exist only inside the
library.  ``priority`` needs a priority argument of insert (with every priority 0 its key is lru's), and
``tlru`` takes configuration: neither has a preset (spec/README.md, Rule sets)."""


def parse_rules(text: str) -> Rules:
    """A preset's name, or ``use=U,evict=E,split=S`` (any may be left out; ``evict=slru:N`` gives slru's
    threshold); ValueError naming what is wrong."""
    if text in RULE_PRESETS:
        return RULE_PRESETS[text]
    chosen: dict[str, str] = {}
    for part in text.split(","):
        key, equals, value = part.strip().partition("=")
        if not equals or key not in ("use", "evict", "split") or key in chosen:
            raise ValueError(f"rules {text!r}: give a preset ({', '.join(RULE_PRESETS)}) or use=U,evict=E,split=S")
        chosen[key] = value
    use = chosen.get("use", "path")
    evict, colon, threshold_text = chosen.get("evict", "lru").partition(":")
    split = chosen.get("split", "fresh")
    if use not in USE_RULES:
        raise ValueError(f"rules {text!r}: use must be one of {', '.join(USE_RULES)}, got {use!r}")
    if evict not in EVICT_RULES:
        raise ValueError(f"rules {text!r}: evict must be one of {', '.join(EVICT_RULES)}, got {evict!r}")
    if split not in SPLIT_RULES:
        raise ValueError(f"rules {text!r}: split must be one of {', '.join(SPLIT_RULES)}, got {split!r}")
    threshold = SLRU_DEFAULT_THRESHOLD
    if colon:
        if evict != "slru" or not threshold_text.isdigit() or int(threshold_text) < 1:
            raise ValueError(f"rules {text!r}: only slru takes a threshold, slru:N with N >= 1")
        threshold = int(threshold_text)
    return Rules(use, evict, split, threshold)
