"""Reach: the ci run drives a cache to every extreme it must, reports what it reached, and fails when it did not."""

from __future__ import annotations

import random
import zlib
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import settings

import impl
from prefixspec.drive.coverage import (
    BOUNDARY_VALUES,
    COPY_KEPT,
    LONG_NODE,
    MANY_TENANTS,
    MIXED_BATCH,
    MOST_NAMESPACES,
    REQUIRED,
    STRADDLING_BATCH,
    Coverage,
    required_events,
    tree_shape,
)
from prefixspec.compare.lockstep import Disagreement, Lockstep
from prefixspec.drive.engine import Engine, Workload
from prefixspec.drive.long_node import check_long_node
from prefixspec.drive.scale import SCALE_WORKLOAD
from prefixspec.drive.machines import namespace_population, note_passed_back
from prefixspec.compare.shrink import first_disagreement
from prefixspec.running.stages import STAGES, RunPlan, require_coverage, run_stage
from spec.api import RULE_PRESETS, BlockRemoved, InvalidArgument, KVEvent, NodeView, PrefixStats, Rules, Snapshot
from spec.model import SpecCache, as_namespace
from stateful_tests.stage_runs import SHARED_RUNS, stage_on_impl


def test_the_boundary_values_straddle_every_integer_width() -> None:
    for boundary in (2**7, 2**8, 2**15, 2**16, 2**31):
        assert {boundary - 1, boundary, boundary + 1} <= set(BOUNDARY_VALUES)
    assert 2**32 - 1 in BOUNDARY_VALUES and 2**32 not in BOUNDARY_VALUES


def test_every_stage_with_required_events_is_a_stage() -> None:
    assert set(REQUIRED) <= set(STAGES)


@SHARED_RUNS
def test_the_ci_call_machine_reaches_every_event_it_must() -> None:
    stage = stage_on_impl("call machine", "ci")
    assert stage.passed, stage.failure
    assert stage.missing_events == []
    assert all(stage.events[name] > 0 for name in REQUIRED["call machine"])


@SHARED_RUNS
def test_the_extremes_stage_reaches_deep_wide_and_many_locks() -> None:
    stage = stage_on_impl("extremes", "ci")
    assert stage.passed, stage.failure
    assert stage.missing_events == []


@SHARED_RUNS
def test_the_scale_stage_passes_and_reaches_its_size_and_age() -> None:
    """No wall-clock promise: load stretches the stage, which took 5.5 to 8 s of CPU on impl alone this session."""
    stage = stage_on_impl("scale", "ci")
    assert stage.passed, stage.failure
    assert stage.calls >= 20_000
    assert stage.events["4096+ blocks cached"] and stage.events["65536+ calls on one cache"] and stage.events["65536+ lookups on one cache"]


class EvictsAsked(SpecCache):
    """The spec, noting what each evict asked for."""

    asked: list[int]

    def evict(self, n_blocks: int) -> list[int]:
        self.asked.append(n_blocks)
        return super().evict(n_blocks)


@pytest.mark.parametrize("most", [SCALE_WORKLOAD.most_pressure, Workload().most_pressure])
def test_a_step_of_pressure_asks_evict_for_at_most_the_workloads_most(most: int) -> None:
    """Each engine step of memory pressure makes one evict, of 0 to ``most_pressure`` blocks, each asked for: the scale
    stage's 3 (its cache fills the pool sooner), the engine's 8 (the negative control: a bound of 3 would not hold)."""
    cache = EvictsAsked(2)
    cache.asked = []
    engine = Engine(cache, Workload(pool_size=64, most_pressure=most), prompt_seed=5)
    rng = random.Random(5)
    asked: list[int] = []
    for _ in range(3000):
        before = len(cache.asked)
        if engine.step(rng) == "evict":
            assert len(cache.asked) == before + 1
            asked.append(cache.asked[-1])
    assert set(asked) == set(range(most + 1)), sorted(set(asked))


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


# Tenants by the hundreds, events taken as a router polls, a node of 2^16+ blocks, mixed passed-back ids (issue 21).


@pytest.mark.parametrize("count", [1, 2, 13, 257, 1024])
def test_a_namespace_population_is_that_many_distinct_namespaces_whose_texts_and_hashes_collide(count: int) -> None:
    population = namespace_population(count, seed=count)
    assert len(population) == count
    assert len({(type(space), space) for space in population}) == count
    assert all(as_namespace(space) == space and space is not None for space in population)
    assert namespace_population(count, seed=count) == population  # made from its seed alone
    if count >= 257:
        texts = Counter(str(space) for space in population)
        hashes = Counter(hash(space) for space in population)
        assert max(texts.values()) >= 2 and max(hashes.values()) >= 2
        assert {type(space) for space in population} == {int, str, tuple}


def test_any_mapping_onto_fewer_than_a_thousand_values_collides_within_the_population() -> None:
    """The extremes stage's populations reach hundreds: a digest of up to 10 bits gives two of them one value."""
    population = namespace_population(1000, seed=5)
    for bits in (8, 10):
        digests = [zlib.crc32(repr(space).encode()) % 2**bits for space in population]
        assert len(set(digests)) < len(digests)


class ReordersByKind(impl.RadixCache):
    """A publisher that sorts each batch: every BlockStored before every BlockRemoved."""

    def take_events(self) -> list[KVEvent]:
        return sorted(super().take_events(), key=lambda event: isinstance(event, BlockRemoved))


def evict_then_insert(pair: Lockstep) -> None:
    pair.insert([1, 2], [10])
    pair.evict(1)
    pair.insert([3, 4], [11])


