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

import math
import pickle
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from spec.api import BlockId, Namespace
from spec.model import SpecCache
from prefixspec.formats.trace import CallRunner, Step, Trace, same_outcome
from prefixspec.drive.engine import cached_block_by_prefix
from prefixspec.compare.shrink import delta_debug
from prefixspec.vocabulary import QUERIES, Call, locks_and_unlocks, read_int, result_node

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
    checkpoints: Checkpoints = field(default_factory=lambda: Checkpoints())
    """Walks part way along the best cut so far (``still_diverges``)."""
    deadline: float = math.inf
    """``time.monotonic()`` past which a walk gives up (a cut not shown to diverge): a replay of 100,000 calls takes
    seconds, and ``--time-budget`` bounds the cut, its first replays included."""

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
        walk = self.new_walk()
        steps: list[Step] = []
        spec_results: list[str] = []
        for position, index in enumerate(kept):
            renamed = self.renamed(walk, index, last=position == len(kept) - 1)
            if renamed == "fails":
                return None
            if isinstance(renamed, tuple):
                steps.append(renamed[0])
                spec_results.append(renamed[1])
        return walk.kept, steps, spec_results

    def renamed(self, walk: _Walk, index: int, *, last: bool) -> tuple[Step, str] | Literal["left out", "fails"]:
        """The step ``index`` as the cut walked so far writes it, and the spec's whole-trace result for it, renamed too.

        "left out" for a lock or unlock of a node no kept step returned; "fails" when that is the last step.
        """
        step = self.trace.steps[index]
        call = step.call
        if any(handle != "root" for handle in call.handles):
            rewritten = call.with_handles(lambda handle: self.kept_handle(handle, walk.first_handle, walk.kept_names))
            if "" in rewritten.handles:
                return "fails" if last else "left out"
            call = rewritten
        expected = step.expected
        if expected is not None:
            expected = _rename(call, expected, self.recorded_identities[index], walk.first_handle)
        walk.kept.append(index)
        walk.kept_names.add(call.name)
        spec_result = _rename(call, self.spec_results[index], self.spec_identities[index], walk.spec_first_handle)
        return Step(call, expected, step.line), spec_result

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
        """The indices really kept (see ``cut``) when the cut to ``kept`` still diverges, else None.

        The same answer as a replay of the cut on a fresh spec, in less time:
        the walk starts from the latest checkpoint of a cut that still diverged
        and shares its first calls with ``kept`` (delta debugging removes a
        piece of the best cut so far, so all of them but the piece).  A cut
        that fails soon after its removed piece then costs that much, not the
        whole prefix again: this is what makes ``shrink`` near-linear.
        """
        common = self.checkpoints.common_prefix(kept)
        start, walk = self.checkpoints.latest(common, self.new_walk)
        for position in range(start, len(kept)):
            if position % 1024 == 0 and time.monotonic() >= self.deadline:
                return None
            if start < position <= common:
                self.checkpoints.save(position, walk)  # a walk of the best cut's own first calls: whatever this cut does
            if not self.take(walk, kept[position], last=position == len(kept) - 1):
                return None
        self.checkpoints.adopt(walk.kept, common)
        return walk.kept

    def new_walk(self) -> _Walk:
        return _Walk(CallRunner(SpecCache(self.trace.block_size, self.trace.rules)), {}, {}, set(), [])

    def take(self, walk: _Walk, index: int, *, last: bool) -> bool:
        """Walk the step ``index`` of a cut (``renamed``, then run on the walk's spec); False when the cut fails there."""
        renamed = self.renamed(walk, index, last=last)
        if not isinstance(renamed, tuple):
            return renamed == "left out"
        step, spec_result = renamed
        if last:
            cached = cached_block_by_prefix(walk.runner.cache.snapshot())
            if any(cached.get(prefix) != block for prefix, block in self.context.items()):
                return False  # the blocks the recorded result names are no longer where they were
        if walk.runner.run(step.call).text != spec_result:
            return False
        return not last or (step.expected is not None and not same_outcome(step.expected, spec_result))


@dataclass
class _Walk:
    """Where a walk of a cut is: the spec it runs on and the renaming so far (``Recording.take``)."""

    runner: CallRunner
    first_handle: dict[Identity, str]
    spec_first_handle: dict[Identity, str]
    kept_names: set[str]
    kept: list[int]


