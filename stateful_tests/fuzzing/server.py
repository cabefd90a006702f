"""The fork server: one process that imports the checker once, then forks a fresh child to run each case.

    python -m stateful_tests.fuzzing.server      # requests on stdin, replies on stdout, one JSON line each

A child is a process of its own, as ``prefixspec`` started from a shell would
be, minus the half second of imports: it gets its own process group, stdin
from /dev/null, stdout and stderr into files, the case's environment and
working directory, and runs ``prefixspec`` as the console script does
(``sys.exit(main(argv))``, a traceback for anything uncaught), so Python's
own exit handlers (atexit, which ends engines) run as they would.  The server
waits for it within the case's time limit (a SIGINT at the limit, as a
user's Ctrl-C, then SIGKILL), optionally sends SIGINT earlier on purpose, and
then looks for processes the case left behind: every process started under
the case carries ``PREFIXSPEC_FUZZ_CASE`` in its environment, and one still
running after the child has exited (zombies are dead) is a leak, reported and
killed.
"""

from __future__ import annotations

import atexit
import itertools
import os
import select
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import IO, NoReturn

from prefixspec.commands.main import main as prefixspec_main
from stateful_tests.fuzzing.sandbox import Case, Ran

MARKER = "PREFIXSPEC_FUZZ_CASE"
"""The environment variable that marks every process a case started."""

KEPT_OUTPUT = 1 << 20
"""Bytes of a case's stdout and of its stderr kept in a reply (the last ones)."""

GRACE = 3.0
"""Seconds a case gets between the SIGINT at its time limit and SIGKILL."""

SETTLE = 30.0
"""Seconds a marked process gets to finish dying after the case ended, before it counts as left behind: a guard, not a
budget (the wait ends as soon as none is left; a loaded machine may take seconds to let a dying engine go)."""


def console_status(argv: Sequence[str]) -> int:
    """``prefixspec ARGV`` as the console script runs it: its exit status, a traceback printed for anything uncaught."""
    try:
        return prefixspec_main(list(argv))
    except SystemExit as exit:  # argparse's usage errors, and anything else that exits
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        traceback.print_exc()
        return 130
    except BaseException:  # what Python itself would do at the top: print the traceback, exit 1
        traceback.print_exc()
        return 1


def child(case: Case, marker: str, out: IO[bytes], err: IO[bytes]) -> NoReturn:
    """The forked child: set up as a fresh process would be, run the command, exit through Python's shutdown."""
    os.setpgid(0, 0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    os.environ.update(case.env)
    os.environ[MARKER] = marker
    os.chdir(case.cwd)
    sys.argv = ["prefixspec", *case.argv]
    status = console_status(case.argv)
    # What Python's shutdown does that a command relies on (atexit ends engines, and prints nothing of
    # its own unless something is wrong), without the teardown of every module: tens of milliseconds a case.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def marked_processes(marker: str) -> list[tuple[int, str]]:
    """Every live process (not a zombie) whose environment carries the case's marker, with its command line."""
    needle = f"{MARKER}={marker}".encode()
    found: list[tuple[int, str]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state not in ("Z", "X"):
            found.append((int(entry.name), command))
    return found


def left_behind(marker: str) -> list[str]:
    """The case's processes still running once it has settled; each is killed, and named."""
    settle_until = time.monotonic() + SETTLE
    found = marked_processes(marker)
    while found and time.monotonic() < settle_until:
        time.sleep(0.05)
        found = marked_processes(marker)
    for pid, _ in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return [f"pid {pid}: {command}" for pid, command in found]


def wait_for(pid: int, seconds: float) -> bool:
    """Wait up to ``seconds`` for the child ``pid`` to exit (not reaped yet); True when it did."""
    descriptor = os.pidfd_open(pid)
    try:
        readable, _, _ = select.select([descriptor], [], [], max(0.0, seconds))
        return bool(readable)
    finally:
        os.close(descriptor)


def signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except OSError:
        pass


def tail(file: IO[bytes]) -> str:
    file.seek(0, os.SEEK_END)
    size = file.tell()
    file.seek(max(0, size - KEPT_OUTPUT))
    return file.read().decode("utf-8", "replace")


def run_case(case: Case, serial: int) -> Ran:
    """Fork, run, wait within the limit, collect: what one case did."""
    marker = f"{os.getpid()}-{serial}"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            child(case, marker, out, err)
        timed_out = False
        if case.interrupt_after is not None and not wait_for(pid, case.interrupt_after):
            signal_group(pid, signal.SIGINT)  # the user's Ctrl-C: the terminal signals the whole foreground group
        if not wait_for(pid, case.timeout - (time.monotonic() - started)):
            timed_out = True
            signal_group(pid, signal.SIGINT)
            if not wait_for(pid, GRACE):
                signal_group(pid, signal.SIGKILL)
        _, wait_status = os.waitpid(pid, 0)
        seconds = time.monotonic() - started
        return Ran(
            status=os.waitstatus_to_exitcode(wait_status),
            stdout=tail(out),
            stderr=tail(err),
            seconds=seconds,
            timed_out=timed_out,
            leaked=tuple(left_behind(marker)),
        )


def serve() -> None:
    # As an interactive start would have it, whatever the parent (a pytest worker) did to SIGINT: the cases press Ctrl-C.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for serial in itertools.count(1):
        line = sys.stdin.readline()
        if not line:
            return
        ran = run_case(Case.of_json(line), serial)
        sys.stdout.write(ran.as_json() + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
