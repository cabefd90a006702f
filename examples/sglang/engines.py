"""SGLang's real ``RadixCache`` through the kit, under every policy: its section of ``docs/engines.md``.

For each eviction policy of ``examples.sglang.adapter.POLICIES``, with two
factories: ``POLICY`` (the namespace as SGLang's ``extra_key``) and
``salted_POLICY`` (the namespace as its ``cache_salt``):

1. ``prefixspec check`` of ``salted_POLICY`` under ``strict``: SGLang must differ
   (it counts a split's lower part as used, R7), with a counterexample of at most
   3 calls (the salted factory, whose events agree, so that R7 is the difference);
2. ``prefixspec check POLICY --rules sglang[-POLICY]``: it must differ on R13 and
   on no other rule (SGLang's KV events drop the extra_key, ``EXTRA_KEY_LINES``),
   with a counterexample written (``--extra-key-lru-only`` checks ``lru`` alone);
3. ``prefixspec check salted_POLICY --rules sglang[-POLICY]``: it must pass the
   whole ci check, namespaces and events checked (every event of ``SHOWN_EVENTS``
   reached);
4. ``prefixspec identify salted_POLICY``: it must name exactly that preset.

``radix_section`` returns the rows and prose ``examples/engines.py`` renders into the page's one
matrix (``make engines`` runs it in ``.venv-bench``); ``python -m examples.sglang.engines`` runs
this section alone and writes the page with it.  Each unmet expectation is a problem of the run.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from collections.abc import Callable
from typing import TypeVar

from spec.api import RULE_PRESETS, CacheFactory
from examples.matrix import EngineSection, MatrixRow, render_page
from examples.sglang import adapter
from bench.sglang_loading import load_sglang
from prefixspec.formats.trace import read_trace
from prefixspec.running.identify import identify
from prefixspec.running.report import CheckReport
from prefixspec.running.stages import RunPlan, run_check
from prefixspec.vocabulary import counted

ROOT = Path(__file__).resolve().parents[2]

SOURCE_LINES = (
    "`sglang/srt/mem_cache/radix_cache.py` 0.5.23: `_match_prefix_helper` takes one `access_time = time.monotonic()` "
    "(line 652) and stamps it on every child it walks into (line 660) before `_split_node` (lines 662-666); "
    "`_insert_helper` does the same (lines 716, 728, then the split at 734). `_split_node` (lines 677-700) gives the "
    "new upper node a fresh stamp and leaves the lower node with the call's stamp: the lower part counts as used by "
    "the call, where R7 (strict) keeps its old last use."
)

EXTRA_KEY_LINES = (
    "`sglang/srt/` 0.5.23: the extra_key namespaces the tree (`RadixKey.extra_key`, `mem_cache/radix_cache.py:67`; "
    "`child_key` keys children by it, lines 246-247), so R12 holds, but SGLang's KV events drop it: `BlockStored` "
    "has no such field (`disaggregation/kv_events.py:279-295`; it carries `cache_salt`, line 289, and `lora_name`, "
    "line 295), and the event hashes omit it (`mem_cache/utils.py:178-214`, `compute_node_event_hash_values`; "
    "`mem_cache/events.py:199-208`, `_namespace_seed` passes the extra_key only when it is a registered LoRA name) "
    "unless `dynamo_kv_event_format` is set (lines 209-211). So an insert in a namespace publishes a `BlockStored` "
    "in the default namespace, and R13 differs at the first `take_events` after it."
)

SALT_LINES = (
    "`sglang/srt/` 0.5.23: the cache_salt namespaces the tree (`mem_cache/radix_cache.py:246`) and reaches the "
    "events (`BlockStored(cache_salt=node.key.cache_salt)`, `mem_cache/events.py:264`; its hashes seeded by the "
    "salt, `mem_cache/utils.py:199-202`). `RadixKey` keeps `cache_salt or None` (`radix_cache.py:77`), so an "
    "empty salt would be the default namespace; the adapter's encoding (`namespace_key`) never produces `\"\"`. "
    "SGLang opens its stream with `AllBlocksCleared` (`radix_cache.py:362`), publishes a `BlockStored` per page "
    "(`mem_cache/events.py:213-271`, from `radix_cache.py:758`) and a `BlockRemoved` per evicted node "
    "(`radix_cache.py:577`): R13 counts these cuts as the same stream."
)

Result = TypeVar("Result")

SHOWN_EVENTS = ("a namespace other than the default", "one prompt in two namespaces", "events taken")
"""The coverage events of R12 and R13 that the salted check under its preset must reach, shown per stage."""


PRESET_OF = {"lru": "sglang", "priority": "sglang"}
"""The rule set a policy is checked under where it is not ``sglang-POLICY``: ``priority`` with every priority 0
orders as ``lru`` (``adapter.priority``)."""


def preset_of(policy: str) -> str:
    return PRESET_OF.get(policy, f"sglang-{policy}")


@dataclass
class PolicyRun:
    policy: str
    strict: CheckReport | None = None
    """``salted_POLICY`` under ``strict``."""
    extra_key: CheckReport | None = None
    """``POLICY`` (the extra_key factory) under its preset, when it was run."""
    preset: CheckReport | None = None
    """``salted_POLICY`` under its preset."""
    identified: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds of each check, by the key of ``seconds``."""
    problems: list[str] = field(default_factory=list)

    def timed(self, key: str, check: Callable[[], Result]) -> Result:
        """``check()``, its wall and CPU seconds kept under ``key``."""
        started, cpu = time.perf_counter(), time.process_time()
        result = check()
        self.seconds[key], self.cpu[key] = time.perf_counter() - started, time.process_time() - cpu
        return result


