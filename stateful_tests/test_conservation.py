"""The engine's path check gives the verdict of its check from scratch, on every state and on broken ones.

Engine workloads on the spec and impl in lockstep; at every step the path check (``PathCheck``, never falling
back to scratch here) and ``check_from_scratch`` judge the real state and, now and then, the state with one
fault planted in the cache's snapshot or the engine's ledger: a block lost, one in two places, a stray id, a
node in two namespaces, a locked prefix holding another block, a prefix cached twice by two nodes.  Both must
pass or both fail.  The negative controls plant a defect in the path check (any snapshot taken for a tree,
locks ignored, only each lock's deepest block looked at, the requests' own blocks counted nowhere) and the
same harness must find it diverging.
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
from prefixspec.drive.conservation import EngineViolation, Holder, PathCheck, PathCheckDiverged, check_from_scratch
from prefixspec.drive.engine import Engine, Request, Workload
from spec.api import BlockId, NodeView, Rules, Snapshot, parse_rules
from spec.model import SpecCache

NEVER = 10**9
"""``scratch_every`` for a path check that must stand alone."""

FAULTS = (
    "lose a block", "block also free", "stray id", "node in two namespaces", "locked prefix changed", "free id twice", "free id missing",
    "prefix cached twice",
)


def verdict(check: Callable[[], None]) -> str:
    try:
        check()
    except (EngineViolation, PathCheckDiverged) as violation:
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
    if fault == "prefix cached twice":
        return cached_twice(snapshot, free, rng)
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


def cached_twice(snapshot: Snapshot, free: list[BlockId], rng: random.Random) -> tuple[Snapshot, list[BlockId]]:
    """``snapshot`` with a free block cached by a new node at the first block of another node, the free list
    without it: every id still counted once, but two nodes cache one prefix (no tree), and the map of the
    definition keeps one of their blocks only."""
    if not free or not snapshot.nodes:
        return snapshot, free
    view = rng.choice(snapshot.nodes)
    block = rng.choice(free)
    end = len(view.prefix) - (len(view.blocks) - 1) * snapshot.block_size
    twin = NodeView(view.prefix[:end], (block,), 0, view.namespace)
    return dataclasses.replace(snapshot, nodes=(*snapshot.nodes, twin)), [other for other in free if other != block]


def divergences(check: PathCheck, rules: Rules, seed: int, steps: int, faults: bool = True) -> list[str]:
    """The states of one engine workload on which ``check`` and ``check_from_scratch`` disagree (with the two verdicts)."""
    block_size = 1 + seed % 3
    spaces = (None, "a", ("b", 1)) if seed % 2 else (None,)
    pair = Lockstep(SpecCache(block_size, rules), impl.RadixCache(block_size, rules=rules))
    engine = Engine(pair, Workload(block_size=block_size, pool_size=24, namespaces=spaces), prompt_seed=seed, check_every=NEVER)
    engine.path_check = check
    rng = random.Random(seed)
    found: list[str] = []

    def judge(snapshot: Snapshot, free: Sequence[BlockId], running: Sequence[Holder], what: str) -> None:
        ours = verdict(lambda: check.check(snapshot, free, running))
        theirs = verdict(lambda: check_from_scratch(snapshot, free, running, check.pool_size))
        if (ours == "passes") != (theirs == "passes"):
            found.append(f"{what}: path {ours!r}, from scratch {theirs!r}")

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
def test_the_path_check_gives_the_verdict_from_scratch_on_real_and_broken_states(seed: int, rules: str) -> None:
    check = PathCheck(24, scratch_every=NEVER)
    assert divergences(check, parse_rules(rules), seed, steps=400) == []
    assert check.checks > 400


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
                ours = verdict(lambda: PathCheck(24, scratch_every=NEVER).check(broken, free, engine.running))
                if theirs != "passes" and ours != "passes":
                    reported.add(fault)
    assert reported == set(FAULTS)


class TrustsAnyShape(PathCheck):
    """Planted defect: any snapshot is taken for a tree, so a prefix two nodes cache is read as two places."""

    @staticmethod
    def _is_tree(nodes: Sequence[NodeView], size: int) -> bool:
        return True


class IgnoresLocks(PathCheck):
    """Planted defect: no locked prefix is held to its request's blocks."""

    @staticmethod
    def _locks_hold(nodes: Sequence[NodeView], running: Sequence[Holder], size: int) -> bool:
        return True


class DeepestBlockOnly(PathCheck):
    """Planted defect: each lock's deepest block alone is looked at, not the table's blocks above it."""

    @staticmethod
    def _locks_hold(nodes: Sequence[NodeView], running: Sequence[Holder], size: int) -> bool:
        holder = {block: view for view in nodes for block in view.blocks}
        for request in running:
            if request.locked_blocks:
                found = holder.get(request.table[request.locked_blocks - 1])
                end = request.locked_blocks * size
                if found is None or found.namespace != request.namespace or found.prefix[:end] != request.prompt[:end]:
                    return False
        return True


class CountsNoRequests(PathCheck):
    """Planted defect: conservation counts the free list and the cache, not the running requests' own blocks."""

    def _conserved(self, nodes: Sequence[NodeView], free: Sequence[BlockId], running: Sequence[Holder]) -> bool:
        every = [*free, *(block for view in nodes for block in view.blocks)]
        return len(set(every)) == len(every)


@pytest.mark.parametrize("defect", [TrustsAnyShape, IgnoresLocks, DeepestBlockOnly, CountsNoRequests])
def test_negative_control_a_defect_in_the_path_check_diverges(defect: type[PathCheck]) -> None:
    found = [line for seed in range(4) for line in divergences(defect(24, scratch_every=NEVER), parse_rules("strict"), seed, steps=400)]
    assert found, f"{defect.__name__}: the harness found no divergence"


def test_the_engine_check_reports_in_the_words_from_scratch() -> None:
    """A violation the path check finds is raised by the check from scratch (so in its words); a verdict of the
    path check that the check from scratch does not confirm is the checker's own defect, said so."""
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
    with pytest.raises(PathCheckDiverged, match="does not find"):
        SeesViolations(24).check(pair.snapshot(), engine.free, engine.running)


class SeesViolations(PathCheck):
    """A path check that finds a violation where there is none."""

    def _conserved(self, nodes: Sequence[NodeView], free: Sequence[BlockId], running: Sequence[Holder]) -> bool:
        return False


def test_the_checks_read_every_field_of_a_view() -> None:
    """Both checks read a view's prefix, blocks, namespace and copies (its own locks are no place of a block): a
    field NodeView gains is to be read by them too, or said here to hold no block."""
    assert list(NodeView.__dataclass_fields__) == ["prefix", "blocks", "locks", "namespace", "copies"]


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
