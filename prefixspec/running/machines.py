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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import cast

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

from spec.api import ID_LIMIT, BlockId, CacheFactory, Inserted, Namespace, NodeId, PrefixCacheError, PrefixMatch, Rules, UnknownNode
from spec.model import SpecCache
from prefixspec.running.coverage import BOUNDARY_VALUES, DEEP, MANY_LOCKS, WIDE, Coverage
from prefixspec.running.engine import Engine, Workload
from prefixspec.running.lockstep import Lockstep
from prefixspec.formats.trace import FOREIGN
from prefixspec.vocabulary import BY_OP, QUERIES, Call, features_of

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
    """Seconds from the start of the run to the first failing example."""
    first_failure_example: int | None = None
    """The example that failed first: Hypothesis runs it once more to report it, a replay, not a test case."""
    coverage: Coverage = field(default_factory=Coverage)
    """The rule events and extremes the run reached."""

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


BLOCK_SIZES = st.one_of(st.integers(1, 4), st.sampled_from([5, 7, 16, 17, 32]))
"""Half the examples at 1-4 tokens a block (dense traffic finds the logic bugs), half at odd and engine sizes."""

EXTREME_BLOCK_SIZES = st.integers(1, 2)
"""The extremes stage's block sizes: a path DEEP nodes deep costs the spec depth squared times the block size
to build and walk, and a stage whose examples may all miss the deep path cannot be held to reaching it."""

ID_BASES = st.one_of(st.just(0), st.sampled_from([ID_LIMIT - 2, 2**31 - 2, 2**16 - 2, 2**15 - 2, 2**8 - 2, 2**7 - 2]))
"""Where an example's block ids start counting: 0, or just below a boundary, so that its ids cross it."""

EXTREMES = ("deep_path", "wide_node", "many_locks")
"""The extreme rules, one of which opens each example of the extremes stage."""

NAMESPACE_PAIRS: tuple[tuple[Namespace, Namespace], ...] = (
    (("a", "bc"), ("ab", "c")),
    (None, ""),
    (0, "0"),
    ("", ()),
    ((None,), None),
    ("a b;c", "a"),
    (1, (1,)),
    ("é", "e"),
)
"""Namespaces that coincide when concatenated, printed or written carelessly, but are different (R12)."""

ENGINE_TENANTS: tuple[Namespace, ...] = (None, None, ("a", "bc"), ("ab", "c"), 0, "0")
"""The engine machine's tenants, when the cache takes namespaces: half the requests in the default one,
the rest from tenants whose names alias when written carelessly, the same system prompts in all of them."""

NAMESPACE_DRAW = st.one_of(st.none(), st.sampled_from([space for pair in NAMESPACE_PAIRS for space in pair]))
"""Half the calls in the default namespace, half in one of the namespaces that alias carelessly."""

TOKEN_ALPHABETS = (
    st.integers(0, 3),
    st.sampled_from(BOUNDARY_VALUES),
    st.integers(0, ID_LIMIT - 1),
)
"""A prompt's tokens come from one of these: four dense values (sharing, splits), the boundary values, anything."""


