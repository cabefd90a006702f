"""The rule variants: named presets, each followed by the spec and by impl, told apart by identify, named in reports."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest
from hypothesis import settings

from impl import RadixCache, variants
from spec.api import RULE_PRESETS, Rules, parse_rules
from spec.model import SpecCache
from prefixspec.commands.main import main
from prefixspec.formats.trace import parse_trace, read_trace
from prefixspec.running.identify import identify
from prefixspec.running.stages import RunPlan, run_check, run_stage

PRESETS = sorted(RULE_PRESETS)

# SGLang 0.5.23's own RadixCache at page size 1, each strategy run on the calls
# below and evicted whole (leaves in the order freed).  Measured on the real
# cache; the spec and impl must free the same.
SGLANG_EVICTION_ORDER = {
    "sglang": [[5, 6], [2, 3], [1], [7]],
    "sglang-lfu": [[5, 6], [7], [2, 3], [1]],
    "sglang-fifo": [[2, 3], [5, 6], [1], [7]],
    "sglang-mru": [[7], [2, 3], [1], [5, 6]],
    "sglang-filo": [[7], [5, 6], [2, 3], [1]],
}
BLOCK_OF_TOKEN = {1: 10, 2: 11, 3: 12, 5: 20, 6: 21, 7: 30}


def test_presets_and_named_options_parse() -> None:
    assert parse_rules("strict") == Rules()
    assert parse_rules("sglang") == Rules("path+split-tail", "lru")
    assert parse_rules("use=path+split-tail,evict=lfu") == RULE_PRESETS["sglang-lfu"]
    assert parse_rules("evict=mru") == Rules("path", "mru")
    assert Rules("path", "mru").name == "use=path,evict=mru"
    for bad in ("sglang-priority", "use=everything", "evict=random", "use=path,use=path", ""):
        with pytest.raises(ValueError):
            parse_rules(bad)


@pytest.mark.parametrize("preset", sorted(SGLANG_EVICTION_ORDER))
@pytest.mark.parametrize("cache", [SpecCache, RadixCache], ids=["spec", "impl"])
def test_each_preset_evicts_as_sglang_does(preset: str, cache: type[SpecCache] | type[RadixCache]) -> None:
    made = cache(1, RULE_PRESETS[preset])
    made.insert([1, 2, 3], [10, 11, 12])
    made.insert([1, 2, 3], [10, 11, 12])  # an insert of cached blocks: one more hit of the path
    made.insert([5, 6], [20, 21])
    made.match_prefix([1, 9])  # splits [1 2 3] into [1] and [2 3]
    made.insert([7], [30])
    freed = made.evict(100)
    assert freed == [BLOCK_OF_TOKEN[token] for leaf in SGLANG_EVICTION_ORDER[preset] for token in leaf]


def test_strict_keeps_a_split_tails_last_use() -> None:
    """R7 as first written: the lower part of a split keeps its last use, so the older [5 6] goes after it."""
    spec = SpecCache(1)
    spec.insert([1, 2, 3], [10, 11, 12])
    spec.insert([5, 6], [20, 21])
    spec.match_prefix([1, 9])
    assert spec.evict(100) == [11, 12, 20, 21, 10]


SHORT_EXAMPLES = {"call machine": 2, "engine machine": 1}
"""make test's share of the ci profile's examples per preset (Hypothesis's examples: the call machine runs twenty
call examples for each, ``drive.machines.call_machine_examples``; so 40 of its 240, and one engine example):
agreement is the promise, and strict runs the whole profile in test_machines; make deep runs the whole profile per preset."""


@pytest.mark.parametrize("depth", ["short", pytest.param("full", marks=pytest.mark.deep)])
@pytest.mark.parametrize("stage", ["call machine", "engine machine"])
@pytest.mark.parametrize("preset", [name for name in PRESETS if name != "strict"])
def test_every_preset_passes_the_lockstep_machines_on_impl(preset: str, stage: str, depth: str) -> None:
    """The ci profile's call machine and a third of its engine examples (make deep), or make test's share of them."""
    rules = RULE_PRESETS[preset]
    plan = replace(RunPlan.of_profile("ci"), rules=rules)
    if depth == "short":  # which events a few examples reach moves with the draws: agreement is the promise
        plan = replace(plan, base=settings(plan.base, max_examples=SHORT_EXAMPLES[stage]), require_coverage=False)
    elif stage == "engine machine":  # a third of the examples: which events they reach moves with the draws, agreement is the promise
        plan = replace(plan, base=settings(plan.base, max_examples=4), require_coverage=False)
    result = run_stage(stage, functools.partial(RadixCache, rules=rules), plan)
    assert result.passed, result.failure


@pytest.mark.parametrize("depth", ["short", pytest.param("full", marks=pytest.mark.deep)])
@pytest.mark.parametrize("preset", PRESETS)
def test_identify_names_the_preset_of_each_impl_variant(preset: str, depth: str, tmp_path: Path) -> None:
    """Each variant differs from every other preset with a short counterexample; in full (make deep), identify also
    runs its own preset's short check, which test_every_preset_passes_the_lockstep_machines_on_impl holds in make test."""
    factory = getattr(variants, preset.replace("-", "_"))
    others = PRESETS if depth == "full" else [name for name in PRESETS if name != preset]
    verdicts = identify(factory, target_name=preset, base=replace(RunPlan.of_profile("ci"), out_dir=tmp_path), presets=others)
    assert [verdict.rules.name for verdict in verdicts] == others
    assert [verdict.rules.name for verdict in verdicts if verdict.conforms] == ([preset] if depth == "full" else [])
    for verdict in verdicts:
        if not verdict.conforms:
            shortest = verdict.shortest
            # slru and lfu part only on two protected nodes whose hits and last uses disagree: 3 inserts and 2, and a use.
            bound = 6 if {preset, verdict.rules.name} == {"sglang-slru", "sglang-lfu"} else 3
            assert shortest is not None and shortest.counterexample_calls <= bound, verdict.line()
            assert shortest.rule.startswith(("R5", "R7", "R8")), verdict.line()  # vllm differs from the others on R5 and R8 too


