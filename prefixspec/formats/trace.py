"""Traces: a line-oriented text of cache calls and their results, read, written and replayed.

A trace is what a golden fixture, a counterexample and a recorded production
run have in common.  The format is specified in ``fixtures/README.md``; the
calls and results are the text of ``prefixspec.vocabulary``.  In short::

    prefixspec-trace 1
    block_size 2
    # a comment
    n1 = insert [1 2 3 4 5] [10 11] -> new []
    n2 = match [1 2 3 4 9 9] -> 4 [10 11] n1
    lock n2 -> ok
    evict 1 -> []

A node in a result is written ``root``, the first handle that returned it, or
``new`` when no earlier line returned it.  The part from ``->`` on is the
expected result; a line without it is a call to make with no expectation.
Lines end at ``\\n`` alone (a form feed or a lone ``\\r`` is part of a line),
and reading costs time in proportion to the file's size.
"""

from __future__ import annotations

import os
import select
import stat

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prefixspec.errors import UsageError
from prefixspec.formats.outcomes import FOREIGN as FOREIGN, PASSED_ON as PASSED_ON, UnresolvedHandle as UnresolvedHandle
from prefixspec.formats.outcomes import CallRunner as CallRunner, Outcome as Outcome, outcome_text as outcome_text, same_outcome as same_outcome
from prefixspec.formats.repeats import Step as Step  # re-exported: a trace is made of steps
from prefixspec.formats.repeats import LARGEST_CALLS, LARGEST_REPEAT, POSITIONAL, PositionalNames, Repeat, Steps, clash, copy_name, latest_named, numbered
from spec.api import RULE_PRESETS, CacheFactory, InvalidArgument, PrefixCache, Rules, checked_block_size, parse_rules
from prefixspec.vocabulary import TAKE_EVENTS, Call, TraceFormatError, parse_call, read_int

FORMAT_VERSION = 1
HEADER = f"prefixspec-trace {FORMAT_VERSION}"
FOLDED_VERSION = 2
"""Version 1 and repeat blocks (``prefixspec.formats.repeats``); a trace is written so only when it has one."""
HEADER_FOLDED = f"prefixspec-trace {FOLDED_VERSION}"
HEADERS = {HEADER: FORMAT_VERSION, HEADER_FOLDED: FOLDED_VERSION}


@dataclass
class Trace:
    """A block size, the rule set the results follow, and the steps to run on a fresh cache of that size."""

    block_size: int
    steps: Sequence[Step] = field(default_factory=list)
    """Every call in order: a list, or ``repeats.Steps`` when repeat blocks fold them (made as they are asked for)."""
    comments: list[str] = field(default_factory=list)
    rules: Rules = RULE_PRESETS["strict"]

    def text(self) -> str:
        """The trace as a file; repeat blocks kept folded (version 2), else version 1."""
        folded = isinstance(self.steps, Steps) and self.steps.folded()
        lines = [HEADER_FOLDED if folded else HEADER]
        for comment in self.comments:
            lines.append(f"# {comment}" if comment else "#")
        lines.append(f"block_size {self.block_size}")
        lines.append(f"rules {self.rules.name}")
        pieces = self.steps.pieces if isinstance(self.steps, Steps) else self.steps
        for piece in pieces:
            if isinstance(piece, Repeat):
                lines.append(f"repeat {piece.count} {{")
                lines.extend(step.text() for step in piece.body)
                lines.append("}")
            else:
                lines.append(piece.text())
        return "\n".join(lines) + "\n"

    def calls(self) -> list[Call]:
        return [step.call for step in self.steps]

    def driven_steps(self) -> list[Step]:
        """The steps but the ``take_events``: the calls a driver made, where a lockstep takes events after each insert and evict (R13)."""
        return [step for step in self.steps if step.call.op != TAKE_EVENTS.op]


# Reading ------------------------------------------------------------------------------


