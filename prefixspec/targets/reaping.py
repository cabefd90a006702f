"""Ending what a supervised child leaves behind (``prefixspec.targets.supervised``): its group, its orphans, and the
words for how it ended.  Linux-first: the subreaper and ``/proc`` are used where they exist and skipped where not."""

from __future__ import annotations

import os
import signal

def wait_description(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = str(number)
        extra = " (out of memory, or killed from outside)" if number == signal.SIGKILL else ""
        return f"was killed by signal {name}{extra}"
    code = os.waitstatus_to_exitcode(status)
    return f"exited with status {code} without a report"


def set_subreaper(on: bool) -> bool:
    """Make this process the subreaper of its descendants (Linux ``PR_SET_CHILD_SUBREAPER``); False where it cannot."""
    try:
        import ctypes

        return int(ctypes.CDLL(None, use_errno=True).prctl(36, int(on), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def children_of(pid: int) -> set[int]:
    children: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return children
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 1 and int(fields[1]) == pid:
            children.add(int(entry))
    return children


def end_orphans(already: set[int]) -> None:
    """Kill the processes the run left behind (an engine's helper that made its own group or session), as they come back here."""
    for _ in range(50):
        orphans = children_of(os.getpid()) - already
        if not orphans:
            return
        for orphan in orphans:
            try:
                os.kill(orphan, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for orphan in orphans:
            try:
                os.waitpid(orphan, 0)
            except ChildProcessError:
                pass


def kill_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
