"""bench.step_floor's tightest lockstep is a lockstep: it runs the engine's workload, and a planted error stops it.

Its figure is the least an engine step can cost with every call compared; a pair that compared nothing would
make that floor lower than any real lockstep's and the benchmark a lie.
"""

from __future__ import annotations

import pytest

from bench.step_floor import TightPair, cpu_per_step
from impl import RadixCache


def test_the_tightest_lockstep_runs_the_engine_workload_and_records_every_call() -> None:
    pair = TightPair(2)
    assert cpu_per_step(lambda _size: pair, 500) > 0
    ops = {call.op for call in pair.calls}
    assert {"match", "insert", "lock", "unlock", "evict"} <= ops
    assert len(pair.results) == len(pair.calls)


def test_the_tightest_lockstep_stops_at_a_planted_error(monkeypatch: pytest.MonkeyPatch) -> None:
    evict = RadixCache.evict

    def keeps_one_back(self: RadixCache, n_blocks: int) -> list[int]:
        return evict(self, n_blocks)[:-1] if n_blocks > 1 else evict(self, n_blocks)

    monkeypatch.setattr(RadixCache, "evict", keeps_one_back)
    with pytest.raises(AssertionError, match="evict"):
        cpu_per_step(TightPair, 3000)


def test_the_tightest_lockstep_stops_at_a_state_no_result_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    lock = RadixCache.lock

    def locks_twice(self: RadixCache, node: object) -> None:
        lock(self, node)
        lock(self, node)

    monkeypatch.setattr(RadixCache, "lock", locks_twice)
    with pytest.raises(AssertionError, match="snapshots differ"):
        cpu_per_step(TightPair, 500)