def parse_step(text: str, line: int) -> Step:
    call_text, arrow, expected = text.partition("->")
    call = parse_call(call_text.strip(), line)
    if arrow and not expected.strip():
        raise TraceFormatError(line, "nothing after '->'")
    return Step(call, expected.strip() if arrow else None, line)


def parse_block_size(text: str, line: int) -> int:
    words = text.split()
    size = read_int(words[1]) if len(words) == 2 and words[0] == "block_size" else None
    if size is None:
        raise TraceFormatError(line, "expected 'block_size B' after the header, B a whole number")
    try:
        return checked_block_size(size)
    except InvalidArgument as problem:  # R1's one check, read as the trace's error
        raise TraceFormatError(line, str(problem)) from None


def parse_rules_line(text: str, line: int) -> Rules:
    """``rules NAME`` (a preset, or ``key=value`` pairs of ``spec.api.RULE_FIELDS``, e.g. ``use=U,evict=E``): the rule set the trace's results follow."""
    words = text.split()
    if len(words) != 2:
        raise TraceFormatError(line, "expected 'rules NAME' (a preset, or key=value pairs such as use=U,evict=E,unit=N,dup=D)")
    try:
        return parse_rules(words[1])
    except ValueError as error:
        raise TraceFormatError(line, str(error)) from None


def parse_trace(text: str) -> Trace:
    """A whole trace; raises TraceFormatError naming the first bad line (lines end at ``\\n`` only).

    Repeat blocks (version 2, ``prefixspec.formats.repeats``) are kept folded: the trace's ``steps`` makes their
    copies as they are asked for.
    """
    reader = _Reader()
    for number, raw in enumerate(text.split("\n"), start=1):
        reader.line(number, raw.strip())
    return reader.trace_read()


_COPY_HANDLE = "n_copy_"
"""What a handle ``n*`` is read as (``parse_call`` reads names only), then written back."""


