"""Both conformance machines against the implementation, through the one assembly of a check run, in the selected profile."""

from __future__ import annotations

from prefixspec.drive.machines import CALLS_PER_EXAMPLE, ENGINE_STEPS_PER_EXAMPLE, call_machine_examples
from prefixspec.running.stages import RunPlan
from stateful_tests.stage_runs import SHARED_RUNS, SUITE_PROFILE, stage_on_impl

pytestmark = SHARED_RUNS  # under ci, test_reach reads the same call-machine run


def test_the_call_machine_finds_impl_in_agreement_with_the_spec() -> None:
    stage = stage_on_impl("call machine", SUITE_PROFILE)
    assert stage.passed, stage.failure
    assert stage.examples >= call_machine_examples(RunPlan.of_profile(SUITE_PROFILE).base.max_examples)
    assert stage.calls > CALLS_PER_EXAMPLE // 6 * stage.examples


def test_the_engine_machine_runs_3000_steps_per_example_in_agreement() -> None:
    stage = stage_on_impl("engine machine", SUITE_PROFILE)
    print(f"\nengine machine: {stage.examples} examples, steps per example {stage.steps_per_example}, {stage.engine_steps / stage.seconds:.0f} steps/s")
    assert stage.passed, stage.failure
    assert len(stage.steps_per_example) >= RunPlan.of_profile(SUITE_PROFILE).base.max_examples
    assert min(stage.steps_per_example) >= ENGINE_STEPS_PER_EXAMPLE, "an example ran fewer engine steps than promised"
