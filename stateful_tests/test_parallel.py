"""``check -j N`` and ``hunt -j N``: the same results whatever N, supervised workers, a stop that ends them all.

Each gate has its negative control: a planted fault of the orchestration (a worker that runs its stage from
another seed, a worker's end read as a pass, ends delivered in another order) that the same comparison tells apart.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from spec.api import CacheFactory
from prefixspec.commands.main import main
from prefixspec.running import parallel
from prefixspec.exit_status import ExitStatus
from prefixspec.running import hunt as hunt_module
from prefixspec.running import stage_workers
from prefixspec.running.hunt import hunt, table
from prefixspec.running.report import StageResult
from prefixspec.running.stages import RunPlan
from prefixspec.targets.mutants import DEFAULT_CATALOGUE, read_catalogue
from prefixspec.targets.supervised import Ended, Supervised
from prefixspec.targets.supervised import wait_any as supervised_wait_any

ROOT = Path(__file__).resolve().parent.parent
PLANTED = "stateful_tests.broken_caches:lock_pins_nothing"
HOSTILE = "stateful_tests.hostile_targets:ends_its_process"
TIMES = re.compile(r"\d[\d,]*(\.\d+)? (s|calls/s|steps/s|per CPU s)\b|\(\d[\d,]* calls/s")
"""Seconds and rates: the only part of a report that may differ between runs."""


def without_times(text: str, folder: Path) -> str:
    return TIMES.sub("T", text.replace(str(folder), "OUT"))


def json_without_times(path: Path, folder: Path) -> object:
    report = json.loads(path.read_text(encoding="utf-8").replace(str(folder), "OUT"))
    report.pop("seconds")
    for stage in report["stages"]:
        for key in ("seconds", "cpu_seconds", "seconds_to_failure", "seconds_to_report"):
            stage.pop(key)
    return report


def checked(argv: list[str], jobs: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, object, dict[str, str]]:
    """``check ARGV -j JOBS`` in its own folder: the status, the report and its JSON without times, the counterexamples."""
    folder = tmp_path / f"j{jobs}"
    folder.mkdir()
    status = main(["check", *argv, "--quiet", "-j", str(jobs), "--out", str(folder / "out"), "--json", str(folder / "report.json")])
    out = capsys.readouterr().out
    assert "Traceback" not in out
    traces = {path.name: path.read_text(encoding="utf-8").replace(str(folder), "OUT") for path in sorted((folder / "out").glob("*"))}
    return status, without_times(out, folder), json_without_times(folder / "report.json", folder), traces


def other_seed_worker(name: str, target: CacheFactory, plan: RunPlan) -> Callable[[], int]:
    """A planted fault: a worker that runs its stage from another seed than the run's."""
    return REAL_STAGE_WORK(name, target, replace(plan, seed=(plan.seed or 0) + 1))


REAL_STAGE_WORK = stage_workers.stage_work


