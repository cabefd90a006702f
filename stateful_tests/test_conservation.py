"""The engine's kept conservation check gives the verdict of its check from scratch, on every state and on broken ones.

Engine workloads on the spec and impl in lockstep; at every step the kept check (``KeptCheck``, never falling
back to scratch here) and ``check_from_scratch`` judge the real state and, now and then, the state with one
fault planted in the cache's snapshot or the engine's ledger: a block lost, one in two places, a stray id, a
node in two namespaces, a locked prefix holding another block.  Both must pass or both fail.  The negative controls plant
a defect in the kept check (a finished node never forgotten, lock changes ignored, a block counted nowhere)
and the same harness must find it diverging.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import impl
from prefixspec.compare.lockstep import Lockstep
from prefixspec.drive.conservation import EngineViolation, Holder, KeptCheck, KeptCheckDiverged, Key, check_from_scratch
from prefixspec.drive.engine import Engine, Request, Workload
from spec.api import BlockId, NodeView, Rules, Snapshot, parse_rules
from spec.model import SpecCache

NEVER = 10**9
"""``scratch_every`` for a kept check that must stand alone."""

FAULTS = ("lose a block", "block also free", "stray id", "node in two namespaces", "locked prefix changed", "free id twice", "free id missing")


def verdict(check: Callable[[], None]) -> str:
    try:
        check()
    except (EngineViolation, KeptCheckDiverged) as violation:
        return f"{type(violation).__name__}: {violation}"
    return "passes"


def planted(fault: str, snapshot: Snapshot, engine: Engine, rng: random.Random) -> tuple[Snapshot, list[BlockId]]:
    """``snapshot`` and the free list with ``fault`` planted (unchanged where the state gives it no place)."""
    nodes, free = list(snapshot.nodes), list(engine.free)
    size = snapshot.block_size
    if fault == "free id twice" and free:
        return snapshot, free + [rng.choice(free)]
    if fault == "free id missing" and free:
        free.remove(rng.choice(free))
        return snapshot, free
    if not nodes:
        return snapshot, free
    if fault == "locked prefix changed":
        return swapped_at_a_lock(snapshot, engine, rng), free
    index = rng.randrange(len(nodes))
    view = nodes[index]
    blocks = list(view.blocks)
    if fault == "lose a block":
        nodes[index] = dataclasses.replace(view, prefix=view.prefix[:-size], blocks=tuple(blocks[:-1]), copies=view.copies[:-1])
    elif fault == "block also free" and free:
        blocks[rng.randrange(len(blocks))] = rng.choice(free)
        nodes[index] = dataclasses.replace(view, blocks=tuple(blocks))
    elif fault == "stray id":
        blocks[rng.randrange(len(blocks))] = engine.workload.pool_size + 7
        nodes[index] = dataclasses.replace(view, blocks=tuple(blocks))
    elif fault == "node in two namespaces":
        nodes.append(dataclasses.replace(view, namespace="elsewhere"))
    return dataclasses.replace(snapshot, nodes=tuple(nodes)), free


def swapped_at_a_lock(snapshot: Snapshot, engine: Engine, rng: random.Random) -> Snapshot:
    """``snapshot`` with the block at a locked prefix swapped with another cached one: every id still in one
    place, but the locked prefix holds another block (lock safety alone broken)."""
    size = snapshot.block_size
    places = [
        (node, index, (view.namespace, view.prefix[: len(view.prefix) - (len(view.blocks) - index - 1) * size]))
        for node, view in enumerate(snapshot.nodes)
        for index in range(len(view.blocks))
    ]
    locked = {
        (request.namespace, request.prompt[: (position + 1) * size]) for request in engine.running for position in range(request.locked_blocks)
    }
    at_lock = [place for place in places if place[2] in locked]
    if not at_lock or len(places) < 2:
        return snapshot
    first = rng.choice(at_lock)
    second = rng.choice([place for place in places if place != first])
    nodes = [list(view.blocks) for view in snapshot.nodes]
    a, b = nodes[first[0]][first[1]], nodes[second[0]][second[1]]
    nodes[first[0]][first[1]], nodes[second[0]][second[1]] = b, a
    views = tuple(dataclasses.replace(view, blocks=tuple(blocks)) for view, blocks in zip(snapshot.nodes, nodes))
    return dataclasses.replace(snapshot, nodes=views)


def divergences(kept: KeptCheck, rules: Rules, seed: int, steps: int, faults: bool = True) -> list[str]:
    """The states of one engine workload on which ``kept`` and ``check_from_scratch`` disagree (with the two verdicts)."""
    block_size = 1 + seed % 3
    spaces = (None, "a", ("b", 1)) if seed % 2 else (None,)
    pair = Lockstep(SpecCache(block_size, rules), impl.RadixCache(block_size, rules=rules))
    engine = Engine(pair, Workload(block_size=block_size, pool_size=24, namespaces=spaces), prompt_seed=seed, check_every=NEVER)
    engine.kept = kept
    rng = random.Random(seed)
    found: list[str] = []

    def judge(snapshot: Snapshot, free: Sequence[BlockId], running: Sequence[Holder], what: str) -> None:
        ours = verdict(lambda: kept.check(snapshot, free, running))
        theirs = verdict(lambda: check_from_scratch(snapshot, free, running, kept.pool_size))
        if (ours == "passes") != (theirs == "passes"):
            found.append(f"{what}: kept {ours!r}, from scratch {theirs!r}")

    for step in range(steps):
        engine.step(rng)
        snapshot = pair.snapshot()
        judge(snapshot, engine.free, engine.running, f"step {step}")
        if faults and rng.random() < 0.3:
            fault = rng.choice(FAULTS)
            broken, free = planted(fault, snapshot, engine, rng)
            judge(broken, free, engine.running, f"step {step}, {fault}")
            judge(snapshot, engine.free, engine.running, f"step {step}, after {fault}")
    return found


RULE_SETS = ("strict", "vllm", "unit=block", "sglang")


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**16), rules=st.sampled_from(RULE_SETS))
def test_the_kept_check_gives_the_verdict_from_scratch_on_real_and_broken_states(seed: int, rules: str) -> None:
    kept = KeptCheck(24, scratch_every=NEVER)
    assert divergences(kept, parse_rules(rules), seed, steps=400) == []
    assert kept.checks > 400


def test_every_fault_is_found_by_both() -> None:
    """The faults are faults: each is a violation both checks report (so the agreement above is not two passes)."""
    reported: set[str] = set()
    for seed in range(6):
        pair = Lockstep(SpecCache(2), impl.RadixCache(2))
        engine = Engine(pair, Workload(pool_size=24), prompt_seed=seed, check_every=NEVER)
        rng = random.Random(seed)
        for _ in range(300):
            engine.step(rng)
            snapshot = pair.snapshot()
            for fault in FAULTS:
                broken, free = planted(fault, snapshot, engine, rng)
                if broken == snapshot and free == engine.free:
                    continue
                theirs = verdict(lambda: check_from_scratch(broken, free, engine.running, 24))
                ours = verdict(lambda: KeptCheck(24, scratch_every=NEVER).check(broken, free, engine.running))
                if theirs != "passes" and ours != "passes":
                    reported.add(fault)
    assert reported == set(FAULTS)


class ForgetsNothing(KeptCheck):
    """Planted defect: a node that leaves the snapshot keeps its blocks in the kept map."""

    def _follow(self, snapshot: Snapshot) -> list[Key] | None:
        views = dict(self._views)
        changed = super()._follow(snapshot)
        for ident, (_, entries, _copies) in views.items():
            if ident not in self._views:
                self.cached.update(entries)
        return changed


class IgnoresLocks(KeptCheck):
    """Planted defect: a changed prefix is never held to the locks on it."""

    def _locks_hold(self, changed: list[Key]) -> bool:
        return True


class CountsNoCopies(KeptCheck):
    """Planted defect: conservation counts the free list and the cache, not the running requests' own blocks."""

    def _conserved(self, free: Sequence[BlockId], running: Sequence[Holder]) -> bool:
        every = [*free, *self.cached.values()]
        return len(set(every)) == len(every)


