"""The report gives each stage's rates: calls/s for every stage, steps/s for every stage that ran engine steps."""

from __future__ import annotations

from typing import cast

from prefixspec.running.report import CheckReport, StageResult


def stage_lines() -> dict[str, str]:
    report = CheckReport("impl:RadixCache", "ci", None)
    report.stages = [
        StageResult("golden trace", True, 0.5, examples=1, calls=100),
        StageResult("call machine", True, 2.0, examples=240, calls=14_000),
        StageResult("engine machine", True, 8.0, examples=12, engine_steps=40_000, calls=110_000, steps_per_example=[3_300] * 12),
        StageResult("scale", True, 4.0, examples=1, engine_steps=8_000, calls=70_000),
    ]
    lines = report.summary().splitlines()
    return {name: next(line for line in lines if line.strip().startswith(name)) for name in ("golden trace", "call machine", "engine machine", "scale")}


def test_every_stage_has_its_calls_per_second_and_the_engine_stages_their_steps_per_second() -> None:
    lines = stage_lines()
    assert "(200 calls/s)" in lines["golden trace"] and "(7,000 calls/s)" in lines["call machine"]
    assert "(13,750 calls/s)" in lines["engine machine"] and "5,000 steps/s" in lines["engine machine"]
    assert "(per example min 3,300, median 3,300)" in lines["engine machine"]
    # The scale stage runs engine steps on one cache: its rate is printed though it has no examples to spread them over.
    assert "(17,500 calls/s)" in lines["scale"] and "8,000 engine steps, 2,000 steps/s" in lines["scale"]
    assert "steps/s" not in lines["call machine"] and "steps/s" not in lines["golden trace"]


def test_a_stage_whose_cpu_time_was_measured_gives_its_rates_per_cpu_second_too() -> None:
    """On a loaded machine a stage's wall time stretches and its CPU time does not: each rate is given by both."""
    report = CheckReport("impl:RadixCache", "ci", None)
    report.stages = [
        StageResult("call machine", True, 4.0, examples=240, calls=14_000, cpu_seconds=2.0),
        StageResult("engine machine", True, 16.0, examples=12, engine_steps=40_000, calls=110_000, cpu_seconds=8.0),
        StageResult("golden trace", True, 0.5, examples=1, calls=100),
    ]
    lines = report.summary().splitlines()
    assert "(3,500 calls/s, 7,000 per CPU s)" in lines[1]
    assert "(6,875 calls/s, 13,750 per CPU s)" in lines[2] and "2,500 steps/s, 5,000 per CPU s" in lines[2]
    assert "(200 calls/s)" in lines[3] and "per CPU s" not in lines[3]  # not measured: no figure made up
    stages = cast(list[dict[str, object]], report.as_json()["stages"])
    assert [stage["cpu_seconds"] for stage in stages] == [2.0, 8.0, None]


def test_run_stage_measures_the_cpu_time_of_its_process() -> None:
    from prefixspec.running.profiles import load_profile
    from prefixspec.running.stages import RunPlan, run_stage
    import impl

    plan = RunPlan.of_profile(load_profile("ci"))
    stage = run_stage("golden trace", impl.RadixCache, plan)
    assert stage.cpu_seconds is not None and 0 < stage.cpu_seconds
    assert "per CPU s" in CheckReport("impl:RadixCache", "ci", None, stages=[stage]).summary()
