"""A Python target's own code, run under guard: a per-call time limit, its prints kept off the report, its exits reported.

``guarded(factory, name, timeout)`` is a cache factory whose caches are the
target's, each call of the interface made through a ``Guard``:

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

import functools
import itertools
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TypeVar, cast

from spec.api import DIGEST_FEATURE, CacheFactory, NodeId, PrefixCache, Snapshot, TargetFailure
from prefixspec.targets import alarm
from prefixspec.targets.beacon import current
from prefixspec.targets import interrupts
from prefixspec.targets.interrupts import stop_requested
from prefixspec.targets.plain import _Named, plain_data, plain_error, plain_result
from prefixspec.vocabulary import BY_METHOD, CALLS, FEATURES, CallThrough, WrongResult, features_of

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
        beacon = current()  # a supervised run: the supervisor learns the call, and ends one that outlasts the alarm
        if beacon is not None:
            if type(where) is CallPlace:
                beacon.enter_numbered(what, where.head, where.cache.calls_made, where.tail, timed)
            else:
                beacon.enter(what, where if isinstance(where, str) else where(), timed)
        try:
            sys.stdout = sys.stderr  # the target's prints go to stderr: stdout carries the report
            if timed and self.timeout is not None and threading.get_ident() == threading.main_thread().ident:
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

    def overran(self, frame: FrameType | None) -> None:
        """The alarm's word that the run in progress is past ``timeout``: it raises ``TargetHung``, naming the line it was on."""
        if not self._armed:
            return
        stuck = "" if frame is None else f", stopped at {_place(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)}"
        deed = f"did not return within {self.timeout:g} s (--timeout){stuck}"
        raise self.failure(f"hangs: {self._doing()} {deed}", self._where, TargetHung, deed)

    def _doing(self) -> str:
        return f"{self._what} (reading its answer)" if self._reading else self._what


class CallPlace:
    """Where a guarded cache's run is: ``at call N to a cache of block size B`` (``word`` at, or after), N its
    calls so far, read when it is said (a report, or a supervisor's beacon, which takes N as a number)."""

    __slots__ = ("cache", "head", "tail")

    def __init__(self, cache: GuardedCache, word: str, block_size: int) -> None:
        self.cache = cache
        self.head = f"{word} call "
        self.tail = f" to a cache of block size {block_size}"

    def __call__(self) -> str:
        return f"{self.head}{self.cache.calls_made}{self.tail}"


class GuardedNode:
    """The checker's name for a node a target returned: compared and hashed as itself, never as the target's object.

    ``GuardedCache.node`` makes one per node (``cache``, ``number``) and hands it
    out again for that node, so identity is equality, at C speed: a dataclass's
    ``==`` and ``hash`` over ``(cache, number)`` ran Python code at every lookup
    of a node's handle (a comparison and a lookup: 0.34 us, now 0.10, timeit).
    Two nodes the target's own ``==`` finds equal get one name (the table of
    ``GuardedCache.node`` looks them up under guard); ``raw`` goes back to the
    target when a call passes the node.
    """

    __slots__ = ("cache", "number", "raw")

    def __init__(self, cache: int, number: int, raw: object) -> None:
        self.cache = cache
        self.number = number
        self.raw = raw

    def __repr__(self) -> str:
        return f"<node {self.number} of guarded cache {self.cache}>"


class UnhashableNode:
    """A node the target returned that cannot be hashed: no handle can name it (``CallRunner`` writes ``unhashable TYPE``)."""

    __hash__ = None  # type: ignore[assignment]  # unhashable on purpose, as the target's node was

    def __init__(self, raw: object) -> None:
        self.raw = raw

    def __repr__(self) -> str:
        return f"<unhashable node of type {type(self).__name__}>"


_DOING = {kind.method: f"its {kind.method}()" for kind in CALLS}
"""What a guarded call is doing, as reports say it."""

TAKES_NODE = frozenset(kind.method for kind in CALLS if any(param.kind == "node" for param in kind.params))
"""The calls that pass a node back to the target (``lock``, ``unlock``): only theirs are unwrapped."""


def _raw(argument: object) -> object:
    """What a call passes to the target: its own node for a ``GuardedNode`` (of any guarded cache: R6 wants foreign ones), else the argument."""
    return argument.raw if isinstance(argument, GuardedNode | UnhashableNode) else argument


