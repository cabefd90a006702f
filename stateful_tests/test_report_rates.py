"""The report gives each stage's rates: calls/s for every stage, steps/s for every stage that ran engine steps."""

from __future__ import annotations

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
