"""A cache in any language, driven over a pipe: ``PipeEngine(command)`` is a cache factory.

``prefixspec check --exec CMD`` runs CMD (through ``/bin/sh``) and speaks the
line protocol of ``docs/protocol.md`` on its stdin and stdout: one call per
line in the trace format's syntax, one answer per line, ``CALL -> RESULT``,
with nodes as integers and errors by name::

    > prefixspec-protocol 1
    < prefixspec-protocol 1 -> ok my-engine 0.3
    > block_size 2
    < block_size 2 -> ok
    > n1 = insert [1 2 3 4 5] [10 11]
    < n1 = insert [1 2 3 4 5] [10 11] -> 7 []
    > lock n1
    < lock n1 -> ok
    > snapshot
    < snapshot -> lookups=0 query_tokens=0 hit_tokens=0 inserted_blocks=2 evicted_blocks=0 nodes=1 [1 2 3 4] [10 11] 1

Each ``PipeCache`` starts with ``block_size B``, which gives the engine a
fresh, empty cache; an engine process serves one cache at a time.  Processes
are pooled: when a ``PipeCache`` is garbage, its process goes back to the
pool and the next cache starts on it with ``block_size B``, so the thousands
of caches a check makes cost one process start each only while they overlap.

An engine that crashes, hangs past the per-call timeout, prints something
that is not an answer, or answers another call than the one sent, raises
``EngineProtocolError`` (a ``spec.api.TargetFailure``): one paragraph naming
the problem, the engine's last stderr lines and the last lines exchanged.
"""

from __future__ import annotations

import atexit
import itertools
import operator
import os
import re
import select
import signal
import subprocess
import tempfile
import time
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, NoReturn

from spec.api import (
    ERROR_TYPES,
    BlockId,
    Inserted,
    InvalidArgument,
    NodeId,
    NodeView,
    PrefixMatch,
    PrefixStats,
    Snapshot,
    TargetFailure,
    UnknownNode,
)
from spec.trace import Call, TraceFormatError, parse_call, render_ints

PROTOCOL_VERSION = 1
HANDSHAKE = f"prefixspec-protocol {PROTOCOL_VERSION}"
DEFAULT_TIMEOUT = 5.0
"""Seconds an engine may take to answer one line (the handshake included)."""

HISTORY = 12
"""Lines sent and received that a report shows."""

LONGEST_LINE = 1 << 24
"""An answer longer than this many bytes is garbage (16 MiB)."""

SHOWN_CHARS = 160
"""Each line in a report is cut to this many characters."""

IDLE_PROCESSES = 4
"""Processes a pool keeps for the next caches."""

_INTS = r"\[ *((?:[0-9]+ *)*)\]"
_NODE = r"(root|[0-9]+)"
_STATS = r"lookups=([0-9]+) +query_tokens=([0-9]+) +hit_tokens=([0-9]+) +inserted_blocks=([0-9]+) +evicted_blocks=([0-9]+)"
_GRAMMAR = {
    "match": (re.compile(rf"([0-9]+) +{_INTS} +{_NODE}"), "MATCHED_TOKENS [BLOCK ...] NODE"),
    "insert": (re.compile(rf"{_NODE} +{_INTS}"), "NODE [DUPLICATE ...]"),
    "ok": (re.compile(r"ok"), "ok"),
    "evict": (re.compile(_INTS), "[BLOCK ...]"),
    "count": (re.compile(r"[0-9]+"), "a whole number"),
    "stats": (re.compile(_STATS), "lookups=L query_tokens=Q hit_tokens=H inserted_blocks=I evicted_blocks=E"),
    "snapshot": (re.compile(rf"{_STATS} +nodes=([0-9]+)((?: +{_INTS} +{_INTS} +[0-9]+)*)"), "STATS nodes=K followed by K times [PREFIX ...] [BLOCK ...] LOCKS"),
}
_SNAPSHOT_NODE = re.compile(rf" +{_INTS} +{_INTS} +([0-9]+)")
_ERROR_NAMES = ", ".join(ERROR_TYPES)


class EngineProtocolError(TargetFailure):
    """An engine that broke the line protocol; the message is the whole report, one paragraph."""

    def __init__(self, report: str, *, before_handshake: bool = False) -> None:
        super().__init__(report)
        self.report = report
        self.before_handshake = before_handshake

    def __str__(self) -> str:
        return self.report


def _shown(line: str) -> str:
    if len(line) <= SHOWN_CHARS:
        return line
    return f"{line[:SHOWN_CHARS]}... ({len(line):,} characters)"


