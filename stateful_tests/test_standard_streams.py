"""Output that cannot be written: the run goes on to its verdict, its status and its files.

Each command runs as the console script runs it, its stdout a pipe whose reader is closed before the command
writes a line (``prefixspec check | head``; stderr kept in a file, to read), or a full disk, or closed, and its
stderr closed; the negative control runs the same command past the console script's entry, as it ran
before: a traceback, or ``prefixspec: Broken pipe`` and exit 2, or a FAILED run.
"""

from __future__ import annotations

import shlex
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


def run_redirected(code: str, argv: list[str], scratch: Path, redirections: str) -> subprocess.CompletedProcess[str]:
    """``argv`` run by ``code`` under the shell's ``redirections`` (``>&-``, ``> /dev/full``, ``2>&-``)."""
    command = " ".join(shlex.quote(word) for word in [sys.executable, "-c", code, *argv])
    return subprocess.run(
        ["/bin/sh", "-c", f"{command} {redirections}"], capture_output=True, text=True, cwd=scratch, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=600
    )


@pytest.mark.parametrize("case", ["check passes", "check fails"])
def test_a_full_disk_under_stdout_is_said_once_and_the_verdict_stands(case: str, tmp_path: Path) -> None:
    """``> /dev/full``: one line on stderr, the verdict's status (a traceback and 120 before)."""
    argv, verdict = CASES[case]
    ran = run_redirected(ENTRY, argv, tmp_path, "> /dev/full")
    assert ran.returncode == verdict, ran.stderr
    assert ran.stderr.count("prefixspec: stdout: No space left on device; the rest of the output is dropped, the run goes on") == 1, ran.stderr
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize("redirections", [">&-", "2>&-", ">&- 2>&-"], ids=["stdout closed", "stderr closed", "both closed"])
@pytest.mark.parametrize("case", ["check passes", "check fails"])
def test_a_closed_standard_stream_leaves_the_verdict_as_it_is(case: str, redirections: str, tmp_path: Path) -> None:
    """A closed stdout was a traceback (exit 1); a closed stderr made the next pipe take its number, and the
    supervised run FAILED whatever the cache (exit 1)."""
    argv, verdict = CASES[case]
    ran = run_redirected(ENTRY, argv, tmp_path, redirections)
    assert ran.returncode == verdict, (ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr + ran.stdout
    # The run reached its verdict: a failing one wrote its counterexample (a crash of the checker exits 1 too).
    assert (tmp_path / "out" / "golden_trace.trace").exists() == (verdict == ExitStatus.FAILED)


@pytest.mark.parametrize("redirections", ["> /dev/full", ">&-", "2>&-"])
def test_negative_control_past_the_entry_unwritable_output_breaks_the_run(redirections: str, tmp_path: Path) -> None:
    argv, verdict = CASES["check passes"]
    ran = run_redirected(PAST_ENTRY, argv, tmp_path, redirections)
    assert ran.returncode != verdict or "Traceback" in ran.stderr, (ran.returncode, ran.stderr)
