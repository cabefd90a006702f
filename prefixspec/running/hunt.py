"""``prefixspec hunt``: plant each catalogued bug, and show what catches it and how briefly.

For every mutant of a catalogue (``prefixspec/targets/mutants.py``) the hunt runs the seed's
eight tests and ``prefixspec check``'s stages (every one, or those ``HuntPlan.stages`` names)
against a fresh copy of the package with the bug planted.  A
mutant is killed when anything fails.  The shortest minimised counterexample
is kept as ``DIR/ID.trace``, which ``prefixspec replay DIR/ID.trace --target
CATALOGUE#ID`` reproduces.
"""

from __future__ import annotations

import shlex
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from spec.api import Rules, TargetFailure
from prefixspec.drive.seed_tests import SEED_TESTS
from prefixspec.drive.tallies import ENGINE_STEPS_PER_EXAMPLE
from prefixspec.running.parallel import run_pool
from prefixspec.running.report import write_whole
from prefixspec.running.stages import RunPlan, run_check
from prefixspec.errors import TargetError
from prefixspec.exit_status import ExitStatus
from prefixspec.targets.beacon import mark_stage
from prefixspec.targets.guard import Guard
from prefixspec.targets.loading import check_factory, loading
from prefixspec.targets.mutants import Catalogue, CatalogueError, Mutant, load_mutant, mutant_rules, mutated_sources
from prefixspec.targets.pipe import DEFAULT_TIMEOUT
from prefixspec.targets.supervised import Ended, announce_stage, send
from prefixspec.vocabulary import counted


@dataclass(frozen=True)
class HuntPlan:
    """How each mutant of a hunt is checked: the same for every mutant, so said once."""

    profile: str = "ci"
    out_dir: Path = Path("hunt")
    """Where each mutant's shortest counterexample is kept, as ``ID.trace``."""
    rules: Rules = Rules()
    timeout: float | None = DEFAULT_TIMEOUT
    """Seconds a mutant may take to answer one call."""
    steps: int = ENGINE_STEPS_PER_EXAMPLE
    """The engine steps each engine example must reach, as ``check --steps``."""
    stages: tuple[str, ...] = ()
    """The stages of ``check`` to run on each mutant (``hunt --stage``); empty: every one."""


@dataclass
class HuntResult:
    """What happened to one mutant."""

    mutant: Mutant
    seed_killers: list[str] = field(default_factory=list)
    seed_tests_unknown: str = ""
    """Why no seed test's verdict is known, when none is: not run under rules other than strict (they state the
    strict rules), or lost with a process that ended before it sent them."""
    machine_killers: list[str] = field(default_factory=list)
    seconds_to_first_failure: float | None = None
    seconds_to_report: float | None = None
    """From the start of the stage that first failed to its minimised counterexample written."""
    seconds: float = 0.0
    counterexample: str = ""
    counterexample_calls: int = 0
    counterexample_cut_short: bool = False
    """Its minimising ended when its time budget ran out (``StageResult.counterexample_cut_short``)."""
    write_error: str = ""
    """Where its counterexample could not be written, and why (a full disk): the trace is left out, not half-written."""
    report: str = ""
    """Where the report of the first stage that killed it is kept, when no stage left a trace to replay (a failure at
    the node of 2^16+ blocks, which the spec holds only at a coarser block size, carries its calls in its words)."""

    @property
    def killed(self) -> bool:
        return bool(self.seed_killers or self.machine_killers)

    @property
    def missed_seed_tests(self) -> list[str]:
        """Seed tests the catalogue says must kill the mutant, but did not (none when they were not run)."""
        return [] if self.seed_tests_unknown else [name for name in self.mutant.killed_by if name not in self.seed_killers]


