"""``prefixspec.conformance_suite``: the conformance suite as a TestCase class, for an engine's own tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import unittest
from pathlib import Path

import pytest
from hypothesis import settings

import impl
from prefixspec import conformance_suite
from stateful_tests.broken_caches import lock_pins_nothing

ROOT = Path(__file__).resolve().parent.parent
SMALL = settings(max_examples=2, derandomize=True, database=None)
CORE = ("golden trace", "call machine", "engine machine")
"""The stages the tests below run: the reach stages' own tests are in test_reach.py."""


def run_suite(suite: type[unittest.TestCase]) -> unittest.TestResult:
    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(suite).run(result)
    return result


def test_the_suite_has_a_test_per_stage_and_passes_the_implementation(tmp_path: Path) -> None:
    every = conformance_suite(impl.RadixCache, out_dir=tmp_path)
    names = sorted(name for name in dir(every) if name.startswith("test_"))
    assert names == ["test_call_machine", "test_engine_machine", "test_extremes", "test_golden_trace", "test_scale"]
    suite = conformance_suite(impl.RadixCache, settings=SMALL, min_engine_steps=300, out_dir=tmp_path, stages=CORE)
    result = run_suite(suite)
    assert result.wasSuccessful(), result.failures + result.errors
    assert result.testsRun == 3


def test_a_broken_cache_fails_every_test_with_its_counterexample(tmp_path: Path) -> None:
    result = run_suite(conformance_suite(lock_pins_nothing, settings=SMALL, min_engine_steps=300, out_dir=tmp_path, stages=CORE))
    assert len(result.failures) == 3 and not result.errors
    for _, message in result.failures:
        assert "counterexample (" in message
        assert "prefixspec-trace 1" in message  # the minimised trace itself, ready for prefixspec replay


def test_the_suite_reports_the_counterexample_that_check_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One assembly of a run: the suite and ``prefixspec check`` cut a broken cache to the same trace, stage by stage."""
    from prefixspec.commands.main import main
    from prefixspec.running.profiles import load_profile

    assert main(["check", "stateful_tests.broken_caches:lock_pins_nothing", "--quiet", "--out", str(tmp_path / "check")]) == 1
    capsys.readouterr()
    load_profile("ci")
    result = run_suite(conformance_suite(lock_pins_nothing, out_dir=tmp_path / "suite", stages=CORE))
    assert len(result.failures) == 3
    for stage in ("golden_trace", "call_machine", "engine_machine"):
        from_check = (tmp_path / "check" / f"{stage}.trace").read_text(encoding="utf-8")
        from_suite = (tmp_path / "suite" / f"{stage}.trace").read_text(encoding="utf-8")
        calls = [line for line in from_check.splitlines() if not line.startswith("#")]
        assert calls == [line for line in from_suite.splitlines() if not line.startswith("#")], stage
        assert len(calls) >= 3, stage  # a header, a block size and at least one call


def test_settings_pass_through_to_the_machines(tmp_path: Path) -> None:
    """max_examples=1 gives the call machine 20 examples and the engine machine 1 (as prefixspec check would)."""
    seen: list[int] = []

    def counting_factory(block_size: int) -> impl.RadixCache:
        seen.append(block_size)
        return impl.RadixCache(block_size)

    suite = conformance_suite(counting_factory, settings=settings(max_examples=1, database=None), min_engine_steps=300, out_dir=tmp_path, stages=CORE)
    result = run_suite(suite)
    assert result.wasSuccessful(), result.failures + result.errors
    assert len(seen) < 150  # the default profile would make hundreds of caches


def test_one_pytest_file_checks_a_cache(tmp_path: Path) -> None:
    """The README's pytest file, run by pytest in a fresh process: the sound cache passes, the broken one fails."""
    test_file = tmp_path / "test_prefix_cache_conformance.py"
    test_file.write_text(
        textwrap.dedent(
            """
            from hypothesis import settings
            from prefixspec import conformance_suite
            from impl import RadixCache
            from stateful_tests.broken_caches import lock_pins_nothing

            small = settings(max_examples=2, database=None)
            core = ("golden trace", "call machine", "engine machine")
            TestPrefixCacheConformance = conformance_suite(RadixCache, settings=small, min_engine_steps=300, stages=core)
            TestBrokenCache = conformance_suite(lock_pins_nothing, settings=small, min_engine_steps=300, stages=core)
            """
        )
    )
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(temporary)}
    environment.pop("HYPOTHESIS_PROFILE", None)
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=1800,  # a guard against a hang, not a budget: six conformance tests, slow on a loaded machine
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1, output
    assert "3 failed, 3 passed" in output, output
    for name in ("test_golden_trace", "test_call_machine", "test_engine_machine"):
        assert f"TestBrokenCache::{name}" in output
    # The broken cache's folder of counterexamples stays; the sound one's, empty, is gone.
    (left,) = temporary.iterdir()
    assert left.name.startswith("prefixspec-counterexamples-") and any(left.iterdir())


