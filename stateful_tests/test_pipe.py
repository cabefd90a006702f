"""``prefixspec check --exec``: an engine over the line protocol, and the report for every way an engine can break it."""

from __future__ import annotations

import os

import subprocess
import sys
import time
from pathlib import Path

import pytest

from spec.api import InvalidArgument, NotLocked, UnknownNode
from prefixspec.commands.main import main
from spec.model import SpecCache
from prefixspec.targets.pipe import EngineProtocolError, PipeEngine
from stateful_tests.engines import CALL_LIMIT, SERVE

ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds() -> float:
    """CPU time of this process and of its children that ended (the supervised child that ran the check, its engines)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def misbehaving(kind: str, after: int) -> str:
    return f"{SERVE} --misbehave {kind} --after {after}"


@pytest.fixture
def engine() -> PipeEngine:
    return PipeEngine(SERVE, timeout=10)


# A correct engine ------------------------------------------------------------------------------


def test_a_pipe_cache_answers_as_the_spec_does(engine: PipeEngine) -> None:
    with engine:
        cache, spec = engine(2), SpecCache(2)
        for each in (cache, spec):
            inserted = each.insert([1, 2, 3, 4, 5], [10, 11])
            assert inserted.duplicates == []
            found = each.match_prefix([1, 2, 3, 4, 9])
            assert (found.matched_tokens, found.blocks) == (4, [10, 11])
            each.lock(found.node)
            each.lock(each.root)
            assert each.evict(5) == []
            each.unlock(found.node)
            with pytest.raises(NotLocked):
                each.unlock(found.node)
            with pytest.raises(InvalidArgument):
                each.match_prefix([1, -1])
            with pytest.raises(InvalidArgument):
                each.evict(-1)
            assert each.evict(1) == [10, 11]
            with pytest.raises(UnknownNode):
                each.lock(found.node)  # evicted
        assert cache.snapshot() == spec.snapshot()
        assert cache.stats() == spec.stats()
        assert cache.hit_rate() == spec.hit_rate()
        with pytest.raises(UnknownNode):
            cache.lock(engine(2).root)  # another cache's node is never sent: the engine never issued it


def test_caches_reuse_engine_processes(engine: PipeEngine) -> None:
    with engine:
        for _ in range(30):
            engine(1).insert([1, 2], [7, 8])
        assert engine.started <= 2


def test_replay_exec_runs_the_golden_trace_on_an_engine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(ROOT / "fixtures" / "radix_trace.txt"), "--exec", SERVE]) == 0
    assert "every result and snapshot agrees" in capsys.readouterr().out


def test_exec_and_a_target_together_are_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "impl:RadixCache", "--exec", SERVE]) == 2
    assert "not both" in capsys.readouterr().err


# Misbehaving engines ---------------------------------------------------------------------------

# (kind, lines answered well first, exit status, words the report must hold)
MISBEHAVIOURS = [
    ("crash", 60, 1, ["crashed", "exited with status 3", "crashing on purpose"]),
    ("hang", 60, 1, ["hangs", f"within {CALL_LIMIT} s"]),
    ("garbage", 60, 1, ["printed garbage", "%%% this is not an answer %%%"]),
    ("wrong_call", 60, 1, ["answered a different call"]),
    ("wrong_shape", 60, 1, ["malformed answer", "neither"]),
    ("handshake", 0, 2, ["failed the handshake", "prefixspec-protocol 2"]),
    ("banner", 0, 2, ["printed garbage", "Welcome to the engine"]),
]


@pytest.mark.parametrize(("kind", "after", "status", "words"), MISBEHAVIOURS, ids=[case[0] for case in MISBEHAVIOURS])
def test_a_misbehaving_engine_gets_a_one_paragraph_report(
    kind: str, after: int, status: int, words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = cpu_seconds()  # CPU of the checker (this process): a check that ran on would spend it; load would not
    # A call's limit (CALL_LIMIT; the start has --start-timeout's 30 s): each report is its misbehaviour's, never a slow start's.
    result = main(["check", "--exec", misbehaving(kind, after), "--timeout", CALL_LIMIT, "--quiet", "--out", str(tmp_path)])
    seconds = cpu_seconds() - started
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert result == status, output
    assert seconds < 20
    assert "Traceback" not in output
    report = output[output.index("prefixspec: the engine") :]
    for word in words:
        assert word in report, report
    assert "The last lines exchanged" in report
    assert "  > " in report  # the calls sent
    paragraph = report.split("\nresult:")[0].strip()
    assert "\n\n" not in paragraph
    assert list(tmp_path.iterdir()) == []  # a broken engine leaves no counterexample to replay


@pytest.mark.parametrize("kind", ["crash", "hang", "garbage", "wrong_call"])
def test_a_protocol_failure_inside_a_machine_stops_the_check_with_the_report(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After 700 good lines of one engine process the engine breaks inside Hypothesis: no shrinking, no traceback.

    The golden trace goes in one process; the call machine's examples share a few (``pipe.IDLE_PROCESSES``),
    so a larger count can take thousands of calls to reach in any one of them.
    """
    started = cpu_seconds()
    result = main(["check", "--exec", misbehaving(kind, 700), "--timeout", CALL_LIMIT, "--quiet", "--out", str(tmp_path)])
    output = capsys.readouterr().out
    assert result == 1, output
    assert cpu_seconds() - started < 30  # CPU: the check stopped at the broken engine instead of running on
    assert "golden trace    ok" in output
    assert "call machine    FAILED" in output
    assert "engine machine" not in output  # the check stops at the broken engine
    assert "prefixspec: the engine" in output and "  > " in output
    assert "Traceback" not in output and "Flaky" not in output


