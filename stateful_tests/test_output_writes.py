"""A write that fails mid-run (a full disk): reported in one paragraph, with its documented status, nothing half-written.

The disk is filled by an ``OSError(ENOSPC)`` injected where the bytes reach
it (``os.fsync``, or ``os.write`` halfway through the text), since no small
filesystem can be mounted here; ``/dev/full`` is the real one for the paths
that are no regular file.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

import impl
from prefixspec.commands.main import main
from prefixspec.running.report import write_whole
from prefixspec.running.stages import RunPlan, run_stage
from stateful_tests.broken_caches import lock_pins_nothing
from stateful_tests.test_verify import record_engine_run

TEXT = "prefixspec-trace 1\n" + "evict 0 -> []\n" * 5000


def disk_full(*_: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def plain_write(path: Path, text: str) -> None:
    """How a file was written before: in place (the negative control of the injection)."""
    with open(path, "w", encoding="utf-8") as written:
        written.write(text)
        written.flush()
        os.fsync(written.fileno())


@pytest.mark.parametrize("writer", [write_whole, plain_write], ids=["write_whole", "in place (negative control)"])
def test_a_write_that_fails_leaves_the_old_file_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: Callable[[Path, str], None]) -> None:
    old, new = tmp_path / "old.trace", tmp_path / "new.trace"
    old.write_text("the earlier run's trace\n")
    monkeypatch.setattr(os, "fsync", disk_full)
    for path in (old, new):
        with pytest.raises(OSError):
            writer(path, TEXT)
    whole = old.read_text() == "the earlier run's trace\n" and not new.exists() and sorted(tmp_path.iterdir()) == [old]
    assert whole == (writer is write_whole), sorted(p.name for p in tmp_path.iterdir())


def test_a_device_is_written_in_place_and_its_failure_raised(tmp_path: Path) -> None:
    with pytest.raises(OSError) as raised:
        write_whole("/dev/full", TEXT)
    assert raised.value.errno == errno.ENOSPC
    assert Path("/dev/full").exists() and not Path("/dev/full").is_file()  # never renamed over


def test_a_counterexample_whose_write_fails_mid_stage_is_reported_and_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "counterexamples"
    monkeypatch.setattr(os, "fsync", disk_full)
    stage = run_stage("golden trace", lock_pins_nothing, RunPlan(base=settings(), out_dir=out))
    assert not stage.passed and not stage.aborted
    assert "could not be written" in stage.failure and "No space left on device" in stage.failure
    assert stage.counterexample == "" and stage.counterexample_calls >= 1
    assert list(out.iterdir()) == []  # neither the claimed name nor a temporary file is left
    monkeypatch.undo()
    again = run_stage("golden trace", lock_pins_nothing, RunPlan(base=settings(), out_dir=out))
    assert again.counterexample and Path(again.counterexample).read_text().startswith("prefixspec-trace")  # the control


def test_verify_shrink_whose_out_fails_is_usage_with_the_divergence_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = tmp_path / "run.trace"
    recorded.write_text(record_engine_run(lock_pins_nothing(2)))
    cut = tmp_path / "cut.trace"
    monkeypatch.setattr(os, "fsync", disk_full)
    assert main(["verify", str(recorded), "--shrink", "--out", str(cut)]) == 2
    output = capsys.readouterr()
    assert "diverge from the spec at line" in output.out
    assert output.err.count("\n") == 1 and "could not be written" in output.err and "Traceback" not in output.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.trace"]
    assert main(["verify", str(recorded), "--shrink", "--out", "/dev/full"]) == 2  # a real full disk
    assert "No space left on device" in capsys.readouterr().err


def test_a_sound_run_writes_no_temporary_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recorded = tmp_path / "run.trace"
    recorded.write_text(record_engine_run(impl.RadixCache(2)))
    assert main(["verify", str(recorded)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["run.trace"]


def test_a_pipe_named_by_its_descriptor_is_written_in_place() -> None:
    """``/proc/self/fd/N`` of a pipe (``/dev/stderr``, a shell's ``>(jq .)``): its real path is ``pipe:[N]``, which
    names no file, so the write took it for a new regular file and failed beside it, after the whole run."""
    read, write = os.pipe()
    try:
        write_whole(f"/proc/self/fd/{write}", "a report\n")
        assert os.read(read, 100) == b"a report\n"
    finally:
        os.close(read)
        os.close(write)


def test_check_json_to_its_own_stdout_is_refused_before_the_run_and_stderr_takes_it(tmp_path: Path) -> None:
    """``--json /dev/stdout`` (or a link to it): the supervised child that writes the JSON has a stdout of its own,
    relayed to stderr, and the report is on stdout besides: usage, exit 2, before any stage.  The control:
    ``--json /dev/stderr`` is written, a whole JSON report on stderr, and the run passes."""
    import json
    import subprocess
    import sys

    link = tmp_path / "out.json"
    link.symlink_to("/dev/stdout")
    run = [sys.executable, "-m", "prefixspec", "check", "--profile", "dev", "--stage", "golden-trace", "--quiet", "--out", str(tmp_path)]
    for named in ("/dev/stdout", "/dev/fd/1", str(link)):
        refused = subprocess.run([*run, "--json", named], capture_output=True, text=True, timeout=600)
        assert refused.returncode == 2 and refused.stdout == "", refused
        assert refused.stderr == f"prefixspec: --json {named}: it is the stdout the report is printed on; give --json a file of its own\n"
    written = subprocess.run([*run, "--json", "/dev/stderr"], capture_output=True, text=True, timeout=600)
    assert written.returncode == 0 and "result: PASSED in " in written.stdout and "{" not in written.stdout, written
    assert json.loads(written.stderr)["stages"][0]["passed"] is True


def test_verify_shrink_out_to_stdout_is_still_written_there(tmp_path: Path) -> None:
    """verify runs in the command's own process: ``--out /dev/stdout`` is its stdout, and the cut follows the report."""
    import subprocess
    import sys

    recorded = tmp_path / "recorded.trace"
    recorded.write_text("prefixspec-trace 1\nblock_size 2\nn1 = insert [1 1 2 2] [3 4] -> new []\ncached_blocks -> 1\n", encoding="utf-8")
    ran = subprocess.run([sys.executable, "-m", "prefixspec", "verify", str(recorded), "--shrink", "--out", "/dev/stdout"], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 1 and "\ncached_blocks -> 1\n" in ran.stdout.split("Cut by `prefixspec verify --shrink`", 1)[1], ran
