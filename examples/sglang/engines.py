"""``make engines``: SGLang's real RadixCache through the kit, under every policy, and ``docs/engines.md``.

For each eviction policy of ``examples.sglang.adapter.POLICIES``:

1. ``prefixspec check`` under ``strict``: SGLang must differ (it counts a
   split's lower part as used, R7), with a counterexample of at most 3 calls;
2. ``prefixspec check --rules sglang[-POLICY]``: it must pass the whole ci check;
3. ``prefixspec identify``: it must name exactly that preset.

Run with the venv that holds SGLang (``make engines`` builds ``.venv-bench``).
Exit 0 when every expectation holds; the report is printed and written to
``docs/engines.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from spec.api import RULE_PRESETS, CacheFactory
from examples.sglang import adapter
from examples.sglang.loading import load_sglang
from prefixspec.formats.trace import read_trace
from prefixspec.running.identify import identify
from prefixspec.running.report import CheckReport
from prefixspec.running.stages import RunPlan, run_check

ROOT = Path(__file__).resolve().parents[2]

SOURCE_LINES = (
    "`sglang/srt/mem_cache/radix_cache.py` 0.5.23: `_match_prefix_helper` takes one `access_time = time.monotonic()` "
    "(line 652) and stamps it on every child it walks into (line 660) before `_split_node` (lines 662-666); "
    "`_insert_helper` does the same (lines 716, 728, then the split at 734). `_split_node` (lines 677-700) gives the "
    "new upper node a fresh stamp and leaves the lower node with the call's stamp: the lower part counts as used by "
    "the call, where R7 (strict) keeps its old last use."
)


def preset_of(policy: str) -> str:
    return "sglang" if policy == "lru" else f"sglang-{policy}"


@dataclass
class PolicyRun:
    policy: str
    strict: CheckReport | None = None
    preset: CheckReport | None = None
    identified: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


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


def run_policy(policy: str, out: Path, progress: bool) -> PolicyRun:
    factory: CacheFactory = getattr(adapter, policy)
    name = f"examples.sglang.adapter:{policy}"
    run = PolicyRun(policy)
    base = replace(RunPlan.of_profile("ci"), replay_target=f"--target {name}")

    started = time.perf_counter()
    run.strict = run_check(factory, target_name=name, plan=replace(base, out_dir=out / policy / "strict"))
    run.seconds["strict"] = time.perf_counter() - started
    calls, rule, _ = shortest_stage(run.strict)
    if run.strict.passed:
        run.problems.append("passed under strict, where SGLang is known to differ (R7)")
    elif not (1 <= calls <= 3 and rule.startswith("R7")):
        run.problems.append(f"under strict the shortest counterexample has {calls} calls and names {rule!r}, not <= 3 calls and R7")

    preset = preset_of(policy)
    started = time.perf_counter()
    run.preset = run_check(
        factory,
        target_name=name,
        plan=replace(base, rules=RULE_PRESETS[preset], out_dir=out / policy / preset, replay_target=f"--target {name} --rules {preset}"),
    )
    run.seconds[preset] = time.perf_counter() - started
    if not run.preset.passed:
        run.problems.append(f"failed under --rules {preset}")

    started = time.perf_counter()
    verdicts = identify(factory, target_name=name, base=replace(base, out_dir=out / policy / "identify"))
    run.seconds["identify"] = time.perf_counter() - started
    run.identified = [verdict.rules.name for verdict in verdicts if verdict.conforms]
    if run.identified != [preset]:
        run.problems.append(f"identify named {run.identified}, not [{preset}]")
    if progress:
        print(f"  {policy}: {'ok' if not run.problems else '; '.join(run.problems)}", file=sys.stderr, flush=True)
    return run


def markdown(runs: list[PolicyRun], version: str, torch_version: str) -> str:
    lines = [
        "# Real engines through the kit",
        "",
        "Written by `make engines` (`examples/sglang/engines.py`); do not edit by hand.",
        "",
        f"## SGLang {version} `RadixCache` (torch {torch_version}, CPU)",
        "",
        "The adapter is `examples/sglang/adapter.py` (it translates pages, tokens and locks; it fixes no behaviour).",
        "Each policy was checked with the `ci` profile: the golden trace, the call machine and the engine machine.",
        "",
        "| policy | under `strict` | under its preset | `identify` names | calls checked (preset) | seconds (strict / preset / identify) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for run in runs:
        assert run.strict is not None and run.preset is not None
        calls, rule, _ = shortest_stage(run.strict)
        strict_cell = "PASSED" if run.strict.passed else f"differs: {calls} calls, {rule}"
        preset = preset_of(run.policy)
        preset_cell = f"`{preset}`: {'PASSED' if run.preset.passed else 'FAILED'}"
        seconds = f"{run.seconds['strict']:.1f} / {run.seconds[preset]:.1f} / {run.seconds['identify']:.1f}"
        lines.append(
            f"| {run.policy} | {strict_cell} | {preset_cell} | {', '.join(run.identified) or 'none'} | {calls_of(run.preset):,} | {seconds} |"
        )
    lines += ["", "Each engine machine run: 12 examples of at least 3,000 engine steps.", ""]
    lines += ["### The difference under `strict`", "", SOURCE_LINES, ""]
    for run in runs:
        assert run.strict is not None
        calls, rule, text = shortest_stage(run.strict)
        if calls:
            lines += [f"`{run.policy}`, {calls} calls ({rule}):", "", "```", text, "```", ""]
    lines += [
        "### Left out",
        "",
        "- `priority` needs an argument of insert (the request's priority), which the interface does not have.",
        "- `slru` and `tlru` take configuration (`protected_threshold`; TEL estimates); `tlru` also raises",
        "  `AttributeError` on the plain `RadixCache` (its nodes lack the `_tlru_*` fields), so the server refuses it there.",
        "- The server's default cache in 0.5.23 is `UnifiedRadixCache` (a Rust tree core by default), not this class.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.sglang.engines", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--policy", choices=adapter.POLICIES, action="append", help="only these policies (default all)")
    parser.add_argument("--out", default=str(ROOT / "counterexamples" / "engines"), help="where counterexamples go")
    parser.add_argument("--docs", default=str(ROOT / "docs" / "engines.md"), help="where the report goes")
    arguments = parser.parse_args(argv)
    sglang = load_sglang()
    if sglang is None:
        print("make engines: SGLang cannot be imported here (make engines installs it into .venv-bench)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    runs = [run_policy(policy, Path(arguments.out), progress=True) for policy in arguments.policy or adapter.POLICIES]
    report = markdown(runs, sglang.version, sglang.torch_version)
    print(report)
    Path(arguments.docs).write_text(report, encoding="utf-8")
    problems = [f"{run.policy}: {problem}" for run in runs for problem in run.problems]
    print(f"make engines: {len(runs)} policies in {time.perf_counter() - started:.0f} s; " + ("every expectation holds" if not problems else "; ".join(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
