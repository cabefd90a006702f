"""What an observer of a lockstep is told of the spec's state around a call (``SpecReading``)."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, ValuesView

from spec.api import Counters, NodeView
from prefixspec.compare.mirror import Place


class SpecReading:
    """The spec's state as an observer reads it around a call: its counters (R9, each by its ``PrefixStats`` name)
    and its nodes, in no order.

    Not a ``Snapshot``: an observer counts rule events (a split, a leaf gone), none of which needs the order, and
    the sort of the nodes after every call cost the engine machine some 4% of its time (``bench.stage_throughput``: 1.04x).
    The counters are read as ints, not as a ``PrefixStats``: a frozen dataclass made anew after every match, insert
    and evict (each changes one).  What an observer counts over every node (``most_locks``, ``copies_held``,
    ``live_namespaces``) is counted once a reading and kept: the reading after one call is the reading before the next."""

    __slots__ = ("lookups", "query_tokens", "hit_tokens", "inserted_blocks", "evicted_blocks", "views", "nodes", "_most_locks", "_copies_held", "_live_namespaces")

    def __init__(self, counters: Counters, views: Mapping[Place, NodeView]) -> None:
        """``counters``: R9's five, in ``PrefixStats``' order (``spec.api.Counters``); ``views``: every node's view by
        where it ends (a reading of its own, which no later call changes)."""
        self.lookups, self.query_tokens, self.hit_tokens, self.inserted_blocks, self.evicted_blocks = counters
        self.views = views
        self.nodes: ValuesView[NodeView] = views.values()
        self._most_locks: int | None = None
        self._copies_held: int | None = None
        self._live_namespaces: int | None = None

    def most_locks(self) -> int:
        """The most own locks of one node (R6)."""
        if self._most_locks is None:
            self._most_locks = max(map(_LOCKS, self.nodes), default=0)
        return self._most_locks

    def copies_held(self) -> int:
        """R5 ``dup=keep``: the further copies the nodes' positions hold."""
        if self._copies_held is None:
            # Nearly always none (every rule set but dup=keep): told at C speed before they are counted.
            self._copies_held = sum(len(copies) for view in self.nodes for copies in view.copies) if any(map(_COPIES, self.nodes)) else 0
        return self._copies_held

    def live_namespaces(self) -> int:
        """The distinct namespaces (the default one aside) the nodes lie in (R12)."""
        if self._live_namespaces is None:
            self._live_namespaces = live_namespaces(self.nodes)
        return self._live_namespaces


def live_namespaces(nodes: Iterable[NodeView]) -> int:
    """The distinct namespaces (the default one aside) ``nodes`` lie in (R12)."""
    return len(set(map(_NAMESPACE, nodes)) - {None})


_LOCKS, _COPIES, _NAMESPACE = operator.attrgetter("locks"), operator.attrgetter("copies"), operator.attrgetter("namespace")
