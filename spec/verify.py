"""``prefixspec verify TRACE``: hold a trace an engine recorded (its calls and its results) to the spec.

A recorded trace is the trace format of ``fixtures/README.md`` with the
engine's own results after ``->``; ``docs/recording.md`` says how an engine
writes one, and ``RecordingCache`` below writes one for any Python cache.
``verify`` replays the calls on a fresh ``SpecCache`` and reports the first
call whose recorded result is not the spec's, with its line.

``--shrink`` cuts the trace to the fewest calls that still show the
divergence.  Removing calls changes what the later calls find, and the engine
is not there to answer again, so the recorded results are kept as they are and
a cut *still diverges* when:

- on the cut trace the spec gives, at every call kept, the same result it gave
  at that call in the whole trace (so every recorded result kept before the
  last one is still one the spec agrees with), and
- the last call is the first divergent call of the whole trace, and its
  recorded result still differs from the spec's.

Node names in results are rewritten as calls go: a node is written ``root``,
the first kept handle that returned it, or ``new``; a ``lock``/``unlock`` of a
removed handle is pointed at the first kept handle of the same node.
"""

from __future__ import annotations

import argparse
import operator
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO, cast

from spec.api import BlockId, Inserted, NodeId, PrefixCache, PrefixMatch, PrefixStats, Snapshot
from spec.engine import cached_block_by_prefix
from spec.model import SpecCache
from spec.shrink import delta_debug
from spec.targets import UsageError
from spec.trace import HANDLE_OPS, HEADER, Call, CallRunner, Step, Trace, read_trace, same_outcome

_MATCH_RESULT = re.compile(r"(\d+ \[[^\]]*\]) (\S+)")
_INSERT_RESULT = re.compile(r"(\S+) (\[[^\]]*\])")
_LISTS = re.compile(r"\[([^\]]*)\]")

Identity = tuple[str, str]
"""A node as a recording knows it: ("root", "") or ("handle", first handle that returned it)."""

ROOT_IDENTITY: Identity = ("root", "")


# Reading node names off results -----------------------------------------------------------


def split_node(call: Call, result: str) -> tuple[str, str, str] | None:
    """``result`` of a match or insert as (before the node, the node, after it), or None (an error, or no node)."""
    if call.op == "match":
        found = _MATCH_RESULT.fullmatch(result)
        return (found[1] + " ", found[2], "") if found else None
    if call.op == "insert":
        found = _INSERT_RESULT.fullmatch(result)
        return ("", found[1], " " + found[2]) if found else None
    return None


def node_identities(steps: Sequence[Step], results: Sequence[str | None]) -> list[Identity | None]:
    """Which node each step's result names, as an identity that survives removing other steps."""
    by_handle: dict[str, Identity] = {}
    identities: list[Identity | None] = []
    for step, result in zip(steps, results):
        parts = split_node(step.call, result) if result is not None else None
        if parts is None:
            identities.append(None)
            continue
        written = parts[1]
        if written == "root":
            identity = ROOT_IDENTITY
        elif written == "new":
            identity = ("handle", step.call.name)
        else:
            identity = by_handle.get(written, ("handle", written))
        by_handle[step.call.name] = identity
        identities.append(identity)
    return identities


# Cutting a trace ------------------------------------------------------------------------------


