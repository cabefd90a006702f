"""The Rust example engine (examples/rust/): built with cargo, checked over the line protocol in the ci profile.

Skipped, with the reason shown in pytest's summary, on a machine without
cargo.  The build goes to examples/rust/target/, which cargo keeps up to
date, so after the first build it costs a fraction of a second.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from hypothesis import settings

from prefixspec.commands.main import main
from prefixspec.formats.trace import read_trace
from prefixspec.running.stages import RunPlan, run_stage
from prefixspec.targets.pipe import PipeEngine

ROOT = Path(__file__).resolve().parent.parent
CRATE = ROOT / "examples" / "rust"
BINARY = CRATE / "target" / "release" / "prefixcache"
GOLDEN = ROOT / "fixtures" / "radix_trace.txt"
PLANTED_BUGS = ["lock_pins_nothing", "evict_newest_first", "no_duplicates", "match_whole_prompt", "panic_on_split"]


@pytest.fixture(scope="module")
def engine() -> str:
    """The built engine's command; skips when cargo is missing."""
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not on this machine, so the Rust example engine (examples/rust) is neither built nor checked")
    built = subprocess.run(
        [cargo, "build", "--release", "--offline", "--quiet", "--manifest-path", str(CRATE / "Cargo.toml")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, f"cargo build failed:\n{built.stderr}"
    return shlex.quote(str(BINARY))


def with_bug(engine: str, bug: str) -> str:
    return f"PREFIXCACHE_BUG={bug} {engine}"


SHORT_EXAMPLES = {"golden trace": 1, "call machine": 2, "engine machine": 2, "extremes": 4}
"""make test's share of the ci profile over the pipe, in Hypothesis's examples (the call machine runs twenty call
examples for each, ``drive.machines.call_machine_examples``): every stage but scale, which alone is 80,000 round
trips (make deep runs the whole profile, scale included, in the test below)."""


@pytest.mark.parametrize("stage", sorted(SHORT_EXAMPLES))
def test_the_rust_engine_passes_a_share_of_each_stage_over_the_pipe(engine: str, stage: str, tmp_path: Path) -> None:
    plan = replace(RunPlan.of_profile("ci"), out_dir=tmp_path, min_engine_steps=1000, require_coverage=False)
    plan = replace(plan, base=settings(plan.base, max_examples=SHORT_EXAMPLES[stage]))
    with PipeEngine(engine, 5.0) as pipe:
        result = run_stage(stage, pipe, plan)
    assert result.passed, result.failure
    assert result.calls > 0


@pytest.mark.deep
def test_the_rust_engine_passes_check_exec_in_the_ci_profile(engine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every stage of ``ci``, the engine examples cut to 1,000 steps (make deep: through a pipe it takes minutes, scale most)."""
    report_file = tmp_path / "report.json"
    argv = ["check", "--exec", engine, "--profile", "ci", "--steps", "1000", "--quiet", "--out", str(tmp_path / "cx"), "--json", str(report_file)]
    status = main(argv)
    output = capsys.readouterr().out
    print(output)
    assert status == 0, output
    report = json.loads(report_file.read_text())
    stages = {stage["name"]: stage for stage in report["stages"]}
    assert set(stages) == {"golden trace", "call machine", "engine machine", "extremes", "scale"}
    assert all(stage["passed"] for stage in stages.values())
    assert min(stages["engine machine"]["engine_steps_per_example"]) >= 1000


def test_a_planted_bug_is_caught_with_a_short_counterexample(engine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = with_bug(engine, "lock_pins_nothing")
    report_file = tmp_path / "report.json"
    status = main(["check", "--exec", broken, "--quiet", "--out", str(tmp_path), "--json", str(report_file)])
    output = capsys.readouterr().out
    assert status == 1, output
    for stage in json.loads(report_file.read_text())["stages"]:
        assert not stage["passed"] and not stage["aborted"]
        trace = read_trace(stage["counterexample"])
        assert 1 <= len(trace.driven_steps()) <= 5
        assert f"prefixspec replay {stage['counterexample']} --exec" in output
        # The trace reproduces outside Hypothesis: the broken engine fails it, the sound one passes.
        assert main(["replay", stage["counterexample"], "--exec", broken]) == 1
        assert main(["replay", stage["counterexample"], "--exec", engine]) == 0
        capsys.readouterr()


@pytest.mark.parametrize("bug", PLANTED_BUGS)
def test_every_planted_bug_fails_the_golden_trace(engine: str, bug: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["replay", str(GOLDEN), "--exec", with_bug(engine, bug)])
    captured = capsys.readouterr()
    assert status == 1, captured.out + captured.err
    assert "Traceback" not in captured.out + captured.err


def test_a_panicking_engine_is_reported_with_its_panic(engine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["check", "--exec", with_bug(engine, "panic_on_split"), "--quiet", "--out", str(tmp_path)])
    output = capsys.readouterr().out
    assert status == 1
    assert "crashed: it exited with status 101" in output
    assert "planted bug panic_on_split" in output
    assert "Traceback" not in output


def test_recorded_traces_verify_and_shrink(engine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`prefixcache record` writes a recorded trace; verify holds it to the spec and --shrink cuts a divergent one."""
    recorded = tmp_path / "sound.trace"
    recorded.write_text(subprocess.run([str(BINARY), "record"], input=GOLDEN.read_text(), capture_output=True, text=True, check=True).stdout)
    assert main(["verify", str(recorded)]) == 0
    assert "442 recorded results are what the spec gives" in capsys.readouterr().out

    broken = tmp_path / "broken.trace"
    environment = {"PREFIXCACHE_BUG": "evict_newest_first", "PATH": "/usr/bin:/bin"}
    broken.write_text(
        subprocess.run([str(BINARY), "record"], input=GOLDEN.read_text(), capture_output=True, text=True, check=True, env=environment).stdout
    )
    shrunk = tmp_path / "cut.trace"
    assert main(["verify", str(broken), "--shrink", "--out", str(shrunk)]) == 1
    output = capsys.readouterr().out
    assert "diverge from the spec at line" in output
    cut = read_trace(str(shrunk))
    assert len(cut.driven_steps()) <= 15
    assert main(["verify", str(shrunk)]) == 1
    assert f"at line {cut.steps[-1].line} (call {len(cut.steps)} of {len(cut.steps)})" in capsys.readouterr().out


def test_prefixspec_hunt_takes_the_engines_planted_bugs(engine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """examples/rust/mutants.toml: each mutant is the edit of a Python shim that selects one planted bug."""
    status = main(["hunt", str(CRATE / "mutants.toml"), "--mutant", "lock_pins_nothing", "--out", str(tmp_path), "--quiet"])
    output = capsys.readouterr().out
    assert status == 0, output
    assert "| lock_pins_nothing | a lock that pins nothing | killed |" in output
