"""The interface every prefix cache in this project satisfies.

This module holds only types and errors: the vocabulary shared by the
specification (``spec.model.SpecCache``), the optimised implementation
(``impl.RadixCache``) and any engine's cache checked against them, with the two
shapes every one of them tests its arguments against, said once: a block size
(``checked_block_size``, R1) and a namespace (``is_namespace``, R12).  It holds
no other rule and no arithmetic, so an implementation may import it without
reaching its answers through the spec's code.

The rules R1-R13 that give these calls their meaning are stated in prose in
``spec/README.md`` and implemented, in the same order, by ``spec/model.py``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, SupportsIndex, cast, runtime_checkable

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


def is_namespace_part(value: object) -> bool:
    """R12: None, an int that is not a bool, or a str (a subclass of int or str counts as one)."""
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def is_namespace(value: object) -> bool:
    """R12: the shape of a namespace, a part (``is_namespace_part``) or a flat tuple of parts."""
    if isinstance(value, tuple):
        return all(is_namespace_part(part) for part in value)
    return is_namespace_part(value)


NAMESPACE_SHAPE = "a namespace is None, an int, a str or a flat tuple of those"
"""What ``is_namespace`` asks, as the errors that refuse another value say it."""


class PrefixCacheError(Exception):
    """Base of every error a prefix cache raises on purpose."""


class InvalidArgument(PrefixCacheError, ValueError):
    """An argument breaks R1, R5 or R8; the call changed nothing (R10)."""


def checked_block_size(value: object) -> int:
    """R1: ``value`` as a block size, an int (anything ``operator.index`` takes) of at least 1; InvalidArgument otherwise."""
    if not hasattr(type(value), "__index__"):
        raise InvalidArgument(f"block_size must be an int, got {type(value).__name__}")
    size = operator.index(cast(SupportsIndex, value))
    if size < 1:
        raise InvalidArgument(f"block_size must be >= 1, got {size}")
    return size


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
    """One node in a snapshot: where it ends, the blocks it holds, its own locks, and its namespace (R12).

    ``copies`` (R5, ``dup=keep``): empty when no position of the node holds a second block; else one
    tuple per block of ``blocks``, the further blocks cached at that position, oldest first.
    """

    prefix: tuple[int, ...]
    blocks: tuple[BlockId, ...]
    locks: int
    namespace: Namespace = None
    copies: tuple[tuple[BlockId, ...], ...] = ()


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
    released: tuple[BlockId, ...] = ()
    """Under ``use=release`` (R7): ``nodes`` come by namespace and prefix, and this lists every unpinned
    cached block, copies included, in the order ``evict`` frees them; empty under the other rule sets."""


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


UseRule = Literal["path", "path+split-tail", "release"]
"""R7: what a match or insert uses (see ``Rules``)."""

EvictRule = Literal["lru", "lfu", "fifo", "mru", "filo", "slru"]
"""R8: which unpinned leaf goes first (see ``Rules``)."""

UnitRule = Literal["leaf", "block"]
"""R8: what one step of an eviction frees (see ``Rules``)."""

DupRule = Literal["refuse", "keep"]
"""R5: what becomes of a block offered at a position already cached (see ``Rules``)."""

SplitRule = Literal["fresh", "inherit"]
"""R4: the creation stamp of a split's upper node (see ``Rules``)."""

SLRU_DEFAULT_THRESHOLD = 2
"""R8 ``slru``: the hits at which a node becomes protected, SGLang 0.5.23's default (``SLRUStrategy(protected_threshold=2)``)."""


@dataclass(frozen=True)
class RuleField:
    """One field of ``Rules``: its key in rule texts (``use=release``), the rule it varies, and its variants.

    The first variant is ``strict``'s.  Every place that reads, writes, explains or searches rule sets
    (``parse_rules``, ``Rules.name``, reports, ``identify``) walks ``RULE_FIELDS``, so a new field is one
    row here and one field of ``Rules``.
    """

    key: str
    rule: str
    variants: tuple[str, ...]
    meaning: str

    @property
    def default(self) -> str:
        return self.variants[0]

    def accepts(self, value: str) -> bool:
        return value in self.variants


RULE_FIELDS: tuple[RuleField, ...] = (
    RuleField("use", "R7", ("path", "path+split-tail", "release"), "what a call uses, and when a block was last used"),
    RuleField("evict", "R8", ("lru", "lfu", "fifo", "mru", "filo", "slru"), "which unpinned leaf goes first (slru:N, protected from N hits)"),
    RuleField("unit", "R8", ("leaf", "block"), "whole leaves, or exactly n blocks cut from a leaf's tail"),
    RuleField("dup", "R5", ("refuse", "keep"), "a block offered at a cached position: handed back, or cached too"),
    RuleField("split", "R4", ("fresh", "inherit"), "a split's upper node: stamped at its creation, or with the creation of the node it splits"),
)
"""The fields of a rule set, in the order texts write them; ``spec/README.md`` states each variant under its rule.
``slru``'s threshold is a parameter of its variant (``evict=slru:3``), not a field of its own."""

