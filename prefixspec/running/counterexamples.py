"""A failing stage's counterexample: its calls minimised by delta debugging and written as a trace file of its own.

The file is named for the stage (``counterexample_path``) and claimed for this run alone (``claimed_file``); its
header carries the command that replays it (``RunPlan.replay_arguments``).
"""

from __future__ import annotations

import itertools
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from spec.api import CacheFactory
from prefixspec.formats.trace import Trace
from prefixspec.compare.shrink import LONG_TRACE, DoesNotReproduce, counterexample_trace, minimise
from prefixspec.running.report import StageResult, cut_long_comments, write_whole
from prefixspec.running.run_plan import RunPlan


LONG_CUT_SHARE = 0.5
"""The share of a report's budget (``RunPlan.report_within``) that a history of more than ``LONG_TRACE`` calls (the
scale stage's) may spend on its cut, counted from the cut's start: the stage takes most of the budget to find the
failure (a cache of thousands of blocks driven past 2^16 uses), and each replay of its cut costs a second.  So its
report comes at most that share of the budget after the failure was found."""


def counterexample_path(folder: Path, stage: str) -> Path:
    """Where a stage's counterexample trace is written."""
    return folder / f"{stage.replace(' ', '_')}.trace"


def write_counterexample(stage: StageResult, trace: Trace, target: CacheFactory, plan: RunPlan, title: str, started: float) -> None:
    """Minimise the calls of a failing run and write them as a trace file; fills the stage's fields.

    The stage's failure then describes the minimised trace's last call (the
    one a reader replays), with the rule it breaks; where the run first saw
    the failure follows in a note.
    """
    calls = trace.calls()
    # Delta debugging stops improving so that the report is written within a
    # minute of the stage's start (issue 12), whatever the trace's length; a
    # long history's cut has a budget of its own besides (``LONG_CUT_SHARE``).
    budget = max(2.0, plan.report_within - (time.perf_counter() - started))
    if len(calls) > LONG_TRACE:
        budget = max(budget, LONG_CUT_SHARE * plan.report_within)
    try:  # the stage's steps spare a long run its first replay (a scale run: 100,000 calls, seconds)
        kept, disagreement, stopped_at_budget = minimise(trace.block_size, calls, target, plan.rules, time_budget=budget, steps=trace.steps)
    except DoesNotReproduce:
        stage.failure += "\n(the calls alone do not reproduce it: the cache may depend on something besides its calls)"
        return
    except Exception as error:  # a fault of the checker's own while minimising: the verdict stands, its calls are written whole
        first_line = (str(error).strip().splitlines() or [""])[0]
        fault = f"{type(error).__name__}: {first_line}" if first_line else type(error).__name__
        stage.failure += f"\n(minimising its calls failed, a fault of the checker's, not of the cache: {fault}; the run's {len(calls)} calls are written as they ran)"
        write_trace(stage, plan, lambda reproduce: whole_trace_text(trace, title, fault, reproduce), started)
        return
    first_seen = stage.failure.splitlines()[0] if stage.failure else ""
    stage.rule = disagreement.rule
    budget_note = f", {budget_words(budget)}" if stopped_at_budget else ""
    stage.failure = f"{disagreement.describe()}\n(minimised to {len(kept)} of {len(calls)} calls{budget_note}; the run first saw it as: {first_seen})"
    stage.counterexample_calls = len(kept)
    stage.counterexample_cut_short = stopped_at_budget
    headed = f"{title} The minimising stopped {budget_words(budget)}." if stopped_at_budget else title
    write_trace(stage, plan, lambda reproduce: counterexample_trace(trace.block_size, kept, disagreement, headed, reproduce).text(), started)


def budget_words(budget: float) -> str:
    """What a report says of a minimising that its time budget ended: the calls fail, but are not shown minimal."""
    return f"when its {budget:.0f} s budget ran out: the shortest found by then, not shown minimal"


def whole_trace_text(trace: Trace, title: str, fault: str, reproduce: str) -> str:
    """The run's calls as they ran, not minimised, since minimising them failed with ``fault``."""
    comments = [title, f"Not minimised: minimising failed ({fault}), a fault of the checker's.", f"Reproduce with: {reproduce}"]
    return Trace(trace.block_size, trace.steps, comments, trace.rules).text()


def write_trace(stage: StageResult, plan: RunPlan, text_of: Callable[[str], str], started: float) -> None:
    """The trace ``text_of(reproduce)`` written in a file claimed for it (``claimed_file``); the stage names it, or says why not."""
    path = Path()
    try:
        plan.out_dir.mkdir(parents=True, exist_ok=True)
        path, claimed = claimed_file(plan.out_dir, stage.name)
        claimed.close()
        reproduce = f"prefixspec replay {shlex.quote(str(path))} {plan.replay_arguments}"
        write_whole(path, cut_long_comments(text_of(reproduce)))
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