CHECKPOINTS = 32
"""How many checkpoints a walk of the best cut so far keeps (each a copy of the spec and the names: memory of
CHECKPOINTS copies of a cut's state)."""


class Checkpoints:
    """Copies of a walk part way along the best cut so far, to start the walks of the cuts made from it.

    A copy is the walk pickled: some eight times faster than ``copy.deepcopy`` (a walk 8,000 calls in: 10 ms
    against 76 ms, as much as a replay of 400 calls), and the spec's nodes shared within it stay shared.
    """

    def __init__(self) -> None:
        self.base: list[int] = []
        self.saved: list[tuple[int, bytes]] = []

    def save(self, position: int, walk: _Walk) -> None:
        """A copy of ``walk`` at ``position`` of the best cut, when it is CHECKPOINTS' spacing past the latest one."""
        latest = self.saved[-1][0] if self.saved else 0
        if position - latest >= max(256, len(self.base) // CHECKPOINTS):
            try:
                self.saved.append((position, pickle.dumps(walk, protocol=pickle.HIGHEST_PROTOCOL)))
            except (pickle.PicklingError, TypeError, AttributeError):
                pass  # a spec that cannot be pickled: its cuts are walked from the start, as correct and slower

    def common_prefix(self, kept: Sequence[int]) -> int:
        """How many first indices ``kept`` shares with the best cut so far (a binary search of slice comparisons)."""
        low, high = 0, min(len(kept), len(self.base))
        while low < high:
            middle = (low + high + 1) // 2
            if list(kept[:middle]) == self.base[:middle]:
                low = middle
            else:
                high = middle - 1
        return low

    def latest(self, common: int, fresh: Callable[[], _Walk]) -> tuple[int, _Walk]:
        """The latest checkpoint at or before ``common`` (a copy, to walk on), or a fresh walk at 0."""
        usable = [(position, saved) for position, saved in self.saved if position <= common]
        if not usable:
            return 0, fresh()
        position, saved = usable[-1]
        walk = pickle.loads(saved)
        assert isinstance(walk, _Walk)
        return position, walk

    def adopt(self, kept: list[int], common: int) -> None:
        """``kept`` still diverged: it is the best cut so far; the checkpoints of the part it shares with the last stay."""
        self.base = list(kept)
        self.saved = [(position, saved) for position, saved in self.saved if position <= common]


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


READS_ONLY = frozenset(QUERIES)
"""The counters (the call table's queries): they change nothing the spec holds (no clock, no counter, no event),
so any of them but the last one goes."""


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

    First the calls that only read go, all at once (one replay), then delta
    debugging (``delta_debug``) cuts what is left until no cut helps or
    ``time_budget`` seconds have passed; each cut it tries is replayed from the
    latest checkpoint of the best cut so far before its removed piece
    (``still_diverges``).  What is returned always
    still diverges; ``stopped_at_budget`` says the budget, not the cut, ended it.
    """
    deadline = time.monotonic() + time_budget
    try:
        last = recording.first_divergence()
        if last is None:
            raise ValueError("the recorded results agree with the spec: nothing to shrink")
        steps = recording.trace.steps
        without_reads = [index for index in range(last + 1) if index == last or steps[index].call.op not in READS_ONLY]
        # The reads' cut is tried first: it diverges whenever the whole prefix does (the reads change nothing), so the
        # whole prefix is walked only when it does not.
        best = recording.still_diverges(without_reads) or recording.still_diverges(range(last + 1))
        if best is None:  # the whole prefix, up to and with its divergence, diverges as the verify found
            return Shrunk(list(range(last + 1)), time.monotonic() >= deadline)  # the whole prefix resolves no differently when cut; nothing to cut safely
        recording.deadline = deadline  # the first cut (the reads') is walked whole: what is returned must diverge
        def paired(kept: list[int]) -> list[tuple[int, int]]:
            return locks_and_unlocks([steps[index].call for index in kept])

        best = delta_debug(best, recording.still_diverges, deadline, keep_last=True, paired=paired)
        return Shrunk(best, time.monotonic() >= deadline)
    finally:  # the budget bounds this cut alone: a later walk of the recording (its caller's check) is not cut short
        recording.deadline = math.inf