@dataclass
class Recording:
    """A recorded trace with, for every step, the spec's result in the whole trace and both results' node identities."""

    trace: Trace
    spec_results: list[str]
    recorded_identities: list[Identity | None]
    spec_identities: list[Identity | None]
    handle_identity: dict[str, Identity]
    context: dict[tuple[int, ...], BlockId]
    """Where the blocks that the first divergent result names were cached just before it, in the whole trace."""

    @classmethod
    def of(cls, trace: Trace) -> Recording:
        runner = CallRunner(SpecCache(trace.block_size))
        spec_results = [runner.run(step.call).text for step in trace.steps]
        context: dict[tuple[int, ...], BlockId] = {}
        for index, step in enumerate(trace.steps):
            if step.expected is not None and not same_outcome(step.expected, spec_results[index]):
                again = CallRunner(SpecCache(trace.block_size))
                for earlier in trace.steps[:index]:
                    again.run(earlier.call)
                named = set(_ints_in(step.expected))
                cached_before = cached_block_by_prefix(again.cache.snapshot())
                context = {prefix: block for prefix, block in cached_before.items() if block in named}
                break
        recorded_identities = node_identities(trace.steps, [step.expected for step in trace.steps])
        handle_identity = {
            step.call.name: identity
            for step, identity in zip(trace.steps, recorded_identities)
            if identity is not None and step.call.name
        }
        return cls(trace, spec_results, recorded_identities, node_identities(trace.steps, spec_results), handle_identity, context)

    def first_divergence(self) -> int | None:
        """The index of the first step whose recorded result is not the spec's."""
        for index, step in enumerate(self.trace.steps):
            if step.expected is not None and not same_outcome(step.expected, self.spec_results[index]):
                return index
        return None

    def cut(self, kept: Sequence[int]) -> tuple[list[int], list[Step], list[str]] | None:
        """The kept steps (handles and node names rewritten) and the spec's whole-trace results for them, rewritten too.

        A lock or unlock of a node that no kept step returned is left out too
        (the first index list is what is really kept); None when that is the last step.
        """
        really_kept: list[int] = []
        steps: list[Step] = []
        spec_results: list[str] = []
        first_handle: dict[Identity, str] = {}
        spec_first_handle: dict[Identity, str] = {}
        for index in kept:
            step = self.trace.steps[index]
            call = step.call
            if call.op in HANDLE_OPS and call.handle != "root":
                identity = self.handle_identity.get(call.handle)
                if identity == ROOT_IDENTITY:
                    call = Call(call.op, handle="root")
                elif identity is not None and identity in first_handle:
                    call = Call(call.op, handle=first_handle[identity])
                elif not any(kept_step.call.name == call.handle for kept_step in steps):
                    if index == kept[-1]:
                        return None
                    continue
            expected = step.expected
            if expected is not None:
                expected = _rename(call, expected, self.recorded_identities[index], first_handle)
            really_kept.append(index)
            steps.append(Step(call, expected, step.line))
            spec_results.append(_rename(call, self.spec_results[index], self.spec_identities[index], spec_first_handle))
        return really_kept, steps, spec_results

    def still_diverges(self, kept: Sequence[int]) -> list[int] | None:
        """The indices really kept (see ``cut``) when the cut to ``kept`` still diverges, else None."""
        cut = self.cut(kept)
        if cut is None:
            return None
        really_kept, steps, spec_results = cut
        runner = CallRunner(SpecCache(self.trace.block_size))
        for position, step in enumerate(steps):
            if position == len(steps) - 1:
                cached = cached_block_by_prefix(runner.cache.snapshot())
                if any(cached.get(prefix) != block for prefix, block in self.context.items()):
                    return None  # the blocks the recorded result names are no longer where they were
            got = runner.run(step.call).text
            if got != spec_results[position]:
                return None
        last = steps[-1]
        if last.expected is None or same_outcome(last.expected, spec_results[-1]):
            return None
        return really_kept


def _ints_in(result: str) -> list[int]:
    """The whole numbers inside the brackets of a result: the block ids it names."""
    numbers: list[int] = []
    for listed in _LISTS.findall(result):
        numbers.extend(int(word) for word in listed.split() if word.isdigit())
    return numbers


def _rename(call: Call, result: str, identity: Identity | None, first_handle: dict[Identity, str]) -> str:
    """``result`` with its node written as the kept steps so far would write it; records this step's handle."""
    parts = split_node(call, result)
    if parts is None or identity is None:
        return result
    before, _, after = parts
    if identity == ROOT_IDENTITY:
        written = "root"
    elif identity in first_handle:
        written = first_handle[identity]
    else:
        first_handle[identity] = call.name
        written = "new"
    return before + written + after


