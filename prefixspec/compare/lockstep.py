"""Run a reference cache and a cache under test side by side, call by call.

``Lockstep`` is itself a ``PrefixCache`` over the reference's NodeIds: whatever
drives it (the engine workload, a state machine, a test) makes each call once,
and the lockstep makes it on both caches, compares the results as trace text
(nodes by handle, so NodeIds of different caches compare) and, after every
call, the two snapshots (R11).  It records every call with the reference's
result, so the calls up to a disagreement are a ready counterexample trace.

A target that keeps a snapshot digest (``spec.api.DIGEST_FEATURE``, declared in its features) is compared
by its digest after a call: equal digests are equal states, at a cost independent of the caches' size.  A
digest that differs is no verdict: the two snapshots are built and compared as for any target, so a cache
whose state differs only in an order no call observes (``compare.observable``) still passes; and the first
comparison and every ``full_every``-th after it is a full one whatever the digests say, against the spec's
snapshot built from scratch, a backstop against a collision of the 64-bit digests.  The first is full so that
a snapshot the target cannot make at all (None, a dict, one whose ``==`` raises) fails a run at its first call,
where a cache holds next to nothing, and not only at its 257th.  The comparisons by digest, and those whose
digests differed, are counted in a ``DigestTally`` that the locksteps of a stage share, for its report: a
digest that misses a change costs a comparison of whole snapshots at every call it stays wrong, which a user
who wrote the digest for speed wants to hear of.

A target that publishes KV events (R13) is asked for them as a router polls:
after every ``take_every``-th insert or evict, refused ones counted too (a
``take_events`` step of the trace; events a match or a lock publishes by
mistake show in the next take), or only when the driver calls ``take_pending``
(``take_every=None``: at the end of an example).  A take then spans several
calls, stores and removals mixed, refusals between them.  The events must be
the spec's, cut into blocks however the target likes, and folded into a
router's ``Mirror`` they must give the spec's contents wherever they are taken.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import SupportsIndex, TypeAlias, cast

from spec.api import DIGEST_FEATURE, CacheFactory, KVEvent, NodeId, PrefixCache, PrefixCacheError, Snapshot
from spec.model import SpecCache
from prefixspec.formats.outcomes import Outcome, same_result
from prefixspec.formats.repeats import StepsOnDemand
from prefixspec.formats.trace import PASSED_ON, CallRunner, Step, Trace, outcome_text
from prefixspec.compare.mirror import Mirror, MirrorError, contents_difference
from prefixspec.compare.differences import describe_snapshot_difference as describe_snapshot_difference, result_rule
from prefixspec.compare.differences import snapshots_agree as snapshots_agree  # re-exported: R11's verdict
from prefixspec.compare.observable import OrderReport, order_report
from prefixspec.compare.reading import SpecReading
from prefixspec.targets.guarded import GuardedCache
from prefixspec.vocabulary import TAKE_EVENTS, Call, CallThrough, Unwritable, WrongResult, features_of


class Disagreement(AssertionError):
    """The cache under test answered a call, or ended it in a state, unlike the reference.

    ``kind`` is what differs (its ``result`` or its ``snapshot``), ``rule`` the
    rule that observable belongs to (``R7``...), ``expected``/``got`` the two
    versions of the part that differs.
    """

    def __init__(self, trace: Trace, kind: str, expected: str, got: str, rule: str = "") -> None:
        self.trace = trace
        self.kind = kind
        self.expected = expected
        self.got = got
        self.rule = rule
        super().__init__(self.describe())

    @property
    def last_call(self) -> str:
        return self.trace.steps[-1].call.text() if self.trace.steps else "(no call)"

    def describe(self) -> str:
        """The disagreement, its call numbered as a counterexample's header counts calls: the take_events the
        lockstep makes after inserts and evicts apart (``shrink.counterexample_trace``)."""
        broken = f" ({self.rule})" if self.rule else ""
        made = sum(1 for step in self.trace.steps if step.call.op != TAKE_EVENTS.op)
        taken = bool(self.trace.steps) and self.trace.steps[-1].call.op == TAKE_EVENTS.op
        where = f"the take_events after call {made}" if taken else f"call {made}"
        return (
            f"{where} `{self.last_call}`: the cache under test disagrees with the spec on its {self.kind}{broken}\n"
            f"  spec:  {self.expected}\n  cache: {self.got}"
        )


class RecordedSteps(StepsOnDemand):
    """The lockstep's calls, each with the reference's outcome, made into a trace's steps only when read.

    A step's result is text for a counterexample, which a passing run never writes: recording the call and
    the outcome alone spares every call the rendering of its result and a step of its own
    (``bench.stage_throughput``).  An outcome keeps the value the reference returned, so a driver must not
    change a result it was handed (none of ``prefixspec.drive``'s does).
    """

    def __init__(self) -> None:
        self.calls: list[Call] = []
        """Every call so far, in order: read without making a step."""
        self.outcomes: list[Outcome] = []
        """The reference's outcome of each call, beside it: a call is recorded by appending to both lists (the
        lockstep does so in line, at every call)."""

    def __len__(self) -> int:
        return len(self.calls)

    def step_at(self, index: int) -> Step:
        return Step(self.calls[index], self.outcomes[index].text, index + 1)


_Events: TypeAlias = list[KVEvent]
"""Named once: ``list[...]`` written in a cast is made anew at each."""

Observer = Callable[[Call, PrefixCacheError | None, object, SpecReading, SpecReading], None]
"""Told of a call, the interface's error the spec refused it with (None: it did not), its result, and the spec's
state around it."""

FULL_EVERY = 256
"""Of the comparisons by digest, the first and every this-many-th after it is a full one (``Lockstep.full_every``).

