"""One check run, assembled in one place: the stages, their settings, their counterexamples.

``prefixspec check``, ``conformance_suite`` and the project's own tests all run
a target through ``run_check`` or ``run_stage`` with a ``RunPlan``, so the
Hypothesis settings, the minimum engine steps, the shrink policy and the
deadlines are the same by construction.  The stages, in order:

- ``golden trace``: the committed golden workload, call by call beside the spec;
- ``call machine``: every call in any order, with bad arguments (``machines``);
- ``engine machine``: seeded bursts of an engine's block manager (``machines``).

Each stage runs until its first failure; the failing calls are cut by delta
debugging to the fewest that still disagree and written as a trace that
``prefixspec replay`` reproduces outside Hypothesis (``counterexamples``).
How a run goes, whatever its stages, is its ``RunPlan`` (``run_plan``, re-exported here).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import cast

from hypothesis import settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import FlakyFailure, HypothesisException
from hypothesis.reporting import with_reporter
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from spec.api import CacheFactory, TargetFailure
from prefixspec.formats.trace import Trace
from prefixspec.drive.coverage import Coverage, required_events
from prefixspec.drive.golden import golden_trace
from prefixspec.drive.long_node import LONG_NODE_CALLS, LONG_NODE_COUNT_READS, LongNodeDisagreement, check_long_node
from prefixspec.drive.machines import (
    CALLS_PER_EXAMPLE,
    ENGINE_STEPS_PER_EXAMPLE,
    RunTally,
    call_machine,
    call_machine_examples,
    engine_bursts,
    engine_machine,
)
from prefixspec.drive.growth import probe_growth
from prefixspec.running.counterexamples import counterexample_path, write_counterexample
from prefixspec.running.run_plan import REPORT_WITHIN as REPORT_WITHIN
from prefixspec.running.run_plan import RunPlan as RunPlan
from prefixspec.running.run_plan import rules_option as rules_option
from prefixspec.running.report import CheckReport, Progress, StageResult, flaky_failure, write_whole
from prefixspec.drive.scale import StageTooSlow, run_scale, too_slow
from prefixspec.compare.shrink import first_disagreement
from prefixspec.running.collector import collector_spared
from prefixspec.running.draw_pool import without_local_constants


def run_golden(target: CacheFactory, plan: RunPlan) -> StageResult:
    """The golden trace beside the spec."""
    started = time.perf_counter()
    trace = golden_trace()
    stage = StageResult("golden trace", True, 0.0, examples=1, calls=len(trace.steps))
    try:
        disagreement = first_disagreement(trace.block_size, trace.calls(), target, plan.rules)
        if disagreement is not None:
            stage.passed = False
            stage.seconds_to_failure = time.perf_counter() - started
            stage.calls = len(disagreement.trace.steps)
            stage.failure = str(disagreement)
            write_counterexample(stage, disagreement.trace, target, plan, "The golden trace, cut to the calls that disagree.", started)
    except TargetFailure as failure:
        return aborted_stage(stage, started, failure)
    stage.seconds = time.perf_counter() - started
    return stage


def run_call_machine(target: CacheFactory, plan: RunPlan) -> StageResult:
    """The call machine: CALLS_PER_EXAMPLE calls an example, twenty times the profile's examples."""
    tally = RunTally(progress=Progress(plan.progress, "call machine"))
    common = plan.machine_settings()
    chosen = settings(common, stateful_step_count=CALLS_PER_EXAMPLE, max_examples=call_machine_examples(common.max_examples))
    stage = run_machine("call machine", call_machine(target, tally, plan.rules), tally, chosen, target, plan)
    return require_coverage(stage, plan, tally.coverage.features)


def run_engine_machine(target: CacheFactory, plan: RunPlan) -> StageResult:
    """The engine machine: every example runs at least ``plan.min_engine_steps`` engine steps."""
    tally = RunTally(progress=Progress(plan.progress, "engine machine"))
    bursts = engine_bursts(plan.min_engine_steps)
    chosen = settings(plan.machine_settings(), stateful_step_count=bursts)
    # _min_steps (run_state_machine_as_test's own argument, used by HypoFuzz)
    # keeps Hypothesis from ending an example before its last burst: in the deep
    # profile about one example in 150 otherwise stopped after a few bursts.
    stage = run_machine("engine machine", engine_machine(target, tally, plan.rules), tally, chosen, target, plan, min_rules=bursts)
    if stage.passed and stage.steps_per_example and min(stage.steps_per_example) < plan.min_engine_steps:
        stage.passed = False
        stage.failure = f"an example ran only {min(stage.steps_per_example)} engine steps, short of {plan.min_engine_steps}"
    return require_coverage(stage, plan, tally.coverage.features)


