"""How a cache's calls grow with its size (``prefixspec.drive.growth``), and the scale stage's answer to a cache too slow for it.

The probe's verdicts are ratios between sizes of one run, the least over several rounds, so a loaded
machine moves them little; the stage's budget is a parameter, so the tests that it stops a cache
need no slow machine and no slow cache.
"""

from __future__ import annotations

from dataclasses import replace

from impl import RadixCache
from spec.api import BlockId
from prefixspec.drive.growth import PROBED_CALLS, Growth, probe_growth
from prefixspec.drive.scale import SCALE_POOL, too_slow
from prefixspec.running.stages import RunPlan, run_scale_stage


class ScanningEviction(RadixCache):
    """A correct cache whose evict walks every node first (an O(n) scan for the least recent leaf)."""

    def evict(self, n_blocks: int) -> list[BlockId]:
        self.snapshot()
        return super().evict(n_blocks)


def test_the_probe_names_an_eviction_that_scans_the_cache_and_nothing_else() -> None:
    growth = probe_growth(ScanningEviction, budget=60.0, sizes=(1_000, 30_000))
    assert growth.sizes() == [1_000, 30_000], growth.stopped
    assert growth.growing() == ["evict"], growth.lines()
    assert growth.lines()[PROBED_CALLS.index("evict")].startswith("evict: 1k blocks ")


def test_the_probe_names_no_call_of_impl() -> None:
    """The negative control of the one above: impl's calls are flat in the size of its cache."""
    growth = probe_growth(RadixCache, budget=60.0, sizes=(1_000, 30_000))
    assert growth.sizes() == [1_000, 30_000], growth.stopped
    assert growth.growing() == [], growth.lines()


def flat(seconds: float) -> dict[str, float]:
    return {call: seconds for call in PROBED_CALLS}


def test_too_slow_prices_the_stages_calls_at_its_size() -> None:
    fast = Growth({1_000: flat(10e-6), 10_000: flat(10e-6), 100_000: flat(10e-6)})
    assert too_slow(fast, budget=600.0) == ""
    linear_evict = Growth({size: dict(flat(10e-6), evict=size * 1e-6) for size in (1_000, 10_000, 100_000)})
    assert linear_evict.growing() == ["evict"]
    assert abs(linear_evict.at("evict", SCALE_POOL) - SCALE_POOL * 1e-6) < 1e-9  # on the line between the sizes measured
    verdict = too_slow(linear_evict, budget=600.0)  # 2,000 evicts at ~5 ms: 10 s, within the budget
    assert verdict == ""
    verdict = too_slow(linear_evict, budget=5.0)
    assert verdict.startswith("too slow for the scale stage: evict grows with the cache;"), verdict
    assert "evict: 1k blocks 1,000 µs, 10k 10 ms, 100k 100 ms per call (grows about as size^1.0)" in verdict
    assert too_slow(fast, budget=0.1).startswith("too slow for the scale stage: its calls are slow, match_prefix the costliest")


def test_a_probe_that_reached_one_size_prices_every_call_at_it() -> None:
    one = Growth({1_000: flat(1e-3)}, stopped="the probe's 1 s were spent")
    assert one.growing() == [] and one.at("evict", SCALE_POOL) == 1e-3
    assert one.lines()[-1] == "(stopped at 1k: the probe's 1 s were spent)"


def test_the_scale_stage_stops_at_its_budget_with_how_the_calls_grow() -> None:
    """Whether the probe's projection or the run's own deadline stops it, the stage fails as too slow, with the table."""
    plan = replace(RunPlan.of_profile("ci"), scale_budget=0.5)
    stage = run_scale_stage(RadixCache, plan)
    assert not stage.passed and not stage.aborted
    assert stage.failure.startswith("too slow for the scale stage: "), stage.failure
    assert any(line.startswith("match_prefix: 1k blocks ") for line in stage.failure.splitlines())
    assert stage.notes and stage.notes[0].startswith("match_prefix: 1k blocks ")