def shrink(recording: Recording, *, time_budget: float = 60.0) -> list[int]:
    """The fewest step indices, in order and ending at the first divergence, on which the recording still diverges."""
    last = recording.first_divergence()
    if last is None:
        raise ValueError("the recorded results agree with the spec: nothing to shrink")
    best = list(range(last + 1))
    deadline = time.monotonic() + time_budget
    if recording.still_diverges(best) is None:
        return best  # the whole prefix resolves no differently when cut; nothing to cut safely
    return delta_debug(best, recording.still_diverges, deadline, keep_last=True)


# The command ----------------------------------------------------------------------------------


def describe_call(step: Step) -> str:
    return f"line {step.line}: {step.call.text()}"


def verify_report(file: str, recording: Recording) -> tuple[int, str]:
    """The exit status and the report of verifying ``recording``."""
    trace = recording.trace
    recorded = sum(1 for step in trace.steps if step.expected is not None)
    index = recording.first_divergence()
    if index is None:
        return 0, f"{file}: {len(trace.steps)} calls replayed on the spec; all {recorded} recorded results are what the spec gives"
    step = trace.steps[index]
    lines = [
        f"{file}: the recorded results diverge from the spec at line {step.line} (call {index + 1} of {len(trace.steps)}):",
        f"  {step.call.text()}",
        f"  recorded: {step.expected}",
        f"  spec:     {recording.spec_results[index]}",
    ]
    before = trace.steps[max(0, index - 3) : index]
    if before:
        lines.append(f"the {len(before)} calls before it, as recorded:")
        lines.extend(f"  {describe_call(earlier)} -> {earlier.expected}" for earlier in before)
    return 1, "\n".join(lines)


def shrunk_trace(file: str, recording: Recording, kept: Sequence[int]) -> Trace:
    cut = recording.cut(kept)
    assert cut is not None, "a shrunk trace resolves every handle"
    _, steps, spec_results = cut
    trace = Trace(recording.trace.block_size, [Step(step.call, step.expected, 0) for step in steps])
    trace.comments = [
        f"Cut by `prefixspec verify --shrink` from {file}: {len(steps)} of {len(recording.trace.steps)} calls.",
        "The spec agrees with every recorded result but the last one's:",
        f"  recorded: {steps[-1].expected}",
        f"  spec:     {spec_results[-1]}",
        "Check it again with: prefixspec verify THIS_FILE",
    ]
    return trace


def command_verify(arguments: argparse.Namespace) -> int:
    trace = read_trace(arguments.file)
    if not any(step.expected is not None for step in trace.steps):
        raise UsageError(f"{arguments.file} records no results (no '-> RESULT' on any call): nothing to verify")
    recording = Recording.of(trace)
    status, report = verify_report(arguments.file, recording)
    print(report)
    if status == 0 or not arguments.shrink:
        return status
    kept = shrink(recording, time_budget=arguments.time_budget)
    out = Path(arguments.out) if arguments.out else Path(arguments.file).with_suffix(".shrunk.trace")
    out.write_text(shrunk_trace(arguments.file, recording, kept).text(), encoding="utf-8")
    print(f"shrunk to {len(kept)} of {len(trace.steps)} calls: {out} (prefixspec verify {out} shows the divergence on its last line)")
    return status


def add_verify_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = commands.add_parser("verify", help="hold a trace an engine recorded (its calls and results) to the spec")
    verify.add_argument("file", help="a recorded trace: calls with the engine's results after '->' (docs/recording.md)")
    verify.add_argument("--shrink", action="store_true", help="also cut the trace to the fewest calls that still diverge")
    verify.add_argument("--out", metavar="FILE", default=None, help="where --shrink writes the cut trace (default FILE with .shrunk.trace)")
    verify.add_argument("--time-budget", metavar="SECONDS", type=float, default=60.0, help="stop cutting after this long (default 60)")
    verify.set_defaults(run=command_verify)


