"""Work spread over supervised worker processes, at most N at once (``check -j N``, ``hunt -j N``).

Each piece of work runs in a child of ``prefixspec.targets.supervised``, as
one run in one child does: whatever the target does to its process, the
child's end is told apart from its work's and the call it was in is read from
its beacon; a call past ``--timeout`` plus ``GRACE`` gets its child killed.
The pool only decides what runs when: the work starts in the order given, the
caller hears of each piece as it ends (in the order they end) and may drop
pieces that are no longer wanted, and a Ctrl-C or SIGTERM stops every child
(``supervised.STOP_WITHIN`` seconds each, all at once) before it goes on.
The children's output reaches stderr a whole line at a time, so the progress
lines of several workers never interleave mid-line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TypeVar

from prefixspec.targets.supervised import Ended, Supervised, stop_all, wait_any

Key = TypeVar("Key", bound=Hashable)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1: ``-j``'s default."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


def run_pool(
    works: Mapping[Key, Callable[[], int]],
    jobs: int,
    timeout: float | None,
    ended: Callable[[Key, Ended], Iterable[Key]],
    starting: Callable[[Key], None] | None = None,
) -> dict[Key, Ended]:
    """Each of ``works`` in a supervised child, at most ``jobs`` at once, started in the mapping's order; how each ended.

    ``ended(key, how)`` is told of each child as it ends, in the order they
    end; the keys it returns are dropped: never started, or stopped if they
    run (their ends are not returned).  ``timeout`` is the per-call
    ``--timeout`` the children's hangs are judged by.  A KeyboardInterrupt
    (the user's Ctrl-C or SIGTERM) stops every running child and goes on to
    the caller with the ends so far as the exception's ``prefixspec_finished``.
    ``starting(key)``, if given, is told of each just before it starts.
    """
    pending = list(works)
    running: dict[Key, Supervised] = {}
    finished: dict[Key, Ended] = {}
    try:
        while pending or running:
            while pending and len(running) < max(1, jobs):
                key = pending.pop(0)
                if starting is not None:
                    starting(key)
                running[key] = Supervised(works[key], timeout)
            for child in wait_any(list(running.values())):
                keys = [key for key, each in running.items() if each is child]
                if not keys:
                    continue  # ended at the same moment as one whose end dropped it: stopped above, its end unwanted
                key = keys[0]
                del running[key]
                finished[key] = child.finish()
                dropped = set(ended(key, finished[key]))
                pending = [key for key in pending if key not in dropped]
                stopping = [running.pop(key) for key in list(running) if key in dropped]
                if stopping:
                    stop_all(stopping)
    except BaseException as stop:
        stop_all(list(running.values()))
        stop.prefixspec_finished = finished  # type: ignore[attr-defined]  # what finished, for the caller's report
        raise
    return finished
