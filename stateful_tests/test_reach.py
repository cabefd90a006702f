"""Reach: the ci run drives a cache to every extreme it must, reports what it reached, and fails when it did not."""

from __future__ import annotations

import time
from dataclasses import replace

from hypothesis import settings

import impl
from prefixspec.running.coverage import BOUNDARY_VALUES, REQUIRED, Coverage, tree_shape
from prefixspec.running.stages import STAGES, RunPlan, require_coverage, run_stage
from spec.api import NodeView, PrefixStats, Snapshot


def test_the_boundary_values_straddle_every_integer_width() -> None:
    for boundary in (2**7, 2**8, 2**15, 2**16, 2**31):
        assert {boundary - 1, boundary, boundary + 1} <= set(BOUNDARY_VALUES)
    assert 2**32 - 1 in BOUNDARY_VALUES and 2**32 not in BOUNDARY_VALUES


def test_every_stage_with_required_events_is_a_stage() -> None:
    assert set(REQUIRED) <= set(STAGES)


def test_the_ci_call_machine_reaches_every_event_it_must() -> None:
    stage = run_stage("call machine", impl.RadixCache, RunPlan.of_profile("ci"))
    assert stage.passed, stage.failure
    assert stage.missing_events == []
    assert all(stage.events[name] > 0 for name in REQUIRED["call machine"])


def test_the_extremes_stage_reaches_deep_wide_and_many_locks() -> None:
    stage = run_stage("extremes", impl.RadixCache, RunPlan.of_profile("ci"))
    assert stage.passed, stage.failure
    assert stage.missing_events == []


def test_the_scale_stage_passes_within_its_budget() -> None:
    started = time.process_time()  # CPU time of this process, where the stage runs: a loaded machine stretches only the wall clock
    stage = run_stage("scale", impl.RadixCache, RunPlan.of_profile("ci"))
    seconds = time.process_time() - started
    assert stage.passed, stage.failure
    assert stage.calls >= 20_000
    assert seconds <= 60, f"the scale stage took {seconds:.1f} s of CPU"
    assert stage.events["4096+ blocks cached"] and stage.events["65536+ calls on one cache"]


def test_a_run_that_misses_an_event_fails_naming_it() -> None:
    """The negative control: one example of the extremes stage cannot reach them all (it opens with one of its
    three extremes), and the ci check says which."""
    plan = replace(RunPlan.of_profile("ci"), base=settings(RunPlan.of_profile("ci").base, max_examples=1))
    stage = run_stage("extremes", impl.RadixCache, plan)
    assert not stage.passed
    assert "never reached" in stage.failure
    assert stage.missing_events and all(name in stage.failure for name in stage.missing_events)
    # Without the requirement (a caller's own few examples) the same run passes.
    assert run_stage("extremes", impl.RadixCache, replace(plan, require_coverage=False)).passed


def test_require_coverage_is_what_fails_a_stage() -> None:
    stage = run_stage("golden trace", impl.RadixCache, RunPlan.of_profile("ci"))
    stage.name = "extremes"
    stage.events = {}
    assert not require_coverage(stage, RunPlan.of_profile("ci")).passed


def test_tree_shape_reads_depth_width_and_locks() -> None:
    chain = tuple(NodeView(tuple(range(depth)), (depth,), 0) for depth in range(1, 6))
    fan = tuple(NodeView((9, child), (100 + child,), 3 if child == 0 else 0) for child in range(4))
    snapshot = Snapshot(1, chain + (NodeView((9,), (99,), 0),) + fan, PrefixStats(0, 0, 0, 0, 0))
    assert tree_shape(snapshot) == (5, 4, 3)


def test_coverage_notes_each_extreme_once_reached() -> None:
    coverage = Coverage()
    coverage.note_extremes("token", 2**32 - 1)
    coverage.note_block_size(17)
    assert {"token >= 2^16", "token >= 2^31", "token 2^32-1", "odd block size >= 3", "block size >= 16"} <= set(coverage.counts)
