"""Which rule sets a cache follows: a short check under every preset, and for each it breaks, why.

``identify`` runs the golden trace and a short run of both machines
(``IDENTIFY_EXAMPLES`` engine examples of ``IDENTIFY_STEPS`` steps, twenty
times as many call-machine examples) under each preset of
``spec.api.RULE_PRESETS``.  A preset the target passes is one it conforms to
(as far as that run goes: ``prefixspec check --rules NAME`` is the full check);
for each other, the shortest counterexample and the rule it breaks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from hypothesis import settings

from spec.api import RULE_PRESETS, CacheFactory, Rules
from prefixspec.running.report import CheckReport, StageResult
from prefixspec.running.stages import RunPlan, clear_counterexamples, run_check

IDENTIFY_EXAMPLES = 3
IDENTIFY_STEPS = 1000


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
        if self.conforms:
            calls = sum(stage.calls for stage in self.report.stages)
            return f"  {name} conforms ({calls:,} calls in {len(self.report.stages)} stages)"
        stage = self.shortest
        if stage is None:
            return f"  {name} differs"
        if stage.counterexample:
            return f"  {name} differs: {stage.counterexample_calls} calls, {stage.rule or 'see the trace'}; {stage.counterexample}"
        return f"  {name} differs: {stage.failure.splitlines()[0] if stage.failure else stage.name}"


def identify(
    target: CacheFactory,
    *,
    target_name: str,
    base: RunPlan,
    presets: Iterable[str] = RULE_PRESETS,
    progress: TextIO | None = None,
) -> list[Verdict]:
    """A short check of ``target`` under every preset, in the order of ``RULE_PRESETS``."""
    verdicts: list[Verdict] = []
    short = settings(base.base, max_examples=IDENTIFY_EXAMPLES)
    for name in RULE_PRESETS:  # an earlier run's counterexamples would pass for this run's
        clear_counterexamples(Path(base.out_dir) / name)
    for name in presets:
        rules = RULE_PRESETS[name]
        if progress is not None:
            progress.write(f"  under {name} ...\n")
            progress.flush()
        replay_target = base.replay_target + ("" if name == "strict" else f" --rules {name}")
        plan = replace(
            base,
            base=short,
            min_engine_steps=IDENTIFY_STEPS,
            rules=rules,
            out_dir=Path(base.out_dir) / name,
            replay_target=replay_target,
            require_coverage=False,  # a short run reaches few extremes, and says nothing about the rule set
            reach=False,
        )
        report = run_check(target, target_name=target_name, plan=plan)
        verdicts.append(Verdict(rules, report))
        if any(stage.aborted for stage in report.stages):
            break  # the target failed as a program: no other preset can say more
    return verdicts
