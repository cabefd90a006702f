"""What a run exercised: the rule events and the extremes it reached, counted, and the ones a stage must reach.

Every call a machine makes through the lockstep is observed (``Observer``):
its result and the spec's state before and after it (its counters and nodes
in no order, ``reading.SpecReading``) tell which rule events happened (a
split by a match, duplicates handed back, a parent that became a leaf within
one evict...), and its arguments which extremes it touched (a token at or
past 2^31, a block id of 2^32 - 1...).  The shape of
the tree (how deep, how wide, how many locks on one node) is read from the
spec's snapshot by the rules that build such trees.  Each event is also
passed to Hypothesis's ``event()``, so ``--hypothesis-show-statistics``
shows them.

``REQUIRED`` names, per stage, the events its ``ci`` run must reach; a stage
that misses one fails (``missing``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from hypothesis import event as hypothesis_event

from spec.api import ID_LIMIT, Inserted, NodeView, PrefixCacheError, Rules, Snapshot
from prefixspec.compare.reading import SpecReading, live_namespaces
from prefixspec.vocabulary import CALLS, TAKE_EVENTS, Call

BOUNDARIES = (2**7, 2**8, 2**15, 2**16, 2**31, ID_LIMIT - 1)
"""Where an engine written in C, C++, Rust or Go changes integer type."""

BOUNDARY_VALUES: tuple[int, ...] = tuple(sorted({0, 1, 2} | {value + step for value in BOUNDARIES for step in (-1, 0, 1) if 0 <= value + step < ID_LIMIT}))
"""The values at and around every boundary, and the smallest ones (so that a value cut to 16 bits meets its twin)."""

DEEP = 2**8 + 1
WIDE = 2**8 + 1
MANY_LOCKS = 2**8 + 1
"""The extremes stage's paths are this deep in nodes, its nodes this wide and this often locked: past a count kept
in a byte, signed or not (a depth, a table of children or a lock count of 8 bits; 2^7, a signed byte's, lies below)."""
BIG_CACHE = 4096
LONG_LIFE = 2**16
MANY_TENANTS = 257
"""Live namespaces the extremes stage must reach: one more than a table of 256 slots holds."""
LONG_NODE = 2**16
"""Blocks of the one node the extremes stage builds and splits past (an offset inside a node kept in 16 bits)."""
MOST_NAMESPACES = "most live namespaces"
"""Not a count: the largest number of distinct namespaces (the default one aside) cached at once."""
MIXED_BATCH = "events batch mixes stores and removals"
STRADDLING_BATCH = "events batch straddles a refusal"

COPY_KEPT = "copy of a cached position kept"
LEAF_CUT = "leaf cut"

REQUIRED: dict[str, tuple[str, ...]] = {
    "call machine": (
        "split by match",
        "split by insert",
        "duplicates handed back",
        "refused insert: InvalidArgument",
        "refused match: InvalidArgument",
        "refused evict: InvalidArgument",
        "refused lock: UnknownNode (evicted)",
        "refused lock: UnknownNode (foreign)",
        "refused unlock: NotLocked",
        "evict(0)",
        "multi-block leaf evicted",
        "parent became a leaf within one evict",
        "2+ locks on one node",
        "token >= 2^16",
        "token >= 2^31",
        "token 2^32-1",
        "block id >= 2^16",
        "block id >= 2^31",
        "block id 2^32-1",
        "block size 1",
        "odd block size >= 3",
        "block size >= 16",
        "insert: cached and differing ids mixed",
        "insert: a cached id at its own position after a differing one",
        "insert: first and last cached ids agree, one between differs",
        MIXED_BATCH,
        STRADDLING_BATCH,
    ),
    "extremes": (
        f"{MANY_LOCKS}+ locks on one node",
        f"depth {DEEP}+ nodes",
        f"{WIDE}+ children on one node",
        f"{MANY_TENANTS}+ live namespaces",
        f"one node of {LONG_NODE}+ blocks",
        f"split by insert {LONG_NODE}+ blocks into a node",
        f"split by match {LONG_NODE}+ blocks into a node",
    ),
    "engine machine": (
        "split by match",
        "split by insert",
        "duplicates handed back",
        "multi-block leaf evicted",
        "parent became a leaf within one evict",
        "2+ locks on one node",
        "block size 1",
        "odd block size >= 3",
        MIXED_BATCH,
    ),
    "scale": (
        f"{BIG_CACHE}+ blocks cached",
        f"{LONG_LIFE}+ calls on one cache",
        f"{LONG_LIFE}+ lookups on one cache",
    ),
}


NEEDS_FEATURE: dict[str, str] = {
    MIXED_BATCH: "events",
    STRADDLING_BATCH: "events",
    f"{MANY_TENANTS}+ live namespaces": "namespaces",
}
"""Required events that only a cache offering the optional feature (R12 namespaces, R13 events) can reach."""


_SEQUENCES_OF: dict[str, tuple[tuple[int, str], ...]] = {
    kind.op: tuple(
        (index, "token" if param.kind == "tokens" else "block id") for index, param in enumerate(kind.params) if param.kind in ("tokens", "blocks")
    )
    for kind in CALLS
}
"""Of each call, the places of its arguments of tokens or block ids, and what their values are (``note_values``)."""


_TAKE = TAKE_EVENTS.op


class Coverage:
    """Counts of the events one stage reached."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.features: frozenset[str] | None = None
        """The optional features of the target the machines drove (``vocabulary.features_of``), once one was made."""
        self._told: set[str] = set()
        """The events Hypothesis was told of in this example."""
        self.start_example()

    def start_example(self) -> None:
        """Forget what the last example left pending: a batch of events never spans two caches, and Hypothesis is
        told of each event again (its statistics count the examples that reached one)."""
        self._told.clear()
        self.start_batch()

    def start_batch(self) -> None:
        """A take of the events begins a batch: nothing published, refused or evicted since."""
        self._published_since_take = False
        self._refused_after_publishing = False
        self._several_leaves_since_take = False

    def note_many(self, names: Iterable[str]) -> None:
        for name in names:
            self.note(name)

    def note_most(self, name: str, value: int) -> None:
        """Keep the largest ``value`` seen under ``name`` (a maximum, where the other entries are counts)."""
        if value > self.counts[name]:
            self.counts[name] = value

    def note_namespaces(self, nodes: Iterable[NodeView]) -> None:
        """The distinct namespaces (the default one aside) the nodes lie in."""
        self.note_live_namespaces(live_namespaces(nodes))

    def note_live_namespaces(self, live: int) -> None:
        """``live`` distinct namespaces (the default one aside) cached at once."""
        self.note_most(MOST_NAMESPACES, live)
        if live >= MANY_TENANTS:
            self.note(f"{MANY_TENANTS}+ live namespaces")

    def note(self, name: str, times: int = 1) -> None:
        self.counts[name] += times
        if name in self._told:  # an example's events are a set: Hypothesis was told of this one already
            return
        self._told.add(name)
        try:
            hypothesis_event(name)
        except Exception:  # outside a Hypothesis test (the scale stage, a replay) there are no statistics to feed
            pass

    def missing(self, required: Iterable[str]) -> list[str]:
        """The required events this stage never reached."""
        return [name for name in required if not self.counts[name]]

    # Values --------------------------------------------------------------------------------

    def note_values(self, call: Call) -> None:
        args = call.args
        for index, what in _SEQUENCES_OF[call.op]:  # read off the table once: most calls take none (a lock, a count)
            value = args[index] if index < len(args) else None
            if isinstance(value, tuple) and value:
                largest = max(value)
                if largest >= 2**16:  # below it no extreme is reached (the least is 2^16): nearly every call, at once
                    self.note_extremes(what, largest)

    def note_extremes(self, what: str, largest: int) -> None:
        if largest >= 2**16:
            self.note(f"{what} >= 2^16")
        if largest >= 2**31:
            self.note(f"{what} >= 2^31")
        if largest == ID_LIMIT - 1:
            self.note(f"{what} 2^32-1")

    def note_block_size(self, block_size: int) -> None:
        if block_size == 1:
            self.note("block size 1")
        if block_size >= 3 and block_size % 2:
            self.note("odd block size >= 3")
        if block_size >= 16:
            self.note("block size >= 16")

    # Shapes ----------------------------------------------------------------------------------

    def note_shape(self, snapshot: Snapshot) -> None:
        """Depth, width and locks of the tree the snapshot shows."""
        depth, width, locks = tree_shape(snapshot)
        if depth >= DEEP:
            self.note(f"depth {DEEP}+ nodes")
        if width >= WIDE:
            self.note(f"{WIDE}+ children on one node")
        if locks >= 2:
            self.note("2+ locks on one node")
        if locks >= MANY_LOCKS:
            self.note(f"{MANY_LOCKS}+ locks on one node")
        cached = sum(len(view.blocks) for view in snapshot.nodes)
        if cached >= BIG_CACHE:
            self.note(f"{BIG_CACHE}+ blocks cached")
        self.note_namespaces(snapshot.nodes)

    # Calls -------------------------------------------------------------------------------------

    def observe(self, call: Call, refusal: PrefixCacheError | None, value: object, before: SpecReading, after: SpecReading) -> None:
        """The rule events of one call, from the error the spec refused it with (or None), its result and the spec's
        state around it."""
        op = call.op
        if _SEQUENCES_OF[op]:  # most calls take none (a lock, a count): told without a call
            self.note_values(call)
        if call.namespace is not None:
            self.note("a namespace other than the default")
            if op == "insert" and refusal is None:  # the one call that brings a namespace to life
                self.note_live_namespaces(after.live_namespaces())
        if op == _TAKE:
            self.observe_take(value)
            return
        if refusal is not None:
            name = type(refusal).__name__
            self.note(f"refused {op}: {name}")
            if name == "UnknownNode":
                self.note(f"refused {op}: UnknownNode (evicted)")  # a lockstep's handles are all this cache's own
            if call.kind.publishes and self._published_since_take:
                self._refused_after_publishing = True
            return
        if op == "match":
            if len(after.nodes) > len(before.nodes):
                self.note("split by match")
        elif op == "insert":
            stored = after.inserted_blocks > before.inserted_blocks
            if stored:
                self._published_since_take = True
            if len(after.nodes) - len(before.nodes) - (1 if stored else 0) > 0:  # a new leaf comes with blocks stored; any node besides is a split
                self.note("split by insert")
            if isinstance(value, Inserted) and value.duplicates:
                self.note("duplicates handed back")
            if stored and after.copies_held() > before.copies_held():  # a copy kept is a block stored (R5, R9)
                self.note(COPY_KEPT)
        elif op == "evict":
            self.observe_evict(call, before, after)
        elif op == "lock":
            if after.most_locks() >= 2:
                self.note("2+ locks on one node")

    def observe_take(self, events: object) -> None:
        """A take of the events (R13): what the batch since the last take held and what it spanned."""
        kinds = {type(event).__name__ for event in events} if isinstance(events, list) else set()
        if kinds:
            self.note("events taken")
        if {"BlockStored", "BlockRemoved"} <= kinds:
            self.note(MIXED_BATCH)
        if self._refused_after_publishing:  # events published before a refused call, taken after it
            self.note(STRADDLING_BATCH)
        if self._several_leaves_since_take:
            self.note("events batch spans an evict of several leaves")
        self.start_batch()

    def observe_evict(self, call: Call, before: SpecReading, after: SpecReading) -> None:
        if call.args == (0,):
            self.note("evict(0)")
        if after.evicted_blocks == before.evicted_blocks:
            # Nothing freed: the spec removed and cut no node (R8 frees a block with every leaf it removes or cuts),
            # so none of the events below happened.  Many evicts of an engine free nothing (its locks pin the rest),
            # and comparing their nodes cost the engine machine some 2% of its time (an evict observed: 22.1 -> 9.1 us).
            return
        self._published_since_take = True
        # The places of the nodes it removed, and the new places of the leaves it cut short (R8 unit=block), told
        # apart by the places of both readings at C speed: a reading's copy of the kept views keeps each prefix's hash,
        # which ``set(dict)`` and ``set.difference(dict)`` read again (``keys() - ...`` hashes the other side anew:
        # 1.0 us, 0.3 so, timeit).  By a prefix made and hashed anew for every node of both: 9.7 us an evict observed.
        removed = [before.views[place] for place in set(before.views).difference(after.views)]
        new_places = set(after.views).difference(before.views)
        if len(removed) >= 2:
            self._several_leaves_since_take = True
        if any(len(view.blocks) > 1 for view in removed):
            self.note("multi-block leaf evicted")
        if new_places and any(any(
            old.namespace == view.namespace and old.prefix[: len(view.prefix)] == view.prefix for old in removed
        ) for view in map(after.views.__getitem__, new_places)):
            self.note(LEAF_CUT)
        # A node leaves only as a leaf (R8), so the nodes below a removed one were all removed before it, in this evict.
        for view in removed:
            if any(old.namespace == view.namespace and len(old.prefix) > len(view.prefix) and old.prefix[: len(view.prefix)] == view.prefix for old in removed):
                self.note("parent became a leaf within one evict")
                break


def required_events(stage: str, rules: Rules, features: Iterable[str] | None = None) -> list[str]:
    """The events a ``ci`` run of ``stage`` must reach under ``rules``, on a target offering ``features`` (None: not
    known, all of them): under ``dup=keep`` no duplicate is ever handed back, a copy is kept instead (R5); under
    ``unit=block`` a leaf must also be cut (R8); events only a cache with namespaces or events can reach are not
    required of one without."""
    events = list(REQUIRED.get(stage, ()))
    if rules.dup == "keep":
        events = [COPY_KEPT if name == "duplicates handed back" else name for name in events]
    if rules.unit == "block" and "multi-block leaf evicted" in events:
        events.append(LEAF_CUT)
    offered = None if features is None else set(features)
    return [name for name in events if offered is None or NEEDS_FEATURE.get(name, "") in offered | {""}]


def tree_shape(snapshot: Snapshot) -> tuple[int, int, int]:
    """(the deepest node's depth in nodes, the most children of one node, the most own locks of one node)."""
    depth: dict[tuple[int, ...], int] = {(): 0}
    children: Counter[tuple[int, ...]] = Counter()
    size = snapshot.block_size
    for view in sorted(snapshot.nodes, key=lambda node: len(node.prefix)):
        parent = parent_prefix(view.prefix, size, depth)
        depth[view.prefix] = depth[parent] + 1
        children[parent] += 1
    most_locks = max((view.locks for view in snapshot.nodes), default=0)
    return max(depth.values()), max(children.values(), default=0), most_locks


def parent_prefix(prefix: Sequence[int], block_size: int, nodes: dict[tuple[int, ...], int]) -> tuple[int, ...]:
    """The longest shorter whole-block prefix of ``prefix`` among ``nodes`` (the root's is ``()``)."""
    end = len(prefix) - block_size
    while end > 0:
        if tuple(prefix[:end]) in nodes:
            return tuple(prefix[:end])
        end -= block_size
    return ()
