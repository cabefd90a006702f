"""The scaling series and the memory probe.

- ``evict_scaling``: the cost of ``evict`` per freed block against the number
  of cached leaves.  A cache holds L one-block leaves below the root; each
  step inserts one more leaf (untimed) and times ``evict(1)``, which frees
  the oldest, so L stays put.  The medians of all sizes are taken in the same
  repetition, in rotating order, and each repetition gives one ratio of the
  largest size to the smallest.
- ``match_floor``: ``match_prefix`` against the read floor of its prompt over
  prompt lengths.  The prompt is cached as a path of 4 nodes (as a chat's
  turns would leave it) beside 64 other branches; each sample times the floor
  (``array('I', prompt)``) and the match on the same fresh list, back to back,
  in alternating order.
- ``read_costs``: ``array('I').fromlist(tokens)``, the read impl does,
  against the read floor ``array('I', tokens)``, side by side on lists of the
  workload's mean prompt length.
- ``memory``: ``tracemalloc`` of a cache filled with 10^6 blocks of the
  workload's content (its traffic, inserted until 10^6 blocks are cached,
  with no eviction), measured after the inputs are dropped.  For SGLang the
  value tensors' storage is allocated by torch, outside tracemalloc's view,
  and is added from the tensors' sizes.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from time import perf_counter_ns
from typing import Any

from bench.replay import median
from bench.workload import SMALL, Traffic

B = 16


def leaf_tokens(index: int) -> list[int]:
    return list(range(B * index, B * index + B))


@dataclass
class Stepper:
    """One cache for the evict series: ``add(i)`` inserts leaf i, ``evict()`` frees one block."""

    name: str
    add: Callable[[int], None]
    prepare_evict: Callable[[], Any]
    evict: Callable[[Any], Any]


def api_stepper(name: str, cache: Any) -> Stepper:
    def add(index: int) -> None:
        cache.insert(leaf_tokens(index), [index])

    return Stepper(name, add, lambda: 1, cache.evict)


def sglang_stepper(sg: Any) -> Callable[[], Stepper]:
    from bench.sglang_loading import FreedSlots

    def make() -> Stepper:
        allocator = FreedSlots()
        cache = sg.RadixCache.create_simulated(mock_allocator=allocator, page_size=B)
        torch = sg.torch

        def add(index: int) -> None:
            key = sg.RadixKey(array("q", leaf_tokens(index)))
            cache.insert(sg.InsertParams(key=key, value=torch.arange(B * index, B * index + B, dtype=torch.int64)))

        def prepare() -> Any:
            allocator.freed.clear()
            return sg.EvictParams(num_tokens=B)

        return Stepper("sglang", add, prepare, cache.evict)

    return make


@dataclass
class EvictSeries:
    cache: str
    sizes: list[int]
    samples: dict[int, int]
    medians_ns: dict[int, list[float]] = field(default_factory=dict)
    build_s: dict[int, float] = field(default_factory=dict)

    def ratios(self) -> list[float]:
        """Per repetition: the largest size's median over the smallest's."""
        small, large = self.sizes[0], self.sizes[-1]
        return [big / little for big, little in zip(self.medians_ns[large], self.medians_ns[small])]


def evict_scaling(name: str, factory: Callable[[], Stepper], sizes: list[int], samples: dict[int, int], reps: int) -> EvictSeries:
    """The evict series of one cache; see the module docstring."""
    series = EvictSeries(name, sizes, samples)
    steppers: dict[int, Stepper] = {}
    next_leaf: dict[int, int] = {}
    for size in sizes:
        start = time.perf_counter()
        stepper = factory()
        for index in range(size):
            stepper.add(index)
        steppers[size] = stepper
        next_leaf[size] = size
        series.build_s[size] = time.perf_counter() - start
        series.medians_ns[size] = []
    gc.collect()
    gc.freeze()
    clock = perf_counter_ns
    try:
        for rep in range(reps):
            order = sizes[rep % len(sizes) :] + sizes[: rep % len(sizes)]
            for size in order:
                stepper = steppers[size]
                timings = []
                for _ in range(samples[size]):
                    stepper.add(next_leaf[size])
                    next_leaf[size] += 1
                    argument = stepper.prepare_evict()
                    start = clock()
                    stepper.evict(argument)
                    timings.append(clock() - start)
                series.medians_ns[size].append(median(timings))
    finally:
        steppers.clear()
        gc.unfreeze()
        gc.collect()
    return series


# Match against the read floor -------------------------------------------------------


@dataclass
class MatchPoint:
    cache: str
    length: int
    ratios: list[float] = field(default_factory=list)
    match_ns: list[float] = field(default_factory=list)
    floor_ns: list[float] = field(default_factory=list)


def _prompt(length: int, seed: int) -> array[int]:
    import random

    rng = random.Random(seed)
    return array("I", array("H", rng.randbytes(2 * length)))


def match_floor(
    name: str, make: Callable[[], Any], lengths: list[int], samples: int, reps: int, *, sglang: Any = None
) -> list[MatchPoint]:
    """``match_prefix`` over the read floor for each prompt length; see the module docstring."""
    points = []
    clock = perf_counter_ns
    for length in lengths:
        prompt = _prompt(length, length)
        cache = make()
        whole = length // B
        for branch in range(64):  # other branches, so the root is a real dict
            other = _prompt(4 * B, 10_000 + branch).tolist()
            _insert(cache, other, [10_000_000 + 4 * branch + i for i in range(4)], sglang)
        for quarter in (1, 2, 3, 4):  # the prompt as a path of 4 nodes
            blocks = whole * quarter // 4
            _insert(cache, prompt[: blocks * B].tolist(), list(range(blocks)), sglang)
        point = MatchPoint(name, length)
        gc.collect()
        for rep in range(reps):
            match_times = []
            floor_times = []
            for sample in range(samples):
                tokens = prompt.tolist()
                argument = _match_argument(tokens, sglang)
                if sample & 1:
                    start = clock()
                    cache.match_prefix(argument)
                    middle = clock()
                    array("I", tokens)
                    end = clock()
                    match_times.append(middle - start)
                    floor_times.append(end - middle)
                else:
                    start = clock()
                    array("I", tokens)
                    middle = clock()
                    cache.match_prefix(argument)
                    end = clock()
                    floor_times.append(middle - start)
                    match_times.append(end - middle)
            point.match_ns.append(median(match_times))
            point.floor_ns.append(median(floor_times))
            point.ratios.append(point.match_ns[-1] / point.floor_ns[-1])
        points.append(point)
    return points


def _insert(cache: Any, tokens: list[int], blocks: list[int], sglang: Any) -> None:
    if sglang is None:
        cache.insert(tokens, blocks)
        return
    torch = sglang.torch
    slots = (torch.tensor(blocks, dtype=torch.int64)[:, None] * B + torch.arange(B)).reshape(-1)
    cache.insert(sglang.InsertParams(key=sglang.RadixKey(array("q", tokens)), value=slots))


def _match_argument(tokens: list[int], sglang: Any) -> Any:
    if sglang is None:
        return tokens
    return sglang.MatchPrefixParams(key=sglang.RadixKey(array("q", tokens), limit=max(len(tokens) - 1, 0)))


def read_costs(length: int, samples: int, reps: int) -> list[float]:
    """Per repetition: the median of fromlist over the median of the floor constructor."""
    prompt = _prompt(length, 7)
    clock = perf_counter_ns
    found = []
    for _ in range(reps):
        floor_times = []
        read_times = []
        for sample in range(samples):
            tokens = prompt.tolist()
            if sample & 1:
                start = clock()
                array("I", tokens)
                middle = clock()
                converted = array("I")
                converted.fromlist(tokens)
                end = clock()
                floor_times.append(middle - start)
                read_times.append(end - middle)
            else:
                start = clock()
                converted = array("I")
                converted.fromlist(tokens)
                middle = clock()
                array("I", tokens)
                end = clock()
                read_times.append(middle - start)
                floor_times.append(end - middle)
        found.append(median(read_times) / median(floor_times))
    return found


# Memory ----------------------------------------------------------------------------------


@dataclass
class MemoryPoint:
    cache: str
    blocks: int
    tokens: int
    requests: int
    traced_bytes: int
    untraced_bytes: int
    seconds: float

    @property
    def bytes_per_token(self) -> float:
        return (self.traced_bytes + self.untraced_bytes) / self.tokens


def fill(insert: Callable[[array[int], list[int]], list[int]], cached_blocks: Callable[[], int], target: int) -> int:
    """Insert the workload's traffic until ``target`` blocks are cached; the requests made.

    Block ids come from a counter, and the ids an insert hands back as
    duplicates are used again.  Tokens are passed as arrays (made from the
    traffic's tuples, which are dropped with it), so that a cache keeps no
    int object of its input and tracemalloc counts what the cache holds.
    """
    traffic = Traffic(replace(SMALL, requests=10**9))
    free: list[int] = []
    next_id = 0
    requests = 0
    while cached_blocks() < target:
        request = traffic.next_request(set())
        sequence = request.prompt + request.output
        whole = len(sequence) // B
        reused = min(whole, len(free))
        blocks = free[len(free) - reused :]
        del free[len(free) - reused :]
        blocks.extend(range(next_id, next_id + whole - reused))
        next_id += whole - reused
        free.extend(insert(array("I", sequence), blocks))
        traffic.finished(request, sequence)
        requests += 1
    return requests


def memory_api(name: str, factory: Callable[[int], Any], target: int) -> MemoryPoint:
    gc.collect()
    tracemalloc.start()
    start = time.perf_counter()
    before = tracemalloc.get_traced_memory()[0]
    cache = factory(B)
    take_events = getattr(cache, "take_events", None)

    def insert(tokens: array[int], blocks: list[int]) -> list[int]:
        duplicates = list(cache.insert(tokens, blocks).duplicates)
        if take_events is not None:
            # A router polls the events (R13): the cache holds the blocks, not every BlockStored since its start
            # (untaken, they were 33 of 42 MB at 100,000 blocks).
            take_events()
        return duplicates

    requests = fill(insert, cache.cached_blocks, target)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    point = MemoryPoint(name, cache.cached_blocks(), cache.cached_tokens(), requests, traced, 0, time.perf_counter() - start)
    del cache
    gc.collect()
    return point


def memory_sglang(sg: Any, target: int) -> MemoryPoint:
    from bench.sglang_loading import FreedSlots

    torch = sg.torch
    offsets = torch.arange(B, dtype=torch.int64)
    gc.collect()
    tracemalloc.start()
    start = time.perf_counter()
    before = tracemalloc.get_traced_memory()[0]
    cache = sg.RadixCache.create_simulated(mock_allocator=FreedSlots(), page_size=B)
    held = [0]

    def insert(tokens: array[int], blocks: list[int]) -> list[int]:
        slots = (torch.tensor(blocks, dtype=torch.int64)[:, None] * B + offsets).reshape(-1)
        result = cache.insert(sg.InsertParams(key=sg.RadixKey(array("q", tokens)), value=slots))
        cached = result.prefix_len // B
        held[0] += len(blocks) - cached
        return blocks[:cached]  # SGLang keeps its own ids there; the engine frees these

    requests = fill(insert, lambda: held[0], target)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    untraced = 0
    stack = [cache.root_node]
    while stack:
        node = stack.pop()
        value = node.value
        if value is not None and hasattr(value, "untyped_storage"):
            untraced += value.untyped_storage().nbytes()
        stack.extend(node.children.values())
    point = MemoryPoint("sglang", held[0], held[0] * B, requests, traced, untraced, time.perf_counter() - start)
    del cache
    gc.collect()
    return point
