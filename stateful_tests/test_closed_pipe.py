"""A reader that goes away (``prefixspec check | head``): the run goes on to its verdict, its status and its files.

Each command runs as the console script runs it, its stdout a pipe whose reader is closed before the command
writes a line (stderr kept in a file, to read); the negative control runs the same command past the console
script's entry, as it ran before: a traceback, or ``prefixspec: Broken pipe`` and exit 2.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from prefixspec.exit_status import ExitStatus
from prefixspec.shipped import GOLDEN_TRACE

ROOT = Path(__file__).resolve().parent.parent

ENTRY = "import sys\nfrom prefixspec.commands.entry import main\nsys.exit(main(sys.argv[1:]))"
PAST_ENTRY = "import sys\nfrom prefixspec.commands.main import main\nsys.exit(main(sys.argv[1:]))"
"""The commands without the console script's entry: the negative control."""


def run_with_reader_gone(code: str, argv: list[str], scratch: Path, *, stderr_too: bool = False) -> tuple[int, str]:
    """``argv`` run by ``code`` with its stdout (and with ``stderr_too`` its stderr) a pipe nobody reads: its
    status and its stderr (empty when that went to the pipe)."""
    errors = scratch / "stderr.txt"
    with errors.open("w", encoding="utf-8") as error_file:
        command = subprocess.Popen(
            [sys.executable, "-c", code, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if stderr_too else error_file,
            cwd=scratch,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        assert command.stdout is not None
        command.stdout.close()  # before the command has loaded, let alone written
        status = command.wait(timeout=600)  # a guard against a hang, not a budget
    return status, errors.read_text(encoding="utf-8")


def recorded_divergence(scratch: Path) -> Path:
    """A recording whose last call's result is not the spec's: verify finds it, and --shrink cuts it."""
    path = scratch / "recorded.trace"
    lines = ["prefixspec-trace 1", "block_size 2"]
    lines += [f"n{i} = insert [{i} {i} 7 7] [{2 * i} {2 * i + 1}] -> new []" for i in range(1, 9)]
    lines.append("cached_blocks -> 15")  # the spec holds 16
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


CASES = {
    "check passes": (["check", "--profile", "dev", "--stage", "golden-trace", "--out", "out"], ExitStatus.PASSED),
    "check fails": (["check", "stateful_tests.broken_caches:lock_pins_nothing", "--profile", "dev", "--stage", "golden-trace", "--out", "out"], ExitStatus.FAILED),
    "replay": (["replay", str(GOLDEN_TRACE), "--target", "impl:RadixCache"], ExitStatus.PASSED),
    "hunt": (["hunt", "--mutant", "s03", "--stage", "golden-trace", "--quiet", "--out", "hunted"], ExitStatus.PASSED),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_command_whose_reader_is_gone_ends_with_its_verdict(case: str, tmp_path: Path) -> None:
    argv, verdict = CASES[case]
    status, stderr = run_with_reader_gone(ENTRY, argv, tmp_path)
    assert status == verdict, stderr
    assert "Traceback" not in stderr and "Broken pipe" not in stderr, stderr


def test_verify_shrink_writes_its_cut_though_nobody_reads_the_report(tmp_path: Path) -> None:
    """The report is printed before the cut: once its reader had gone, the print stopped verify (exit 2) and the
    cut it promised was never written.  Now it is, and the status is the divergence's, stderr too gone."""
    recorded = recorded_divergence(tmp_path)
    cut = tmp_path / "cut.trace"
    status, _ = run_with_reader_gone(ENTRY, ["verify", str(recorded), "--shrink", "--out", str(cut)], tmp_path, stderr_too=True)
    assert status == ExitStatus.FAILED
    assert cut.read_text(encoding="utf-8").rstrip().endswith("cached_blocks -> 15")


@pytest.mark.parametrize("case", ["check passes", "replay"])
def test_negative_control_past_the_entry_a_gone_reader_breaks_the_run(case: str, tmp_path: Path) -> None:
    argv, verdict = CASES[case]
    status, stderr = run_with_reader_gone(PAST_ENTRY, argv, tmp_path)
    assert status != verdict or "Traceback" in stderr or "Broken pipe" in stderr, (status, stderr)