def call_machine(
    factory: CacheFactory, tally: RunTally | None = None, rules: Rules = Rules(), *, extremes: bool = False
) -> type[RuleBasedStateMachine]:
    """The call machine for caches made by ``factory``, against the spec under ``rules``.

    With ``extremes`` it also builds paths hundreds of nodes deep, nodes with
    hundreds of children and nodes under hundreds of locks (the extremes
    stage): those rules cost hundreds of calls each, so the plain call
    machine, run twenty times as often, leaves them out.
    """
    counts = tally if tally is not None else RunTally()
    coverage = counts.coverage

    class CallMachine(RuleBasedStateMachine):
        """Every call of the interface, on the spec and the cache in lockstep, small and dense or at the extremes."""

        prompts = Bundle("prompts")
        nodes = Bundle("nodes")

        def __init__(self) -> None:
            super().__init__()
            self.start(1, 0)
            counts.examples += 1
            if counts.progress is not None:
                counts.progress(counts)

        def start(self, block_size: int, id_base: int) -> None:
            self.spec = SpecCache(block_size, rules)
            self.pair = Lockstep(self.spec, factory(block_size), observer=coverage.observe, target_factory=factory)
            self.features = features_of(self.pair.target)
            self.next_block: BlockId = id_base

        def begin(self, block_size: int, id_base: int) -> object:
            """A fresh pair of caches of ``block_size`` and the example's first prompts: one block of 0s, two of 1s."""
            self.start(block_size, id_base)
            coverage.note_block_size(block_size)
            if id_base:  # an example whose ids start just below a boundary crosses it at once, whatever it draws next
                self.call(lambda: self.pair.insert((1,) * (2 * block_size), self.fresh_blocks(2)))
            return multiple((0,) * block_size, (1,) * (2 * block_size))

        if extremes:

            @initialize(block_size=EXTREME_BLOCK_SIZES, id_base=ID_BASES, opening=st.sampled_from(EXTREMES), data=st.data(), target=prompts)
            def choose_block_size_and_open(self, block_size: int, id_base: int, opening: str, data: st.DataObject) -> object:
                """Start the example with one extreme rule, so that no example of the stage misses them all."""
                prompts = self.begin(block_size, id_base)
                if opening == "deep_path":
                    self.deep_path(DEEP, data.draw(st.sampled_from(TOKEN_ALPHABETS[:2]), label="alphabet"), data)
                elif opening == "wide_node":
                    self.wide_node(WIDE, data.draw(st.sampled_from(BOUNDARY_VALUES), label="base"))
                else:
                    self.many_locks(MANY_LOCKS)
                return prompts

        else:

            @initialize(block_size=BLOCK_SIZES, id_base=ID_BASES, target=prompts)
            def choose_block_size(self, block_size: int, id_base: int) -> object:
                return self.begin(block_size, id_base)

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
            """Ids never used in this example, counting up from its base and wrapping at 2**32 (R1)."""
            blocks = [(self.next_block + offset) % ID_LIMIT for offset in range(count)]
            self.next_block += count
            return blocks

        def cached_blocks_along(self, prompt: tuple[int, ...], namespace: Namespace = None) -> list[BlockId | None]:
            """The spec's block at each whole-block position of ``prompt`` in ``namespace``, None where uncached."""
            size = self.spec.block_size()
            return [self.spec.block_cached_at(prompt[: (index + 1) * size], namespace) for index in range(len(prompt) // size)]

        def offered(self, namespace: Namespace) -> Namespace:
            """``namespace`` when the target takes namespaces (R12), else the default one."""
            if namespace is None or "namespaces" not in self.features:
                return None
            return namespace

        @contextmanager
        def batched(self) -> Iterator[None]:
            """``Lockstep.batch``, its final snapshot comparison's failure carrying the trace."""
            try:
                with self.pair.batch():
                    yield
            except AssertionError as failure:
                raise attach_trace(failure, self.pair, counts)

        def fail_with_trace(self, message: str) -> None:
            raise attach_trace(AssertionError(message), self.pair, counts)

        # Prompts that share, extend and diverge ------------------------------------

        @rule(target=prompts, alphabet=st.sampled_from(TOKEN_ALPHABETS), data=st.data())
        def new_prompt(self, alphabet: st.SearchStrategy[int], data: st.DataObject) -> tuple[int, ...]:
            """A prompt of up to four blocks and a bit, its tokens from one alphabet."""
            size = self.spec.block_size()
            return tuple(data.draw(st.lists(alphabet, max_size=4 * size + 2), label="tokens"))

        @rule(target=prompts, base=prompts, alphabet=st.sampled_from(TOKEN_ALPHABETS), data=st.data())
        def extend_prompt(self, base: tuple[int, ...], alphabet: st.SearchStrategy[int], data: st.DataObject) -> tuple[int, ...]:
            """A prompt sharing ``base`` up to some point, then going its own way."""
            size = self.spec.block_size()
            cut = data.draw(st.integers(0, min(len(base), 2 * size)), label="cut")
            tail = data.draw(st.lists(alphabet, min_size=1, max_size=3 * size), label="tail")
            return base[: len(base) - cut] + tuple(tail)

        # The calls --------------------------------------------------------------------

        @rule(target=nodes, prompt=prompts, namespace=NAMESPACE_DRAW)
        def match(self, prompt: tuple[int, ...], namespace: Namespace) -> object:
            space = self.offered(namespace)
            found = self.call(lambda: self.pair.match_prefix(prompt, namespace=space))
            return self.node_pair(found.node) if isinstance(found, PrefixMatch) else multiple()

        @rule(target=nodes, prompt=prompts, fresh=st.booleans(), namespace=NAMESPACE_DRAW)
        def insert(self, prompt: tuple[int, ...], fresh: bool, namespace: Namespace) -> object:
            """Insert with the cached ids where cached (an engine that matched first) or all fresh (a racing one)."""
            space = self.offered(namespace)
            along = self.cached_blocks_along(prompt, space)
            new_ids = iter(self.fresh_blocks(len(along)))
            blocks = [next(new_ids) if fresh or cached is None else cached for cached in along]
            done = self.call(lambda: self.pair.insert(prompt, blocks, namespace=space))
            return self.node_pair(done.node) if isinstance(done, Inserted) else multiple()

        @rule(prompt=prompts, pair=st.sampled_from(NAMESPACE_PAIRS))
        def one_prompt_in_two_namespaces(self, prompt: tuple[int, ...], pair: tuple[Namespace, Namespace]) -> None:
            """R12: the same tokens cached in two namespaces that alias when written carelessly; each matches only its own."""
            if "namespaces" not in self.features:
                return
            first, second = pair
            self.call(lambda: self.pair.insert(prompt, self.fresh_blocks(len(self.cached_blocks_along(prompt, first))), namespace=first))
            self.call(lambda: self.pair.match_prefix(prompt, namespace=second))
            theirs = self.cached_blocks_along(prompt, first)
            if theirs and None not in theirs:  # one pool of ids (R5 across R12): the first namespace's ids are refused in the second
                self.call(lambda: self.pair.insert(prompt, cast(list[BlockId], theirs), namespace=second))
            self.call(lambda: self.pair.insert(prompt, self.fresh_blocks(len(self.cached_blocks_along(prompt, second))), namespace=second))
            self.call(lambda: self.pair.match_prefix(prompt + (0,), namespace=first))
            coverage.note("one prompt in two namespaces")

        @rule(prompt=prompts, mistake=st.sampled_from(["tail", "short", "repeat", "cached_elsewhere", "bad_id", "bad_token", "bad_match"]))
        def insert_wrong(self, prompt: tuple[int, ...], mistake: str) -> None:
            """A call that R1 or R5 refuses (both caches must refuse it and change nothing)."""
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
                blocks = self.fresh_blocks(len(tokens) // self.spec.block_size())
            elif mistake == "bad_match":
                self.call(lambda: self.pair.match_prefix(prompt + (ID_LIMIT,)))
                return
            self.call(lambda: self.pair.insert(tokens, blocks))

        @rule(node=nodes, times=st.integers(1, 2))
        def lock(self, node: NodePair, times: int) -> None:
            """One lock, or two: two requests on one prefix (R6's count), half the time, not only when a draw repeats a node."""
            for _ in range(times):
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

        @rule(prompt=prompts, cut=st.integers(1, 3))
        def branch_and_evict(self, prompt: tuple[int, ...], cut: int) -> None:
            """A prompt, one that leaves it after ``cut`` blocks (a split by insert), then evict(everything):
            both leaves go, and their parent becomes a leaf within that one evict."""
            size = self.spec.block_size()
            if len(prompt) < (cut + 1) * size:
                return
            other = prompt[: cut * size] + tuple((token + 1) % ID_LIMIT for token in prompt[cut * size : (cut + 1) * size])
            self.call(lambda: self.pair.insert(prompt, self.fresh_blocks(len(prompt) // size)))
            self.call(lambda: self.pair.insert(other, self.fresh_blocks(len(other) // size)))
            self.call(lambda: self.pair.evict(10**9))

        @precondition(lambda self: self.spec.cached_blocks() > 0)
        @rule()
        def evictable_is_what_evict_frees(self) -> None:
            """R9: evict(10**9) frees exactly evictable_blocks() blocks."""
            promised = self.call(self.pair.evictable_blocks)
            freed = self.call(lambda: self.pair.evict(10**9))
            if not isinstance(freed, list) or len(freed) != promised:
                self.fail_with_trace(f"evictable_blocks() was {promised} but evict freed {freed}")

        # The extremes ---------------------------------------------------------------------

        @precondition(lambda self: extremes)
        @rule(depth=st.integers(DEEP, DEEP + 8), alphabet=st.sampled_from(TOKEN_ALPHABETS[:2]), data=st.data())
        def deep_path(self, depth: int, alphabet: st.SearchStrategy[int], data: st.DataObject) -> None:
            """A path ``depth`` nodes deep (one block each), its deepest node locked, then evictions around it."""
            size = self.spec.block_size()
            prompt = tuple(data.draw(st.lists(alphabet, min_size=depth * size, max_size=depth * size), label="deep prompt"))
            deepest: NodeId | None = None
            with self.batched():
                if self.call(lambda: self.pair.insert(prompt, self.fresh_blocks(depth))) is None:
                    return
                for blocks in range(1, depth + 1):
                    found = self.call(lambda: self.pair.match_prefix(prompt[: blocks * size] + (0,)))
                    if isinstance(found, PrefixMatch):
                        deepest = found.node
            coverage.note_shape(self.pair.snapshot())
            if deepest is None:
                return
            self.call(lambda: self.pair.lock(deepest))
            self.call(self.pair.evictable_blocks)
            self.call(lambda: self.pair.evict(10**9))
            self.call(lambda: self.pair.unlock(deepest))
            self.call(lambda: self.pair.evict(depth // 2))

        @precondition(lambda self: extremes)
        @rule(width=st.integers(WIDE, WIDE + 8), base=st.sampled_from(BOUNDARY_VALUES))
        def wide_node(self, width: int, base: int) -> None:
            """One block shared by ``width`` prompts that each go their own way after it: a node with that many children."""
            size = self.spec.block_size()
            shared = (base,) * size
            with self.batched():
                for child in range(width):
                    tail = tuple((base + child + 1 + offset) % ID_LIMIT for offset in range(size))
                    self.call(lambda: self.pair.insert(shared + tail, self.fresh_blocks(2)))
            coverage.note_shape(self.pair.snapshot())
            self.call(lambda: self.pair.match_prefix(shared + shared + (0,)))
            self.call(lambda: self.pair.evict(width // 3))

        @precondition(lambda self: extremes)
        @rule(times=st.integers(MANY_LOCKS, MANY_LOCKS + 60))
        def many_locks(self, times: int) -> None:
            """Hundreds of requests on one prefix: as many locks on one node, evictions under them, then the unlocks."""
            size = self.spec.block_size()
            prompt = (ID_LIMIT - 1,) * (2 * size)
            done = self.call(lambda: self.pair.insert(prompt, [self.spec.block_cached_at(prompt[:size]) or self.fresh_blocks(1)[0], self.fresh_blocks(1)[0]]))
            if not isinstance(done, Inserted):
                return
            node = self.node_pair(done.node)
            with self.batched():
                for _ in range(times):
                    self.call(lambda: self.pair.lock(node.spec_node))
            coverage.note_shape(self.pair.snapshot())
            self.call(lambda: self.pair.evict(10**9))
            with self.batched():
                for _ in range(times + 1):
                    self.call(lambda: self.pair.unlock(node.spec_node))

        @rule(op=st.sampled_from(["lock", "unlock"]))
        def lock_foreign(self, op: str) -> None:
            """R6: a node of another cache is unknown here (the trace's handle ``foreign``), to both caches alike."""
            coverage.note(f"refused {op}: UnknownNode (foreign)")
            self.call(lambda: self.pair.perform(Call(op, (FOREIGN,))))

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
            self.pair = Lockstep(SpecCache(block_size, rules), factory(block_size), observer=counts.coverage.observe)
            tenants = ENGINE_TENANTS if "namespaces" in features_of(self.pair.target) else (None,)
            workload = Workload(block_size=block_size, pool_size=pool_size, namespaces=tenants)
            self.engine = Engine(self.pair, workload, prompt_seed=prompt_seed)
            counts.coverage.note_block_size(block_size)

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
