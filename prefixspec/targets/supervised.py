"""A run whose target cannot end the checker: the run forked into a child process that the checker supervises.

``supervise(work, timeout)`` forks.  The child runs ``work()`` (the command:
load the target, run the stages, build the report) in a process group of its
own, with the spec beside the target as before, so a call costs what it cost
in one process plus a write to shared memory (``beacon``).  The parent only
watches:

- the child's stdout and stderr (fd 1 and 2, whatever writes them: the
  checker, the target, its threads, C code) go to the parent's stderr; the
  report comes over a pipe of its own (``send``), so nothing the target
  prints can reach the report, and a target that closes its stdout closes a
  copy;
- the child's last word is its exit status (``send("status", N)``); a child
  that ends without it (``os._exit`` with any status, ``exit()`` from C, a
  signal, the out-of-memory killer) has failed as a program, and the parent
  names the call it was in, read from the beacon;
- a call under ``--timeout`` still running ``GRACE`` seconds past its limit
  (a target that masks SIGALRM, retries inside ``except BaseException``, or
  waits in C) is ended by killing the child's group;
- a Ctrl-C or a SIGTERM of the parent ends the child (SIGTERM, so an engine
  it drives is stopped on the way out; SIGKILL ``STOP_WITHIN`` seconds later)
  and the parent's caller prints what finished.

``supervise`` is one ``Supervised`` child watched to its end; several are
watched together with ``wait_any`` and stopped together with ``stop_all``
(``prefixspec.running.parallel``), their output relayed a whole line at a time.
The child's end of the message pipe is ``report_channel`` (``send``, re-exported here), and ending what a
child leaves behind is ``reaping``.
"""

from __future__ import annotations

import codecs
import os
import pickle
import select
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO, cast

from prefixspec.exit_status import ExitStatus
from prefixspec.targets.beacon import IDLE, TIMED, Beacon, Reading, install
from prefixspec.targets.reaping import children_of, end_orphans, kill_group, set_subreaper, wait_description
from prefixspec.targets.report_channel import LENGTH, Channel, ReportStream
from prefixspec.targets.report_channel import announce_stage as announce_stage
from prefixspec.targets.report_channel import send as send
from prefixspec.targets.report_channel import supervised_child as supervised_child

GRACE = 2.0
"""Seconds past ``--timeout`` that the child's own alarm has to interrupt a call before its process is killed."""

STOP_WITHIN = 1.0
"""Seconds a stopped child has to end its engines before its group is killed: with the kill and the report, within
the two seconds a stop promises on a loaded machine (1.5 measured 2.01 s at load 10 for a target that swallows it)."""

POLL = 0.1
"""Seconds between the parent's looks at the beacon."""

@dataclass
class Ended:
    """How a supervised child ended."""

    status: int | None
    """Its exit status, when it ended by its own last word; None when it ended otherwise."""
    how: str = ""
    """Otherwise, what ended it: ``exited with status 0 without a word``, ``was killed by signal SIGKILL``."""
    reading: Reading = Reading(0, IDLE, "", "")
    """The beacon at its end: the call it was in, the stage."""
    report: list[str] = field(default_factory=list)
    """What it printed for the report (stdout), to be printed once its end is known."""
    messages: list[tuple[str, object]] = field(default_factory=list)
    """Everything else it sent, in order."""
    hung: bool = False
    """It was killed for a call past ``--timeout`` plus ``GRACE``."""
    seconds: float = 0.0
    """From its start to its end."""

    def where(self) -> str:
        """The call the child was in, as a clause: ``in its insert() at call 3 ...`` or ``between calls (the last: ...)``."""
        reading = self.reading
        if not reading.call:
            return "before any of its code ran"
        if reading.state == IDLE:
            return f"outside its calls (the last one: {reading.call})"
        return f"in {reading.call}"

    def paragraph(self, target: str, during: str) -> str:
        """The one-paragraph report of a child that failed as a program during ``during`` (``the call machine stage``)."""
        if self.hung:
            return f"prefixspec: the cache `{target}` hangs: {self.where()}, during {during}, it {self.how}."
        return f"prefixspec: the cache `{target}` ended the checker's process: it {self.how} {self.where()}, during {during}; a cache must not end the checker."


