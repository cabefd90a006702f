"""Timed, verified replay of a recording on one cache.

Every call of a recording is made on a fresh cache through an adapter, which
splits it in three: ``prepare`` (outside the timer: what an engine does anyway,
such as building SGLang's key and slot tensor), the call itself (the only thing
timed, one cache call per recorded call), and ``read`` (outside the timer: the
result in the recording's terms, compared with the expected one).  A result
that differs stops the replay: it is reported as a divergence and not timed.

Each match and insert is also timed on the *read floor*: ``array('I', tokens)``
on the very list handed to the cache, the least any cache that takes Python
lists must do.  Floor and call are timed back to back, in alternating order,
so the ratio of the two is measured side by side.
"""

from __future__ import annotations

import gc
from array import array
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

from bench.workload import EVICT, INSERT, LOCK, MATCH, OP_NAMES, ROOT_REF, UNLOCK, Recording

MatchRead = tuple[int, "array[int]", Hashable]
"""(matched tokens, block ids, node) of a match, in the recording's terms."""
InsertRead = tuple[Hashable, "array[int]"]
"""(node, duplicates) of an insert."""


class Adapter:
    """One cache behind the replay: ``reset`` makes a fresh one; the rest map calls.

    The ``prepare_*`` and ``read_*`` methods run outside the timer; the
    ``match``, ``insert``, ``lock``, ``unlock`` and ``evict`` attributes are
    the bound calls that are timed, set by ``reset``.
    """

    name = "cache"
    match: Callable[[Any], Any]
    insert: Callable[..., Any]
    lock: Callable[[Any], Any]
    unlock: Callable[[Any], Any]
    evict: Callable[[Any], Any]

    root: object = None

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size

    def reset(self) -> None:
        raise NotImplementedError

    def prepare_match(self, tokens: list[int]) -> Any:
        return tokens

    def prepare_insert(self, tokens: list[int], blocks: list[int]) -> tuple[Any, ...]:
        return (tokens, blocks)

    def prepare_evict(self, count: int) -> Any:
        return count

    def read_match(self, result: Any) -> MatchRead:
        raise NotImplementedError

    def read_insert(self, result: Any, blocks: list[int]) -> InsertRead:
        raise NotImplementedError

    def read_evict(self, result: Any) -> array[int]:
        raise NotImplementedError


class ApiAdapter(Adapter):
    """A cache with the calls of ``spec.api.PrefixCache`` (impl, spec)."""

    def __init__(self, name: str, factory: Callable[[int], Any], block_size: int) -> None:
        super().__init__(block_size)
        self.name = name
        self.factory = factory

    def reset(self) -> None:
        self.cache = self.factory(self.block_size)
        self.root = self.cache.root
        self.match = self.cache.match_prefix
        self.insert = self.cache.insert
        self.lock = self.cache.lock
        self.unlock = self.cache.unlock
        self.evict = self.cache.evict

    def read_match(self, result: Any) -> MatchRead:
        return result.matched_tokens, array("I", result.blocks), result.node

    def read_insert(self, result: Any, blocks: list[int]) -> InsertRead:
        return result.node, array("I", result.duplicates)

    def read_evict(self, result: Any) -> array[int]:
        return array("I", result)


@dataclass
class Divergence:
    call: int
    op: str
    expected: str
    got: str

    def describe(self) -> str:
        return f"call {self.call} ({self.op}): expected {self.expected}, got {self.got}"


@dataclass
class Replay:
    """The nanoseconds of one replay, per kind of call, and of the read floor."""

    cache: str
    calls: int = 0
    ns: dict[str, int] = field(default_factory=lambda: {name: 0 for name in OP_NAMES})
    count: dict[str, int] = field(default_factory=lambda: {name: 0 for name in OP_NAMES})
    floor_ns: dict[str, int] = field(default_factory=lambda: {"match": 0, "insert": 0})
    divergence: Divergence | None = None

    @property
    def total_ns(self) -> int:
        return sum(self.ns.values())

    @property
    def total_floor_ns(self) -> int:
        return sum(self.floor_ns.values())


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) < 300 else text[:300] + "..."


@dataclass
class NodePlan:
    """When a replay may let go of each node a call returned.

    A replay keeps a node only until the last call that names it (a later
    result that must be the same node, or a lock or unlock of it), so that it
    keeps no evicted subtree alive: a harness that kept them made every full
    garbage collection slower, and charged that to the cache.
    """

    handle_ref: dict[int, int]
    """A match or insert call -> the reference of the node it returned."""
    drop_after: dict[int, list[int]]
    """A call -> the references no later call needs."""


def node_plan(recording: Recording) -> NodePlan:
    ops = recording.ops
    args = recording.args
    expected = recording.expected
    handle_ref: dict[int, int] = {}
    last_need: dict[int, int] = {}
    for call, op in enumerate(ops):
        if op == MATCH:
            ref = expected[call][2]  # type: ignore[index]
            handle_ref[call] = ref
        elif op == INSERT:
            ref = expected[call][0]  # type: ignore[index]
            handle_ref[call] = ref
        elif op == LOCK or op == UNLOCK:
            ref = handle_ref[args[call]]  # type: ignore[index]
        else:
            continue
        if ref != ROOT_REF:
            last_need[ref] = call
    drop_after: dict[int, list[int]] = {}
    for ref, call in last_need.items():
        drop_after.setdefault(call, []).append(ref)
    return NodePlan(handle_ref, drop_after)


