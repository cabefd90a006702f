"""``identify`` explains a cache that conforms to no preset: the rule set it follows, and every difference.

The targets are ``impl.variants`` factories of rule sets that are no preset, each one field away
from one: vLLM's rules with strict's duplicates (R5), and strict with vLLM's block-granular eviction (R8).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from spec.api import Rules
from prefixspec.running.identify import every_rule_set, explain, identify
from prefixspec.running.stages import RunPlan


def explained(factory_name: str, presets: tuple[str, ...], tmp_path: Path) -> tuple[list[str], object]:
    from impl import variants

    factory = getattr(variants, factory_name)
    base = replace(RunPlan.of_profile("ci"), out_dir=tmp_path, replay_target=f"--target impl.variants:{factory_name}")
    verdicts = identify(factory, target_name=factory_name, base=base, presets=presets)
    assert not any(verdict.conforms for verdict in verdicts)
    explanation = explain(factory, target_name=factory_name, base=base, verdicts=verdicts)
    return explanation.lines(), explanation


def test_every_rule_set_is_probed_once_and_has_a_meaning() -> None:
    sets = every_rule_set()
    # 22 meaningful combinations of use, evict, unit and dup, each with R4's two split stamps (44), and slru
    # beside the four node-ordered combinations of use and unit, with either stamp (8): 52.
    assert len(sets) == len(set(sets)) == 52
    assert Rules() == sets[0] and Rules("release", "lru", "block", "keep") in sets


def test_vllm_with_strict_duplicates_is_found_and_its_one_difference_shown(tmp_path: Path) -> None:
    lines, explanation = explained("vllm_dedup", ("vllm",), tmp_path)
    assert explanation.found is not None and explanation.found.rules == Rules("release", "lru", "block", "refuse")  # type: ignore[attr-defined]
    assert explanation.nearest == "vllm"  # type: ignore[attr-defined]
    (difference,) = explanation.differences  # type: ignore[attr-defined]
    assert difference.field.key == "dup" and difference.verdict.rules.name == "vllm"
    assert not difference.verdict.conforms and difference.verdict.shortest.counterexample_calls <= 4
    assert lines[0].startswith("use=release,evict=lru,unit=block: conforms")
    assert "R5 dup=refuse, not keep" in lines[2]


def test_strict_with_block_eviction_is_found(tmp_path: Path) -> None:
    lines, explanation = explained("strict_cut", ("strict",), tmp_path)
    assert explanation.found is not None and explanation.found.rules == Rules(unit="block")  # type: ignore[attr-defined]
    (difference,) = explanation.differences  # type: ignore[attr-defined]
    assert difference.field.key == "unit" and "R8" in difference.verdict.shortest.rule