@pytest.mark.parametrize("stage", ["test_golden_trace"])
def test_a_pipe_engine_runs_through_the_same_suite(stage: str, tmp_path: Path) -> None:
    from prefixspec.targets.pipe import PipeEngine

    serve = f"exec {sys.executable} -m stateful_tests.engines.serve"
    with PipeEngine(f"cd {ROOT} && {serve}") as engine:
        suite = conformance_suite(engine, settings=SMALL, out_dir=tmp_path)
        result = unittest.TestResult()
        suite(stage).run(result)
        assert result.wasSuccessful(), result.failures + result.errors


# The package's own profile, wherever the suite runs -------------------------------------------------------------


def test_the_suite_takes_the_packages_profile_and_loads_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No settings: ci, or the profile HYPOTHESIS_PROFILE names, read when a test runs; the caller's default settings untouched."""
    from prefixspec.running.profiles import PROFILE_SETTINGS
    from prefixspec.running.stages import RunPlan

    before = settings.default
    monkeypatch.delenv("HYPOTHESIS_PROFILE", raising=False)
    assert RunPlan.of_profile().profile == "ci" and RunPlan.of_profile().base is PROFILE_SETTINGS["ci"]
    assert RunPlan.of_profile().require_coverage
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "dev")
    assert RunPlan.of_profile().base.max_examples == PROFILE_SETTINGS["dev"].max_examples
    assert RunPlan.of_profile("deep").profile == "deep"
    settings.register_profile("a-users-own", max_examples=3)
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "a-users-own")
    own = RunPlan.of_profile()
    assert own.base.max_examples == 3 and not own.require_coverage
    conformance_suite(impl.RadixCache, out_dir=tmp_path)
    assert settings.default is before


def test_an_unknown_profile_is_refused_where_the_suite_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefixspec.running.profiles import UnknownProfile

    monkeypatch.setenv("HYPOTHESIS_PROFILE", "no-such-profile")
    with pytest.raises(UnknownProfile, match="HYPOTHESIS_PROFILE=no-such-profile"):
        conformance_suite(impl.RadixCache)
    with pytest.raises(UnknownProfile, match="'nope'"):
        conformance_suite(impl.RadixCache, profile="nope")
    conformance_suite(impl.RadixCache, settings=SMALL)  # settings given: no profile is read


def test_a_failure_names_the_factory_to_replay(tmp_path: Path) -> None:
    """The replay line names a module-level factory; the rules too; an unnameable factory says why not."""
    result = run_suite(conformance_suite(lock_pins_nothing, settings=SMALL, out_dir=tmp_path, stages=["golden trace"], rules="sglang"))
    [(_, message)] = result.failures
    assert "prefixspec replay" in message and "--target stateful_tests.broken_caches:lock_pins_nothing --rules sglang" in message
    assert "MODULE:FACTORY" not in message
    anonymous = run_suite(conformance_suite(lambda size: lock_pins_nothing(size), settings=SMALL, out_dir=tmp_path / "anonymous", stages=["golden trace"]))
    [(_, said)] = anonymous.failures
    assert "has no importable name" in said