def require_coverage(stage: StageResult, plan: RunPlan, features: frozenset[str] | None = None) -> StageResult:
    """A passing stage that never reached an event its profile must reach (under its rules) fails, naming the events.

    With ``features``, the target's optional ones: events only a cache with namespaces or events can reach are
    not required of one without."""
    missing = [name for name in required_events(stage.name, plan.rules, features) if not stage.events.get(name)]
    stage.missing_events = missing
    # A run shortened with --steps promises less than the profile: its engine examples are not held to it.
    shortened = stage.name == "engine machine" and plan.min_engine_steps < ENGINE_STEPS_PER_EXAMPLE
    if plan.require_coverage and stage.passed and missing and not shortened:
        stage.passed = False
        stage.failure = f"the run never reached {len(missing)} of the events the {plan.profile} profile must reach: {', '.join(missing)}"
    return stage


def run_extremes(target: CacheFactory, plan: RunPlan) -> StageResult:
    """The call machine with its extreme rules: paths hundreds of nodes deep, nodes hundreds wide and under hundreds of locks.

    As many examples as the profile's engine machine, of EXTREME_STEPS rules
    each: every such rule makes hundreds of calls, its snapshots compared once at its end.

    Before them, once, one node of 2^16+ blocks split past 2^16 (``long_node``): too big for a Hypothesis example
    (the spec holds it only at a coarser block size), so it runs as fixed calls, its place drawn from the seed.
    """
    started = time.perf_counter()
    try:
        reached = check_long_node(target, plan.rules, base=(plan.seed or 0) % 2**32, past=1 + (plan.seed or 0) % 2)
    except TargetFailure as failure:
        return aborted_stage(StageResult("extremes", False, 0.0), started, failure)
    except LongNodeDisagreement as disagreement:
        return long_node_failure(StageResult("extremes", False, 0.0, examples=1, calls=len(disagreement.calls)), started, disagreement)
    tally = RunTally(progress=Progress(plan.progress, "extremes"))
    tally.coverage.note_many(reached)
    tally.calls += LONG_NODE_CALLS
    common = plan.machine_settings()
    chosen = settings(common, stateful_step_count=EXTREME_STEPS, max_examples=common.max_examples)
    stage = run_machine("extremes", call_machine(target, tally, plan.rules, extremes=True), tally, chosen, target, plan)
    stage.seconds = time.perf_counter() - started
    return require_coverage(stage, plan, tally.coverage.features)


GROWTH_BUDGET = 20.0
"""Seconds the scale stage's probe of how the target's calls grow (``growth.probe_growth``) may take (about 1 s on impl)."""


def run_scale_stage(target: CacheFactory, plan: RunPlan) -> StageResult:
    """One cache of thousands of blocks past a 16-bit count of uses (``scale``), after a probe of how its calls grow."""
    started = time.perf_counter()
    cpu_started = time.process_time()
    coverage = Coverage()
    stage = StageResult("scale", True, 0.0, examples=1)
    try:
        # As the machines run: the heap of the stages before it frozen out of the collector.  After the call
        # machine, the engine machine and the extremes in one process, this stage made 6 passes of the oldest
        # generation over that heap, 1.26 s in all, the worst 0.68 s inside one call's time limit; none so.
        with collector_spared():
            growth = probe_growth(target, budget=min(GROWTH_BUDGET, plan.scale_budget))
            stage.notes = growth.lines()
            verdict = too_slow(growth, plan.scale_budget)
            if verdict:
                stage.passed = False
                stage.failure = verdict
                stage.seconds = stage.seconds_to_failure = time.perf_counter() - started
                return stage
            left = plan.scale_budget - (time.process_time() - cpu_started)
            run = run_scale(target, plan.rules, coverage, seed=plan.seed or 0, budget=left)
            stage.calls, stage.engine_steps = run.calls, run.engine_steps
            stage.digests = run.digests
            # Counts past 2^16 blocks (kept in 16 bits), which the run's 5,120-block pool cannot hold.
            check_long_node(target, plan.rules, base=(plan.seed or 0) % 2**32, past=1, read_counts=True)
            stage.calls += LONG_NODE_CALLS + LONG_NODE_COUNT_READS
    except TargetFailure as failure:
        return aborted_stage(stage, started, failure)
    except LongNodeDisagreement as disagreement:
        return long_node_failure(stage, started, disagreement)
    except StageTooSlow as failure:
        stage.passed = False
        stage.failure = f"too slow for the scale stage: {failure}, past its budget of {plan.scale_budget:,.0f} s. How each call grows:\n" + "\n".join(stage.notes)
        stage.seconds = stage.seconds_to_failure = time.perf_counter() - started
        return stage
    except AssertionError as failure:  # a Disagreement, or an engine violation, at the scale of thousands of blocks
        trace = getattr(failure, "prefixspec_trace", None)
        stage.passed = False
        stage.seconds_to_failure = time.perf_counter() - started
        stage.failure = f"{type(failure).__name__}: {failure}"
        if isinstance(trace, Trace):
            stage.calls = len(trace.steps)
            try:
                write_counterexample(stage, trace, target, plan, "A counterexample found by the scale stage.", started)
            except TargetFailure as error:
                return aborted_stage(stage, started, error)
    stage.events = dict(sorted(coverage.counts.items()))
    stage.seconds = time.perf_counter() - started
    return require_coverage(stage, plan)