def test_a_split_tail_cache_under_strict_is_reported_with_r7_and_the_moved_node(tmp_path: Path) -> None:
    report = run_check(variants.sglang, target_name="impl.variants:sglang", plan=replace(RunPlan.of_profile("ci"), out_dir=tmp_path))
    golden = report.stages[0]
    assert not golden.passed
    assert golden.rule == "R7/R8, the order of last use and eviction"
    trace = read_trace(golden.counterexample)
    assert len(trace.driven_steps()) <= 3
    split = trace.steps[-1].call  # the match or insert that split a node
    moved_line = next(line for line in golden.failure.splitlines() if "moved" in line)
    moved = moved_line.split("node [")[1].split("]")[0].split()
    tokens = [str(token) for token in cast(tuple[int, ...], split.arg("tokens"))]
    assert moved[: trace.block_size] == tokens[: trace.block_size], f"the node split by the last call moved: {moved_line}"
    assert "at place" in moved_line and "in the spec's order" in moved_line and "in the cache's" in moved_line


def test_check_rules_option_writes_the_rules_into_the_report_and_the_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cx"
    assert main(["check", "impl.variants:strict", "--rules", "sglang", "--quiet", "--out", str(out)]) == 1
    report = capsys.readouterr().out
    assert "rules sglang: use=path+split-tail, evict=lru)" in report
    trace_text = (out / "golden_trace.trace").read_text(encoding="utf-8")
    assert "\nrules sglang\n" in trace_text
    assert "--rules sglang" in trace_text  # the header's reproduce line
    assert parse_trace(trace_text).rules == RULE_PRESETS["sglang"]
    # The trace replays under its own rules: the strict cache disagrees, the split-tail one agrees.
    assert main(["replay", str(out / "golden_trace.trace"), "--target", "impl.variants:strict"]) == 1
    assert main(["replay", str(out / "golden_trace.trace"), "--target", "impl.variants:sglang"]) == 0
    capsys.readouterr()


def test_a_bad_rules_option_is_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["check", "--rules", "sglang-priority"])
    assert exited.value.code == 2
    assert "give a preset" in capsys.readouterr().err


def test_identify_command_names_the_preset(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["identify", "impl.variants:sglang_fifo", "--quiet", "--out", str(tmp_path)]) == 0
    output = capsys.readouterr().out
    assert "conforms to: sglang-fifo\n" in output
    assert "strict       differs" in output


def test_every_field_of_a_rule_set_has_a_key_and_old_texts_still_read() -> None:
    from spec.api import RULE_FIELDS

    assert [field.key for field in RULE_FIELDS] == ["use", "evict", "unit", "dup", "split"]
    assert parse_rules("vllm") == Rules("release", "lru", "block", "keep") == parse_rules("use=release,unit=block,dup=keep")
    assert parse_rules("use=path+split-tail,evict=lfu").name == "sglang-lfu"
    assert Rules(unit="block").name == "use=path,evict=lru,unit=block"
    assert parse_rules(Rules("release", "lru", "block", "refuse").name) == Rules("release", "lru", "block", "refuse")
    assert Rules().with_variant("unit", "block") == Rules(unit="block")
    assert [field.key for field in RULE_PRESETS["vllm"].differences(Rules())] == ["use", "unit", "dup"]
    for text, says in (
        ("dup=keep", "dup=keep needs use=release"),
        ("use=release", "use=release needs unit=block"),
        ("use=release,unit=block,evict=mru", "needs evict=lru"),
        ("unit=tree", "unit must be one of leaf, block"),
        ("dup=keep,dup=keep", "give a preset"),
    ):
        with pytest.raises(ValueError, match=says):
            parse_rules(text)
    with pytest.raises(ValueError):
        Rules(dup="keep")


def test_the_snapshot_text_shows_copies_and_the_release_order_and_reads_old_answers() -> None:
    from spec.model import SpecCache
    from prefixspec.formats.protocol import parse_snapshot, render_snapshot
    from prefixspec.vocabulary import ResultFormatError

    cache = SpecCache(2, RULE_PRESETS["vllm"])
    cache.insert([1, 2, 3, 4], [10, 11], namespace="a")
    cache.insert([1, 2, 3, 4], [10, 12], namespace="a")
    text = render_snapshot(cache.snapshot())
    assert text.endswith('[1 2 3 4] [10 11] 0 copies=[][12] ns="a" released=[11 12 10]')
    assert parse_snapshot(text, 2) == cache.snapshot()
    old = "lookups=2 query_tokens=9 hit_tokens=6 inserted_blocks=2 evicted_blocks=0 nodes=2 [1 2 3 4] [11] 0 [1 2] [10] 1"
    assert render_snapshot(parse_snapshot(old, 2)) == old
    with pytest.raises(ResultFormatError, match="one bracket per block"):
        parse_snapshot(text.replace("copies=[][12]", "copies=[12]"), 2)
