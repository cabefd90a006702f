"""The grid of README's exit-status table: whatever a Python target does to its process, wherever in a run.

A target that ends its process (``os._exit`` with any status, the C
library's ``exit()``, a signal, an abort), hangs past its alarm, closes its
stdout or prints from a thread: at its import and in its factory that is a
usage error (exit 2); in a call of any stage, and while a counterexample is
shrunk, a report naming the call (exit 1); ``0`` only with ``result: PASSED``
printed.  A Ctrl-C or SIGTERM in any stage stops the run within two seconds
(by construction: the child is killed ``supervised.STOP_WITHIN`` seconds after the stop, whatever it does; no
test here times it), with the finished stages printed.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import settings

from prefixspec.commands.main import main
from prefixspec.exit_status import ExitStatus
from prefixspec.running.stages import STAGES, RunPlan, run_stage
from prefixspec.targets.named import load_target
from prefixspec.targets.supervised import announce_stage, supervise
from prefixspec.shipped import GOLDEN_TRACE
from prefixspec.vocabulary import counted
from stateful_tests.engines import SERVE
from stateful_tests.leftovers import end_marked, marked, unique_seconds

ROOT = Path(__file__).resolve().parent.parent
TARGET = "stateful_tests.hostile_targets:ends_its_process"
SHRINKING = "stateful_tests.hostile_targets:ends_while_shrinking"
ENDINGS = {
    "exit0": "exited with status 0 without a report",
    "exit3": "exited with status 3 without a report",
    "kill": "was killed by signal SIGKILL",
    "abort": "was killed by signal SIGABRT",
    "c_exit": "exited with status 0 without a report",
}
"""What ``hostile_targets.ends_its_process`` does (``HOSTILE_END``), and the words of its report."""


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return status, captured.out, captured.err


OUT_OF_MEMORY = "ran out of memory (MemoryError)"
"""The words of ``HOSTILE_END=oom`` (``hostile_memory``): not an end of the process but a call that cannot finish, with the
memory limit still on the process that must write the report."""

LATE_CELLS = [("extremes", "c_exit"), ("scale", "kill")]
"""The stages after the machines, through the whole command: one deed each; the rest of their row is
``test_every_stage_is_supervised``'s."""


