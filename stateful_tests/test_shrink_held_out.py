"""Cuts are 1-minimal beyond the cases they were tuned on: no single call of a cut can be removed, nor any pair.

``verify --shrink`` on recordings of several wrong caches (each a real rule
variant of ``impl.variants`` checked under strict rules, and a lock that pins
nothing) of several lengths and block sizes; and the counterexamples the
golden trace and engine machine stages write (``test_shrink_minimal`` does the
call machine's).  Each call, and each pair, of the cut is dropped in turn and
the rest replayed: none may still diverge.  The recorded traces are compared
by ``Recording.still_diverges``, the divergence ``verify`` reports (the last
call's recorded result, its blocks where they were); the stages' by a plain
replay beside the spec.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

import impl
import impl.variants
from prefixspec.compare.shrink import first_disagreement, handles_resolve
from prefixspec.formats.trace import parse_trace, read_trace
from prefixspec.running.recorded import Recording, shrink
from prefixspec.running.stages import RunPlan, run_stage
from prefixspec.shipped import IMPL_CATALOGUE
from prefixspec.targets.mutants import load_mutant, read_catalogue
from prefixspec.vocabulary import TAKE_EVENTS
from stateful_tests.broken_caches import LockPinsNothing
from stateful_tests.test_verify import record_engine_run

WRONG: dict[str, Callable[[int], impl.RadixCache]] = {
    "lock pins nothing": LockPinsNothing,
    "evicts the newest": impl.variants.sglang_mru,
    "evicts the least used": impl.variants.sglang_lfu,
    "evicts first in last out": impl.variants.sglang_filo,
}


def removable(kept: list[int], diverges: Callable[[list[int]], bool]) -> list[tuple[int, ...]]:
    """Each single index and pair of ``kept`` (its last, the divergence itself, stays) whose removal still diverges."""
    return [
        dropped
        for size in (1, 2)
        for dropped in itertools.combinations(kept[:-1], size)
        if diverges([index for index in kept if index not in dropped])
    ]


@pytest.mark.parametrize("steps", [40, 400])
@pytest.mark.parametrize("block_size", [1, 2, 3])
@pytest.mark.parametrize("wrong", list(WRONG), ids=list(WRONG))
def test_verify_shrink_leaves_no_call_removable(wrong: str, block_size: int, steps: int) -> None:
    recording = Recording.of(parse_trace(record_engine_run(WRONG[wrong](block_size), steps)))
    if recording.first_divergence() is None:
        pytest.skip("this run of the wrong cache happened to agree")
    kept = shrink(recording)
    assert recording.still_diverges(kept) is not None
    assert not removable(kept, lambda cut: recording.still_diverges(cut) is not None), kept


def test_the_check_sees_a_cut_that_is_not_minimal() -> None:
    """The negative control: the whole recording up to its divergence has calls to remove."""
    recording = Recording.of(parse_trace(record_engine_run(impl.variants.sglang_mru(2), 40)))
    last = recording.first_divergence()
    assert last is not None
    assert removable(list(range(last + 1)), lambda cut: recording.still_diverges(cut) is not None)


CATALOGUE = read_catalogue(IMPL_CATALOGUE)


@pytest.mark.parametrize("stage_name", ["golden trace", "engine machine"])
@pytest.mark.parametrize("mutant_id", ["s02", "s07", "s10"])
def test_the_golden_and_engine_stages_counterexamples_are_1_minimal(stage_name: str, mutant_id: str, tmp_path: Path) -> None:
    target = load_mutant(CATALOGUE, CATALOGUE.mutant(mutant_id))
    stage = run_stage(stage_name, target, replace(RunPlan.of_profile("ci"), out_dir=tmp_path))
    if not stage.counterexample:
        pytest.skip(f"{stage_name} does not catch {mutant_id}: {stage.failure[:200]}")
    trace = read_trace(stage.counterexample)
    calls = [call for call in trace.calls() if call.op != TAKE_EVENTS.op]

    def diverges(kept: list[int]) -> bool:
        candidate = [calls[index] for index in kept]
        return bool(candidate) and handles_resolve(candidate) and first_disagreement(trace.block_size, candidate, target, trace.rules) is not None

    everything = list(range(len(calls)))
    assert diverges(everything)
    # Here the last call may go too: any disagreement of fewer calls is a shorter counterexample.
    assert not [d for size in (1, 2) for d in itertools.combinations(everything, size) if diverges([i for i in everything if i not in d])], stage.counterexample
