"""The user's Ctrl-C told apart from a ``KeyboardInterrupt`` that a target raises itself.

Both arrive as ``KeyboardInterrupt``.  The first stops the command (exit 130,
no report); the second is the target failing as a program, which the checker
reports like any other failure.  ``watching_ctrl_c`` installs a SIGINT handler
that notes the press before raising, as Python's own handler does; code that
runs a target asks ``ctrl_c_pressed`` which of the two it caught.
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

if TYPE_CHECKING:  # the type of the hook's argument exists only in the stubs
    from sys import UnraisableHookArgs


class _Presses:
    """Whether SIGINT arrived since ``watching_ctrl_c`` began (a signal handler's one piece of state)."""

    pressed = False


def _note_and_interrupt(signum: int, frame: FrameType | None) -> None:
    _Presses.pressed = True
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
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _Presses.pressed:
            again = threading.Timer(REDELIVERY_DELAY, _interrupt_if_still_watched)
            again.daemon = True
            again.start()
            return None
        return previous(unraisable)

    return hook


REDELIVERY_DELAY = 0.05
"""Seconds after a swallowed Ctrl-C before it is sent again: enough to leave the place that ignored it."""


def _interrupt_if_still_watched() -> None:
    if _Presses.pressed:  # the command may have ended meanwhile: then nobody waits for it
        _thread.interrupt_main(signal.SIGINT)


def ctrl_c_pressed() -> bool:
    """True once the user pressed Ctrl-C (SIGINT) while ``watching_ctrl_c`` was in force."""
    return _Presses.pressed


@contextmanager
def watching_ctrl_c() -> Iterator[None]:
    """For the block's duration, SIGINT raises KeyboardInterrupt as usual and is remembered.

    Does nothing outside the main thread, or when SIGINT is not Python's
    default handler (ignored by a parent, or the caller's own): that choice is
    not the checker's to override.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    _Presses.pressed = False
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _redeliver_or(previous_hook)
    signal.signal(signal.SIGINT, _note_and_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.unraisablehook = previous_hook
        _Presses.pressed = False
