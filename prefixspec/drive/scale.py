"""The scale stage: one cache of thousands of blocks, driven past a 16-bit count of calls, in lockstep with the spec.

An engine's block manager (``engine.Engine``) runs a pool of ``SCALE_POOL``
blocks until the cache has taken ``SCALE_CALLS`` calls and held ``BIG_CACHE``
blocks, then a long run of
matches and small inserts drives its clock past 2^16 uses (and its count of
lookups past 2^16), then the engine
drains.  Every result is compared with the spec's; the snapshots, which cost
the size of the cache, are compared every ``SNAPSHOT_EVERY`` calls and at the
end, and the engine's conservation and lock checks run every
``SNAPSHOT_EVERY`` engine steps.  Seeded, so a failure replays.

A correct cache may still be too slow for the stage: ``growth.probe_growth`` has timed its calls at
1k, 10k and 100k blocks before the stage starts, ``too_slow`` says when those times, at the stage's
size and for the stage's calls, pass its budget, and the run stops at its budget in any case, naming
the calls that grow.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from spec.api import CacheFactory, Rules
from spec.model import SpecCache
from prefixspec.drive.coverage import BIG_CACHE, LONG_LIFE, Coverage
from prefixspec.drive.engine import Engine, Workload
from prefixspec.drive.growth import Growth, micros
from prefixspec.compare.lockstep import DigestTally, Lockstep

SCALE_POOL = 5120
SCALE_CALLS = 20_000
SNAPSHOT_EVERY = 500
SCALE_BUDGET = 600.0
"""CPU seconds of the checker's process the stage may take (on impl it takes about 5 s alone): CPU time, so that a
loaded machine, which stretches the wall clock, never makes a cache too slow.  An engine's own time is in its process:
its calls are priced by the probe, and each is bounded by ``--timeout``."""
STAGE_CALLS = {"match_prefix": 64_300, "lock+unlock": 4_600, "insert": 2_200, "evict": 850, "counts": 1_750}
"""The calls the stage makes, by the kinds ``growth.PROBED_CALLS`` times (seed 0 on impl: 81,435 calls, of
which 64,307 matches, 4,618 locks and as many unlocks, 2,230 inserts, 844 evicts, 1,744 counts and stats,
and the lockstep's 3,074 takes of events)."""
SCALE_WORKLOAD = Workload(
    block_size=4, pool_size=SCALE_POOL, max_running=32, system_prompts=12, alphabet=1000, longest_prompt_blocks=128, most_pressure=3
)
"""Memory pressure of at most 3 blocks a step, not the engine's 8: the cache then holds 4,096 blocks by some 3,700 engine
steps (seed 0) instead of 19,800, so the stage's first part ends at its 20,000 calls, not after 52,000, and its cache
still fills the pool (the stage took 5.5 s of CPU on impl, not 9 to 11)."""


@dataclass
class ScaleRun:
    """What the scale stage ran."""

    calls: int = 0
    engine_steps: int = 0
    largest_cache: int = 0
    uses: int = 0
    """The matches and inserts made: the uses R7's clock counts."""
    digests: DigestTally = field(default_factory=DigestTally)
    """The comparisons by the target's digest, and those whose digests differed."""


class StageTooSlow(Exception):
    """The stage ran past its budget on a cache that had agreed so far: the message says how far it got."""


def too_slow(growth: Growth, budget: float) -> str:
    """Why the stage would run past ``budget`` seconds on a cache whose calls take what ``growth`` measured, or ``""``.

    Each kind of call is priced at the stage's pool size, read off the measured sizes on a log-log line.
    """
    if not growth.seconds:
        return ""
    priced = {call: count * growth.at(call, SCALE_POOL) for call, count in STAGE_CALLS.items()}
    projected = sum(priced.values())
    if projected <= budget:
        return ""
    costliest = sorted(priced, key=lambda call: -priced[call])
    growing = growth.growing()
    cause = (
        f"{', '.join(growing)} grow{'s' if len(growing) == 1 else ''} with the cache"
        if growing
        else f"its calls are slow, {costliest[0]} the costliest"
    )
    return (
        f"too slow for the scale stage: {cause}; at the stage's {SCALE_POOL:,} blocks its "
        f"{sum(STAGE_CALLS.values()):,} calls would take about {projected:,.0f} s "
        f"({', '.join(f'{call} {micros(growth.at(call, SCALE_POOL))}' for call in costliest[:3])} per call), "
        f"past the stage's budget of {budget:,.0f} s. How each call grows:\n" + "\n".join(growth.lines())
    )


def run_scale(target: CacheFactory, rules: Rules, coverage: Coverage, seed: int = 0, budget: float = SCALE_BUDGET) -> ScaleRun:
    """Run the stage; raises the lockstep's Disagreement (or the engine's violation) at the first difference,
    with the calls so far as its ``prefixspec_trace``, and StageTooSlow past ``budget`` seconds of this process's CPU."""
    pair = Lockstep(SpecCache(SCALE_WORKLOAD.block_size, rules), target(SCALE_WORKLOAD.block_size), compare_snapshots=False)
    try:
        return drive(pair, coverage, seed, time.process_time() + budget)
    except AssertionError as failure:
        setattr(failure, "prefixspec_trace", pair.trace())
        raise


def drive(pair: Lockstep, coverage: Coverage, seed: int, deadline: float) -> ScaleRun:
    engine = Engine(pair, SCALE_WORKLOAD, prompt_seed=seed, check_every=SNAPSHOT_EVERY)
    rng = random.Random(seed)
    run = ScaleRun(digests=pair.digests)
    compared_at = 0

    def compare_now() -> None:
        nonlocal compared_at
        if time.process_time() > deadline:
            raise StageTooSlow(f"the stage passed its budget after {len(pair.steps):,} calls ({run.engine_steps:,} engine steps), all agreeing")
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
    run.uses = sum(1 for call in pair.steps.calls if call.kind.uses)
    # Past 2^16 lookups too (R9's count of matches, a counter kept in 16 bits wraps): inserts are uses but no lookups.
    while run.uses <= LONG_LIFE + 1000 or pair.reference.stats().lookups <= LONG_LIFE + 1000:
        pair.match_prefix(prompts[run.uses % len(prompts)])
        run.uses += 1
        if run.uses % 97 == 0:
            before = len(pair.steps)
            engine.step(rng)  # an admission, a prefill, a finish or an eviction among the matches
            run.engine_steps += 1
            run.uses += sum(1 for call in pair.steps.calls[before:] if call.kind.uses)
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
    if pair.reference.stats().lookups > LONG_LIFE:
        coverage.note(f"{LONG_LIFE}+ lookups on one cache")
    return run

