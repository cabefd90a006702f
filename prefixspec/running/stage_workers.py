"""A check's stages spread over worker processes (``check -j N``), its report the one a run in one process gives.

Every stage is a function of the target, the plan and the seed alone (each
runs its own Hypothesis machine from the seed, its own caches), so it runs
the same in a worker as after the stages before it in one process.  Each
stage runs in a supervised worker of its own (``parallel.run_pool``), forked
from the process that loaded the target; an engine (``--exec``) gets one
engine of its own per worker (``RunPlan.fresh_target``).  The reach stages
start beside the others rather than after them, and their results are kept
only when one process would have run them: the stages before all passed.
The report keeps the stages of a run in one process, in its order: up to
and including the first that aborted; so the verdict, the counterexamples and
every count are the same whatever N (the times apart).

A worker that ends without its result (its target's ``os._exit``, a signal,
a hang past ``--timeout``) is that stage aborted with the paragraph a run in
one process prints, naming the call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

from spec.api import CacheFactory, TargetFailure
from prefixspec.exit_status import ExitStatus
from prefixspec.running.parallel import run_pool
from prefixspec.running.report import CheckReport, StageResult
from prefixspec.running.stages import REACH_STAGES, RunPlan, aborted_stage, chosen_stages, opened_report, run_check, run_stage, runs_after
from prefixspec.targets.beacon import mark_stage
from prefixspec.targets.supervised import Ended, send
from prefixspec.vocabulary import counted

START_ORDER = ("golden trace", "engine machine", "call machine", "scale", "extremes")
"""The order the stages start in: the golden trace first (a tenth of a second: it is the first stage a stop prints),
then the longest first (on impl in ci: 63, 20, 49, 9 s), the reach stages last (dropped if a stage before fails)."""


def stage_work(name: str, target: CacheFactory, plan: RunPlan) -> Callable[[], int]:
    """What a worker runs: one stage, its result sent to the parent."""

    def work() -> int:
        import sys

        mark_stage(name)  # a worker that ends is reported as during this stage
        started = time.perf_counter()
        own = replace(plan, announce=None, jobs=1, progress=None if plan.progress is None else sys.stderr)
        try:
            with plan.fresh_target() if plan.fresh_target is not None else nullcontext(target) as worker_target:
                stage = run_stage(name, worker_target, own)
        except TargetFailure as failure:  # its own engine could not start
            stage = aborted_stage(StageResult(name, False, 0.0), started, failure)
        send("stage", stage)
        return ExitStatus.PASSED

    return work


def stage_of(name: str, ended: Ended, target_name: str) -> StageResult:
    """The stage a worker sent; an aborted one, its report naming the call, when the worker ended without it."""
    if ended.status is not None:
        for kind, value in ended.messages:
            if kind == "stage" and isinstance(value, StageResult):
                return value
    return StageResult(name, False, 0.0, failure=ended.paragraph(target_name, f"the {name} stage"), aborted=True)


def kept_stages(results: dict[str, StageResult], plan: RunPlan) -> tuple[list[StageResult], bool]:
    """The stages a run in one process reports, in its order, from ``results`` so far; and whether that list is complete
    (False while a stage it needs has no result yet)."""
    kept: list[StageResult] = []
    for name in chosen_stages(plan):
        if not runs_after(name, plan, kept):
            continue
        if name not in results:
            return kept, False
        kept.append(results[name])
        if results[name].aborted:
            break
    return kept, True


def run_check_in_workers(target: CacheFactory, *, target_name: str, plan: RunPlan) -> CheckReport:
    """``run_check`` with its stages in up to ``plan.jobs`` workers at once; the same report (see the module's docstring).
    With ``plan.jobs`` of 1, ``run_check`` itself, in this process."""
    if plan.jobs <= 1:
        return run_check(target, target_name=target_name, plan=plan)
    started = time.perf_counter()
    report = opened_report(target_name, plan)
    chosen = chosen_stages(plan)
    results: dict[str, StageResult] = {}
    announced: list[str] = []

    def ended(name: str, how: Ended) -> list[str]:
        stage = results[name] = stage_of(name, how, target_name)
        if plan.progress is not None:
            plan.progress.write(f"  {name}: {'ok' if stage.passed else 'FAILED'} in {stage.seconds:.1f} s ({counted(stage.examples, 'example')}, {counted(stage.calls, 'call')})\n")
            plan.progress.flush()
        if plan.announce is not None:  # the parent hears of each stage the report will hold, in the report's order
            for done in kept_stages(results, plan)[0]:
                if done.name not in announced:
                    announced.append(done.name)
                    plan.announce(done.name, None)
                    plan.announce(done.name, done)
        if stage.aborted:
            return chosen[chosen.index(name) + 1 :]
        return list(REACH_STAGES) if not stage.passed else []

    # Started before the stages ahead of them end: a failure among those cancels the reach stages (``ended``).
    names = [name for name in START_ORDER if name in chosen and runs_after(name, plan, [])]
    run_pool({name: stage_work(name, target, plan) for name in names}, plan.jobs, plan.call_timeout, ended)
    report.stages = kept_stages(results, plan)[0]
    for stage in results.values():  # a stage that ran but that one process would not have run leaves no file behind
        if all(stage is not kept for kept in report.stages) and stage.counterexample:
            Path(stage.counterexample).unlink(missing_ok=True)
    report.wall_seconds = time.perf_counter() - started
    return report
