"""How a check runs, whatever its target: ``RunPlan``, the settings, steps, seed and replay command of every stage.

``prefixspec check``, ``conformance_suite`` and the project's own tests all run a target with a ``RunPlan``
(``prefixspec.running.stages``), so the Hypothesis settings, the minimum engine steps, the shrink policy and the
deadlines are the same by construction; ``RunPlan.replay_arguments`` is the one place a replay command is written.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from hypothesis import HealthCheck, Phase, settings

from spec.api import CacheFactory, Rules
from prefixspec.drive.machines import ENGINE_STEPS_PER_EXAMPLE
from prefixspec.drive.scale import SCALE_BUDGET
from prefixspec.running.profiles import PROFILES, profile_settings
from prefixspec.running.report import StageResult

REPORT_WITHIN = 50.0
"""Seconds from a stage's start within which its minimised counterexample is written (a minute, with room to spare)."""


def rules_option(rules: Rules) -> str:
    """`` --rules NAME`` that names ``rules`` on a command line, or nothing for strict (every command's default)."""
    return "" if rules == Rules() else f" --rules {shlex.quote(rules.name)}"


@dataclass(frozen=True)
class RunPlan:
    """How a check runs, whatever its target: settings, steps, seed, where counterexamples go, how to reproduce them."""

    base: settings
    """Hypothesis settings (a profile's, or the caller's) that every machine stage starts from."""
    profile: str = "custom"
    min_engine_steps: int = ENGINE_STEPS_PER_EXAMPLE
    seed: int | None = None
    out_dir: Path = Path("counterexamples")
    progress: TextIO | None = None
    replay_target: str = "--target MODULE:FACTORY"
    """How ``prefixspec replay FILE`` names this target (``--target X`` or ``--exec CMD``); ``replay_arguments`` adds the rules."""
    rules: Rules = Rules()
    """The rule set the spec follows in every stage (``spec.api.Rules``)."""
    report_within: float = REPORT_WITHIN
    """Seconds from a stage's start by which delta debugging stops improving its counterexample."""
    reach: bool = True
    """Run the reach stages (``REACH_STAGES``) after the others passed."""
    stages: tuple[str, ...] = ()
    """The stages to run (``check --stage``), in the order of ``stages.STAGES`` whatever the order here; empty: every one."""
    require_coverage: bool = False
    """Fail a stage that never reached an event of ``coverage.REQUIRED`` (the named profiles do; a caller's few examples need not)."""
    scale_budget: float = SCALE_BUDGET
    """CPU seconds the scale stage may take (``scale.SCALE_BUDGET``); a cache whose calls would take it past them is
    stopped with how its calls grow."""
    announce: Callable[[str, StageResult | None], None] | None = None
    """Told each stage's name as it starts (with None) and its result as it ends: a supervised run's parent learns what finished."""
    jobs: int = 1
    """Stages run at once, each in a supervised worker process (``stage_workers``); 1: one after another in this process."""
    call_timeout: float | None = None
    """Seconds a call may take (``--timeout``): a worker whose call runs on past it (and ``supervised.GRACE``) is killed."""
    fresh_target: Callable[[], AbstractContextManager[CacheFactory]] | None = None
    """With ``jobs`` above 1, how a worker gets a target of its own (an engine, ``--exec``, that a fork cannot share);
    None: the target, as the fork inherits it."""

    @classmethod
    def of_profile(cls, profile: str | None = None) -> RunPlan:
        """The plan of a profile (``ci``, ``deep``, ``dev``; None: ``HYPOTHESIS_PROFILE``, else ``ci``), loaded into nothing.

        ``dataclasses.replace`` changes the rest.  A name outside ``PROFILES``
        is a profile the caller registered with Hypothesis, held to no coverage.
        """
        name, chosen = profile_settings(profile)
        return cls(base=chosen, profile=name, require_coverage=name in PROFILES and name != "dev")

    @property
    def replay_arguments(self) -> str:
        """What follows ``prefixspec replay FILE`` to reproduce a counterexample: the target, then the rules if not strict.

        The one place a run's replay command is written; every report and trace header reads it."""
        return self.replay_target + rules_option(self.rules)

    def machine_settings(self) -> settings:
        """The settings common to both machines: the deadline off, too_slow suppressed, one bug reported, no shrink phase.

        Hypothesis's shrinker replays whole examples, hundreds to thousands of
        them: on the planted bug s02 it ran 1,662 call-machine examples (48 s)
        for a counterexample that delta debugging over the recorded calls cuts
        to the same 2 calls in well under a second.  So no stage shrinks with
        Hypothesis; every stage's failing calls are cut by ``minimise``.
        """
        suppressed = list(self.base.suppress_health_check)
        if HealthCheck.too_slow not in suppressed:
            suppressed.append(HealthCheck.too_slow)  # one engine example runs thousands of steps by design
        return settings(
            self.base,
            deadline=None,
            suppress_health_check=suppressed,
            report_multiple_bugs=False,
            derandomize=self.base.derandomize and self.seed is None,
            phases=[phase for phase in self.base.phases if phase is not Phase.shrink],
        )
