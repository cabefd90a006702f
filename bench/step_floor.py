"""Where an engine step's CPU goes: the engine alone, the tightest lockstep there could be, and the check's lockstep.

``python -m bench.step_floor`` runs one engine workload (``drive.engine``: block size 2, a pool of 64, the same
prompt seed and step seed each time) for ``--steps`` steps under each arrangement below, in this process, in
turn, ``--rounds`` times, and prints the least CPU microseconds per engine step of each:

- ``engine on impl`` and ``engine on spec``: the engine over one cache, nothing checked;
- ``tightest lockstep``: ``TightPair``, the least a lockstep can do and still be one: every call recorded as a
  ``Call``, made on both caches, its result compared by value, the two snapshot digests compared after it; no
  guard, no observer, no handles for a counterexample, no events, no full comparisons;
- ``lockstep``: ``compare.lockstep.Lockstep`` over impl itself, without an observer, its events never taken;
- ``lockstep, guarded``: the same over impl loaded and guarded as ``prefixspec check`` loads it;
- ``lockstep, guarded, observed``: and the coverage's observer told of every call, as in the check's stages.

The engine machine stage itself (``bench.stage_throughput``) adds its events taken after every call that
publishes, Hypothesis's draws, and the engine's own checks every 16th step.  Every figure is a ratio's side: the
arrangements run one after the other on one machine, so a load that comes and goes skews them alike.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
from typing import cast

from impl import RadixCache
from spec.api import BlockId, Inserted, NodeId, PrefixCache, PrefixMatch, PrefixStats, Snapshot
from spec.model import SpecCache
from prefixspec.commands.options import positive_int
from prefixspec.compare.lockstep import Lockstep
from prefixspec.drive.coverage import Coverage
from prefixspec.drive.engine import Engine, Workload
from prefixspec.targets.named import load_target
from prefixspec.vocabulary import BY_METHOD, Call


class TightPair:
    """The spec and impl in lockstep with nothing a lockstep could do without: the measure of what it must cost."""

    def __init__(self, block_size: int) -> None:
        self.spec = SpecCache(block_size)
        self.impl = RadixCache(block_size)
        self.calls: list[Call] = []
        self.results: list[object] = []
        self.impl_node: dict[NodeId, NodeId] = {self.spec.root: self.impl.root}

    @property
    def root(self) -> NodeId:
        return self.spec.root

    def block_size(self) -> int:
        return self.spec.block_size()

    def record_and_compare(self, call: Call, expected: object, got: object, same: bool) -> None:
        """The call recorded with the spec's result; the results and then the digests held equal."""
        self.calls.append(call)
        self.results.append(expected)
        if not same:
            raise AssertionError(f"{call}: the spec returned {expected}, impl {got}")
        if self.spec.snapshot_digest() != self.impl.snapshot_digest():
            raise AssertionError(f"{call}: the snapshots differ")

    def match_prefix(self, tokens: Sequence[int]) -> PrefixMatch:
        expected, got = self.spec.match_prefix(list(tokens)), self.impl.match_prefix(list(tokens))
        self.impl_node.setdefault(expected.node, got.node)
        same = expected.matched_tokens == got.matched_tokens and expected.blocks == got.blocks
        self.record_and_compare(Call("match", (tuple(tokens),), f"n{len(self.calls) + 1}"), expected, got, same)
        return expected

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId]) -> Inserted:
        expected, got = self.spec.insert(list(tokens), list(blocks)), self.impl.insert(list(tokens), list(blocks))
        self.impl_node.setdefault(expected.node, got.node)
        self.record_and_compare(Call("insert", (tuple(tokens), tuple(blocks)), f"n{len(self.calls) + 1}"), expected, got, expected.duplicates == got.duplicates)
        return expected

    def on_node(self, method: str, node: NodeId) -> None:
        """A lock or an unlock, made on each cache's own node."""
        getattr(self.spec, method)(node)
        getattr(self.impl, method)(self.impl_node[node])
        self.record_and_compare(Call(BY_METHOD[method].op, ("n0",)), None, None, True)

    def lock(self, node: NodeId) -> None:
        self.on_node("lock", node)

    def unlock(self, node: NodeId) -> None:
        self.on_node("unlock", node)

    def evict(self, n_blocks: int) -> list[BlockId]:
        expected, got = self.spec.evict(n_blocks), self.impl.evict(n_blocks)
        self.record_and_compare(Call("evict", (n_blocks,)), expected, got, expected == got)
        return expected

    def read_counter(self, method: str) -> object:
        """A read of the counters (R9) on both caches, compared; the spec's answer."""
        expected: object = getattr(self.spec, method)()
        got: object = getattr(self.impl, method)()
        self.record_and_compare(Call(BY_METHOD[method].op), expected, got, expected == got)
        return expected

    def cached_blocks(self) -> int:
        return cast(int, self.read_counter("cached_blocks"))

    def cached_tokens(self) -> int:
        return cast(int, self.read_counter("cached_tokens"))

    def evictable_blocks(self) -> int:
        return cast(int, self.read_counter("evictable_blocks"))

    def stats(self) -> PrefixStats:
        return cast(PrefixStats, self.read_counter("stats"))

    def hit_rate(self) -> float:
        return cast(float, self.read_counter("hit_rate"))

    def snapshot(self) -> Snapshot:
        return self.spec.snapshot()


def lockstep_maker(target: Callable[[int], PrefixCache], observed: bool) -> Callable[[int], PrefixCache]:
    """A ``Lockstep`` of the spec and ``target``'s cache, events never taken, the coverage told of every call if ``observed``."""

    def make(block_size: int) -> PrefixCache:
        observer = Coverage().observe if observed else None
        return Lockstep(SpecCache(block_size), target(block_size), observer=observer, take_every=None)

    return make


def build_arrangements() -> dict[str, Callable[[int], PrefixCache]]:
    guarded = load_target("impl:RadixCache", 5.0)
    return {
        "engine on impl": RadixCache,
        "engine on spec": SpecCache,
        "tightest lockstep": TightPair,
        "lockstep": lockstep_maker(RadixCache, observed=False),
        "lockstep, guarded": lockstep_maker(guarded, observed=False),
        "lockstep, guarded, observed": lockstep_maker(guarded, observed=True),
    }


def cpu_per_step(make: Callable[[int], PrefixCache], steps: int) -> float:
    """CPU microseconds per engine step of ``steps`` seeded steps over ``make(2)``; the engine's own checks never run."""
    engine = Engine(make(2), Workload(block_size=2), prompt_seed=1, check_every=steps + 1)
    rng = random.Random(5)
    started = time.process_time()
    for _ in range(steps):
        engine.step(rng)
    return 1e6 * (time.process_time() - started) / steps


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.step_floor", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=positive_int, default=30_000, help="engine steps per run (default 30,000)")
    parser.add_argument("--rounds", type=positive_int, default=2, help="runs of every arrangement, in turn (default 2)")
    options = parser.parse_args()
    least: dict[str, float] = {}
    for round_number in range(1, options.rounds + 1):
        for name, make in build_arrangements().items():
            us = cpu_per_step(make, options.steps)
            least[name] = min(us, least.get(name, us))
            print(f"  round {round_number}  {name:28s} {us:7.1f} CPU us per step", flush=True)
    tightest = least["tightest lockstep"]
    print("least CPU per engine step, and against the tightest lockstep:")
    for name, us in least.items():
        print(f"  {name:28s} {us:7.1f} us   {us / tightest:5.2f}x")


if __name__ == "__main__":
    main()