STAGES: dict[str, Callable[[CacheFactory, RunPlan], StageResult]] = {
    "golden trace": run_golden,
    "call machine": run_call_machine,
    "engine machine": run_engine_machine,
    "extremes": run_extremes,
    "scale": run_scale_stage,
}
"""Every stage of a check, in the order it runs."""

REACH_STAGES = ("extremes", "scale")
"""Stages that take a cache to the extremes of size, depth, width and age.  They run only when the
stages before them passed: a cache that disagrees already has its counterexample, and these cost the
most (seconds of each check)."""


def runs_after(name: str, plan: RunPlan, earlier: list[StageResult]) -> bool:
    """Whether the stage ``name`` runs after the stages ``earlier`` of the same run: a reach stage only in a plan that
    reaches and only when every stage before it passed (``REACH_STAGES``), any other stage always."""
    return name not in REACH_STAGES or (plan.reach and all(stage.passed for stage in earlier))


EXTREME_STEPS = 10


def chosen_stages(plan: RunPlan) -> list[str]:
    """The stages ``plan`` runs, in the order of ``STAGES``: those ``plan.stages`` names, or every one.  The reach
    stages among them still wait for the chosen stages before them to pass."""
    return list(in_stage_order(plan.stages)) if plan.stages else list(STAGES)


def in_stage_order(names: Collection[str]) -> tuple[str, ...]:
    """The stages ``names`` names, each once, in the order of ``STAGES`` (a report's header says them so)."""
    return tuple(name for name in STAGES if name in names)


def opened_report(target_name: str, plan: RunPlan) -> CheckReport:
    """The report of a run of ``plan`` on ``target_name`` before any stage: what its header says of the run."""
    return CheckReport(target_name, plan.profile, plan.seed, replay_target=plan.replay_arguments, rules=plan.rules, chosen=in_stage_order(plan.stages))


def run_stage(name: str, target: CacheFactory, plan: RunPlan) -> StageResult:
    """One stage of a check, by name.

    A counterexample an earlier run left in ``plan.out_dir`` stays: that run's report names it, and its
    replay command must replay it (a new one is ``claimed_file``'s, beside it).
    """
    cpu_started = time.process_time()
    stage = STAGES[name](target, plan)
    stage.cpu_seconds = time.process_time() - cpu_started
    return stage


def clear_counterexamples(folder: Path) -> None:
    """Remove every stage's counterexample trace from ``folder``, then the folder if that leaves it empty."""
    for name in STAGES:
        counterexample_path(folder, name).unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        pass  # missing, or holding something else


def run_check(target: CacheFactory, *, target_name: str, plan: RunPlan) -> CheckReport:
    """Every stage (``chosen_stages``) in order in this process, each to its first failure; a target that fails as a
    program stops the run.

    ``stage_workers.run_check_in_workers`` runs them side by side in worker processes, to the same report."""
    started = time.perf_counter()
    report = opened_report(target_name, plan)
    for name in chosen_stages(plan):
        if not runs_after(name, plan, report.stages):
            continue
        if plan.announce is not None:
            plan.announce(name, None)
        stage = run_stage(name, target, plan)
        report.stages.append(stage)
        if plan.announce is not None:
            plan.announce(name, stage)
        if stage.aborted:
            break
    report.wall_seconds = time.perf_counter() - started
    return report


# The machinery of a stage -----------------------------------------------------------------


