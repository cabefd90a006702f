"""``docs/perf.md`` and its plots, from the raw results of ``bench.run``.

``python -m bench.report RESULTS.json DOCS_DIR`` writes them again from a
results file, without measuring anything.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.analysis import METHOD, analysis
from bench.figures import TARGET_EVICT, TARGET_MATCH, TARGET_MEMORY, TARGET_TOTAL, medians_at, ok, per_call_us, ratios, speedups, spread, totals_s
from bench.plots import plot
from bench.replay import median
from prefixspec.vocabulary import COMMANDS

def write(results: dict[str, Any], docs: Path, raw: Path) -> list[Path]:
    docs.mkdir(parents=True, exist_ok=True)
    images = plot(results, docs)
    text = render(results, raw, has_plots=bool(images))
    path = docs / "perf.md"
    path.write_text(text, encoding="utf-8")
    return [path, *images]


def render(results: dict[str, Any], raw: Path, *, has_plots: bool) -> str:
    plan = results["plan"]
    workloads = results["workloads"]
    sg = results.get("sglang")
    machine = results["machine"]
    lines: list[str] = []
    add = lines.append
    names = list(workloads)
    small, big = names[0], names[1]

    add("# Performance of the prefix caches (issue 7)")
    add("")
    add(
        f"Written by `make bench` (`prefixspec bench`, `python -m bench`) on {time.strftime('%Y-%m-%d')}, "
        f"in {results['seconds']:.0f} s; do not edit by hand. The raw results are `{_rel(raw)}`."
    )
    add("Every figure is a median over repetitions, with (min-max); every ratio is measured side by side in one run.")
    add("")

    # Targets.
    add("## Against the targets")
    add("")
    add("| target | impl | SGLang | spec | verdict for impl |")
    add("|---|---|---|---|---|")
    for name, label in ((small, "small pool"), (big, "big pool")):
        runs = workloads[name]["replays"]
        impl_total = ratios(runs["impl"])
        sglang_total = ratios(runs.get("sglang", []))
        add(
            f"| total cache time <= {TARGET_TOTAL} x read floor, {label} ({workloads[name]['shape']['pool_blocks']:,} blocks) | "
            f"{spread(impl_total)} | {spread(sglang_total)} | - | {ok(median(impl_total) <= TARGET_TOTAL)} |"
        )
    for name, label in ((small, "small pool"), (big, "big pool")):
        runs = workloads[name]["replays"]
        impl_match = ratios(runs["impl"], "match")
        add(
            f"| match_prefix <= {TARGET_MATCH} x read floor, workload, {label} | {spread(impl_match)} | "
            f"{spread(ratios(runs.get('sglang', []), 'match'))} | - | {ok(median(impl_match) <= TARGET_MATCH)} |"
        )
    match = results["match_floor"]
    impl_points = match["impl"]
    passing = [p["length"] for p in impl_points if median(p["ratios"]) <= TARGET_MATCH]
    sglang_points = {p["length"]: p for p in match.get("sglang", [])}
    spec_points = {p["length"]: p for p in match.get("spec", [])}
    verdict = f"met from {min(passing):,} tokens up" if passing else "**missed**"
    add(
        f"| match_prefix <= {TARGET_MATCH} x read floor, series (prompt tokens: ratio) | "
        + ", ".join(f"{p['length']:,}: {median(p['ratios']):.2f}" for p in impl_points)
        + " | "
        + ", ".join(f"{length:,}: {median(p['ratios']):.2f}" for length, p in sglang_points.items())
        + " | "
        + ", ".join(f"{length:,}: {median(p['ratios']):.0f}" for length, p in spec_points.items())
        + f" | {verdict} |"
    )
    evict = results["evict_scaling"]
    impl_evict = evict["impl"]
    impl_evict_ratios = [b / a for b, a in zip(medians_at(impl_evict, impl_evict["sizes"][-1]), medians_at(impl_evict, impl_evict["sizes"][0]))]
    cells = []
    for name in ("sglang", "spec"):
        data = evict.get(name)
        if data is None:
            cells.append("-")
            continue
        first, last = data["sizes"][0], data["sizes"][-1]
        growth = [b / a for b, a in zip(medians_at(data, last), medians_at(data, first))]
        cells.append(f"{spread(growth, 0)} ({first:,} -> {last:,})")
    add(
        f"| evict per freed block grows <= {TARGET_EVICT} x from {impl_evict['sizes'][0]:,} to {impl_evict['sizes'][-1]:,} leaves | "
        f"{spread(impl_evict_ratios)} | {cells[0]} | {cells[1]} | {ok(median(impl_evict_ratios) <= TARGET_EVICT)} |"
    )
    memory = results["memory"]
    impl_memory = memory["impl"]
    impl_bpt = (impl_memory["traced_bytes"] + impl_memory["untraced_bytes"]) / impl_memory["tokens"]
    sglang_memory = memory.get("sglang")
    sglang_bpt = (
        f"{(sglang_memory['traced_bytes'] + sglang_memory['untraced_bytes']) / sglang_memory['tokens']:.2f}" if sglang_memory else "-"
    )
    add(
        f"| memory <= {TARGET_MEMORY:.0f} bytes per cached token at {impl_memory['blocks']:,} blocks of 16 tokens | "
        f"{impl_bpt:.2f} | {sglang_bpt} | - | {ok(impl_bpt <= TARGET_MEMORY)} |"
    )
    if sg:
        for name, label, wanted in ((small, "small pool", 3.0), (big, "big pool", 8.0)):
            runs = workloads[name]["replays"]
            faster = speedups(runs["sglang"], runs["impl"])
            add(
                f"| (derived) impl faster than SGLang, {label}: the issue expects {wanted:.0f} x from SGLang at "
                f"{4 if wanted < 5 else 11} x its floor | {spread(faster)} x | 1 x | - | see below |"
            )
    add("")
    if sg:
        add(
            "The speed-ups over SGLang follow from the first target and from how far SGLang is from its own read floor. "
            "The issue measured SGLang at about 4 x and 11 x its floor, which at 1.5 x for impl gives 3 x and 8 x; this run "
            "measures SGLang at the ratios in the first two rows (its keys are built outside its timer, see Method), "
            "so the same impl ratio gives the speed-ups shown."
        )
        add("")
    add(
        "The spec is reported, not targeted: it is the definition, written for the reader. It keys every cached "
        "whole-block prefix apart, so a call pays for each prefix of its prompt (a prompt of L tokens makes L/B keys "
        "of up to L tokens), and an evict reads every node to find the unpinned leaves."
    )
    add("")

    # Workloads.
    add("## The workloads, call by call")
    add("")
    add(
        "Mean microseconds per call (median of the repetitions, with min-max), total seconds of all cache calls, "
        "and the read floor of the same calls."
    )
    add("")
    for name in names:
        entry = workloads[name]
        shape = entry["shape"]
        recs = entry["recordings"]
        spec_rec = recs["spec"]
        add(f"### {name}: {shape['pool_blocks']:,} blocks, {shape['requests']:,} requests, {shape['in_flight']} in flight")
        add("")
        add(
            f"{spec_rec['calls']:,} calls ({', '.join(f'{count:,} {op}' for op, count in spec_rec['calls_by_op'].items())}); "
            f"hit rate {spec_rec['hit_rate']:.1%}; {spec_rec['query_tokens'] / spec_rec['requests']:,.0f} prompt tokens a request; "
            f"{spec_rec['evicted_blocks']:,} blocks evicted; {spec_rec['duplicates']:,} duplicates handed back."
        )
        if "sglang" in recs:
            sg_rec = recs["sglang"]
            add(
                f"Under SGLang's rule: hit rate {sg_rec['hit_rate']:.1%}, {sg_rec['evicted_blocks']:,} blocks evicted, "
                f"{sg_rec['duplicates']:,} duplicates."
            )
        checks = "; ".join(
            f"{check['reference']} on the first {check['requests']} requests ({check['calls']:,} calls): "
            + ("every result as recorded" if check["agrees"] else f"DISAGREES: {check['divergence']}")
            for check in entry["crosscheck"].values()
        )
        add(f"Cross-check: {checks}.")
        add("")
        add("| cache | " + " | ".join(COMMANDS) + " | total (s) | read floor (s) | total / floor | match / floor |")
        add("|---|" + "---|" * (len(COMMANDS) + 4))
        for cache, runs in entry["replays"].items():
            diverged = [run["divergence"] for run in runs if run["divergence"]]
            if diverged:
                add(f"| {cache} | diverged: {diverged[0]} |" + " |" * (len(COMMANDS) + 3))
                continue
            add(
                f"| {cache} | "
                + " | ".join(spread(per_call_us(runs, op), 1) for op in COMMANDS)
                + f" | {spread(totals_s(runs), 3)} | {spread(totals_s(runs, floor=True), 3)} | {spread(ratios(runs))} | {spread(ratios(runs, 'match'))} |"
            )
        add("")

    # Spec.
    prefix = results["spec_prefix"]
    add("## The spec beside impl")
    add("")
    add(
        f"The first {prefix['requests']} requests of the {prefix['workload']} workload ({prefix['calls']:,} calls), "
        "replayed on the spec and on impl in alternation:"
    )
    add("")
    add("| cache | " + " | ".join(COMMANDS) + " | total (s) | total / floor |")
    add("|---|" + "---|" * (len(COMMANDS) + 2))
    for cache, runs in prefix["replays"].items():
        add(f"| {cache} | " + " | ".join(spread(per_call_us(runs, op), 1) for op in COMMANDS) + f" | {spread(totals_s(runs), 3)} | {spread(ratios(runs))} |")
    spec_over_impl = [s / i for s, i in zip(totals_s(prefix["replays"]["spec"]), totals_s(prefix["replays"]["impl"]))]
    add("")
    add(f"The spec takes {spread(spec_over_impl, 0)} times impl's time on these calls, and the gap grows with the cache.")
    add("")

    # Evict series.
    add("## Evict cost against cached leaves")
    add("")
    add(
        "Each cache holds L one-block leaves below the root; each sample inserts one more leaf (untimed) and times "
        "`evict(1)` (SGLang: `evict(num_tokens=16)`), which frees the oldest, so L stays put. Nanoseconds per freed block:"
    )
    add("")
    all_sizes = sorted({size for data in evict.values() for size in data["sizes"]})
    add("| cache | " + " | ".join(f"{size:,} leaves" for size in all_sizes) + " |")
    add("|---|" + "---|" * len(all_sizes))
    for name, data in evict.items():
        cells = []
        for size in all_sizes:
            cells.append(spread(medians_at(data, size), 0) if size in data["sizes"] else "-")
        add(f"| {name} | " + " | ".join(cells) + " |")
    add("")
    add(
        "Samples a size and repetition: "
        + "; ".join(f"{name}: " + ", ".join(f"{size:,}: {count}" for size, count in data["samples"].items()) for name, data in evict.items())
        + ". SGLang rebuilds a heap of every evictable leaf on each call, so its series stops at "
        f"{evict['sglang']['sizes'][-1]:,} leaves (one call there takes a tenth of a second; building {10**6:,} leaves would take minutes)."
        if "sglang" in evict
        else ""
    )
    add("")
    if has_plots:
        add("![evict cost against cached leaves](perf-evict.png)")
        add("")

    # Match series.
    add("## match_prefix against the read floor")
    add("")
    add(
        "The prompt is cached as a path of 4 nodes beside 64 other branches; each sample times `array('I', prompt)` "
        "and the match on the same fresh list, back to back, in alternating order. SGLang gets its key built outside the timer "
        "(an `array('q')` in a `RadixKey`, as its scheduler holds prompts), so for long prompts it reads less than the floor."
    )
    add("")
    add("| prompt tokens | read floor (us) | impl (us) | impl / floor | SGLang (us) | SGLang / floor | spec / floor |")
    add("|---|---|---|---|---|---|---|")
    for point in impl_points:
        length = point["length"]
        sg_point = sglang_points.get(length)
        spec_point = spec_points.get(length)
        add(
            f"| {length:,} | {median(point['floor_ns']) / 1000:.2f} | {median(point['match_ns']) / 1000:.2f} | {spread(point['ratios'])} | "
            + (f"{median(sg_point['match_ns']) / 1000:.2f} | {spread(sg_point['ratios'])}" if sg_point else "- | -")
            + f" | {spread(spec_point['ratios'], 0) if spec_point else '-'} |"
        )
    add("")
    if has_plots:
        add("![match against the read floor](perf-match.png)")
        add("")

    # Memory.
    add("## Memory")
    add("")
    add(
        "Each cache is filled with the small workload's traffic (no eviction) until it holds "
        f"{impl_memory['blocks']:,} blocks; tracemalloc counts what it still holds once the inputs are dropped. "
        "SGLang's value tensors live in torch's allocator, out of tracemalloc's sight; their storage is added "
        "from the tensors' sizes (torch's C++ tensor headers are not counted)."
    )
    add("")
    add("| cache | blocks | requests | traced (MB) | tensor storage (MB) | bytes per cached token |")
    add("|---|---|---|---|---|---|")
    for name, point in memory.items():
        add(
            f"| {name} | {point['blocks']:,} | {point['requests']:,} | {point['traced_bytes'] / 1e6:.1f} | "
            f"{point['untraced_bytes'] / 1e6:.1f} | {(point['traced_bytes'] + point['untraced_bytes']) / point['tokens']:.2f} |"
        )
    add("")

    # Profile.
    profile = results.get("profile")
    if profile:
        add("## Where impl's time goes")
        add("")
        add(
            "cProfile of one replay of each workload on impl (outside the timed runs). `self` is the time in the "
            "function itself; a C function is listed as called from impl. cProfile's own cost per Python call "
            "inflates the Python functions' shares against the C ones; the timed replays above are the measure."
        )
        add("")
        for name, found in profile.items():
            add(f"### {name}")
            add("")
            add("| function | calls | self (ms) | share of impl | per call (us) |")
            add("|---|---|---|---|---|")
            for row in found["rows"]:
                add(
                    f"| `{row['function']}` | {row['calls']:,} | {row['self_ms']:.1f} | "
                    f"{row['self_ms'] / found['total_ms']:.1%} | {row['per_call_us']:.2f} |"
                )
            add("")

    lines.extend(analysis(results))
    add(METHOD.format(
        reps=plan["reps"],
        crosscheck=plan["crosscheck_requests"],
    ))
    add("## Machine and versions")
    add("")
    for key, value in machine.items():
        add(f"- {key}: {value}")
    if sg:
        add(f"- SGLang {sg['version']} with torch {sg['torch']} (CPU build), from PyPI; placeholder modules: {', '.join(sg['placeholders'])}")
    else:
        add("- SGLang: not measured in this run")
    add("")
    return "\n".join(lines)


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path(__file__).resolve().parent.parent))
    except ValueError:
        return str(path)





if __name__ == "__main__":
    import json
    import sys

    if len(sys.argv) != 3:
        print("usage: python -m bench.report RESULTS.json DOCS_DIR", file=sys.stderr)
        sys.exit(2)
    raw_path = Path(sys.argv[1])
    loaded = json.loads(raw_path.read_text(encoding="utf-8"))
    for series_data in loaded["evict_scaling"].values():  # JSON wrote the sizes as strings
        series_data["samples"] = {int(size): count for size, count in series_data["samples"].items()}
        series_data["medians_ns"] = {int(size): values for size, values in series_data["medians_ns"].items()}
    for written in write(loaded, Path(sys.argv[2]), raw_path):
        print(f"wrote {written}")
