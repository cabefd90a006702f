"""A target that answers the same calls differently on two runs gets a report that says so, with the calls."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

from hypothesis import settings

from impl import RadixCache
from spec.api import PrefixStats
from prefixspec.running.report import FLAKY
from prefixspec.running.stages import RunPlan, run_stage

MADE = itertools.count(1)
BROKEN = 4


class FourthCacheMiscounts(RadixCache):
    """Only the fourth cache made in the process miscounts its lookups: the calls alone cannot reproduce it."""

    def __init__(self, block_size: int) -> None:
        super().__init__(block_size)
        self.broken = next(MADE) == BROKEN

    def stats(self) -> PrefixStats:
        counted = super().stats()
        return replace(counted, lookups=counted.lookups + 1) if self.broken else counted


def test_a_target_that_answers_the_same_calls_differently_is_reported_as_flaky(tmp_path: Path) -> None:
    plan = replace(RunPlan.of_profile("ci"), out_dir=tmp_path)
    plan = replace(plan, base=settings(plan.base, max_examples=20))
    stage = run_stage("call machine", FourthCacheMiscounts, plan)
    assert not stage.passed
    assert stage.failure.startswith(FLAKY), stage.failure
    assert "not reproducible" in stage.rule
    written = Path(stage.counterexample)
    assert written.exists() and written.name == "call_machine.flaky.trace"
    assert stage.counterexample_calls >= 1
    assert "block_size" in written.read_text() and "Its calls" in stage.failure


def test_an_order_difference_names_the_namespaces() -> None:
    from spec.api import NodeView, Snapshot
    from prefixspec.compare.lockstep import describe_snapshot_difference
    from spec.api import Rules

    stats = PrefixStats(0, 0, 0, 2, 0)
    first, second = NodeView((1, 2), (10,), 0, "a"), NodeView((1, 2), (11,), 0, None)
    rule, expected, got = describe_snapshot_difference(Snapshot(2, (first, second), stats), Snapshot(2, (second, first), stats), Rules())
    assert rule.startswith("R7/R8")
    assert 'ns="a"' in expected and 'ns="a"' in got  # the same prefix in two namespaces: told apart
    assert expected.startswith('last-use order [[1 2] ns="a", [1 2]]') and got == 'last-use order [[1 2], [1 2] ns="a"]'
    assert 'node [1 2] ns="a" moved' in expected
