"""R11 compares only what a call can observe; R4's split=inherit and R8's slru, each against an independent cache.

- The fast comparison of ``compare.observable`` is the definition (every pair off one root path ranked
  alike), checked pair by pair on random trees and orders; the eviction walk is a naive walk's.
- The definition is what calls reveal: for every pair off one root path of a spec state, two locks, an
  evict, two unlocks and ``evict 1`` free the one the snapshot ranks first, under every variant.
- ``stateful_tests/counter_tree.py`` (stamped as SGLang's unified tree core stamps, written from its
  source) orders nodes on one root path unlike the spec: it passes its presets; with the other R4
  variant, another slru threshold, or a snapshot that swaps an observable pair, it fails.
- The worked examples of spec/README.md (R4, R8) on the spec, impl and the counter tree.

Caches that report no order are ``test_unordered.py``'s.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from impl import RadixCache
from spec.api import RULE_PRESETS, NodeView, PrefixCache, Rules, Snapshot, parse_rules
from spec.model import SpecCache
from prefixspec.compare.lockstep import Disagreement, Lockstep, snapshots_agree
from prefixspec.compare.observable import eviction_walk, observable_difference, on_one_root_path
from prefixspec.running.stages import RunPlan, run_stage
from stateful_tests.counter_tree import CounterTree, Policy

# ------------------------------------------------------------------ the comparison is the definition


@st.composite
def trees_and_two_orders(draw: st.DrawFn) -> tuple[list[NodeView], list[NodeView]]:
    """A random forest of up to 9 nodes at block size 1 (node i below node parents[i]), its top nodes in the
    namespaces None, 0 and "0" (R12: equal tokens in two namespaces are two roots), in two random orders."""
    count = draw(st.integers(1, 9))
    prefixes: list[tuple[int, ...]] = []
    spaces: list[None | int | str] = []
    for index in range(count):
        parent = draw(st.integers(-1, index - 1))
        if parent >= 0:
            prefixes.append(prefixes[parent] + (100 + index,))
            spaces.append(spaces[parent])
        else:  # the k-th top node of its namespace starts with 100 + k: equal tokens in other namespaces
            space = draw(st.sampled_from([None, 0, "0"]))
            tops = sum(1 for other, prefix in zip(spaces, prefixes) if len(prefix) == 1 and type(other) is type(space) and other == space)
            prefixes.append((100 + tops,))
            spaces.append(space)
    views = [NodeView(prefix, (index,), 0, space) for index, (prefix, space) in enumerate(zip(prefixes, spaces))]
    return draw(st.permutations(views)), draw(st.permutations(views))


def pairwise_agree(first: list[NodeView], second: list[NodeView]) -> bool:
    """The definition: every two nodes off one root path come in the same order in both."""
    place = {view: index for index, view in enumerate(second)}
    for index, one in enumerate(first):
        for other in first[index + 1 :]:
            if not on_one_root_path(one, other) and place[other] < place[one]:
                return False
    return True


@settings(max_examples=400, deadline=None)
@given(trees_and_two_orders())
def test_the_branch_comparison_is_the_pairwise_definition(orders: tuple[list[NodeView], list[NodeView]]) -> None:
    first, second = orders
    pair = observable_difference(first, second, 1)
    assert (pair is None) == pairwise_agree(first, second)
    if pair is not None:  # a real witness: off one root path, ranked one way by the first order, the other by the second
        one, other = pair
        assert not on_one_root_path(one, other)
        assert first.index(one) < first.index(other) and second.index(other) < second.index(one)


def naive_walk(order: list[NodeView]) -> list[NodeView]:
    """The first node in ``order`` that no remaining node lies below, again and again."""
    left = list(order)
    walk: list[NodeView] = []
    while left:
        first = next(
            view
            for view in left
            if not any(
                other != view and repr(other.namespace) == repr(view.namespace) and other.prefix[: len(view.prefix)] == view.prefix
                for other in left
            )
        )
        walk.append(first)
        left.remove(first)
    return walk


@settings(max_examples=300, deadline=None)
@given(trees_and_two_orders())
def test_the_eviction_walk_is_the_naive_walk(orders: tuple[list[NodeView], list[NodeView]]) -> None:
    assert eviction_walk(orders[0], 1) == naive_walk(orders[0])


def test_nodes_of_two_namespaces_are_never_on_one_root_path() -> None:
    assert on_one_root_path(NodeView((1,), (1,), 0), NodeView((1, 2), (2,), 0))
    assert not on_one_root_path(NodeView((1,), (1,), 0, "a"), NodeView((1, 2), (2,), 0, "b"))
    assert not on_one_root_path(NodeView((1,), (1,), 0, 0), NodeView((1, 2), (2,), 0, "0"))
    assert not on_one_root_path(NodeView((1, 3), (1,), 0), NodeView((1, 2), (2,), 0))


# --------------------------------------------------------- every pair off one root path is observable

CALLS = [
    ("insert", [1, 2, 3, 4], [10, 11, 12, 13]),
    ("insert", [1, 2, 3, 4], [10, 11, 12, 13]),
    ("insert", [5, 6], [20, 21]),
    ("match", [1, 2, 9], None),
    ("insert", [1, 7, 8], [10, 30, 31]),
    ("insert", [5, 9], [20, 40]),
    ("match", [1, 7, 8, 0], None),
    ("insert", [2], [50]),
]
"""At block size 1: splits by a match and by an insert, three branch points, hits from 1 to 4."""


def built(rules: Rules) -> SpecCache:
    cache = SpecCache(1, rules)
    for op, tokens, blocks in CALLS:
        if op == "insert":
            assert blocks is not None
            cache.insert(tokens, blocks)
        else:
            cache.match_prefix(tokens)
    return cache


NODE_ORDERED = sorted(name for name, rules in RULE_PRESETS.items() if rules.unit == "leaf")
"""The presets whose snapshot ranks nodes; under ``use=release`` the order is the blocks' (``Snapshot.released``)."""


