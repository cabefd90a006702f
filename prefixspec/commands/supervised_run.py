"""A command on a target, run supervised (``prefixspec.targets.supervised``): its end told apart from the target's.

The child runs the command as it always ran and prints its report; this
process prints that report only once the child ended by its own last word.
A child that ended otherwise failed as a program: while its target was
loaded, a usage error (one line, exit 2, as for a ``sys.exit`` at import);
later, a report naming the call it was in and the stages that finished
before (exit 1).  On the user's Ctrl-C or SIGTERM the stages that finished are
printed with their verdicts, and the command stops (130, 143).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from spec.api import parse_rules
from prefixspec.commands.options import write_output
from prefixspec.exit_status import ExitStatus, stop_words, stopped_by
from prefixspec.running.profiles import chosen_profile, scratch_storage
from prefixspec.running.report import CheckReport, StageResult, cut_long_lines
from prefixspec.targets.interrupts import stop_signal
from prefixspec.targets.loading import DEFAULT_TARGET
from prefixspec.targets.supervised import Ended, supervise
from prefixspec.vocabulary import counted

import signal


def target_name(arguments: argparse.Namespace) -> str:
    """The target as the user named it: ``--exec CMD``, ``module:factory`` (the default one when none)."""
    if getattr(arguments, "exec", None) is not None:
        return f"--exec {arguments.exec}"
    target = getattr(arguments, "target", None)
    return DEFAULT_TARGET if target is None else str(target)


def finished_report(arguments: argparse.Namespace, ended: Ended | None) -> CheckReport:
    """A check's report of the stages the child finished (and said so) before it ended."""
    rules = getattr(arguments, "rules", None) or parse_rules("strict")
    report = CheckReport(target_name(arguments), chosen_profile(getattr(arguments, "profile", None)), getattr(arguments, "seed", None), rules=rules)
    if ended is not None:
        report.stages = [value for kind, value in ended.messages if kind == "stage" and isinstance(value, StageResult)]
    return report


def stage_words(stage: str) -> str:
    """``the call machine stage`` for a stage of a check; other places a run can be (``the seed tests``) as they are."""
    from prefixspec.running.stages import STAGES

    return f"the {stage} stage" if stage in STAGES else stage


def run_supervised(arguments: argparse.Namespace, command: Callable[[argparse.Namespace], int]) -> int:
    """``command(arguments)`` in a supervised child; its status, or the report of how the target ended it."""
    timeout = getattr(arguments, "timeout", None)
    scratch_storage()  # made here, so that this process, which outlives the child, removes it
    try:
        ended = supervise(lambda: command(arguments), timeout if isinstance(timeout, float) else None)
    except KeyboardInterrupt as stop:
        signum = stop_signal() or signal.SIGINT
        report = finished_report(arguments, getattr(stop, "prefixspec_ended", None))
        how = stop_words(signum)
        lines = report.summary().splitlines()[:-1] if report.stages else []
        print("\n".join([*lines, f"result: STOPPED, {how}, after {counted(len(report.stages), 'finished stage')}"]))
        print(f"prefixspec: {how}; the stages that finished are printed above, the one running was dropped", file=sys.stderr)
        return stopped_by(signum)
    if ended.status is not None:
        sys.stdout.write(cut_long_lines("".join(ended.report)))
        sys.stdout.flush()
        return ended.status
    name = target_name(arguments)
    if not ended.reading.stage:  # it ended while it was loaded: a target that cannot be loaded
        what = "hung" if ended.hung else "ended its process"
        print(f"prefixspec: the target `{name}` cannot be loaded: it {what} {ended.where()} (it {ended.how})", file=sys.stderr)
        return ExitStatus.USAGE
    paragraph = ended.paragraph(name, stage_words(ended.reading.stage))
    if getattr(arguments, "command", "") != "check":
        print(paragraph)
        print("result: FAILED")
        return ExitStatus.FAILED
    report = finished_report(arguments, ended)
    report.stages.append(StageResult(ended.reading.stage, False, 0.0, failure=paragraph, aborted=True))
    print(report.summary())
    json_file = getattr(arguments, "json", None)
    if json_file and not write_output(json_file, json.dumps(report.as_json(), indent=2) + "\n", "--json"):
        return ExitStatus.USAGE
    return ExitStatus.FAILED
