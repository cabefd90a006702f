"""The whole benchmark: ``python -m bench`` (``make bench``, ``prefixspec bench``).

1. Record each workload twice: under the spec's strict rules with
   ``impl.RadixCache`` as the reference, and under SGLang's rules (the
   ``sglang`` preset, ``spec.api.RULE_PRESETS``) with ``impl.variants.sglang``.  The spec itself is too slow to record a
   whole workload (its evict is O(nodes^2): 40 ms a call at 1,000 leaves), so
   each recording is cross-checked instead: its first requests are replayed on
   the spec (``spec.model.SpecCache`` under the same rule set), which must
   give every recorded result, and impl's tree invariants are checked at the
   end of the recording.
2. Replay the recordings, alternating caches, ``reps`` times: impl on the
   spec-rule calls, SGLang on the SGLang-rule calls, each call timed beside the
   read floor of its tokens; a replay that diverges is reported, not timed.
   The spec is timed the same way on the first requests of the small workload.
3. The evict scaling series, the match-vs-floor series, and the memory probe.
4. Write the raw results (JSON) and ``docs/perf.md`` with its plots.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from bench import series
from bench.replay import ApiAdapter, Replay, node_plan, replay, requests_prefix, shortened
from impl.variants import sglang as sglang_rule_cache
from prefixspec.formats.trace import Trace
from prefixspec.formats.trace import replay as replay_trace
from spec.api import RULE_PRESETS, CacheFactory
from bench.sglang_adapter import PLACEHOLDER_MODULES, SglangAdapter, load_sglang
from bench.workload import BIG, SMALL, SMALL_IN_FLIGHT, Recording, Shape, record
from impl import RadixCache
from spec.model import SpecCache

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Plan:
    """How much to measure; ``quick`` is a smoke test of every step."""

    reps: int = 7
    shapes: tuple[Shape, ...] = (SMALL, BIG, SMALL_IN_FLIGHT)
    crosscheck_requests: int = 300
    spec_requests: int = 100
    spec_reps: int = 5
    evict_sizes: tuple[int, ...] = (10**3, 10**4, 10**5, 10**6)
    evict_samples: int = 1000
    sglang_evict_sizes: tuple[int, ...] = (10**3, 10**4, 10**5)
    sglang_evict_samples: tuple[int, ...] = (100, 30, 5)
    spec_evict_sizes: tuple[int, ...] = (10**2, 10**3)
    spec_evict_samples: tuple[int, ...] = (10, 3)
    match_lengths: tuple[int, ...] = (64, 256, 1024, 4096, 16384, 65536)
    spec_match_lengths: tuple[int, ...] = (64, 256, 1024)
    match_samples: int = 200
    memory_blocks: int = 10**6


QUICK = Plan(
    reps=2,
    shapes=(replace(SMALL, requests=300), replace(BIG, requests=400), replace(SMALL_IN_FLIGHT, requests=300)),
    crosscheck_requests=40,
    spec_requests=30,
    spec_reps=2,
    evict_sizes=(10**3, 10**4),
    evict_samples=200,
    sglang_evict_sizes=(10**3, 10**4),
    sglang_evict_samples=(20, 5),
    spec_evict_sizes=(10**2,),
    spec_evict_samples=(3,),
    match_lengths=(64, 1024),
    spec_match_lengths=(64,),
    match_samples=20,
    memory_blocks=10**4,
)


def say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def replay_summary(result: Replay) -> dict[str, Any]:
    return {
        "cache": result.cache,
        "calls": result.calls,
        "ns": dict(result.ns),
        "count": dict(result.count),
        "floor_ns": dict(result.floor_ns),
        "divergence": result.divergence.describe() if result.divergence else None,
    }


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cores": os.cpu_count(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
                break
        info["load_average_at_start"] = os.getloadavg()
    except OSError:
        pass
    try:
        info["commit"] = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "impl"], capture_output=True, text=True, check=False
        ).stdout.strip()
        info["impl_uncommitted_changes"] = bool(dirty)
    except OSError:
        pass
    return info


def crosscheck(recording: Recording, reference: CacheFactory, requests: int, name: str = "SpecCache") -> dict[str, Any]:
    """Replay the first ``requests`` requests of ``recording`` on the slow reference, with the checker's ``replay``."""
    calls = requests_prefix(recording, requests)
    trace = recording.trace
    start = time.perf_counter()
    divergence = replay_trace(Trace(trace.block_size, trace.steps[:calls], rules=trace.rules), reference(trace.block_size))
    return {
        "reference": name,
        "requests": min(requests, recording.requests),
        "calls": calls,
        "agrees": divergence is None,
        "divergence": shortened(divergence).describe() if divergence else None,
        "seconds": round(time.perf_counter() - start, 2),
    }


