"""Processes a test left running: found by a token in their command line, or as orphans of this checkout.

A test that starts a helper which outlives its engine on purpose (a negative
control with no subreaper) gives it a unique token (``unique_seconds``: a
``sleep`` of an odd fraction of a second) and ends every process holding it
with ``end_marked``, in a ``finally``: an engine started three times by one
replay starts three helpers, and a pid file names only the last.

    python -m stateful_tests.leftovers      # orphans (parent 1) whose command line names this checkout or sleep

prints one line per such process; run it before and after a test file and
compare (the machine is shared: other checkouts' orphans are listed apart).
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def unique_seconds(whole: int) -> str:
    """``whole`` seconds and a fraction no other run draws: a ``sleep`` argument that marks its process."""
    return f"{whole}.{uuid.uuid4().int % 10**9:09d}"


def _processes() -> list[tuple[int, int, str]]:
    """Every live process as (pid, parent pid, command line); zombies and processes that ended meanwhile left out."""
    found: list[tuple[int, int, str]] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        if fields[0] in ("Z", "X") or not command:
            continue
        found.append((int(entry), int(fields[1]), command))
    return found


def marked(token: str) -> list[int]:
    """The live processes whose command line holds ``token``, this one apart."""
    return [pid for pid, _, command in _processes() if token in command and pid != os.getpid()]


def end_marked(token: str) -> list[int]:
    """SIGKILL every live process whose command line holds ``token``; the ones it signalled."""
    ended: list[int] = []
    for pid in marked(token):
        try:
            os.kill(pid, signal.SIGKILL)
            ended.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return ended


def orphans(root: Path = ROOT) -> list[tuple[int, str]]:
    """Processes whose parent is 1 (their own has ended) and whose command line names ``root`` or ``sleep``."""
    return [(pid, command) for pid, parent, command in _processes() if parent == 1 and (str(root) in command or "sleep" in command.split(" ")[0])]


def main() -> int:
    for pid, command in orphans():
        here = "" if str(ROOT) in command or _cwd(pid).startswith(str(ROOT)) else "  (another checkout's, or not a test's)"
        print(f"{pid} {command[:160]}{here}")
    return 0


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main())
