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
``prefixspec replay`` reproduces outside Hypothesis.
"""

from __future__ import annotations

import itertools
import shlex
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO, cast

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import FlakyFailure, HypothesisException
from hypothesis.reporting import with_reporter
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from spec.api import CacheFactory, Rules, TargetFailure
from prefixspec.formats.trace import Trace
from prefixspec.drive.coverage import Coverage, required_events
from prefixspec.drive.golden import golden_trace
from prefixspec.drive.long_node import LONG_NODE_CALLS, LongNodeDisagreement, check_long_node
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
from prefixspec.running.profiles import PROFILES, profile_settings
from prefixspec.running.report import CheckReport, Progress, StageResult, cut_long_comments, flaky_failure, write_whole
from prefixspec.drive.scale import SCALE_BUDGET, StageTooSlow, run_scale, too_slow
from prefixspec.compare.shrink import DoesNotReproduce, counterexample_trace, first_disagreement, minimise


REPORT_WITHIN = 50.0
"""Seconds from a stage's start within which its minimised counterexample is written (a minute, with room to spare)."""


def rules_option(rules: Rules) -> str:
    """`` --rules NAME`` that names ``rules`` on a command line, or nothing for strict (every command's default)."""
    return "" if rules == Rules() else f" --rules {shlex.quote(rules.name)}"


@dataclass(frozen=True)
class RunPlan:
    """How a check runs, whatever its target: settings, steps, seed, where counterexamples go, how to reproduce them."""

    base: settings
    """Hypothesis settings (a profile's, or the caller's) that every machine stage starts from."""
    profile: str = "custom"
    min_engine_steps: int = ENGINE_STEPS_PER_EXAMPLE
    seed: int | None = None
    out_dir: Path = Path("counterexamples")
    progress: TextIO | None = None
    replay_target: str = "--target MODULE:FACTORY"
    """How ``prefixspec replay FILE`` names this target (``--target X`` or ``--exec CMD``); ``replay_arguments`` adds the rules."""
    rules: Rules = Rules()
    """The rule set the spec follows in every stage (``spec.api.Rules``)."""
    report_within: float = REPORT_WITHIN
    """Seconds from a stage's start by which delta debugging stops improving its counterexample."""
    reach: bool = True
    """Run the reach stages (``REACH_STAGES``) after the others passed."""
    require_coverage: bool = False
    """Fail a stage that never reached an event of ``coverage.REQUIRED`` (the named profiles do; a caller's few examples need not)."""
    scale_budget: float = SCALE_BUDGET
    """CPU seconds the scale stage may take (``scale.SCALE_BUDGET``); a cache whose calls would take it past them is
    stopped with how its calls grow."""
    announce: Callable[[str, StageResult | None], None] | None = None
    """Told each stage's name as it starts (with None) and its result as it ends: a supervised run's parent learns what finished."""
    jobs: int = 1
    """Stages run at once, each in a supervised worker process (``stage_workers``); 1: one after another in this process."""
    call_timeout: float | None = None
    """Seconds a call may take (``--timeout``): a worker whose call runs on past it (and ``supervised.GRACE``) is killed."""
    fresh_target: Callable[[], AbstractContextManager[CacheFactory]] | None = None
    """With ``jobs`` above 1, how a worker gets a target of its own (an engine, ``--exec``, that a fork cannot share);
    None: the target, as the fork inherits it."""

    @classmethod
    def of_profile(cls, profile: str | None = None) -> RunPlan:
        """The plan of a profile (``ci``, ``deep``, ``dev``; None: ``HYPOTHESIS_PROFILE``, else ``ci``), loaded into nothing.

        ``dataclasses.replace`` changes the rest.  A name outside ``PROFILES``
        is a profile the caller registered with Hypothesis, held to no coverage.
        """
        name, chosen = profile_settings(profile)
        return cls(base=chosen, profile=name, require_coverage=name in PROFILES and name != "dev")

    @property
    def replay_arguments(self) -> str:
        """What follows ``prefixspec replay FILE`` to reproduce a counterexample: the target, then the rules if not strict.

        The one place a run's replay command is written; every report and trace header reads it."""
        return self.replay_target + rules_option(self.rules)

    def machine_settings(self) -> settings:
        """The settings common to both machines: the deadline off, too_slow suppressed, one bug reported, no shrink phase.

        Hypothesis's shrinker replays whole examples, hundreds to thousands of
        them: on the planted bug s02 it ran 1,662 call-machine examples (48 s)
        for a counterexample that delta debugging over the recorded calls cuts
        to the same 2 calls in well under a second.  So no stage shrinks with
        Hypothesis; every stage's failing calls are cut by ``minimise``.
        """
        suppressed = list(self.base.suppress_health_check)
        if HealthCheck.too_slow not in suppressed:
            suppressed.append(HealthCheck.too_slow)  # one engine example runs thousands of steps by design
        return settings(
            self.base,
            deadline=None,
            suppress_health_check=suppressed,
            report_multiple_bugs=False,
            derandomize=self.base.derandomize and self.seed is None,
            phases=[phase for phase in self.base.phases if phase is not Phase.shrink],
        )


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
        stage = StageResult("extremes", False, 0.0, examples=1, calls=len(disagreement.calls))
        stage.failure = str(disagreement)
        stage.rule = disagreement.rule
        stage.seconds = stage.seconds_to_failure = stage.seconds_to_report = time.perf_counter() - started
        return stage
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
    except TargetFailure as failure:
        return aborted_stage(stage, started, failure)
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