class _Reader:
    """The state of reading a trace line by line: the header, the names given so far, an open repeat block."""

    def __init__(self) -> None:
        self.version: int | None = None
        self.trace: Trace | None = None
        self.header_comments: list[str] = []
        self.rules_seen = False
        self.pieces: list[Step | Repeat] = []
        self.calls = 0
        self.names: set[str] = {"root", FOREIGN}
        self.numbered: set[int] = set()
        self.positional = PositionalNames()
        self.block: list[Step] | None = None
        self.block_count = 0
        self.block_line = 0

    def line(self, number: int, stripped: str) -> None:
        if not stripped:
            return
        if stripped.startswith("#"):
            if self.version is not None and self.trace is None:
                self.header_comments.append(stripped[1:].strip())
            return
        if self.version is None:
            self.version = HEADERS.get(stripped)
            if self.version is None:
                raise TraceFormatError(number, f"expected the header {HEADER!r} (or {HEADER_FOLDED!r}), got {stripped[:80]!r}")
            return
        if self.trace is None:
            self.trace = Trace(block_size=parse_block_size(stripped, number), comments=self.header_comments)
            return
        if stripped.startswith("rules") and not self.pieces and self.block is None and not self.rules_seen:
            self.trace.rules = parse_rules_line(stripped, number)
            self.rules_seen = True
            return
        if stripped.startswith("repeat") or stripped == "}":
            self.repeat_line(number, stripped)
            return
        self.step_line(number, stripped)

    def repeat_line(self, number: int, stripped: str) -> None:
        if self.version == FORMAT_VERSION:
            raise TraceFormatError(number, f"a repeat block needs the header {HEADER_FOLDED!r}; this trace is {HEADER!r}")
        if stripped == "}":
            if self.block is None:
                raise TraceFormatError(number, "'}' closes no repeat block")
            if not self.block:
                raise TraceFormatError(self.block_line, "this repeat block holds no call")
            self.close_block(number)
            return
        words = stripped.split()
        if self.block is not None:
            raise TraceFormatError(number, f"repeat blocks do not nest: the one opened at line {self.block_line} is not closed")
        count = read_int(words[1], signed=True) if len(words) == 3 and words[0] == "repeat" and words[2] == "{" else None
        if count is None:
            raise TraceFormatError(number, f"expected 'repeat N {{' (N a whole number from 1 to {LARGEST_REPEAT:,}), got {stripped[:80]!r}")
        if not 1 <= count <= LARGEST_REPEAT:
            raise TraceFormatError(number, f"a repeat count runs from 1 to {LARGEST_REPEAT:,}, got {count:,}")
        self.block, self.block_count, self.block_line = [], count, number

    def close_block(self, number: int) -> None:
        assert self.block is not None
        expanded = len(self.block) * self.block_count
        if self.calls + expanded > LARGEST_CALLS:
            raise TraceFormatError(self.block_line, f"this repeat block takes the trace past {LARGEST_CALLS:,} calls, more than any trace the checker replays")
        taken = clash(self.calls, self.block, self.block_count, self.numbered)
        if taken is not None:
            raise TraceFormatError(self.block_line, f"handle {copy_name(taken)!r} is named twice: by an earlier line and by a copy of this block")
        self.positional.add(self.calls, self.block, self.block_count)
        self.pieces.append(Repeat(self.block_count, tuple(self.block), self.block_line))
        self.calls += expanded
        self.block = None

    def step_line(self, number: int, stripped: str) -> None:
        positional = stripped.startswith(POSITIONAL) and stripped[len(POSITIONAL) :].lstrip().startswith("=")
        if positional and self.block is None:
            raise TraceFormatError(number, f"a call is named {POSITIONAL!r} only inside a repeat block")
        text = "n" + stripped[len(POSITIONAL) :] if positional else stripped
        call_text, arrow, result = text.partition("->")
        words = call_text.split()
        copies_handle = POSITIONAL in words and _COPY_HANDLE not in text
        if copies_handle:
            text = " ".join(_COPY_HANDLE if word == POSITIONAL else word for word in words) + arrow + result
        step = parse_step(text, number)
        for handle in step.call.handles:
            if handle == _COPY_HANDLE and copies_handle:
                if self.block is None or latest_named(self.block, len(self.block)) < 0:
                    raise TraceFormatError(number, f"the handle {POSITIONAL!r} names the latest call named {POSITIONAL!r} above it in its repeat block, and there is none")
            elif handle not in self.names and not self.positional.gives(handle) and not self.earlier_in_block(handle):
                raise TraceFormatError(number, f"handle {handle!r} is not named by an earlier line")
        if copies_handle:
            step = dataclasses.replace(step, call=step.call.with_handles(lambda handle: POSITIONAL if handle == _COPY_HANDLE else handle))
        if positional:
            step = dataclasses.replace(step, call=dataclasses.replace(step.call, name=POSITIONAL))
        elif step.call.name:
            if self.block is not None:
                raise TraceFormatError(number, f"a call inside a repeat block is named {POSITIONAL!r} (each copy is named for its position), not {step.call.name!r}")
            if step.call.name in self.names or self.positional.gives(step.call.name):
                raise TraceFormatError(number, f"handle {step.call.name!r} is named twice")
            self.names.add(step.call.name)
            index = numbered(step.call.name)
            if index is not None:
                self.numbered.add(index)
        if self.block is not None:
            self.block.append(step)
            return
        if self.calls + 1 > LARGEST_CALLS:
            raise TraceFormatError(number, f"the trace passes {LARGEST_CALLS:,} calls, more than any trace the checker replays")
        self.pieces.append(step)
        self.calls += 1

    def earlier_in_block(self, handle: str) -> bool:
        """Whether ``handle`` names a copy, in the open block's first run, of a call above this line in it."""
        index = numbered(handle)
        offset = -1 if index is None else index - self.calls
        return self.block is not None and 0 <= offset < len(self.block) and self.block[offset].call.name == POSITIONAL

    def trace_read(self) -> Trace:
        if self.trace is None:
            raise TraceFormatError(1, f"empty trace: expected {HEADER!r} and 'block_size B'")
        if self.block is not None:
            raise TraceFormatError(self.block_line, "this repeat block is not closed with '}'")
        folded = any(isinstance(piece, Repeat) for piece in self.pieces)
        self.trace.steps = Steps(self.pieces) if folded else [piece for piece in self.pieces if not isinstance(piece, Repeat)]
        return self.trace


