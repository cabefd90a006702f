"""The cycle collector during a stage (``running.collector``): the heap before it frozen out, the young generation larger.

The machine stages and the scale stage run so: a target's factory, called inside the stage, finds the heap
frozen and the young generation of ``YOUNG`` objects; after the stage both are as they were.  Measured after
the call machine, the engine machine and the extremes in one process, the scale stage made 6 passes of the
oldest generation over that heap (1.26 s, the worst 0.68 s), none so.  The control: the same factory called
outside a stage finds the interpreter's own threshold.
"""

from __future__ import annotations

import gc
from dataclasses import replace

from impl import RadixCache
from spec.api import PrefixCache, TargetFailure
from prefixspec.running.collector import YOUNG
from prefixspec.running.run_plan import RunPlan
from prefixspec.running.stages import run_scale_stage, run_stage


class Seen(TargetFailure):
    """Raised by ``CollectorSeen`` once it has seen enough: the stage stops there, as for a target that failed."""


class CollectorSeen:
    """A factory of impl's caches that notes, at every cache it makes, how many objects the collector has frozen
    out and its young threshold; past ``most`` caches it stops the stage."""

    def __init__(self, most: int = 10**9) -> None:
        self.seen: list[tuple[int, int]] = []
        self.most = most

    def __call__(self, block_size: int) -> PrefixCache:
        self.seen.append((gc.get_freeze_count(), gc.get_threshold()[0]))
        if len(self.seen) > self.most:
            raise Seen("seen")
        return RadixCache(block_size)


def test_the_scale_stage_runs_with_the_heap_before_it_frozen_out() -> None:
    before = (gc.get_freeze_count(), gc.get_threshold())
    factory = CollectorSeen()
    plan = replace(RunPlan.of_profile("ci"), scale_budget=0.05)  # the probe stops at once: a cache or two is made
    run_scale_stage(factory, plan)
    assert factory.seen and all(frozen > 0 and young == YOUNG for frozen, young in factory.seen), factory.seen
    assert (gc.get_freeze_count(), gc.get_threshold()) == before


def test_a_machine_stage_runs_so_too_and_a_factory_outside_a_stage_finds_the_collector_as_it_is() -> None:
    factory = CollectorSeen()
    run_stage("golden trace", factory, RunPlan.of_profile("dev"))  # no machine: the collector as it is (the control)
    outside = list(factory.seen)
    assert outside and all(young == gc.get_threshold()[0] != YOUNG for _, young in outside), outside
    inside = CollectorSeen(most=2)
    stopped = run_stage("engine machine", inside, RunPlan.of_profile("dev"))
    assert stopped.aborted and "seen" in (stopped.failure or "")
    assert inside.seen and all(frozen > 0 and young == YOUNG for frozen, young in inside.seen), inside.seen
