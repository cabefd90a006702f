"""The call table: every call of ``spec.api.PrefixCache`` and every fact about it, said once.

A ``CallKind`` is one call: its word in the trace, its method, its arguments,
its result, whether it is a use (R7), takes a namespace (R12) or publishes
events (R13), and the rules its result and its refusals belong to (what a
disagreement on it breaks).  Everything that speaks of calls reads this table: the text of calls,
the results, the line protocol, the wrappers, the lockstep's rule names, the
coverage and bench's tallies by call.  ``stateful_tests/test_call_table.py`` holds
that no other module ties a rule to a call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, cast

from spec.api import Namespace, PrefixStats
from prefixspec.vocabulary.words import render_ints, render_namespace

ParamKind = Literal["tokens", "blocks", "node", "count"]
ResultKind = Literal["match", "inserted", "ok", "blocks", "count", "stats", "rate", "events"]

COUNTERS_RULE = "R9, the counters"
"""The rule of the counters: what a query answers, and any call's rule the table does not name otherwise."""


@dataclass(frozen=True)
class Param:
    """One argument of a call: its name in ``PrefixCache`` and what kind of value it takes."""

    name: str
    kind: ParamKind


@dataclass(frozen=True)
class CallKind:
    """One call of the interface: its word in the trace, its method, its arguments, its result and its rules."""

    op: str
    method: str
    params: tuple[Param, ...]
    result: ResultKind
    rule: str = COUNTERS_RULE
    """The rule its result belongs to: what a difference in an answer breaks."""
    refusal_rule: str = COUNTERS_RULE
    """The rules that say when it is refused: what a difference in a refusal breaks."""
    namespaced: bool = False
    """Takes a namespace after its arguments (R12): ``ns=`` in the text, the keyword ``namespace`` in Python."""
    optional: bool = False
    """A cache may lack the call; the checker asks whether it has it (R13's ``take_events``)."""
    publishes: bool = False
    """Changes the contents, so a cache that publishes events publishes some after it (R13); no other call does."""
    uses: bool = False
    """One use of the nodes on its path, at a clock that advances once per such call (R7)."""
    names_node: bool = dataclasses.field(init=False, repr=False, compare=False)
    """A call whose result is a node is written ``nK = op ...``: later calls refer to the node as nK.  Read off the
    result once: a property, read a few times in each call a lockstep makes, was 0.9% of the engine machine's
    CPU samples (SIGPROF every 1 ms)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "names_node", self.result in ("match", "inserted"))


_TOKENS, _BLOCKS, _NODE = Param("tokens", "tokens"), Param("blocks", "blocks"), Param("node", "node")

CALLS: tuple[CallKind, ...] = (
    CallKind(
        "match", "match_prefix", (_TOKENS,), "match",
        "R3, the longest usable match", "R1, the arguments", namespaced=True, uses=True,
    ),
    CallKind(
        "insert", "insert", (_TOKENS, _BLOCKS), "inserted",
        "R5, what insert keeps and hands back", "R1/R5, the arguments and one owner per block", namespaced=True, publishes=True, uses=True,
    ),
    CallKind("lock", "lock", (_NODE,), "ok", "R6, locks", "R6, unknown nodes"),
    CallKind("unlock", "unlock", (_NODE,), "ok", "R6, locks", "R6, unknown nodes and NotLocked"),
    CallKind("evict", "evict", (Param("n_blocks", "count"),), "blocks", "R8, eviction", "R1/R8, the eviction count", publishes=True),
    CallKind("stats", "stats", (), "stats"),
    CallKind("cached_tokens", "cached_tokens", (), "count"),
    CallKind("cached_blocks", "cached_blocks", (), "count"),
    CallKind("evictable_blocks", "evictable_blocks", (), "count"),
    CallKind("hit_rate", "hit_rate", (), "rate"),
    CallKind("take_events", "take_events", (), "events", "R13, the events", "R13, the events", optional=True),
)
"""Every call of ``PrefixCache`` but ``block_size`` and ``snapshot``, which change nothing and take nothing,
and ``PublishesEvents.take_events``."""

BY_OP: dict[str, CallKind] = {kind.op: kind for kind in CALLS}
BY_METHOD: dict[str, CallKind] = {kind.method: kind for kind in CALLS}
OPS: tuple[str, ...] = tuple(BY_OP)
QUERIES: tuple[str, ...] = tuple(kind.op for kind in CALLS if not kind.params and not kind.optional)
"""The calls that take no argument and every cache has: the counters."""
COMMANDS: tuple[str, ...] = tuple(kind.op for kind in CALLS if kind.params)
"""The calls that take arguments, in the table's order: the ones an engine makes (bench times and tallies each)."""
PUBLISHERS: tuple[str, ...] = tuple(kind.op for kind in CALLS if kind.publishes)
"""The calls after which a cache that publishes events has some to take (R13)."""