def aborted_stage(stage: StageResult, started: float, failure: TargetFailure) -> StageResult:
    """``stage`` stopped by a target that failed as a program: its report is the failure, with nothing to minimise."""
    stage.passed = False
    stage.aborted = True
    stage.failure = str(failure)
    stage.counterexample = ""
    stage.seconds = stage.seconds_to_failure = time.perf_counter() - started
    return stage


def long_node_failure(stage: StageResult, started: float, disagreement: LongNodeDisagreement) -> StageResult:
    """``stage`` failed at the node of 2^16+ blocks: its report is the disagreement, with the calls written out and
    no trace to replay (the spec cannot hold that node at block size 1)."""
    stage.passed = False
    stage.failure, stage.rule = str(disagreement), disagreement.rule
    stage.seconds = stage.seconds_to_failure = stage.seconds_to_report = time.perf_counter() - started
    return stage


def tally_stage(name: str, tally: RunTally, passed: bool = False) -> StageResult:
    """A stage with what ``tally`` counted so far (failed unless ``passed``); the replays of a failure apart."""
    examples = tally.examples if tally.first_failure_example is None else tally.first_failure_example
    return StageResult(
        name,
        passed,
        0.0,
        examples=examples,
        replayed_examples=tally.examples - examples,
        engine_steps=tally.engine_steps,
        calls=tally.calls,
        steps_per_example=list(tally.engine_steps_per_example),
        abandoned_examples=tally.abandoned_examples,
        events=dict(sorted(tally.coverage.counts.items())),
        digests=tally.digests,
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


def report_flaky(stage: StageResult, failure: FlakyFailure, plan: RunPlan) -> None:
    """A target that failed some calls and passed them when Hypothesis ran them again: the calls, unminimised
    (delta debugging replays them, and replays prove nothing of such a target), written as they ran."""
    inner = [error for error in failure.exceptions if isinstance(getattr(error, "prefixspec_trace", None), Trace)]
    first = inner[0] if inner else failure.exceptions[0] if failure.exceptions else failure
    texts: list[str] = []
    written = "no trace (the failure recorded no calls)"
    if inner:
        trace = cast(Trace, getattr(inner[0], "prefixspec_trace"))
        plan.out_dir.mkdir(parents=True, exist_ok=True)
        path = plan.out_dir / f"{stage.name.replace(' ', '_')}.flaky.trace"
        write_whole(path, trace.text())
        texts.append(trace.text())
        written = str(path)
        stage.counterexample = str(path)
        stage.counterexample_calls = len(trace.steps)
    stage.rule = "not reproducible: the same calls answered differently"
    stage.failure = flaky_failure(first, texts, written)


def run_machine(
    name: str,
    machine: type[RuleBasedStateMachine],
    tally: RunTally,
    machine_settings: settings,
    target: CacheFactory,
    plan: RunPlan,
    min_rules: int = 0,
) -> StageResult:
    """Run one machine to its first failure; the failure's calls minimised and written."""
    started = time.perf_counter()
    hypothesis_output: list[str] = []
    failure: BaseException | None = None
    if plan.seed is not None:
        machine = hypothesis_seed(plan.seed)(machine)

    def keep_output(message: object) -> None:
        hypothesis_output.append(str(message))

    with with_reporter(keep_output):
        try:
            with collector_spared(), without_local_constants():
                run_state_machine_as_test(machine, settings=machine_settings, _min_steps=min_rules)
        except (AssertionError, HypothesisException) as error:
            failure = error
            underneath = target_failure_in(error)
            if underneath is not None:  # Hypothesis may raise its own error while our TargetFailure unwinds
                return aborted_stage(tally_stage(name, tally), started, underneath)
        except TargetFailure as error:
            return aborted_stage(tally_stage(name, tally), started, error)
    stage = tally_stage(name, tally, passed=failure is None)
    if isinstance(failure, FlakyFailure):
        stage.seconds_to_failure = tally.first_failure_seconds or (time.perf_counter() - started)
        report_flaky(stage, failure, plan)
        stage.seconds = time.perf_counter() - started
        return stage
    if failure is not None:
        stage.seconds_to_failure = tally.first_failure_seconds or (time.perf_counter() - started)
        stage.failure = f"{type(failure).__name__}: {failure}".strip()
        trace = getattr(failure, "prefixspec_trace", None)
        if isinstance(trace, Trace):
            try:
                write_counterexample(stage, trace, target, plan, f"A counterexample found by the {name}, then minimised.", started)
            except TargetFailure as error:
                return aborted_stage(stage, started, error)
        else:
            stage.failure += "\n" + "\n".join(hypothesis_output[-20:])
    stage.seconds = time.perf_counter() - started
    return stage