def decode_trace(data: bytes) -> str:
    """``data`` as UTF-8 text; TraceFormatError naming the line of the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise TraceFormatError(line, f"not UTF-8 text (byte {data[error.start]:#04x} at offset {error.start})") from None


LARGEST_TRACE = 128 << 20
"""Bytes a trace file may hold (128 MiB; a 100,000-call trace of the scale stage is some 10 MiB)."""

PIPE_WAIT = 10.0
"""Seconds a trace that is a pipe (a FIFO, ``<(command)``) may keep the checker waiting for its first bytes."""


def read_trace_bytes(path: str | Path) -> bytes:
    """The bytes of the trace file ``path``, at most LARGEST_TRACE of them; UsageError for a file too large, or a pipe nobody writes.

    The file is opened without blocking, so a FIFO with no writer is not a
    wait for ever; it is read in pieces, so an endless file ends at the limit
    with a clear message instead of running out of memory.
    """
    if not str(path).strip():
        raise UsageError(f"a trace file is needed, and {str(path)!r} names none")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"{path} is a folder, not a trace file")
    with os.fdopen(fd, "rb", buffering=0) as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            readable, _, _ = select.select([fd], [], [], PIPE_WAIT)
            if not readable:
                raise UsageError(f"{path}: nothing was written to it within {PIPE_WAIT:g} s (a pipe or FIFO with no writer?)")
        os.set_blocking(fd, True)
        pieces: list[bytes] = []
        size = 0
        try:
            while True:
                piece = file.read(1 << 20)
                if not piece:
                    break
                size += len(piece)
                if size > LARGEST_TRACE:
                    raise UsageError(f"{path}: more than {LARGEST_TRACE >> 20} MiB, larger than any trace the checker reads")
                pieces.append(piece)
            return b"".join(pieces)
        except MemoryError:
            raise UsageError(f"{path}: the checker ran out of memory reading it ({size >> 20} MiB read)") from None


def read_trace(path: str | Path) -> Trace:
    """The trace in the file ``path``; TraceFormatError (with the file named) when it is not one."""
    data = read_trace_bytes(path)
    try:
        return parse_trace(decode_trace(data))
    except TraceFormatError as error:
        raise TraceFormatError(error.line, f"{path}: {str(error).partition(': ')[2]}") from None
    except MemoryError:  # under a memory limit (ulimit -v) a trace within LARGEST_TRACE may still not fit once parsed
        raise UsageError(f"{path}: the checker ran out of memory parsing it ({len(data) >> 20} MiB)") from None


@dataclass(frozen=True)
class Divergence:
    """The first call whose result differs from the expected one."""

    line: int
    call: str
    expected: str
    got: str

    def describe(self) -> str:
        return f"line {self.line}: {self.call}\n  expected: {self.expected}\n  got:      {self.got}"


def replay(trace: Trace, cache: PrefixCache, foreign: CacheFactory | None = None) -> Divergence | None:
    """Run ``trace`` on ``cache`` (fresh, of the trace's block size); the first divergence, or None.

    ``foreign`` makes the other cache whose node the handle ``foreign`` names.
    """
    runner = CallRunner(cache, foreign)
    for step in trace.steps:
        outcome = runner.run(step.call)
        if step.expected is not None and not same_outcome(step.expected, outcome.text):
            return Divergence(step.line, step.call.text(), step.expected, outcome.text)
    return None


def record(block_size: int, calls: Sequence[Call], cache: PrefixCache) -> Trace:
    """The trace of ``calls`` made on ``cache`` (fresh, of ``block_size``), its results as the expectations."""
    runner = CallRunner(cache)
    return Trace(block_size, [Step(call, runner.run(call).text, number) for number, call in enumerate(calls, start=1)])
