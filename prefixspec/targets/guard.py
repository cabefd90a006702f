"""The guard a Python target's own code runs under: a per-call time limit, its prints kept off the report, its exits reported.

A ``Guard`` runs the target's code (``guarded.GuardedCache`` makes each call of
the interface through one):

- **time limit**: a call (or the factory, or reading ``root``) that has not
  returned after ``timeout`` seconds is interrupted by SIGALRM (the timer of
  ``alarm``, in the main thread) and raises ``TargetHung``, a
  ``TargetFailure``: the check stops with a report naming the call and the
  line it was stuck on, as it does for an engine that hangs.  Outside the main
  thread there is no limit (signals reach only the main thread), nor for code
  stuck in a C function that never returns to Python.
- **prints**: while the target's code runs, ``sys.stdout`` is the checker's
  stderr, so a target's prints reach the terminal there and never the report,
  which the commands print on stdout.
- **exits and interrupts**: a target's ``sys.exit`` or its own
  ``KeyboardInterrupt`` raises ``TargetCrash`` (a ``TargetFailure``: a report,
  the check stops); the user's Ctrl-C (``interrupts.stop_requested``) goes on
  as ``KeyboardInterrupt``.  Every other exception of a call passes unchanged:
  it is the call's outcome, compared with the spec's (``CallRunner.run``).

The factory itself raising, or ``root`` raising, is a ``TargetCrash`` too:
neither is a call with an outcome to compare.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Protocol, TypeVar

from spec.api import TargetFailure
from prefixspec.targets import alarm
from prefixspec.targets.beacon import Beacon, Installed
from prefixspec.targets import interrupts
from prefixspec.targets.interrupts import stop_requested
from prefixspec.targets.plain import plain_error

Result = TypeVar("Result")

Where = str | Callable[[], str]
"""Where in the run a guarded run is, for reports: the text, or how to make it (made only when a report needs it)."""


class TargetCrash(TargetFailure):
    """A Python target that failed as a program (an exit, its own KeyboardInterrupt, a hang): the message is the report."""

    def __init__(self, report: str, problem: str, deed: str) -> None:
        super().__init__(report)
        self.report = report
        self.problem = problem
        """The report's sentence without the target's name and the place in the run."""
        self.deed = deed
        """What the code did, for a sentence that names the code itself (``called sys.exit(3) at m.py:4, in f``)."""

    def __str__(self) -> str:
        return self.report


class TargetHung(TargetCrash):
    """A call of a Python target that did not return within the time limit."""


def _place(filename: str, line: int | None, function: str) -> str:
    """Where code is, as a reader finds it: a path relative to the working directory when it lies below it."""
    path = Path(filename)
    try:
        shown = str(path.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        shown = filename
    return f"{shown}:{line}, in {function}"


def raised_at(error: BaseException) -> str:
    """The innermost line of ``error``'s traceback (the target's line that raised it), or "" without one."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename != interrupts.__file__]
    if not frames:
        return ""
    last = frames[-1]
    return f" at {_place(last.filename, last.lineno, last.name)}"


def one_line(error: BaseException) -> str:
    """``error``'s message on one line, cut to 300 characters."""
    try:
        return str(error).replace("\n", " ")[:300]
    except Exception:  # an exception whose __str__ raises still has a type to report
        return "(its message cannot be read)"


def exit_words(error: SystemExit | KeyboardInterrupt) -> str:
    """What the target did: ``called sys.exit(3)`` or ``raised KeyboardInterrupt though nobody pressed Ctrl-C``."""
    if isinstance(error, SystemExit):
        code = error.code
        # Only a plain code is printed as it is: the repr of a target's own object would run its code, unguarded.
        shown = repr(code) if type(code) in (int, str, type(None)) else f"a {type(code).__name__}"
        return f"called sys.exit({shown})"
    if isinstance(error, interrupts.OwnStopSignal):
        return f"was sent {signal.Signals(error.signum).name} (by its own code: the user's stop comes through the checker)"
    return "raised KeyboardInterrupt though nobody pressed Ctrl-C"


class _MainThread:
    """The main thread's ident, read once (and again in a forked child, whose main thread is the one that forked):
    a guarded run asks it every time, and ``threading.main_thread().ident`` is two calls of Python code."""

    ident = threading.main_thread().ident


def _forked() -> None:
    _MainThread.ident = threading.main_thread().ident  # threading's own hook, registered before this one, ran first


os.register_at_fork(after_in_child=_forked)