INTERFACE: tuple[str, ...] = ("root", "block_size", *(kind.method for kind in CALLS if not kind.optional), "snapshot")
"""Every attribute a cache must have."""

TAKE_EVENTS = BY_OP["take_events"]

STATS_FIELDS: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(PrefixStats))

Arg = tuple[int, ...] | int | str
"""An argument as a call holds it: a list of ints (tokens, blocks), an int (a count) or a handle (a node)."""


def render_arg(kind: ParamKind, value: Arg) -> str:
    if kind in ("tokens", "blocks"):
        return render_ints(cast(tuple[int, ...], value))
    return str(value)


@dataclass(frozen=True, slots=True)
class Call:
    """One call as the text of calls writes it: the call, its arguments, and the handle it names (if any)."""

    op: str
    args: tuple[Arg, ...] = ()
    name: str = ""
    namespace: Namespace = None
    """R12: the namespace of a match or an insert."""
    kind: CallKind = dataclasses.field(init=False, repr=False, compare=False)
    """The call of the table ``op`` names (KeyError for none), read off the table once: a property read a call's
    kind at each of a lockstep's several readings (a frame each, bench.stage_throughput)."""

    def __init__(self, op: str, args: tuple[Arg, ...] = (), name: str = "", namespace: Namespace = None) -> None:
        # Each field set by its slot's own setter: a frozen dataclass's __init__ sets each through
        # object.__setattr__, and a lockstep makes a Call at every call (490 -> 264 ns a Call, timeit;
        # bench.instructions: 1.3% of an engine step).
        _SET_OP(self, op)
        _SET_ARGS(self, args)
        _SET_NAME(self, name)
        _SET_NAMESPACE(self, namespace)
        _SET_KIND(self, BY_OP[op])

    def __reduce__(self) -> tuple[type[Call], tuple[str, tuple[Arg, ...], str, Namespace]]:
        """Pickled as its fields: unpickled, its kind is the table's own again."""
        return (Call, (self.op, self.args, self.name, self.namespace))

    def arg(self, param: str) -> Arg:
        """The argument named ``param``."""
        for declared, value in zip(self.kind.params, self.args):
            if declared.name == param:
                return value
        raise KeyError(f"{self.op} takes no argument {param!r}")

    @property
    def handles(self) -> tuple[str, ...]:
        """The handles of the nodes this call refers to."""
        return tuple(cast(str, value) for declared, value in zip(self.kind.params, self.args) if declared.kind == "node")

    def with_handles(self, rename: Callable[[str], str]) -> Call:
        """The same call with every node handle passed through ``rename``."""
        args = tuple(
            rename(cast(str, value)) if declared.kind == "node" else value for declared, value in zip(self.kind.params, self.args)
        )
        return Call(self.op, args, self.name, self.namespace)

    def text(self) -> str:
        """The call as a line, without its result."""
        words = [self.op, *(render_arg(declared.kind, value) for declared, value in zip(self.kind.params, self.args))]
        if self.namespace is not None:
            words.append(f"ns={render_namespace(self.namespace)}")
        line = " ".join(words)
        return f"{self.name} = {line}" if self.name else line


def _slot_setter(field: str) -> Callable[[Call, object], None]:
    """The setter of a slot of ``Call``'s, which sets it on a frozen instance (for ``Call.__init__`` alone)."""
    setter: Callable[[Call, object], None] = getattr(Call, field).__set__
    return setter


_SET_OP, _SET_ARGS, _SET_NAME, _SET_NAMESPACE, _SET_KIND = map(_slot_setter, ("op", "args", "name", "namespace", "kind"))


def locks_and_unlocks(calls: Sequence[Call]) -> list[tuple[int, int]]:
    """The positions of each ``unlock`` of a node's handle (the root aside) and the latest ``lock`` of it before
    that no unlock released yet: a pair that goes together or not at all when a counterexample is cut (the
    unlock alone would be ``NotLocked``; the lock alone would pin the node)."""
    open_locks: dict[str, list[int]] = {}
    pairs: list[tuple[int, int]] = []
    for position, call in enumerate(calls):
        if call.op in ("lock", "unlock") and call.args and call.args[0] != "root":
            handle = str(call.args[0])
            if call.op == "lock":
                open_locks.setdefault(handle, []).append(position)
            elif open_locks.get(handle):
                pairs.append((open_locks[handle].pop(), position))
    return pairs


def make_call(op: str, *args: Arg, name: str = "", namespace: Namespace = None) -> Call:
    """A call, its arguments checked against the table (a wrong one is a programming error: TypeError)."""
    kind = BY_OP[op]
    if len(args) != len(kind.params) or kind.names_node != bool(name) or (namespace is not None and not kind.namespaced):
        raise TypeError(f"{op} takes {len(kind.params)} arguments{' and a name' if kind.names_node else ''}, got {args!r} {name!r}")
    return Call(op, tuple(args), name, namespace)