@pytest.mark.parametrize("preset", NODE_ORDERED + ["evict=slru:3", "evict=slru:1,split=inherit"])
def test_two_locks_and_evictions_reveal_every_pair_off_one_root_path(preset: str) -> None:
    """R11: lock x and y, evict everything else, unlock them, ``evict 1``: it frees whichever the snapshot ranks first."""
    rules = parse_rules(preset)
    order = list(built(rules).snapshot().nodes)
    pairs = [(one, other) for index, one in enumerate(order) for other in order[index + 1 :] if not on_one_root_path(one, other)]
    assert len(pairs) >= 20
    for first, second in pairs:
        cache = built(rules)
        handles = [cache.split_at((None, view.prefix)) for view in (first, second)]  # the nodes there already
        for handle in handles:
            cache.lock(handle)
        cache.evict(10**9)
        for handle in handles:
            cache.unlock(handle)
        assert cache.evict(1) == list(first.blocks), f"{preset}: {first.prefix} ranks before {second.prefix}"


# ---------------------------------------------------------------------- the worked examples (README)


def fifo_after_a_split(cache: PrefixCache) -> tuple[list[int], list[int]]:
    """R4's worked example at block size 1: [2 3 4] cached first, [1] second; a match splits [2 3 4] at [2 3]."""
    cache.insert([2, 3, 4], [6, 7, 8])
    cache.insert([1], [5])
    cache.match_prefix([2, 3, 9])
    return cache.evict(1), cache.evict(1)


FIFO_CACHES: dict[str, Callable[[str, Literal["fresh", "inherit"]], PrefixCache]] = {
    "spec": lambda policy, split: SpecCache(1, Rules("path+split-tail", policy, split=split)),  # type: ignore[arg-type]  # policy is an EvictRule
    "impl": lambda policy, split: RadixCache(1, Rules("path+split-tail", policy, split=split)),  # type: ignore[arg-type]  # policy is an EvictRule
    "counter tree": lambda policy, split: CounterTree(1, policy, split),  # type: ignore[arg-type]  # policy is a Policy
}


