"""Issue 13's reproducers R1-R5: files that are no plain trace, places that are gone, and outputs per run,
each with the outcome the command line documents for it.

Split from ``test_robustness.py`` (the families T, P, E and C), whose helpers it runs ``main`` with.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from prefixspec.exit_status import ExitStatus
from stateful_tests.test_robustness import ROOT, one_line_error, run


# Files that are no plain trace, places that are gone, outputs per run ---------------------------------


@pytest.mark.parametrize("argv", [["verify", ""], ["verify", "."], ["verify", "  "], ["replay", "."]])
def test_r1_a_trace_that_is_empty_or_a_folder_is_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(argv, capsys)
    assert status == ExitStatus.USAGE
    one_line_error(err)


@pytest.mark.parametrize("command", ["replay", "verify"])
def test_r2_a_fifo_with_no_writer_is_refused_not_waited_for(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from prefixspec.formats import trace as trace_format

    monkeypatch.setattr(trace_format, "PIPE_WAIT", 0.2)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    status, _, err = run([command, str(fifo)], capsys)
    assert status == ExitStatus.USAGE
    one_line_error(err, "nothing was written to it")


def test_r3_an_endless_trace_ends_at_the_size_limit(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from prefixspec.formats import trace as trace_format

    monkeypatch.setattr(trace_format, "LARGEST_TRACE", 4 << 20)
    for command in ("replay", "verify"):
        status, _, err = run([command, "/dev/zero"], capsys)
        assert status == ExitStatus.USAGE
        one_line_error(err, "/dev/zero", "more than 4 MiB")


def test_r4_a_deleted_working_directory_is_one_line(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    command = f"cd {shlex.quote(str(gone))} && rmdir {shlex.quote(str(gone))} && exec {shlex.quote(sys.executable)} -m prefixspec replay x"
    completed = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert completed.returncode == ExitStatus.USAGE
    one_line_error(completed.stderr, "working directory no longer exists")


def test_r5_two_checks_in_one_folder_never_share_a_counterexample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "a folder with a space, and é"
    for target in ("stateful_tests.broken_caches:lock_pins_nothing", "stateful_tests.broken_caches:lock_pins_nothing"):
        status, printed, _ = run(["check", target, "--quiet", "--profile", "dev", "--steps", "30", "--out", str(out)], capsys)
        assert status == ExitStatus.FAILED
    traces = sorted(path.name for path in out.iterdir())
    assert len(traces) == len(set(traces)) >= 2 and any(name.endswith("-2.trace") for name in traces), traces
    line = next(line for line in printed.splitlines() if "reproduce with:" in line)  # the second run's: its own file
    replayed = shlex.split(line.split("reproduce with: ")[1])  # quoted: the folder's space splits nothing
    assert replayed[:2] == ["prefixspec", "replay"] and replayed[2].endswith("-2.trace") and Path(replayed[2]).exists()
