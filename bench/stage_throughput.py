"""One stage of the ci check on two trees side by side: CPU per engine step (or per call), alternating.

``python -m bench.stage_throughput --against 9ba1ae9`` checks ``impl:RadixCache`` in the ``engine machine``
stage of the ci profile, as ``prefixspec check --profile ci -j 1`` runs it (the target loaded and guarded as the
command loads it), once on this tree and once on the commit named, in turn, ``--rounds`` times, each run in a
process of its own whose Python path starts at its tree.  It prints each run's CPU seconds, engine steps and
calls, the CPU microseconds per engine step (per call for a stage without engine steps), and the ratio of the
two trees in each round, then for a stage whose engine steps are not all its calls (scale) the least per call
and the least CPU of the whole stage too.  Each is a ratio of two runs made one after the other on the same
machine, which a load that comes and goes skews far less than it skews either time alone.  The extremes' one long node (2^16+ blocks,
``long_node.check_long_node``), which older trees lack, is timed apart: its CPU and its calls are left out of the
stage's and printed beside them.

The commit is checked out with ``git worktree add --detach`` in a scratch folder, removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench.worktree import HERE, checked_out
from prefixspec.commands.options import positive_int


CHILD = r"""
import json, sys, time
from prefixspec.running.profiles import load_profile
from prefixspec.running.stages import RunPlan, STAGES
from prefixspec.targets.named import load_target
import prefixspec.running.stages as stages
stage_name, target = sys.argv[1], sys.argv[2]
plan = RunPlan.of_profile(load_profile("ci"))
factory = load_target(target, 5.0)
apart = {"cpu": 0.0, "calls": 0}
long_node = getattr(stages, "check_long_node", None)
if long_node is not None:  # a fixed part of the extremes that older trees lack: timed apart
    def timed_long_node(*arguments, **named):
        started = time.process_time()
        try:
            return long_node(*arguments, **named)
        finally:
            apart["cpu"] += time.process_time() - started
            apart["calls"] += stages.LONG_NODE_CALLS + (getattr(stages, "LONG_NODE_COUNT_READS", 0) if named.get("read_counts") else 0)
    stages.check_long_node = timed_long_node
cpu, wall = time.process_time(), time.perf_counter()
stage = STAGES[stage_name](factory, plan)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
print(json.dumps({"passed": stage.passed, "cpu": cpu - apart["cpu"], "wall": wall, "engine_steps": stage.engine_steps,
                  "calls": stage.calls - apart["calls"], "apart": apart["cpu"]}))
"""


def run_once(tree: Path, stage: str, target: str) -> dict[str, float]:
    """The stage on ``tree`` in a fresh process; its CPU and wall seconds, engine steps and calls."""
    environment = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, stage, target], cwd=tree, env=environment, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the {stage} stage failed to run on {tree}:\n{done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    if not result["passed"]:
        raise SystemExit(f"the {stage} stage did not pass on {tree}: no rate to compare")
    return result


def per_unit(result: dict[str, float]) -> tuple[float, str]:
    """CPU microseconds per engine step, or per call for a stage that runs no engine."""
    if result["engine_steps"]:
        return 1e6 * result["cpu"] / result["engine_steps"], "step"
    return 1e6 * result["cpu"] / max(result["calls"], 1), "call"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stage_throughput", description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the commit to compare with (any git revision)")
    parser.add_argument("--stage", default="engine machine", help="the ci check's stage (default: engine machine)")
    parser.add_argument("--target", default="impl:RadixCache", help="module:factory (default impl:RadixCache)")
    parser.add_argument("--rounds", type=positive_int, default=3, help="pairs of runs, alternating (default 3)")
    arguments = parser.parse_args(argv)
    with checked_out(arguments.against) as base:
        print(f"stage {arguments.stage!r} of the ci profile on {arguments.target}, this tree against {arguments.against}, load {os.getloadavg()[0]:.2f}")
        theirs_costs: list[float] = []
        our_costs: list[float] = []
        theirs_runs: list[dict[str, float]] = []
        our_runs: list[dict[str, float]] = []
        unit = "step"
        for round_number in range(1, arguments.rounds + 1):
            theirs = run_once(base, arguments.stage, arguments.target)
            ours = run_once(HERE, arguments.stage, arguments.target)
            their_cost, unit = per_unit(theirs)
            our_cost, _ = per_unit(ours)
            theirs_costs.append(their_cost)
            our_costs.append(our_cost)
            theirs_runs.append(theirs)
            our_runs.append(ours)
            for name, result, cost in ((arguments.against, theirs, their_cost), ("this tree", ours, our_cost)):
                print(
                    f"  round {round_number} {name:>10}: {result['cpu']:7.2f} CPU s, {result['wall']:7.2f} wall s,"
                    f" {result['engine_steps']:>7,.0f} steps, {result['calls']:>8,.0f} calls: {cost:8.1f} CPU us per {unit},"
                    f" {1e6 / cost:8,.0f} per CPU s" + (f"; the long node apart, {result['apart']:.2f} CPU s" if result["apart"] else "")
                )
            print(f"  round {round_number}: this tree is {their_cost / our_cost:.2f}x {arguments.against} (load {os.getloadavg()[0]:.2f})")
        ratios = [theirs / ours for theirs, ours in zip(theirs_costs, our_costs)]
        print(f"ratios {', '.join(f'{ratio:.2f}' for ratio in ratios)}; median {statistics.median(ratios):.2f}x")
        # A neighbour's load only ever adds time: each tree's least is the estimate of its own cost least skewed by it.
        print(
            f"least per {unit}: {arguments.against} {min(theirs_costs):.1f} us, this tree {min(our_costs):.1f} us"
            f" ({1e6 / min(our_costs):,.0f} per CPU s): {min(theirs_costs) / min(our_costs):.2f}x"
        )
        if unit == "step":  # a stage that makes other calls besides its engine's (the scale stage) is priced per call too
            their_least, our_least = min(theirs_runs, key=lambda run: run["cpu"]), min(our_runs, key=lambda run: run["cpu"])
            their_call, our_call = 1e6 * their_least["cpu"] / their_least["calls"], 1e6 * our_least["cpu"] / our_least["calls"]
            print(
                f"least per call: {arguments.against} {their_call:.1f} us, this tree {our_call:.1f} us: {their_call / our_call:.2f}x;"
                f" least CPU of the stage: {their_least['cpu']:.2f} s and {our_least['cpu']:.2f} s: {their_least['cpu'] / our_least['cpu']:.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