@pytest.mark.parametrize("cache", sorted(FIFO_CACHES))
def test_fifo_after_a_split_frees_the_upper_node_only_when_it_inherits_its_creation(cache: str) -> None:
    make = FIFO_CACHES[cache]
    assert fifo_after_a_split(make("fifo", "inherit")) == ([8], [6, 7])  # the upper node is as old as [2 3 4]
    assert fifo_after_a_split(make("fifo", "fresh")) == ([8], [5])  # the upper node was made by the match
    # filo, newest first, would free [1] before the lower part: a lock on [1] keeps it until the upper node is a leaf.
    assert filo_after_a_split(make("filo", "inherit")) == ([8], [5])  # [1] is newer than [2 3 4]'s creation
    assert filo_after_a_split(make("filo", "fresh")) == ([8], [6, 7])  # the match made the upper node, after [1]


def filo_after_a_split(cache: PrefixCache) -> tuple[list[int], list[int]]:
    """The example of ``fifo_after_a_split`` with [1] locked while the lower part goes."""
    cache.insert([2, 3, 4], [6, 7, 8])
    one = cache.insert([1], [5]).node
    cache.match_prefix([2, 3, 9])
    cache.lock(one)
    first = cache.evict(1)
    cache.unlock(one)
    return first, cache.evict(1)


def slru_protects_from_the_threshold(cache: PrefixCache) -> list[int]:
    """R8's worked example at block size 1: [1 2] inserted twice (2 hits), [5] once then matched (used last)."""
    cache.insert([1, 2], [10, 11])
    cache.insert([5], [20])
    cache.insert([1, 2], [10, 11])
    cache.match_prefix([5, 9])
    return cache.evict(1)


SLRU_CACHES: dict[str, Callable[[int], PrefixCache]] = {
    "spec": lambda threshold: SpecCache(1, Rules("path+split-tail", "slru", slru_threshold=threshold)),
    "impl": lambda threshold: RadixCache(1, Rules("path+split-tail", "slru", slru_threshold=threshold)),
    "counter tree": lambda threshold: CounterTree(1, "slru", threshold=threshold),
}


@pytest.mark.parametrize("cache", sorted(SLRU_CACHES))
def test_slru_evicts_the_unprotected_first_whatever_their_last_use(cache: str) -> None:
    make = SLRU_CACHES[cache]
    assert slru_protects_from_the_threshold(make(2)) == [20]  # [1 2] has 2 hits: protected, so the newer [5] goes
    assert slru_protects_from_the_threshold(make(3)) == [10, 11]  # 2 hits < 3: both unprotected, the older goes
    assert slru_protects_from_the_threshold(make(1)) == [10, 11]  # both protected: the older goes


def test_slru_and_the_split_rule_parse_and_name_themselves() -> None:
    assert parse_rules("sglang-slru") == Rules("path+split-tail", "slru", split="fresh", slru_threshold=2)
    assert parse_rules("use=path+split-tail,evict=slru:3").slru_threshold == 3
    assert parse_rules("use=path+split-tail,evict=slru:3").name == "use=path+split-tail,evict=slru:3"
    assert parse_rules("evict=fifo,split=inherit").name == "use=path,evict=fifo,split=inherit"
    assert parse_rules("use=path+split-tail,evict=fifo,split=inherit") == RULE_PRESETS["sglang-unified-fifo"]
    for bad in ("evict=slru:0", "evict=lru:2", "evict=slru:x", "split=maybe", "split=inherit,split=fresh"):
        with pytest.raises(ValueError):
            parse_rules(bad)
    with pytest.raises(ValueError):
        Rules(evict="slru", slru_threshold=0)


# ---------------------------------------------------------------------------- negative controls