def hunt_mutant(catalogue: Catalogue, mutant: Mutant, plan: HuntPlan) -> HuntResult:
    """Plant ``mutant`` and run the seed tests, then the stages of ``check`` under ``plan.rules``, against it.

    The mutant is a target like any other: its import, its factory and every
    call under a ``Guard`` (``plan.timeout`` seconds a call), so an exit, its own
    KeyboardInterrupt or a hang is a report that kills it (``TargetFailure``),
    and one at import is a ``TargetError``.  The seed tests state the strict
    rules, so they run only under ``strict``.
    """
    strict = plan.rules == Rules()
    result = HuntResult(mutant, seed_tests_unknown="" if strict else "not run (they state the strict rules)")
    started = time.perf_counter()
    name = f"{catalogue.path}#{mutant.id}"
    guard = Guard(name, plan.timeout)
    planted = loading(guard, f"cannot load {name!r}: it", load_mutant, catalogue, mutant, mutant_rules(plan.rules), limit=False, doing=f"the import of {name!r}")
    factory = check_factory(name, planted, guard)
    mark_stage("the seed tests")

    for name, seed_test in SEED_TESTS.items() if strict else ():
        try:
            seed_test(factory)
        except (Exception, TargetFailure):  # any failure of a seed test kills the mutant, whatever its type: an exit or a hang too
            result.seed_killers.append(name)
            if result.seconds_to_first_failure is None:
                result.seconds_to_first_failure = time.perf_counter() - started

    with tempfile.TemporaryDirectory(prefix=f"hunt-{mutant.id}-") as scratch:
        stages_start = time.perf_counter() - started
        target = f"{catalogue.path}#{mutant.id}"
        check = replace(
            RunPlan.of_profile(plan.profile),
            min_engine_steps=plan.steps,
            out_dir=Path(scratch),
            replay_target=f"--target {target}",
            rules=plan.rules,
            announce=announce_stage,
            stages=plan.stages,
        )
        report = run_check(factory, target_name=target, plan=check)
        shortest = None
        for index, stage in enumerate(report.stages):
            if stage.passed:
                continue
            result.machine_killers.append(stage.name)
            if result.seconds_to_report is None:
                result.seconds_to_report = stage.seconds_to_report or stage.seconds
            if result.seconds_to_first_failure is None:
                earlier = sum(done.seconds for done in report.stages[:index])
                result.seconds_to_first_failure = stages_start + earlier + stage.seconds_to_failure
            if stage.counterexample and (shortest is None or stage.counterexample_calls < shortest.counterexample_calls):
                shortest = stage
        failed = [stage for stage in report.stages if not stage.passed and stage.failure]
        if shortest is None and failed:
            result.report = keep(result, plan.out_dir / f"{mutant.id}.report", f"{failed[0].name}: {failed[0].failure}\n")
        if shortest is not None:
            kept = plan.out_dir / f"{mutant.id}.trace"
            # Its own lines name where it was written, a scratch folder gone with the hunt: they name its copy instead.
            text = Path(shortest.counterexample).read_text(encoding="utf-8")
            result.counterexample = keep(result, kept, text.replace(shlex.quote(shortest.counterexample), shlex.quote(str(kept))))
            result.counterexample_calls = shortest.counterexample_calls
            result.counterexample_cut_short = shortest.counterexample_cut_short
    result.seconds = time.perf_counter() - started
    return result


def keep(result: HuntResult, path: Path, text: str) -> str:
    """``text`` written whole as ``path`` (its folder made), and the path; "" and the reason in ``result.write_error``
    when it cannot be (a full disk): the mutant's verdict stands, the file is not half-written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, text)
    except OSError as error:
        result.write_error = f"{path}: {error.strerror or error}"
        return ""
    return str(path)


def chosen_mutants(catalogue: Catalogue, only: str | Sequence[str] | None) -> list[Mutant]:
    """The mutants ``only`` names (each ID once, a CatalogueError for one the catalogue lacks), in catalogue order;
    None: every one."""
    if only is None:
        return list(catalogue.mutants)
    named = {catalogue.mutant(mutant_id).id for mutant_id in ([only] if isinstance(only, str) else only)}
    return [mutant for mutant in catalogue.mutants if mutant.id in named]


def hunt(
    catalogue: Catalogue,
    *,
    only: str | Sequence[str] | None = None,
    profile: str = "ci",
    out_dir: Path = Path("hunt"),
    progress: TextIO | None = None,
    rules: Rules = Rules(),
    timeout: float | None = DEFAULT_TIMEOUT,
    supervised: bool = True,
    jobs: int = 1,
    steps: int = ENGINE_STEPS_PER_EXAMPLE,
    stages: tuple[str, ...] = (),
) -> list[HuntResult]:
    """Every mutant of ``catalogue`` (or those ``only`` names: an ID, or several), in catalogue order, each in a supervised child.

    Up to ``jobs`` children run at once (``parallel.run_pool``); the results
    are in catalogue order whatever finishes first, each mutant's the same as
    alone.  A mutant that ends its child's process (``os._exit``, a signal, a
    hang past its alarm) is killed, the way it ended named as what killed it;
    one that cannot be loaded is a ``CatalogueError``, as an edit that does not
    apply (the first in catalogue order; the mutants after it are not run).
    On a KeyboardInterrupt (Ctrl-C, SIGTERM) every child is stopped and the
    exception goes on with the mutants that finished, in order, as its ``prefixspec_hunted``.
    """
    plan = HuntPlan(profile=profile, out_dir=out_dir, rules=rules, timeout=timeout, steps=steps, stages=stages)
    chosen = chosen_mutants(catalogue, only)
    for mutant in chosen:
        mutated_sources(catalogue, mutant, "_prefixspec_check")  # every edit checked before any mutant runs
    if not supervised:
        return [_hunt_one(catalogue, mutant, plan, progress) for mutant in chosen]
    results: dict[int, HuntResult] = {}
    errors: dict[int, CatalogueError] = {}

    def starting(index: int) -> None:
        say(progress, f"  hunting {chosen[index].id}: {chosen[index].bug} ...")

    def ended(index: int, how: Ended) -> list[int]:
        try:
            result = results[index] = _hunted(catalogue, chosen[index], how)
        except CatalogueError as error:
            errors[index] = error
            return list(range(index + 1, len(chosen)))
        say(progress, f"  {result.mutant.id}: {verdict(result)} in {result.seconds:.1f} s")
        return []

    works = {index: _hunt_work(catalogue, mutant, plan) for index, mutant in enumerate(chosen)}
    try:
        run_pool(works, jobs, timeout, ended, starting)
    except KeyboardInterrupt as stop:
        stop.prefixspec_hunted = [results[index] for index in sorted(results)]  # type: ignore[attr-defined]  # for the caller's table
        raise
    if errors:
        raise errors[min(errors)]
    return [results[index] for index in sorted(results)]


def say(progress: TextIO | None, line: str) -> None:
    """One progress line, whole."""
    if progress is not None:
        progress.write(line + "\n")
        progress.flush()


def verdict(result: HuntResult) -> str:
    """``killed by the seed tests, the call machine`` or ``SURVIVED``: a progress line's word on a mutant."""
    if not result.killed:
        return "SURVIVED"
    return "killed by " + ", ".join([*(["the seed tests"] if result.seed_killers else []), *result.machine_killers])


