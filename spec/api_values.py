"""The values of the interface (``spec.api``): ids, namespaces (R12), errors, results, events and the snapshot.

With them the two shapes every cache tests its arguments against, said once: a block size
(``checked_block_size``, R1) and a namespace (``is_namespace``, R12).  No other rule and no arithmetic.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable
from dataclasses import dataclass
from typing import SupportsIndex, TypeGuard, cast

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


def is_namespace(value: object) -> TypeGuard[Namespace]:
    """R12: the shape of a namespace, a part (``is_namespace_part``) or a flat tuple of parts."""
    if value is None:  # the default namespace, nearly every call's
        return True
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
