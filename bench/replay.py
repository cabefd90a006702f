"""Timed, verified replay of a recording on one cache.

Every call of a recording is made on a fresh cache through an adapter, which
splits it in three: ``prepare`` (outside the timer: what an engine does anyway,
such as building SGLang's key and slot tensor), the call itself (the only thing
timed, one cache call per recorded call), and ``read`` (outside the timer: the
result as the interface's value, written as the trace writes it and compared
with the recorded text, ``prefixspec.formats.trace.same_outcome``).  A result
that differs stops the replay: it is reported as the trace's ``Divergence``
and not timed.

Each match and insert is also timed on the *read floor*: ``array('I', tokens)``
on the very list handed to the cache, the least any cache that takes Python
lists must do.  Floor and call are timed back to back, in alternating order,
so the ratio of the two is measured side by side.
"""

from __future__ import annotations

import gc
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any, cast

from bench.workload import Recording
from prefixspec.formats.trace import Divergence, same_outcome
from prefixspec.vocabulary import COMMANDS, render_result, result_node
from spec.api import BlockId, Inserted, NodeId, PrefixMatch

Ints = tuple[int, ...]


class Adapter:
    """One cache behind the replay: ``reset`` makes a fresh one; the rest map calls.

    The ``prepare_*`` and ``read_*`` methods run outside the timer, and the
    ``read_*`` give the interface's values (``spec.api``), which the replay
    writes as the trace does; the ``match``, ``insert``, ``lock``, ``unlock``
    and ``evict`` attributes are the bound calls that are timed, set by ``reset``.
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

    def read_match(self, result: Any) -> PrefixMatch:
        raise NotImplementedError

    def read_insert(self, result: Any, blocks: list[int]) -> Inserted:
        raise NotImplementedError

    def read_evict(self, result: Any) -> list[BlockId]:
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

    def read_match(self, result: Any) -> PrefixMatch:
        return PrefixMatch(result.matched_tokens, list(result.blocks), result.node)

    def read_insert(self, result: Any, blocks: list[int]) -> Inserted:
        return Inserted(result.node, list(result.duplicates))

    def read_evict(self, result: Any) -> list[BlockId]:
        return list(result)


@dataclass
class Replay:
    """The nanoseconds of one replay, per kind of call, and of the read floor."""

    cache: str
    calls: int = 0
    ns: dict[str, int] = field(default_factory=lambda: {name: 0 for name in COMMANDS})
    count: dict[str, int] = field(default_factory=lambda: {name: 0 for name in COMMANDS})
    floor_ns: dict[str, int] = field(default_factory=lambda: {"match": 0, "insert": 0})
    divergence: Divergence | None = None

    @property
    def total_ns(self) -> int:
        return sum(self.ns.values())

    @property
    def total_floor_ns(self) -> int:
        return sum(self.floor_ns.values())


def _short(text: str) -> str:
    """``text`` with its middle cut when long: its ends keep the call, the matched length and the node."""
    return text if len(text) < 300 else f"{text[:200]} ... {text[-80:]}"


def shortened(found: Divergence) -> Divergence:
    """The trace's divergence with its texts cut short: a call of the workload holds thousands of tokens."""
    return Divergence(found.line, _short(found.call), _short(found.expected), _short(found.got))


@dataclass
class NodePlan:
    """When a replay may let go of each node a call returned.

    A replay keeps a node only until the last call that names its handle (a
    later result that writes the node by it, or a lock or unlock of it), so
    that it keeps no evicted subtree alive: a harness that kept them made
    every full garbage collection slower, and charged that to the cache.
    """

    drop_after: dict[int, list[str]]
    """A call's index -> the handles no later call needs."""


def node_plan(recording: Recording) -> NodePlan:
    last_need: dict[str, int] = {}
    for index, step in enumerate(recording.trace.steps):
        call = step.call
        for handle in call.handles:
            last_need[handle] = index
        if call.name:
            last_need[call.name] = index
            written = result_node(call.kind, step.expected or "")
            if written is not None and written[1] not in ("root", "new"):
                last_need[written[1]] = index
    last_need.pop("root", None)
    drop_after: dict[int, list[str]] = {}
    for handle, index in last_need.items():
        drop_after.setdefault(index, []).append(handle)
    return NodePlan(drop_after)


def replay(recording: Recording, adapter: Adapter, *, limit: int | None = None, plan: NodePlan | None = None) -> Replay:
    """Replay ``recording`` (its first ``limit`` calls) on a fresh cache of ``adapter``.

    Each result is written as the trace writes it and compared with the
    recorded text, nodes included: a node is written ``root``, the handle that
    first returned it (of those a later call still names), or ``new``.
    """
    steps = recording.trace.steps
    drop_after = (plan or node_plan(recording)).drop_after
    calls = len(steps) if limit is None else min(limit, len(steps))
    adapter.reset()
    root = adapter.root
    result = Replay(adapter.name, calls)
    ns = result.ns
    count = result.count
    floor_ns = result.floor_ns
    kept: dict[str, Any] = {}
    """Each handle a later call needs -> its node."""
    first_name: dict[int, str] = {}
    """The id of each node kept -> the handle that first returned it: how the trace writes the node."""

    def written(node: NodeId) -> str:
        return "root" if node is root else first_name.get(id(node), "new")

    clock = perf_counter_ns
    gc.collect()
    for index in range(calls):
        step = steps[index]
        call = step.call
        op = call.op
        value: object
        if op == "match":
            tokens = list(cast(Ints, call.args[0]))
            prepared = adapter.prepare_match(tokens)
            match = adapter.match
            if index & 1:
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
            value = adapter.read_match(found)
        elif op == "insert":
            tokens = list(cast(Ints, call.args[0]))
            block_list = list(cast(Ints, call.args[1]))
            prepared_args = adapter.prepare_insert(tokens, block_list)
            insert = adapter.insert
            if index & 1:
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
            value = adapter.read_insert(done, block_list)
        elif op == "lock" or op == "unlock":
            handle = call.handles[0]
            target = root if handle == "root" else kept[handle]
            method = adapter.lock if op == "lock" else adapter.unlock
            start = clock()
            method(target)
            end = clock()
            ns[op] += end - start
            count[op] += 1
            value = None
        else:
            prepared = adapter.prepare_evict(cast(int, call.args[0]))
            evict = adapter.evict
            start = clock()
            freed = evict(prepared)
            end = clock()
            ns["evict"] += end - start
            count["evict"] += 1
            value = adapter.read_evict(freed)
        got = render_result(call.kind, value, written)
        if not same_outcome(step.expected or "", got):
            result.divergence = shortened(Divergence(step.line, call.text(), step.expected or "", got))
            result.calls = index
            break
        if call.name:
            node = cast(PrefixMatch | Inserted, value).node
            kept[call.name] = node
            if node is not root:
                first_name.setdefault(id(node), call.name)
        for handle in drop_after.get(index, ()):
            node = kept.pop(handle)
            if first_name.get(id(node)) == handle:
                del first_name[id(node)]
    kept.clear()
    adapter.reset()  # drop the cache before the next replay
    return result


def requests_prefix(recording: Recording, requests: int) -> int:
    """The number of calls that covers the first ``requests`` matches (and what they lead to)."""
    seen = 0
    for index, step in enumerate(recording.trace.steps):
        if step.call.op == "match":
            seen += 1
            if seen > requests:
                return index
    return len(recording.trace.steps)


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
