"""Issue 13's reproducers, one by one, each with the outcome the command line documents for it.

The ids are the issue's: T (trace files), P (Python targets), E (engines),
C (options); R (files and places) are ``test_robustness_files.py``'s.  Most
run ``main`` in this process; what only a process of its own shows (a real
Ctrl-C, processes left behind, a target's prints beside the report) runs in one.  ``test_fuzz.py`` runs the same families by the
hundred.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prefixspec.commands.main import main
from prefixspec.exit_status import ExitStatus
from prefixspec.shipped import GOLDEN_TRACE
from stateful_tests.engines import CALL_LIMIT, SERVE
from stateful_tests.hostile_targets import HOSTILE, PRINTED
from stateful_tests.leftovers import end_marked, marked, unique_seconds

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = str(GOLDEN_TRACE)
HOSTILE_MODULE = "stateful_tests.hostile_targets"


def cpu_seconds() -> float:
    """CPU time of this process and of its children that ended (the supervised child that ran the check, its engines)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``prefixspec ARGV`` in this process: its exit status (argparse's SystemExit too), stdout and stderr."""
    try:
        status = main(argv)
    except SystemExit as exit:
        status = int(exit.code or 0)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return status, captured.out, captured.err


def one_line_error(err: str, *words: str) -> None:
    assert err.startswith("prefixspec: ") and err.count("\n") == 1, err
    for word in words:
        assert word in err, err


def alive(pid: int) -> bool:
    """The process ``pid`` exists and is not a zombie (a killed orphan waits for init to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def gone_soon(process: int | str) -> bool:
    """The process ``pid``, or every one holding ``token`` in its command line, gone within a minute (a guard against
    waiting for ever, not a budget: a stopped process is gone at once)."""

    def there() -> bool:
        return alive(process) if isinstance(process, int) else bool(marked(process))

    deadline = time.monotonic() + 60
    while there() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not there()


# Trace files ----------------------------------------------------------------------------------------

TRACE_FORMAT_ERRORS = [
    ("T1", b"prefixspec-trace 1\nblock_size 2\n# caf\xe9\nstats\n", ["line 3", "not UTF-8"]),
    ("T2", b"prefixspec-trace 1\nblock_size 0\n", ["line 2", "block_size must be >= 1"]),
    ("T3 superscript", "prefixspec-trace 1\nblock_size ²\n".encode(), ["line 2", "block_size"]),
    ("T3 5000 digits", b"prefixspec-trace 1\nblock_size " + b"9" * 5000 + b"\n", ["line 2", "block_size"]),
    ("T5", "prefixspec-trace 1\nblock_size 2\n# a \f b \r c \u2028 d\nfrob\n".encode(), ["line 4", "unknown call 'frob'"]),
]


@pytest.mark.parametrize("command", ["replay", "verify"])
@pytest.mark.parametrize(("case", "text", "words"), TRACE_FORMAT_ERRORS, ids=[case[0] for case in TRACE_FORMAT_ERRORS])
def test_a_trace_that_cannot_be_read_is_one_line_naming_the_line(
    command: str, case: str, text: bytes, words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "bad.trace"
    trace.write_bytes(text)
    status, _, err = run([command, str(trace)], capsys)
    assert status == 2
    one_line_error(err, str(trace), *words)


def test_t5_separators_inside_a_comment_are_part_of_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "odd.trace"
    trace.write_text("prefixspec-trace 1\nblock_size 2\n# a \f b \r c \u2028 d \x85 e\ncached_blocks -> 0\n", encoding="utf-8")
    assert run(["replay", str(trace)], capsys)[0] == 0


@pytest.mark.parametrize("recorded", ["[²]", "[" + "9" * 5000 + "]", "²", "9" * 5000, "1.0", "1e0", "1.0000000000000001", "١", "+1", "01"])
def test_t4_verify_of_an_odd_recorded_number_is_a_divergence(recorded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "recorded.trace"
    call = "evict 1" if recorded.startswith("[") else "cached_blocks"
    trace.write_text(f"prefixspec-trace 1\nblock_size 2\nn1 = insert [1 2 3] [5] -> new []\n{call} -> {recorded}\n", encoding="utf-8")
    for command in (["verify", str(trace)], ["verify", str(trace), "--shrink", "--out", str(tmp_path / "cut.trace")]):
        status, out, _ = run(command, capsys)
        assert status == 1 and "diverge" in out


@pytest.mark.parametrize("recorded", ["0.4", "0.40", "4e-1", ".4", "0.40000000000000002"])
def test_t4_verify_of_a_hit_rate_in_another_languages_float_printing_agrees(recorded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The negative control of the typed comparison: a float's own tolerance still holds where the spec's result is a float."""
    trace = tmp_path / "recorded.trace"
    trace.write_text(f"prefixspec-trace 1\nblock_size 2\nn1 = insert [1 2 3] [5] -> new []\nn2 = match [1 2 3]\nn3 = match [9 9]\nhit_rate -> {recorded}\n", encoding="utf-8")
    status, out, _ = run(["verify", str(trace)], capsys)
    assert status == ExitStatus.PASSED, out


def test_t8_verify_shows_no_result_for_a_call_without_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "recorded.trace"
    trace.write_text("prefixspec-trace 1\nblock_size 2\nn1 = insert [1 2 3] [5]\nevict 1\ncached_blocks -> 7\n", encoding="utf-8")
    status, out, _ = run(["verify", str(trace)], capsys)
    assert status == 1
    assert "  line 4: evict 1\n" in out and "None" not in out


# Python targets ---------------------------------------------------------------------------------------

TARGET_CASES = [
    ("P1 call", "interrupts_in_stats"),
    ("P10 __getattr__ raises", "attributes_raise"),
    ("P1 factory", "interrupts_in_factory"),
    ("P1 root", "root_interrupts"),
    ("P2 call", "exits_in_stats"),
    ("P2 call exit 0", "exits_zero_in_evict"),
    ("P2 factory", "exits_in_factory"),
    ("P3 None", "snapshot_none"),
    ("P3 dict", "snapshot_dict"),
    ("P3 == raises", "snapshot_equality_raises"),
    ("P4 BaseException", "base_exception_in_evict"),
    ("P4 GeneratorExit", "generator_exit_in_evict"),
    ("P5", "root_raises"),
    ("P6 call", "hangs_in_stats"),
    ("P6 factory", "hangs_in_factory"),
    ("P7 generator", "evict_returns_generator"),
    ("P7 tuple", "evict_returns_tuple"),
    ("P7 float", "cached_blocks_float"),
    ("P7 text", "block_size_text"),
]


@pytest.mark.parametrize(("case", "name"), TARGET_CASES, ids=[case[0] for case in TARGET_CASES])
def test_a_misbehaving_python_target_gets_its_documented_outcome(
    case: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = HOSTILE[name]
    target = f"{HOSTILE_MODULE}:{name}"
    status, out, err = run(["check", target, "--quiet", "--timeout", "1", "--steps", "30", "--out", str(tmp_path)], capsys)
    assert status == hostile.status  # a hang is stopped at --timeout, the check never runs on (it would pass: status 0)
    assert hostile.words in out + err
    if status == 2:
        one_line_error(err)


@pytest.mark.parametrize("behaviour", ["exit", "interrupt", "base"])
def test_p1_p2_a_target_that_exits_or_interrupts_its_own_import_is_usage(behaviour: str, tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "prefixspec", "check", "stateful_tests.hostile_import:make_cache", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,  # a guard against a hang, not a budget: the import exits at once
        cwd=ROOT,
        env={**os.environ, "HOSTILE_IMPORT": behaviour},
    )
    assert completed.returncode == 2
    one_line_error(completed.stderr, "cannot import 'stateful_tests.hostile_import'")


def interruptible(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    """``prefixspec ARGV`` in a session of its own, as a terminal's foreground job, SIGINT at its default."""
    return subprocess.Popen(
        [sys.executable, "-m", "prefixspec", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        start_new_session=True,
        # A pytest worker may ignore SIGINT; a shell's child starts with the default, so Python installs its handler.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_until_running(pid: int) -> None:
    """Until the command has started its supervised child (its imports and options done): counted, not timed."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    for _ in range(6000):  # ten minutes of looks: a guard against a command that never starts, not a budget
        try:
            if children.read_text().split():
                return
        except OSError:
            return
        time.sleep(0.1)


HELPER = unique_seconds(1018)
"""The engine's helper's sleep: its token ends every one of them after the test, whatever the test saw."""


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "--quiet"],
        ["check", f"{HOSTILE_MODULE}:hangs_in_stats", "--quiet", "--timeout", "60"],
        ["check", "--quiet", "--exec", f"sleep {HELPER} & {SERVE}"],
    ],
    ids=["impl", "a hanging target", "an engine with a helper"],
)
def test_p1_a_real_ctrl_c_stops_cleanly_with_130(argv: list[str], tmp_path: Path) -> None:
    command = interruptible([*argv, "--out", str(tmp_path / "out")], tmp_path)
    try:
        wait_until_running(command.pid)
        time.sleep(1)  # inside the run: the golden trace, or the target's hang
        os.killpg(command.pid, signal.SIGINT)  # the terminal signals the whole foreground group
        out, err = command.communicate(timeout=120)  # a guard against a hang, not a budget: the stop itself is STOP_WITHIN
        assert command.returncode == ExitStatus.INTERRUPTED, out + err
        assert err.strip().splitlines()[-1] == "prefixspec: interrupted (Ctrl-C); the stages that finished are printed above, the one running was dropped"
        assert out.rstrip().splitlines()[-1].startswith("result: STOPPED, interrupted (Ctrl-C)")
        assert "Traceback" not in out + err and "FAILED" not in out
        assert gone_soon(HELPER)
    finally:
        stop_all(command, HELPER)


def test_a_sigterm_stops_cleanly_with_143_and_ends_the_engines(tmp_path: Path) -> None:
    helper = unique_seconds(1019)
    command = interruptible(["check", "--quiet", "--out", str(tmp_path / "out"), "--exec", f"sleep {helper} & {SERVE}"], tmp_path)
    try:
        wait_until_running(command.pid)
        time.sleep(1)
        os.kill(command.pid, signal.SIGTERM)  # as a CI job's timeout does, to the checker alone
        out, err = command.communicate(timeout=120)  # a guard against a hang, not a budget
        assert command.returncode == ExitStatus.TERMINATED, out + err
        assert err.strip().splitlines()[-1].startswith("prefixspec: terminated (SIGTERM); the stages that finished are printed above")
        assert "FAILED" not in out
        assert gone_soon(helper)
    finally:
        stop_all(command, helper)


def stop_all(command: subprocess.Popen[str], helper: str) -> None:
    """After a test, pass or fail: the command's group and every helper its engines started, ended."""
    if command.poll() is None:
        os.killpg(command.pid, signal.SIGKILL)
        command.communicate()
    end_marked(helper)


def test_p8_a_targets_prints_stay_off_the_report(tmp_path: Path) -> None:
    """The golden trace's 442 calls, each printing: a replay shows it in seconds (a whole check took minutes on a loaded machine)."""
    completed = subprocess.run(
        [sys.executable, "-m", "prefixspec", "replay", GOLDEN, "--target", f"{HOSTILE_MODULE}:prints_in_every_call"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert completed.returncode == ExitStatus.PASSED
    assert completed.stdout.count("\n") == 1 and "every result and snapshot agrees" in completed.stdout
    assert PRINTED not in completed.stdout
    assert PRINTED in completed.stderr


def test_p9_an_empty_target_is_usage(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["check", ""], ["identify", ""], ["replay", GOLDEN, "--target", ""]):
        status, _, err = run(argv, capsys)
        assert status == 2
        one_line_error(err, "must look like module:factory")


# Engines ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "status", "start"),
    [
        ("sleep {helper} & echo $! > child.pid; exit 0", 2, "2"),
        (f"{SERVE} --misbehave fork_and_exit --after 5 --pidfile {{folder}}/child.pid", 1, "10"),
        (f"sleep {{helper}} & echo $! > child.pid; {SERVE}", 0, "10"),
    ],
    ids=["a shell that backgrounds sleep and exits", "an engine that forks and exits", "a script that backgrounds a helper"],
)
def test_e1_every_process_an_engine_started_is_stopped(
    engine: str, status: int, start: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    # What the suite waits out is each case's hang: the shell's helper holds the pipe, so its handshake never comes
    # (--start-timeout 2; it never starts anyway); the forked child hangs in a call (CALL_LIMIT).  An engine that
    # starts has 10 s to.
    helper = unique_seconds(1014)
    argv = ["replay", GOLDEN, "--exec", engine.format(folder=shlex.quote(str(tmp_path)), helper=helper), "--timeout", CALL_LIMIT, "--start-timeout", start]
    try:
        assert run(argv, capsys)[0] == status
        assert gone_soon(int((tmp_path / "child.pid").read_text()))
        assert gone_soon(helper)  # each start of the engine started one; the pid file names the last
    finally:
        end_marked(helper)
        end_marked(str(tmp_path))  # the forked engine: its command line names its pid file here


@pytest.mark.parametrize("command", ["", "   "])
def test_e2_an_empty_exec_is_usage(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(["check", "--exec", command], capsys)
    assert status == 2
    one_line_error(err, "--exec needs a command")


@pytest.mark.parametrize("seconds", ["inf", "1e309", "1e12", "nan", "0", "-1"])
def test_e3_a_timeout_that_is_no_number_of_seconds_is_usage(seconds: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(["check", "--exec", "true", "--timeout", seconds], capsys)
    assert status == 2 and "--timeout" in err


def test_e4_a_long_stderr_keeps_its_first_and_last_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(["replay", GOLDEN, "--exec", f"{SERVE} --misbehave noisy_crash --after 5"], capsys)
    assert status == 1
    report = out + err
    assert "serve.py: panicked at the first line of the log | log line 0" in report
    assert "log line 399: " in report and "serve.py: the last words of the log" in report


def test_e5_a_number_longer_than_python_reads_is_a_protocol_report(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(["replay", GOLDEN, "--exec", f"{SERVE} --misbehave huge_number --after 5"], capsys)
    assert status == 1
    assert "gave a malformed answer" in out + err and "crash ValueError" not in out + err


# Options ------------------------------------------------------------------------------------------------


def test_c1_an_out_that_is_a_file_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    existing = tmp_path / "report.txt"
    existing.write_text("keep me\n")
    for argv in (["check", "stateful_tests.broken_caches:lock_pins_nothing"], ["identify"], ["hunt"]):
        started = cpu_seconds()
        status, out, err = run([*argv, "--out", str(existing)], capsys)
        assert status == 2 and out == ""
        one_line_error(err, str(existing), "is a file")
        assert cpu_seconds() - started < 5  # CPU of this process: refused before any stage ran
    assert existing.read_text() == "keep me\n"


def test_c2_a_json_report_into_a_missing_folder_is_refused_before_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(["check", "--json", str(tmp_path / "no" / "report.json"), "--out", str(tmp_path)], capsys)
    assert status == 2 and out == ""
    one_line_error(err, "no folder")


def test_c3_a_catalogue_that_is_not_utf8_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalogue = tmp_path / "latin1.toml"
    catalogue.write_bytes('package = "impl"\n# caf\xe9\n'.encode("latin-1"))
    status, _, err = run(["hunt", str(catalogue), "--out", str(tmp_path)], capsys)
    assert status == 2
    one_line_error(err, "line 2", "not UTF-8")


@pytest.mark.parametrize("steps", ["1000000000000", "1000001", "9" * 5000])
def test_c4_steps_past_the_documented_maximum_are_refused(steps: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(["check", "--steps", steps], capsys)
    assert status == 2 and "--steps" in err
