"""Which rule sets a cache follows: a short check under every preset, and for each it breaks, why.

``identify`` runs the golden trace and a short run of both machines
(``IDENTIFY_EXAMPLES`` engine examples of ``IDENTIFY_STEPS`` steps, twenty
times as many call-machine examples) under each preset of
``spec.api.RULE_PRESETS``.  A preset the target passes is one it conforms to
(as far as that run goes: ``prefixspec check --rules NAME`` is the full check);
for each other, the shortest counterexample and the rule it breaks.

A target that conforms to no preset is explained (``explain``): every rule set that ``RULE_FIELDS``
and ``RULE_REQUIREMENTS`` allow is probed with the golden trace and a short call machine, the
first that passes is checked as a preset is, and every field on which it differs from the nearest
preset is shown with the shortest counterexample of that difference alone (the found rule set
with that one field put back to the preset's, where the combination has a meaning).  A target that
conforms to a preset other than strict gets the same for each variant of it that is not strict's
(``beside_strict``).

A catalogue's mutant (``CATALOGUE#ID``) has no rule set of its own when its factory takes one
(``targets.mutants``): it is made under each rule set it is checked against (``made_under``), so the presets it
conforms to are those its planted bug is invisible under, and every replay line the run writes
(``--target CATALOGUE#ID --rules R``) makes the cache that failed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from hypothesis import settings

from spec.api import RULE_FIELDS, RULE_PRESETS, CacheFactory, RuleField, Rules, rules_problem
from prefixspec.running.report import CheckReport, StageResult
from prefixspec.running.stages import RunPlan, clear_counterexamples, opened_report, run_check, run_stage
from prefixspec.vocabulary import counted

PROBE_STAGES = ("golden trace", "call machine")
"""The stages that probe a rule set while searching: a wrong rule set fails them in a few calls."""

IDENTIFY_EXAMPLES = 3
IDENTIFY_STEPS = 1000

CacheMaker = Callable[[Rules], CacheFactory]
"""A target's caches under a rule set (a catalogue's mutant, made under it: ``made_under``)."""


def under(target: CacheFactory, made_under: CacheMaker | None, rules: Rules) -> CacheFactory:
    """The caches a check under ``rules`` makes: ``made_under(rules)`` when given, else ``target``'s own."""
    return target if made_under is None else made_under(rules)


@dataclass(frozen=True)
class Verdict:
    """What a short check under one rule set found."""

    rules: Rules
    report: CheckReport

    @property
    def conforms(self) -> bool:
        return self.report.passed

    @property
    def shortest(self) -> StageResult | None:
        """The failed stage with the shortest counterexample (or the first failed stage)."""
        failed = [stage for stage in self.report.stages if not stage.passed]
        with_trace = [stage for stage in failed if stage.counterexample]
        if with_trace:
            return min(with_trace, key=lambda stage: stage.counterexample_calls)
        return failed[0] if failed else None

    def line(self) -> str:
        name = f"{self.rules.name:<12}"
        return f"  {name} {self.outcome()}"

    def outcome(self) -> str:
        """``conforms (...)`` or ``differs: N calls, RULE; TRACE``."""
        if self.conforms:
            calls = sum(stage.calls for stage in self.report.stages)
            return f"conforms ({calls:,} calls in {len(self.report.stages)} stages)"
        stage = self.shortest
        if stage is None:
            return "differs"
        if stage.counterexample:
            return f"differs: {counted(stage.counterexample_calls, 'call')}, {stage.rule or 'see the trace'}; {stage.counterexample}"
        return f"differs: {stage.failure.splitlines()[0] if stage.failure else stage.name}"


def short_plan(base: RunPlan, rules: Rules, folder: str) -> RunPlan:
    """The plan of a short check under ``rules``, its counterexamples in ``folder`` of the base's."""
    return replace(
        base,
        base=settings(base.base, max_examples=IDENTIFY_EXAMPLES),
        min_engine_steps=IDENTIFY_STEPS,
        rules=rules,
        out_dir=Path(base.out_dir) / folder,
        require_coverage=False,  # a short run reaches few extremes, and says nothing about the rule set
        reach=False,
    )


def identify(
    target: CacheFactory,
    *,
    target_name: str,
    base: RunPlan,
    presets: Iterable[str] = RULE_PRESETS,
    progress: TextIO | None = None,
    made_under: CacheMaker | None = None,
) -> list[Verdict]:
    """A short check of ``target`` under every preset, in the order of ``RULE_PRESETS``."""
    verdicts: list[Verdict] = []
    for name in RULE_PRESETS:  # an earlier run's counterexamples would pass for this run's
        clear_counterexamples(Path(base.out_dir) / name)
    for name in presets:
        rules = RULE_PRESETS[name]
        if progress is not None:
            progress.write(f"  under {name} ...\n")
            progress.flush()
        report = run_check(under(target, made_under, rules), target_name=target_name, plan=short_plan(base, rules, name))
        verdicts.append(Verdict(rules, report))
        if any(stage.aborted for stage in report.stages):
            break  # the target failed as a program: no other preset can say more
    return verdicts


def every_rule_set() -> list[Rules]:
    """Every combination of the variants of ``RULE_FIELDS`` that has a meaning, strict's variants first."""
    found: list[Rules] = []
    for values in itertools.product(*(rule_field.variants for rule_field in RULE_FIELDS)):
        chosen = {rule_field.key: value for rule_field, value in zip(RULE_FIELDS, values)}
        if not rules_problem(chosen):
            found.append(Rules(**chosen))  # type: ignore[arg-type]  # every value is one of its field's variants
    return found


