"""The whole conformance suite as a ``unittest.TestCase`` class, for an engine's own test suite.

One file in the engine's tests is enough (pytest and unittest both collect it)::

    # tests/test_prefix_cache_conformance.py
    from prefixspec import conformance_suite
    from mypkg.cache import make_cache          # make_cache(block_size) -> a PrefixCache

    TestPrefixCacheConformance = conformance_suite(make_cache)

The class has a test per stage of ``prefixspec check``: ``test_golden_trace``,
``test_call_machine``, ``test_engine_machine``, ``test_extremes`` and ``test_scale``.  A
failure's message holds the minimised counterexample trace, ready for
``prefixspec replay``.  The settings are those of the package's profile
(``prefixspec.running.profiles``): ``ci`` unless ``profile`` or
``HYPOTHESIS_PROFILE`` names ``deep``, ``dev`` or a profile the caller
registered with Hypothesis, as ``prefixspec check`` takes them, so the suite runs
as long as the check does.  ``settings`` passes Hypothesis settings through
instead (``max_examples``, ``derandomize``, ``database``...;
``settings=hypothesis.settings()`` is the profile the caller loaded).  Whatever is
given, ``deadline`` is off and the ``too_slow`` health check suppressed, because
one engine example runs thousands of steps by design.  Nothing is loaded into
Hypothesis: the caller's other tests keep their own settings.  An engine in another language runs through the
same class: ``conformance_suite(prefixspec.targets.pipe.PipeEngine("path/to/engine"))``.
"""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
import unittest
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from hypothesis import settings as Settings

from spec.api import CacheFactory, Rules, parse_rules
from prefixspec.drive.machines import ENGINE_STEPS_PER_EXAMPLE
from prefixspec.running.profiles import profile_settings
from prefixspec.running.report import StageResult
from prefixspec.running.stages import STAGES, RunPlan, run_stage
from prefixspec.targets.pipe import PipeEngine, exec_option
from prefixspec.vocabulary import counted


def conformance_suite(
    factory: CacheFactory,
    *,
    profile: str | None = None,
    settings: Settings | None = None,
    min_engine_steps: int = ENGINE_STEPS_PER_EXAMPLE,
    out_dir: Path | None = None,
    name: str = "PrefixCacheConformance",
    rules: Rules | str = "strict",
    stages: Iterable[str] = STAGES,
) -> type[unittest.TestCase]:
    """A TestCase class checking the caches ``factory(block_size)`` makes against the spec, a test per stage.

    The stages and their settings are those of ``prefixspec check``
    (``prefixspec.running.stages``) under ``profile`` (None: the one
    ``HYPOTHESIS_PROFILE`` names when a test runs, else ``ci``); ``settings``
    takes the place of the profile's.  ``min_engine_steps`` is what every engine example must reach
    (3,000 as in ``prefixspec check``); counterexample traces go to ``out_dir``
    (default a new folder of this run's in the temporary directory).  ``rules`` is the rule set
    the spec follows: a ``spec.api.Rules`` or a name (``"sglang"``,
    ``"use=path+split-tail,evict=lfu"``).  ``stages`` picks the stages (default
    all of ``prefixspec check``'s: golden trace, call machine, engine machine,
    extremes, scale).
    """
    rule_set = parse_rules(rules) if isinstance(rules, str) else rules
    folders: list[Path] = [] if out_dir is None else [out_dir]
    if settings is None:
        profile_settings(profile)  # an unknown profile is an error here, where the class is made
    replay_target = replay_target_of(factory)

    def plan() -> RunPlan:
        # Built when a test runs, so that HYPOTHESIS_PROFILE as it is then chooses the profile.
        chosen = RunPlan.of_profile(profile) if settings is None else RunPlan(base=settings)
        if not folders:  # a folder of this run's own (mkdtemp: private to its user), made when a test first runs
            folders.append(Path(tempfile.mkdtemp(prefix=f"prefixspec-counterexamples-{name}-")))
            atexit.register(remove_if_empty, folders[0])  # a run that failed nothing leaves no folder behind
        return replace(chosen, min_engine_steps=min_engine_steps, out_dir=folders[0], rules=rule_set, replay_target=replay_target)

    def stage_test(stage_name: str) -> Callable[[unittest.TestCase], None]:
        def test(self: unittest.TestCase) -> None:
            report_failure(self, run_stage(stage_name, factory, plan()))

        test.__name__ = "test_" + stage_name.replace(" ", "_")
        test.__doc__ = f"The {stage_name} of ``prefixspec check`` against the factory."
        return test

    members: dict[str, object] = {"__doc__": "Every stage of ``prefixspec check`` against the factory, each a test."}
    for stage_name in stages:
        if stage_name not in STAGES:
            raise ValueError(f"no stage {stage_name!r}: the stages are {', '.join(STAGES)}")
        test = stage_test(stage_name)
        members[test.__name__] = test
    return type(name, (unittest.TestCase,), members)


def remove_if_empty(folder: Path) -> None:
    """Remove ``folder`` when it holds nothing (no counterexample was written into it)."""
    try:
        os.rmdir(folder)
    except OSError:
        pass


def replay_target_of(factory: CacheFactory) -> str:
    """What follows ``prefixspec replay FILE`` to run ``factory`` again: ``--exec CMD`` for an engine over a pipe,
    ``--target MODULE:NAME`` for a factory importable by its own name, else the placeholder with what is missing."""
    if isinstance(factory, PipeEngine):
        return exec_option(factory.command, factory.timeout, factory.start_timeout)
    module_name = getattr(factory, "__module__", None)
    qualified = getattr(factory, "__qualname__", None)
    if isinstance(module_name, str) and isinstance(qualified, str) and module_name != "__main__" and "<" not in qualified:
        found: object = sys.modules.get(module_name)  # imported already: the factory came from it
        for part in qualified.split("."):
            found = getattr(found, part, None)
        if found is factory:
            return f"--target {module_name}:{qualified}"
    return f"--target MODULE:FACTORY (the factory {factory!r} has no importable name: name a module-level one)"


def report_failure(case: unittest.TestCase, stage: StageResult) -> None:
    """Fail ``case`` with the stage's report and its counterexample trace, when the stage failed."""
    if stage.passed:
        return
    message = f"{stage.name}: {stage.failure}"
    if stage.counterexample:
        trace = Path(stage.counterexample).read_text(encoding="utf-8")
        message += f"\ncounterexample ({counted(stage.counterexample_calls, 'call')}), {stage.counterexample}:\n{trace}"
    case.fail(message)
