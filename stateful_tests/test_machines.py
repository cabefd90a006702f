"""Both conformance machines against the implementation, in the selected Hypothesis profile."""

from __future__ import annotations

import statistics
import time

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

import impl
from prefixspec.running.machines import (
    CALLS_PER_EXAMPLE,
    ENGINE_STEPS_PER_EXAMPLE,
    RunTally,
    call_machine,
    call_machine_examples,
    engine_bursts,
    engine_machine,
)


def test_the_call_machine_finds_impl_in_agreement_with_the_spec() -> None:
    tally = RunTally()
    examples = call_machine_examples(settings().max_examples)
    run_state_machine_as_test(
        call_machine(impl.RadixCache, tally),
        settings=settings(settings(), stateful_step_count=CALLS_PER_EXAMPLE, max_examples=examples),
    )
    assert tally.examples >= examples
    assert tally.calls > 10 * tally.examples


def test_the_engine_machine_runs_3000_steps_per_example_in_agreement() -> None:
    tally = RunTally()
    started = time.perf_counter()
    bursts = engine_bursts(ENGINE_STEPS_PER_EXAMPLE)
    run_state_machine_as_test(
        engine_machine(impl.RadixCache, tally), settings=settings(settings(), stateful_step_count=bursts), _min_steps=bursts
    )
    seconds = time.perf_counter() - started
    per_example = tally.engine_steps_per_example
    print(
        f"\nengine machine: {len(per_example)} examples, steps per example min {min(per_example)} "
        f"median {statistics.median(per_example)} max {max(per_example)}, "
        f"{tally.engine_steps / seconds:.0f} steps/s, {tally.calls} calls, {tally.abandoned_examples} abandoned by Hypothesis"
    )
    assert len(per_example) >= settings().max_examples
    assert min(per_example) >= ENGINE_STEPS_PER_EXAMPLE, "an example ran fewer engine steps than promised"