@pytest.mark.parametrize("defect", [ForgetsNothing, IgnoresLocks, CountsNoCopies])
def test_negative_control_a_defect_in_the_kept_check_diverges(defect: type[KeptCheck]) -> None:
    found = [line for seed in range(4) for line in divergences(defect(24, scratch_every=NEVER), parse_rules("strict"), seed, steps=400)]
    assert found, f"{defect.__name__}: the harness found no divergence"


def test_the_engine_check_reports_in_the_words_from_scratch() -> None:
    """A violation the kept check finds is raised by the check from scratch (so in its words); a kept verdict
    that the check from scratch does not confirm is the checker's own defect, said so."""
    pair = Lockstep(SpecCache(2), impl.RadixCache(2))
    engine = Engine(pair, Workload(pool_size=24), prompt_seed=3)
    rng = random.Random(3)
    for _ in range(200):
        engine.step(rng)
    while not engine.free:
        engine.step(rng)
    engine.free.append(engine.free[0])
    with pytest.raises(EngineViolation, match=f"block {engine.free[0]} is in both the free list and the free list"):
        engine.check()
    engine.free.pop()
    engine.check()
    with pytest.raises(KeptCheckDiverged, match="does not find"):
        SeesViolations(24).check(pair.snapshot(), engine.free, engine.running)


class SeesViolations(KeptCheck):
    """A kept check that finds a violation where there is none."""

    def _conserved(self, free: Sequence[BlockId], running: Sequence[Holder]) -> bool:
        return False


def test_drained_engine_keeps_one_view_per_node() -> None:
    """After a drain the kept map is empty, as the cache: nothing of a finished node is kept."""
    pair = Lockstep(SpecCache(2), impl.RadixCache(2))
    engine = Engine(pair, Workload(pool_size=24), prompt_seed=9)
    rng = random.Random(9)
    for _ in range(500):
        engine.step(rng)
    engine.drain()
    assert engine.kept.cached == {} and not engine.running
    assert len(NodeView.__dataclass_fields__) == 5  # the fields ``view_entries`` reads: a new one is to be followed too


def test_a_finished_request_is_the_one_removed_even_beside_its_twin() -> None:
    """Requests are told apart by identity: finishing one leaves its twin of equal fields running (two prefilled
    requests of one prompt); the negative control: objects equal by their fields, as a plain dataclass makes
    them, are one to ``list.remove``, which takes the first."""
    engine = Engine(Lockstep(SpecCache(2), impl.RadixCache(2)), Workload(pool_size=24), prompt_seed=1)
    first, twin = (Request((1, 2, 3), engine.cache.root, [], [], 0, prefilled=True) for _ in range(2))
    engine.running.extend([first, twin])
    engine.finish(twin)
    assert engine.running == [first] and engine.running[0] is first

    @dataclasses.dataclass
    class ByFields:
        prompt: tuple[int, ...]

    older, newer = ByFields((1,)), ByFields((1,))
    alike = [older, newer]
    alike.remove(newer)
    assert alike[0] is newer  # the older twin went in its place