def calls_of(report: CheckReport) -> int:
    return sum(stage.calls for stage in report.stages)


def shortest_stage(report: CheckReport) -> tuple[int, str, str]:
    """(calls, rule, trace text) of the shortest counterexample of a failed report."""
    failed = [stage for stage in report.stages if stage.counterexample]
    if not failed:
        return (0, "", "")
    stage = min(failed, key=lambda candidate: candidate.counterexample_calls)
    text = "\n".join(step.text() for step in read_trace(stage.counterexample).steps)
    return (stage.counterexample_calls, stage.rule, text)


def shown_counts(report: CheckReport) -> dict[str, list[tuple[str, int]]]:
    """For each of ``SHOWN_EVENTS``, the stages of ``report`` that reached it and how often."""
    return {event: [(stage.name, stage.events[event]) for stage in report.stages if stage.events.get(event)] for event in SHOWN_EVENTS}


def failed_rules(report: CheckReport) -> list[str]:
    return [stage.rule or f"({stage.name}: no rule named)" for stage in report.stages if not stage.passed]


def run_policy(policy: str, out: Path, progress: bool, extra_key: bool) -> PolicyRun:
    salted_name = f"salted_{policy}"
    salted: CacheFactory = getattr(adapter, salted_name)
    name = f"examples.sglang.adapter:{salted_name}"
    run = PolicyRun(policy)
    base = replace(RunPlan.of_profile("ci"), replay_target=f"--target {name}")
    preset = preset_of(policy)

    def say(text: str) -> None:
        if progress:
            print(f"  {policy}: {text}", file=sys.stderr, flush=True)

    say(f"{salted_name} under strict ...")
    run.strict = run.timed("strict", lambda: run_check(salted, target_name=name, plan=replace(base, out_dir=out / salted_name / "strict")))
    calls, rule, _ = shortest_stage(run.strict)
    if run.strict.passed:
        run.problems.append("passed under strict, where SGLang is known to differ (R7)")
    elif not (1 <= calls <= 3 and rule.startswith("R7")):
        run.problems.append(f"under strict the shortest counterexample has {counted(calls, 'call')} and names {rule!r}, not <= 3 calls and R7")

    if extra_key:
        say(f"{policy} (extra_key) under {preset} ...")
        plain: CacheFactory = getattr(adapter, policy)
        plain_name = f"examples.sglang.adapter:{policy}"
        run.extra_key = run.timed("extra_key", lambda: run_check(
            plain,
            target_name=plain_name,
            plan=replace(base, rules=RULE_PRESETS[preset], out_dir=out / policy / preset, replay_target=f"--target {plain_name} --rules {preset}"),
        ))
        rules = failed_rules(run.extra_key)
        if run.extra_key.passed:
            run.problems.append(f"the extra_key factory passed under --rules {preset}, where its events lack the namespace (R13)")
        elif not all(rule.startswith("R13") for rule in rules):
            run.problems.append(f"the extra_key factory differs under --rules {preset} on {rules}, not on R13 alone")
        elif not shortest_stage(run.extra_key)[0]:
            run.problems.append(f"the extra_key factory differs under --rules {preset} but no counterexample was written")

    say(f"{salted_name} under {preset} ...")
    run.preset = run.timed(preset, lambda: run_check(
        salted,
        target_name=name,
        plan=replace(base, rules=RULE_PRESETS[preset], out_dir=out / salted_name / preset, replay_target=f"--target {name} --rules {preset}"),
    ))
    if not run.preset.passed:
        run.problems.append(f"{salted_name} failed under --rules {preset}: {failed_rules(run.preset)}")
    for event, reached in shown_counts(run.preset).items():
        if not reached:
            run.problems.append(f"{salted_name} under --rules {preset} never reached {event!r}")

    say(f"identify {salted_name} ...")
    verdicts = run.timed("identify", lambda: identify(salted, target_name=name, base=replace(base, out_dir=out / salted_name / "identify")))
    run.identified = [verdict.rules.name for verdict in verdicts if verdict.conforms]
    if run.identified != [preset]:
        run.problems.append(f"identify {salted_name} named {run.identified}, not [{preset}]")
    say("ok" if not run.problems else "; ".join(run.problems))
    return run