def _ints(text: str) -> list[int]:
    return list(map(int, text.split()))


class EngineProcess:
    """One running engine: its pipes, its stderr in a file, and the last lines exchanged."""

    def __init__(self, command: str, timeout: float) -> None:
        self.command = command
        self.timeout = timeout
        self.history: deque[str] = deque(maxlen=HISTORY)
        self.failure: EngineProtocolError | None = None
        self.greeted = False
        self.engine_name = ""
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
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin = self.process.stdin.fileno()
        self._stdout = self.process.stdout.fileno()
        os.set_blocking(self._stdin, False)
        os.set_blocking(self._stdout, False)
        answer = self.exchange(HANDSHAKE, None)
        if answer != "ok" and not answer.startswith("ok "):
            self.fail(f"failed the handshake: it answered `{_shown(answer)}` to `{HANDSHAKE}`, where `ok` was expected (this checker speaks version {PROTOCOL_VERSION})")
        self.engine_name = answer[3:].strip()
        self.greeted = True

    # Reports ------------------------------------------------------------------------------

    def stderr_tail(self) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - 4096))
            text = self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if len(lines) > 4:  # a panic's message comes first, a Python traceback's last: keep both ends
            lines = [*lines[:2], "...", *lines[-2:]]
        text = " | ".join(lines)
        return text if len(text) <= 2 * SHOWN_CHARS else text[: 2 * SHOWN_CHARS] + "..."

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
        deadline = time.monotonic() + self.timeout
        while data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.fail(f"hangs: it did not read the call `{_shown(line)}` within {self.timeout:g} s (--timeout), so it was stopped")
            _, writable, _ = select.select([], [self._stdin], [], remaining)
            if not writable:
                continue
            try:
                written = os.write(self._stdin, data)
            except BrokenPipeError:
                self.fail(f"crashed: it {self.exit_description()} before reading the call `{_shown(line)}`")
            except BlockingIOError:
                continue
            data = data[written:]

    def _receive(self, line: str) -> str:
        deadline = time.monotonic() + self.timeout
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                raw = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                try:
                    return raw.decode("utf-8").rstrip("\r")
                except UnicodeDecodeError:
                    self.history.append(f"< {_shown(raw.decode('utf-8', 'replace'))}")
                    self.fail(f"printed garbage: it answered `{_shown(line)}` with bytes that are not UTF-8 text")
            if len(self._buffer) > LONGEST_LINE:
                self.fail(f"printed garbage: it answered `{_shown(line)}` with more than {LONGEST_LINE >> 20} MiB and no end of line")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if self._buffer:
                    self.history.append(f"< {_shown(self._buffer.decode('utf-8', 'replace'))} (no end of line)")
                self.fail(f"hangs: it did not answer `{_shown(line)}` within {self.timeout:g} s (--timeout), so it was stopped")
            readable, _, _ = select.select([self._stdout], [], [], remaining)
            if not readable:
                continue
            try:
                chunk = os.read(self._stdout, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                if self._buffer:
                    self.history.append(f"< {_shown(self._buffer.decode('utf-8', 'replace'))} (no end of line)")
                self.fail(f"crashed: it {self.exit_description()} while the checker waited for its answer to `{_shown(line)}`")
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
        self.history.append(f"> {_shown(line)}")
        if ahead is None:
            self._send(line)
        else:
            self.history.append(f"> {_shown(ahead)}")
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
        self.history.append(f"< {_shown(answer)}")
        if answer.startswith(line + " -> "):
            result = answer[len(line) + 4 :].strip()
        else:
            echoed, arrow, result = answer.partition("->")
            result = result.strip()
            if not arrow:
                self.fail(f"printed garbage: it answered `{_shown(line)}` with a line that is not `CALL -> RESULT`")
            if not self._same_call(echoed.strip(), line, call):
                self.fail(f"answered a different call: it was sent `{_shown(line)}` and answered `{_shown(echoed.strip())}`")
        if result.startswith("ProtocolError") and not self.greeted:
            self.fail(f"failed the handshake: it answered `{_shown(line)}` with `{_shown(result)}` (this checker speaks version {PROTOCOL_VERSION})")
        if result.startswith("ProtocolError"):
            self.fail(f"could not read a call: it answered `{_shown(line)}` with `{_shown(result)}`")
        if not result:
            self.fail(f"gave a malformed answer: nothing after `->` in its answer to `{_shown(line)}`")
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
        """Kill the engine and everything it started; idempotent."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
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


@dataclass(frozen=True)
class PipeNode:
    """A node of an engine's cache: the cache it belongs to and the engine's integer id (None for the root)."""

    cache: int
    id: int | None

    def __repr__(self) -> str:
        return "root" if self.id is None else f"node{self.id}"


_engines: weakref.WeakSet[PipeEngine] = weakref.WeakSet()


def _close_processes(processes: list[EngineProcess]) -> None:
    while processes:
        processes.pop().close()


@atexit.register
def _close_every_engine() -> None:
    for engine in list(_engines):
        engine.close()


class PipeEngine:
    """A cache factory over an engine command: ``PipeEngine(cmd)(block_size)`` is a ``PipeCache``.

    Use it as a context manager (or call ``close``) to end its processes; they
    also end when Python exits.
    """

    def __init__(self, command: str, timeout: float = DEFAULT_TIMEOUT, *, snapshot_ahead: bool = True) -> None:
        if not command.strip():
            raise ValueError("the engine command is empty")
        self.command = command
        self.timeout = timeout
        self.snapshot_ahead = snapshot_ahead
        """Send ``snapshot`` with every call, in the same write: the checkers ask for one after every call."""
        self.idle: list[EngineProcess] = []
        self.started = 0
        self.closed = False
        _engines.add(self)
        weakref.finalize(self, _close_processes, self.idle)  # an engine dropped unclosed ends its idle processes

    def __call__(self, block_size: int) -> PipeCache:
        return PipeCache(self, block_size)

    def __enter__(self) -> PipeEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def acquire(self) -> EngineProcess:
        while self.idle:
            process = self.idle.pop()
            if process.failure is None and process.process.poll() is None:
                return process
            process.stop()
        self.started += 1
        return EngineProcess(self.command, self.timeout)

    def release(self, process: EngineProcess) -> None:
        if self.closed or process.failure is not None or len(self.idle) >= IDLE_PROCESSES:
            process.close()
        else:
            self.idle.append(process)

    def probe(self) -> str:
        """Start the engine, make a cache of block size 2 and read its counters; the engine's name.

        Raises ``EngineProtocolError`` when it cannot: a command that does not
        start, a failed handshake or an engine that cannot make a cache.
        """
        cache = PipeCache(self, 2)
        cache.stats()
        name = cache.engine_name
        cache.close()
        return name

    def close(self) -> None:
        self.closed = True
        _close_processes(self.idle)


_serials = itertools.count(1)


class PipeCache:
    """A ``PrefixCache`` whose answers come from an engine process over the line protocol."""

    def __init__(self, engine: PipeEngine, block_size: int) -> None:
        try:
            size = operator.index(block_size)
        except TypeError:
            raise InvalidArgument(f"block_size must be an int, got {type(block_size).__name__}") from None
        if size < 1:
            raise InvalidArgument(f"block_size must be >= 1, got {size}")
        self._block_size = size
        self._serial = next(_serials)
        self._root = PipeNode(self._serial, None)
        self._calls = 0
        self._name_of_id: dict[int, str] = {}
        self._ahead = "snapshot" if engine.snapshot_ahead else None
        self._last_snapshot: tuple[str, Snapshot] = ("", Snapshot(size, (), PrefixStats(0, 0, 0, 0, 0)))
        self._process = engine.acquire()
        self._finalizer = weakref.finalize(self, engine.release, self._process)
        self._process.context = f"while starting a cache of block size {size}"
        self._expect("block_size", f"block_size {size}", None)

    @property
    def engine_name(self) -> str:
        return self._process.engine_name

    def close(self) -> None:
        """Hand the process back to the pool now rather than when this cache is garbage."""
        self._finalizer()

    @property
    def root(self) -> NodeId:
        return self._root

    def block_size(self) -> int:
        return self._block_size

    # One exchange -------------------------------------------------------------------------

    def _exchange(self, line: str, call: Call | None) -> str:
        """Send ``line`` (a call of the interface, with a snapshot ahead), and read its result."""
        self._calls += 1
        self._process.context = f"at call {self._calls} to a cache of block size {self._block_size}"
        return self._process.exchange(line, call, ahead=self._ahead if call is not None else None)

    def _expect(self, kind: str, line: str, call: Call | None, result: str | None = None) -> re.Match[str]:
        """Send ``line`` (unless its ``result`` is known); the result parsed by the grammar of ``kind``, or the error it names raised."""
        process = self._process
        if result is None:
            result = self._exchange(line, call)
        grammar, shape = _GRAMMAR["ok" if kind == "block_size" else kind]
        found = grammar.fullmatch(result)
        if found is not None:
            return found
        name, _, message = result.partition(" ")
        error = ERROR_TYPES.get(name)
        if error is not None:
            raise error(message or f"the engine answered {name}")
        process.fail(
            f"gave a malformed answer: it answered `{_shown(line)}` with `{_shown(result)}`, which is neither `{shape}` "
            f"nor an error name ({_ERROR_NAMES}); a garbled answer, or the answer of another call"
        )

    def _ids(self, values: Sequence[int], what: str) -> tuple[int, ...]:
        """R1 as far as the wire needs it: ints, written in decimal; their range is the engine's to check."""
        try:
            return tuple(operator.index(value) for value in values)
        except TypeError:
            raise InvalidArgument(f"{what} must be ints") from None

    def _node(self, text: str, name: str) -> PipeNode:
        if text == "root":
            return self._root
        node_id = int(text)
        self._name_of_id[node_id] = name
        return PipeNode(self._serial, node_id)

    def _handle(self, node: NodeId) -> str:
        if node == self._root:
            return "root"
        if isinstance(node, PipeNode) and node.cache == self._serial and node.id in self._name_of_id:
            return self._name_of_id[node.id]
        raise UnknownNode(f"{node!r} was never returned by this cache")

    def _name(self) -> str:
        return f"n{self._calls + 1}"

    # The calls ------------------------------------------------------------------------------

    def match_prefix(self, tokens: Sequence[int]) -> PrefixMatch:
        call = Call("match", tokens=self._ids(tokens, "tokens"), name=self._name())
        found = self._expect("match", call.text(), call)
        return PrefixMatch(int(found[1]), _ints(found[2]), self._node(found[3], call.name))

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId]) -> Inserted:
        call = Call("insert", tokens=self._ids(tokens, "tokens"), blocks=self._ids(blocks, "blocks"), name=self._name())
        found = self._expect("insert", call.text(), call)
        return Inserted(self._node(found[1], call.name), _ints(found[2]))

    def lock(self, node: NodeId) -> None:
        call = Call("lock", handle=self._handle(node))
        self._expect("ok", call.text(), call)

    def unlock(self, node: NodeId) -> None:
        call = Call("unlock", handle=self._handle(node))
        self._expect("ok", call.text(), call)

    def evict(self, n_blocks: int) -> list[BlockId]:
        try:
            count = operator.index(n_blocks)
        except TypeError:
            raise InvalidArgument(f"n_blocks must be an int, got {type(n_blocks).__name__}") from None
        call = Call("evict", count=count)
        return _ints(self._expect("evict", call.text(), call)[1])

    def _count(self, op: str) -> int:
        return int(self._expect("count", op, Call(op))[0])

    def cached_tokens(self) -> int:
        return self._count("cached_tokens")

    def cached_blocks(self) -> int:
        return self._count("cached_blocks")

    def evictable_blocks(self) -> int:
        return self._count("evictable_blocks")

    def stats(self) -> PrefixStats:
        found = self._expect("stats", "stats", Call("stats"))
        return PrefixStats(*(int(found[index]) for index in range(1, 6)))

    def hit_rate(self) -> float:
        result = self._exchange("hit_rate", Call("hit_rate"))
        try:
            return float(result)
        except ValueError:
            name, _, message = result.partition(" ")
            error = ERROR_TYPES.get(name)
            if error is not None:
                raise error(message or f"the engine answered {name}") from None
            self._process.fail(f"gave a malformed answer: it answered `hit_rate` with `{_shown(result)}`, which is neither a number nor an error name ({_ERROR_NAMES})")

    def snapshot(self) -> Snapshot:
        result = self._process.take_ahead("snapshot")
        if result is None:
            result = self._exchange("snapshot", None)
        if result == self._last_snapshot[0]:
            return self._last_snapshot[1]  # unchanged since the last call (a counter was read): parsed already
        found = self._expect("snapshot", "snapshot", None, result)
        stats = PrefixStats(*(int(found[index]) for index in range(1, 6)))
        nodes = tuple(
            NodeView(tuple(_ints(node[1])), tuple(_ints(node[2])), int(node[3])) for node in _SNAPSHOT_NODE.finditer(found[7])
        )
        if len(nodes) != int(found[6]):
            self._process.fail(f"gave a malformed answer: its `snapshot` says nodes={found[6]} but lists {len(nodes)} nodes")
        snapshot = Snapshot(self._block_size, nodes, stats)
        self._last_snapshot = (result, snapshot)
        return snapshot
