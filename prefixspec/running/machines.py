"""The conformance state machines: any cache against the spec, call by call.

Two Hypothesis machines, each built for a cache factory (``factory(block_size)``
returns a fresh ``PrefixCache``):

- ``call_machine(factory)``: the calls themselves, in any order and with bad
  arguments: matches and inserts of prompts that share, extend and diverge,
  correct, duplicate and wrong block lists, locks and unlocks of handles old
  and new (including evicted ones), evictions of every size, the counters.
- ``engine_machine(factory)``: an engine's block manager (``prefixspec/running/engine.py``)
  over a pool of 64 block ids.  Each rule runs a seeded burst of engine steps,
  because Hypothesis spends its choice budget per drawn value: drawing only a
  seed and a length lets one example run thousands of steps.

Both drive a ``Lockstep`` of the spec and the cache, so every result, error
and snapshot is compared after every call, and a failure carries the calls
that led to it as a trace.  ``RunTally`` counts what was run and checked.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.errors import StopTest
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from spec.api import ID_LIMIT, BlockId, CacheFactory, Inserted, NodeId, PrefixCacheError, PrefixMatch, Rules
from spec.model import SpecCache
from prefixspec.running.engine import Engine, Workload
from prefixspec.running.lockstep import Lockstep
from prefixspec.vocabulary import BY_OP, QUERIES

ENGINE_STEPS_PER_EXAMPLE = 3000
"""Every engine example must run at least this many engine steps; the runner checks it."""

BURST_STEPS = (250, 450)
"""Engine steps per burst, drawn from this range."""

CALLS_PER_EXAMPLE = 60
"""Rules per call-machine example (stateful_step_count)."""

CALL_EXAMPLES_PER_ENGINE_EXAMPLE = 20
"""A call-machine example costs about a twentieth of an engine example, so it gets twenty times as many."""


def engine_bursts(min_engine_steps: int) -> int:
    """Rules per engine example (stateful_step_count) so that every example runs ``min_engine_steps``.

    The initialize rule counts as one; every burst runs at least BURST_STEPS[0]
    steps.  Hypothesis may still stop an example early when its choice budget
    runs out, so the runners count the steps actually run and fail short ones.
    """
    return 1 + -(-min_engine_steps // BURST_STEPS[0])


def call_machine_examples(engine_examples: int) -> int:
    """Call-machine examples for a profile whose engine examples are ``engine_examples``."""
    return engine_examples * CALL_EXAMPLES_PER_ENGINE_EXAMPLE


@dataclass
class RunTally:
    """What the machines ran and checked, over every example of one run."""

    examples: int = 0
    engine_steps: int = 0
    calls: int = 0
    engine_steps_per_example: list[int] = field(default_factory=list)
    progress: Callable[[RunTally], None] | None = None
    abandoned_examples: int = 0
    """Engine examples Hypothesis abandoned midway (a draw past its buffer, or a failure): not test cases."""
    started: float = field(default_factory=time.perf_counter)
    first_failure_seconds: float | None = None
    first_failure_example: int | None = None
    """The example that failed first: Hypothesis runs it once more to report it, a replay, not a test case."""
    """Seconds from the start of the run to the first failing example, before any shrinking."""

    @property
    def invariants_checked(self) -> int:
        """Each call: its result and the snapshot after it; each engine step: conservation and lock safety."""
        return 2 * self.calls + 2 * self.engine_steps


def attach_trace(error: BaseException, pair: Lockstep, tally: RunTally) -> BaseException:
    """Give a failure the calls that led to it, so the runner can write and minimise them; note when the first came."""
    setattr(error, "prefixspec_trace", pair.trace())
    if tally.first_failure_seconds is None:
        tally.first_failure_seconds = time.perf_counter() - tally.started
        tally.first_failure_example = tally.examples
    return error


@dataclass(frozen=True)
class NodePair:
    """A node as both caches know it: the trace handle, the spec's NodeId and the target's NodeId."""

    handle: str
    spec_node: NodeId
    target_node: NodeId

    def __repr__(self) -> str:
        return f"NodePair({self.handle!r})"


def call_machine(factory: CacheFactory, tally: RunTally | None = None, rules: Rules = Rules()) -> type[RuleBasedStateMachine]:
    """The call machine for caches made by ``factory``, against the spec under ``rules``."""
    counts = tally if tally is not None else RunTally()

    class CallMachine(RuleBasedStateMachine):
        """Every call of the interface, on the spec and the cache in lockstep."""

        prompts = Bundle("prompts")
        nodes = Bundle("nodes")

        def __init__(self) -> None:
            super().__init__()
            self.spec = SpecCache(1, rules)
            self.pair = Lockstep(self.spec, factory(1))
            self.next_block: BlockId = 0
            counts.examples += 1
            if counts.progress is not None:
                counts.progress(counts)

        @initialize(block_size=st.integers(1, 4), target=prompts)
        def choose_block_size(self, block_size: int) -> object:
            self.spec = SpecCache(block_size, rules)
            self.pair = Lockstep(self.spec, factory(block_size))
            return multiple((0,) * block_size, (1,) * (2 * block_size))

        def call(self, action: Callable[[], object]) -> object:
            """Make one call through the lockstep; an error both caches raised alike is an answer too."""
            counts.calls += 1
            try:
                return action()
            except PrefixCacheError:
                return None
            except AssertionError as failure:
                raise attach_trace(failure, self.pair, counts)

        def node_pair(self, node: NodeId) -> NodePair:
            handle = self.pair.handle_of(node)
            return NodePair(handle, node, self.pair.target_node(handle))

        def fresh_blocks(self, count: int) -> list[BlockId]:
            blocks = list(range(self.next_block, self.next_block + count))
            self.next_block += count
            return blocks

        def cached_blocks_along(self, prompt: tuple[int, ...]) -> list[BlockId | None]:
            """The spec's block at each whole-block position of ``prompt``, None where uncached."""
            size = self.spec.block_size()
            return [self.spec.block_cached_at(prompt[: (index + 1) * size]) for index in range(len(prompt) // size)]

        # Prompts that share, extend and diverge ------------------------------------

        @rule(target=prompts, tokens=st.lists(st.integers(0, 3), max_size=10))
        def new_prompt(self, tokens: list[int]) -> tuple[int, ...]:
            return tuple(tokens)

        @rule(target=prompts, base=prompts, tail=st.lists(st.integers(0, 3), min_size=1, max_size=8), cut=st.integers(0, 8))
        def extend_prompt(self, base: tuple[int, ...], tail: list[int], cut: int) -> tuple[int, ...]:
            """A prompt sharing ``base`` up to ``len(base) - cut`` tokens, then going its own way."""
            return base[: max(0, len(base) - cut)] + tuple(tail)

        # The calls --------------------------------------------------------------------

        @rule(target=nodes, prompt=prompts)
        def match(self, prompt: tuple[int, ...]) -> object:
            found = self.call(lambda: self.pair.match_prefix(prompt))
            return self.node_pair(found.node) if isinstance(found, PrefixMatch) else multiple()

        @rule(target=nodes, prompt=prompts, fresh=st.booleans())
        def insert(self, prompt: tuple[int, ...], fresh: bool) -> object:
            """Insert with the cached ids where cached (an engine that matched first) or all fresh (a racing one)."""
            along = self.cached_blocks_along(prompt)
            new_ids = iter(self.fresh_blocks(len(along)))
            blocks = [next(new_ids) if fresh or cached is None else cached for cached in along]
            done = self.call(lambda: self.pair.insert(prompt, blocks))
            return self.node_pair(done.node) if isinstance(done, Inserted) else multiple()

        @rule(prompt=prompts, mistake=st.sampled_from(["tail", "short", "repeat", "cached_elsewhere", "bad_id", "bad_token"]))
        def insert_wrong(self, prompt: tuple[int, ...], mistake: str) -> None:
            """An insert that R1 or R5 refuses (both caches must refuse it and change nothing)."""
            along = self.cached_blocks_along(prompt)
            blocks = self.fresh_blocks(len(along))
            tokens = prompt
            if mistake == "tail":
                blocks = blocks + self.fresh_blocks(1)
            elif mistake == "short" and blocks:
                blocks = blocks[:-1]
            elif mistake == "repeat" and len(blocks) >= 2:
                blocks[-1] = blocks[0]
            elif mistake == "cached_elsewhere" and blocks and self.spec.cached_blocks():
                blocks[-1] = min(self.spec.cached_block_ids())
            elif mistake == "bad_id" and blocks:
                blocks[0] = ID_LIMIT
            elif mistake == "bad_token":
                tokens = prompt + (-1,)
                blocks = self.fresh_blocks(len(tokens) // self.pair.block_size())
            self.call(lambda: self.pair.insert(tokens, blocks))

        @rule(node=nodes)
        def lock(self, node: NodePair) -> None:
            self.call(lambda: self.pair.lock(node.spec_node))

        @rule(node=nodes)
        def unlock(self, node: NodePair) -> None:
            self.call(lambda: self.pair.unlock(node.spec_node))

        @rule(node=consumes(nodes))
        def lock_and_forget(self, node: NodePair) -> None:
            """A request that never finishes: its lock stays for the rest of the example."""
            self.call(lambda: self.pair.lock(node.spec_node))

        @rule(n_blocks=st.integers(-1, 12))
        def evict(self, n_blocks: int) -> None:
            self.call(lambda: self.pair.evict(n_blocks))

        @rule()
        def evict_one(self) -> None:
            """The smallest eviction, which must still free a whole leaf (R8): the likeliest to expose a truncated one."""
            self.call(lambda: self.pair.evict(1))

        @rule()
        def evict_everything(self) -> None:
            self.call(lambda: self.pair.evict(10**9))

        @rule(query=st.sampled_from(QUERIES))
        def read_counters(self, query: str) -> None:
            self.call(getattr(self.pair, BY_OP[query].method))

        @precondition(lambda self: self.pair.reference.cached_blocks() > 0)
        @rule()
        def evictable_is_what_evict_frees(self) -> None:
            """R9: evict(10**9) frees exactly evictable_blocks() blocks."""
            promised = self.call(self.pair.evictable_blocks)
            freed = self.call(lambda: self.pair.evict(10**9))
            if not isinstance(freed, list) or len(freed) != promised:
                raise attach_trace(AssertionError(f"evictable_blocks() was {promised} but evict freed {freed}"), self.pair, counts)

    CallMachine.__name__ = CallMachine.__qualname__ = "CallMachine"
    return CallMachine


def engine_machine(
    factory: CacheFactory, tally: RunTally | None = None, rules: Rules = Rules(), pool_size: int = 64
) -> type[RuleBasedStateMachine]:
    """The engine machine for caches made by ``factory``, against the spec under ``rules``."""
    counts = tally if tally is not None else RunTally()

    class EngineMachine(RuleBasedStateMachine):
        """Seeded bursts of engine steps over a fixed pool, on the spec and the cache in lockstep."""

        def __init__(self) -> None:
            super().__init__()
            self.pair = Lockstep(SpecCache(2, rules), factory(2))
            self.engine = Engine(self.pair, Workload(pool_size=pool_size))
            self.steps = 0
            counts.examples += 1

        @initialize(block_size=st.integers(1, 4), prompt_seed=st.integers(0, 2**16))
        def start(self, block_size: int, prompt_seed: int) -> None:
            self.pair = Lockstep(SpecCache(block_size, rules), factory(block_size))
            self.engine = Engine(self.pair, Workload(block_size=block_size, pool_size=pool_size), prompt_seed=prompt_seed)

        @rule(seed=st.integers(0, 2**32 - 1), length=st.integers(*BURST_STEPS))
        def burst(self, seed: int, length: int) -> None:
            rng = random.Random(seed)
            calls_before = len(self.pair.steps)
            try:
                for _ in range(length):
                    self.engine.step(rng)
                    self.steps += 1
                    counts.engine_steps += 1
            except AssertionError as failure:
                raise attach_trace(failure, self.pair, counts)
            finally:
                counts.calls += len(self.pair.steps) - calls_before
                if counts.progress is not None:
                    counts.progress(counts)

        @invariant()
        def counts_agree(self) -> None:
            """The engine's own ledger: one place per block id (checked after every step, here once more per burst)."""
            try:
                self.engine.check()
            except AssertionError as failure:
                raise attach_trace(failure, self.pair, counts)

        def teardown(self) -> None:
            """Finish every request and evict everything: every id must come back to the free list.

            Hypothesis also calls teardown for an example it abandons midway
            (one whose choices ran past its buffer raises out of a draw); such
            an example is no test case, so its steps are counted apart.  An
            example that ends normally is counted however few steps it ran:
            that is the shortfall the runners must see.
            """
            # teardown runs in Hypothesis's finally: a draw past the buffer is
            # StopTest; a failure of the cache is a test case that failed.
            abandoned = isinstance(sys.exc_info()[1], StopTest)
            calls_before = len(self.pair.steps)
            try:
                self.engine.drain()
            except AssertionError as failure:
                raise attach_trace(failure, self.pair, counts)
            finally:
                counts.calls += len(self.pair.steps) - calls_before
                if abandoned:
                    counts.abandoned_examples += 1
                else:
                    counts.engine_steps_per_example.append(self.steps)

    EngineMachine.__name__ = EngineMachine.__qualname__ = "EngineMachine"
    return EngineMachine
