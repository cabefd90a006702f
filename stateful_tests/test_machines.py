"""Both conformance machines against the implementation, through the one assembly of a check run, in the selected profile."""

from __future__ import annotations

from hypothesis import settings

import impl
from prefixspec.drive.machines import CALLS_PER_EXAMPLE, ENGINE_STEPS_PER_EXAMPLE, call_machine_examples
from prefixspec.running.stages import RunPlan, run_stage


def test_the_call_machine_finds_impl_in_agreement_with_the_spec() -> None:
    stage = run_stage("call machine", impl.RadixCache, RunPlan(base=settings()))
    assert stage.passed, stage.failure
    assert stage.examples >= call_machine_examples(settings().max_examples)
    assert stage.calls > CALLS_PER_EXAMPLE // 6 * stage.examples


def test_the_engine_machine_runs_3000_steps_per_example_in_agreement() -> None:
    stage = run_stage("engine machine", impl.RadixCache, RunPlan(base=settings()))
    print(f"\nengine machine: {stage.examples} examples, steps per example {stage.steps_per_example}, {stage.engine_steps / stage.seconds:.0f} steps/s")
    assert stage.passed, stage.failure
    assert len(stage.steps_per_example) >= settings().max_examples
    assert min(stage.steps_per_example) >= ENGINE_STEPS_PER_EXAMPLE, "an example ran fewer engine steps than promised"
