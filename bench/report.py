"""``docs/perf.md`` and its plots, from the raw results of ``bench.run``.

``python -m bench.report RESULTS.json DOCS_DIR`` writes them again from a
results file, without measuring anything.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.replay import median
from prefixspec.vocabulary import COMMANDS

TARGET_TOTAL = 1.5
TARGET_MATCH = 1.3
TARGET_EVICT = 1.5
TARGET_MEMORY = 8.0


def spread(values: list[float], digits: int = 2, unit: str = "") -> str:
    """``median (min-max)``."""
    if not values:
        return "-"
    return f"{median(values):.{digits}f}{unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def ok(passed: bool) -> str:
    return "met" if passed else "**missed**"


def ratios(runs: list[dict[str, Any]], op: str | None = None) -> list[float]:
    """Per repetition: cache time over read floor, of all calls or of one kind."""
    found = []
    for run in runs:
        if run["divergence"]:
            continue
        if op is None:
            found.append(sum(run["ns"].values()) / sum(run["floor_ns"].values()))
        else:
            found.append(run["ns"][op] / run["floor_ns"][op])
    return found


def per_call_us(runs: list[dict[str, Any]], op: str) -> list[float]:
    return [run["ns"][op] / run["count"][op] / 1000 for run in runs if run["count"][op] and not run["divergence"]]


def totals_s(runs: list[dict[str, Any]], floor: bool = False) -> list[float]:
    key = "floor_ns" if floor else "ns"
    return [sum(run[key].values()) / 1e9 for run in runs if not run["divergence"]]


def speedups(slow: list[dict[str, Any]], fast: list[dict[str, Any]]) -> list[float]:
    """Per repetition: total time of ``slow`` over that of ``fast``, each over its own read floor
    (the two replay different recordings of one workload, see Method)."""
    return [s / f for s, f in zip(ratios(slow), ratios(fast))]


def plot(results: dict[str, Any], docs: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    styles = {"impl": ("tab:blue", "o"), "sglang": ("tab:red", "s"), "spec": ("tab:gray", "^")}

    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    for name, data in results["evict_scaling"].items():
        sizes = data["sizes"]
        values = [median(_medians(data, size)) / 1000 for size in sizes]
        color, marker = styles.get(name, ("black", "x"))
        axes.plot(sizes, values, marker=marker, color=color, label=name)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("cached leaves")
    axes.set_ylabel("evict(1): microseconds per freed block (median)")
    axes.set_title("Evict cost against cached leaves (B = 16, one-block leaves)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path = docs / "perf-evict.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    written.append(path)

    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    for name, points in results["match_floor"].items():
        color, marker = styles.get(name, ("black", "x"))
        axes.plot([p["length"] for p in points], [median(p["ratios"]) for p in points], marker=marker, color=color, label=name)
    axes.axhline(TARGET_MATCH, color="tab:green", linestyle="--", label=f"target {TARGET_MATCH}x")
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("prompt tokens (cached as a path of 4 nodes)")
    axes.set_ylabel("match_prefix / read floor (median)")
    axes.set_title("match_prefix against the read floor of its prompt")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path = docs / "perf-match.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    written.append(path)
    return written


def _medians(data: dict[str, Any], size: int) -> list[float]:
    medians = data["medians_ns"]
    return list(medians[str(size)] if str(size) in medians else medians[size])


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
    impl_evict_ratios = [b / a for b, a in zip(_medians(impl_evict, impl_evict["sizes"][-1]), _medians(impl_evict, impl_evict["sizes"][0]))]
    cells = []
    for name in ("sglang", "spec"):
        data = evict.get(name)
        if data is None:
            cells.append("-")
            continue
        first, last = data["sizes"][0], data["sizes"][-1]
        growth = [b / a for b, a in zip(_medians(data, last), _medians(data, first))]
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
        "The spec is reported, not targeted: it is the definition, written for the reader "
        "(every call is O(nodes), and evict O(nodes^2))."
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
            cells.append(spread(_medians(data, size), 0) if size in data["sizes"] else "-")
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
    add(_METHOD.format(
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


def analysis(results: dict[str, Any]) -> list[str]:
    """Why a missed target is missed, from this run's numbers."""
    lines: list[str] = []
    add = lines.append
    workloads = results["workloads"]
    read = median(results["read_costs"]) if results.get("read_costs") else None
    add("## Why a missed target is missed")
    add("")
    if read is not None:
        add(
            f"impl reads its tokens with `array('I').fromlist`, which costs {read:.2f} x the read floor "
            f"(`array('I', tokens)`), measured side by side on {2750:,}-token lists "
            f"({spread(results['read_costs'])}). So {read:.2f} of each ratio below is reading, and the rest is "
            "the tree's own work."
        )
        add("")
    missed_any = False
    for name, entry in list(workloads.items())[:2]:
        runs = entry["replays"]["impl"]
        total = median(ratios(runs))
        match_ratio = median(ratios(runs, "match"))
        if total <= TARGET_TOTAL and match_ratio <= TARGET_MATCH:
            continue
        missed_any = True
        requests = entry["shape"]["requests"]
        recording = entry["recordings"]["spec"]
        floor_us = median(totals_s(runs, floor=True)) / requests * 1e6
        impl_us = median(totals_s(runs)) / requests * 1e6
        evicts = recording["calls_by_op"]["evict"] / requests
        blocks_matched = recording["hit_tokens"] / requests / 16
        blocks_evicted = recording["evicted_blocks"] / requests
        per_op = {op: median(per_call_us(runs, op)) if per_call_us(runs, op) else 0.0 for op in COMMANDS}
        tree_share = total - (read if read is not None else 0.0)
        profile = results.get("profile", {}).get(name)
        largest = ""
        if profile:
            steps = [row for row in profile["rows"] if "fromlist" not in row["function"]]
            if steps:
                top = steps[0]
                largest = (
                    f" The largest of them, `{top['function']}`, is {top['self_ms'] / profile['total_ms']:.0%} of impl's "
                    "time in the profile above;"
                )
        add(f"**{name}: total {total:.2f} x, match {match_ratio:.2f} x the read floor.**")
        add(
            f"A request reads {floor_us:.1f} us of floor (its prompt in match, prompt and output in insert); impl spends "
            f"{impl_us:.1f} us on it: match {per_op['match']:.1f}, insert {per_op['insert']:.1f}, lock {per_op['lock']:.1f}, "
            f"unlock {per_op['unlock']:.1f}, and {evicts:.2f} evict calls of {per_op['evict']:.1f}. Beyond reading, the tree's "
            f"work is {tree_share:.2f} x the floor, {tree_share * floor_us:.1f} us a request, spread over Python steps of which "
            f"none is per token: two descents of the cached path (match's and insert's; per node a dict lookup of the "
            f"first block's bytes and one C comparison of the segment, on memory that other requests have made cold), "
            f"the list of {blocks_matched:.0f} block ids a match returns, one Python step for each new block id claimed "
            f"and each of the {blocks_evicted:.0f} evicted ids released (the byte map that keeps memory at its target), one "
            f"new node per insert, the lock and unlock walks up the path, and the leaves each evict frees.{largest} every "
            f"step does work the rules require (find the path, return the ids, check the ids, add the node, pin the "
            f"path, free the leaves), already in O(nodes on the path) or O(blocks) Python steps with every byte "
            f"comparison in C. What is left is the interpreter's cost of those steps; going lower needs them in C "
            f"(an extension module), which this project keeps out of impl."
        )
        add("")
    impl_points = results["match_floor"]["impl"]
    short = [p for p in impl_points if median(p["ratios"]) > TARGET_MATCH]
    if short:
        missed_any = True
        first = short[0]
        add(
            f"**match_prefix on short prompts.** A match has a fixed cost, whatever the prompt's length: the "
            f"call and its argument checks, the conversion, at least one dict lookup, the use of the path (R7) and the "
            f"result objects; {median(first['match_ns']) / 1000:.1f} us at {first['length']:,} tokens, against a read "
            f"floor of {median(first['floor_ns']) / 1000:.2f} us. Below about 1,000 tokens that fixed cost is more than "
            f"0.3 of the floor, so the 1.3 x target holds from there up (the workloads' prompts average about "
            f"{list(workloads.values())[0]['recordings']['spec']['query_tokens'] / list(workloads.values())[0]['shape']['requests']:,.0f} tokens)."
        )
        add("")
    if not missed_any:
        add("No target is missed in this run.")
        add("")
    return lines


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path(__file__).resolve().parent.parent))
    except ValueError:
        return str(path)


