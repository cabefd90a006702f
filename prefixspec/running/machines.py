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
from collections.abc import Callable, Iterator, Sequence
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
from prefixspec.running.coverage import BOUNDARY_VALUES, DEEP, MANY_LOCKS, MANY_TENANTS, WIDE, Coverage
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

EXTREMES = ("deep_path", "wide_node", "many_locks", "many_tenants")
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

HASH_MODULUS = 2**61 - 1
"""CPython hashes an int modulo this prime: ``n`` and ``n + HASH_MODULUS`` hash alike, and so do -1 and -2."""


def namespace_population(count: int, seed: int) -> list[Namespace]:
    """``count`` distinct namespaces (R12), mixed as ``seed`` says: ints, strs and tuples, neighbours whose texts
    coincide (``7``, ``"7"``, ``(7,)``, ``("7",)``; ``("t", "71")`` and ``("t7", "1")``) or whose hashes do
    (``7`` and ``7 + 2**61 - 1``; ``-1`` and ``-2``).

    Made from a seed rather than drawn one by one: Hypothesis spends its choice budget per drawn value, and a
    population of a thousand must cost two draws.  Any mapping of namespaces onto fewer slots or values than
    ``count`` (a table, a digest) gives two of them one place.
    """
    rng = random.Random(seed)
    found: list[Namespace] = []
    seen: set[tuple[str, Namespace]] = set()  # by type too: the population is distinct as values of their shape
    serial = 0
    while len(found) < count:
        serial += 1
        number = rng.choice((serial, rng.randrange(2**64), -serial))
        text = str(number)
        cut = rng.randrange(len(text) + 1)
        family: tuple[Namespace, ...] = (
            number,
            text,
            (number,),
            (text,),
            ("t", text),
            ("t" + text[:cut], text[cut:]),
            number + HASH_MODULUS,
            -1 - number if number > 0 else number - 1,
            "é" + text,
            "e" + text,
            (None, number),
            "",
            (),
        )
        for space in rng.sample(family, rng.randint(1, len(family))):
            key = (repr(type(space)), space)
            if key not in seen and len(found) < count:
                seen.add(key)
                found.append(space)
    return found


NAMESPACE_DRAW = st.one_of(st.none(), st.sampled_from([space for pair in NAMESPACE_PAIRS for space in pair]))
"""Half the calls in the default namespace, half in one of the namespaces that alias carelessly."""

TAKE_SCHEDULES = st.one_of(st.just(1), st.integers(2, 6), st.none())
"""When the lockstep takes the target's events (R13): after every insert and evict, after every k-th, or only at
the end of the example, as a router that polls now and then: a take then spans stores, removals and refusals."""

PASSED_BACK = st.one_of(
    st.sampled_from(["cached", "fresh"]),
    st.lists(st.sampled_from(["cached", "duplicate", "refused"]), min_size=2, max_size=5),
)
"""What an insert passes back at the positions it finds cached: all the cached ids (an engine that matched first),
all new ones (a racing engine), or a mix, cycled over the positions: the cached id, a different one (a duplicate)
or one cached at another position (refused), so that the cache's own id meets its own position after a differing one."""

MIXED_PASSED_BACK = st.one_of(
    st.sampled_from([["duplicate", "cached"], ["cached", "duplicate", "cached"], ["cached", "refused"], ["refused", "cached", "duplicate"]]),
    st.lists(st.sampled_from(["cached", "duplicate", "refused"]), min_size=2, max_size=5),
)
"""Mixes only: the named ones (the cache's own id after a differing one; first and last agreeing, the middle not)
and any other."""

TOKEN_ALPHABETS = (
    st.integers(0, 3),
    st.sampled_from(BOUNDARY_VALUES),
    st.integers(0, ID_LIMIT - 1),
)
"""A prompt's tokens come from one of these: four dense values (sharing, splits), the boundary values, anything."""


