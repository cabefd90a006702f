"""The spec keeps what a cache must guarantee an engine, at every engine step, under every preset.

Beside a cache under test the engine machine checks conservation and lock safety only every
``engine_machine.CHECK_EVERY`` steps: there the engine's ledger and snapshot are the spec's, and the cache is
held to the spec at every call.  So the spec itself is checked here at every step, from scratch (the
definition, ``conservation.check_from_scratch``), under every rule preset, every block size the machine
draws, with and without tenants.  The negative controls plant a defect in the spec (an evict that loses a
freed id from its answer, a lock that pins nothing) and the same run must report an ``EngineViolation``.
"""

from __future__ import annotations

import random

import pytest

from prefixspec.drive.engine import Engine, EngineViolation, Workload
from spec.api import RULE_PRESETS, BlockId, Rules
from spec.model import SpecCache
from spec.model.state import Prefix

STEPS = 500


def run_checked(cache: SpecCache, seed: int, tenants: bool) -> Engine:
    """``STEPS`` engine steps on ``cache`` with both checks after every step, then the drain."""
    size = cache.block_size()
    spaces = (None, "a", ("b", 1)) if tenants else (None,)
    engine = Engine(cache, Workload(block_size=size, pool_size=48, namespaces=spaces), prompt_seed=seed)
    rng = random.Random(seed)
    for _ in range(STEPS):
        engine.step(rng)  # the path check, at every step (check_every=1)
        engine.check_from_scratch()
    engine.drain()
    return engine


@pytest.mark.parametrize("preset", sorted(RULE_PRESETS))
def test_the_spec_keeps_the_engine_guarantees_at_every_step(preset: str) -> None:
    rules = RULE_PRESETS[preset]
    for seed in range(4):
        engine = run_checked(SpecCache(1 + seed, rules), seed, tenants=bool(seed % 2))
        assert engine.counts.steps == STEPS
        assert engine.counts.blocks_evicted > 0 and engine.counts.prefilled > 0  # the run reached what it checks


class LosesAFreedId(SpecCache):
    """A spec whose evict of more than one block answers without the last id it freed: that id is lost."""

    def evict(self, n_blocks: int) -> list[BlockId]:
        freed = super().evict(n_blocks)
        return freed[:-1] if len(freed) > 1 else freed


class PinsNothing(SpecCache):
    """A spec whose locks are counted but pin nothing: evict frees the blocks of a running request's prefix."""

    def pinned_prefixes(self) -> set[Prefix]:
        return set()

    def leaf_is_pinned(self, leaf: Prefix) -> bool:
        return False

    def evictable_blocks(self) -> int:
        return self.cached_blocks()


@pytest.mark.parametrize("broken", [LosesAFreedId, PinsNothing])
def test_a_spec_that_breaks_a_guarantee_is_caught(broken: type[SpecCache]) -> None:
    with pytest.raises(EngineViolation):
        for seed in range(4):
            run_checked(broken(2, Rules()), seed, tenants=False)


def check_pins(cache: SpecCache) -> bool:
    """``pinned_prefixes`` (read up each locked path, left at the first prefix pinned already) is R6 as written,
    and ``leaf_is_pinned`` (a leaf's own locks) agrees with it on every leaf; whether locked paths shared a block
    (the walk's stop reached)."""
    pinned = cache.pinned_prefixes()
    nodes = cache.snapshot().nodes
    locked = [(view.namespace, view.prefix) for view in nodes if view.locks]
    wanted: set[Prefix] = set()
    for prefix in locked:
        wanted.update(cache.whole_block_prefixes(prefix))
    assert pinned == wanted, "pinned_prefixes is not R6 as written"
    for view in nodes:
        node = (view.namespace, view.prefix)
        if cache.is_leaf(node):
            assert cache.leaf_is_pinned(node) == (node in pinned), node
    return len(pinned) < sum(len(tokens) // cache.block_size() for _, tokens in locked)


def run_pins(spec: type[SpecCache]) -> bool:
    """``check_pins`` at every step of engine runs under every preset; whether the walk's stop was reached."""
    shared = False
    for preset in sorted(RULE_PRESETS):
        for seed in range(2):
            cache = spec(1 + seed, RULE_PRESETS[preset])
            engine = Engine(cache, Workload(block_size=1 + seed, pool_size=48), prompt_seed=seed)
            rng = random.Random(seed)
            for _ in range(200):
                engine.step(rng)
                shared = check_pins(cache) or shared
    return shared


class PinsOneBlock(SpecCache):
    """A spec whose pinned walk stops after the locked node's last block: the blocks above it go unpinned."""

    def pinned_prefixes(self) -> set[Prefix]:
        return {(view.namespace, view.prefix) for view in self.snapshot().nodes if view.locks}


def test_the_pins_the_spec_reads_are_r6s_definition() -> None:
    assert run_pins(SpecCache), "no two locked paths shared a block: the walk's stop was never reached"


def test_a_pin_of_one_block_alone_is_seen() -> None:
    """The negative control: a pin of the locked node's last block alone."""
    with pytest.raises(AssertionError, match="not R6 as written"):
        run_pins(PinsOneBlock)