def _hunt_one(catalogue: Catalogue, mutant: Mutant, plan: HuntPlan, progress: TextIO | None) -> HuntResult:
    say(progress, f"  hunting {mutant.id}: {mutant.bug} ...")
    return hunt_mutant(catalogue, mutant, plan)


def _hunt_work(catalogue: Catalogue, mutant: Mutant, plan: HuntPlan) -> Callable[[], int]:
    """What a supervised child runs for ``mutant``: its hunt, the result sent to the parent."""

    def work() -> int:
        try:
            send("hunted", hunt_mutant(catalogue, mutant, plan))
        except TargetError as error:
            send("usage", str(error))
            return ExitStatus.USAGE
        return ExitStatus.PASSED

    return work


def _hunted(catalogue: Catalogue, mutant: Mutant, ended: Ended) -> HuntResult:
    """The result of ``mutant``'s child; a kill by the way it ended when it ended without one; CatalogueError when it cannot be loaded."""
    for kind, value in ended.messages:
        if kind == "hunted" and isinstance(value, HuntResult) and ended.status is not None:
            return value
        if kind == "usage" and isinstance(value, str):
            raise CatalogueError(value)
    if not ended.reading.stage:
        raise CatalogueError(f"{catalogue.path}: mutant {mutant.id} cannot be loaded: its process {ended.how} {ended.where()}")
    result = HuntResult(mutant, seconds=ended.seconds, seed_tests_unknown=f"unknown (its process {'hung' if ended.hung else 'ended'})")
    killer = "its process hung" if ended.hung else f"its process {ended.how}"
    result.machine_killers.append(f"{ended.reading.stage} ({killer} {ended.where()})")
    result.seconds_to_first_failure = result.seconds
    return result


def table(results: list[HuntResult]) -> str:
    """The hunt as a Markdown table: one row per mutant."""
    rows = [
        "| id | bug | result | seed tests that killed it | stages that killed it | first failure | report within | counterexample |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for result in results:
        first = "-" if result.seconds_to_first_failure is None else f"{result.seconds_to_first_failure:.2f} s"
        report = "-" if result.seconds_to_report is None else f"{result.seconds_to_report:.2f} s"
        if result.counterexample:
            calls = counted(result.counterexample_calls, "call")
        elif result.write_error:
            calls = f"not written ({result.write_error})"
        else:
            calls = f"none to replay: its report is {result.report}" if result.report else "-"
        if result.counterexample and result.counterexample_cut_short:
            calls += " (its budget ran out: not shown minimal)"
        seed = ", ".join(result.seed_killers) or result.seed_tests_unknown or "none"
        if result.missed_seed_tests:
            seed += f" (expected also: {', '.join(result.missed_seed_tests)})"
        rows.append(
            f"| {result.mutant.id} | {result.mutant.bug} | {'killed' if result.killed else 'SURVIVED'} | {seed} | "
            f"{', '.join(result.machine_killers) or 'none'} | {first} | {report} | {calls} |"
        )
    killed = sum(1 for result in results if result.killed)
    rows.append("")
    rows.append(f"{killed} of {len(results)} mutants killed ({100 * killed / max(len(results), 1):.0f}%)")
    return "\n".join(rows)
