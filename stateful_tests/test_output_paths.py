"""Where a check writes: checked before the run, and a write that still fails at the end leaves the report on stdout.

Issue 22: ``--out`` to a dangling link or under ``/proc``, ``--out X --json X``,
``--json /dev/full``: the run ended and then its report or files were lost.
Now each unwritable place is a usage error before any work (exit 2, one line),
found by making a file there (``os.access`` says yes to root everywhere);
``--json /dev/full`` passes that check, and its failed write at the end is a
line on stderr and exit 2, the report printed whole on stdout.

And oversized text: a target's 25 MiB answer is cut in the report, the JSON
and the counterexample's comments, with a note (``report.cut_long_lines``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from prefixspec.commands.main import main
from prefixspec.commands.options import output_file, output_folder
from prefixspec.errors import UsageError
from prefixspec.formats.trace import Step, read_trace
from prefixspec.vocabulary import Call
from spec.api import CacheFactory, Rules
from prefixspec.running.report import LONGEST_LINE, cut_line, cut_long_comments, cut_long_lines
from stateful_tests.test_robustness import run

FAST_FAILURE = "stateful_tests.hostile_targets:cached_blocks_float"
"""A target the golden trace finds wrong at once: a check of it ends in seconds, with a report and a counterexample."""




def places(tmp_path: Path) -> list[tuple[list[str], str]]:
    (tmp_path / "dangling").symlink_to("/nonexistent/folder")
    (tmp_path / "dangling.json").symlink_to("/nonexistent/report.json")
    (tmp_path / "deep").symlink_to("/nonexistent")
    both = str(tmp_path / "both")
    return [
        (["--out", str(tmp_path / "dangling")], "is a symbolic link to /nonexistent/folder, which does not exist"),
        (["--out", str(tmp_path / "deep" / "a" / "b")], "is a symbolic link to /nonexistent, which does not exist"),
        (["--out", "/proc/prefixspec-out"], "/proc is not writable"),
        (["--out", "/proc/self/prefixspec-out"], "is not writable"),
        (["--out", both, "--json", both], "name one place"),
        (["--json", str(tmp_path / "dangling.json")], "there is no folder /nonexistent to write it in"),
        (["--json", "/proc/prefixspec.json"], "it cannot be written in /proc"),
        (["--json", "/sys/prefixspec.json"], "it cannot be written in /sys"),
    ]


def test_every_unwritable_place_is_a_usage_error_before_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = places(tmp_path)
    for options, words in cases:
        status, out, err = run(["check", FAST_FAILURE, "--quiet", *options], capsys)
        assert status == 2, (options, out, err)
        assert err.startswith("prefixspec: ") and err.count("\n") == 1 and words in err, (options, err)
        assert "result:" not in out, (options, out)  # refused before any stage ran
    assert len(cases) == 8


def test_writable_places_pass_and_the_probe_leaves_nothing(tmp_path: Path) -> None:
    """The negative control: a new folder, a new file, an existing file and /dev/null pass; no probe file stays."""
    existing = tmp_path / "old.json"
    existing.write_text("kept", encoding="utf-8")
    (tmp_path / "link").symlink_to(tmp_path / "made-later.json")  # dangling, but its folder is there: it can be written
    output_folder(str(tmp_path / "new" / "folder"))
    for file in (tmp_path / "new.json", existing, tmp_path / "link", Path("/dev/null")):
        output_file(str(file), "--json")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["link", "old.json"]
    assert existing.read_text(encoding="utf-8") == "kept"
    with pytest.raises(UsageError):
        output_file(str(tmp_path), "--json")


def test_a_write_that_fails_at_the_end_leaves_the_report_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    status, out, err = run(["check", FAST_FAILURE, "--quiet", "--profile", "ci", "--out", str(tmp_path / "out"), "--json", "/dev/full"], capsys)
    assert status == 2, out + err
    assert out.rstrip().splitlines()[-1].startswith("result: FAILED") and "counterexample:" in out
    assert "--json /dev/full: the report could not be written there (No space left on device)" in err


# Oversized text --------------------------------------------------------------------------------------


def test_cutting_holds_at_its_boundary() -> None:
    assert cut_line("x" * LONGEST_LINE) == "x" * LONGEST_LINE
    cut = cut_line("x" * (LONGEST_LINE + 1))
    assert cut.startswith("x" * LONGEST_LINE + "...") and "(1 more characters cut from the report)" in cut
    text = "short\n" + "y" * (3 * LONGEST_LINE)
    assert cut_long_lines(text).splitlines()[0] == "short" and f"{2 * LONGEST_LINE:,} more characters cut" in cut_long_lines(text)
    trace = f"prefixspec-trace 1\n# cache: {'z' * (2 * LONGEST_LINE)}\nblock_size 2\nevict {'1' * (2 * LONGEST_LINE)}\n"
    kept = cut_long_comments(trace).splitlines()
    assert "more characters cut from this comment" in kept[1] and kept[3] == f"evict {'1' * (2 * LONGEST_LINE)}"  # a call stays whole


@pytest.mark.parametrize("name", ["huge_message_in_match", "huge_result_in_evict"])
def test_a_huge_answer_is_cut_in_the_report_the_json_and_the_trace(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.json"
    out = tmp_path / "out"
    argv = ["check", f"stateful_tests.hostile_targets:{name}", "--quiet", "--profile", "ci", "--steps", "30", "--out", str(out), "--json", str(report)]
    status, stdout, _ = run(argv, capsys)
    assert status == 1
    assert "more characters cut from the report" in stdout and len(stdout) < 1 << 20
    assert report.stat().st_size < 1 << 20 and "more characters cut" in json.dumps(json.loads(report.read_text(encoding="utf-8")))
    traces = sorted(out.glob("*.trace"))
    assert traces
    for written in traces:
        assert written.stat().st_size < 1 << 20, written
        assert "more characters cut from this comment" in written.read_text(encoding="utf-8")
        read_trace(written)  # still a trace: only its comments were cut


# A fault of the checker's while minimising ----------------------------------------------------------


def test_a_fault_while_minimising_keeps_the_verdict_and_writes_the_calls_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checker that fails while cutting a counterexample (a fault of its own, not the cache's) still reports the
    failure, says so, and writes the run's calls as they ran: the file replays failing on the cache, passing on impl."""
    import prefixspec.running.counterexamples as counterexamples

    def planted(*arguments: object, **named: object) -> None:
        raise RuntimeError("a planted fault\nsecond line")

    monkeypatch.setattr(counterexamples, "minimise", planted)
    out = tmp_path / "out"
    status, stdout, _ = run(["check", FAST_FAILURE, "--profile", "ci", "--out", str(out)], capsys)
    assert status == 1 and "minimising its calls failed, a fault of the checker's, not of the cache: RuntimeError: a planted fault;" in stdout, stdout
    written = sorted(out.glob("*.trace"))
    assert [path.name for path in written] == ["call_machine.trace", "engine_machine.trace", "golden_trace.trace"]
    for path in written:
        assert "Not minimised" in path.read_text(encoding="utf-8")
        assert main(["replay", str(path), "--target", FAST_FAILURE]) == 1, path
        assert main(["replay", str(path), "--target", "impl:RadixCache"]) == 0, path
    capsys.readouterr()