USE_RULES: tuple[UseRule, ...] = ("path", "path+split-tail", "release")
EVICT_RULES: tuple[EvictRule, ...] = ("lru", "lfu", "fifo", "mru", "filo", "slru")
SPLIT_RULES: tuple[SplitRule, ...] = ("fresh", "inherit")

RULE_REQUIREMENTS: tuple[tuple[str, str, str, str, str], ...] = (
    ("use", "release", "unit", "block", "a block's recency is its own (when it was last released), so blocks go one at a time"),
    ("use", "release", "evict", "lru", "released blocks wait in one queue, oldest release first"),
    ("dup", "keep", "use", "release", "a copy is used apart from the other copies of its position: its recency is its own"),
)
"""(key, variant, needed key, needed variant, why): a variant that only has a meaning beside another."""


@dataclass(frozen=True)
class Rules:
    """A rule set: the named variant of each rule that real engines implement differently.

    - ``use`` (R7): ``path``, a call uses every node from the root to the node
      it returns; ``path+split-tail``, the lower part of a node the call split
      counts as used by it too, just before the call's own nodes (SGLang);
      ``release``, a match uses nothing, and a block's recency is when it was
      last released: at the end of the insert that passed it, or by the unlock
      that left it unpinned, a call's blocks tail first (vLLM).
    - ``evict`` (R8): ``lru`` (oldest last use first), ``lfu`` (fewest hits,
      then oldest last use), ``fifo`` (oldest creation, then oldest last use),
      ``mru`` (newest last use), ``filo`` (newest creation, then oldest last use),
      ``slru`` (unprotected before protected, a node being protected from
      ``slru_threshold`` hits on; then oldest last use).
    - ``unit`` (R8): ``leaf``, whole leaves until at least n blocks are freed;
      ``block``, exactly n blocks (or all the unpinned ones), a leaf cut from
      its tail one block at a time (vLLM).
    - ``dup`` (R5): ``refuse``, a different id offered at a cached position is
      handed back as a duplicate; ``keep``, it is cached too, another copy of
      that position's block (vLLM).
    - ``split`` (R4): ``fresh``, a split's upper node is stamped with its
      creation; ``inherit``, it takes the creation stamp of the node it splits
      (SGLang's UnifiedRadixCache).
    - ``slru_threshold`` (R8 ``slru`` only): the hits that protect a node.

    ``RULE_FIELDS`` lists the fields and ``RULE_REQUIREMENTS`` the variants that
    need another; ``spec/README.md`` states each under its rule; the default is
    ``strict``, R1-R13 as first written.
    """

    use: UseRule = "path"
    evict: EvictRule = "lru"
    unit: UnitRule = "leaf"
    dup: DupRule = "refuse"
    split: SplitRule = "fresh"
    slru_threshold: int = SLRU_DEFAULT_THRESHOLD

    def __post_init__(self) -> None:
        problem = rules_problem({field.key: getattr(self, field.key) for field in RULE_FIELDS})
        if problem:
            raise ValueError(problem)
        if self.slru_threshold < 1:
            raise ValueError(f"slru_threshold must be at least 1, got {self.slru_threshold}")

    @property
    def evict_text(self) -> str:
        """``evict`` as rules text writes it: ``slru:N`` for a threshold other than the default."""
        if self.evict == "slru" and self.slru_threshold != SLRU_DEFAULT_THRESHOLD:
            return f"slru:{self.slru_threshold}"
        return self.evict

    def variant(self, key: str) -> str:
        """The variant this rule set picks for the field ``key`` of ``RULE_FIELDS``."""
        value: str = getattr(self, key)
        return value

    def with_variant(self, key: str, value: str) -> Rules:
        """This rule set with field ``key`` set to ``value`` (ValueError when the combination has no meaning)."""
        chosen = {field.key: (value if field.key == key else self.variant(field.key)) for field in RULE_FIELDS}
        return Rules(**chosen, slru_threshold=self.slru_threshold)  # type: ignore[arg-type]  # values are checked by __post_init__

    @property
    def text(self) -> str:
        """``use=U,evict=E`` and every other field that is not strict's, as ``parse_rules`` reads it."""
        words = [
            f"{field.key}={self.evict_text if field.key == 'evict' else self.variant(field.key)}"
            for field in RULE_FIELDS
            if field.key in ("use", "evict") or self.variant(field.key) != field.default
        ]
        return ",".join(words)

    @property
    def name(self) -> str:
        """The preset's name when the rule set is a preset, else its ``text``."""
        for name, preset in RULE_PRESETS.items():
            if preset == self:
                return name
        return self.text

    def differences(self, other: Rules) -> list[RuleField]:
        """The fields on which ``other`` picks another variant, in ``RULE_FIELDS`` order."""
        return [field for field in RULE_FIELDS if self.variant(field.key) != other.variant(field.key)]


