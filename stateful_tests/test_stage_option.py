"""``check --stage NAME``: only the stages named, in the check's order, the header saying so; an unknown name is usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prefixspec.commands.main import main
from prefixspec.running.report import CheckReport
from prefixspec.running.stages import STAGES

BROKEN = "stateful_tests.broken_caches:lock_pins_nothing"
SHORT = ["--profile", "dev", "--steps", "30", "--quiet"]


def checked(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, dict[str, object]]:
    """The status, stdout and JSON report of ``check`` with ``argv``."""
    report = tmp_path / "report.json"
    status = main(["check", *argv, *SHORT, "--out", str(tmp_path / "cx"), "--json", str(report)])
    return status, capsys.readouterr().out, json.loads(report.read_text(encoding="utf-8"))


def stage_names(report: dict[str, object]) -> list[str]:
    stages = report["stages"]
    assert isinstance(stages, list)
    return [str(stage["name"]) for stage in stages]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_stages_named_run_alone_in_the_checks_order_whatever_the_spelling(jobs: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, report = checked(["--stage", "Engine_Machine", "--stage", "golden-trace", "--stage", "golden trace", "-j", jobs], tmp_path, capsys)
    assert status == 0, out
    assert stage_names(report) == ["golden trace", "engine machine"]
    assert report["stages_chosen"] == ["golden trace", "engine machine"]
    assert out.splitlines()[0].endswith(", only the stages golden trace, engine machine)")
    assert "call machine" not in out and "result: PASSED" in out


def test_a_report_of_every_stage_names_no_chosen_stages() -> None:
    """A whole check is not said to be some of its stages."""
    whole = CheckReport("impl:RadixCache", "dev", None)
    assert "only the stages" not in whole.summary() and whole.as_json()["stages_chosen"] is None


def test_a_reach_stage_chosen_waits_for_the_chosen_stages_before_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A reach stage named alone runs; named after a stage that fails, it does not run, as in a whole check."""
    status, out, report = checked([BROKEN, "--stage", "call-machine", "--stage", "extremes", "-j", "1"], tmp_path, capsys)
    assert status == 1, out
    assert stage_names(report) == ["call machine"]
    status, out, report = checked([BROKEN, "--stage", "extremes", "-j", "1"], tmp_path, capsys)
    assert stage_names(report) == ["extremes"], out


@pytest.mark.parametrize("name", ["scales", "", "call  machine!", "all"])
def test_a_stage_that_does_not_exist_is_usage_naming_the_stages(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["check", "--stage", name])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"no stage is called {name!r}" in err and ", ".join(STAGES) in err
