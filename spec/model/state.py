"""R1 and the state every rule reads: the flat dicts, the argument checks, and the calls an earlier rule makes to a later one.

The state is flat, so that each rule reads as a plain statement about it:

- ``_block_at``: a dict from every cached prefix (a namespace and a tuple of
  tokens a whole number of blocks long, R12) to the id of its last block (R2), and its two
  indexes: ``_extensions``, the cached prefixes one block longer than each
  cached prefix (the empty one included), and ``_cached_at``, where each id is
  cached (R2, R5); under ``dup=keep``, ``_copies``: the further blocks cached at a
  prefix, oldest first, beside the one ``_block_at`` names (R5);
- ``_node_at`` / ``_prefix_of``: where the nodes end, and their NodeIds (R4);
- ``_own_locks`` (the nodes that hold locks of their own), ``_last_use``,
  ``_hits`` and ``_created``: per node, keyed by
  the node's prefix (R6, R7, R8);
- under ``use=release``, ``_released``: when each cached block was last released (R7);
- the clock and the five counters (R7, R9);
- ``_rules``: the variant of each rule in force (``spec.api.Rules``; R7, R8);
- ``_events``: the events published since the last ``take_events`` (R13);
- what the snapshot needs, kept as calls change it (R11): ``_reshaped`` / ``_restamped`` (the prefixes
  whose node a call changed in shape, or in locks and order), ``_restamped_blocks`` (under ``use=release``,
  the blocks a call released or uncached), and the node views and digest terms refreshed from them.  The
  rules only mark what they change; ``snapshot()`` is still built from scratch beside the kept one.
"""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import SupportsIndex, cast

from spec.api import (
    ID_LIMIT,
    NAMESPACE_SHAPE,
    BlockId,
    InvalidArgument,
    KVEvent,
    Namespace,
    NodeId,
    NodeView,
    PrefixStats,
    Rules,
    checked_block_size,
    is_namespace,
)

Tokens = tuple[int, ...]

Prefix = tuple[Namespace, Tokens]
"""A prefix of tokens within its namespace (R12): prefixes of two namespaces are different keys of every dict."""

Stamp = tuple[int, int]
"""A moment within the calls: (the call's clock, its order within the call) (R4, R7)."""


@dataclass(frozen=True, eq=False)
class SpecNode:
    """A NodeId of the spec: the cache that issued it and a serial number it never reuses (R4).

    The issuer makes a node of one cache unknown to every other cache (R6).  A cache issues each node once, as
    one object: a node is equal to itself alone, and hashed as itself (the lockstep looks a node up at every call).
    """

    issuer: object
    serial: int

    def __repr__(self) -> str:
        return f"node{self.serial}"


@dataclass(slots=True, eq=False)
class KeptNode:
    """R11: what is kept of one node for the snapshot and its digest: its view, the hash of its shape
    (``node_shape_hash``), its order key and its digest term, and the views it has had with other counts of
    its own locks since its shape last changed."""

    view: NodeView
    shape: int
    key: tuple[int, ...]
    term: int
    by_locks: dict[int, NodeView]


# R1 ---------------------------------------------------------------------------


def as_int(value: object, what: str) -> int:
    """R1: ``value`` as an int, or InvalidArgument.

    Any value ``operator.index`` accepts counts as an int (so bools and numpy
    integers do, floats and strings do not).
    """
    if not hasattr(type(value), "__index__"):
        raise InvalidArgument(f"{what} must be an int, got {type(value).__name__}")
    return operator.index(cast(SupportsIndex, value))


def as_id(value: object, what: str) -> int:
    """R1: ``value`` as an int in [0, 2**32), or InvalidArgument."""
    number = as_int(value, what)
    if number < 0 or number >= ID_LIMIT:
        raise InvalidArgument(f"{what} {number} is outside [0, 2**32)")
    return number


_INT: frozenset[type] = frozenset({int})


def as_ids(values: object, what: str) -> tuple[int, ...]:
    """R1: a sequence of ids as a tuple of ints, or InvalidArgument."""
    if type(values) is tuple or type(values) is list:
        if set(map(type, values)) <= _INT:
            # The common case, read in C (the set of the values' types is int's alone): plain ints, each in range
            # when the least and the greatest are.
            ints = tuple(values)
            if not ints or (min(ints) >= 0 and max(ints) < ID_LIMIT):
                return ints
    elif not isinstance(values, Sequence) or isinstance(values, str):
        raise InvalidArgument(f"{what} must be a sequence of ints, got {type(values).__name__}")
    checked: list[int] = []
    for value in values:
        checked.append(as_id(value, what[:-1] if what.endswith("s") else what))
    return tuple(checked)


