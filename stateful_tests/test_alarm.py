"""The guards' shared timer (``targets.alarm``): a hang is still interrupted at its own run's limit, at few system calls.

Counts, not clocks: how often ``signal.setitimer`` is called for thousands of guarded runs, and that a run that
sleeps past its limit raises ``TargetHung`` naming its call (it would return normally, after its sleep, if no
ring were due by its deadline).  The negative control forgets when the timer rings next after each run, as a
timer per run would: the count of system calls grows with the runs.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Iterator

import pytest

from prefixspec.targets import alarm
from prefixspec.targets.guard import Guard, TargetHung

RUNS = 5000


@pytest.fixture
def timer_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Every ``signal.setitimer`` the alarm makes, by its seconds; the alarm starts with no ring due."""
    made: list[float] = []
    real = signal.setitimer

    def counted(which: int, seconds: float, interval: float = 0.0) -> tuple[float, float]:
        made.append(seconds)
        return real(which, seconds, interval)

    monkeypatch.setattr(signal, "setitimer", counted)  # the module the alarm calls it from
    monkeypatch.setattr(alarm._State, "due", math.inf)
    yield made
    signal.setitimer(signal.ITIMER_REAL, 0)
    alarm._State.due = math.inf


def test_thousands_of_runs_set_the_timer_a_handful_of_times(timer_calls: list[float]) -> None:
    guard = Guard("impl:RadixCache", 30.0)
    for _ in range(RUNS):
        assert guard.run("its stats()", "at a call", lambda: 7) == 7
    assert 1 <= len(timer_calls) <= 3, timer_calls  # the first run sets it; a ring with no run in progress turns it off


def test_negative_control_a_timer_per_run_is_counted(timer_calls: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    real_stop = alarm.stop

    def forgetful_stop() -> None:
        real_stop()
        alarm._State.due = math.inf  # as if each run disarmed its own timer: the next must set it again

    monkeypatch.setattr(alarm, "stop", forgetful_stop)
    guard = Guard("impl:RadixCache", 30.0)
    for _ in range(RUNS):
        guard.run("its stats()", "at a call", lambda: 7)
    assert len(timer_calls) >= RUNS


def test_a_hang_after_runs_of_a_longer_limit_is_interrupted_at_its_own(timer_calls: list[float]) -> None:
    """A guard of 60 s runs first (its ring is due in a minute); a run of a 0.2 s guard that sleeps 30 s must
    still be interrupted, and reported as that call, long before either."""
    patient = Guard("impl:RadixCache", 60.0)
    for _ in range(100):
        patient.run("its stats()", "at a call", lambda: None)
    hasty = Guard("impl:RadixCache", 0.2)
    with pytest.raises(TargetHung, match=r"hangs: its match_prefix\(\) did not return within 0.2 s") as hung:
        hasty.run("its match_prefix()", lambda: "at call 3 to a cache of block size 2", time.sleep, 30)
    assert "It happened at call 3 to a cache of block size 2." in str(hung.value)
    assert min(timer_calls) <= 0.2


def test_a_hang_that_swallows_the_interruption_is_interrupted_again(timer_calls: list[float]) -> None:
    swallowed = []

    def stubborn() -> None:
        for _ in range(3):
            try:
                time.sleep(30)
            except TargetHung:
                swallowed.append(1)
        time.sleep(30)

    with pytest.raises(TargetHung):
        Guard("impl:RadixCache", 0.1).run("its evict()", "at a call", stubborn)
    assert len(swallowed) == 3


EXIT_PROBE = """
import atexit, signal, sys
from prefixspec.targets import alarm
from prefixspec.targets.guard import Guard
if sys.argv[1] == "planted":
    atexit.unregister(alarm.disarm)
Guard("probe", 30.0).run("its probe()", "", lambda: None)
armed = signal.getitimer(signal.ITIMER_REAL)[0] > 0
atexit._run_exitfuncs()
print(armed, signal.getitimer(signal.ITIMER_REAL)[0] > 0)
"""


@pytest.mark.parametrize("variant", ["as shipped", "planted"])
def test_the_timer_is_off_once_the_exit_handlers_ran(variant: str) -> None:
    """A ring due after the interpreter gave SIGALRM back its default action would end the process (status 142);
    negative control: without the exit handler the timer is still set."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", EXIT_PROBE, variant], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == (["True", "False"] if variant == "as shipped" else ["True", "True"])


def sleeps_past_its_limit_untimed() -> bool:
    """Whether a guarded run of a 0.2 s guard that sleeps 0.5 s returns (untimed) rather than raising ``TargetHung``."""
    try:
        Guard("impl:RadixCache", 0.2).run("its evict()", "at a call", time.sleep, 0.5)
    except TargetHung:
        return False
    return True


def test_outside_the_main_thread_a_run_has_no_limit_and_the_thread_that_forked_has_one() -> None:
    """Signals reach the main thread alone, so a run in another thread is untimed; a child forked from that thread
    has it as its main thread, where a run is timed again (the guard reads the main thread's ident once, and again
    after a fork).  Each half is the other's control: the same run, in the same thread, times out only in the child."""
    import os
    import threading

    assert not sleeps_past_its_limit_untimed()  # the main thread: timed
    seen: dict[str, object] = {}

    def in_a_thread() -> None:
        seen["untimed"] = sleeps_past_its_limit_untimed()
        child = os.fork()
        if child == 0:
            os._exit(0 if not sleeps_past_its_limit_untimed() else 1)
        seen["child status"] = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])

    worker = threading.Thread(target=in_a_thread)
    worker.start()
    worker.join(60)
    assert seen == {"untimed": True, "child status": 0}