_METHOD = """## Method

**Workloads.** `bench/workload.py` draws seeded traffic shaped like an LLM server's at B = 16: 55% of
requests on one of 8 shared system prompts of 1,000-2,000 tokens plus a unique user part of 50-500
tokens; 35% turns of multi-turn chats (8 at a time; each turn's prompt is the chat's last prompt plus
its output plus a new message of 50-500 tokens, and a chat that would pass 8,000 tokens starts over);
10% unique prompts of 200-3,000 tokens; 50-300 output tokens each. An engine over a bounded pool of
block ids with a free list admits each request with match -> lock -> evict (only when the free list is
short) and finishes it with insert (prompt and output) -> free the duplicates and the partial tail's
block -> unlock. `small` and `big` run one request at a time; `small-8` keeps 8 in flight, so that
running requests compute the same blocks and inserts hand back duplicates.

**Recorded calls, expected results.** The engine decides every call from a reference cache's results,
and each call is recorded with that result as its expected one, as a trace of the checker's format
(`prefixspec.formats.trace`), so every cache replays exactly the same calls and a result that differs is a
divergence, reported and not timed. The spec is too slow
to record whole workloads (its evict is O(nodes^2)), so the reference is `impl.RadixCache`, itself
checked call by call against the spec by the test suite, and each recording is cross-checked: its first
{crosscheck} requests are replayed on the spec, which must give every recorded result (see each
workload above), and impl's tree invariants are checked at the end of the recording.

**SGLang's rules.** SGLang's RadixCache differs from the spec in one rule that changes results: when a
match or insert ends inside a node it splits the node, and it sets the last access time of the split
node (the lower part, the unmatched tail) before splitting, where the spec (R4, R7) leaves the tail's
last use alone. Eviction order then differs. So each workload is recorded a second time under SGLang's
rule (the `sglang` rule set: the same engine with `impl.variants.sglang`, impl with the tail refreshed,
cross-checked the same way against the spec under the `sglang` rule set, with the tail refreshed), and SGLang
replays that recording. The two recordings of a workload have the same requests and tokens and differ
only in which blocks eviction picks (hit rates and evicted blocks are shown above), so each cache's
total is compared with the read floor of its own calls, and the speed-up over SGLang is the ratio of
those two ratios. Two more differences need no variant: SGLang evicts tokens (the adapter asks for
16 x n) and frees whole leaves, as here; and the engine, not the cache, keeps the last prompt token
out of a match (the adapter passes `RadixKey(tokens, limit=n - 1)`, as SGLang's scheduler does).

**SGLang adapter.** `bench/sglang_adapter.py` drives `RadixCache.create_simulated(page_size=16)` with a
mock allocator that only records the slots evict frees. Outside the timer it does what an engine does
anyway: builds the `RadixKey` (tokens as `array('q')`), the int64 slot tensor (block b holds slots
16b..16b+15) and the parameter objects, and afterwards reads results back into block ids
(`path_device_indices` of the returned node). Inside the timer it makes exactly one SGLang call per
cache call (`match_prefix`, `insert`, `inc_lock_ref`, `dec_lock_ref`, `evict`). Importing SGLang's radix
cache pulls two modules that import torchvision at module level (listed below); torchvision is not
installed (its wheel would replace the CPU torch with a CUDA build of several GB), so the adapter puts
placeholder modules in their place before the import; the radix cache uses neither.

**Timing.** Each call is timed alone with `perf_counter_ns`; each match and insert is also timed on the
read floor, `array('I', tokens)` on the very list handed to the cache, back to back with the call and in
alternating order. The read floor is what any cache that takes Python lists must spend reading them.
Each repetition replays every workload on every cache in fresh caches, alternating the order of the
caches; the tables give the median over {reps} repetitions with the min and max. The garbage collector
stays on (as in an engine), the recordings are frozen out of its sight, and the replay keeps a returned
node only until the last call that names it, so no cache is charged for the harness's objects. The
machine is shared with other jobs, so absolute times move between runs; the ratios, measured side by
side, move much less.

**impl tuning (what the measurements above are of).** Each optimisation in `impl/` names its benchmark
in a comment: tokens and block ids are read with `array.fromlist` (2.8 ns a token against 4.0 for the
`array('I', tokens)` floor); the ids an insert passes for cached positions are compared with the cached
ones in one C comparison (the engine passes back what its match returned) instead of a Python step per
block; the set of held ids is a byte per id (`impl/ids.py`) instead of a `set` of ints; block ids are
kept as `array('I')` per node; the LRU queue is a FIFO for the leaves that join it at the current time
(almost all) plus a heap for the rest, so an eviction does not pay O(log n) cache misses; a node keeps
its own child key so eviction does not slice its segment again.
"""


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