UNIFIED_POLICIES: list[tuple[Policy, Literal["fresh", "inherit"], str]] = [
    ("lru", "inherit", "sglang"),
    ("lfu", "inherit", "sglang-lfu"),
    ("mru", "inherit", "sglang-mru"),
    ("slru", "inherit", "sglang-slru"),
    ("fifo", "inherit", "sglang-unified-fifo"),
    ("filo", "inherit", "sglang-unified-filo"),
    ("fifo", "fresh", "sglang-fifo"),
    ("filo", "fresh", "sglang-filo"),
]


def short_plan(preset: str, out_dir: Path) -> RunPlan:
    """The ci profile's call machine at a sixth of its examples: the counter tree walks its whole tree for every counter.

    Coverage is not required at a sixth: which events a few examples reach moves with every rule the machine gains
    (evict(0) was left out once the call machine drew tenants by the hundred); the machine's agreement is the promise.
    """
    plan = replace(RunPlan.of_profile("ci"), rules=RULE_PRESETS[preset], require_coverage=False, out_dir=out_dir)
    return replace(plan, base=settings(plan.base, max_examples=2))


def test_the_counter_tree_orders_a_split_unlike_the_spec_and_agrees_on_what_calls_observe() -> None:
    """The over-strict comparison would fail a correct cache: the orders differ, on one root path only."""
    spec, tree = SpecCache(1, RULE_PRESETS["sglang"]), CounterTree(1, "lru", "inherit")
    for cache in (spec, tree):
        cache.insert([2, 3, 4], [6, 7, 8])
        cache.insert([1], [5])
        cache.insert([2, 3, 9], [6, 7, 10])  # splits [2 3 4] at [2 3]: the tree stamps the upper node, then the lower part
    wanted, got = spec.snapshot(), tree.snapshot()
    assert [view.prefix for view in wanted.nodes] == [(1,), (2, 3, 4), (2, 3), (2, 3, 9)]
    assert [view.prefix for view in got.nodes] == [(1,), (2, 3), (2, 3, 4), (2, 3, 9)]
    assert snapshots_agree(wanted, got)
    pair = Lockstep(SpecCache(1, RULE_PRESETS["sglang"]), CounterTree(1, "lru", "inherit"))
    pair.insert([2, 3, 4], [6, 7, 8])
    pair.insert([1], [5])
    pair.insert([2, 3, 9], [6, 7, 10])  # no Disagreement
    assert pair.evict(2) == [5, 8]


@pytest.mark.parametrize(("policy", "split", "preset"), UNIFIED_POLICIES, ids=[preset for _, _, preset in UNIFIED_POLICIES])
def test_the_counter_tree_passes_the_call_machine_under_its_preset(
    policy: Policy, split: Literal["fresh", "inherit"], preset: str, tmp_path: Path
) -> None:
    result = run_stage("call machine", functools.partial(CounterTree, policy=policy, split=split), short_plan(preset, tmp_path))
    assert result.passed, result.failure


@pytest.mark.parametrize(
    ("policy", "split", "threshold", "preset"),
    [
        ("fifo", "fresh", 2, "sglang-unified-fifo"),
        ("fifo", "inherit", 2, "sglang-fifo"),
        ("filo", "fresh", 2, "sglang-unified-filo"),
        ("filo", "inherit", 2, "sglang-filo"),
        ("slru", "inherit", 3, "sglang-slru"),
        ("slru", "inherit", 2, "sglang-lfu"),
    ],
)
def test_the_counter_tree_fails_a_preset_it_differs_from_observably(
    policy: Policy, split: Literal["fresh", "inherit"], threshold: int, preset: str, tmp_path: Path
) -> None:
    plan = replace(RunPlan.of_profile("ci"), rules=RULE_PRESETS[preset], out_dir=tmp_path)
    result = run_stage("call machine", functools.partial(CounterTree, policy=policy, split=split, threshold=threshold), plan)
    assert not result.passed
    assert result.rule.startswith("R7/R8") or result.rule.startswith("R8"), result.failure
    # slru and lfu part only on two protected nodes whose hits and last uses disagree: 5 or 6 calls; the others in 3 or 4.
    assert result.counterexample_calls <= (6 if preset == "sglang-lfu" else 4), result.failure


