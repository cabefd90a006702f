"""The user's Ctrl-C (or a SIGTERM) told apart from a ``KeyboardInterrupt`` that a target raises itself.

Both arrive as ``KeyboardInterrupt``.  The first stops the command (exit 130,
143 for SIGTERM; no report); the second is the target failing as a program,
which the checker reports like any other failure.  ``watching_stop_signals``
installs a handler for SIGINT and SIGTERM that notes the signal before
raising ``KeyboardInterrupt``, as Python's own SIGINT handler does, so that a
SIGTERM too unwinds through the code that stops engines; code that runs a
target asks ``stop_requested`` which of the two it caught.
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

from spec.api import TargetFailure
from prefixspec.targets.beacon import current

if TYPE_CHECKING:  # the type of the hook's argument exists only in the stubs
    from sys import UnraisableHookArgs

STOP_SIGNALS: dict[signal.Signals, Callable[[int, FrameType | None], object] | int | None] = {
    signal.SIGINT: signal.default_int_handler,
    signal.SIGTERM: signal.SIG_DFL,
}
"""The signals that stop a command, each with the handler it must have for the checker to take it over."""

REDELIVERY_DELAY = 0.05
"""Seconds after a swallowed stop before it is sent again: enough to leave the place that ignored it."""


class _Received:
    """The stop signal that arrived since ``watching_stop_signals`` began (a signal handler's one piece of state)."""

    signum: int | None = None


class OwnStopSignal(KeyboardInterrupt):
    """SIGINT or SIGTERM in a supervised child that its supervisor did not send: the target's own (``signum``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _note_and_interrupt(signum: int, frame: FrameType | None) -> None:
    # In a supervised child only its supervisor stops the run (the user's keys reach the supervisor alone), and it
    # says so in the beacon first; a signal without that word is the target's own (it signalled itself), as
    # unnoted as a KeyboardInterrupt it raises.
    supervisor = current()
    if supervisor is not None and not supervisor.stop_asked():
        raise OwnStopSignal(signum)
    _Received.signum = signum
    raise KeyboardInterrupt


def _redeliver_or(previous: Callable[[UnraisableHookArgs], object]) -> Callable[[UnraisableHookArgs], object]:
    """An unraisable hook that raises the user's swallowed KeyboardInterrupt again, and leaves the rest to ``previous``.

    A signal handler's exception is raised wherever the main thread happens
    to be, also where Python can only print and ignore it: a garbage
    collector's callback (Hypothesis has one), a ``__del__``, a weakref
    callback.  There the Ctrl-C would be lost and the command run on; sent
    again a moment later, from another thread, it arrives at the main
    thread's next ordinary line.  (Sent from the hook itself, it would be
    raised inside the hook, and ignored again.)
    """

    def hook(unraisable: UnraisableHookArgs) -> object:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _Received.signum is not None:
            again = threading.Timer(REDELIVERY_DELAY, _interrupt_if_still_watched)
            again.daemon = True
            again.start()
            return None
        if isinstance(unraisable.exc_value, TargetFailure):
            return None  # a call's alarm raised in a garbage collector's callback: its repeating timer raises it again
        return previous(unraisable)

    return hook


def _interrupt_if_still_watched() -> None:
    signum = _Received.signum
    if signum is not None:  # the command may have ended meanwhile: then nobody waits for it
        _thread.interrupt_main(signal.Signals(signum))


def stop_requested() -> bool:
    """True once the user pressed Ctrl-C (or sent SIGTERM) while ``watching_stop_signals`` was in force."""
    return _Received.signum is not None


def stop_signal() -> int | None:
    """The stop signal that arrived (``signal.SIGINT``, ``signal.SIGTERM``), or None."""
    return _Received.signum


@contextmanager
def watching_stop_signals() -> Iterator[None]:
    """For the block's duration, SIGINT and SIGTERM raise KeyboardInterrupt and are remembered.

    Does nothing outside the main thread, and leaves alone a signal whose
    handler is not Python's default (ignored by a parent, or the caller's
    own): that choice is not the checker's to override.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = [signum for signum, default in STOP_SIGNALS.items() if signal.getsignal(signum) is default]
    _Received.signum = None
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _redeliver_or(previous_hook)
    for signum in taken:
        signal.signal(signum, _note_and_interrupt)
    try:
        yield
    finally:
        for signum in taken:
            signal.signal(signum, STOP_SIGNALS[signum])
        sys.unraisablehook = previous_hook
        _Received.signum = None
