"""The whole conformance suite as a ``unittest.TestCase`` class, for an engine's own test suite.

One file in the engine's tests is enough (pytest and unittest both collect it)::

    # tests/test_prefix_cache_conformance.py
    from spec.pytest_suite import conformance_suite
    from mypkg.cache import make_cache          # make_cache(block_size) -> a PrefixCache

    TestPrefixCacheConformance = conformance_suite(make_cache)

The class has three tests, the three stages of ``prefixspec check``:
``test_golden_trace``, ``test_call_machine`` and ``test_engine_machine``.  A
failure's message holds the minimised counterexample trace, ready for
``prefixspec replay``.  ``settings`` passes Hypothesis settings through
(``max_examples``, ``derandomize``, ``database``...); the active profile is
used when it is None.  Whatever is given, ``deadline`` is off and the
``too_slow`` health check suppressed, because one engine example runs
thousands of steps by design.  An engine in another language runs through the
same class: ``conformance_suite(spec.pipe.PipeEngine("path/to/engine"))``.
"""

from __future__ import annotations

import tempfile
import unittest
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck
from hypothesis import settings as Settings

from spec.api import PrefixCache
from spec.checking import StageResult, run_golden, run_machine
from spec.conformance import (
    CALLS_PER_EXAMPLE,
    ENGINE_STEPS_PER_EXAMPLE,
    RunTally,
    call_machine,
    call_machine_examples,
    engine_bursts,
    engine_machine,
)

CacheFactory = Callable[[int], PrefixCache]


def machine_settings(settings: Settings | None) -> Settings:
    """``settings`` (or the active profile's), with the deadline off and too_slow suppressed."""
    base = settings if settings is not None else Settings()
    suppressed = list(base.suppress_health_check)
    if HealthCheck.too_slow not in suppressed:
        suppressed.append(HealthCheck.too_slow)
    return Settings(base, deadline=None, suppress_health_check=suppressed, report_multiple_bugs=False)


def conformance_suite(
    factory: CacheFactory,
    *,
    settings: Settings | None = None,
    min_engine_steps: int = ENGINE_STEPS_PER_EXAMPLE,
    out_dir: Path | None = None,
    name: str = "PrefixCacheConformance",
) -> type[unittest.TestCase]:
    """A TestCase class checking the caches ``factory(block_size)`` makes against the spec.

    ``min_engine_steps`` is what every engine example must reach (3,000 as in
    ``prefixspec check``); counterexample traces go to ``out_dir`` (default a
    folder in the temporary directory).
    """
    where = out_dir if out_dir is not None else Path(tempfile.gettempdir()) / "prefixspec-counterexamples" / name

    class ConformanceSuite(unittest.TestCase):
        """The golden trace and both state machines against ``factory``, each a test."""

        def check_stage(self, stage: StageResult) -> None:
            if stage.passed:
                return
            message = f"{stage.name}: {stage.failure}"
            if stage.counterexample:
                trace = Path(stage.counterexample).read_text(encoding="utf-8")
                message += f"\ncounterexample ({stage.counterexample_calls} calls), {stage.counterexample}:\n{trace}"
            self.fail(message)

        def test_golden_trace(self) -> None:
            self.check_stage(run_golden(factory, where))

        def test_call_machine(self) -> None:
            common = machine_settings(settings)
            tally = RunTally()
            chosen = Settings(common, stateful_step_count=CALLS_PER_EXAMPLE, max_examples=call_machine_examples(common.max_examples))
            self.check_stage(run_machine("call machine", call_machine(factory, tally), tally, chosen, factory, where))

        def test_engine_machine(self) -> None:
            tally = RunTally()
            chosen = Settings(machine_settings(settings), stateful_step_count=engine_bursts(min_engine_steps))
            stage = run_machine("engine machine", engine_machine(factory, tally), tally, chosen, factory, where)
            self.check_stage(stage)
            if stage.steps_per_example and min(stage.steps_per_example) < min_engine_steps:
                self.fail(f"an engine example ran only {min(stage.steps_per_example)} engine steps, short of {min_engine_steps}")

    ConformanceSuite.__name__ = ConformanceSuite.__qualname__ = name
    return ConformanceSuite