def rules_problem(chosen: Mapping[str, object]) -> str:
    """Why a combination of variants, one per key of ``RULE_FIELDS``, has no meaning ('' when it has one)."""
    for field in RULE_FIELDS:
        value = chosen.get(field.key, field.default)
        if not isinstance(value, str) or not field.accepts(value):
            return f"{field.key} must be one of {', '.join(field.variants)}, got {value!r}"
    for key, value, needed_key, needed, why in RULE_REQUIREMENTS:
        if chosen.get(key) == value and chosen.get(needed_key) != needed:
            return f"{key}={value} needs {needed_key}={needed}: {why}"
    return ""


RULE_PRESETS: dict[str, Rules] = {
    "strict": Rules(),
    "sglang": Rules("path+split-tail", "lru"),
    "sglang-lfu": Rules("path+split-tail", "lfu"),
    "sglang-fifo": Rules("path+split-tail", "fifo"),
    "sglang-mru": Rules("path+split-tail", "mru"),
    "sglang-filo": Rules("path+split-tail", "filo"),
    "sglang-slru": Rules("path+split-tail", "slru"),
    "sglang-unified-fifo": Rules("path+split-tail", "fifo", split="inherit"),
    "sglang-unified-filo": Rules("path+split-tail", "filo", split="inherit"),
    "vllm": Rules("release", "lru", "block", "keep"),
}
"""The named rule sets: ``strict`` (the default); SGLang 0.5.23's RadixCache (``sglang``...) under each
eviction strategy that needs no new call argument, and its UnifiedRadixCache where it differs: only
``fifo`` and ``filo`` key by creation, so only they see R4's ``split=inherit`` (under lru, lfu, mru and
slru the unified cache follows the RadixCache presets).  ``slru`` is at SGLang's default threshold (2);
another is ``evict=slru:N``.  The server accepts lru, lfu, slru, priority and tlru; ``fifo``, ``mru``
and ``filo`` exist only inside the library.  ``priority`` needs a priority argument of insert (with
every priority 0 its key is lru's), and ``tlru`` takes configuration: neither has a preset
(spec/README.md, Rule sets).  ``vllm`` is vLLM 0.32.0's automatic prefix caching (``BlockPool`` and
its free queue, ``vllm/v1/core/block_pool.py``)."""


def parse_rules(text: str) -> Rules:
    """A preset's name, or ``key=value`` pairs joined by commas (``use=release,evict=lru,unit=block,dup=keep``;
    a field left out is strict's; ``evict=slru:N`` gives slru's threshold); ValueError naming what is wrong."""
    if text in RULE_PRESETS:
        return RULE_PRESETS[text]
    keys = {field.key: field for field in RULE_FIELDS}
    shape = ",".join(f"{field.key}={field.key[0].upper()}" for field in RULE_FIELDS)
    chosen: dict[str, str] = {}
    threshold = SLRU_DEFAULT_THRESHOLD
    for part in text.split(","):
        key, equals, value = part.strip().partition("=")
        if not equals or key not in keys or key in chosen:
            raise ValueError(f"rules {text!r}: give a preset ({', '.join(RULE_PRESETS)}) or {shape} (any may be left out)")
        if key == "evict" and value.startswith("slru:"):
            count = value.removeprefix("slru:")
            if not (count.isascii() and count.isdigit()) or int(count) < 1:
                raise ValueError(f"rules {text!r}: slru takes a threshold of hits, slru:N with N >= 1, got {value!r}")
            value, threshold = "slru", int(count)
        if not keys[key].accepts(value):
            raise ValueError(f"rules {text!r}: {key} must be one of {', '.join(keys[key].variants)}, got {value!r}")
        chosen[key] = value
    try:
        return Rules(**chosen, slru_threshold=threshold)  # type: ignore[arg-type]  # each value is one of its field's variants, checked above
    except ValueError as problem:
        raise ValueError(f"rules {text!r}: {problem}") from None


# R11: the snapshot digest ---------------------------------------------------------------------------

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
    if min(values, default=0) >= 0:
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
    return hash((block_size, counters, node_terms & _DIGEST_MASK, block_terms & _DIGEST_MASK)) & _DIGEST_MASK