def _die_with(parent: int) -> None:
    """End this child when ``parent`` ends, even by SIGKILL (a CI runner's time limit): no run goes on unwatched."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it ended before the line above took effect
        os._exit(ExitStatus.FAILED.value)


def _child(work: Callable[[], int], beacon: Beacon, message_fd: int, output_fd: int, parent: int) -> None:
    """The child's whole life: never returns, whatever ``work`` does (it ends the process with ``os._exit``)."""
    status = ExitStatus.FAILED.value
    try:
        _die_with(parent)
        for sibling in Supervised._live.values():  # the parent's other children are not this one's to watch
            for fd in (sibling.message_read, sibling.output_read):
                os.close(fd)
        Supervised._live, Supervised._reaping = {}, False
        os.setpgid(0, 0)  # its own group: the terminal's Ctrl-C reaches the parent only, and a kill reaches what the target started
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        Channel.fd = message_fd
        install(beacon)
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)
        sys.stdout = cast(TextIO, ReportStream())
        status = int(work())
        sys.stderr.flush()
        send("status", status)
    except BaseException:  # work() maps every outcome to a status; this is the checker's own failure: say so and end
        try:
            import traceback

            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
        finally:
            os._exit(ExitStatus.FAILED.value)
    os._exit(status)


class Supervised:
    """One supervised child, started at once (``work()`` forked into it); ``poll`` watches it, ``finish`` says how it ended.

    Several may run at once (``prefixspec.running.parallel``): each has its
    own beacon and pipes, and the parent's subreaper and orphan-ending are
    shared so that ending one child's leftovers never ends another child.
    """

    _live: dict[int, Supervised] = {}
    """The children started and not finished, by pid: never taken for another's orphans."""
    _reaping = False

    def __init__(self, work: Callable[[], int], timeout: float | None) -> None:
        self.timeout = timeout
        self.beacon = Beacon()
        self.already = children_of(os.getpid())
        if not Supervised._live:  # what the run leaves behind, in any process group or session, comes back to this process
            Supervised._reaping = set_subreaper(True)
        message_read, message_write = os.pipe()
        output_read, output_write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(message_read)
            os.close(output_read)
            _child(work, self.beacon, message_write, output_write, parent)
        os.close(message_write)
        os.close(output_write)
        self.pid, self.message_read, self.output_read = pid, message_read, output_read
        Supervised._live[pid] = self
        self.ended = Ended(None)
        self.open_fds = {message_read, output_read}
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._line = ""
        self._messages = bytearray()
        self._seen_serial, self._seen_since = -1, time.monotonic()
        self._hung = ""
        self._wait_status: int | None = None
        self._exited_at: float | None = None
        self.done = False
        self.started = time.monotonic()

    def read(self, fd: int) -> None:
        """Take what ``fd`` (one of ``open_fds``) holds: its output to stderr a whole line at a time, its messages."""
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            self.open_fds.discard(fd)
        elif fd == self.output_read:
            # Whole lines only, so that the lines of children running side by side never interleave mid-line.
            self._line += self._decoder.decode(chunk)
            cut = self._line.rfind("\n") + 1
            if cut:
                sys.stderr.write(self._line[:cut])
                sys.stderr.flush()
                self._line = self._line[cut:]
        else:
            self._messages.extend(chunk)
            _take_messages(self._messages, self.ended)

    def poll(self) -> bool:
        """Look at the child once (its exit, its beacon's call past ``--timeout``); True once it has ended and can be finished."""
        if self._wait_status is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self._wait_status, self._exited_at = status, time.monotonic()
        if self._wait_status is not None and (not self.open_fds or time.monotonic() - (self._exited_at or 0.0) > 0.5):
            return True  # ended, its pipes drained (or held open by something it left behind, which the kill in finish ends)
        reading = self.beacon.read()
        if self.timeout is not None and reading.state == TIMED and not self._hung:
            if reading.serial != self._seen_serial:
                self._seen_serial, self._seen_since = reading.serial, time.monotonic()
            elif time.monotonic() - self._seen_since > self.timeout + GRACE:
                self._hung = (
                    f"did not return within {self.timeout:g} s (--timeout) and ran on past the alarm that should have "
                    f"interrupted it (a masked SIGALRM, a retry that swallows it, or code in C), so its process was killed"
                )
                kill_group(self.pid, signal.SIGKILL)
        return False

    def finish(self) -> Ended:
        """How the child ended (after ``poll`` said so, or after ``stop``); its group killed, its leftovers ended, its pipes closed."""
        if self.done:
            return self.ended
        self.done = True
        kill_group(self.pid, signal.SIGKILL)  # whatever the target started in its group goes with it
        tail = self._line + self._decoder.decode(b"", final=True)
        if tail:
            sys.stderr.write(tail)
            sys.stderr.flush()
        ended, wait_status = self.ended, self._wait_status
        ended.reading = self.beacon.read()
        ended.seconds = time.monotonic() - self.started
        announced = next((value for kind, value in reversed(ended.messages) if kind == "status"), None)
        if self._hung:
            ended.how, ended.hung = self._hung, True
        elif isinstance(announced, int) and wait_status is not None and os.WIFEXITED(wait_status) and os.WEXITSTATUS(wait_status) == announced:
            ended.status = announced
        else:
            ended.how = wait_description(wait_status) if wait_status is not None else "ended"
        self._close()
        return ended

    def _close(self) -> None:
        Supervised._live.pop(self.pid, None)
        end_orphans(self.already | set(Supervised._live))
        if not Supervised._live and Supervised._reaping:
            set_subreaper(False)
            Supervised._reaping = False
        for fd in (self.message_read, self.output_read):
            try:
                os.close(fd)
            except OSError:
                pass
        self.open_fds.clear()
        self.beacon.memory.close()