def test_a_hang_that_hypothesis_reports_as_flaky_is_still_the_engines_report(tmp_path: Path) -> None:
    """Hypothesis may raise FlakyStrategyDefinition while the engine's failure unwinds; the report is the engine's."""
    from hypothesis import settings

    from prefixspec.running.stages import RunPlan, run_machine
    from prefixspec.drive.machines import CALLS_PER_EXAMPLE, RunTally, call_machine

    with PipeEngine(misbehaving("hang", 600), timeout=1) as hanging:
        tally = RunTally()
        chosen = settings(stateful_step_count=CALLS_PER_EXAMPLE, max_examples=240, derandomize=True, database=None, deadline=None)
        stage = run_machine("call machine", call_machine(hanging, tally), tally, chosen, hanging, RunPlan(base=chosen, out_dir=tmp_path))
    assert stage.aborted and not stage.passed
    assert "hangs" in stage.failure and "Flaky" not in stage.failure


def test_an_engine_that_does_not_start_is_usage() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "prefixspec", "check", "--exec", "no-such-engine-xyz --serve"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert completed.returncode == 2
    assert "did not find the command" in completed.stderr
    assert "Traceback" not in completed.stderr + completed.stdout


def test_a_hanging_engine_is_stopped_in_a_real_process(tmp_path: Path) -> None:
    """The whole command ends, with the report and no traceback, while the engine would sleep an hour.

    ``--timeout`` is a call's limit (``CALL_LIMIT``; the start has ``--start-timeout``'s 30 s), so the report is
    the hang's; the subprocess limit only guards the suite from a checker that never ends.
    """
    completed = subprocess.run(
        [sys.executable, "-m", "prefixspec", "check", "--exec", misbehaving("hang", 30), "--timeout", CALL_LIMIT, "--quiet", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert completed.returncode == 1
    assert "hangs" in completed.stdout
    assert "Traceback" not in completed.stdout + completed.stderr


def test_a_protocol_failure_stops_every_later_call(engine: PipeEngine) -> None:
    broken = PipeEngine(misbehaving("garbage", 2), timeout=5)
    with broken:
        cache = broken(2)  # handshake and block_size: lines 1 and 2
        with pytest.raises(EngineProtocolError) as first:
            cache.insert([1, 2], [3])
        with pytest.raises(EngineProtocolError) as again:
            cache.stats()
        assert again.value is first.value
