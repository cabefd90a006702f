"""R11 kept as calls change the caches: the spec's kept snapshot and digest, impl's digest, the lockstep by digest.

- Under every rule set, after every call of random sequences, the spec's kept snapshot is its snapshot built
  from scratch and its kept digest the digest made anew; impl's digest is the spec's whenever their snapshots
  agree (so a lockstep of the two never builds a snapshot but every ``full_every``-th comparison).
- A digest costs what the calls changed: after a call on a path of a large cache, the nodes marked are those
  of the path, whatever the cache holds (a count, not a time).
- Negative controls: a spec that forgets a mark is caught by the same check; a target whose digest lies
  (a collision, in effect) is caught by the full comparison every ``full_every``-th call; a digest that
  differs falls back to the snapshots, so an order no call observes still passes and a planted difference
  still fails.
- The capability is stated, never guessed: a cache with a ``snapshot_digest`` it does not declare, a wrapper
  that passes the feature on without the call, and an engine over the pipe are compared by their snapshots.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl import RadixCache
from spec.api import DIGEST_FEATURE, RULE_PRESETS, BlockId, Inserted, Namespace, NodeId, NodeView, PrefixCacheError, Rules, Snapshot
from spec.model import SpecCache
from spec.model.state import Prefix
from prefixspec.running.identify import every_rule_set
from prefixspec.running.report import CheckReport
from prefixspec.running.stages import RunPlan, run_stage
from prefixspec.compare.lockstep import Disagreement, Lockstep
from prefixspec.compare.shrink import first_disagreement
from prefixspec.vocabulary import FEATURES, Call, features_of
from stateful_tests.counter_tree import CounterTree

RULE_SETS: list[Rules] = [*every_rule_set(), replace(RULE_PRESETS["sglang-slru"], slru_threshold=1)]
"""Every combination of variants that has a meaning, and slru at another threshold."""

Op = tuple[str, tuple[int, ...], int]

OPS = st.tuples(
    st.sampled_from(["match", "insert", "insert", "lock", "unlock", "evict"]),
    st.lists(st.integers(0, 2), max_size=7).map(tuple),
    st.integers(0, 40),
)


def kept_state_problem(spec: SpecCache) -> str | None:
    """What of the spec's kept state differs from the one made from scratch (None: nothing)."""
    if spec.kept_snapshot() != spec.snapshot():
        return f"kept snapshot {spec.kept_snapshot()} is not the snapshot {spec.snapshot()}"
    views = spec.kept_views()
    if Counter(views.values()) != Counter(spec.snapshot().nodes):
        return f"kept views {views} are not the snapshot's nodes {spec.snapshot().nodes}"
    misplaced = [place for place, view in views.items() if place != (view.namespace, view.prefix)]
    if misplaced:
        return f"kept views at {misplaced} end elsewhere"
    if spec.snapshot_digest() != spec.digest_from_scratch():
        return "the kept digest is not the digest made from scratch"
    return None