def note_passed_back(coverage: Coverage, along: Sequence[BlockId | None], blocks: Sequence[BlockId]) -> None:
    """The mixes of passed-back ids an insert drew over the positions it finds cached (R5)."""
    agrees = [block == cached for block, cached in zip(blocks, along) if cached is not None]
    if True in agrees and False in agrees:
        coverage.note("insert: cached and differing ids mixed")
        if any(agree and False in agrees[:position] for position, agree in enumerate(agrees)):
            coverage.note("insert: a cached id at its own position after a differing one")
        if len(agrees) >= 3 and agrees[0] and agrees[-1]:
            coverage.note("insert: first and last cached ids agree, one between differs")


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

        def start(self, block_size: int, id_base: int, take_every: int | None = 1) -> None:
            self.spec = SpecCache(block_size, rules)
            self.pair = Lockstep(self.spec, factory(block_size), observer=coverage.observe, target_factory=factory, take_every=take_every)
            self.features = features_of(self.pair.target)
            coverage.features = self.features
            self.next_block: BlockId = id_base
            coverage.start_example()

        def begin(self, block_size: int, id_base: int, take_every: int | None) -> object:
            """A fresh pair of caches of ``block_size`` and the example's first prompts: one block of 0s, two of 1s."""
            self.start(block_size, id_base, take_every)
            coverage.note_block_size(block_size)
            if id_base:  # an example whose ids start just below a boundary crosses it at once, whatever it draws next
                self.call(lambda: self.pair.insert((1,) * (2 * block_size), self.fresh_blocks(2)))
            return multiple((0,) * block_size, (1,) * (2 * block_size))

        if extremes:

            @initialize(
                block_size=EXTREME_BLOCK_SIZES, id_base=ID_BASES, take_every=TAKE_SCHEDULES, opening=st.sampled_from(EXTREMES), data=st.data(), target=prompts
            )
            def choose_block_size_and_open(self, block_size: int, id_base: int, take_every: int | None, opening: str, data: st.DataObject) -> object:
                """Start the example with one extreme rule, so that no example of the stage misses them all."""
                prompts = self.begin(block_size, id_base, take_every)
                if opening == "deep_path":
                    self.deep_path(DEEP, data.draw(st.sampled_from(TOKEN_ALPHABETS[:2]), label="alphabet"), data)
                elif opening == "wide_node":
                    self.wide_node(WIDE, data.draw(st.sampled_from(BOUNDARY_VALUES), label="base"))
                elif opening == "many_locks":
                    self.many_locks(2**7 + 1)  # past a count kept in a signed byte
                else:
                    count = data.draw(st.integers(MANY_TENANTS, 4 * MANY_TENANTS), label="tenants")
                    self.tenants((7,) * block_size, count, data.draw(st.integers(0, 2**32 - 1), label="population seed"), then_evict=True)
                return prompts

        else:

            @initialize(block_size=BLOCK_SIZES, id_base=ID_BASES, take_every=TAKE_SCHEDULES, target=prompts)
            def choose_block_size(self, block_size: int, id_base: int, take_every: int | None) -> object:
                return self.begin(block_size, id_base, take_every)

        def teardown(self) -> None:
            """The router's last poll: the events still pending are taken, and the mirror compared, at the example's end.

            Not after a failure or an abandoned example (Hypothesis calls teardown in its ``finally``): those are reported already.
            """
            if sys.exc_info()[1] is None:
                self.call(self.pair.take_pending)

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

        @rule(target=nodes, prompt=prompts, passed=PASSED_BACK, namespace=NAMESPACE_DRAW)
        def insert(self, prompt: tuple[int, ...], passed: str | list[str], namespace: Namespace) -> object:
            """Insert passing back, over the cached part, the cached ids, new ones, or a mix of cached, duplicate and refused ids."""
            space = self.offered(namespace)
            along = self.cached_blocks_along(prompt, space)
            blocks = self.passed_back(along, passed)
            note_passed_back(coverage, along, blocks)
            done = self.call(lambda: self.pair.insert(prompt, blocks, namespace=space))
            return self.node_pair(done.node) if isinstance(done, Inserted) else multiple()

        @rule(prompt=prompts, passed=MIXED_PASSED_BACK, namespace=NAMESPACE_DRAW)
        def insert_over_cached(self, prompt: tuple[int, ...], passed: list[str], namespace: Namespace) -> None:
            """The prompt cached whole (the cached ids passed back where cached), then inserted again with a mix of
            cached, duplicate and refused ids: every position of the second insert is a cached one."""
            space = self.offered(namespace)
            if len(prompt) // self.spec.block_size() < 2:
                return
            self.call(lambda: self.pair.insert(prompt, self.passed_back(self.cached_blocks_along(prompt, space), "cached"), namespace=space))
            along = self.cached_blocks_along(prompt, space)
            blocks = self.passed_back(along, passed)
            note_passed_back(coverage, along, blocks)
            self.call(lambda: self.pair.insert(prompt, blocks, namespace=space))

        def passed_back(self, along: list[BlockId | None], passed: str | list[str]) -> list[BlockId]:
            """The ids an insert passes for positions whose cached ids are ``along``: fresh where nothing is cached;
            where something is, by ``passed`` (cycled): the cached id, a fresh one (a duplicate to hand back) or an id
            cached at another position (which R5 refuses; a repeat of this call's first id when none is cached)."""
            new_ids = iter(self.fresh_blocks(len(along)))
            kinds = [passed] if isinstance(passed, str) else passed
            blocks: list[BlockId] = []
            cached_positions = 0
            for position, cached in enumerate(along):
                if cached is None:
                    blocks.append(next(new_ids))
                    continue
                kind = kinds[cached_positions % len(kinds)]
                cached_positions += 1
                elsewhere = [other for other in along if other is not None and other != cached]
                if kind == "cached":
                    blocks.append(cached)
                elif kind == "refused" and (elsewhere or blocks):
                    blocks.append(elsewhere[position % len(elsewhere)] if elsewhere else blocks[0])
                else:
                    blocks.append(next(new_ids))
            return blocks

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

        @rule(prompt=prompts, count=st.integers(2, 16), seed=st.integers(0, 2**32 - 1))
        def many_namespaces(self, prompt: tuple[int, ...], count: int, seed: int) -> None:
            """R12 among dozens of tenants at once: enough for a short digest of the namespace to collide."""
            self.tenants(prompt, count, seed)

        def tenants(self, prompt: tuple[int, ...], count: int, seed: int, *, then_evict: bool = False) -> None:
            """One prompt cached in each of ``count`` distinct live namespaces (``namespace_population``), then matched in
            the first and the last few: a cache that maps namespaces onto fewer slots or values shares it between two.
            ``then_evict``: then evict everything, one evict of hundreds of leaves, so that the rest of the example
            does not compare hundreds of nodes after every call."""
            if "namespaces" not in self.features:
                return
            size = self.spec.block_size()
            prompt = prompt if len(prompt) >= size else prompt + (0,) * size
            population = namespace_population(count, seed)
            with self.batched():
                for space in population:
                    self.call(lambda: self.pair.insert(prompt, self.fresh_blocks(len(prompt) // size), namespace=space))
                for space in population[:2] + population[-2:]:
                    self.call(lambda: self.pair.match_prefix(prompt + (0,), namespace=space))
            coverage.note_shape(self.pair.snapshot())
            if then_evict:
                self.call(lambda: self.pair.evict(10**9))

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
        @rule(times=st.integers(2**7 + 1, MANY_LOCKS + 60))
        def many_locks(self, times: int) -> None:
            """Over a hundred requests on one prefix, past 2^7 (a count in a signed byte): as many locks on one node,
            evictions under them, then the unlocks."""
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

        @initialize(
            block_size=st.integers(1, 4), prompt_seed=st.integers(0, 2**16), take_every=TAKE_SCHEDULES,
            tenants=st.one_of(st.integers(1, 8), st.integers(9, 300)), tenant_seed=st.integers(0, 2**32 - 1),
        )
        def start(self, block_size: int, prompt_seed: int, take_every: int | None, tenants: int, tenant_seed: int) -> None:
            self.pair = Lockstep(SpecCache(block_size, rules), factory(block_size), observer=counts.coverage.observe, take_every=take_every)
            counts.coverage.start_example()
            counts.coverage.features = features_of(self.pair.target)
            if "namespaces" in counts.coverage.features:
                # Half the requests in the default namespace, the rest from a population of tenants, the same system prompts in all.
                population = tuple(namespace_population(tenants, tenant_seed))
                spaces: tuple[Namespace, ...] = (None,) * len(population) + population
            else:
                spaces = (None,)
            workload = Workload(block_size=block_size, pool_size=pool_size, namespaces=spaces)
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
            in_flight = sys.exc_info()[1]
            abandoned = isinstance(in_flight, StopTest)
            calls_before = len(self.pair.steps)
            try:
                # Not after a failure: it may have stopped an engine step midway (a target that hung in the take
                # after an insert both caches made leaves the request's blocks cached and still its own), and a
                # drain of that ledger would report its own violation in place of the failure, which a replay
                # without the hang does not repeat (a FlakyFailure).  A StopTest comes from a draw, between steps.
                if in_flight is None or abandoned:
                    self.engine.drain()
                if in_flight is None:
                    self.pair.take_pending()  # the router's last poll
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