def wait_any(children: list[Supervised], timeout: float = POLL) -> list[Supervised]:
    """Up to ``timeout`` seconds of watching ``children`` together; those that have ended (to be ``finish``ed)."""
    fds = {fd: child for child in children for fd in child.open_fds}
    if fds:
        readable, _, _ = select.select(list(fds), [], [], timeout)
        for fd in readable:
            fds[fd].read(fd)
    else:
        time.sleep(timeout / 5)
    return [child for child in children if child.poll()]


def stop_all(children: list[Supervised]) -> None:
    """End children on the user's stop: SIGTERM (their engines stop on the way out), SIGKILL STOP_WITHIN seconds later.

    Their output meanwhile is drained and dropped, so that none blocks on a full pipe while it unwinds."""
    for child in children:
        child.beacon.ask_stop()
        kill_group(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WITHIN
    waiting = list(children)
    while waiting and time.monotonic() < deadline:
        for child in list(waiting):
            try:
                done, _ = os.waitpid(child.pid, os.WNOHANG)
            except ChildProcessError:
                done = child.pid
            if done:
                waiting.remove(child)
        fds = [fd for child in waiting for fd in child.open_fds]
        try:
            readable, _, _ = select.select(fds, [], [], 0.05) if fds else ([], [], [])
            for fd in readable:
                os.read(fd, 1 << 16)
        except (OSError, ValueError):
            time.sleep(0.05)
    for child in children:
        kill_group(child.pid, signal.SIGKILL)
        try:
            os.waitpid(child.pid, 0)
        except ChildProcessError:
            pass
        child._line = ""
        child.done = True
        child._close()


def supervise(work: Callable[[], int], timeout: float | None) -> Ended:
    """``work()`` in a supervised child (see the module's docstring); how it ended.

    A Ctrl-C or SIGTERM of this process (``KeyboardInterrupt``) ends the child
    and goes on to the caller, with what the child sent so far as the
    exception's ``prefixspec_ended``.
    """
    child = Supervised(work, timeout)
    try:
        while not wait_any([child]):
            pass
    except BaseException as stop:
        stop_all([child])
        stop.prefixspec_ended = child.ended  # type: ignore[attr-defined]  # what finished, for the caller's report
        raise
    return child.finish()


def _take_messages(buffer: bytearray, ended: Ended) -> None:
    while len(buffer) >= LENGTH.size:
        (length,) = LENGTH.unpack_from(buffer, 0)
        if len(buffer) < LENGTH.size + length:
            return
        payload = bytes(buffer[LENGTH.size : LENGTH.size + length])
        del buffer[: LENGTH.size + length]
        try:
            kind, value = pickle.loads(payload)
        except Exception:  # a target that wrote into the checker's pipe: its message is not the checker's
            continue
        if kind == "out" and isinstance(value, str):
            ended.report.append(value)
        elif isinstance(kind, str):
            ended.messages.append((kind, value))
