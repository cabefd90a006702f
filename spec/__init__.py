"""prefixspec: the executable specification of a block-granular prefix cache.

``spec.SpecCache`` is the reference (``spec/model.py``); the interface types and
errors come from ``spec.api``.
"""

from spec.api import (
    ERROR_TYPES,
    ID_LIMIT,
    BlockId,
    Inserted,
    InvalidArgument,
    NodeId,
    NodeView,
    NotLocked,
    PrefixCache,
    PrefixCacheError,
    PrefixMatch,
    PrefixStats,
    Snapshot,
    UnknownNode,
)
from spec.model import SpecCache

__all__ = [
    "ERROR_TYPES",
    "ID_LIMIT",
    "BlockId",
    "Inserted",
    "InvalidArgument",
    "NodeId",
    "NodeView",
    "NotLocked",
    "PrefixCache",
    "PrefixCacheError",
    "PrefixMatch",
    "PrefixStats",
    "Snapshot",
    "SpecCache",
    "UnknownNode",
]