# A minimising that its time budget ends ------------------------------------------------------------


def test_a_minimising_its_budget_ended_says_so_in_the_report_and_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cut keeps calls that fail, but once its budget runs out they are not shown minimal (a faster machine may
    cut further): the report and the trace's header say so, and the trace still replays failing.  The control: the
    same check with the budget it has finishes its cut and says nothing of a budget."""
    import prefixspec.running.counterexamples as counterexamples
    from prefixspec.compare.shrink import Minimised, minimise

    arguments = ["check", FAST_FAILURE, "--profile", "ci", "--stage", "golden trace"]
    status, stdout, _ = run([*arguments, "--out", str(tmp_path / "whole"), "--json", str(tmp_path / "whole.json")], capsys)
    assert status == 1 and "minimised to 1 of " in stdout and "budget ran out" not in stdout, stdout
    assert [stage["counterexample_cut_short"] for stage in json.loads((tmp_path / "whole.json").read_text())["stages"]] == [False]
    assert "budget ran out" not in (tmp_path / "whole" / "golden_trace.trace").read_text(encoding="utf-8")

    def no_time(
        block_size: int, calls: Sequence[Call], target: CacheFactory, rules: Rules = Rules(), *, time_budget: float = 60.0, steps: Sequence[Step] | None = None
    ) -> Minimised:
        return minimise(block_size, calls, target, rules, time_budget=0.0, steps=steps)

    monkeypatch.setattr(counterexamples, "minimise", no_time)
    out = tmp_path / "out"
    status, stdout, _ = run([*arguments, "--out", str(out), "--json", str(tmp_path / "cut.json")], capsys)
    assert status == 1 and "budget ran out: the shortest found by then, not shown minimal" in stdout, stdout
    assert [stage["counterexample_cut_short"] for stage in json.loads((tmp_path / "cut.json").read_text())["stages"]] == [True]
    text = (out / "golden_trace.trace").read_text(encoding="utf-8")
    assert "The minimising stopped when its 50 s budget ran out: the shortest found by then, not shown minimal." in text, text
    assert main(["replay", str(out / "golden_trace.trace"), "--target", FAST_FAILURE]) == 1
    capsys.readouterr()
