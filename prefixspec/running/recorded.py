"""Recorded traces (their calls and an engine's results) held to the spec, and cut to the fewest calls.

A recorded trace is the trace format of ``fixtures/README.md`` with the
engine's own results after ``->``; ``docs/recording.md`` says how an engine
writes one, and ``prefixspec.targets.recording.RecordingCache`` writes one for
any Python cache.  ``prefixspec verify``
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

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from spec.api import BlockId, Namespace
from spec.model import SpecCache
from prefixspec.formats.trace import CallRunner, Step, Trace, same_outcome
from prefixspec.running.engine import cached_block_by_prefix
from prefixspec.running.shrink import delta_debug
from prefixspec.vocabulary import Call, read_int, result_node

_LISTS = re.compile(r"\[([^\]]*)\]")

Identity = tuple[str, str]
"""A node as a recording knows it: ("root", "") or ("handle", first handle that returned it)."""

ROOT_IDENTITY: Identity = ("root", "")


# Reading node names off results -----------------------------------------------------------


def split_node(call: Call, result: str) -> tuple[str, str, str] | None:
    """``result`` of a match or insert as (before the node, the node, after it), or None (an error, or no node)."""
    return result_node(call.kind, result)


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
    context: dict[tuple[Namespace, tuple[int, ...]], BlockId]
    """Where the blocks that the first divergent result names were cached just before it, in the whole trace."""

    @classmethod
    def of(cls, trace: Trace) -> Recording:
        runner = CallRunner(SpecCache(trace.block_size, trace.rules))
        spec_results = [runner.run(step.call).text for step in trace.steps]
        context: dict[tuple[Namespace, tuple[int, ...]], BlockId] = {}
        for index, step in enumerate(trace.steps):
            if step.expected is not None and not same_outcome(step.expected, spec_results[index]):
                again = CallRunner(SpecCache(trace.block_size, trace.rules))
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
        kept_names: set[str] = set()  # the names of the steps kept so far, grown step by step: a cut is linear in its length
        for index in kept:
            step = self.trace.steps[index]
            call = step.call
            if any(handle != "root" for handle in call.handles):
                rewritten = call.with_handles(lambda handle: self.kept_handle(handle, first_handle, kept_names))
                if "" in rewritten.handles:
                    if index == kept[-1]:
                        return None
                    continue
                call = rewritten
            expected = step.expected
            if expected is not None:
                expected = _rename(call, expected, self.recorded_identities[index], first_handle)
            really_kept.append(index)
            steps.append(Step(call, expected, step.line))
            kept_names.add(call.name)
            spec_results.append(_rename(call, self.spec_results[index], self.spec_identities[index], spec_first_handle))
        return really_kept, steps, spec_results

    def kept_handle(self, handle: str, first_handle: dict[Identity, str], kept_names: set[str]) -> str:
        """What a kept call writes for ``handle``: root, the first kept handle of its node, itself, or "" (removed)."""
        if handle == "root":
            return handle
        identity = self.handle_identity.get(handle)
        if identity == ROOT_IDENTITY:
            return "root"
        if identity is not None and identity in first_handle:
            return first_handle[identity]
        return handle if handle in kept_names else ""

    def still_diverges(self, kept: Sequence[int]) -> list[int] | None:
        """The indices really kept (see ``cut``) when the cut to ``kept`` still diverges, else None."""
        cut = self.cut(kept)
        if cut is None:
            return None
        really_kept, steps, spec_results = cut
        runner = CallRunner(SpecCache(self.trace.block_size, self.trace.rules))
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
        for word in listed.split():
            number = read_int(word)
            if number is not None:
                numbers.append(number)
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


READS_ONLY = frozenset({"stats", "hit_rate", "cached_tokens", "cached_blocks", "evictable_blocks"})
"""Calls that change nothing the spec holds (no clock, no counter, no event): any of them but the last one goes."""


@dataclass(frozen=True)
class Shrunk:
    """The step indices a shrink kept, and whether it stopped at its time budget (the cut is then not minimal)."""

    kept: list[int]
    stopped_at_budget: bool


def shrink(recording: Recording, *, time_budget: float = 60.0) -> list[int]:
    """``shrink_within``'s kept indices."""
    return shrink_within(recording, time_budget=time_budget).kept


def shrink_within(recording: Recording, *, time_budget: float = 60.0) -> Shrunk:
    """The fewest step indices, in order and ending at the first divergence, on which the recording still diverges.

    Each candidate cut replays the spec on the calls kept, so a cut costs the
    length of what is left: first the calls that only read go, all at once (one
    replay), then delta debugging (``delta_debug``) cuts what is left until no
    cut helps or ``time_budget`` seconds have passed.  What is returned always
    still diverges; ``stopped_at_budget`` says the budget, not the cut, ended it.
    """
    deadline = time.monotonic() + time_budget
    last = recording.first_divergence()
    if last is None:
        raise ValueError("the recorded results agree with the spec: nothing to shrink")
    best = recording.still_diverges(range(last + 1))
    if best is None:
        return Shrunk(list(range(last + 1)), False)  # the whole prefix resolves no differently when cut; nothing to cut safely
    steps = recording.trace.steps
    without_reads = [index for index in best if index == last or steps[index].call.op not in READS_ONLY]
    if len(without_reads) < len(best):
        best = recording.still_diverges(without_reads) or best
    best = delta_debug(best, recording.still_diverges, deadline, keep_last=True)
    return Shrunk(best, time.monotonic() >= deadline)