class Driver:
    """One sequence of calls made on a spec and, when given, impl: the same arguments, nodes by position."""

    def __init__(self, block_size: int, rules: Rules, spec_factory: Callable[[int, Rules], SpecCache] = SpecCache, with_impl: bool = True) -> None:
        self.spec = spec_factory(block_size, rules)
        self.impl = RadixCache(block_size, rules) if with_impl else None
        self.block_size = block_size
        self.nodes: list[tuple[NodeId, NodeId | None]] = [(self.spec.root, None if self.impl is None else self.impl.root)]
        self.next_id = 0

    def apply(self, op: Op) -> None:
        kind, tokens, number = op
        caches: list[tuple[int, SpecCache | RadixCache]] = [(0, self.spec)] + ([] if self.impl is None else [(1, self.impl)])
        ids = list(range(self.next_id, self.next_id + len(tokens) // self.block_size))
        if number % 3 == 0 and ids:
            ids[0] = number  # now and then an id cached at another position (refused) or at this one
        self.next_id += len(ids) + 1
        returned: list[NodeId | None] = []
        errors: list[str] = []
        for _index, cache in caches:
            node_index = number % len(self.nodes)
            try:
                if kind == "match":
                    returned.append(cache.match_prefix(tokens).node)
                elif kind == "insert":
                    returned.append(cache.insert(tokens, ids).node)
                elif kind in ("lock", "unlock"):
                    node = self.nodes[node_index][0 if cache is self.spec else 1]
                    getattr(cache, kind)(node)
                else:
                    cache.evict(number % 5)
                errors.append("")
            except PrefixCacheError as error:
                errors.append(type(error).__name__)
        assert len(set(errors)) == 1, f"{op}: the spec and impl part on {errors}"
        if len(returned) == len(caches) and kind in ("match", "insert"):
            self.nodes.append((returned[0], returned[1] if self.impl is not None else None))


@settings(max_examples=300, deadline=None)
@given(rules=st.sampled_from(RULE_SETS), block_size=st.integers(1, 3), ops=st.lists(OPS, max_size=40))
def test_kept_snapshot_and_digests_equal_the_ones_made_from_scratch(rules: Rules, block_size: int, ops: list[Op]) -> None:
    driver = Driver(block_size, rules)
    assert driver.impl is not None
    for op in ops:
        driver.apply(op)
        assert kept_state_problem(driver.spec) is None, f"{rules.name}: after {op}: {kept_state_problem(driver.spec)}"
        snapshot = driver.impl.snapshot()
        assert snapshot == driver.spec.snapshot(), f"{rules.name}: impl's snapshot after {op}"
        assert driver.impl.snapshot_digest() == driver.spec.snapshot_digest(), f"{rules.name}: impl's digest after {op}"


class ForgetsLocks(SpecCache):
    """A planted error in the kept state: a lock is not marked, so the kept view keeps the old count."""

    def lock(self, node: NodeId) -> None:
        super().lock(node)
        self._restamped.clear()


class ForgetsSplits(SpecCache):
    """A planted error in the kept state: the node a split shortens is not marked."""

    def split_at(self, prefix: tuple[object, tuple[int, ...]]) -> object:  # type: ignore[override]  # a test's planted error
        node = super().split_at(prefix)  # type: ignore[arg-type]
        self._reshaped.discard(self.node_below(prefix))  # type: ignore[arg-type]
        return node


class DropsAView(SpecCache):
    """A planted error in the views the coverage reads (``kept_views``): one node left out."""

    def kept_views(self) -> dict[Prefix, NodeView]:
        views = super().kept_views()
        views.pop(next(iter(views)), None)
        return views


class KeepsViewsOfAnOldShape(SpecCache):
    """A planted error in the kept state: the views a node had with other counts of its locks outlive a change of
    its shape, so an unlock after a split gives back a view of the blocks it held before."""

    def refresh_kept(self) -> None:
        had = {node: dict(record.by_locks) for node, record in self._kept.items()}
        super().refresh_kept()
        for node, record in self._kept.items():
            for locks, view in had.get(node, {}).items():
                record.by_locks.setdefault(locks, view)


PLANTED_CALLS: list[Op] = [("insert", (1, 2, 3), 1), ("match", (1, 2, 0), 1), ("lock", (), 2), ("match", (), 0)]
"""An insert, a match that splits it, a lock of the upper node."""

LOCK_SPLIT_UNLOCK: list[Op] = [("insert", (1, 2, 3, 4), 1), ("lock", (), 1), ("match", (1, 2, 0), 0), ("unlock", (), 1)]
"""An insert, a lock of its node, a match that splits that node, its unlock: the node's view with no lock is of
its shape after the split."""


@pytest.mark.parametrize(
    ("spec", "calls", "caught"),
    [
        (ForgetsLocks, PLANTED_CALLS, True),
        (ForgetsSplits, PLANTED_CALLS, True),
        (DropsAView, PLANTED_CALLS, True),
        (SpecCache, PLANTED_CALLS, False),
        (KeepsViewsOfAnOldShape, LOCK_SPLIT_UNLOCK, True),
        (SpecCache, LOCK_SPLIT_UNLOCK, False),
    ],
)
def test_a_spec_that_forgets_a_mark_is_caught(spec: Callable[[int, Rules], SpecCache], calls: list[Op], caught: bool) -> None:
    driver = Driver(1, Rules(), spec, with_impl=False)
    found = []
    for op in calls:
        driver.apply(op)
        found.append(kept_state_problem(driver.spec))
    assert any(found) == caught, found


def test_a_digest_costs_the_nodes_a_call_changes_not_the_cache() -> None:
    """After a cache of 2,000 nodes, a match through a path of 4 nodes marks at most those 4 in either cache."""
    spec, cache = SpecCache(1), RadixCache(1)
    for both in (spec, cache):
        for index in range(1000):
            both.insert([7, index % 256, index // 256, 1], [4 * index, 4 * index + 1, 4 * index + 2, 4 * index + 3])
        both.match_prefix([7, 5, 0, 0, 9])  # splits [7 5 0 1] at [7 5 0]
    assert spec.snapshot_digest() == cache.snapshot_digest()
    assert len(spec.kept_snapshot().nodes) > 1000
    spec.match_prefix([7, 5, 0, 1, 9])
    cache.match_prefix([7, 5, 0, 1, 9])
    assert len(spec.marked_prefixes()) <= 4
    assert len(cache.tree().reshaped | cache.tree().restamped) <= 4
    assert spec.snapshot_digest() == cache.snapshot_digest() == spec.digest_from_scratch()


class LyingDigest(RadixCache):
    """A cache whose snapshot drops every lock but whose digest is of its true state, the spec's: a collision, in effect."""

    def snapshot(self) -> Snapshot:
        shown = super().snapshot()
        return replace(shown, nodes=tuple(replace(view, locks=0) for view in shown.nodes))


def test_a_digest_that_lies_is_caught_by_the_full_comparison_within_full_every_calls() -> None:
    pair = Lockstep(SpecCache(1), LyingDigest(1))
    assert pair.digest
    node = pair.insert([1, 2], [1, 2]).node  # the first comparison, a full one: no lock yet, nothing to lie about
    pair.lock(node)
    with pytest.raises(Disagreement, match="R6, the locks"):
        for _ in range(pair.full_every):
            pair.stats()
    assert pair.comparisons == 1 + pair.full_every


class NoSnapshot(RadixCache):
    """A cache whose digest is honest but which cannot make a snapshot at all."""

    def snapshot(self) -> Snapshot:
        return None  # type: ignore[return-value]  # the target's mistake under test


def test_a_snapshot_the_target_cannot_make_fails_the_first_call() -> None:
    """The first comparison is a full one: a run finds it at its first call, not at its 257th (the call machine ran
    88 examples before one reached that far).  Its control is the lying digest above: a lie that starts after the
    first call waits for the next full comparison."""
    pair = Lockstep(SpecCache(1), NoSnapshot(1))
    assert pair.digest
    with pytest.raises(Disagreement, match="R11, the snapshot"):
        pair.insert([1, 2], [1, 2])
    assert pair.comparisons == 1


def test_a_replay_compares_in_full_at_its_end_so_the_lie_shrinks_to_its_calls() -> None:
    calls = [Call("insert", ((1, 2), (1, 2)), name="n1"), Call("lock", ("n1",))]
    found = first_disagreement(1, calls, LyingDigest)
    assert found is not None and found.rule == "R6, the locks"
    assert first_disagreement(1, calls[:1], LyingDigest) is None


def test_without_the_backstop_the_lie_would_pass() -> None:
    """The control of the test above: with no full comparison the lying digest is believed."""
    pair = Lockstep(SpecCache(1), LyingDigest(1))
    pair.full_every = 10**9
    pair.lock(pair.insert([1, 2], [1, 2]).node)
    for _ in range(200):
        pair.stats()
    assert pair.digests.misses == 0


class WrongDigest(CounterTree):
    """The counter tree, declaring a digest that is never the spec's: every comparison falls back to the snapshots."""

    def snapshot_digest(self) -> int:
        return 0


def digest_declared(cache: CounterTree) -> None:
    cache.prefixspec_features = features_of(CounterTree(1, "lru", "inherit")) | {DIGEST_FEATURE}  # type: ignore[attr-defined]


def test_a_digest_that_differs_falls_back_so_an_unobservable_order_still_passes() -> None:
    """As test_observable's counter tree: it orders a split unlike the spec, on one root path only."""
    tree = WrongDigest(1, "lru", "inherit")
    digest_declared(tree)
    pair = Lockstep(SpecCache(1, RULE_PRESETS["sglang"]), tree)
    assert pair.digest
    pair.insert([2, 3, 4], [6, 7, 8])
    pair.insert([1], [5])
    pair.insert([2, 3, 9], [6, 7, 10])  # no Disagreement
    assert pair.evict(2) == [5, 8]
    assert pair.digests.misses == pair.digests.comparisons == pair.comparisons - 1  # the first is a full one, its digests unread


def test_a_digest_that_differs_falls_back_so_an_observable_difference_still_fails() -> None:
    tree = WrongDigest(1, "fifo", "inherit")  # sglang-fifo stamps a split's upper node fresh: observably other
    digest_declared(tree)
    pair = Lockstep(SpecCache(1, RULE_PRESETS["sglang-fifo"]), tree)
    with pytest.raises(Disagreement, match="R7/R8"):
        pair.insert([1, 2, 3], [1, 2, 3])
        pair.insert([5], [5])
        pair.insert([1, 2, 9], [4, 6, 7])  # splits [1 2 3] at [1 2]
        pair.insert([8], [8])
        pair.match_prefix([1, 2, 9, 0])


class UndeclaredDigest(CounterTree):
    def snapshot_digest(self) -> int:
        raise AssertionError("a digest nobody declared must not be read")


class DeclaredWithoutCall(CounterTree):
    """A wrapper's case: the features say digest, but there is no call to read it."""


def test_the_digest_is_used_only_where_it_is_declared_and_can_be_read() -> None:
    undeclared = Lockstep(SpecCache(1), UndeclaredDigest(1, "lru", "fresh"))
    assert not undeclared.digest
    undeclared.insert([1, 2], [1, 2])
    without_call = DeclaredWithoutCall(1, "lru", "fresh")
    digest_declared(without_call)
    assert DIGEST_FEATURE in features_of(without_call)
    assert not Lockstep(SpecCache(1), without_call).digest
    assert Lockstep(SpecCache(1), RadixCache(1)).digest
    assert DIGEST_FEATURE not in FEATURES, "an engine over the pipe cannot declare it: the handshake keeps only FEATURES"


class StaleAfterInsert(RadixCache):
    """impl with a digest that misses an insert's last node (its term is not marked): its answers and snapshots stay
    right, its digest stale until a later call marks the node again.  An insert, which every example makes: a lock
    of a node the call machine's twenty examples may not make (a run made 24, all of the root)."""

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        inserted = super().insert(tokens, blocks, namespace)
        self.tree().reshaped.discard(inserted.node)
        self.tree().restamped.discard(inserted.node)
        return inserted


def test_a_stage_reports_how_often_the_digest_differed_where_the_snapshots_agreed() -> None:
    """A digest that misses a change costs a comparison of whole snapshots at every call it stays wrong, never a
    verdict: the stage passes and its report, and JSON, say how often.  Control: impl's digest, never off."""
    dev = RunPlan.of_profile("dev")
    plan = replace(dev, base=settings(dev.base, max_examples=1, derandomize=True, database=None))  # twenty call-machine examples
    stale = run_stage("call machine", StaleAfterInsert, plan)
    assert stale.passed, stale.failure
    assert 0 < stale.digests.misses < stale.digests.comparisons
    report = CheckReport("stale", "dev", None, [stale])
    assert f"it differed from the spec's at {stale.digests.misses:,} of the {stale.digests.comparisons:,} comparisons" in report.summary()
    shown = cast(list[dict[str, object]], report.as_json()["stages"])[0]
    assert (shown["digest_comparisons"], shown["digest_misses"]) == (stale.digests.comparisons, stale.digests.misses)
    honest = run_stage("call machine", RadixCache, plan)
    assert honest.passed and honest.digests.comparisons > 0 and honest.digests.misses == 0
    assert "snapshot digest" not in CheckReport("impl", "dev", None, [honest]).summary()