def stage_counts(counts: list[tuple[str, int]]) -> str:
    """``call machine 22,783, engine machine 665``: an event's count in each stage that reached it, or ``never``."""
    return ", ".join(f"{stage} {count:,}" for stage, count in counts) or "never"


def rows_of(runs: list[PolicyRun], version: str) -> tuple[MatrixRow, ...]:
    """The matrix rows of the runs: per policy, the salted factory under strict and its preset, the extra_key factory, identify."""
    engine = f"SGLang {version} RadixCache"
    rows: list[MatrixRow] = []
    for run in runs:
        assert run.strict is not None and run.preset is not None
        preset = preset_of(run.policy)
        calls, rule, _ = shortest_stage(run.strict)
        rows.append(MatrixRow(engine, f"salted_{run.policy}", "strict", "PASSED" if run.strict.passed else f"differs: {counted(calls, 'call')}, {rule}", calls_of(run.strict), run.seconds["strict"], run.cpu["strict"]))
        rows.append(MatrixRow(engine, f"salted_{run.policy}", preset, "PASSED" if run.preset.passed else f"FAILED: {', '.join(failed_rules(run.preset))}", calls_of(run.preset), run.seconds[preset], run.cpu[preset]))
        if run.extra_key is not None:
            extra_calls, extra_rule, _ = shortest_stage(run.extra_key)
            verdict = "PASSED" if run.extra_key.passed else f"differs: {counted(extra_calls, 'call')}, {extra_rule}"
            rows.append(MatrixRow(engine, run.policy, preset, verdict, calls_of(run.extra_key), run.seconds["extra_key"], run.cpu["extra_key"]))
        rows.append(MatrixRow(engine, f"salted_{run.policy}", "identify", f"names {', '.join(run.identified) or 'none'}", 0, run.seconds["identify"], run.cpu["identify"]))
    return tuple(rows)


def markdown(runs: list[PolicyRun], version: str, torch_version: str) -> str:
    lines = [
        f"SGLang {version}, torch {torch_version}, CPU; each check the `ci` profile, `-j 1`, in the process of `make engines`.",
        "",
        "The adapter is `examples/sglang/adapter.py` (it translates pages, tokens, locks, namespaces and events; it fixes",
        "no behaviour). Each policy has two factories: `POLICY` puts a namespace (R12) in SGLang's `RadixKey.extra_key`,",
        "`salted_POLICY` in its `cache_salt`; both take SGLang's KV events (R13). Each check ran the `ci` profile: the",
        "golden trace, the call machine (which draws namespaces and takes events), the engine machine, and, when those",
        "pass, the extremes and scale stages.",
        "",
    ]
    lines += [
        "Each engine machine run: 12 examples of at least 3,000 engine steps.",
        "The strict check runs the salted factory, whose events agree, so that R7 is the one difference it shows;",
        "the lockstep's takes of events after each insert and evict are kept in the counterexamples.",
        "",
    ]
    lines += ["### The difference under `strict`", "", SOURCE_LINES, ""]
    for run in runs:
        assert run.strict is not None
        calls, rule, text = shortest_stage(run.strict)
        if calls:
            lines += [f"`salted_{run.policy}`, {counted(calls, 'call')} ({rule}):", "", "```", text, "```", ""]
    lines += ["### The extra_key factory: its events lack the namespace (R13)", "", EXTRA_KEY_LINES, ""]
    for run in runs:
        if run.extra_key is None:
            continue
        calls, rule, text = shortest_stage(run.extra_key)
        if not calls:
            lines += [f"`{run.policy}` under `{preset_of(run.policy)}`: {'PASSED' if run.extra_key.passed else 'FAILED, no counterexample'}.", ""]
            continue
        failed = [stage for stage in run.extra_key.stages if stage.counterexample]
        stage = min(failed, key=lambda candidate: candidate.counterexample_calls)
        other = [f"{each.name} {'ok' if each.passed else 'FAILED (' + each.rule + ')'}" for each in run.extra_key.stages]
        lines += [
            f"`{run.policy}` under `{preset_of(run.policy)}`: differs in the {stage.name}, {counted(calls, 'call')} ({rule});"
            f" the trace: `{Path(stage.counterexample).relative_to(ROOT) if Path(stage.counterexample).is_relative_to(ROOT) else stage.counterexample}`"
            f" (stages: {', '.join(other)}). The trace, with the lockstep's take of events after the insert:",
            "",
            "```",
            text,
            "```",
            "",
        ]
    lines += [
        "### The cache_salt factories: namespaces and events agree",
        "",
        SALT_LINES,
        "",
        "Where each `salted_POLICY` check under its preset reached the coverage events of R12 and R13 (stage and count):",
        "",
        "| policy | " + " | ".join(f"{event!r}".replace("'", '"') for event in SHOWN_EVENTS) + " |",
        "| --- |" + " --- |" * len(SHOWN_EVENTS),
    ]
    for run in runs:
        assert run.preset is not None
        counts = shown_counts(run.preset)
        lines.append(f"| {run.policy} | " + " | ".join(stage_counts(counts[event]) for event in SHOWN_EVENTS) + " |")
    lines += ["", LEFT_OUT, ""]
    return "\n".join(lines)