The backstop is for a digest whose bookkeeping lies (a change the target made but never marked), not for a
collision of two honest 64-bit digests; such a lie shows at the next full comparison, and a shrunk
counterexample ends with one (``shrink``), so how soon matters little.  An engine machine's burst of 250-450
steps (some 600-1,100 comparisons) still makes two to four; at 64 they cost it some 4% of its time (``bench.stage_throughput``: 1.04x)."""


def keeps_digest(target: PrefixCache) -> bool:
    """Whether ``target`` declares a snapshot digest among its features and has the call that reads it: a
    wrapper that passes its cache's features on without the call is compared by its snapshot."""
    return DIGEST_FEATURE in features_of(target) and callable(getattr(target, "snapshot_digest", None))


@dataclass
class DigestTally:
    """Comparisons by a target's digest, over every lockstep that shares the tally (a stage's)."""

    comparisons: int = 0
    """Comparisons that read the two digests (not the full ones, which build the snapshots whatever they say)."""
    misses: int = 0
    """Of those, the ones whose digests differed, so that the snapshots were built and compared."""


class Lockstep(CallThrough):
    """A ``PrefixCache`` that makes every call on ``reference`` and, when given, ``target``.

    Results returned are the reference's.  A call whose result or resulting
    snapshot differs raises ``Disagreement`` (after recording the call); an
    error the reference raises is raised again after both caches agreed on it.
    """

    def __init__(
        self,
        reference: SpecCache,
        target: PrefixCache | None = None,
        *,
        compare_snapshots: bool = True,
        snapshot_every: int = 1,
        observer: Observer | None = None,
        target_factory: CacheFactory | None = None,
        check_events: bool = True,
        take_every: int | None = 1,
        digests: DigestTally | None = None,
    ) -> None:
        self.reference = reference
        self.target = target
        self.compare_snapshots = compare_snapshots
        self.snapshot_every = snapshot_every
        """Compare the snapshots after every call (1), or after every k-th (a cache of thousands of blocks)."""
        self.steps = RecordedSteps()
        self._reference_runner = CallRunner(reference, functools.partial(SpecCache, rules=reference.rules))
        self._reference_snapshot: Snapshot | None = None
        self._reference_digest: int | None = None
        self._reading: SpecReading | None = None
        self.observer = observer
        """Told of every call, its result and the spec's state around it (``coverage.Coverage.observe``)."""
        self._target_runner = CallRunner(target, target_factory) if target is not None else None
        self._block_size_checked = False
        self.events = check_events and target is not None and "events" in features_of(target)
        self.order: OrderReport = order_report(features_of(target)) if target is not None else "eviction-order"
        """How the target's snapshot reports the order (R11, ``compare.observable``)."""
        """Take and compare the target's KV events after every call that takes arguments (R13)."""
        self.mirror = Mirror(copies=reference.rules.dup == "keep")
        """The router's mirror, folded from the target's events alone."""
        self.digest = target is not None and keeps_digest(target)
        """Compare by the target's snapshot digest (``keeps_digest``), building snapshots only to explain a difference."""
        if self.digest and compare_snapshots and snapshot_every == 1 and isinstance(target, GuardedCache):
            target.read_digest_with_each_call()  # read in each call's own guarded run, where it is compared after every call
        self.full_every = FULL_EVERY
        self.comparisons = 0
        self.digests = DigestTally() if digests is None else digests
        """The comparisons by digest, and those whose digests differed: this lockstep's own, or a stage's shared."""
        self._takes = 0
        self.take_every = take_every
        """Take the target's events after this many inserts and evicts (refused ones too); None: only ``take_pending``."""
        self._changes_since_take = 0

    @property
    def root(self) -> NodeId:
        return self.reference.root

    def trace(self) -> Trace:
        """Every call so far with the reference's results."""
        return Trace(self.reference.block_size(), list(self.steps), rules=self.reference.rules)

    def next_name(self) -> str:
        return f"n{len(self.steps.calls) + 1}"

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
        kind = call.kind
        observer = self.observer
        # The reading after the last call, kept unless a call changed the state since: read without a call.
        before = (self._reading or self.reading()) if observer is not None else None
        expected = self._reference_runner.run(call, text=False, kind=kind)  # written as text when a step is read, or to differ
        if kind.params and expected.error is None:
            self._reference_snapshot = self._reference_digest = self._reading = None  # a call that takes arguments and was not refused may change the state
        steps = self.steps
        steps.calls.append(call)
        steps.outcomes.append(expected)
        if self._target_runner is not None and self.target is not None:
            got = self._target_runner.run(call, text=False, kind=kind)  # compared by value where it can be: rendered only to differ
            if not same_result(expected, got):
                rule = result_rule(call.op, expected.text, got.text)
                if call.namespace is not None:  # the rule holds within a namespace: a difference there is R12's first
                    rule = f"R12 within a namespace, {rule}"
                raise Disagreement(self.trace(), "result", expected.text, got.text, rule)
            if not self._block_size_checked:  # once a lockstep: it changes nothing, and no call's result shows it
                self._block_size_checked = True
                self.check_block_size(self.target)
            if call.op == TAKE_EVENTS.op:  # it changes nothing the snapshot shows: the mirror is what to compare
                self._changes_since_take = 0
                self.fold_into_mirror(got.value)
                self._takes += 1
                if self.compare_snapshots and self._takes % self.snapshot_every == 0:  # as often as the snapshots
                    self.check_mirror()
            elif self.compare_snapshots and len(steps.calls) % self.snapshot_every == 0:
                self.check_snapshots(self.reference, self.target, refused=expected.error is not None)
        if observer is not None and before is not None:
            refusal = expected.error if isinstance(expected.error, PrefixCacheError) else None
            observer(call, refusal, expected.value, before, self._reading or self.reading())
        if kind.publishes:  # the lockstep takes the target's events after the calls that publish any (R13)
            if self.events:
                self._changes_since_take += 1
                if self.take_every is not None and self._changes_since_take >= self.take_every:
                    self.perform(Call(TAKE_EVENTS.op))
            else:
                self.reference.take_events()  # nobody compares them: they must not pile up
        if expected.error is not None:
            raise expected.error
        return expected.value

    def take_pending(self) -> None:
        """Take the events of the inserts and evicts since the last take, if any (a router's last poll)."""
        if self.events and self._changes_since_take:
            self.perform(Call(TAKE_EVENTS.op))

    def fold_into_mirror(self, events: object) -> None:
        """R13: the target's events, folded into the router's mirror; a fold that fails is a disagreement."""
        try:
            self.mirror.fold(cast(_Events, events))
        except MirrorError as problem:
            raise Disagreement(self.trace(), "events", "events a mirror can fold", str(problem), "R13, the events") from None

    def check_mirror(self) -> None:
        """R13: the mirror holds exactly what the spec caches, per namespace: nothing stale, nothing missing."""
        difference = contents_difference(self.reference.cached_contents(), self.mirror.contents())
        if difference is not None:
            raise Disagreement(self.trace(), "mirror of its events", difference[0], difference[1], "R13, the events fold to the contents")

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Compare results after every call but snapshots only once, after the block (and observe no call).

        For the rules that build a tree hundreds of nodes deep or wide: a
        snapshot after each of their hundreds of calls would cost the square
        of the tree's size.
        """
        compare, observer = self.compare_snapshots, self.observer
        self.compare_snapshots, self.observer = False, None
        try:
            yield
        finally:
            self.compare_snapshots, self.observer = compare, observer
        if compare and self.target is not None:
            self.check_snapshots(self.reference, self.target)

    def check_block_size(self, target: PrefixCache) -> None:
        """The target's ``block_size()`` is the reference's, an int (R1)."""
        wanted = str(self.reference.block_size())
        try:
            value: object = target.block_size()
        except PASSED_ON:
            raise
        except BaseException as error:  # like any call's, a block_size() that raises is its outcome
            got = outcome_text(error)
        else:
            if hasattr(type(value), "__index__") and not isinstance(value, bool):  # an int as R1 counts one
                got = str(operator.index(cast(SupportsIndex, value)))
            else:
                got = f"crash WrongResult: block_size returned a {type(value).__name__}, not an int"
        if got != wanted:
            raise Disagreement(self.trace(), "block size", wanted, got, "R1, the block size")

    def check_snapshots(self, reference: SpecCache, target: PrefixCache, *, refused: bool = False, full: bool = False) -> None:
        """The two snapshots after a call, by their digests where the target keeps one but the first time and
        every ``full_every``-th after it (or when ``full``: at the end of a replay); a difference after a call the
        spec refused breaks R10.  With events, the mirror too."""
        if self.events and self.steps.calls and self.steps.calls[-1].op == TAKE_EVENTS.op:
            self.check_mirror()
        self.comparisons += 1
        full = full or (self.comparisons - 1) % self.full_every == 0  # the 1st, the (1 + full_every)th...
        if self.digest and not full:
            self.digests.comparisons += 1
            # R11 by the two digests; a target whose digest call fails or returns no int disagrees.  Read in line: a
            # lockstep compares them after every call (bench.stage_throughput).
            try:
                got: object = getattr(target, "snapshot_digest")()
            except PASSED_ON:
                raise
            except BaseException as error:  # it declared the digest: a digest that raises is a broken target, not a crash of the checker
                raise Disagreement(self.trace(), "snapshot digest", "a digest", outcome_text(error), "R11, the snapshot") from None
            if reference is not self.reference:
                digest = reference.snapshot_digest()
            elif self._reference_digest is None:  # like the snapshot, taken once after each call that may change the state
                digest = self._reference_digest = reference.snapshot_digest()
            else:
                digest = self._reference_digest
            if type(got) is int and got == digest:
                return
            self.digests.misses += 1
        wanted = self.scratch_snapshot(reference) if full else self.snapshot()
        try:
            actual = target.snapshot()
            if not isinstance(actual, Snapshot):
                raise WrongResult(f"snapshot returned {type(actual).__name__}, not a Snapshot")
            same = snapshots_agree(wanted, actual, self.order)
            if not same:
                last = self.steps.calls[-1] if self.steps else None
                tokens = last.arg("tokens") if last is not None and last.kind.params and last.kind.params[0].kind == "tokens" else ()
                # Inside the try: a Snapshot whose fields are not the interface's (nodes=None) cannot be compared part by part.
                rule, expected_text, got_text = describe_snapshot_difference(
                    wanted, actual, reference.rules, cast(tuple[int, ...], tokens), self.order
                )
        except PASSED_ON:
            raise
        except BaseException as error:  # a broken target's snapshot is a disagreement, not a crash of the checker
            raise Disagreement(self.trace(), "snapshot", "a snapshot", outcome_text(error), "R11, the snapshot") from None
        if not same:
            if refused:
                rule = f"R10, a refused call changes nothing (here: {rule})"
            raise Disagreement(self.trace(), "snapshot", expected_text, got_text, rule)

    def scratch_snapshot(self, reference: SpecCache) -> Snapshot:
        """R11: the spec's snapshot built from scratch, the definition; the kept one must be equal to it."""
        scratch = reference.snapshot()
        kept = self.snapshot()
        assert kept == scratch, f"the spec's kept snapshot {kept} differs from its snapshot built from scratch {scratch}"
        return scratch

    def block_size(self) -> int:
        return self.reference.block_size()

    def reading(self) -> SpecReading:
        """The reference's counters and nodes, for the observer: taken once after each call that may change the
        state, as ``snapshot`` is."""
        if self._reading is None:
            self._reading = SpecReading(self.reference.counter_values(), self.reference.kept_views())
        return self._reading

    def snapshot(self) -> Snapshot:
        """The reference's snapshot; not a call of the trace (it changes nothing).

        The spec's state changes only by a call that is neither a query nor
        refused (R9, R10), so its snapshot is taken once after each such call
        and reused until the next: the checks after a counter read, a refused
        call and an engine step compare against it without rebuilding it
        (cProfile of the engine machine: the spec's snapshot was 43% of its time).  It is the snapshot the spec
        keeps as calls change it (``SpecCache.kept_snapshot``), held to the one built from scratch by every full
        comparison (``scratch_snapshot``).
        """
        if self._reference_snapshot is None:
            self._reference_snapshot = self.reference.kept_snapshot()
        return self._reference_snapshot