class Guard:
    """Runs a target's code: at most ``timeout`` seconds a run (None: no limit), stdout to stderr, exits turned into reports."""

    def __init__(self, target: str, timeout: float | None) -> None:
        self.target = target
        self.timeout = timeout
        self._running = False
        self._armed = False
        self._what = ""
        self._reading = False
        """The call has returned and its answer is being read (``answer``): reports say so."""
        self._where: Where = ""
        self._beacon: Beacon | None = None
        """The supervisor's beacon of the run in progress (``beacon.Installed``), read once a run."""

    def failure(self, problem: str, where: Where = "", kind: type[TargetCrash] = TargetCrash, deed: str = "") -> TargetCrash:
        """The report of ``problem`` (a sentence after the target's name), and where in the run it happened."""
        report = f"prefixspec: the cache `{self.target}` {problem}."
        place = where if isinstance(where, str) else where()
        if place:
            report += f" It happened {place}."
        return kind(report, problem, deed or problem)

    def run(
        self,
        what: str,
        where: Where,
        function: Callable[..., Result],
        *arguments: object,
        limit: bool = True,
        answer: Callable[[Result], Result] | None = None,
    ) -> Result:
        """``answer(function(*arguments))`` as the target's code ``what`` (``its stats()``); ``limit`` false: no time limit.

        What it raises leaves as ``plain.plain_error`` (its message read here,
        under the alarm), so that no code of the target's runs once the guard is
        off.  ``answer`` makes the result plain (``GuardedCache``), under the
        same guard and time limit: a report of what happens there says
        ``what (reading its answer)``.  ``where`` may be a function that says
        it: it is called only for a report (or a supervisor's beacon).
        """
        if self._running:  # the target's code calling the checker back into its own guard: the outer run already guards it
            value = function(*arguments)
            return value if answer is None else answer(value)
        self._running = True
        self._what, self._where, self._reading = what, where, False
        saved = sys.stdout
        timed = limit and self.timeout is not None
        beacon = self._beacon = Installed.beacon  # a supervised run: the supervisor learns the call, and ends one that outlasts the alarm
        if beacon is not None:
            if type(where) is CallPlace:
                beacon.enter_numbered(what, where.head, where.cache.calls_made, where.tail, timed)
            else:
                beacon.enter(what, where if isinstance(where, str) else where(), timed)
        try:
            sys.stdout = sys.stderr  # the target's prints go to stderr: stdout carries the report
            if timed and self.timeout is not None and threading.get_ident() == _MainThread.ident:
                self._armed = True  # signals reach the main thread alone: elsewhere there is no limit
                alarm.start(self, self.timeout)
            try:
                value = function(*arguments)
                if answer is None:
                    return value
                self._reading = True
                return answer(value)
            except (SystemExit, KeyboardInterrupt, TargetFailure):
                raise
            except MemoryError as error:  # no answer to compare: a replay or a shrink would run out again
                at, error.__traceback__ = raised_at(error), None  # its frames hold what the target allocated: freed for the report
                raise self.failure(f"ran out of memory (MemoryError) in {self._doing()}{at}; the check cannot go on", where, deed=f"ran out of memory (MemoryError){at}") from None
            except BaseException as error:  # the call's outcome, made the checker's own while the alarm still runs
                raise plain_error(error) from None
            finally:
                if self._armed:
                    self._armed = False
                    alarm.stop()  # from here on a ring does nothing, though the timer may still be set
        except (SystemExit, KeyboardInterrupt) as error:
            if isinstance(error, KeyboardInterrupt) and stop_requested():
                raise  # the user's Ctrl-C: the command stops
            at = raised_at(error)
            words = exit_words(error)
            raise self.failure(f"{words} in {self._doing()}{at}; a cache must not end the checker", where, deed=f"{words}{at}") from None
        finally:
            if beacon is not None:
                beacon.leave()
            sys.stdout = saved
            self._running = False

    def go_on_as(self, what: str, where: Where) -> None:
        """The run in progress goes on as the target's code ``what`` ``where`` (a call's digest, read in the call's
        own run): from here a report, and a supervisor's beacon, name it, and its time limit starts again."""
        self._what, self._where, self._reading = what, where, False
        beacon = self._beacon
        if beacon is not None:
            if type(where) is CallPlace:
                beacon.enter_numbered(what, where.head, where.cache.calls_made, where.tail, self._armed)
            else:
                beacon.enter(what, where if isinstance(where, str) else where(), self._armed)
        if self._armed and self.timeout is not None:
            alarm.start(self, self.timeout)

    def overran(self, frame: FrameType | None) -> None:
        """The alarm's word that the run in progress is past ``timeout``: it raises ``TargetHung``, naming the line it was on."""
        if not self._armed:
            return
        stuck = "" if frame is None else f", stopped at {_place(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)}"
        deed = f"did not return within {self.timeout:g} s (--timeout){stuck}"
        raise self.failure(f"hangs: {self._doing()} {deed}", self._where, TargetHung, deed)

    def _doing(self) -> str:
        return f"{self._what} (reading its answer)" if self._reading else self._what


class Counted(Protocol):
    """A cache that counts the calls made on it (``guarded.GuardedCache``)."""

    calls_made: int


class CallPlace:
    """Where a guarded cache's run is: ``at call N to a cache of block size B`` (``word`` at, or after), N its
    calls so far, read when it is said (a report, or a supervisor's beacon, which takes N as a number)."""

    __slots__ = ("cache", "head", "tail")

    def __init__(self, cache: Counted, word: str, block_size: int) -> None:
        self.cache = cache
        self.head = f"{word} call "
        self.tail = f" to a cache of block size {block_size}"

    def __call__(self) -> str:
        return f"{self.head}{self.cache.calls_made}{self.tail}"