EXTREME_STEPS = 10


def run_stage(name: str, target: CacheFactory, plan: RunPlan) -> StageResult:
    """One stage of a check, by name.

    A counterexample an earlier run left in ``plan.out_dir`` stays: that run's report names it, and its
    replay command must replay it (a new one is ``claimed_file``'s, beside it).
    """
    return STAGES[name](target, plan)


def counterexample_path(folder: Path, stage: str) -> Path:
    """Where a stage's counterexample trace is written."""
    return folder / f"{stage.replace(' ', '_')}.trace"


def clear_counterexamples(folder: Path) -> None:
    """Remove every stage's counterexample trace from ``folder``, then the folder if that leaves it empty."""
    for name in STAGES:
        counterexample_path(folder, name).unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError:
        pass  # missing, or holding something else


def run_check(target: CacheFactory, *, target_name: str, plan: RunPlan) -> CheckReport:
    """Every stage in order in this process, each to its first failure; a target that fails as a program stops the run.

    ``stage_workers.run_check_in_workers`` runs them side by side in worker processes, to the same report."""
    report = CheckReport(target_name, plan.profile, plan.seed, replay_target=plan.replay_arguments, rules=plan.rules)
    for name in STAGES:
        if name in REACH_STAGES and not (plan.reach and report.passed):
            continue
        if plan.announce is not None:
            plan.announce(name, None)
        stage = run_stage(name, target, plan)
        report.stages.append(stage)
        if plan.announce is not None:
            plan.announce(name, stage)
        if stage.aborted:
            break
    return report


# The machinery of a stage -----------------------------------------------------------------


def write_counterexample(stage: StageResult, trace: Trace, target: CacheFactory, plan: RunPlan, title: str, started: float) -> None:
    """Minimise the calls of a failing run and write them as a trace file; fills the stage's fields.

    The stage's failure then describes the minimised trace's last call (the
    one a reader replays), with the rule it breaks; where the run first saw
    the failure follows in a note.
    """
    calls = trace.calls()
    # Delta debugging stops improving so that the report is written within a
    # minute of the stage's start (issue 12), whatever the trace's length.
    budget = max(2.0, plan.report_within - (time.perf_counter() - started))
    try:  # its first replay of the calls is the check that they reproduce the failure (a scale run: 100,000 calls)
        kept, disagreement = minimise(trace.block_size, calls, target, plan.rules, time_budget=budget)
    except DoesNotReproduce:
        stage.failure += "\n(the calls alone do not reproduce it: the cache may depend on something besides its calls)"
        return
    first_seen = stage.failure.splitlines()[0] if stage.failure else ""
    stage.rule = disagreement.rule
    stage.failure = f"{disagreement.describe()}\n(minimised to {len(kept)} of {len(calls)} calls; the run first saw it as: {first_seen})"
    stage.counterexample_calls = len(kept)
    path = Path()
    try:
        plan.out_dir.mkdir(parents=True, exist_ok=True)
        path, claimed = claimed_file(plan.out_dir, stage.name)
        claimed.close()
        reproduce = f"prefixspec replay {shlex.quote(str(path))} {plan.replay_arguments}"
        write_whole(path, cut_long_comments(counterexample_trace(trace.block_size, kept, disagreement, title, reproduce).text()))
    except OSError as error:  # a full disk mid-run: the verdict stands, no half-written trace is left
        if path.name:
            path.unlink(missing_ok=True)
        stage.failure += f"\n(its counterexample could not be written in {plan.out_dir}: {error.strerror or error}; nothing of it was left there)"
    else:
        stage.counterexample = str(path)
    stage.seconds_to_report = time.perf_counter() - started


def claimed_file(folder: Path, stage: str) -> tuple[Path, TextIO]:
    """A new file for ``stage``'s counterexample in ``folder`` (``counterexample_path``; ``golden_trace-2.trace``,
    ... when taken), created for this run alone.

    Two checks writing into one folder never share a counterexample: each
    claims its file exclusively (``O_EXCL``), so one run's replay command never
    replays the other's trace.
    """
    for number in itertools.count(1):
        first = counterexample_path(folder, stage)
        path = first if number == 1 else first.with_name(f"{first.stem}-{number}.trace")
        try:
            return path, path.open("x", encoding="utf-8")
        except FileExistsError:
            continue
    raise AssertionError("unreachable")


def aborted_stage(stage: StageResult, started: float, failure: TargetFailure) -> StageResult:
    """``stage`` stopped by a target that failed as a program: its report is the failure, with nothing to minimise."""
    stage.passed = False
    stage.aborted = True
    stage.failure = str(failure)
    stage.counterexample = ""
    stage.seconds = stage.seconds_to_failure = time.perf_counter() - started
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
