"""What the machines run and check, counted: the sizes of their examples and ``RunTally``, shared by both machines."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prefixspec.drive.coverage import Coverage
from prefixspec.compare.lockstep import DigestTally, Lockstep

ENGINE_STEPS_PER_EXAMPLE = 3000
"""Every engine example must run at least this many engine steps; the runner checks it."""

BURST_STEPS = (250, 450)
"""Engine steps per burst, drawn from this range."""

CALLS_PER_EXAMPLE = 60
"""Rules per call-machine example (stateful_step_count)."""

CALL_EXAMPLES_PER_ENGINE_EXAMPLE = 20
"""A call-machine example costs about a twentieth of an engine example, so it gets twenty times as many."""


def engine_bursts(min_engine_steps: int) -> int:
    """Rules per engine example (stateful_step_count) so that every example runs ``min_engine_steps``.

    The initialize rule counts as one; every burst runs at least BURST_STEPS[0]
    steps.  Hypothesis may still stop an example early when its choice budget
    runs out, so the runners count the steps actually run and fail short ones.
    """
    return 1 + -(-min_engine_steps // BURST_STEPS[0])


def call_machine_examples(engine_examples: int) -> int:
    """Call-machine examples for a profile whose engine examples are ``engine_examples``."""
    return engine_examples * CALL_EXAMPLES_PER_ENGINE_EXAMPLE


@dataclass
class RunTally:
    """What the machines ran and checked, over every example of one run."""

    examples: int = 0
    engine_steps: int = 0
    calls: int = 0
    engine_steps_per_example: list[int] = field(default_factory=list)
    progress: Callable[[RunTally], None] | None = None
    abandoned_examples: int = 0
    """Engine examples Hypothesis abandoned midway (a draw past its buffer, or a failure): not test cases."""
    started: float = field(default_factory=time.perf_counter)
    first_failure_seconds: float | None = None
    """Seconds from the start of the run to the first failing example."""
    first_failure_example: int | None = None
    """The example that failed first: Hypothesis runs it once more to report it, a replay, not a test case."""
    coverage: Coverage = field(default_factory=Coverage)
    """The rule events and extremes the run reached."""
    digests: DigestTally = field(default_factory=DigestTally)
    """The comparisons by the target's digest over every example, and those whose digests differed."""

    @property
    def invariants_checked(self) -> int:
        """Each call: its result and the snapshot after it; each engine step: conservation and lock safety."""
        return 2 * self.calls + 2 * self.engine_steps


def attach_trace(error: BaseException, pair: Lockstep, tally: RunTally) -> BaseException:
    """Give a failure the calls that led to it, so the runner can write and minimise them; note when the first came."""
    setattr(error, "prefixspec_trace", pair.trace())
    if tally.first_failure_seconds is None:
        tally.first_failure_seconds = time.perf_counter() - tally.started
        tally.first_failure_example = tally.examples
    return error
