"""``prefixspec check``: the golden trace and both state machines against one cache, as a report.

Each stage runs until its first failure; the failing calls are cut by delta
debugging to the fewest that still disagree and written as a trace that
``prefixspec replay`` reproduces outside Hypothesis.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from hypothesis import seed as hypothesis_seed
from hypothesis import Phase, settings
from hypothesis.errors import HypothesisException
from hypothesis.reporting import with_reporter
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from spec.api import TargetFailure
from spec.conformance import (
    CALLS_PER_EXAMPLE,
    RunTally,
    call_machine,
    call_machine_examples,
    engine_bursts,
    engine_machine,
)
from spec.golden import golden_trace
from spec.profiles import load_profile
from spec.shrink import CacheFactory, counterexample_trace, first_disagreement, minimise
from spec.trace import Trace


@dataclass
class StageResult:
    """One stage of a check: what ran, whether it held, and the counterexample if not."""

    name: str
    passed: bool
    seconds: float
    examples: int = 0
    engine_steps: int = 0
    calls: int = 0
    steps_per_example: list[int] = field(default_factory=list)
    abandoned_examples: int = 0
    failure: str = ""
    counterexample: str = ""
    counterexample_calls: int = 0
    seconds_to_failure: float = 0.0
    aborted: bool = False
    """The target failed as a program (``spec.api.TargetFailure``): ``failure`` is its report, the check stops."""

    @property
    def invariants_checked(self) -> int:
        return 2 * self.calls + 2 * self.engine_steps


@dataclass
class CheckReport:
    target: str
    profile: str
    seed: int | None
    stages: list[StageResult] = field(default_factory=list)
    replay_target: str = ""
    """How ``prefixspec replay`` names the target (default ``--target TARGET``)."""

    @property
    def passed(self) -> bool:
        return all(stage.passed for stage in self.stages)

    def summary(self) -> str:
        lines = [f"prefixspec check {self.target} (profile {self.profile}{'' if self.seed is None else f', seed {self.seed}'})"]
        for stage in self.stages:
            detail = f"{stage.examples} examples, {stage.calls:,} calls"
            if stage.engine_steps and stage.steps_per_example:
                per = stage.steps_per_example
                detail += (
                    f", {stage.engine_steps:,} engine steps (per example min {min(per):,}, median {statistics.median(per):,.0f}),"
                    f" {stage.engine_steps / max(stage.seconds, 1e-9):,.0f} steps/s"
                )
            if stage.abandoned_examples:
                detail += f", {stage.abandoned_examples} examples abandoned by Hypothesis midway (not counted)"
            verdict = "ok" if stage.passed else "FAILED"
            lines.append(f"  {stage.name:<15} {verdict:<7} {stage.seconds:6.1f} s  {detail}, {stage.invariants_checked:,} checks")
            if not stage.passed:
                lines.append("    " + stage.failure.replace("\n", "\n    "))
                if stage.counterexample:
                    lines.append(
                        f"    counterexample: {stage.counterexample} ({stage.counterexample_calls} calls); "
                        f"reproduce with: prefixspec replay {stage.counterexample} {self.replay_target or '--target ' + self.target}"
                    )
        total = sum(stage.seconds for stage in self.stages)
        lines.append(f"result: {'PASSED' if self.passed else 'FAILED'} in {total:.1f} s")
        return "\n".join(lines)

    def as_json(self) -> dict[str, object]:
        return {
            "target": self.target,
            "profile": self.profile,
            "seed": self.seed,
            "result": "passed" if self.passed else "failed",
            "stages": [
                {
                    "name": stage.name,
                    "passed": stage.passed,
                    "seconds": round(stage.seconds, 3),
                    "examples": stage.examples,
                    "calls": stage.calls,
                    "engine_steps": stage.engine_steps,
                    "engine_steps_per_example": stage.steps_per_example,
                    "abandoned_examples": stage.abandoned_examples,
                    "invariants_checked": stage.invariants_checked,
                    "failure": stage.failure,
                    "counterexample": stage.counterexample or None,
                    "counterexample_calls": stage.counterexample_calls,
                    "seconds_to_failure": round(stage.seconds_to_failure, 3),
                    "aborted": stage.aborted,
                }
                for stage in self.stages
            ],
        }


class Progress:
    """Progress lines on a stream, at most one every half second."""

    def __init__(self, stream: TextIO | None, stage: str) -> None:
        self.stream = stream
        self.stage = stage
        self.started = time.perf_counter()
        self.shown = 0.0

    def __call__(self, tally: RunTally) -> None:
        if self.stream is None:
            return
        now = time.perf_counter() - self.started
        if now - self.shown < 2.0:
            return
        self.shown = now
        text = f"  {self.stage}: example {tally.examples}, {tally.calls:,} calls"
        if tally.engine_steps:
            text += f", {tally.engine_steps:,} engine steps"
        self.stream.write(f"{text}, {now:.0f} s\n")
        self.stream.flush()


def write_counterexample(stage: StageResult, trace: Trace, target: CacheFactory, out_dir: Path, title: str) -> None:
    """Minimise the calls of a failing run and write them as a trace file; fills the stage's fields."""
    calls = trace.calls()
    if first_disagreement(trace.block_size, calls, target) is None:
        stage.failure += "\n(the calls alone do not reproduce it: the cache may depend on something besides its calls)"
        return
    kept, disagreement = minimise(trace.block_size, calls, target)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stage.name.replace(' ', '_')}.trace"
    path.write_text(counterexample_trace(trace.block_size, kept, disagreement, title).text(), encoding="utf-8")
    stage.counterexample = str(path)
    stage.counterexample_calls = len(kept)
    stage.failure += f"\nminimised to {len(kept)} calls; the last one: {kept[-1].text()}\n  spec:  {disagreement.expected}\n  cache: {disagreement.got}"


