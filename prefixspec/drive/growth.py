"""How a cache's calls grow with its size: the time of each call at 1k, 10k and 100k cached blocks.

A correct cache whose calls grow with its size (an eviction that scans every
leaf, a count that walks the tree) disagrees with nothing: it makes the scale
stage run for an hour, until one call passes the per-call limit, and that
report names a call, not the cause.  So before the scale stage drives a cache
through its tens of thousands of calls, ``probe_growth`` fills a fresh cache of
the target (without the spec: it compares no answer) to each of ``SIZES``
blocks and times each kind of call there; the stage's report prints the table,
and a cache whose calls, at the stage's size, would take the stage past its
budget is stopped at once with the call that grows and how.

Times are the least over ``ROUNDS`` rounds of the mean of ``CALLS`` calls, so
that a loaded machine, which only ever adds time, moves them little; the
verdict is a ratio between sizes, never an absolute time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from spec.api import CacheFactory, PrefixCache

SIZES = (1_000, 10_000, 100_000)
"""The cache sizes, in blocks, at which each call is timed."""
BRANCH_BLOCKS = 8
"""Blocks per cached prompt: each prompt is a leaf of its own under the root (so 100k blocks are 12,500 leaves)."""
BLOCK_SIZE = 4
ROUNDS = 5
CALLS = 20
GROWING_EXPONENT = 0.5
"""A call grows with the cache when its time rises at least as the square root of the size between the
smallest and the largest size measured (a tree's calls are flat or logarithmic: about 0 to 0.2)."""
NOTICEABLE = 20e-6
"""Seconds per call below which no growth is reported (a timer's noise at a few microseconds)."""

PROBED_CALLS = ("match_prefix", "insert", "lock+unlock", "evict", "counts")
"""The kinds of call timed: a whole-prompt hit, an insert of a cached prompt, a lock and its unlock, an
eviction of one block (and the insert that puts it back, untimed), ``cached_blocks`` with ``evictable_blocks``."""


@dataclass
class Growth:
    """What ``probe_growth`` measured: seconds per call by kind, at each size it reached."""

    seconds: dict[int, dict[str, float]] = field(default_factory=dict)
    """size in blocks -> call -> seconds per call."""
    stopped: str = ""
    """Why the probe stopped before its last size (its budget, a call that failed), or ``""``."""

    def sizes(self) -> list[int]:
        return sorted(self.seconds)

    def exponent(self, call: str) -> float | None:
        """How the call's time grows with the size between the smallest and the largest size measured
        (0: flat, 1: linear), or None with fewer than two sizes."""
        sizes = self.sizes()
        if len(sizes) < 2:
            return None
        low, high = sizes[0], sizes[-1]
        first, last = self.seconds[low][call], self.seconds[high][call]
        return math.log(max(last, 1e-9) / max(first, 1e-9)) / math.log(high / low)

    def growing(self) -> list[str]:
        """The calls that grow with the cache, slowest-growing last."""
        found: list[tuple[float, str]] = []
        sizes = self.sizes()
        for call in PROBED_CALLS:
            exponent = self.exponent(call)
            if exponent is not None and exponent >= GROWING_EXPONENT and self.seconds[sizes[-1]][call] >= NOTICEABLE:
                found.append((exponent, call))
        return [call for _, call in sorted(found)]

    def at(self, call: str, blocks: int) -> float:
        """The call's seconds at ``blocks`` cached blocks, interpolated on a log-log line between the measured sizes
        (beyond them, the nearest two extended)."""
        sizes = self.sizes()
        if len(sizes) == 1:
            return self.seconds[sizes[0]][call]
        index = 0
        while index + 2 < len(sizes) and sizes[index + 1] < blocks:
            index += 1
        low, high = sizes[index], sizes[index + 1]
        first, last = max(self.seconds[low][call], 1e-9), max(self.seconds[high][call], 1e-9)
        slope = math.log(last / first) / math.log(high / low)
        return first * math.pow(blocks / low, slope)

    def describe(self, call: str) -> str:
        """``evict: 1k blocks 35 µs, 10k 340 µs, 100k 3,400 µs per call (grows about as size^1.0)``."""
        cells = [f"{short_size(size)}{' blocks' if index == 0 else ''} {micros(self.seconds[size][call])}" for index, size in enumerate(self.sizes())]
        exponent = self.exponent(call)
        grows = "" if exponent is None else f" (grows about as size^{max(exponent, 0.0):.1f})"
        return f"{call}: {', '.join(cells)} per call{grows}"

    def lines(self) -> list[str]:
        """The table, a line per call, then why the probe stopped early, if it did."""
        lines = [self.describe(call) for call in PROBED_CALLS if self.seconds]
        if self.stopped:
            lines.append(f"(stopped at {short_size(self.sizes()[-1]) if self.seconds else 'no size'}: {self.stopped})")
        return lines


def short_size(blocks: int) -> str:
    return f"{blocks // 1000}k" if blocks % 1000 == 0 else f"{blocks:,}"


def micros(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs" if seconds < 0.01 else f"{seconds * 1e3:,.0f} ms"


class Filler:
    """One fresh cache of the target, grown a prompt (a leaf of ``BRANCH_BLOCKS`` blocks) at a time.

    Prompt k holds the tokens and the ids ``k*L .. k*L + L - 1`` (times the block size for tokens), so every
    prompt branches at the root, every id has one home, and an evicted id tells which prompt it was.
    """

    def __init__(self, cache: PrefixCache) -> None:
        self.cache = cache
        self.prompts = 0

    def tokens(self, prompt: int) -> list[int]:
        start = prompt * BRANCH_BLOCKS * BLOCK_SIZE
        return list(range(start, start + BRANCH_BLOCKS * BLOCK_SIZE))

    def ids(self, prompt: int) -> list[int]:
        return list(range(prompt * BRANCH_BLOCKS, (prompt + 1) * BRANCH_BLOCKS))

    def grow(self) -> None:
        self.cache.insert(self.tokens(self.prompts), self.ids(self.prompts))
        self.prompts += 1

    def restore(self, freed: list[int]) -> None:
        """Put back every prompt an eviction cut (its cached part keeps its ids, the rest are free again)."""
        for prompt in sorted({block // BRANCH_BLOCKS for block in freed}):
            self.cache.insert(self.tokens(prompt), self.ids(prompt))


def time_calls(clock: Callable[[], float], call: Callable[[int], object], deadline: float) -> float:
    """Seconds per call: the least over ROUNDS rounds of CALLS calls' mean; past ``deadline`` (on ``clock``)
    the rounds stop at the next call, so one very slow call is timed alone."""
    best = math.inf
    for round_number in range(ROUNDS):
        started = clock()
        made = 0
        while made < CALLS and (made == 0 or clock() < deadline):
            call(round_number * CALLS + made)
            made += 1
        best = min(best, (clock() - started) / made)
        if clock() >= deadline:
            break
    return best


def measure_at(filler: Filler, deadline: float) -> dict[str, float]:
    """Each kind of call's seconds, on the filled cache (which it leaves as big as it found it), by ``deadline``
    (``time.perf_counter``) as far as it can: each call is made at least once."""
    cache, clock = filler.cache, time.perf_counter
    spread = max(1, filler.prompts)

    def prompt_of(index: int) -> int:
        return (index * 7919) % spread  # a different prompt each call, all over the cache

    def match(index: int) -> object:
        return cache.match_prefix(filler.tokens(prompt_of(index)) + [0])

    def insert(index: int) -> object:
        prompt = prompt_of(index)
        return cache.insert(filler.tokens(prompt), filler.ids(prompt))

    def lock_unlock(index: int) -> object:
        node = cache.match_prefix(filler.tokens(prompt_of(index)) + [0]).node
        cache.lock(node)
        cache.unlock(node)
        return node

    def counts(index: int) -> object:
        return cache.cached_blocks() + cache.evictable_blocks()

    def share(part: int) -> float:
        """A part of the time left, so that a slow first kind of call leaves the others their turn."""
        return clock() + max(0.0, deadline - clock()) / part

    measured = {"match_prefix": time_calls(clock, match, share(5)), "insert": time_calls(clock, insert, share(4))}
    # lock+unlock is timed with the match that finds the node: the match's own time is taken away.
    measured["lock+unlock"] = max(0.0, time_calls(clock, lock_unlock, share(3)) - measured["match_prefix"])
    # evict is timed alone: the insert that restores the evicted prompt is not its cost.
    spent: list[float] = []
    evict_deadline = share(2)
    while len(spent) < ROUNDS * CALLS and (not spent or clock() < evict_deadline):
        before = clock()
        freed = cache.evict(1)
        spent.append(clock() - before)
        filler.restore(freed)
    measured["evict"] = min(sum(spent[start : start + CALLS]) / len(spent[start : start + CALLS]) for start in range(0, len(spent), CALLS))
    measured["counts"] = time_calls(clock, counts, share(1))
    return measured


def probe_growth(target: CacheFactory, budget: float, sizes: tuple[int, ...] = SIZES) -> Growth:
    """Fill one fresh cache of ``target`` to each size in turn and time its calls there, within ``budget`` seconds.

    The probe stops at the first size it cannot reach within the budget (the sizes measured so far are the
    answer) or at a call that raises (a cache may refuse to grow past its pool: that is no failure here).
    """
    started = time.perf_counter()
    growth = Growth()
    filler = Filler(target(BLOCK_SIZE))
    for index, size in enumerate(sizes):
        try:
            while filler.prompts * BRANCH_BLOCKS < size:
                filler.grow()
                if filler.prompts % 100 == 0 and time.perf_counter() - started > budget:
                    growth.stopped = f"filling to {short_size(size)} blocks passed the probe's {budget:.0f} s"
                    return growth
            now = time.perf_counter()
            growth.seconds[size] = measure_at(filler, now + (started + budget - now) / (len(sizes) - index))
        except Exception as error:  # a refused growth ends the probe; the stage itself compares every answer
            growth.stopped = f"growing to {short_size(size)} blocks, the cache raised {type(error).__name__}: {error}"
            return growth
        if time.perf_counter() - started > budget:
            if size != sizes[-1]:
                growth.stopped = f"the probe's {budget:.0f} s were spent"
            return growth
    return growth