LEFT_OUT = "\n".join(
    [
        "### Policies and what is left out",
        "",
        "- `priority` is checked with every insert at SGLang's default priority 0 (`radix_cache.py:713-715`): the",
        "  interface's insert carries no priority, and the key `(priority, last_access_time)` (`evict_policy.py:41-46`)",
        "  then orders as `lru`'s, so it runs under `sglang`. Other priorities are not drawn.",
        "- `slru` is checked at its default `protected_threshold` 2 (`evict_policy.py:84-100`), `sglang-slru`; another",
        "  threshold is the rule set `evict=slru:N`.",
        "- `tlru` is not checked here: the plain `RadixCache` raises `AttributeError` in its first `evict` (its nodes lack",
        "  the `_tlru_*` fields), the upstream report below.",
        "- `fifo`, `mru` and `filo` are library only (not among the server's choices, `arg_groups/choices.py:190`).",
        "- The server's default cache in 0.5.23 is `UnifiedRadixCache` (a Rust tree core by default): its own section below.",
        "- `dynamo_kv_event_format` (the adapter's `dynamo_format=True`), which seeds the event hashes with the extra_key",
        "  too, is not checked here; its `BlockStored` still has no extra_key field.",
    ]
)
"""What the section says of every policy, whichever a run covered (narrowed parts share it, and the page keeps it once)."""


def radix_section(out: Path, progress: bool = True, policies: list[str] | None = None, extra_key_lru_only: bool = False) -> tuple[EngineSection, list[str]]:
    """The RadixCache's section of ``docs/engines.md`` and the expectations that did not hold."""
    sglang = load_sglang()
    title = "SGLang `RadixCache`"
    if sglang is None:
        return EngineSection(title, (), "Not run: SGLang cannot be imported here (`make engines` installs it into `.venv-bench`)."), ["SGLang cannot be imported"]
    chosen = policies or [*adapter.POLICIES, "tlru"]
    runs = [
        run_policy(policy, out, progress=progress, extra_key=not extra_key_lru_only or policy == "lru")
        for policy in chosen
        if policy in adapter.POLICIES
    ]
    prose = markdown(runs, sglang.version, sglang.torch_version) if runs else LEFT_OUT
    problems = [f"RadixCache {run.policy}: {problem}" for run in runs for problem in run.problems]
    rows = rows_of(runs, sglang.version)
    if "tlru" in chosen:  # no check can run: its first evict raises (the upstream report replays it)
        rows += (MatrixRow(f"SGLang {sglang.version} RadixCache", "tlru", "-", "not checked: its `evict` raises AttributeError (upstream report)", 0, 0.0),)
    return EngineSection(f"SGLang {sglang.version} `RadixCache`", rows, prose), problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.sglang.engines", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--policy", choices=adapter.POLICIES, action="append", help="only these policies (default all)")
    parser.add_argument("--out", default=str(ROOT / "counterexamples" / "engines"), help="where counterexamples go")
    parser.add_argument("--docs", default=str(ROOT / "docs" / "engines.md"), help="where the report goes")
    parser.add_argument("--extra-key-lru-only", action="store_true", help="check the extra_key factory under its preset for lru alone (default every policy)")
    arguments = parser.parse_args(argv)
    if load_sglang() is None:
        print("SGLang cannot be imported here (make engines installs it into .venv-bench)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    section, problems = radix_section(Path(arguments.out), True, arguments.policy, arguments.extra_key_lru_only)
    page = render_page([section], time.perf_counter() - started)
    print(page)
    Path(arguments.docs).write_text(page, encoding="utf-8")
    print(f"SGLang RadixCache: {len(section.rows)} rows in {time.perf_counter() - started:.0f} s; " + ("every expectation holds" if not problems else "; ".join(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
