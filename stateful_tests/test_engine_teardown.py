"""The engine machine's teardown after a target failed midway through an engine step.

A target that hangs (``TargetHung``, here any ``TargetFailure``) in the ``take_events`` the lockstep makes right
after an insert both caches made stops the engine's prefill before it hands the request's blocks to the cache:
the ledger then holds them as the request's own while the cache holds them too.  Draining that ledger in
teardown reported "block N is in both the cache and running request M" in place of the hang, and a replay
without the hang passed: a FlakyFailure (seen once on vLLM's adapter under load, after 49,130 engine steps).
The failure in flight is what must be reported.
"""

from __future__ import annotations

from typing import cast

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from impl.variants import vllm
from spec.api import RULE_PRESETS, CacheFactory, Snapshot, TargetFailure
from prefixspec.drive.machines import RunTally, engine_machine


class Hung(TargetFailure):
    """Stands in for ``TargetHung``: the target gave no answer to compare."""


class HangsInATake:
    """impl under ``vllm`` whose ``take_events`` fails once, the ``fail_at``-th take of the process's run."""

    takes = 0
    fail_at = 40

    def __init__(self, block_size: int) -> None:
        self.inner = vllm(block_size)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def snapshot(self) -> Snapshot:
        return self.inner.snapshot()

    def take_events(self) -> object:
        HangsInATake.takes += 1
        if HangsInATake.takes == HangsInATake.fail_at:
            raise Hung("the cache hangs: its take_events() did not return within 5 s")
        return self.inner.take_events()


SETTINGS = settings(
    max_examples=3, stateful_step_count=3, deadline=None, database=None, phases=[Phase.generate], derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_a_target_failure_midway_through_a_step_is_what_is_reported() -> None:
    HangsInATake.takes = 0
    with pytest.raises(Hung):
        run_state_machine_as_test(engine_machine(cast(CacheFactory, HangsInATake), RunTally(), RULE_PRESETS["vllm"]), settings=SETTINGS)
    assert HangsInATake.takes >= HangsInATake.fail_at  # it did fail midway (not before the first take)