def test_a_batch_reordered_by_kind_passes_when_events_are_taken_after_every_call_and_fails_across_calls() -> None:
    """The negative control of the take schedule: after every call a batch holds one kind, so the order never shows."""
    every_call = Lockstep(SpecCache(2), ReordersByKind(2))
    evict_then_insert(every_call)
    every_call.take_pending()
    polled = Lockstep(SpecCache(2), ReordersByKind(2), take_every=None)
    evict_then_insert(polled)
    with pytest.raises(Disagreement) as caught:
        polled.take_pending()
    assert caught.value.rule.startswith("R13") and caught.value.last_call == "take_events"


def test_the_lockstep_takes_events_every_kth_change_refusals_counted_and_compares_the_mirror_there() -> None:
    pair = Lockstep(SpecCache(1), impl.RadixCache(1), take_every=3)
    pair.insert([1, 2], [10, 11])
    with pytest.raises(InvalidArgument):
        pair.insert([5], [10])  # refused: counted as a change all the same
    assert [step.call.op for step in pair.steps] == ["insert", "insert"]
    pair.evict(1)
    assert [step.call.op for step in pair.steps][-1] == "take_events"
    assert dict(pair.mirror.contents()) == dict(pair.reference.cached_contents())
    pair.insert([3], [12])
    pair.take_pending()
    pair.take_pending()  # nothing pending: no take
    assert [step.call.op for step in pair.steps].count("take_events") == 2


def test_a_replay_takes_the_events_where_the_trace_took_them() -> None:
    """A counterexample taken across calls reproduces as it was found: the replay does not take after every call."""
    polled = Lockstep(SpecCache(2), impl.RadixCache(2), take_every=None)
    evict_then_insert(polled)
    polled.take_pending()
    calls = polled.trace().calls()
    assert [call.op for call in calls] == ["insert", "evict", "insert", "take_events"]
    found = first_disagreement(2, calls, ReordersByKind)
    assert found is not None and found.kind == "result" and found.last_call == "take_events"
    without_takes = [call for call in calls if call.op != "take_events"]
    assert first_disagreement(2, without_takes, ReordersByKind) is None  # taken after every call, it agrees


def test_coverage_counts_mixed_and_straddling_batches() -> None:
    coverage = Coverage()
    pair = Lockstep(SpecCache(1), impl.RadixCache(1), take_every=None, observer=coverage.observe)
    pair.insert([1, 2], [10, 11])
    with pytest.raises(InvalidArgument):
        pair.insert([3], [10])
    pair.evict(10**9)
    pair.take_pending()
    assert coverage.counts[MIXED_BATCH] == 1 and coverage.counts[STRADDLING_BATCH] == 1
    pair.insert([4], [12])
    pair.take_pending()
    assert coverage.counts[MIXED_BATCH] == 1 and coverage.counts[STRADDLING_BATCH] == 1  # one kind, no refusal


@pytest.mark.parametrize(("rules", "kept"), [(RULE_PRESETS["vllm"], 1), (Rules(), 0)])
def test_coverage_counts_a_copy_kept_only_where_an_insert_keeps_one(rules: Rules, kept: int) -> None:
    """R5 dup=keep: a second id for a cached position is a copy kept (and a block stored); the same ids again store
    nothing.  Under dup=refuse the second id is handed back, no copy."""
    coverage = Coverage()
    pair = Lockstep(SpecCache(1, rules), impl.RadixCache(1, rules), observer=coverage.observe)
    pair.insert([1, 2], [10, 11])
    pair.insert([1, 2], [10, 11])
    assert coverage.counts[COPY_KEPT] == 0
    pair.insert([1, 2], [10, 12])
    assert coverage.counts[COPY_KEPT] == kept
    assert coverage.counts["duplicates handed back"] == 1 - kept


@pytest.mark.parametrize(
    ("along", "blocks", "events"),
    [
        ([1, 2, 3], [1, 2, 3], set()),
        ([1, 2, 3], [7, 8, 9], set()),
        ([1, 2, 3], [1, 8, 3], {"insert: cached and differing ids mixed", "insert: a cached id at its own position after a differing one",
                                "insert: first and last cached ids agree, one between differs"}),
        ([1, 2, None], [9, 2, 5], {"insert: cached and differing ids mixed", "insert: a cached id at its own position after a differing one"}),
        ([1, 2], [1, 9], {"insert: cached and differing ids mixed"}),
    ],
)
def test_coverage_names_the_mixes_of_passed_back_ids(along: list[int | None], blocks: list[int], events: set[str]) -> None:
    coverage = Coverage()
    note_passed_back(coverage, along, blocks)
    assert set(coverage.counts) == events


def test_the_node_of_2_16_blocks_agrees_on_impl_and_reaches_both_splits_past_2_16() -> None:
    reached = check_long_node(impl.RadixCache, Rules(), base=2**16 - 3, past=1)
    assert set(reached) == {f"one node of {LONG_NODE}+ blocks", f"split by insert {LONG_NODE}+ blocks into a node", f"split by match {LONG_NODE}+ blocks into a node"}


@SHARED_RUNS
def test_the_extremes_stage_reaches_hundreds_of_live_namespaces() -> None:
    stage = stage_on_impl("extremes", "ci")
    assert stage.events[MOST_NAMESPACES] >= MANY_TENANTS


def test_events_of_a_feature_the_target_lacks_are_not_required_of_it() -> None:
    assert MIXED_BATCH in required_events("call machine", Rules(), None)
    assert MIXED_BATCH in required_events("call machine", Rules(), {"events"})
    plain = required_events("call machine", Rules(), frozenset())
    assert MIXED_BATCH not in plain and STRADDLING_BATCH not in plain and "split by match" in plain
    assert f"{MANY_TENANTS}+ live namespaces" not in required_events("extremes", Rules(), {"events"})
