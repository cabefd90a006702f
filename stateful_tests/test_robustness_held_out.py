"""Held-out cases of the checker surviving its target and its machine, each with its negative control.

- A target that sends itself SIGTERM or SIGINT has failed as a program (exit 1, the call named; 2 at import or in
  the factory): only the supervisor's stop, marked in the beacon before it signals, is the user's (130, 143).
- A supervised child ends with its supervisor, even when the supervisor is killed by SIGKILL (a runner's limit).
- A call's alarm raised inside a garbage collector's callback is ignored by Python, which prints a traceback: the
  checker's hook keeps it quiet (the repeating timer raises it again).
- Memory running out while a trace is parsed is a usage error in one line, not a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from spec.api import TargetFailure
from prefixspec.commands.main import main
from prefixspec.formats import trace as trace_format
from prefixspec.shipped import GOLDEN_TRACE
from prefixspec.targets import supervised
from prefixspec.targets.interrupts import watching_stop_signals
from stateful_tests.test_robustness import run

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("how", "name"), [("sigterm", "SIGTERM"), ("sigint", "SIGINT")])
@pytest.mark.parametrize(("stage", "status"), [("factory", 2), ("the replay", 1)])
def test_a_target_that_signals_itself_is_its_failure_not_a_stop(how: str, name: str, stage: str, status: int) -> None:
    env = {**os.environ, "HOSTILE_END": how, "HOSTILE_STAGE": stage, "PYTHONPATH": str(ROOT)}
    # SIGINT as a terminal gives it, though the suite was started with it ignored (``&``, nohup), which the checker keeps.
    start = "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); sys.argv[0] = 'prefixspec'; runpy.run_module('prefixspec', run_name='__main__')"
    argv = [sys.executable, "-c", start, "replay", str(GOLDEN_TRACE), "--target", "stateful_tests.hostile_targets:ends_its_process"]
    ran = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    output = ran.stdout + ran.stderr
    assert ran.returncode == status, output
    assert f"was sent {name} (by its own code" in output and "Traceback" not in output
    assert "STOPPED" not in output and "interrupted (Ctrl-C)" not in output


def _forked(work: bool) -> tuple[int, int]:
    """A middle process and its child (which ends with it when ``work``); the child's pid is read from a pipe."""
    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(read)
        parent = os.getpid()
        child = os.fork()
        if child == 0:
            if work:
                supervised._die_with(parent)
            os.write(write, str(os.getpid()).encode() + b"\n")
            time.sleep(60)
            os._exit(0)
        time.sleep(60)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        return middle, int(pipe.readline())


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("ends_with_it", [True, False], ids=["die_with", "plain fork (negative control)"])
def test_a_supervised_child_ends_when_its_supervisor_is_killed(ends_with_it: bool) -> None:
    middle, child = _forked(ends_with_it)
    try:
        os.kill(middle, signal.SIGKILL)
        os.waitpid(middle, 0)
        # Up to 10 s, polled: the death signal is sent as the supervisor exits (before waitpid returns it), and a loaded
        # machine schedules its kill late.  The plain fork has no kill coming: a second of the same poll shows it lives on.
        for _ in range(200 if ends_with_it else 20):
            if not _alive(child):
                break
            time.sleep(0.05)
        assert _alive(child) is not ends_with_it
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


@pytest.fixture
def hooked() -> Iterator[list[object]]:
    seen: list[object] = []
    previous = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:
        with watching_stop_signals():
            yield seen
    finally:
        sys.unraisablehook = previous


def test_an_alarm_swallowed_by_a_gc_callback_prints_nothing(hooked: list[object]) -> None:
    hang = SimpleNamespace(exc_value=TargetFailure("prefixspec: the cache hangs"))
    other = SimpleNamespace(exc_value=RuntimeError("a __del__ that failed"))
    sys.unraisablehook(cast("sys.UnraisableHookArgs", hang))
    sys.unraisablehook(cast("sys.UnraisableHookArgs", other))
    assert hooked == [other]  # the control: anything else still reaches the hook before it


@pytest.mark.parametrize("command", ["verify", "replay"])
def test_memory_running_out_while_a_trace_is_parsed_is_usage(command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def out_of_memory(text: str) -> trace_format.Trace:
        raise MemoryError

    monkeypatch.setattr(trace_format, "parse_trace", out_of_memory)
    status, out, err = run([command, str(GOLDEN_TRACE)], capsys)
    assert status == 2, err
    assert "ran out of memory parsing it" in err and "Traceback" not in out + err
    monkeypatch.undo()
    assert run([command, str(GOLDEN_TRACE)], capsys)[0] == 0  # the control