class SwappedLeaves(SpecCache):
    """The spec, but its snapshot swaps the first two nodes off one root path: an observable difference."""

    def snapshot(self) -> Snapshot:
        shown = super().snapshot()
        nodes = list(shown.nodes)
        for index, one in enumerate(nodes):
            for later in range(index + 1, len(nodes)):
                if not on_one_root_path(one, nodes[later]):
                    nodes[index], nodes[later] = nodes[later], one
                    return Snapshot(shown.block_size, tuple(nodes), shown.stats)
        return shown


class SwappedOnOnePath(SpecCache):
    """The spec, but its snapshot lists every node on one root path in the other order: unobservable."""

    def snapshot(self) -> Snapshot:
        shown = super().snapshot()
        nodes = list(shown.nodes)
        for index in range(len(nodes) - 1):
            if on_one_root_path(nodes[index], nodes[index + 1]):
                nodes[index], nodes[index + 1] = nodes[index + 1], nodes[index]
        return Snapshot(shown.block_size, tuple(nodes), shown.stats)


def test_a_swap_off_one_root_path_fails_and_names_the_pair() -> None:
    pair = Lockstep(SpecCache(1), SwappedLeaves(1))
    pair.insert([1], [10])
    with pytest.raises(Disagreement) as caught:
        pair.insert([2], [20])
    assert caught.value.rule.startswith("R7/R8")
    assert "lie on no one root path" in caught.value.expected


def test_a_swap_on_one_root_path_passes_the_call_machine(tmp_path: Path) -> None:
    plan = short_plan("sglang", tmp_path)
    assert run_stage("call machine", functools.partial(SwappedOnOnePath, rules=RULE_PRESETS["sglang"]), plan).passed


# ------------------------------------------------------------------------ SGLang's own strategy

SGLANG_SOURCE = Path(
    os.environ.get("PREFIXSPEC_SGLANG_SRC", Path(__file__).resolve().parents[1] / ".venv-bench/lib/python3.11/site-packages/sglang")
)
"""SGLang's source: the one ``make bench``/``make engines`` install into ``.venv-bench``, or ``PREFIXSPEC_SGLANG_SRC``."""


def sglang_strategies() -> ModuleType:
    """SGLang's ``mem_cache/evict_policy.py``, loaded alone (it needs nothing but the standard library); skip without it."""
    path = SGLANG_SOURCE / "srt" / "mem_cache" / "evict_policy.py"
    if not path.is_file():
        pytest.skip(f"SGLang's source is not at {SGLANG_SOURCE} (set PREFIXSPEC_SGLANG_SRC)")
    loader = importlib.util.spec_from_file_location("sglang_evict_policy", path)
    assert loader is not None and loader.loader is not None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


@pytest.mark.parametrize("threshold", [1, 2, 3, 5])
def test_slru_orders_leaves_as_sglangs_own_strategy(threshold: int) -> None:
    """R8 slru:N against ``SLRUStrategy(protected_threshold=N).get_priority`` on leaves of every hit count and age."""
    strategy = sglang_strategies().SLRUStrategy(threshold)
    spec = SpecCache(1, Rules("path", "slru", slru_threshold=threshold))
    leaves: list[tuple[int, int]] = []  # (first token, hits), made in this order: older leaves first
    for token, hits in enumerate([0, 3, 1, 6, 2, 5, 4, 1, 2, 0], start=1):
        for _ in range(max(hits, 1)):
            spec.insert([token], [token])
        if hits == 0:
            spec.match_prefix([token, 0])  # a use, not a hit: one hit from the insert stays
        leaves.append((token, max(hits, 1)))
    last_use = {token: index for index, (token, _) in enumerate(leaves)}  # re-inserting in order keeps this order
    theirs = sorted(leaves, key=lambda leaf: strategy.get_priority(SimpleNamespace(hit_count=leaf[1], last_access_time=float(last_use[leaf[0]]))))
    assert spec.evict(10**9) == [token for token, _ in theirs]
