"""SGLang's ``UnifiedRadixCache`` through the kit, on each TreeCore under each policy: its section of ``docs/engines.md``.

For each policy (the server's ``lru lfu slru priority tlru``, then the library's ``fifo mru filo``)
and each core (``rust``, ``python``): ``prefixspec check`` of ``examples.sglang.unified:CORE_POLICY``
(the namespace as ``cache_salt``, events taken) in the ``ci`` profile under the policy's preset
(``preset_of``), and the two cores driven side by side (``examples/sglang/cores.py``).  A core that
cannot be built here, or a policy no rule set describes, is a row that says why.

Expectations (a problem of the run when one does not hold): each check passes its preset; the two
cores agree on every call.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from collections.abc import Callable
from typing import Any

from spec.api import RULE_PRESETS
from examples.matrix import EngineSection, MatrixRow
from examples.sglang import unified
from examples.sglang.cores import compare_cores
from examples.sglang.engines import calls_of, failed_rules, shortest_stage
from bench.sglang_loading import load_unified, unified_unavailable
from prefixspec.running.report import CheckReport
from prefixspec.running.stages import RunPlan, run_check
from prefixspec.vocabulary import counted

PRESET_CANDIDATES: dict[str, tuple[str, ...]] = {
    "lru": ("sglang-unified", "sglang"),
    "lfu": ("sglang-unified-lfu", "sglang-lfu"),
    "slru": ("sglang-unified-slru", "sglang-slru"),
    "priority": ("sglang-unified-priority", "sglang-priority", "sglang-unified", "sglang"),
    "tlru": ("sglang-unified-tlru", "sglang-tlru", "sglang-unified", "sglang"),
    "fifo": ("sglang-unified-fifo", "sglang-fifo"),
    "mru": ("sglang-unified-mru", "sglang-mru"),
    "filo": ("sglang-unified-filo", "sglang-filo"),
}
"""The rule set each policy is checked under: the first of these the spec defines."""

POLICY_NOTES: dict[str, str] = {
    "priority": (
        "`priority` (server) ranks by `(node.priority, last_access_time)` (`mem_cache/evict_policy.py:41-46`); a priority "
        "comes with an insert (`InsertParams.priority`, taken as 0 when None, `unified_tree_core.py:1143-1147`), which the "
        "kit's insert does not carry, so every node has priority 0 (a split's upper node copies it, `:1470`; the root's "
        "`-sys.maxsize` is never evicted) and the key orders as `lru`'s: checked under `sglang`. Other priorities are not drawn."
    ),
    "tlru": (
        "`tlru` (server) takes `threshold` and `next_prompt_estimate`; the server refuses it unless `threshold > "
        "next_prompt_estimate` (`arg_groups/kv_cache_hook.py:375-391`), and checked here with the example its help gives, "
        "`{threshold: 4096, next_prompt_estimate: 512}` (`arg_groups/fields/memory.py:53-55`). `TLRUStrategy.get_priority` "
        "(`evict_policy.py:69-81`) ranks a node `(-1, last_access_time)` when it is TEL-safe, when the tokens cached above it "
        "(`_tlru_cached_prefix_len - len(key)`, never below 0) reach `max(L + 512 - 4096, 0)`, L its branch's high-water "
        "depth (`unified_tree_core.py:191-210`), else `(0, last_access_time)`; the Rust core is given the same budget, "
        "`threshold - next_prompt_estimate` (`rust_tree_core/adapter.py:413-420`). For every branch of at most 3,584 tokens "
        "the bound is 0, every node is TEL-safe, and the key orders as `lru`'s: so `tlru` is checked under `sglang`. The "
        "kit's longer branches are the long node's (2^16 tokens and more, `prefixspec/drive/long_node.py`), where neither "
        "leaf is TEL-safe (each leaf's own tokens, 4,096 or more, exceed the 3,584 the budget spares), so again `lru`'s order. A budget the "
        "kit's prompts exceed (a small threshold) makes T-LRU a rule of its own, which the spec does not state (R8): under "
        "`threshold 4, estimate 1`, `insert [1 2 3 4 5 6]`, `insert [9]`, `evict 1` frees the newer `[9]` on both cores "
        "(`spec/README.md`, Rule sets); the two cores are compared under that budget too (below)."
    ),
    "slru": (
        "`slru` (server) ranks `(hit_count >= protected_threshold, last_access_time)` (`evict_policy.py:84-100`) at the "
        "server's default threshold 2, `sglang-slru`; a split's upper node copies the hits (`unified_tree_core.py:1474`) as "
        "R8's `slru:N` says."
    ),
    "lfu": "`lfu` (server): `(hit_count, last_access_time)` (`evict_policy.py:21-23`), `sglang-lfu`.",
    "fifo": (
        "`fifo` (library only: not among the server's choices, `arg_groups/choices.py:190`): creation time, "
        "`sglang-unified-fifo`, R4's `split=inherit` (`unified_tree_core.py:1476`)."
    ),
    "filo": "`filo` (library only): the newest creation first, `sglang-unified-filo` (R4 `split=inherit`).",
    "mru": (
        "`mru` (library only): the newest last use first, `sglang-mru` (it reads no creation time, so R4's split stamp "
        "does not show)."
    ),
}

CORE_SEQUENCES, CORE_CALLS = 100, 30
"""The cores side by side: seeded call sequences per policy, and calls in each."""

POLICY_CONFIG: dict[str, dict[str, Any]] = {"tlru": dict(unified.TLRU_CONFIG)}

TIGHT_TLRU_CONFIG: dict[str, Any] = {"threshold": 4, "next_prompt_estimate": 1}
"""A T-LRU budget the cores' short call sequences exceed (a node is TEL-safe only where the tokens cached above it
reach ``L - 3``): under it the two cores' T-LRU bookkeeping (``_tlru_history_len``, its inheritance by a split)
decides evictions, which under the documented configuration it never does for prompts this short."""


def core_runs(policy: str) -> list[tuple[str, dict[str, Any] | None]]:
    """(label, eviction_policy_config) of each side-by-side run of ``policy``: ``tlru`` also under ``TIGHT_TLRU_CONFIG``."""
    runs: list[tuple[str, dict[str, Any] | None]] = [(policy, POLICY_CONFIG.get(policy))]
    if policy == "tlru":
        runs.append(("tlru threshold 4, estimate 1", TIGHT_TLRU_CONFIG))
    return runs


def preset_of(policy: str) -> str | None:
    for name in PRESET_CANDIDATES.get(policy, ()):
        if name in RULE_PRESETS:
            return name
    return None


def run_one(policy: str, core: unified.Core, preset: str, out: Path, progress: bool = False) -> tuple[CheckReport, float, float]:
    """The ci check of ``core_policy`` under ``preset`` in this process (``-j 1``): its report, wall and CPU seconds."""
    name = f"examples.sglang.unified:{core}_{policy}"
    factory = getattr(unified, f"{core}_{policy}")
    plan = replace(
        RunPlan.of_profile("ci"),
        progress=sys.stderr if progress else None,
        rules=RULE_PRESETS[preset],
        out_dir=out / f"{core}_{policy}" / preset,
        replay_target=f"--target {name} --rules {preset} --timeout 600",  # the first call imports SGLang (one to several minutes on a loaded machine)
    )
    started, cpu = time.perf_counter(), time.process_time()
    report = run_check(factory, target_name=name, plan=plan)
    return report, time.perf_counter() - started, time.process_time() - cpu


def verdict_of(report: CheckReport) -> str:
    if report.passed:
        return "PASSED"
    calls, rule, _ = shortest_stage(report)
    return f"differs: {counted(calls, 'call')}, {rule}" if calls else f"FAILED: {', '.join(failed_rules(report))}"


def unified_section(
    out: Path,
    progress: bool = True,
    policies: list[str] | None = None,
    cores: list[str] | None = None,
    done_so_far: Callable[[EngineSection, list[str]], None] | None = None,
) -> tuple[EngineSection, list[str]]:
    """The unified cache's section and the expectations that did not hold; ``done_so_far`` is given the section as it
    stands after each row (a long run's page then shows what finished)."""
    title = "SGLang `UnifiedRadixCache`"
    sglang = load_unified()
    if sglang is None:
        reason = unified_unavailable()
        return EngineSection(title, (), f"Not run: its import fails here ({reason}); `make engines` installs it into `.venv-bench`."), [f"UnifiedRadixCache cannot be imported: {reason}"]
    engine = f"SGLang {sglang.version} UnifiedRadixCache"
    chosen_policies = [policy for policy in policies or unified.SERVER_POLICIES + unified.LIBRARY_POLICIES if policy in PRESET_CANDIDATES]
    chosen_cores = [core for core in unified.CORES if not cores or core in cores]
    rust_reason = sglang.rust_unavailable()
    rows: list[MatrixRow] = []
    problems: list[str] = []
    details: list[str] = []
    def say(text: str) -> None:
        if progress:
            print(f"  unified {text}", flush=True, file=sys.stderr)

    for policy in chosen_policies:
        preset = preset_of(policy)
        for core in chosen_cores:
            label = f"{core} `{core}_{policy}`"
            if core == "rust" and rust_reason is not None:
                rows.append(MatrixRow(engine, label, preset or "-", f"not run: the Rust TreeCore does not import here ({rust_reason})", 0, 0.0))
                continue
            if preset is None:
                rows.append(MatrixRow(engine, label, "-", "not run: no rule set of the spec describes it", 0, 0.0))
                continue
            say(f"{core}_{policy} under {preset} ...")
            report, seconds, cpu = run_one(policy, core, preset, out, progress)
            verdict = verdict_of(report)
            rows.append(MatrixRow(engine, label, preset, verdict, calls_of(report), seconds, cpu))
            say(f"{core}_{policy}: {verdict} ({calls_of(report):,} calls, {seconds:.0f} s, {cpu:.0f} CPU s, {report.rules.name})")
            if not report.passed:
                problems.append(f"UnifiedRadixCache {core}_{policy} under {preset}: {verdict}")
                calls, rule, text = shortest_stage(report)
                if calls:
                    details += [f"`{core}_{policy}` under `{preset}`, {counted(calls, 'call')} ({rule}):", "", "```", text, "```", ""]
        if done_so_far is not None:
            done_so_far(EngineSection(title, tuple(rows), prose_of(sglang, chosen_policies, rust_reason, details)), problems)
    return EngineSection(title, tuple(rows), prose_of(sglang, chosen_policies, rust_reason, details)), problems


def prose_of(sglang: Any, chosen_policies: list[str], rust_reason: str | None, details: list[str]) -> str:
    prose = [
        f"SGLang {sglang.version}, torch {sglang.torch_version}, CPU; each check the `ci` profile, `-j 1`, in the process of",
        "`make engines` (its seconds are in the matrix, the machine's load beside each part's time at the end of the page).",
        "",
        "The class SGLang's server builds by default (`mem_cache/registry.py`, `default_radix_cache_factory` returns",
        "`create_unified_radix_cache`), built directly: `UnifiedRadixCache(CacheInitParams(tree_components=(FULL,),",
        "tree_core_backend=CORE, eviction_policy=POLICY, enable_kv_cache_events=True, ...))` with an allocator that",
        "records `free_segment`. The adapter is `examples/sglang/unified.py` (the namespace as `cache_salt`, its KV",
        f"events taken); the cores side by side are `examples/sglang/cores.py` ({CORE_SEQUENCES} seeded sequences of {CORE_CALLS} calls,",
        "page sizes 1-3, answers, counters, nodes and events compared after every call).",
        "",
        "Locks are receipts in the unified cache (`unified_radix_cache.py:1094-1106`): the adapter keeps each one and",
        "hands it back once; an unlock with no receipt held is R6's NotLocked, the caller's check in SGLang, and never",
        "reaches a core. A panic of the Rust core (a receipt released twice, `defects.py`) would surface as",
        "`RustPanic`, and the adapter refuses every later call, so a check reports the first panic instead of a",
        "cascade of failures (or, were it pyo3's `PanicException`, a crash of the kit).",
        "",
        "A block the tree holds, handed back at its own position after a differing id (R5), is a case SGLang's scheduler",
        "never makes (`InsertParams.prev_prefix_len` is one length, a leading run, `unified_radix_cache.py:1184`); the",
        "adapter passes every id, and the cache keeps its own. The call machine draws it (`insert_over_cached` with",
        "`MIXED_PASSED_BACK`, `prefixspec/drive/draws.py:101-106`) and a `ci` check must reach it (the coverage event",
        "\"insert: a cached id at its own position after a differing one\", `prefixspec/drive/coverage.py:75`): every",
        "PASSED row reached it.",
        "",
    ]
    for policy in chosen_policies:  # a paragraph each: the page keeps each once when it merges narrowed parts
        if policy in POLICY_NOTES:
            prose += [f"- {POLICY_NOTES[policy]}", ""]
    prose += [
        "Both TreeCores and all eight policies build and run on CPU here (torch 2.13.0 is inside the Rust core's",
        "supported range, `tree_core_registry.py:58-67`; the allocator's device is `cpu`, line 69). Not checked, because",
        "the kit's interface has no counterpart, not because of the CPU: the SWA and Mamba components (they need a",
        "model's pools), HiCache's host tier, and session-aware caching (`enable_session_radix_cache`, which the Rust",
        "core refuses, `rust_tree_core/adapter.py:386-389`, and the registry sends to the Python core). The Rust",
        "binding reports no recency, hits or creation time of a node, so its snapshot is `unordered`",
        "(`prefixspec/compare/observable.py`): its nodes are compared without an order and its order is checked by",
        "what each `evict` frees, and by the Python core beside it.",
    ]
    if rust_reason is not None:
        prose += ["", f"The Rust TreeCore was not run: its import fails here ({rust_reason})."]
    if details:
        prose += ["", "### Differences", "", *details]
    return "\n".join(prose)


REPORTS = {
    "RadixCache tlru evict": (
        "**`RadixCache` under `tlru` raises in `evict`.** `TLRUStrategy.get_priority` (`mem_cache/evict_policy.py:68-81`) "
        "reads `node._tlru_history_len` and `node._tlru_cached_prefix_len`, which only `UnifiedTreeNode` sets "
        "(`unified_cache/unified_tree_core.py:134-135`); the plain `TreeNode` never has them, so the first eviction "
        "under `tlru` raises `AttributeError`. Two calls replay it:"
    ),
    "double release, rust core": (
        "**The Rust TreeCore panics on a lock receipt released twice, and stays poisoned.** `UnifiedRadixCache.unlock` "
        "of one `TreeLock` twice (`unified_radix_cache.py:1103-1106`): the Rust core panics (`src/components/full.rs:402`, "
        "\"FULL segment release hit lock_ref=0\"), the binding raises `RuntimeError` and poisons its mutex, and every "
        "later call on the cache raises (\"Rust TreeCore mutex poisoned\"): the scheduler's every later request fails. "
        "The Python core raises `AssertionError` (`unified_cache/components/full.py:366`) and serves on. A caller's "
        "misuse, but a refusal that leaves the tree intact, as the Python core gives, is what a caller can recover from. "
        "Replayed in a process of its own:"
    ),
    "double release, python core": "The same calls on the Python core:",
}


def cores_section(progress: bool = True, policies: list[str] | None = None) -> tuple[EngineSection, list[str]]:
    """The Rust and the Python core driven side by side under each policy (``examples/sglang/cores.py``)."""
    title = "SGLang `UnifiedRadixCache`: the Rust and the Python TreeCore side by side"
    sglang = load_unified()
    reason = unified_unavailable() if sglang is None else sglang.rust_unavailable()
    if sglang is None or reason is not None:
        return EngineSection(title, (), f"Not run: {reason}."), [f"the cores cannot be compared: {reason}"]
    engine = f"SGLang {sglang.version} UnifiedRadixCache"
    rows: list[MatrixRow] = []
    problems: list[str] = []
    details: list[str] = []
    chosen = [policy for policy in policies or unified.SERVER_POLICIES + unified.LIBRARY_POLICIES if policy in PRESET_CANDIDATES]
    for policy, (label, config) in [(policy, run) for policy in chosen for run in core_runs(policy)]:
        began, cpu = time.perf_counter(), time.process_time()
        compared = compare_cores(policy, sequences=CORE_SEQUENCES, length=CORE_CALLS, policy_config=config)
        seconds = time.perf_counter() - began
        verdict = "agree" if compared.difference is None else f"differ: {compared.difference}"
        rows.append(MatrixRow(engine, f"rust vs python `{label}`", "cores side by side", verdict, compared.calls, seconds, time.process_time() - cpu))
        if progress:
            print(f"  cores under {label}: {verdict} ({compared.calls:,} calls, {seconds:.0f} s)", file=sys.stderr, flush=True)
        if compared.difference is not None:
            problems.append(f"UnifiedRadixCache cores under {label}: {compared.difference}")
            details += [f"Under `{label}`: {compared.difference}:", "", "```", *compared.trace, "```", ""]
    prose = [
        f"`examples/sglang/cores.py`: {CORE_SEQUENCES} seeded call sequences of {CORE_CALLS} calls per policy (page sizes 1-3,",
        "a 3-token alphabet, ids from a pool of 12, namespaces), every call on a `UnifiedCache` of each core, compared call",
        "by call: the answer or the error's class (node handles by the call that first returned them), the counters, the",
        "nodes (as sets: the Rust core reports no order; its order shows in what `evict` frees) and the events taken.",
        "Differential testing of one engine's two implementations: it does not say either agrees with the spec.",
        f"`tlru` runs twice: under the documented configuration `{POLICY_CONFIG['tlru']}`, and under",
        f"`{TIGHT_TLRU_CONFIG}`, where prompts of a few tokens already exceed the budget, so that the cores'",
        "T-LRU bookkeeping (`_tlru_history_len`, `_tlru_cached_prefix_len`, `unified_tree_core.py:191-210`, `:1477-1484`)",
        "decides which leaf goes first.",
    ]
    if details:
        prose += ["", *details]
    return EngineSection(title, tuple(rows), "\n".join(prose)), problems


def defects_section() -> tuple[EngineSection, list[str]]:
    """The defects found, as short upstream reports with their replays' output."""
    return EngineSection("SGLang 0.5.23: upstream reports", (), "\n".join(upstream_reports())), []


def upstream_reports() -> list[str]:
    """Short upstream reports of the defects ``examples/sglang/defects.py`` replays, each with its replay's output."""
    from examples.sglang.defects import outcomes

    lines = []
    for outcome in outcomes():
        lines += [REPORTS.get(outcome.name, outcome.name), "", "```", f"$ {outcome.command}", outcome.output, f"(exit {outcome.returncode})", "```", ""]
    return lines