class GuardedCache(CallThrough):
    """A target's cache, each call made through ``guard``, its results plain data (``plain``), to be checked by the caller.

    It overrides ``CallThrough.through`` rather than ``perform``: the target
    gets the caller's arguments as they are, not as the text of calls writes them.
    """

    _serials = itertools.count(1)

    def __init__(self, cache: PrefixCache, guard: Guard, block_size: int) -> None:
        self.cache = cache
        self.guard = guard
        self._block_size = block_size
        self.calls_made = 0
        self._serial = next(GuardedCache._serials)
        self._nodes: dict[object, GuardedNode] = {}
        self._answers: dict[str, Callable[[object], object]] = {}
        self._where = CallPlace(self, "at", block_size)
        self._after = CallPlace(self, "after", block_size)
        self.prefixspec_features = self._features()
        """What the target's cache offers beyond the interface: this wrapper has every call (``features_of``)."""

    def _features(self) -> frozenset[str]:
        """``features_of`` the target's cache, under guard: reading its attributes runs its code (a ``__getattr__`` that raises)."""
        where = f"while making a cache of block size {self._block_size}"
        try:
            return self.guard.run("reading its features (prefixspec_features, take_events, namespace arguments)", where, self._read_features)
        except (TargetFailure, KeyboardInterrupt):
            raise
        except BaseException as error:  # no call has the features as outcome: a cache whose attributes cannot be read stops the check
            raise self.guard.failure(
                f"raised {type(error).__name__}: {one_line(error)} when its features were read{raised_at(error)}", where
            ) from None

    def _read_features(self) -> frozenset[str]:
        declared = features_of(self.cache)
        # A plain set: ``in`` on the target's own runs here.  The digest is a Python cache's feature, not the protocol's.
        return frozenset(name for name in (*FEATURES, DIGEST_FEATURE) if name in declared)

    def node(self, raw: object) -> object:
        """The checker's name for the node ``raw`` (called under guard: the lookup runs the target's ``__hash__`` and ``__eq__``)."""
        try:
            known = self._nodes.get(raw)
        except TypeError:  # an unhashable node, of the type's own name (what CallRunner writes)
            return cast(Callable[[object], object], _Named.of(UnhashableNode, type(raw).__name__))(raw)
        if known is None:
            known = GuardedNode(self._serial, len(self._nodes), raw)
            self._nodes[raw] = known
        return known

    @property
    def root(self) -> NodeId:
        try:
            root: NodeId = self.guard.run("its root", self._where(), self._read_root, answer=self.node)
            return root
        except (TargetFailure, KeyboardInterrupt):
            raise
        except BaseException as error:  # no call has the root as outcome: a root that raises stops the check
            raise self.guard.failure(f"raised {type(error).__name__} when its root was read{raised_at(error)}", self._where()) from None

    def _read_root(self) -> object:
        return self.cache.root

    def block_size(self) -> int:
        return cast(int, self.guard.run("its block_size()", self._where, self._method, "block_size", (), answer=self._plain_size))

    def snapshot(self) -> Snapshot:
        return cast(Snapshot, self.guard.run("its snapshot()", self._after, self._method, "snapshot", (), answer=self._plain_snapshot))

    def snapshot_digest(self) -> int:
        """The target's snapshot digest, for a lockstep that compares by it (``spec.api.DIGEST_FEATURE``): a plain int."""
        return cast(int, self.guard.run("its snapshot_digest()", self._after, self._method, "snapshot_digest", (), answer=self._plain_digest))

    @staticmethod
    def _plain_digest(value: object) -> object:
        if type(value) is not int:  # said inside the guard: no code of the target's runs once it is off
            raise WrongResult(f"snapshot_digest returned {type(value).__name__}, not an int")
        return value

    @staticmethod
    def _plain_size(value: object) -> object:
        return plain_data(value, "block_size")

    @staticmethod
    def _plain_snapshot(value: object) -> object:
        if type(value) is not Snapshot:  # the lockstep's words for it, said inside the guard
            raise WrongResult(f"snapshot returned {type(value).__name__}, not a Snapshot")
        return plain_data(value, "snapshot")

    def through(self, method: str, *arguments: object, namespace: object = None) -> object:
        """Every call of the interface (``CallThrough``'s methods) comes here, its arguments as the caller gave them."""
        self.calls_made += 1
        answer = self._answers.get(method)
        if answer is None:
            answer = self._answers[method] = functools.partial(plain_result, BY_METHOD[method], node=self.node)
        return self.guard.run(_DOING[method], self._where, self._method, method, arguments, namespace, answer=answer)

    def _method(self, method: str, arguments: Sequence[object], namespace: object = None) -> object:
        function: Callable[..., object] = getattr(self.cache, method)  # inside the guard: reading it may run the target's code
        if method in TAKES_NODE:
            arguments = [_raw(argument) for argument in arguments]
        if namespace is not None:  # a cache without namespaces is called as before, in the default one
            return function(*arguments, namespace=namespace)
        return function(*arguments)


class GuardedFactory:
    """``factory`` under ``guard``: each cache it makes is a ``GuardedCache``; a factory that raises stops the check."""

    def __init__(self, factory: Callable[[int], object], guard: Guard) -> None:
        self.factory = factory
        self.guard = guard

    def __call__(self, block_size: int) -> PrefixCache:
        where = f"while making a cache of block size {block_size}"
        try:
            cache = self.guard.run(f"{self.guard.target}({block_size})", where, self.factory, block_size)
        except (TargetFailure, KeyboardInterrupt):
            raise
        except BaseException as error:  # a factory that cannot make a cache leaves nothing to compare
            raise self.guard.failure(f"raised {type(error).__name__}: {one_line(error)} when asked for a cache{raised_at(error)}", where) from None
        # The interface was checked on a sample when the target was loaded; a later cache that lacks a call crashes that call.
        return GuardedCache(cast(PrefixCache, cache), self.guard, block_size)


def guarded(factory: Callable[[int], object], target: str, timeout: float | None) -> CacheFactory:
    """``factory``'s caches, every call under a ``Guard`` with ``timeout`` seconds a call (None: no limit)."""
    return GuardedFactory(factory, Guard(target, timeout))
