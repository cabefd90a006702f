"""The one SIGALRM timer the guards share: a time limit on every run of a target's code, at no system call a run.

Setting an interval timer is a system call, and a guarded run made two (arm it, disarm it): a tenth of the
engine machine's time under cProfile, in ``signal.setitimer`` and its checks.  Here a timed run only notes
when it started (``start``), and the timer is set only when no ring is due by the run's deadline.  When the
timer rings (``_ring``):

- the run in progress is past its deadline: its guard raises ``TargetHung`` (the timer set again a limit
  later, so that a target that swallows it is interrupted again);
- a run is in progress, short of its deadline: the timer is set for that deadline exactly;
- no run is in progress: the timer stays off until a run starts.

So at every moment of a timed run a ring is due at or before its deadline, and a run that hangs is
interrupted at its deadline, as with a timer of its own.  A forked child starts with no ring due (a timer is
not inherited); a run that finds another handler in ours' place (a target's own) installs ours and sets the
timer again, and a ring long overdue (a target that blocked the signal) is taken as lost: the next run sets
it again.  Only the main
thread is timed (signals reach only it); the caller checks that.
"""

from __future__ import annotations

import atexit
import importlib
import math
import os
import signal
import time
from collections.abc import Callable
from types import FrameType
from typing import Protocol, cast

_installed_handler = cast(Callable[[int], object], getattr(importlib.import_module("_signal"), "getsignal"))
"""The handler installed for a signal, as the C module reads it: ``signal.getsignal`` turns it into an enum where
it can, by raising and catching a ValueError for a function, a fifth of a guarded call's time (cProfile)."""

_SIGALRM = int(signal.SIGALRM)  # read once: the enum's attribute costs more than the C call that takes it

SHORTEST = 1e-4
"""Seconds: the shortest time the timer is set for (zero would turn it off)."""

OVERDUE = 1.0
"""Seconds past its time after which a ring that did not come is taken as lost."""


class Timed(Protocol):
    """A guard whose run the alarm times: told when the run is past its deadline, to raise ``TargetHung``."""

    def overran(self, frame: FrameType | None) -> None: ...


class _AlarmState:
    """The alarm's state: the run in progress and when the timer rings next.

    One instance, not the class's own attributes: each write of a class's attribute invalidates the interpreter's
    caches of its type, and a guarded call and its digest made seven (a guarded lock and its digest: 3.9 -> 3.5 us,
    timeit)."""

    __slots__ = ("run", "started", "limit", "due")

    def __init__(self) -> None:
        self.run: Timed | None = None
        self.started = 0.0
        self.limit = 0.0
        self.due = math.inf
        """``time.monotonic()`` at which the timer rings next; infinity: it is off."""


_State = _AlarmState()


def _forked() -> None:
    """A forked child has no timer of its parent's (POSIX): none is due in it."""
    _State.run, _State.due = None, math.inf


os.register_at_fork(after_in_child=_forked)


def disarm() -> None:
    """Turn the timer off, if a run set it.  At exit: the interpreter gives SIGALRM back its default action as it
    ends, and a ring still due from the last run (up to a limit after it) ended the process there with "Alarm
    clock", status 142, once its output was written (seen on a loaded machine)."""
    if _State.due != math.inf:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _State.due = math.inf


atexit.register(disarm)


def start(guard: Timed, limit: float) -> None:
    """A run of ``guard`` starts, to be interrupted ``limit`` seconds from now; call ``stop`` when it ends."""
    now = time.monotonic()
    _State.run, _State.started, _State.limit = guard, now, limit
    deadline = now + limit
    due = _State.due
    if due > deadline or now > due + OVERDUE or _installed_handler(_SIGALRM) is not _ring:
        _set(limit, now)


def stop() -> None:
    """The run in progress ended: from here on a ring does nothing to it, even before the timer is off."""
    _State.run = None


def _set(seconds: float, now: float) -> None:
    if _installed_handler(signal.SIGALRM) is not _ring:
        # Left installed: with no run in progress it ignores the signal, and the next run needs it again.
        signal.signal(signal.SIGALRM, _ring)
    seconds = max(seconds, SHORTEST)
    _State.due = now + seconds
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _ring(signum: int, frame: FrameType | None) -> None:
    now = time.monotonic()
    run = _State.run
    _State.due = math.inf  # the timer is one-shot: off, until set again here or by a run's start
    if run is None:
        return
    deadline = _State.started + _State.limit
    if now < deadline:
        _set(deadline - now, now)
        return
    _set(_State.limit, now)  # again a limit later: a target that swallows the TargetHung is interrupted again
    run.overran(frame)