def profile_impl(recording: Recording, node_plan_: Any, rows: int = 14) -> dict[str, Any]:
    """The functions of impl (and the C functions they call) by their own time in one replay."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    replay(recording, ApiAdapter("impl", RadixCache, recording.shape.block_size), plan=node_plan_)
    profiler.disable()
    stats: Any = getattr(pstats.Stats(profiler), "stats")
    impl_dir = str(ROOT / "impl")
    found = []
    for (filename, line, function), (_, calls, self_time, _, callers) in stats.items():
        if filename.startswith(impl_dir):
            name = f"{Path(filename).name}:{function}"
        elif filename == "~" and any(caller[0].startswith(impl_dir) for caller in callers):
            # A C function: only the part called from impl.
            inside = [value for caller, value in callers.items() if caller[0].startswith(impl_dir)]
            calls = sum(value[1] for value in inside)
            self_time = sum(value[2] for value in inside)
            name = f"{function} (from impl)"
        else:
            continue
        found.append({"function": name, "calls": calls, "self_ms": self_time * 1000, "per_call_us": self_time * 1e6 / max(calls, 1)})
    found.sort(key=lambda row: -row["self_ms"])
    return {"rows": found[:rows], "total_ms": sum(row["self_ms"] for row in found)}


def run(plan: Plan, *, use_sglang: bool = True) -> dict[str, Any]:
    wall = time.perf_counter()
    results: dict[str, Any] = {"plan": asdict(plan), "machine": machine(), "workloads": {}}
    sg = load_sglang() if use_sglang else None
    if sg is not None:
        results["sglang"] = {
            "version": sg.version,
            "torch": sg.torch_version,
            "placeholders": list(PLACEHOLDER_MODULES),
        }
        say(f"SGLang {sg.version} (torch {sg.torch_version}) imported, with placeholders for {', '.join(PLACEHOLDER_MODULES)}")
    else:
        results["sglang"] = None
        say("SGLang is not importable here: measuring impl and spec only (make bench installs it in .venv-bench)")

    # 1. Recordings and their cross-checks.
    recordings: dict[str, dict[str, Recording]] = {}
    for shape in plan.shapes:
        entry: dict[str, Any] = {"shape": asdict(shape), "recordings": {}, "crosscheck": {}}
        recordings[shape.name] = {}
        rule_sets = (("spec", RadixCache, RULE_PRESETS["strict"]), ("sglang", sglang_rule_cache, RULE_PRESETS["sglang"]))
        for rule, factory, rules in rule_sets:
            if rule == "sglang" and sg is None:
                continue
            start = time.perf_counter()
            cache = factory(shape.block_size)
            recording = record(shape, cache, rule=rule, reference=f"{factory.__module__}.{factory.__name__}", rules=rules)
            cache.check_invariants()
            del cache
            summary = recording.summary()
            summary["seconds"] = round(time.perf_counter() - start, 2)
            entry["recordings"][rule] = summary
            entry["crosscheck"][rule] = crosscheck(recording, functools.partial(SpecCache, rules=rules), plan.crosscheck_requests, f"SpecCache rules={rules.name}")
            recordings[shape.name][rule] = recording
            check = entry["crosscheck"][rule]
            say(
                f"recorded {shape.name} ({rule} rule): {summary['calls']:,} calls, hit rate {summary['hit_rate']:.1%}; "
                f"SpecCache (rules {rules.name}) on the first {check['requests']} requests: {'agrees' if check['agrees'] else 'DISAGREES'}"
            )
        results["workloads"][shape.name] = entry

    # 2. Replays, alternating caches.
    gc.collect()
    gc.freeze()
    plans = {name: {rule: node_plan(rec) for rule, rec in by_rule.items()} for name, by_rule in recordings.items()}
    adapters: dict[str, Any] = {"impl": ApiAdapter("impl", RadixCache, 16)}
    if sg is not None:
        adapters["sglang"] = SglangAdapter(16, sg)
    rule_of = {"impl": "spec", "sglang": "sglang"}
    for shape in plan.shapes:
        results["workloads"][shape.name]["replays"] = {name: [] for name in adapters}
    for rep in range(plan.reps):
        names = list(adapters)
        if rep % 2:
            names.reverse()
        for shape in plan.shapes:
            for name in names:
                rule = rule_of[name]
                recording = recordings[shape.name][rule]
                result = replay(recording, adapters[name], plan=plans[shape.name][rule])
                results["workloads"][shape.name]["replays"][name].append(replay_summary(result))
                if result.divergence is not None:
                    say(f"{name} diverges on {shape.name}: {result.divergence.describe()}")
        say(f"replay repetition {rep + 1}/{plan.reps} done")

    # Where impl's time goes: cProfile of one replay of each workload, outside the timed runs.
    results["profile"] = {}
    for shape in plan.shapes[:2]:
        results["profile"][shape.name] = profile_impl(recordings[shape.name]["spec"], plans[shape.name]["spec"])
    say("profiles: done")

    # The spec beside impl on the first requests of the small workload.
    small = recordings[plan.shapes[0].name]["spec"]
    calls = requests_prefix(small, plan.spec_requests)
    spec_runs: dict[str, list[dict[str, Any]]] = {"impl": [], "spec": []}
    for rep in range(plan.spec_reps):
        pair: list[tuple[str, Any]] = [("impl", RadixCache), ("spec", SpecCache)]
        if rep % 2:
            pair.reverse()
        for name, factory in pair:
            result = replay(small, ApiAdapter(name, factory, 16), limit=calls)
            spec_runs[name].append(replay_summary(result))
    results["spec_prefix"] = {"workload": plan.shapes[0].name, "requests": plan.spec_requests, "calls": calls, "replays": spec_runs}
    say(f"spec beside impl on the first {plan.spec_requests} requests: done")
    gc.unfreeze()
    del recordings, plans
    gc.collect()

    # 3. Series.
    evict: dict[str, Any] = {}
    sizes = list(plan.evict_sizes)
    evict["impl"] = series.evict_scaling(
        "impl", lambda: series.api_stepper("impl", RadixCache(16)), sizes, {size: plan.evict_samples for size in sizes}, plan.reps
    )
    if sg is not None:
        sizes = list(plan.sglang_evict_sizes)
        evict["sglang"] = series.evict_scaling(
            "sglang", series.sglang_stepper(sg), sizes, dict(zip(sizes, plan.sglang_evict_samples)), plan.reps
        )
    sizes = list(plan.spec_evict_sizes)
    evict["spec"] = series.evict_scaling(
        "spec", lambda: series.api_stepper("spec", SpecCache(16)), sizes, dict(zip(sizes, plan.spec_evict_samples)), 3
    )
    results["evict_scaling"] = {name: asdict(value) for name, value in evict.items()}
    say("evict scaling series: done")

    match: dict[str, Any] = {}
    match["impl"] = series.match_floor("impl", lambda: RadixCache(16), list(plan.match_lengths), plan.match_samples, plan.reps)
    if sg is not None:
        match["sglang"] = series.match_floor(
            "sglang",
            lambda: sg.RadixCache.create_simulated(page_size=16),
            list(plan.match_lengths),
            plan.match_samples,
            plan.reps,
            sglang=sg,
        )
    match["spec"] = series.match_floor("spec", lambda: SpecCache(16), list(plan.spec_match_lengths), 5, 3)
    results["match_floor"] = {name: [asdict(point) for point in points] for name, points in match.items()}
    say("match-vs-floor series: done")

    results["read_costs"] = series.read_costs(2750, plan.match_samples * 5, plan.reps)
    memory: dict[str, Any] = {"impl": asdict(series.memory_api("impl", RadixCache, plan.memory_blocks))}
    if sg is not None:
        memory["sglang"] = asdict(series.memory_sglang(sg, plan.memory_blocks))
    results["memory"] = memory
    say("memory probe: done")
    results["seconds"] = round(time.perf_counter() - wall, 1)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description="Benchmark impl, SGLang's RadixCache and the spec (issue 7).")
    add_arguments(parser)
    return run_command(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="a smoke test of every step (small sizes, 2 repetitions); writes under --results only")
    parser.add_argument("--reps", type=int, default=None, help="repetitions of each measurement (default 7, at least 5 for the report)")
    parser.add_argument("--no-sglang", action="store_true", help="measure impl and spec only")
    parser.add_argument("--results", default=None, help="directory of the raw results (default bench/results, or a temporary one with --quick)")
    parser.add_argument("--docs", default=None, help="directory of perf.md and its plots (default docs; not written with --quick unless given)")


def run_command(arguments: argparse.Namespace) -> int:
    from bench import report

    plan = QUICK if arguments.quick else Plan()
    if arguments.reps is not None:
        plan = replace(plan, reps=arguments.reps)
    results_dir = Path(arguments.results) if arguments.results else (Path("/tmp/prefixspec-bench-quick") if arguments.quick else ROOT / "bench" / "results")
    docs_dir = Path(arguments.docs) if arguments.docs else (None if arguments.quick else ROOT / "docs")
    results = run(plan, use_sglang=not arguments.no_sglang)
    results_dir.mkdir(parents=True, exist_ok=True)
    raw = results_dir / "results.json"
    raw.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    say(f"wrote {raw}")
    if docs_dir is not None:
        for path in report.write(results, docs_dir, raw):
            say(f"wrote {path}")
    diverged = [
        f"{name}/{replay_entry['cache']}"
        for name, entry in results["workloads"].items()
        for runs in entry["replays"].values()
        for replay_entry in runs[:1]
        if replay_entry["divergence"]
    ]
    disagreements = [
        f"{name}/{rule}" for name, entry in results["workloads"].items() for rule, check in entry["crosscheck"].items() if not check["agrees"]
    ]
    say(f"done in {results['seconds']} s")
    if diverged or disagreements:
        say(f"divergences: {diverged}; cross-check disagreements: {disagreements}")
        return 1
    return 0
