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

An engine process has ``start_timeout`` seconds (``--start-timeout``) to
answer the handshake, its start, and ``timeout`` (``--timeout``) for each
line after it.  An engine that crashes, hangs past its limit, prints something
that is not an answer, or answers another call than the one sent, raises
``EngineProtocolError`` (a ``spec.api.TargetFailure``): one paragraph naming
the problem, the engine's last stderr lines and the last lines exchanged.
"""

from __future__ import annotations

import atexit
import itertools
import shlex
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from spec.api import InvalidArgument, NodeId, PrefixStats, Snapshot, UnknownNode, checked_block_size
from prefixspec.formats.protocol import parse_snapshot
from prefixspec.targets.engine_process import DEFAULT_START_TIMEOUT, DEFAULT_TIMEOUT, EngineProcess, EngineProtocolError, shown
from prefixspec.vocabulary import ERROR_NAMES, Call, CallThrough, ResultFormatError, Unwritable, parse_result, read_int, result_error

__all__ = ["DEFAULT_START_TIMEOUT", "DEFAULT_TIMEOUT", "EngineProtocolError", "PipeCache", "PipeEngine", "PipeNode", "exec_option"]

IDLE_PROCESSES = 4
"""Processes a pool keeps for the next caches."""


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

    def __init__(
        self, command: str, timeout: float = DEFAULT_TIMEOUT, *, start_timeout: float = DEFAULT_START_TIMEOUT, snapshot_ahead: bool = True
    ) -> None:
        if not command.strip():
            raise ValueError("the engine command is empty")
        self.command = command
        self.timeout = timeout
        """Seconds for each line once a process has answered the handshake."""
        self.start_timeout = start_timeout
        """Seconds for a process to start and answer the handshake."""
        self.snapshot_ahead = snapshot_ahead
        """Send ``snapshot`` with every call, in the same write: the checkers ask for one after every call."""
        self.idle: list[EngineProcess] = []
        self.busy: weakref.WeakSet[EngineProcess] = weakref.WeakSet()
        """Processes a cache holds now: close() stops them too."""
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
                self.busy.add(process)
                return process
            process.stop()
        self.started += 1
        process = EngineProcess(self.command, self.timeout, self.start_timeout)
        self.busy.add(process)
        return process

    def release(self, process: EngineProcess) -> None:
        self.busy.discard(process)
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
        """End every process: the idle ones and those caches still hold (a cache used after this fails as crashed)."""
        self.closed = True
        _close_processes(self.idle)
        _close_processes(list(self.busy))


def exec_option(command: str, timeout: float, start_timeout: float) -> str:
    """``--exec CMD`` with the limits that differ from their defaults: how a replay line names an engine."""
    named = f"--exec {shlex.quote(command)}"
    if timeout != DEFAULT_TIMEOUT:
        named += f" --timeout {timeout:g}"
    if start_timeout != DEFAULT_START_TIMEOUT:
        named += f" --start-timeout {start_timeout:g}"
    return named


_serials = itertools.count(1)


class PipeCache(CallThrough):
    """A ``PrefixCache`` whose answers come from an engine process over the line protocol."""

    def __init__(self, engine: PipeEngine, block_size: int) -> None:
        self._block_size = size = checked_block_size(block_size)
        self._serial = next(_serials)
        self._root = PipeNode(self._serial, None)
        self._name_of_id: dict[int, str] = {}
        self.calls_made = 0
        self._ahead = "snapshot" if engine.snapshot_ahead else None
        self._ahead_wanted = True
        self._last_snapshot: tuple[str, Snapshot] = ("", Snapshot(size, (), PrefixStats(0, 0, 0, 0, 0)))
        self._process = engine.acquire()
        self._finalizer = weakref.finalize(self, engine.release, self._process)
        self._process.context = f"while starting a cache of block size {size}"
        answer = self._process.exchange(f"block_size {size}", None)
        if answer != "ok":
            error = result_error(answer)
            if error is not None:
                raise error
            self._fail_shape(f"block_size {size}", answer, "`ok`")

    @property
    def engine_name(self) -> str:
        return self._process.engine_name

    @property
    def prefixspec_features(self) -> frozenset[str]:
        """What the engine offers beyond the interface, as its handshake said (``vocabulary.features_of``)."""
        return self._process.features

    def close(self) -> None:
        """Hand the process back to the pool now rather than when this cache is garbage."""
        self._finalizer()

    @property
    def root(self) -> NodeId:
        return self._root

    def block_size(self) -> int:
        return self._block_size

    def _fail_shape(self, line: str, result: str, shape: str) -> NoReturn:
        self._process.fail(
            f"gave a malformed answer: it answered `{shown(line)}` with `{shown(result)}`, which is neither {shape} "
            f"nor an error name ({ERROR_NAMES}); a garbled answer, or the answer of another call"
        )

    def perform(self, call: Call) -> object:
        """Send the call (with a snapshot ahead), read its answer and parse it by the call's result kind."""
        self.calls_made += 1
        line = call.text()
        self._process.context = f"at call {self.calls_made} to a cache of block size {self._block_size}"
        if self._process.pending is not None:
            # The snapshot sent ahead with the last call went unread: this caller
            # compares snapshots now and then (the scale stage, every 500 calls),
            # and a snapshot of thousands of blocks after every call would cost
            # the engine most of its time.  Ahead again once a snapshot is asked for.
            self._ahead_wanted = False
        result = self._process.exchange(line, call, ahead=self._ahead if self._ahead_wanted else None)
        try:
            return parse_result(call.kind, result, lambda word: self._node(word, call.name))
        except ResultFormatError as problem:
            self._fail_shape(line, result, str(problem))

    def unwritable(self, method: str, arguments: Sequence[object], problem: Unwritable) -> object:
        """R1 as far as the wire needs it: ints, written in decimal; their range is the engine's to check."""
        raise InvalidArgument(str(problem))

    def next_name(self) -> str:
        return f"n{self.calls_made + 1}"

    def _node(self, text: str, name: str) -> PipeNode:
        if text == "root":
            return self._root
        node_id = read_int(text)
        if node_id is None:
            raise ResultFormatError(f"a node written as root or a whole number, not {text!r}")
        self._name_of_id[node_id] = name
        return PipeNode(self._serial, node_id)

    def handle_of(self, node: NodeId) -> str:
        if node == self._root:
            return "root"
        if isinstance(node, PipeNode) and node.cache == self._serial and node.id in self._name_of_id:
            return self._name_of_id[node.id]
        raise UnknownNode(f"{node!r} was never returned by this cache")

    def snapshot(self) -> Snapshot:
        result = self._process.take_ahead("snapshot")
        self._ahead_wanted = True
        if result is None:
            self._process.context = f"after call {self.calls_made} to a cache of block size {self._block_size}"
            result = self._process.exchange("snapshot", None)
        if result == self._last_snapshot[0]:
            return self._last_snapshot[1]  # unchanged since the last call (a counter was read): parsed already
        try:
            snapshot = parse_snapshot(result, self._block_size)
        except ResultFormatError as problem:
            self._fail_shape("snapshot", result, str(problem))
        self._last_snapshot = (result, snapshot)
        return snapshot