# Recording a Python cache ---------------------------------------------------------------------


class RecordingCache:
    """Any ``PrefixCache``, with every call written to ``out`` as a recorded trace line.

    The calls go through unchanged (errors are raised again after they are
    written).  Nodes are named ``n1``, ``n2``... by call count and written as
    ``root``, the first handle that returned them, or ``new``.  A lock of a
    node that no recorded call returned, or a call whose arguments the trace
    format cannot write, goes through with a comment in its place.
    """

    def __init__(self, cache: PrefixCache, out: TextIO, *, title: str = "") -> None:
        self.cache = cache
        self.out = out
        self.calls = 0
        self._runner = CallRunner(cache)
        lines = [HEADER]
        if title:
            lines.append(f"# {title}")
        lines.append(f"block_size {cache.block_size()}")
        out.write("\n".join(lines) + "\n")
        out.flush()

    @property
    def root(self) -> NodeId:
        return self.cache.root

    def block_size(self) -> int:
        return self.cache.block_size()

    def _record(self, call: Call) -> object:
        self.calls += 1
        outcome = self._runner.run(call)
        self.out.write(f"{call.text()} -> {outcome.text}\n")
        self.out.flush()
        if outcome.error is not None:
            raise outcome.error
        return outcome.value

    def _unwritable(self, what: str, action: Callable[[], object]) -> object:
        self.out.write(f"# not recorded: {what}\n")
        return action()

    def _name(self) -> str:
        return f"n{self.calls + 1}"

    def match_prefix(self, tokens: Sequence[int]) -> PrefixMatch:
        try:
            written = tuple(operator.index(token) for token in tokens)
        except TypeError:
            return cast(PrefixMatch, self._unwritable("a match of non-integer tokens", lambda: self.cache.match_prefix(tokens)))
        return cast(PrefixMatch, self._record(Call("match", tokens=written, name=self._name())))

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId]) -> Inserted:
        try:
            written = tuple(operator.index(token) for token in tokens)
            ids = tuple(operator.index(block) for block in blocks)
        except TypeError:
            return cast(Inserted, self._unwritable("an insert of non-integer values", lambda: self.cache.insert(tokens, blocks)))
        return cast(Inserted, self._record(Call("insert", tokens=written, blocks=ids, name=self._name())))

    def _handle_call(self, op: str, node: NodeId) -> None:
        handle = self._runner.name_of(node)
        if handle is None:
            action = self.cache.lock if op == "lock" else self.cache.unlock
            self._unwritable(f"{op} of a node no recorded call returned", lambda: action(node))
            return
        self._record(Call(op, handle=handle))

    def lock(self, node: NodeId) -> None:
        self._handle_call("lock", node)

    def unlock(self, node: NodeId) -> None:
        self._handle_call("unlock", node)

    def evict(self, n_blocks: int) -> list[BlockId]:
        try:
            count = operator.index(n_blocks)
        except TypeError:
            return cast(list[BlockId], self._unwritable("an evict of a non-integer", lambda: self.cache.evict(n_blocks)))
        return cast(list[BlockId], self._record(Call("evict", count=count)))

    def cached_tokens(self) -> int:
        return cast(int, self._record(Call("cached_tokens")))

    def cached_blocks(self) -> int:
        return cast(int, self._record(Call("cached_blocks")))

    def evictable_blocks(self) -> int:
        return cast(int, self._record(Call("evictable_blocks")))

    def stats(self) -> PrefixStats:
        return cast(PrefixStats, self._record(Call("stats")))

    def hit_rate(self) -> float:
        return cast(float, self._record(Call("hit_rate")))

    def snapshot(self) -> Snapshot:
        """Not a call of the trace format: it changes nothing, and goes through unrecorded."""
        return self.cache.snapshot()

