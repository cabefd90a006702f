"""Instructions an engine step costs on two trees, counted by callgrind: a measure a loaded machine cannot move.

``python -m bench.instructions --against REV`` runs one fixed lockstep workload (the spec beside
``impl:RadixCache`` loaded and guarded as ``prefixspec check`` loads it, the coverage's observer told of every
call, the events taken after every publishing call or every fourth, tenants in three of four bursts, the
engine's own checks every 16th step: the engine machine's arrangement without Hypothesis) on this tree and on
the commit named, each under ``valgrind --tool=callgrind``, and prints the instructions an engine step costs on
each and their ratio.  Each tree is run twice, with ``--steps`` steps a burst and with none, and the second is
taken from the first, so the imports and the loading count for nothing.

The CPU times of ``bench.stage_throughput`` moved by a third from run to run on a shared machine (one tree's
rounds from 243 to 361 us a step); the counts move by well under 1%.  An instruction is no unit of time (a
dict lookup that misses the cache costs more than one that hits), so a count is the measure of a change of
the checker's own Python, and a stage's CPU, side by side, stays the measure of the stage.  Needs valgrind
(``apt-get install valgrind``); runs the four counts two at a time (about a minute at 600 steps).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.worktree import HERE, checked_out
from prefixspec.commands.options import positive_int


WORKLOAD = r"""
import os, random
from spec.model import SpecCache
from prefixspec.compare.lockstep import Lockstep
from prefixspec.drive.coverage import Coverage
from prefixspec.drive.draws import namespace_population
from prefixspec.drive.engine import Engine, Workload
from prefixspec.running.collector import collector_spared
from prefixspec.targets.named import load_target
steps = int(os.environ["PREFIXSPEC_STEPS"])
factory = load_target("impl:RadixCache", 5.0)
coverage = Coverage()
with collector_spared():
    for seed, block_size, tenants in ((1, 2, 5), (2, 1, 40), (3, 3, 0), (4, 2, 300)):
        pair = Lockstep(SpecCache(block_size), factory(block_size), observer=coverage.observe, take_every=1 if seed % 2 else 4)
        population = tuple(namespace_population(tenants, seed))
        spaces = (None,) * len(population) + population if population else (None,)
        engine = Engine(pair, Workload(block_size=block_size, pool_size=64, namespaces=spaces), prompt_seed=seed, check_every=16)
        rng = random.Random(seed)
        for _ in range(steps):
            engine.step(rng)
        engine.drain()
"""

BURSTS = 4


def counted(tree: Path, steps: int) -> int:
    """The instructions callgrind counts for the workload of ``steps`` steps a burst on ``tree``."""
    environment = dict(os.environ, PYTHONPATH=str(tree), PREFIXSPEC_STEPS=str(steps))
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", WORKLOAD],
        cwd=tree, env=environment, capture_output=True, text=True, check=False,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the workload failed on {tree}:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--against", required=True, help="the commit to compare with (any git revision)")
    parser.add_argument("--steps", type=positive_int, default=600, help="engine steps a burst, four bursts (default 600)")
    arguments = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("bench.instructions needs valgrind (apt-get install valgrind)")
    with checked_out(arguments.against) as base:
        runs = {(name, steps): (tree, steps) for name, tree in (("theirs", base), ("ours", HERE)) for steps in (0, arguments.steps)}
        with ThreadPoolExecutor(2) as pool:
            futures = {key: pool.submit(counted, *run) for key, run in runs.items()}
            counts = {key: future.result() for key, future in futures.items()}
        per_step = {name: (counts[(name, arguments.steps)] - counts[(name, 0)]) / (BURSTS * arguments.steps) for name in ("theirs", "ours")}
        print(
            f"instructions an engine step ({BURSTS} bursts of {arguments.steps:,} steps, callgrind): {arguments.against} {per_step['theirs']:,.0f},"
            f" this tree {per_step['ours']:,.0f}: this tree is {per_step['theirs'] / per_step['ours']:.3f}x {arguments.against}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
