"""Run a reference cache and a cache under test side by side, call by call.

``Lockstep`` is itself a ``PrefixCache`` over the reference's NodeIds: whatever
drives it (the engine workload, a state machine, a test) makes each call once,
and the lockstep makes it on both caches, compares the results as trace text
(nodes by handle, so NodeIds of different caches compare) and, after every
call, the two snapshots (R11).  It records every call with the reference's
result, so the calls up to a disagreement are a ready counterexample trace.
"""

from __future__ import annotations

from spec.api import NodeId, PrefixCache, Snapshot
from prefixspec.formats.trace import CallRunner, Step, Trace, same_outcome
from prefixspec.vocabulary import Call, CallThrough, Unwritable, error_name


class Disagreement(AssertionError):
    """The cache under test answered a call, or ended it in a state, unlike the reference."""

    def __init__(self, trace: Trace, kind: str, expected: str, got: str) -> None:
        self.trace = trace
        self.kind = kind
        self.expected = expected
        self.got = got
        last = trace.steps[-1].call.text() if trace.steps else "(no call)"
        super().__init__(
            f"call {len(trace.steps)} `{last}`: the cache under test disagrees with the spec on its {kind}\n"
            f"  spec:  {expected}\n  cache: {got}"
        )


def describe_snapshot_difference(expected: Snapshot, got: Snapshot) -> tuple[str, str]:
    """The first part of two snapshots that differs, as (expected, got) text."""
    if expected.stats != got.stats:
        return (str(expected.stats), str(got.stats))
    expected_nodes = set(expected.nodes)
    got_nodes = set(got.nodes)
    if expected_nodes != got_nodes:
        missing = sorted(expected_nodes - got_nodes, key=lambda view: view.prefix)
        extra = sorted(got_nodes - expected_nodes, key=lambda view: view.prefix)
        return (f"nodes also {missing}", f"nodes also {extra}")
    if expected.block_size != got.block_size:
        return (f"block_size {expected.block_size}", f"block_size {got.block_size}")
    return (
        "last-use order " + str([list(view.prefix) for view in expected.nodes]),
        "last-use order " + str([list(view.prefix) for view in got.nodes]),
    )


class Lockstep(CallThrough):
    """A ``PrefixCache`` that makes every call on ``reference`` and, when given, ``target``.

    Results returned are the reference's.  A call whose result or resulting
    snapshot differs raises ``Disagreement`` (after recording the call); an
    error the reference raises is raised again after both caches agreed on it.
    """

    def __init__(self, reference: PrefixCache, target: PrefixCache | None = None, *, compare_snapshots: bool = True) -> None:
        self.reference = reference
        self.target = target
        self.compare_snapshots = compare_snapshots
        self.steps: list[Step] = []
        self._reference_runner = CallRunner(reference)
        self._target_runner = CallRunner(target) if target is not None else None

    @property
    def root(self) -> NodeId:
        return self.reference.root

    def trace(self) -> Trace:
        """Every call so far with the reference's results."""
        return Trace(self.reference.block_size(), list(self.steps))

    def next_name(self) -> str:
        return f"n{len(self.steps) + 1}"

    def handle_of(self, node: NodeId) -> str:
        """The trace handle of a reference node that an earlier call returned."""
        name = self._reference_runner.name_of(node)
        if name is None:
            raise Unwritable(f"node {node!r} was not returned by any call made through this lockstep")
        return name

    def target_node(self, handle: str) -> NodeId | None:
        """The target's NodeId behind a trace handle (None without a target)."""
        if self._target_runner is None:
            return None
        return self._target_runner.node_by_name.get(handle)

    def perform(self, call: Call) -> object:
        """Make ``call`` on both caches, compare, and return the reference's result."""
        expected = self._reference_runner.run(call)
        self.steps.append(Step(call, expected.text, len(self.steps) + 1))
        if self._target_runner is not None and self.target is not None:
            got = self._target_runner.run(call)
            if not same_outcome(expected.text, got.text):
                raise Disagreement(self.trace(), "result", expected.text, got.text)
            if self.compare_snapshots:
                self.check_snapshots(self.reference, self.target)
        if expected.error is not None:
            raise expected.error
        return expected.value

    def check_snapshots(self, reference: PrefixCache, target: PrefixCache) -> None:
        wanted = reference.snapshot()
        try:
            actual = target.snapshot()
        except Exception as error:  # a broken target's snapshot is a disagreement, not a crash of the checker
            raise Disagreement(self.trace(), "snapshot", "a snapshot", error_name(error)) from None
        if wanted != actual:
            expected_text, got_text = describe_snapshot_difference(wanted, actual)
            raise Disagreement(self.trace(), "snapshot", expected_text, got_text)

    def block_size(self) -> int:
        return self.reference.block_size()

    def snapshot(self) -> Snapshot:
        """The reference's snapshot; not a call of the trace (it changes nothing)."""
        return self.reference.snapshot()
