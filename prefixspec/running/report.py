"""What a check run reports: each stage's counts and verdict, as text and as JSON, and progress lines."""

from __future__ import annotations

import os
import shlex
import stat
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import TextIO

from spec.api import RULE_FIELDS, Rules
from prefixspec.compare.lockstep import DigestTally
from prefixspec.drive.machines import RunTally
from prefixspec.vocabulary import counted


LONGEST_LINE = 20_000
"""Characters a line of a report or a trace's comment may hold; a longer one (a target's result or message of
megabytes) is cut, with a note of how much: the comparison saw the whole value, the reader needs its start."""


def cut_line(line: str, where: str = "the report") -> str:
    """``line`` cut to LONGEST_LINE characters, saying how many more were cut from ``where``."""
    if len(line) <= LONGEST_LINE:
        return line
    return f"{line[:LONGEST_LINE]}... ({len(line) - LONGEST_LINE:,} more characters cut from {where})"


def write_whole(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` as the file ``path`` whole, or leave nothing of it: OSError when that fails (a full disk).

    A regular file (or a new one) is written to a temporary file beside it and renamed over it, so a write that
    fails midway leaves the old file (or none), never half a trace or half a JSON report.  A path that is no
    regular file (``/dev/stdout``, ``/dev/full``, a FIFO) is written in place: renaming over it would replace it.
    """
    try:
        # The path itself, links followed: /dev/stdout's real path is /proc/self/fd/1's target, ``pipe:[N]`` for a
        # pipe, which names no file (the write failed with "No such file or directory" after the whole run).
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG
    if not stat.S_ISREG(mode):
        with open(path, "w", encoding="utf-8") as device:
            device.write(text)
        return
    real = os.path.realpath(path)
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(real), prefix=f".{os.path.basename(real)}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as written:
            written.write(text)
            written.flush()
            os.fsync(written.fileno())
        os.replace(temporary, real)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def cut_long_lines(text: str, where: str = "the report") -> str:
    """``text`` with every line past LONGEST_LINE cut (``cut_line``)."""
    if len(text) <= LONGEST_LINE:
        return text
    return "\n".join(cut_line(line, where) for line in text.split("\n"))


def cut_long_comments(trace_text: str) -> str:
    """A trace's text with its comment lines past LONGEST_LINE cut: its calls and expectations, which replay, stay whole."""
    if len(trace_text) <= LONGEST_LINE:
        return trace_text
    return "\n".join(cut_line(line, "this comment") if line.startswith("#") else line for line in trace_text.split("\n"))


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
    replayed_examples: int = 0
    """Runs of an example that had failed already (Hypothesis reproducing it): not test cases."""
    failure: str = ""
    counterexample: str = ""
    counterexample_calls: int = 0
    counterexample_cut_short: bool = False
    """Its minimising ended when its time budget ran out: the calls fail, but are not shown minimal."""
    seconds_to_failure: float = 0.0
    seconds_to_report: float = 0.0
    """From the stage's start to its minimised counterexample written."""
    rule: str = ""
    """The rule the counterexample's last call breaks (``R7/R8, the order...``)."""
    events: dict[str, int] = field(default_factory=dict)
    """The rule events and extremes the stage reached, and how often (``coverage``)."""
    missing_events: list[str] = field(default_factory=list)
    """The events its profile requires that it never reached."""
    digests: DigestTally = field(default_factory=DigestTally)
    """The comparisons after a call by the target's snapshot digest (a target that declares one; the full ones
    apart), and those whose digests differed, so that the two snapshots were built and compared (in a stage that
    passed they then agreed every time)."""
    notes: list[str] = field(default_factory=list)
    """What the stage measured beside its verdict (the scale stage: how each call's time grows with the cache)."""
    aborted: bool = False
    """The target failed as a program (``spec.api.TargetFailure``): ``failure`` is its report, the check stops."""
    cpu_seconds: float | None = None
    """The CPU time of the process that ran the stage (``stages.run_stage``), None where it was not measured: its
    rates per CPU second hold on a loaded machine or beside another worker, where the wall time's do not (an
    engine's own process, over a pipe, is not counted)."""

    def rate(self, count: int, unit: str) -> str:
        """``count`` a second of the stage's wall time, and a CPU second where measured: ``4,129 calls/s, 4,410 per CPU s``."""
        text = f"{count / max(self.seconds, 1e-9):,.0f} {unit}/s"
        if self.cpu_seconds is not None:
            text += f", {count / max(self.cpu_seconds, 1e-9):,.0f} per CPU s"
        return text

    @property
    def invariants_checked(self) -> int:
        return 2 * self.calls + 2 * self.engine_steps

    def digest_note(self) -> str:
        """What the target's digest cost a stage that passed: how often it differed from the spec's where the states agreed."""
        return (
            f"snapshot digest: it differed from the spec's at {self.digests.misses:,} of the {self.digests.comparisons:,} "
            f"comparisons made by digest, where the snapshots then agreed; each of those built and compared the two "
            f"snapshots instead (a digest that misses a change, or that keeps an order no call observes)"
        )


@dataclass
class CheckReport:
    """A whole check: the target, how it ran, and its stages in order."""

    target: str
    profile: str
    seed: int | None
    stages: list[StageResult] = field(default_factory=list)
    replay_target: str = ""
    """How ``prefixspec replay`` names the target (``--target TARGET`` or ``--exec CMD``)."""
    rules: Rules = Rules()
    wall_seconds: float | None = None
    """From the run's start to its end; None for a report assembled elsewhere (the stages' sum stands in)."""
    chosen: tuple[str, ...] = ()
    """The stages the run was asked for (``check --stage``), in the order they run; empty: every one.  The header
    names them, so that a report of some stages is never read as a whole check."""

    @property
    def passed(self) -> bool:
        return all(stage.passed for stage in self.stages)

    @property
    def seconds(self) -> float:
        """The run's time: its wall time, which stages run side by side (``-j``) make shorter than their sum."""
        return sum(stage.seconds for stage in self.stages) if self.wall_seconds is None else self.wall_seconds

    def summary(self) -> str:
        lines = [
            f"prefixspec check {self.target} (profile {self.profile}{'' if self.seed is None else f', seed {self.seed}'}, "
            f"rules {self.rules.name}: {self.rules.text.replace(',', ', ')}"
            f"{'' if not self.chosen else ', only the stages ' + ', '.join(self.chosen)})"
        ]
        for stage in self.stages:
            detail = f"{counted(stage.examples, 'example')}, {counted(stage.calls, 'call')} ({stage.rate(stage.calls, 'calls')})"
            if stage.engine_steps:  # the engine machine's and the scale stage's (one cache, so no examples to count)
                per = stage.steps_per_example
                spread = f" (per example min {min(per):,}, median {statistics.median(per):,.0f})" if per else ""
                detail += f", {stage.engine_steps:,} engine steps{spread}, {stage.rate(stage.engine_steps, 'steps')}"
            if stage.replayed_examples:
                detail += f", {counted(stage.replayed_examples, 'replay')} of the failing example (not counted)"
            if stage.abandoned_examples:
                detail += f", {counted(stage.abandoned_examples, 'example')} abandoned by Hypothesis midway (not counted)"
            verdict = "ok" if stage.passed else "FAILED"
            lines.append(f"  {stage.name:<15} {verdict:<7} {stage.seconds:6.1f} s  {detail}, {stage.invariants_checked:,} checks")
            if stage.events:
                lines.append("    reached: " + ", ".join(f"{name} {count:,}" for name, count in stage.events.items()))
            if stage.digests.misses and stage.passed:
                lines.append(f"    {stage.digest_note()}")
            if stage.notes and stage.passed:
                lines.append("    time per call as the cache grows (measured before the stage):")
                lines.extend(f"      {note}" for note in stage.notes)
            if not stage.passed:
                lines.append("    " + cut_long_lines(stage.failure).replace("\n", "\n    "))
                if stage.counterexample:
                    lines.append(
                        f"    counterexample: {stage.counterexample} ({counted(stage.counterexample_calls, 'call')}); "
                        f"reproduce with: prefixspec replay {shlex.quote(stage.counterexample)} {self.replay_target}"
                    )
        lines.append(f"result: {'PASSED' if self.passed else 'FAILED'} in {self.seconds:.1f} s")
        return "\n".join(lines)

    def as_json(self) -> dict[str, object]:
        return {
            "target": self.target,
            "profile": self.profile,
            "seed": self.seed,
            "stages_chosen": list(self.chosen) or None,
            "rules": {"name": self.rules.name, **{field.key: self.rules.variant(field.key) for field in RULE_FIELDS}, "slru_threshold": self.rules.slru_threshold},
            "result": "passed" if self.passed else "failed",
            "seconds": round(self.seconds, 3),
            "stages": [
                {
                    "name": stage.name,
                    "passed": stage.passed,
                    "seconds": round(stage.seconds, 3),
                    "cpu_seconds": None if stage.cpu_seconds is None else round(stage.cpu_seconds, 3),
                    "examples": stage.examples,
                    "calls": stage.calls,
                    "engine_steps": stage.engine_steps,
                    "engine_steps_per_example": stage.steps_per_example,
                    "abandoned_examples": stage.abandoned_examples,
                    "replayed_examples": stage.replayed_examples,
                    "invariants_checked": stage.invariants_checked,
                    "failure": cut_long_lines(stage.failure),
                    "counterexample": stage.counterexample or None,
                    "counterexample_calls": stage.counterexample_calls,
                    "counterexample_cut_short": stage.counterexample_cut_short,
                    "seconds_to_failure": round(stage.seconds_to_failure, 3),
                    "seconds_to_report": round(stage.seconds_to_report, 3),
                    "rule": stage.rule or None,
                    "events": stage.events,
                    "digest_comparisons": stage.digests.comparisons,
                    "digest_misses": stage.digests.misses,
                    "missing_events": stage.missing_events,
                    "aborted": stage.aborted,
                    "notes": stage.notes,
                }
                for stage in self.stages
            ],
        }


FLAKY = (
    "the cache answered the same calls differently on two runs (Hypothesis: FlakyFailure): its answers depend on "
    "something besides its calls (time, randomness, state shared between caches, a stale process)."
)


def flaky_failure(first: BaseException, traces: list[str], written: str) -> str:
    """The report of a target that failed a run of calls and then passed the same calls: it says so, with the calls."""
    lines = [FLAKY, f"The run that failed: {type(first).__name__}: {str(first).splitlines()[0] if str(first) else ''}"]
    if traces:
        lines.append(f"Its calls ({len(traces[0].splitlines())} lines) are in {written}; replayed, they may pass or fail:")
        lines.extend(f"  {line}" for line in traces[0].splitlines()[:40])
    return "\n".join(lines)


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


