"""README's and docs' command lines and numbers, held to what the tool does (where a run is cheap, by the run)."""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import impl
from prefixspec.commands.main import build_parser, main
from prefixspec.formats.trace import read_trace
from prefixspec.drive.golden import golden_trace
from prefixspec.running.identify import identify
from prefixspec.drive.machines import call_machine_examples
from prefixspec.running.profiles import PROFILE_SETTINGS
from prefixspec.running.stages import RunPlan, run_stage
from prefixspec.shipped import GOLDEN_TRACE
from stateful_tests.broken_caches import lock_pins_nothing

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
PROTOCOL = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
RECORDING = (ROOT / "docs" / "recording.md").read_text(encoding="utf-8")


def subcommand(name: str) -> argparse.ArgumentParser:
    [commands] = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    parser: argparse.ArgumentParser = commands.choices[name]
    return parser


def options_of(name: str) -> set[str]:
    return {option for action in subcommand(name)._actions for option in action.option_strings if option.startswith("--") and option != "--help"}


def readme_usage() -> dict[str, str]:
    """Each command's usage line in README's block under "Checking a cache"."""
    block = README.split("## Checking a cache", 1)[1].split("```", 2)[1]
    return {line.split()[1]: line for line in block.splitlines() if line.startswith("prefixspec ")}


@pytest.mark.parametrize("command", ["check", "identify", "replay", "verify", "hunt"])
def test_readme_usage_names_every_option_and_no_other(command: str) -> None:
    line = readme_usage()[command]
    named = set(re.findall(r"--[a-z][a-z-]*", line))
    assert named == options_of(command), line


def test_readme_profile_choices_are_the_commands() -> None:
    usage = readme_usage()
    for command in ("check", "hunt"):
        [choices] = [action.choices for action in subcommand(command)._actions if "--profile" in action.option_strings]
        assert choices is not None
        assert f"[--profile {'|'.join(choices)}]" in usage[command]


def test_readme_profile_table_holds_the_profiles_numbers() -> None:
    table = README.split("## Profiles", 1)[1].split("## Make targets", 1)[0]
    rows = {row.split("|")[1].strip().strip("`"): row for row in table.splitlines() if row.startswith("| `")}
    for name, profile in PROFILE_SETTINGS.items():
        engine, calls = profile.max_examples, call_machine_examples(profile.max_examples)
        assert f"{engine:,} engine examples and {calls:,} call-machine examples" in rows[name], rows[name]


def test_readme_golden_trace_length() -> None:
    assert f"the **golden trace**, {len(golden_trace().steps)} calls" in README


def test_hunt_help_names_the_packaged_catalogue() -> None:
    [catalogue] = [action for action in subcommand("hunt")._actions if action.dest == "catalogue"]
    assert catalogue.help is not None and "packaged" in catalogue.help and "catalogues/impl.toml" not in catalogue.help
    assert Path(str(catalogue.default)).resolve() == (ROOT / "prefixspec" / "data" / "impl.toml").resolve()


def test_protocol_md_reference_engine_command_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/protocol.md's line that serves the spec with prefixspec.formats.protocol.serve, run as written (checkout names)."""
    [line] = [line for line in PROTOCOL.splitlines() if line.startswith("prefixspec replay TRACE --exec") and "SpecCache" in line]
    command = shlex.split(line)
    assert command[:4] == ["prefixspec", "replay", "TRACE", "--exec"]
    engine = command[4].replace("python ", f"{shlex.quote(sys.executable)} ", 1).replace("prefixspec.spec.model", "spec.model")
    assert main(["replay", str(GOLDEN_TRACE), "--exec", f"cd {shlex.quote(str(ROOT))} && {engine}"]) == 0
    assert f"{len(golden_trace().steps)} calls replayed" in capsys.readouterr().out


