"""One engine process over the line protocol: started, spoken with line by line under time limits, and stopped.

``EngineProcess`` runs an engine command in its own process group, its
stderr in a file, and exchanges lines with it: the handshake, then one line per
call (a snapshot sent ahead in the same write when asked), each answer checked
to echo the call it answers.  An engine that crashes, hangs past its limit,
prints something that is not an answer, or answers another call than the one
sent, raises ``EngineProtocolError``: one paragraph naming the problem, the
engine's last stderr lines and the last lines exchanged.  ``targets.pipe``
pools these processes behind its caches.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import tempfile
import time
import weakref
from collections import deque
from typing import IO, NoReturn

from spec.api import TargetFailure
from prefixspec.formats.protocol import HANDSHAKE, PROTOCOL_VERSION, parse_greeting
from prefixspec.vocabulary import Call, TraceFormatError, parse_call

DEFAULT_TIMEOUT = 5.0
"""Seconds an engine may take to answer one line, once it has answered the handshake."""

DEFAULT_START_TIMEOUT = 30.0
"""Seconds an engine process may take to answer the handshake: its start, which may load a model or torch."""

HISTORY = 12
"""Lines sent and received that a report shows."""

LONGEST_LINE = 1 << 24
"""An answer longer than this many bytes is garbage (16 MiB)."""

LONGEST_HANDSHAKE = 4096
"""An answer to the handshake longer than this many bytes is refused at once: a name and a few features fit in far less."""

SHOWN_CHARS = 160
"""Each line in a report is cut to this many characters."""

STDERR_PART = 4096
"""Bytes read from each end of an engine's stderr for a report: its first lines and its last."""


class EngineProtocolError(TargetFailure):
    """An engine that broke the line protocol; the message is the whole report, one paragraph."""

    def __init__(self, report: str, *, before_handshake: bool = False) -> None:
        super().__init__(report)
        self.report = report
        self.before_handshake = before_handshake

    def __str__(self) -> str:
        return self.report


def shown(line: str, *, with_length: bool = True) -> str:
    if len(line) <= SHOWN_CHARS:
        return line
    return f"{line[:SHOWN_CHARS]}... ({len(line):,} characters)" if with_length else f"{line[:SHOWN_CHARS]}..."


def _log_lines(data: bytes) -> list[str]:
    """The lines of a log that hold something, as text (lines end at \\n, as everywhere in the checker)."""
    return [line.strip() for line in data.decode("utf-8", "replace").split("\n") if line.strip()]