def replay(recording: Recording, adapter: Adapter, *, limit: int | None = None, plan: NodePlan | None = None) -> Replay:
    """Replay ``recording`` (its first ``limit`` calls) on a fresh cache of ``adapter``.

    Each result is compared with the expected one, nodes included: a node
    expected to be the root must be the root, one first returned by this call
    must be none that an earlier call returned (of those still named later),
    and one first returned by call k must be the node call k returned.
    """
    ops = recording.ops
    args: list[Any] = recording.args
    expected: list[Any] = recording.expected
    plan = plan or node_plan(recording)
    handle_ref = plan.handle_ref
    drop_after = plan.drop_after
    calls = len(ops) if limit is None else min(limit, len(ops))
    adapter.reset()
    root = adapter.root
    result = Replay(adapter.name, calls)
    ns = result.ns
    count = result.count
    floor_ns = result.floor_ns
    kept: dict[int, Hashable] = {}
    kept_refs: dict[int, int] = {}
    clock = perf_counter_ns
    gc.collect()
    for call in range(calls):
        op = ops[call]
        if op == MATCH:
            tokens = args[call].tolist()
            prepared = adapter.prepare_match(tokens)
            match = adapter.match
            if call & 1:
                start = clock()
                found = match(prepared)
                middle = clock()
                array("I", tokens)
                end = clock()
                ns["match"] += middle - start
                floor_ns["match"] += end - middle
            else:
                start = clock()
                array("I", tokens)
                middle = clock()
                found = match(prepared)
                end = clock()
                floor_ns["match"] += middle - start
                ns["match"] += end - middle
            count["match"] += 1
            matched, blocks, node = adapter.read_match(found)
            want_matched, want_blocks, ref = expected[call]
            same = matched == want_matched and blocks == want_blocks
            got: object = (matched, blocks)
            want: object = (want_matched, want_blocks)
        elif op == INSERT:
            token_array, block_array = args[call]
            tokens = token_array.tolist()
            block_list = block_array.tolist()
            prepared_args = adapter.prepare_insert(tokens, block_list)
            insert = adapter.insert
            if call & 1:
                start = clock()
                done = insert(*prepared_args)
                middle = clock()
                array("I", tokens)
                end = clock()
                ns["insert"] += middle - start
                floor_ns["insert"] += end - middle
            else:
                start = clock()
                array("I", tokens)
                middle = clock()
                done = insert(*prepared_args)
                end = clock()
                floor_ns["insert"] += middle - start
                ns["insert"] += end - middle
            count["insert"] += 1
            node, duplicates = adapter.read_insert(done, block_list)
            ref, want_duplicates = expected[call]
            same = duplicates == want_duplicates
            got = duplicates
            want = want_duplicates
        elif op == LOCK or op == UNLOCK:
            ref = handle_ref[args[call]]
            target = root if ref == ROOT_REF else kept[ref]
            method = adapter.lock if op == LOCK else adapter.unlock
            start = clock()
            method(target)
            end = clock()
            ns[OP_NAMES[op]] += end - start
            count[OP_NAMES[op]] += 1
            for ref in drop_after.get(call, ()):
                del kept_refs[id(kept.pop(ref))]
            continue
        else:
            prepared = adapter.prepare_evict(args[call])
            evict = adapter.evict
            start = clock()
            freed = evict(prepared)
            end = clock()
            ns["evict"] += end - start
            count["evict"] += 1
            got = adapter.read_evict(freed)
            want = expected[call]
            if got != want:
                result.divergence = Divergence(call, "evict", _short(want), _short(got))
                result.calls = call
                break
            continue
        if same:
            if ref == ROOT_REF:
                same = node is root
            elif ref == call:
                same = node is not root and id(node) not in kept_refs
                kept[call] = node
                kept_refs[id(node)] = call
            else:
                same = kept.get(ref) is node
            if not same:
                got = f"a node unlike the expected one (expected the node of call {ref})"
                want = f"the node of call {ref}" if ref != ROOT_REF else "the root"
        if not same:
            result.divergence = Divergence(call, OP_NAMES[op], _short(want), _short(got))
            result.calls = call
            break
        for ref in drop_after.get(call, ()):
            del kept_refs[id(kept.pop(ref))]
    kept.clear()
    adapter.reset()  # drop the cache before the next replay
    return result


def requests_prefix(recording: Recording, requests: int) -> int:
    """The number of calls that covers the first ``requests`` matches (and what they lead to)."""
    seen = 0
    for call, op in enumerate(recording.ops):
        if op == MATCH:
            seen += 1
            if seen > requests:
                return call
    return len(recording.ops)


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