def aborted_stage(stage: StageResult, started: float, failure: TargetFailure) -> StageResult:
    """``stage`` stopped by a target that failed as a program: its report is the failure, with nothing to minimise."""
    stage.passed = False
    stage.aborted = True
    stage.failure = str(failure)
    stage.counterexample = ""
    stage.seconds = stage.seconds_to_failure = time.perf_counter() - started
    return stage


def tally_stage(name: str, tally: RunTally, passed: bool = False) -> StageResult:
    """A stage with what ``tally`` counted so far (failed unless ``passed``)."""
    return StageResult(
        name,
        passed,
        0.0,
        examples=tally.examples,
        engine_steps=tally.engine_steps,
        calls=tally.calls,
        steps_per_example=list(tally.engine_steps_per_example),
        abandoned_examples=tally.abandoned_examples,
    )


def target_failure_in(error: BaseException) -> TargetFailure | None:
    """The TargetFailure that ``error`` was raised while handling, if any."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, TargetFailure):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def run_golden(target: CacheFactory, out_dir: Path) -> StageResult:
    started = time.perf_counter()
    trace = golden_trace()
    stage = StageResult("golden trace", True, 0.0, examples=1, calls=len(trace.steps))
    try:
        disagreement = first_disagreement(trace.block_size, trace.calls(), target)
        if disagreement is not None:
            stage.passed = False
            stage.seconds_to_failure = time.perf_counter() - started
            stage.calls = len(disagreement.trace.steps)
            stage.failure = str(disagreement)
            write_counterexample(stage, disagreement.trace, target, out_dir, "The golden trace, cut to the calls that disagree.")
    except TargetFailure as failure:
        return aborted_stage(stage, started, failure)
    stage.seconds = time.perf_counter() - started
    return stage


def run_machine(
    name: str,
    machine: type[RuleBasedStateMachine],
    tally: RunTally,
    machine_settings: settings,
    target: CacheFactory,
    out_dir: Path,
    min_rules: int = 0,
) -> StageResult:
    started = time.perf_counter()
    hypothesis_output: list[str] = []
    failure: BaseException | None = None

    def keep_output(message: object) -> None:
        hypothesis_output.append(str(message))

    with with_reporter(keep_output):
        try:
            run_state_machine_as_test(machine, settings=machine_settings, _min_steps=min_rules)
        except (AssertionError, HypothesisException) as error:
            failure = error
            underneath = target_failure_in(error)
            if underneath is not None:  # Hypothesis may raise its own error while our TargetFailure unwinds
                return aborted_stage(tally_stage(name, tally), started, underneath)
        except TargetFailure as error:
            return aborted_stage(tally_stage(name, tally), started, error)
    stage = tally_stage(name, tally, passed=failure is None)
    if failure is not None:
        stage.seconds_to_failure = tally.first_failure_seconds or (time.perf_counter() - started)
        stage.failure = f"{type(failure).__name__}: {failure}".strip()
        trace = getattr(failure, "prefixspec_trace", None)
        if isinstance(trace, Trace):
            try:
                write_counterexample(stage, trace, target, out_dir, f"A counterexample found by the {name}, shrunk by Hypothesis, then minimised.")
            except TargetFailure as error:
                return aborted_stage(stage, started, error)
        else:
            stage.failure += "\n" + "\n".join(hypothesis_output[-20:])
    stage.seconds = time.perf_counter() - started
    return stage


def run_check(
    target: CacheFactory,
    *,
    target_name: str,
    profile: str,
    min_engine_steps: int = 3000,
    seed: int | None = None,
    out_dir: Path = Path("counterexamples"),
    progress: TextIO | None = None,
) -> CheckReport:
    """The golden trace, then the call machine, then the engine machine, each stopping at its first failure."""
    load_profile(profile)
    report = CheckReport(target_name, profile, seed)
    chosen = settings()
    common = settings(chosen, report_multiple_bugs=False, derandomize=chosen.derandomize and seed is None)

    golden = run_golden(target, out_dir)
    report.stages.append(golden)
    if golden.aborted:
        return report

    calls_tally = RunTally(progress=Progress(progress, "call machine"))
    machine = call_machine(target, calls_tally)
    if seed is not None:
        machine = hypothesis_seed(seed)(machine)
    calls_stage = run_machine(
        "call machine",
        machine,
        calls_tally,
        settings(common, stateful_step_count=CALLS_PER_EXAMPLE, max_examples=call_machine_examples(common.max_examples)),
        target,
        out_dir,
    )
    report.stages.append(calls_stage)
    if calls_stage.aborted:
        return report

    engine_tally = RunTally(progress=Progress(progress, "engine machine"))
    bursts = engine_bursts(min_engine_steps)
    engine = engine_machine(target, engine_tally)
    if seed is not None:
        engine = hypothesis_seed(seed)(engine)
    # No Hypothesis shrinking here: every shrink attempt replays thousands of
    # engine steps, and one failure of a planted bug (m02) took Hypothesis's
    # whole 300 s shrink budget.  Delta debugging over the recorded calls then
    # does the cutting, in seconds (measured with `prefixspec hunt`).
    engine_settings = settings(common, stateful_step_count=bursts, phases=[Phase.explicit, Phase.reuse, Phase.generate])
    # _min_steps (run_state_machine_as_test's own argument, used by HypoFuzz)
    # keeps Hypothesis from ending an example before its last burst: in the deep
    # profile about one example in 150 otherwise stopped after a few bursts.
    stage = run_machine("engine machine", engine, engine_tally, engine_settings, target, out_dir, min_rules=bursts)
    if stage.passed and stage.steps_per_example and min(stage.steps_per_example) < min_engine_steps:
        stage.passed = False
        stage.failure = f"an example ran only {min(stage.steps_per_example)} engine steps, short of {min_engine_steps}"
    report.stages.append(stage)
    return report