class EngineProcess:
    """One running engine: its pipes, its stderr in a file, and the last lines exchanged."""

    def __init__(self, command: str, timeout: float, start_timeout: float = DEFAULT_START_TIMEOUT) -> None:
        self.command = command
        self.timeout = timeout
        self.limit, self.limit_option = start_timeout, "--start-timeout"
        """The limit on the line now exchanged, and the option that sets it: the start's until the handshake is answered."""
        self.history: deque[str] = deque(maxlen=HISTORY)
        self.failure: EngineProtocolError | None = None
        self.greeted = False
        self.engine_name = ""
        self.features: frozenset[str] = frozenset()
        """What the engine said it offers in the handshake (``namespaces``, ``events``)."""
        self.context = "during the handshake"
        self.pending: str | None = None
        """A line sent ahead whose answer is not read yet (the snapshot after a call)."""
        self._buffer = bytearray()
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        try:
            self.process = subprocess.Popen(
                command,
                shell=True,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                bufsize=0,
                start_new_session=True,  # its own process group, so a stop reaches whatever the shell started
            )
        except OSError as error:
            self._stderr.close()
            raise EngineProtocolError(f"prefixspec: cannot start the engine `{command}`: {error}.", before_handshake=True) from None
        # From here on the group dies with this object unless stop() ends it first, so an engine dropped
        # half started (a Ctrl-C during the handshake) does not outlive it.  Not at exit: there every
        # PipeEngine closes its processes politely (pipe._close_every_engine), idle and busy alike.
        self._reaper = weakref.finalize(self, _kill_group, self.process)
        self._reaper.atexit = False
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin = self.process.stdin.fileno()
        self._stdout = self.process.stdout.fileno()
        os.set_blocking(self._stdin, False)
        os.set_blocking(self._stdout, False)
        try:
            answer = self.exchange(HANDSHAKE, None)
        except BaseException:  # a failed handshake has stopped it already; anything else (Ctrl-C) stops it now
            self.stop()
            raise
        if answer != "ok" and not answer.startswith("ok "):
            self.fail(f"failed the handshake: it answered `{shown(answer)}` to `{HANDSHAKE}`, where `ok` was expected (this checker speaks version {PROTOCOL_VERSION})")
        self.engine_name, self.features = parse_greeting(answer[3:])
        self.greeted = True
        self.limit, self.limit_option = timeout, "--timeout"

    # Reports ------------------------------------------------------------------------------

    def stderr_tail(self) -> str:
        """The engine's first and last stderr lines (a panic's message comes first, a Python traceback's last)."""
        try:
            size = os.fstat(self._stderr.fileno()).st_size
            self._stderr.seek(0)
            if size <= 2 * STDERR_PART:
                lines, tail = _log_lines(self._stderr.read()), []
            else:  # both ends of a long log, never the whole of it
                lines = _log_lines(self._stderr.read(STDERR_PART))
                self._stderr.seek(size - STDERR_PART)
                tail = _log_lines(self._stderr.read().partition(b"\n")[2])  # from its first whole line on
        except (OSError, ValueError):
            return ""
        if tail:
            lines = [*lines[:2], "...", *tail[-2:]]
        elif len(lines) > 4:
            lines = [*lines[:2], "...", *lines[-2:]]
        return " | ".join(shown(line, with_length=False) for line in lines)

    def fail(self, problem: str) -> NoReturn:
        """Stop the engine and raise the report of ``problem``; every later call raises it again."""
        self.stop()
        who = f"the engine `{self.command}`" + (f" ({self.engine_name})" if self.engine_name else "")
        report = f"prefixspec: {who} {problem}. It happened {self.context}."
        stderr = self.stderr_tail()
        if stderr:
            report += f' Its stderr: "{stderr}".'
        report += " The last lines exchanged, oldest first (> sent, < received):"
        if self.history:
            report += "\n" + "\n".join(f"  {line}" for line in self.history)
        else:
            report += " none"
        self.failure = EngineProtocolError(report, before_handshake=not self.greeted)
        raise self.failure

    def exit_description(self) -> str:
        try:
            status = self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "closed its stdout but kept running"
        if status < 0:
            try:
                return f"was killed by signal {signal.Signals(-status).name}"
            except ValueError:
                return f"was killed by signal {-status}"
        hint = {126: " (the shell could not execute the command)", 127: " (the shell did not find the command)"}.get(status, "")
        return f"exited with status {status}{hint}"

    # Lines --------------------------------------------------------------------------------

    def _send(self, line: str, *ahead: str) -> None:
        data = "".join(f"{text}\n" for text in (line, *ahead)).encode("utf-8")
        deadline = time.monotonic() + self.limit
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.fail(f"hangs: it did not read the call `{shown(line)}` within {self.limit:g} s ({self.limit_option}), so it was stopped")
            _, writable, _ = select.select([], [self._stdin], [], remaining)
            if not writable:
                continue
            try:
                written = os.write(self._stdin, data)
            except BrokenPipeError:
                self.fail(f"crashed: it {self.exit_description()} before reading the call `{shown(line)}`")
            except BlockingIOError:
                continue
            data = data[written:]

    def _receive(self, line: str) -> str:
        deadline = time.monotonic() + self.limit
        while True:
            end = self._buffer.find(b"\n")
            if not self.greeted and (end > LONGEST_HANDSHAKE or (end < 0 and len(self._buffer) > LONGEST_HANDSHAKE)):
                self.fail(f"failed the handshake: its answer to `{shown(line)}` is longer than {LONGEST_HANDSHAKE:,} bytes")
            if end >= 0:
                raw = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                try:
                    return raw.decode("utf-8").rstrip("\r")
                except UnicodeDecodeError:
                    self.history.append(f"< {shown(raw.decode('utf-8', 'replace'))}")
                    self.fail(f"printed garbage: it answered `{shown(line)}` with bytes that are not UTF-8 text")
            if len(self._buffer) > LONGEST_LINE:
                self.fail(f"printed garbage: it answered `{shown(line)}` with more than {LONGEST_LINE >> 20} MiB and no end of line")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if self._buffer:
                    self.history.append(f"< {shown(self._buffer.decode('utf-8', 'replace'))} (no end of line)")
                self.fail(f"hangs: it did not answer `{shown(line)}` within {self.limit:g} s ({self.limit_option}), so it was stopped")
            readable, _, _ = select.select([self._stdout], [], [], remaining)
            if not readable:
                continue
            try:
                chunk = os.read(self._stdout, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                if self._buffer:
                    self.history.append(f"< {shown(self._buffer.decode('utf-8', 'replace'))} (no end of line)")
                self.fail(f"crashed: it {self.exit_description()} while the checker waited for its answer to `{shown(line)}`")
            self._buffer.extend(chunk)

    def exchange(self, line: str, call: Call | None, *, ahead: str | None = None) -> str:
        """Send ``line``, read its answer, check that it answers this very call; the result after ``->``.

        ``ahead`` is a line sent in the same write, whose answer ``take_ahead``
        reads later (or the next exchange reads and drops): one round trip for
        a call and the snapshot after it.
        """
        if self.failure is not None:
            raise self.failure
        if self.pending is not None:
            dropped, self.pending = self.pending, None
            self.answer(dropped, None)
        self.history.append(f"> {shown(line)}")
        if ahead is None:
            self._send(line)
        else:
            self.history.append(f"> {shown(ahead)}")
            self._send(line, ahead)
        result = self.answer(line, call)
        self.pending = ahead
        return result

    def take_ahead(self, line: str) -> str | None:
        """The result of ``line`` if it was sent ahead and not read yet, else None."""
        if self.failure is not None:
            raise self.failure
        if self.pending != line:
            return None
        self.pending = None
        return self.answer(line, None)

    def answer(self, line: str, call: Call | None) -> str:
        """Read the answer to ``line``, already sent."""
        answer = self._receive(line)
        self.history.append(f"< {shown(answer)}")
        if answer.startswith(line + " -> "):
            result = answer[len(line) + 4 :].strip()
        else:
            echoed, arrow, result = answer.partition("->")
            result = result.strip()
            if not arrow:
                self.fail(f"printed garbage: it answered `{shown(line)}` with a line that is not `CALL -> RESULT`")
            if not self._same_call(echoed.strip(), line, call):
                self.fail(f"answered a different call: it was sent `{shown(line)}` and answered `{shown(echoed.strip())}`")
        if result.startswith("ProtocolError") and not self.greeted:
            self.fail(f"failed the handshake: it answered `{shown(line)}` with `{shown(result)}` (this checker speaks version {PROTOCOL_VERSION})")
        if result.startswith("ProtocolError"):
            self.fail(f"could not read a call: it answered `{shown(line)}` with `{shown(result)}`")
        if not result:
            self.fail(f"gave a malformed answer: nothing after `->` in its answer to `{shown(line)}`")
        return result

    @staticmethod
    def _same_call(echoed: str, line: str, call: Call | None) -> bool:
        if echoed.split() == line.split():
            return True
        if call is None:
            return False
        try:
            return parse_call(echoed, 0) == call
        except TraceFormatError:
            return False

    def stop(self) -> None:
        """Kill the engine and everything it started; idempotent.

        The whole process group is killed whether or not its first process
        still runs: a shell that backgrounded a helper, or an engine that
        forked and exited, leaves the rest of the group behind it.
        """
        if self._reaper.detach() is not None:  # the first stop kills; the group is gone for later ones
            _kill_group(self.process)
        self._close_files()

    def close(self) -> None:
        """End the engine politely: close its stdin, then stop it if it does not exit at once."""
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(timeout=0.5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.stop()
        self._close_files(stderr=True)

    def _close_files(self, *, stderr: bool = False) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None and not stream.closed:
                try:
                    stream.close()
                except OSError:
                    pass
        if stderr and not self._stderr.closed:
            self._stderr.close()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill an engine's process group and reap its first process.

    The group keeps the first process's id as long as any member lives, also
    after that process exited, and one SIGKILL to the group kills every member.
    """
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # nobody left in the group
    try:
        process.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        pass