def as_namespace(value: object) -> Namespace:
    """R12: ``value`` as a namespace (``spec.api.is_namespace``: None, an int, a str, or a flat tuple of those), or InvalidArgument."""
    if not is_namespace(value):
        raise InvalidArgument(f"{NAMESPACE_SHAPE}, got {type(value).__name__}")
    return value


def as_count(value: object, what: str) -> int:
    """R1, R8: a non-negative int, or InvalidArgument."""
    number = as_int(value, what)
    if number < 0:
        raise InvalidArgument(f"{what} must be >= 0, got {number}")
    return number


class State(ABC):
    """The state of a cache, its R1 checks, and the later rules' calls that earlier rules make (declared here)."""

    def __init__(self, block_size: int, rules: Rules = Rules()) -> None:
        """R1: a block size below 1 (or not an int) raises InvalidArgument; ``rules`` picks the variants of R7 and R8."""
        self._block_size = checked_block_size(block_size)
        self._issuer = object()
        self.root: NodeId = SpecNode(self._issuer, 0)
        self._block_at: dict[Prefix, BlockId] = {}
        self._extensions: dict[Prefix, set[Prefix]] = {}
        self._namespaces: set[Namespace] = set()
        self._cached_at: dict[BlockId, Prefix] = {}
        self._copies: dict[Prefix, list[BlockId]] = {}
        self._released: dict[BlockId, Stamp] = {}
        self._released_by_this_call = 0
        self._node_at: dict[Prefix, SpecNode] = {}
        self._prefix_of: dict[SpecNode, Prefix] = {}
        self._own_locks: dict[Prefix, int] = {}
        self._last_use: dict[Prefix, tuple[int, int]] = {}
        self._hits: dict[Prefix, int] = {}
        self._created: dict[Prefix, Stamp] = {}
        self._created_by_this_call: dict[Prefix, int] = {}
        self._split_by_this_call: Prefix | None = None
        self._rules = rules
        self._clock = 0
        self._next_serial = 1
        self._lookups = 0
        self._query_tokens = 0
        self._hit_tokens = 0
        self._inserted_blocks = 0
        self._evicted_blocks = 0
        self._counted = (0, 0, 0, 0, 0)
        self._stats = PrefixStats(0, 0, 0, 0, 0)
        """R9's counters as ``stats`` last made them, and the value it made (``Counting.stats``)."""
        self._events: list[KVEvent] = []
        self._reshaped: set[Prefix] = set()
        self._restamped: set[Prefix] = set()
        self._restamped_blocks: set[BlockId] = set()
        self._views: dict[Prefix, NodeView] = {}
        """Each node's kept view (R11), apart for a copy of them all at C speed (``kept_views``)."""
        self._kept: dict[Prefix, KeptNode] = {}
        self._node_sum = 0
        self._block_terms: dict[BlockId, int] = {}
        self._block_sum = 0

    def block_size(self) -> int:
        """R1: B, the tokens of one block."""
        return self._block_size

    @property
    def rules(self) -> Rules:
        """The variants of R7 and R8 this cache follows."""
        return self._rules

    def next_call(self) -> None:
        """R7: a match or an insert is one use, at a logical clock that advances once per call."""
        self._clock += 1
        self._split_by_this_call = None
        self._created_by_this_call = {}
        self._released_by_this_call = 0

    # The calls an earlier rule makes to a later one, declared here so that each rule's module reads in order and
    # mypy holds every call to one signature; each is defined, with its contract, by the rule named.

    @abstractmethod
    def split_at(self, prefix: Prefix) -> SpecNode:
        """R4 (``nodes``): make a node end at a cached ``prefix``; called by R3 and R5."""

    @abstractmethod
    def use_path(self, path: list[Prefix], *, hit: bool) -> None:
        """R7 (``use``): the current call is a use of every node of ``path``; called by R3 and R5."""

    @abstractmethod
    def release(self, held: list[tuple[Prefix, BlockId]]) -> None:
        """R7 (``use``), ``use=release``: the call lets go of ``held``; called by R5 and R6."""

    @abstractmethod
    def publish_stored(self, namespace: Namespace, prompt: Tokens, held: list[BlockId], stored_at: list[int]) -> None:
        """R13 (``events``): the BlockStored of what an insert cached; called by R5."""

    @abstractmethod
    def namespaces(self) -> set[Namespace]:
        """R12 (``namespaces``): every namespace a prefix was ever cached in; called by R11."""