@pytest.mark.parametrize("planted", [False, True], ids=["workers", "negative control: a worker on another seed"])
def test_a_planted_bug_gives_the_same_report_and_counterexamples_whatever_n(
    planted: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [PLANTED, "--profile", "ci", "--steps", "300", "--seed", "7"]  # ci keeps no example database: a run replays no other's failure
    one = checked(argv, 1, tmp_path, capsys)
    if planted:
        monkeypatch.setattr(stage_workers, "stage_work", other_seed_worker)
    runs = [checked(argv, jobs, tmp_path, capsys) for jobs in (2, 3)]
    assert one[0] == ExitStatus.FAILED and "counterexample: OUT/out/call_machine.trace" in one[1]
    assert "extremes" not in one[1] and "scale" not in one[1]  # a failing check runs no reach stage, in one process or in N
    for run in runs:
        assert run[0] == one[0]
        if planted:
            assert run[1:] != one[1:]
        else:
            assert run[1:] == one[1:]


def test_a_correct_cache_gives_the_same_stages_whatever_n(tmp_path: Path) -> None:
    """Every count and event of every stage the same at -j 1 and -j 2 (no reach stages: the scale stage takes a minute)."""
    from hypothesis import settings

    from prefixspec.running.stages import RunPlan
    from prefixspec.targets.named import load_target

    plan = replace(RunPlan.of_profile("dev"), base=settings(max_examples=4, database=None), min_engine_steps=200, seed=11, reach=False, out_dir=tmp_path)
    factory = load_target("impl:RadixCache", 5.0)

    def stages(jobs: int) -> list[dict[str, object]]:
        report = stage_workers.run_check_in_workers(factory, target_name="impl:RadixCache", plan=replace(plan, jobs=jobs, call_timeout=5.0))
        assert report.passed
        return [{key: value for key, value in vars(stage).items() if not key.startswith("seconds") and key != "cpu_seconds"} for stage in report.stages]

    one, two = stages(1), stages(2)
    assert [stage["name"] for stage in one] == ["golden trace", "call machine", "engine machine"]
    assert two == one
    assert replace_calls(two) != one  # negative control: the comparison sees a count off by one


def replace_calls(stages: list[dict[str, object]]) -> list[dict[str, object]]:
    changed = [dict(stage) for stage in stages]
    changed[1]["calls"] = int(str(changed[1]["calls"])) + 1
    return changed


def read_without_its_call(name: str, ended: Ended, target_name: str) -> StageResult:
    """A planted fault: a worker that ended without its result read as a failed stage that names no call (and does not stop
    the run: a pass would run the reach stages too, a minute more)."""
    return REAL_STAGE_OF(name, ended, target_name) if ended.status is not None else StageResult(name, False, 0.0)


REAL_STAGE_OF = stage_workers.stage_of


@pytest.mark.parametrize("end", ["exit0", "kill"])
@pytest.mark.parametrize("planted", [False, True], ids=["workers", "negative control: an end that names no call"])
def test_a_worker_whose_target_ends_its_process_is_the_report_of_one_process(
    end: str, planted: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOSTILE_END", end)
    monkeypatch.setenv("HOSTILE_STAGE", "call machine")
    argv = [HOSTILE, "--profile", "ci", "--seed", "5", "--steps", "30"]  # seeded, and no example database: the same first call each run
    status, report, _, _ = checked(argv, 1, tmp_path, capsys)
    assert status == ExitStatus.FAILED and "ended the checker's process" in report and "in its match_prefix() at call" in report
    assert "during the call machine stage" in report and "engine machine" not in report
    if planted:
        monkeypatch.setattr(stage_workers, "stage_of", read_without_its_call)
    status_two, report_two, _, _ = checked(argv, 2, tmp_path, capsys)
    if planted:
        assert (status_two, report_two) != (status, report)
    else:
        assert (status_two, report_two) == (status, report)


def test_a_worker_whose_call_outlasts_its_alarm_is_killed_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOSTILE_END", "mask_alarm")
    monkeypatch.setenv("HOSTILE_STAGE", "call machine")
    status, report, _, _ = checked([HOSTILE, "--profile", "dev", "--steps", "30", "--timeout", "0.5"], 2, tmp_path, capsys)
    assert status == ExitStatus.FAILED
    assert "hangs: in its match_prefix() at call" in report and "ran on past the alarm" in report and "during the call machine stage" in report


def processes_with(token: str) -> list[int]:
    """The processes whose environment carries ``token``: the command and every process it started."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if token.encode() in Path(f"/proc/{entry}/environ").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_a_stop_ends_every_worker_and_prints_what_finished(signum: int, tmp_path: Path) -> None:
    token = f"PREFIXSPEC_PARALLEL_TEST={uuid.uuid4().hex}"
    mark = tmp_path / "reached"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOSTILE_END": "wait", "HOSTILE_MARK": str(mark), "HOSTILE_STAGE": "call machine"}
    env[token.split("=")[0]] = token.split("=")[1]
    command = subprocess.Popen(
        [sys.executable, "-m", "prefixspec", "check", HOSTILE, "--quiet", "--profile", "dev", "-j", "2", "--timeout", "3600", "--out", str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    for _ in range(1200):  # counted, not timed: a loaded machine is slow to get there
        if mark.exists() or command.poll() is not None:
            break
        time.sleep(0.1)
    assert mark.exists(), command.communicate()
    running = processes_with(token)
    assert len(running) >= 4  # negative control of the scan below: the command, its run, and two workers carry the token
    os.kill(command.pid, signum)
    out, err = command.communicate(timeout=60)
    assert command.returncode == (ExitStatus.INTERRUPTED if signum == signal.SIGINT else ExitStatus.TERMINATED), out + err
    assert "Traceback" not in out + err and "FAILED" not in out
    assert out.rstrip().splitlines()[-1].startswith("result: STOPPED") and "golden trace    ok" in out
    assert processes_with(token) == []  # no worker outlives the command


def test_the_hunt_table_is_in_catalogue_order_whatever_finishes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalogue = read_catalogue(DEFAULT_CATALOGUE)
    chosen = replace(catalogue, mutants=tuple(mutant for mutant in catalogue.mutants if mutant.id in ("s01", "s02", "s03")))
    alone = hunt(chosen, profile="ci", out_dir=tmp_path / "one", jobs=1)  # ci keeps no example database
    arrivals: list[str] = []
    real_pool = parallel.run_pool

    def reversed_pool(works: dict[int, Callable[[], int]], jobs: int, timeout: float | None, ended: Callable[[int, Ended], list[int]], starting: Callable[[int], None] | None = None) -> dict[int, Ended]:
        """The pool, its ends told in the reverse of the catalogue's order: the last mutant finishing first."""
        finished = real_pool(works, jobs, timeout, lambda key, how: [], starting)
        for key in sorted(finished, reverse=True):
            arrivals.append(chosen.mutants[key].id)
            ended(key, finished[key])
        return finished

    monkeypatch.setattr(hunt_module, "run_pool", reversed_pool)
    side_by_side = hunt(chosen, profile="ci", out_dir=tmp_path / "two", jobs=2)
    assert [result.mutant.id for result in side_by_side] == ["s01", "s02", "s03"]
    assert arrivals != ["s01", "s02", "s03"]  # negative control: the ends did arrive out of the catalogue's order
    assert without_times(table(side_by_side), tmp_path / "two") == without_times(table(alone), tmp_path / "one")
    for result in side_by_side:
        written = Path(result.counterexample).read_text(encoding="utf-8")
        assert f"prefixspec replay {result.counterexample} " in written  # its reproduce line names the copy, not a scratch folder
        assert written.replace(str(tmp_path / "two"), "OUT") == (tmp_path / "one" / f"{result.mutant.id}.trace").read_text(encoding="utf-8").replace(str(tmp_path / "one"), "OUT")


def test_two_workers_that_end_together_where_the_first_drops_the_second_are_one_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both end before the pool looks; the first's end drops the second, which the pool then never reports (it once
    looked it up among the running and raised StopIteration: a traceback in place of the report)."""
    real_wait_any = supervised_wait_any

    def together(children: list[Supervised]) -> list[Supervised]:
        for child in children:  # as a loaded machine may see them: every child ready in one look
            while not real_wait_any([child]):
                pass
        return children

    monkeypatch.setattr(parallel, "wait_any", together)
    told: list[str] = []

    def ended(key: str, how: Ended) -> list[str]:
        told.append(key)
        return ["second"] if key == "first" else []

    finished = parallel.run_pool({"first": lambda: 0, "second": lambda: 0}, 2, None, ended)
    assert told == ["first"] and list(finished) == ["first"], (told, list(finished))


def test_the_result_line_gives_the_runs_wall_time_not_the_sum_of_stages_side_by_side() -> None:
    """Under ``-j`` the stages overlap: their sum overstates the run (the negative control: a report with no wall time)."""
    from prefixspec.running.report import CheckReport, StageResult

    stages = [StageResult("call machine", True, 5.0), StageResult("engine machine", True, 7.0)]
    side_by_side = CheckReport("t", "ci", None, stages=stages, wall_seconds=7.5)
    assert side_by_side.summary().endswith("result: PASSED in 7.5 s") and side_by_side.as_json()["seconds"] == 7.5
    assembled = CheckReport("t", "ci", None, stages=stages)
    assert assembled.summary().endswith("result: PASSED in 12.0 s")
