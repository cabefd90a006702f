"""``prefixspec verify TRACE [--shrink]``: hold a trace an engine recorded to the spec (``prefixspec.running.recorded``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from prefixspec.exit_status import ExitStatus
from prefixspec.commands.options import add_rules_option, output_file, positive_seconds
from prefixspec.errors import UsageError
from prefixspec.compare.shrink import LONG_TRACE
from prefixspec.formats.repeats import fold
from prefixspec.formats.trace import Step, Trace, read_trace
from prefixspec.running.recorded import Recording, shrink_within
from prefixspec.running.report import write_whole
from prefixspec.vocabulary import counted


def describe_call(step: Step) -> str:
    return f"line {step.line}: {step.call.text()}"


def verify_report(file: str, recording: Recording) -> tuple[int, str]:
    """The exit status and the report of verifying ``recording``."""
    trace = recording.trace
    recorded = sum(1 for step in trace.steps if step.expected is not None)
    index = recording.first_divergence()
    if index is None:
        return ExitStatus.PASSED, f"{file}: {counted(len(trace.steps), 'call')} replayed on the spec; all {recorded} recorded results are what the spec gives"
    step = trace.steps[index]
    lines = [
        f"{file}: the recorded results diverge from the spec at line {step.line} (call {index + 1} of {len(trace.steps)}):",
        f"  {step.call.text()}",
        f"  recorded: {step.expected}",
        f"  spec:     {recording.spec_results[index]}",
    ]
    before = trace.steps[max(0, index - 3) : index]
    if before:
        lines.append(f"the {counted(len(before), 'call')} before it, as recorded:")
        lines.extend(f"  {describe_call(earlier)}{'' if earlier.expected is None else ' -> ' + earlier.expected}" for earlier in before)
    return ExitStatus.FAILED, "\n".join(lines)


def shrunk_trace(file: str, recording: Recording, kept: Sequence[int]) -> Trace:
    cut = recording.cut(kept)
    assert cut is not None, "a shrunk trace resolves every handle"
    _, steps, spec_results = cut
    plain = [Step(step.call, step.expected, 0) for step in steps]
    # Folding repeats makes a short cut easy to read and costs seconds per 10,000 calls: a cut too long to read
    # (LONG_TRACE, one that stopped at its budget) is written plain, so that --time-budget bounds the command.
    folded = fold(plain) if len(plain) <= LONG_TRACE else plain
    trace = Trace(recording.trace.block_size, folded, rules=recording.trace.rules)
    trace.comments = [
        f"Cut by `prefixspec verify --shrink` from {file}: {len(steps)} of {len(recording.trace.steps)} calls.",
        "The spec agrees with every recorded result but the last one's:",
        f"  recorded: {steps[-1].expected}",
        f"  spec:     {spec_results[-1]}",
        "Check it again with: prefixspec verify THIS_FILE",
    ]
    return trace


def command_verify(arguments: argparse.Namespace) -> int:
    if not arguments.file.strip() or Path(arguments.file).is_dir():
        raise UsageError(f"verify needs a trace file; {arguments.file!r} is {'empty' if not arguments.file.strip() else 'a folder'}")
    out = Path(arguments.out) if arguments.out else Path(arguments.file).with_suffix(".shrunk.trace")
    if arguments.shrink:
        output_file(str(out), "--out")  # checked before the replay and the cut, which may take minutes
        if out.exists() and os.path.samefile(out, arguments.file):
            raise UsageError(f"--out {out} is the trace being verified: the cut would replace the recording; name another file")
    trace = read_trace(arguments.file)
    if arguments.rules is not None:
        trace.rules = arguments.rules
    if not any(step.expected is not None for step in trace.steps):
        raise UsageError(f"{arguments.file} records no results (no '-> RESULT' on any call): nothing to verify")
    recording = Recording.of(trace)
    status, report = verify_report(arguments.file, recording)
    print(report)
    if status == ExitStatus.PASSED or not arguments.shrink:
        return status
    shrunk = shrink_within(recording, time_budget=arguments.time_budget)
    try:
        write_whole(out, shrunk_trace(arguments.file, recording, shrunk.kept).text())
    except OSError as error:  # a full disk at the end of the cut: nothing half-written, the divergence above stands
        print(f"prefixspec: --out {out}: the cut trace of {len(shrunk.kept)} calls could not be written there ({error.strerror or error}); nothing of it was left", file=sys.stderr)
        return ExitStatus.USAGE
    print(f"shrunk to {len(shrunk.kept)} of {len(trace.steps)} calls: {out} (prefixspec verify {out} shows the divergence on its last line)")
    if shrunk.stopped_at_budget:
        print(
            f"the cut stopped at its time budget of {arguments.time_budget:g} s: this is the shortest cut found by then, "
            "and it still diverges, but a longer --time-budget may cut it further"
        )
    return status


def add_verify_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = commands.add_parser("verify", help="hold a trace an engine recorded (its calls and results) to the spec")
    verify.add_argument("file", help="a recorded trace: calls with the engine's results after '->' (docs/recording.md)")
    verify.add_argument("--shrink", action="store_true", help="also cut the trace to the fewest calls that still diverge")
    verify.add_argument("--out", metavar="FILE", default=None, help="where --shrink writes the cut trace (default FILE with .shrunk.trace)")
    verify.add_argument("--time-budget", metavar="SECONDS", type=positive_seconds, default=60.0, help="stop cutting after this long (default 60)")
    add_rules_option(verify, default=None)
    verify.set_defaults(run=command_verify)