@pytest.mark.parametrize(("stage", "end"), [(stage, end) for stage in ("golden trace", "call machine") for end in ENDINGS] + LATE_CELLS)
def test_an_end_of_the_process_in_a_call_is_a_report_naming_the_call(
    end: str, stage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOSTILE_END", end)
    monkeypatch.setenv("HOSTILE_STAGE", stage)
    # Its stage alone (--stage): the stages before it took most of the cell's time (12 s of CPU before the scale stage).
    status, out, err = run(["check", TARGET, "--quiet", "--profile", "dev", "--steps", "30", "--stage", stage, "--out", str(tmp_path)], capsys)
    assert status == ExitStatus.FAILED, out + err
    assert f"only the stages {stage})" in out
    assert f"ended the checker's process: it {ENDINGS[end]}" in out and "in its match_prefix() at call" in out
    assert f"during the {stage} stage" in out
    assert out.rstrip().endswith("result: FAILED in 0.0 s") or "result: FAILED" in out
    assert "result: PASSED" not in out


@pytest.mark.parametrize("end", ENDINGS)
def test_an_end_of_the_process_in_the_factory_is_usage(end: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOSTILE_END", end)
    monkeypatch.setenv("HOSTILE_STAGE", "factory")
    status, out, err = run(["replay", str(GOLDEN_TRACE), "--target", TARGET], capsys)
    assert status == ExitStatus.USAGE and out == ""
    assert err.startswith(f"prefixspec: the target `{TARGET}` cannot be loaded") and err.count("\n") == 1, err
    assert ENDINGS[end] in err and f"{TARGET}(2)" in err


@pytest.mark.parametrize(("behaviour", "words"), [("os_exit0", "exited with status 0"), ("kill", "killed by signal SIGKILL")])
def test_an_end_of_the_process_at_import_is_usage(behaviour: str, words: str) -> None:
    """In a process of its own: this one may have imported the module already (the fuzz plans read its table)."""
    completed = subprocess.run(
        [sys.executable, "-m", "prefixspec", "replay", str(GOLDEN_TRACE), "--target", "stateful_tests.hostile_import:make_cache"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HOSTILE_IMPORT": behaviour},
    )
    status, out, err = completed.returncode, completed.stdout, completed.stderr
    assert status == ExitStatus.USAGE and out == ""
    assert "cannot be loaded" in err and words in err and "cannot import" not in err, err


@pytest.mark.parametrize("end", ["exit0", "kill"])
def test_an_end_of_the_process_in_a_replay_is_a_report(end: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOSTILE_END", end)
    monkeypatch.setenv("HOSTILE_STAGE", "the replay")
    status, out, _ = run(["replay", str(GOLDEN_TRACE), "--target", TARGET], capsys)
    assert status == ExitStatus.FAILED
    assert ENDINGS[end] in out and "during the replay of" in out and out.rstrip().endswith("result: FAILED")


@pytest.mark.parametrize("end", ["exit0", "kill", "c_exit"])
def test_an_end_of_the_process_while_shrinking_is_a_report(
    end: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOSTILE_END", end)
    status, out, _ = run(["check", SHRINKING, "--quiet", "--profile", "dev", "--out", str(tmp_path)], capsys)
    assert status == ExitStatus.FAILED
    assert ENDINGS[end] in out and "during the golden trace stage" in out
    assert not list(tmp_path.iterdir())  # nothing half written: the shrinking never finished


MEMORY_CELLS = {
    "factory": (["replay", str(GOLDEN_TRACE), "--target", TARGET], "factory", ExitStatus.USAGE),
    "a call of a check": (["check", TARGET, "--quiet", "--profile", "dev", "--steps", "30"], "call machine", ExitStatus.FAILED),
    "a replay": (["replay", str(GOLDEN_TRACE), "--target", TARGET], "the replay", ExitStatus.FAILED),
    "shrinking": (["check", SHRINKING, "--quiet", "--profile", "dev"], "", ExitStatus.FAILED),
}
"""Where ``HOSTILE_END=oom`` runs the target out of memory, through the command: its argv, ``HOSTILE_STAGE``, the status."""


@pytest.mark.parametrize("place", MEMORY_CELLS)
def test_running_out_of_memory_is_a_report_wherever_it_happens(
    place: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The memory limit falls on the supervised child alone: this process's own limit is what it was."""
    import resource

    argv, stage, expected = MEMORY_CELLS[place]
    monkeypatch.setenv("HOSTILE_END", "oom")
    monkeypatch.setenv("HOSTILE_STAGE", stage)
    limit = resource.getrlimit(resource.RLIMIT_AS)
    status, out, err = run([*argv, *(["--out", str(tmp_path)] if argv[0] == "check" else [])], capsys)
    assert status == expected, out + err
    assert OUT_OF_MEMORY in (err if expected == ExitStatus.USAGE else out), out + err
    assert "checker ran out of memory" not in out + err and "result: PASSED" not in out
    assert resource.getrlimit(resource.RLIMIT_AS) == limit


@pytest.mark.parametrize("end", [*ENDINGS, "oom"])
@pytest.mark.parametrize("stage", list(STAGES))
def test_every_stage_is_supervised(stage: str, end: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each stage alone in a supervised child, every deed (the command runs the stages in order; the earlier ones take minutes).

    An end of the process is the supervisor's to report: the child ends with no word, in the call its beacon names.
    Running out of memory is the stage's own report, written by the child under its memory limit.
    """
    monkeypatch.setenv("HOSTILE_END", end)
    monkeypatch.setenv("HOSTILE_STAGE", stage)
    plan = replace(RunPlan.of_profile("dev"), base=settings(max_examples=3), min_engine_steps=30)
    written = tmp_path / "failure.txt"

    def work() -> int:
        factory = load_target(TARGET, 5.0)
        announce_stage(stage, None)
        result = run_stage(stage, factory, plan)
        written.write_text(result.failure, encoding="utf-8")
        return ExitStatus.FAILED if result.aborted else ExitStatus.PASSED

    ended = supervise(work, 5.0)
    if end == "oom":
        assert ended.status == ExitStatus.FAILED, ended
        failure = written.read_text(encoding="utf-8")
        assert f"{OUT_OF_MEMORY} in its match_prefix()" in failure and "the check cannot go on" in failure, failure
        return
    assert ended.status is None and ended.how.startswith(ENDINGS[end])
    assert ended.reading.stage == stage
    assert "match_prefix()" in ended.where() and "call" in ended.where()
    assert not written.exists()


@pytest.mark.parametrize(("end", "words"), [("mask_alarm", "ran on past the alarm"), ("retry_alarm", "ran on past the alarm")])
def test_a_call_that_outlasts_its_alarm_is_stopped(
    end: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOSTILE_END", end)
    status, out, _ = run(["check", TARGET, "--quiet", "--timeout", "0.5", "--out", str(tmp_path)], capsys)
    assert status == ExitStatus.FAILED
    assert "hangs: in its match_prefix() at call" in out and words in out


@pytest.mark.parametrize("end", ["close_stdout", "thread_prints", "chdir"])
def test_a_target_that_closes_its_stdout_prints_from_a_thread_or_moves_away_still_passes(
    end: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOSTILE_END", end)
    monkeypatch.chdir(tmp_path)
    status, out, err = run(["replay", str(GOLDEN_TRACE), "--target", TARGET], capsys)
    assert status == ExitStatus.PASSED, out + err
    assert out.count("\n") == 1 and "every result and snapshot agrees" in out  # the report, and nothing the target printed


def stoppable(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "prefixspec", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
@pytest.mark.parametrize(("target", "stage", "finished"), [(TARGET, "golden trace", 0), (TARGET, "call machine", 1), (SHRINKING, "", 0)], ids=["golden", "call machine", "shrinking"])
def test_a_stop_in_any_stage_ends_the_run_within_two_seconds_and_prints_what_finished(
    signum: int, target: str, stage: str, finished: int, tmp_path: Path
) -> None:
    mark = tmp_path / "reached"
    env = {"HOSTILE_END": "wait", "HOSTILE_MARK": str(mark), "HOSTILE_STAGE": stage}
    command = stoppable(["check", target, "--quiet", "--profile", "dev", "--timeout", "3600", "--out", str(tmp_path / "out")], tmp_path, env)
    try:
        for _ in range(6000):  # the target writes the mark where it waits (ten minutes of looks: a guard against a hang, not a budget)
            if mark.exists() or command.poll() is not None:
                break
            time.sleep(0.1)
        assert mark.exists(), command.communicate()
        waiting = int(mark.read_text())  # written whole: the target renames it into place
        os.kill(command.pid, signum)
        out, err = command.communicate(timeout=600)  # a guard against a hang, not a budget: the child is killed STOP_WITHIN after the stop
    finally:
        if command.poll() is None:  # a failed test ends its command and the child, whose group is the child's pid
            command.send_signal(signal.SIGTERM)
            command.communicate(timeout=600)
    assert command.returncode == (ExitStatus.INTERRUPTED if signum == signal.SIGINT else ExitStatus.TERMINATED), out + err
    assert "Traceback" not in out + err and "FlakyFailure" not in out + err and "FAILED" not in out
    # The count as words say it: "after 1 finished stage", "after 0 finished stages" (it said "stage(s)").
    assert out.rstrip().splitlines()[-1].startswith("result: STOPPED") and out.rstrip().endswith(f"after {counted(finished, 'finished stage')}")
    assert out.count(" ok ") == finished
    assert not Path(f"/proc/{waiting}").exists()  # the child that ran the target: stopped and reaped


@pytest.mark.parametrize("make_own", ["setsid", "setpgid"])
@pytest.mark.parametrize("reaping", [True, False], ids=["supervised", "negative control: no subreaper"])
def test_an_engines_helper_in_a_group_or_session_of_its_own_is_ended(
    make_own: str, reaping: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every helper of every start of the engine (the replay starts it more than once) by its token in its command
    line: none alive after a supervised run; in the negative control some outlive it, and are ended here, always."""
    from prefixspec.targets import supervised

    if not reaping:
        monkeypatch.setattr(supervised, "set_subreaper", lambda on: False)
    seconds = unique_seconds(1031)
    own = f"setsid sleep {seconds}" if make_own == "setsid" else f"{shlex.quote(sys.executable)} -c 'import os,time; os.setpgid(0,0); time.sleep({seconds})'"
    try:
        status, _, _ = run(["replay", str(GOLDEN_TRACE), "--exec", f"{own} & {SERVE}", "--timeout", "30"], capsys)
        assert status == ExitStatus.PASSED
        if not reaping:  # a helper started with `&` may still be starting (setsid forks) when the run ends: wait for it
            for _ in range(50):
                if marked(seconds):
                    break
                time.sleep(0.1)
        assert bool(marked(seconds)) is not reaping
    finally:
        for _ in range(50):  # what the negative control shows surviving, and anything a failed run left
            end_marked(seconds)  # (setsid may fork its child while the first end runs: ended again until none is left)
            if not marked(seconds):
                break
            time.sleep(0.1)
    assert not marked(seconds)


def test_a_stop_while_the_command_line_is_still_being_built_is_a_stop(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """On a loaded machine a Ctrl-C can land while argparse builds the parser: exit 130 and one line, no traceback."""
    import prefixspec.commands.main as command_line

    def interrupted() -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(command_line, "build_parser", interrupted)
    assert command_line.main(["check"]) == ExitStatus.INTERRUPTED
    assert capsys.readouterr().err == "prefixspec: interrupted (Ctrl-C); nothing was reported\n"
