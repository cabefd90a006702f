"""The scale stage: one cache of thousands of blocks, driven past a 16-bit count of calls, in lockstep with the spec.

An engine's block manager (``engine.Engine``) runs a pool of ``SCALE_POOL``
blocks until the cache has taken ``SCALE_CALLS`` calls and held ``BIG_CACHE``
blocks, then a long run of
matches and small inserts drives its clock past 2^16 uses, then the engine
drains.  Every result is compared with the spec's; the snapshots, which cost
the size of the cache, are compared every ``SNAPSHOT_EVERY`` calls and at the
end, and the engine's conservation and lock checks run every
``SNAPSHOT_EVERY`` engine steps.  Seeded, so a failure replays.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from spec.api import CacheFactory, Rules
from spec.model import SpecCache
from prefixspec.running.coverage import BIG_CACHE, LONG_LIFE, Coverage
from prefixspec.running.engine import Engine, Workload
from prefixspec.running.lockstep import Lockstep

SCALE_POOL = 5120
SCALE_CALLS = 20_000
SNAPSHOT_EVERY = 500
SCALE_WORKLOAD = Workload(block_size=4, pool_size=SCALE_POOL, max_running=32, system_prompts=12, alphabet=1000, longest_prompt_blocks=128)


@dataclass
class ScaleRun:
    """What the scale stage ran."""

    calls: int = 0
    engine_steps: int = 0
    largest_cache: int = 0
    uses: int = 0
    """The matches and inserts made: the uses R7's clock counts."""


def run_scale(target: CacheFactory, rules: Rules, coverage: Coverage, seed: int = 0) -> ScaleRun:
    """Run the stage; raises the lockstep's Disagreement (or the engine's violation) at the first difference,
    with the calls so far as its ``prefixspec_trace``."""
    pair = Lockstep(SpecCache(SCALE_WORKLOAD.block_size, rules), target(SCALE_WORKLOAD.block_size), compare_snapshots=False)
    try:
        return drive(pair, coverage, seed)
    except AssertionError as failure:
        setattr(failure, "prefixspec_trace", pair.trace())
        raise


def drive(pair: Lockstep, coverage: Coverage, seed: int) -> ScaleRun:
    engine = Engine(pair, SCALE_WORKLOAD, prompt_seed=seed, check_every=SNAPSHOT_EVERY)
    rng = random.Random(seed)
    run = ScaleRun()
    compared_at = 0

    def compare_now() -> None:
        nonlocal compared_at
        if pair.target is not None:
            pair.check_snapshots(pair.reference, pair.target)
        compared_at = len(pair.steps)
        run.largest_cache = max(run.largest_cache, pair.reference.cached_blocks())

    while (len(pair.steps) < SCALE_CALLS or run.largest_cache < BIG_CACHE) and len(pair.steps) < 10 * SCALE_CALLS:
        engine.step(rng)
        run.engine_steps += 1
        if len(pair.steps) - compared_at >= SNAPSHOT_EVERY:
            compare_now()
        elif run.engine_steps % 50 == 0:
            run.largest_cache = max(run.largest_cache, pair.reference.cached_blocks())
    compare_now()
    coverage.note_shape(pair.snapshot())
    # Past 2^16 uses: matches of what is cached, with an insert and an eviction
    # now and then, so that the order of last use keeps mattering after the wrap.
    # Short prompts: two blocks of what runs, so that each match costs little and the clock races on.
    size = SCALE_WORKLOAD.block_size
    prompts = [request.prompt[: 2 * size + 1] for request in engine.running] or [engine.prompts.next_prompt(rng)]
    run.uses = sum(1 for step in pair.steps if step.call.op in ("match", "insert"))
    while run.uses <= LONG_LIFE + 1000:
        pair.match_prefix(prompts[run.uses % len(prompts)])
        run.uses += 1
        if run.uses % 97 == 0:
            before = len(pair.steps)
            engine.step(rng)  # an admission, a prefill, a finish or an eviction among the matches
            run.engine_steps += 1
            run.uses += sum(1 for step in pair.steps[before:] if step.call.op in ("match", "insert"))
        if len(pair.steps) - compared_at >= SNAPSHOT_EVERY:
            compare_now()
    compare_now()
    engine.drain()
    compare_now()
    run.calls = len(pair.steps)
    if run.largest_cache >= BIG_CACHE:
        coverage.note(f"{BIG_CACHE}+ blocks cached")
    if run.uses > LONG_LIFE:
        coverage.note(f"{LONG_LIFE}+ calls on one cache")
    return run

