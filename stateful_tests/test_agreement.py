"""The implementation agrees with the spec call by call on a long engine workload."""

from __future__ import annotations

import impl
from prefixspec.drive.engine import Workload, run_engine
from prefixspec.compare.lockstep import Lockstep
from spec.model import SpecCache


def test_the_implementation_is_not_the_spec() -> None:
    """Guard against comparing the spec with itself: the class under test comes from impl."""
    assert impl.RadixCache.__module__.startswith("impl.")
    assert not issubclass(impl.RadixCache, SpecCache)


def test_spec_and_impl_agree_on_a_3000_step_engine_workload() -> None:
    for block_size in (1, 2, 3):
        pair = Lockstep(SpecCache(block_size), impl.RadixCache(block_size))
        engine = run_engine(pair, steps=3000, seed=block_size, workload=Workload(block_size=block_size))
        assert engine.counts.steps == 3000
        assert len(pair.steps) > 6000
