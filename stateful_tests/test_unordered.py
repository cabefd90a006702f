"""R11 for caches that report no eviction order: a snapshot listed as its eviction walk (``walk-order``) is
compared with the spec's walk, and one listed in no order (``unordered``) is checked by what ``evict`` frees.

Split from ``test_observable.py`` (what a call can observe), whose short plan it runs.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

from spec.api import Rules, Snapshot
from spec.model import SpecCache
from prefixspec.formats.protocol import greeting, parse_greeting
from prefixspec.compare.lockstep import Lockstep
from prefixspec.compare.observable import eviction_walk, order_report
from prefixspec.running.stages import run_stage
from stateful_tests.test_observable import short_plan


# ----------------------------------------------------------------- caches that report no order


class Walking(SpecCache):
    """Declares ``walk-order`` and lists its nodes as its eviction walk; ``wrong`` reverses the walk."""

    prefixspec_features = frozenset({"walk-order"})

    def __init__(self, block_size: int, rules: Rules = Rules(), wrong: bool = False) -> None:
        super().__init__(block_size, rules)
        self.wrong = wrong

    def snapshot(self) -> Snapshot:
        shown = super().snapshot()
        walk = eviction_walk(shown.nodes, shown.block_size)
        return Snapshot(shown.block_size, tuple(reversed(walk) if self.wrong else walk), shown.stats)


class Unordered(SpecCache):
    """Declares ``unordered`` and lists its nodes by prefix; ``wrong_evict`` frees the newest leaf first (mru)."""

    prefixspec_features = frozenset({"unordered"})

    def __init__(self, block_size: int, rules: Rules = Rules(), wrong_evict: bool = False) -> None:
        super().__init__(block_size, replace(rules, evict="mru") if wrong_evict else rules)

    def snapshot(self) -> Snapshot:
        shown = super().snapshot()
        return Snapshot(shown.block_size, tuple(sorted(shown.nodes, key=lambda view: view.prefix)), shown.stats)


def test_order_reports_come_from_the_features_and_the_handshake() -> None:
    assert order_report(()) == "eviction-order"
    assert order_report({"events", "walk-order"}) == "walk-order"
    assert order_report({"walk-order", "unordered"}) == "unordered"
    assert parse_greeting("engine 1.0 features=events,walk-order") == ("engine 1.0", frozenset({"events", "walk-order"}))
    assert greeting("e", frozenset({"unordered", "namespaces"})) == "ok e features=namespaces,unordered"
    assert Lockstep(SpecCache(1), Walking(1)).order == "walk-order"
    assert Lockstep(SpecCache(1), Unordered(1)).order == "unordered"
    assert Lockstep(SpecCache(1), SpecCache(1)).order == "eviction-order"


def test_a_walk_is_compared_with_the_spec_walk(tmp_path: Path) -> None:
    plan = short_plan("strict", tmp_path)
    assert run_stage("call machine", Walking, plan).passed
    failed = run_stage("call machine", functools.partial(Walking, wrong=True), plan)
    assert not failed.passed and "eviction walk" in failed.failure


def test_an_unordered_cache_is_checked_by_what_evict_frees(tmp_path: Path) -> None:
    plan = short_plan("strict", tmp_path)
    assert run_stage("call machine", Unordered, plan).passed
    failed = run_stage("call machine", functools.partial(Unordered, wrong_evict=True), plan)
    assert not failed.passed and failed.rule.startswith("R8"), failed.failure