@dataclass(frozen=True)
class Difference:
    """One field on which the found rule set differs from the nearest preset, and the check that shows it."""

    field: RuleField
    preset_variant: str
    found_variant: str
    verdict: Verdict

    def line(self) -> str:
        probe = self.verdict.rules.name
        return (
            f"    {self.field.rule} {self.field.key}={self.found_variant}, not {self.preset_variant} ({self.field.meaning}): "
            f"under {probe} it {self.verdict.outcome()}"
        )


@dataclass
class Explanation:
    """What ``explain`` found: the rule set the target conforms to (None: none of them), and why not the nearest preset."""

    found: Verdict | None = None
    nearest: str = ""
    differences: list[Difference] = field(default_factory=list)
    probed: int = 0

    def lines(self) -> list[str]:
        if self.found is None:
            return [f"no rule set of the {self.probed} the fields allow conforms (each failed the golden trace or a short call machine)"]
        rules = self.found.rules
        lines = [f"{rules.text}: conforms {self.found.outcome().removeprefix('conforms ')}, found by probing {self.probed} rule sets"]
        lines.append(f"  it differs from {self.nearest} in {counted(len(self.differences), 'field')}:")
        lines.extend(difference.line() for difference in self.differences)
        return lines


def explain(
    target: CacheFactory,
    *,
    target_name: str,
    base: RunPlan,
    verdicts: list[Verdict],
    progress: TextIO | None = None,
    made_under: CacheMaker | None = None,
) -> Explanation:
    """For a target that conforms to no preset: the rule set it follows, found field by field, and every difference
    from the nearest preset with its shortest counterexample (``verdicts`` are the presets' short checks, reused)."""
    tried = {verdict.rules: verdict for verdict in verdicts}
    explanation = Explanation()
    # Variant by variant: the rule sets one field away from a preset first, then two, ...
    def distance(rules: Rules) -> int:
        return min(len(preset.differences(rules)) for preset in RULE_PRESETS.values())

    for rules in sorted(every_rule_set(), key=distance):
        if rules in tried:
            continue
        explanation.probed += 1
        if progress is not None:
            progress.write(f"  probing {rules.text} ...\n")
            progress.flush()
        plan = short_plan(base, rules, "probe")
        probe = opened_report(target_name, plan)
        for stage in PROBE_STAGES:
            probe.stages.append(run_stage(stage, under(target, made_under, rules), plan))
            if not probe.stages[-1].passed:
                break
        if any(stage.aborted for stage in probe.stages):
            return explanation
        if probe.passed:
            report = run_check(under(target, made_under, rules), target_name=target_name, plan=short_plan(base, rules, "found"))
            if report.passed:
                explanation.found = Verdict(rules, report)
                break
    if explanation.found is None:
        return explanation
    found = explanation.found.rules
    nearest = min(RULE_PRESETS, key=lambda name: len(RULE_PRESETS[name].differences(found)))
    explanation.nearest = nearest
    explanation.differences = show_differences(
        target, target_name=target_name, base=base, preset=RULE_PRESETS[nearest], found=found, tried=tried, progress=progress, made_under=made_under
    )
    return explanation


def show_differences(
    target: CacheFactory,
    *,
    target_name: str,
    base: RunPlan,
    preset: Rules,
    found: Rules,
    tried: dict[Rules, Verdict],
    progress: TextIO | None = None,
    made_under: CacheMaker | None = None,
) -> list[Difference]:
    """Every field on which ``found`` (a rule set the target conforms to) differs from ``preset``, each shown alone:
    a short check under ``found`` with that one field put back to the preset's, or under the preset itself where
    that combination has no meaning; its shortest counterexample shows the difference.  ``tried`` holds the short
    checks run so far (reused, and the new ones added), so no rule set is checked twice."""
    differences: list[Difference] = []
    for rule_field in preset.differences(found):
        try:
            probe_rules = found.with_variant(rule_field.key, preset.variant(rule_field.key))
        except ValueError:
            probe_rules = preset  # that variant has a meaning only beside the preset's others: the preset shows it
        verdict = tried.get(probe_rules)
        if verdict is None:
            if progress is not None:
                progress.write(f"  showing {rule_field.key} under {probe_rules.text} ...\n")
                progress.flush()
            report = run_check(under(target, made_under, probe_rules), target_name=target_name, plan=short_plan(base, probe_rules, f"differs-{rule_field.key}"))
            verdict = Verdict(probe_rules, report)
            tried[probe_rules] = verdict
        differences.append(Difference(rule_field, preset.variant(rule_field.key), found.variant(rule_field.key), verdict))
    return differences


def beside_strict(
    target: CacheFactory,
    *,
    target_name: str,
    base: RunPlan,
    verdicts: list[Verdict],
    progress: TextIO | None = None,
    made_under: CacheMaker | None = None,
) -> list[Difference]:
    """For a target that conforms to a preset other than strict (the first of ``verdicts`` that conforms): every
    variant it follows that is not strict's, each with the shortest counterexample of that difference alone."""
    conforming = [verdict.rules for verdict in verdicts if verdict.conforms]
    strict = RULE_PRESETS["strict"]
    if not conforming or conforming[0] == strict:
        return []
    tried = {verdict.rules: verdict for verdict in verdicts}
    return show_differences(
        target, target_name=target_name, base=base, preset=strict, found=conforming[0], tried=tried, progress=progress, made_under=made_under
    )
