"""The engine machine: an engine's block manager (``drive.engine``) over a pool of block ids, on the spec and a cache.

Each rule runs a seeded burst of engine steps, because Hypothesis spends its
choice budget per drawn value: drawing only a seed and a length lets one
example run thousands of steps.
"""

from __future__ import annotations

import random
import sys

from hypothesis import strategies as st
from hypothesis.errors import StopTest
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from spec.api import CacheFactory, Namespace, Rules
from spec.model import SpecCache
from prefixspec.drive.draws import TAKE_SCHEDULES, namespace_population
from prefixspec.drive.engine import Engine, Workload
from prefixspec.compare.lockstep import Lockstep
from prefixspec.drive.tallies import BURST_STEPS, RunTally, attach_trace
from prefixspec.vocabulary import features_of

CHECK_EVERY = 16
"""Engine steps between two of the engine's own checks of conservation and lock safety (``Engine.check``) here.

Beside a cache under test those checks examine the spec alone: the lockstep hands the engine the spec's
results, so its ledger is built from them, and the snapshot it checks is the spec's; the cache is held to the
spec's result and digest at every call, so a cache that breaks a guarantee disagrees at that call, before any
check of the engine's could see it.  The spec keeps the guarantees at every step in the project's own tests
(``stateful_tests/test_spec_engine_guarantees.py``); here they are checked every sixteenth step, after every
burst and through the drain, which spares the stage about a tenth of its time (``bench.stage_throughput``)."""


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
            self.pair = Lockstep(SpecCache(block_size, rules), factory(block_size), observer=counts.coverage.observe, take_every=take_every, digests=counts.digests)
            counts.coverage.start_example()
            counts.coverage.features = features_of(self.pair.target)
            if "namespaces" in counts.coverage.features:
                # Half the requests in the default namespace, the rest from a population of tenants, the same system prompts in all.
                population = tuple(namespace_population(tenants, tenant_seed))
                spaces: tuple[Namespace, ...] = (None,) * len(population) + population
            else:
                spaces = (None,)
            workload = Workload(block_size=block_size, pool_size=pool_size, namespaces=spaces)
            self.engine = Engine(self.pair, workload, prompt_seed=prompt_seed, check_every=CHECK_EVERY)
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
