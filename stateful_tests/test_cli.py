"""The command line: a broken cache fails with a short counterexample that replay reproduces; bad usage is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prefixspec.commands.main import main
from prefixspec.formats.trace import read_trace
from prefixspec.running.hunt import HuntResult, table
from prefixspec.targets.mutants import Mutant
from prefixspec.vocabulary import counted

BROKEN = "stateful_tests.broken_caches:lock_pins_nothing"


def test_check_fails_a_lock_that_pins_nothing_with_a_short_reproducible_counterexample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report_file = tmp_path / "report.json"
    status = main(["check", BROKEN, "--quiet", "--out", str(tmp_path), "--json", str(report_file)])
    output = capsys.readouterr().out
    assert status == 1
    assert "FAILED" in output
    report = json.loads(report_file.read_text())
    assert report["result"] == "failed"
    machines = {stage["name"]: stage for stage in report["stages"]}
    for name in ("call machine", "engine machine"):
        stage = machines[name]
        assert not stage["passed"]
        trace_file = stage["counterexample"]
        assert trace_file is not None
        trace = read_trace(trace_file)
        assert 1 <= len(trace.driven_steps()) <= 15
        assert stage["counterexample_calls"] == len(trace.driven_steps())
        # The trace reproduces outside Hypothesis: the broken cache fails it, the real one passes it.
        assert main(["replay", trace_file, "--target", BROKEN]) == 1
        assert "disagrees with the spec" in capsys.readouterr().out
        assert main(["replay", trace_file, "--target", "impl:RadixCache"]) == 0
        assert main(["replay", trace_file]) == 0


@pytest.mark.deep  # make test keeps its promise in test_installed.py's test_check_passes_installed: the same command on impl, every stage
def test_check_passes_the_implementation_in_a_short_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["check", "impl:RadixCache", "--quiet", "--profile", "dev", "--steps", "300", "--seed", "7", "--out", str(tmp_path)])
    output = capsys.readouterr().out
    assert status == 0, output
    assert "result: PASSED" in output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("no_such_module_xyz:factory", "cannot import"),
        ("impl", "module:factory"),
        ("impl:NoSuchFactory", "has no attribute"),
        ("spec.api:ID_LIMIT", "not a callable"),
        ("builtins:str", "lacks"),
        ("spec.model:as_id", "raised"),
    ],
)
def test_a_bad_target_is_one_line_and_exit_2(target: str, words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", target, "--quiet"]) == 2
    error = capsys.readouterr().err
    assert words in error
    assert error.count("\n") == 1 and "Traceback" not in error


def test_a_bad_trace_file_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.trace"
    bad.write_text("prefixspec-trace 1\nblock_size 2\nn1 = match [1 2\n")
    assert main(["replay", str(bad)]) == 2
    assert "line 3" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "missing.trace")]) == 2
    assert capsys.readouterr().err == f"prefixspec: {tmp_path / 'missing.trace'}: No such file or directory\n"


def test_a_file_that_cannot_be_read_or_written_is_named_in_a_shells_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``FILE: No such file or directory``, as a shell's tools say it, never Python's ``[Errno 2] ...: 'FILE'``; a golden
    trace that cannot be written says so in one line, exit 2 (``/dev/full``: a write that fails midway)."""
    missing = tmp_path / "missing"
    for argv in (["verify", str(missing)], ["replay", str(missing)], ["hunt", str(missing)], ["golden", str(missing / "g.txt")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "[Errno" not in err and "No such file or directory" in err and str(missing) in err and err.count("\n") == 1, err
    assert main(["golden", "/dev/full"]) == 2
    assert capsys.readouterr().err == "prefixspec: /dev/full: the golden trace could not be written there (No space left on device); nothing of it was left\n"
    assert main(["golden", str(tmp_path / "g.txt")]) == 0
    assert (tmp_path / "g.txt").read_text(encoding="utf-8").startswith("prefixspec-trace 1\n")


def test_replay_reports_a_stale_expectation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "stale.trace"
    stale.write_text("prefixspec-trace 1\nblock_size 2\nn1 = insert [1 2 3] [5] -> new []\ncached_tokens -> 1\n")
    assert main(["replay", str(stale)]) == 1
    assert "line 4" in capsys.readouterr().out
    assert main(["replay", str(stale), "--target", "impl:RadixCache"]) == 1
    assert "not with the recorded results" in capsys.readouterr().out


def test_a_count_of_one_call_is_said_in_the_singular(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Replay, verify, the hunt's table and the report say ``1 call``, ``1 example`` (and ``1,024 calls`` past a thousand), not ``1 calls``."""
    one, two = tmp_path / "one.trace", tmp_path / "two.trace"
    one.write_text("prefixspec-trace 1\nblock_size 2\nn1 = insert [1 2 3] [5] -> new []\n")
    two.write_text(one.read_text() + "cached_tokens -> 2\n")
    for argv, words in (
        (["replay", str(one)], "1 call replayed on the spec"),
        (["replay", str(one), "--target", "impl:RadixCache"], "1 call replayed on impl:RadixCache"),
        (["verify", str(one)], "1 call replayed on the spec"),
        (["replay", str(two)], "2 calls replayed"),
    ):
        assert main(argv) == 0 and words in capsys.readouterr().out, argv
    assert [counted(n, "call") for n in (0, 1, 2, 1024)] == ["0 calls", "1 call", "2 calls", "1,024 calls"]
    mutant = Mutant("x", "a bug", "cache.py", "a", "b", ())
    rows = table([HuntResult(mutant, machine_killers=["call machine"], counterexample="x.trace", counterexample_calls=calls) for calls in (1, 1024)])
    assert "| 1 call |" in rows and "| 1,024 calls |" in rows
    assert main(["check", "--stage", "golden-trace", "--quiet", "--out", str(tmp_path / "out")]) == 0
    assert "1 example, 442 calls" in capsys.readouterr().out


def test_bad_options_exit_2() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["check", "--steps", "0"])
    assert exited.value.code == 2