def test_a_counterexample_numbers_its_calls_as_its_header_counts_them(tmp_path: Path) -> None:
    """The failure names "call N" of a trace whose header says "N calls" (the lockstep's take_events apart)."""
    stage = run_stage("golden trace", lock_pins_nothing, replace(RunPlan.of_profile("ci"), out_dir=tmp_path))
    text = Path(stage.counterexample).read_text(encoding="utf-8")
    counted = re.search(r"^# (\d+) calls? ", text, re.MULTILINE)
    named = re.match(r"call (\d+) `", stage.failure)
    assert counted is not None and named is not None, (text, stage.failure)
    assert counted[1] == named[1] == str(stage.counterexample_calls)
    calls = read_trace(stage.counterexample).calls()
    assert sum(1 for call in calls if call.op != "take_events") == stage.counterexample_calls


def test_a_stage_leaves_an_earlier_runs_counterexample_to_its_report(tmp_path: Path) -> None:
    """An earlier run's report names its trace, and its replay command must still replay it: a new failure writes beside it."""
    earlier = tmp_path / "golden_trace.trace"
    earlier.write_text("an earlier run's counterexample\n")
    assert run_stage("golden trace", impl.RadixCache, replace(RunPlan.of_profile("ci"), out_dir=tmp_path)).passed
    assert earlier.read_text() == "an earlier run's counterexample\n"


def test_identify_leaves_no_earlier_runs_folders(tmp_path: Path) -> None:
    """A preset folder an earlier run filled, for a preset this run does not reach, is emptied and removed; other files stay."""
    earlier = tmp_path / "sglang"
    earlier.mkdir()
    (earlier / "call_machine.trace").write_text("an earlier run's counterexample\n")
    kept = tmp_path / "sglang-lfu"
    kept.mkdir()
    (kept / "notes.txt").write_text("the user's own\n")
    (kept / "golden_trace.trace").write_text("an earlier run's counterexample\n")
    [verdict] = identify(impl.RadixCache, target_name="impl:RadixCache", base=replace(RunPlan.of_profile("ci"), out_dir=tmp_path), presets=["strict"])
    assert verdict.conforms
    assert not earlier.exists()
    assert sorted(path.name for path in kept.iterdir()) == ["notes.txt"]


@pytest.fixture(scope="module")
def rust_engine() -> Path:
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not on this machine: docs/recording.md's Rust recording is not re-run")
    manifest = ROOT / "examples" / "rust" / "Cargo.toml"
    built = subprocess.run([cargo, "build", "--release", "--offline", "--quiet", "--manifest-path", str(manifest)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    return ROOT / "examples" / "rust" / "target" / "release" / "prefixcache"


def test_recording_md_numbers(rust_engine: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/recording.md's two verify lines on the Rust engine's recordings: all 442 results agree; the bug's trace
    diverges at the line it says and shrinks to the calls it says."""
    golden = GOLDEN_TRACE.read_text(encoding="utf-8")
    sound = tmp_path / "rust.trace"
    sound.write_text(subprocess.run([str(rust_engine), "record"], input=golden, capture_output=True, text=True, check=True).stdout)
    assert main(["verify", str(sound)]) == 0
    quoted = re.search(r"prefixspec verify rust\.trace +# (\d+) calls replayed on the spec; all (\d+) recorded", RECORDING)
    assert quoted is not None
    assert f"{quoted[1]} calls replayed on the spec; all {quoted[2]} recorded results" in capsys.readouterr().out
    buggy = tmp_path / "bug.trace"
    recorded = subprocess.run([str(rust_engine), "record"], input=golden, capture_output=True, text=True, check=True, env={"PREFIXCACHE_BUG": "evict_newest_first"})
    buggy.write_text(recorded.stdout)
    assert main(["verify", str(buggy), "--shrink"]) == 1
    out = capsys.readouterr().out
    said = re.search(r"prefixspec verify bug\.trace --shrink +# diverges at line (\d+); shrunk to (\d+) of (\d+) calls", RECORDING)
    assert said is not None
    assert f"diverge from the spec at line {said[1]} " in out and f"shrunk to {said[2]} of {said[3]} calls" in out, out
