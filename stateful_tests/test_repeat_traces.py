"""Repeat blocks in traces (format version 2): folded when written, read lazily, refused clearly when malformed."""

from __future__ import annotations

import io
import pickle
import random
import tracemalloc
from dataclasses import replace
from pathlib import Path

import pytest

import impl
from spec.model import SpecCache
from prefixspec.commands.main import main
from prefixspec.commands.options import LONGEST_TIMEOUT
from prefixspec.formats.repeats import LARGEST_CALLS, LARGEST_REPEAT, Repeat, Steps, fold, named_by_position
from prefixspec.formats.trace import Step, Trace, parse_trace, read_trace, record
from prefixspec.drive.engine import Engine, Workload
from prefixspec.running.recorded import READS_ONLY, Recording, shrink_within
from prefixspec.compare.lockstep import Disagreement
from prefixspec.compare.shrink import counterexample_trace
from prefixspec.running.stages import RunPlan, run_stage
from prefixspec.targets.mutants import DEFAULT_CATALOGUE, load_mutant, read_catalogue
from prefixspec.targets.recording import RecordingCache
from prefixspec.vocabulary import TraceFormatError, parse_call

HEAD = "prefixspec-trace 2\nblock_size 1\n"


def history(uses: int) -> Trace:
    """A trace the spec recorded: an insert, ``uses`` matches of it each with a lock and an unlock, a count."""
    calls = [parse_call("n1 = insert [1 2] [10 11]", 1)]
    for use in range(uses):
        name = f"n{len(calls) + 1}"
        calls += [parse_call(f"{name} = match [1 2 3]", 1), parse_call(f"lock {name}", 1), parse_call(f"unlock {name}", 1)]
    calls.append(parse_call("cached_blocks", 1))
    return record(1, calls, SpecCache(1))


def texts(trace: Trace) -> list[str]:
    return [step.text() for step in trace.steps]


# Round trip ---------------------------------------------------------------------------------


def test_a_folded_trace_reads_back_as_the_calls_it_folds() -> None:
    original = history(300)
    folded = Trace(1, fold(named_by_position(original.steps)[0]))
    text = folded.text()
    assert text.startswith("prefixspec-trace 2\n") and "repeat 300 {" in text
    assert len(text.splitlines()) <= 12, text
    assert texts(parse_trace(text)) == texts(Trace(1, named_by_position(original.steps)[0]))


def test_the_round_trip_gate_sees_a_count_off_by_one() -> None:
    """Negative control: the comparison above fails when a block's count is planted wrong."""
    folded = fold(named_by_position(history(300).steps)[0])
    planted = Steps([replace(piece, count=piece.count - 1) if isinstance(piece, Repeat) else piece for piece in folded.pieces])
    assert texts(parse_trace(Trace(1, planted).text())) != texts(parse_trace(Trace(1, folded).text()))


def test_a_trace_without_runs_is_written_in_version_1_unchanged() -> None:
    plain = record(1, [parse_call("n1 = insert [1 2] [10 11]", 1), parse_call("stats", 2)], SpecCache(1))
    assert Trace(1, fold(plain.steps)).text() == plain.text()
    assert plain.text().startswith("prefixspec-trace 1\n")


def test_only_calls_named_for_their_position_fold() -> None:
    """``n7 = match`` at the first position cannot be a copy: its name would not survive the expansion."""
    steps = [Step(parse_call(f"m{index} = match [1]", 1), "0 [] root") for index in range(5)]
    assert not fold(steps).folded()
    assert fold(named_by_position(steps)[0]).folded()


def test_renaming_by_position_renames_the_handles_and_results_that_name_a_node() -> None:
    trace = parse_trace("prefixspec-trace 1\nblock_size 1\nx = insert [1 2] [10 11] -> new []\ny = match [1 2 3] -> 2 [10 11] x\nlock y -> ok\n")
    assert [step.text() for step in named_by_position(trace.steps)[0]] == [
        "n1 = insert [1 2] [10 11] -> new []",
        "n2 = match [1 2 3] -> 2 [10 11] n1",
        "lock n2 -> ok",
    ]


def test_copies_are_named_for_their_position_and_later_lines_may_name_them() -> None:
    trace = parse_trace(HEAD + "n1 = insert [1] [10] -> new []\nrepeat 3 {\nn* = match [1 2] -> 1 [10] n1\nlock n1 -> ok\n}\nunlock n6 -> ok\n")
    assert [step.call.name for step in trace.steps] == ["n1", "n2", "", "n4", "", "n6", "", ""]
    assert texts(parse_trace(trace.text())) == texts(trace)


def test_a_block_may_name_a_copy_made_above_it_in_its_own_first_run() -> None:
    trace = parse_trace(HEAD + "repeat 4 {\nn* = insert [1] [10] -> new []\nlock n1 -> ok\n}\n")
    assert len(trace.steps) == 8 and trace.steps[7].call.text() == "lock n1"


# Reading lazily -----------------------------------------------------------------------------


def test_a_block_of_2_16_copies_is_read_without_writing_them_out(tmp_path: Path) -> None:
    path = tmp_path / "clock.trace"
    path.write_text(HEAD + "n1 = insert [1] [10] -> new []\nrepeat 65536 {\nn* = match [1 2] -> 1 [10] n1\n}\n")
    assert len(read_trace(path).steps) == 65537
    text = path.read_text()
    tracemalloc.start()
    trace = parse_trace(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(trace.steps) == 65537 and trace.steps[65536].call.name == "n65537"
    expanded = "".join(step.text() + "\n" for step in trace.steps)
    assert peak < len(expanded) // 8, (peak, len(expanded))  # the text of the copies is some 2 MB; reading holds a few KB


def test_the_memory_gate_sees_a_reading_that_writes_the_copies_out() -> None:
    """Negative control: the same bound fails for a reading that expands the block into a list of steps."""
    trace = parse_trace(HEAD + "n1 = insert [1] [10] -> new []\nrepeat 65536 {\nn* = match [1 2] -> 1 [10] n1\n}\n")
    tracemalloc.start()
    expanded_steps = list(trace.steps)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(expanded_steps) == 65537
    assert peak >= len("".join(step.text() + "\n" for step in expanded_steps)) // 8


def test_a_folded_trace_replays_on_the_spec_and_beside_a_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "folded.trace"
    path.write_text(Trace(1, fold(named_by_position(history(200).steps)[0])).text())
    assert main(["replay", str(path)]) == 0
    assert main(["replay", str(path), "--target", "impl:RadixCache"]) == 0
    assert main(["verify", str(path)]) == 0
    assert "602 calls" in capsys.readouterr().out


# Malformed ----------------------------------------------------------------------------------

MALFORMED = {
    "a negative count": ("repeat -1 {\nstats\n}\n", 3, "runs from 1 to"),
    "a count of zero": ("repeat 0 {\nstats\n}\n", 3, "runs from 1 to"),
    "a count one past the limit": (f"repeat {LARGEST_REPEAT + 1} {{\nstats\n}}\n", 3, "runs from 1 to"),
    "a count that is no number": ("repeat many {\nstats\n}\n", 3, "expected 'repeat N {'"),
    "no brace": ("repeat 3\nstats\n}\n", 3, "expected 'repeat N {'"),
    "an unclosed block": ("repeat 3 {\nstats\n", 3, "not closed"),
    "a nested block": ("repeat 3 {\nrepeat 2 {\nstats\n}\n}\n", 4, "do not nest"),
    "a brace that closes nothing": ("stats\n}\n", 4, "closes no repeat block"),
    "an empty block": ("repeat 3 {\n}\n", 3, "holds no call"),
    "an explicit name inside a block": ("repeat 3 {\nx = match [1]\n}\n", 4, "named 'n*'"),
    "n* outside a block": ("n* = match [1]\n", 3, "only inside a repeat block"),
    "more calls than the limit": (
        f"repeat {LARGEST_REPEAT} {{\nstats\n}}\nrepeat {LARGEST_CALLS - LARGEST_REPEAT + 1} {{\nstats\n}}\n",
        6,
        "past 16,777,216 calls",
    ),
    "a copy that takes an earlier line's name": ("n3 = match [1]\nrepeat 3 {\nn* = match [1]\n}\n", 4, "named twice"),
    "a line that takes a copy's name": ("repeat 3 {\nn* = match [1]\n}\nn2 = match [1]\n", 6, "named twice"),
    "a handle no copy is named": ("repeat 3 {\nn* = match [1]\nstats\n}\nlock n2\n", 7, "not named by an earlier line"),
    "a handle of 5,000 digits": ("repeat 3 {\nn* = match [1]\n}\nlock n" + "1" * 5000 + "\n", 6, "not named by an earlier line"),
    "a handle of 10 digits": ("repeat 3 {\nn* = match [1]\n}\nlock n1000000000\n", 6, "not named by an earlier line"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_repeat_is_refused_naming_its_line(case: str) -> None:
    body, line, words = MALFORMED[case]
    with pytest.raises(TraceFormatError) as refused:
        parse_trace(HEAD + body)
    assert refused.value.line == line and words in str(refused.value), str(refused.value)


def test_the_limits_themselves_are_read() -> None:
    """The boundaries: a count of 1, a count of LARGEST_REPEAT, and blocks adding up to LARGEST_CALLS exactly."""
    assert len(parse_trace(HEAD + "repeat 1 {\nstats\n}\n").steps) == 1
    assert len(parse_trace(HEAD + f"repeat {LARGEST_REPEAT} {{\nstats\n}}\n").steps) == LARGEST_REPEAT
    exact = f"repeat {LARGEST_CALLS // 2} {{\nstats\n}}\nrepeat {LARGEST_CALLS - LARGEST_CALLS // 2} {{\nstats\n}}\n"
    assert len(parse_trace(HEAD + exact).steps) == LARGEST_CALLS


def test_a_repeat_in_a_version_1_trace_is_refused() -> None:
    with pytest.raises(TraceFormatError, match="needs the header 'prefixspec-trace 2'"):
        parse_trace("prefixspec-trace 1\nblock_size 1\nrepeat 2 {\nstats\n}\n")


def test_a_malformed_repeat_is_one_paragraph_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.trace"
    path.write_text(HEAD + "repeat 3 {\nstats\n")
    assert main(["replay", str(path)]) == 2
    assert main(["verify", str(path)]) == 2
    error = capsys.readouterr().err
    assert "not closed" in error and "Traceback" not in error and len(error.strip().splitlines()) == 2


@pytest.mark.parametrize("command", ["verify", "replay"])
@pytest.mark.parametrize("given", ["", "."])
def test_no_file_or_a_folder_is_a_usage_error(command: str, given: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, given]) == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error and ("folder" in error or "names none" in error or "empty" in error), error


# The shrinker writes folded ------------------------------------------------------------------


def test_a_counterexample_of_128_locks_reads_as_a_handful_of_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """r06 counts a node's locks in a signed byte: 128 locks of one node, written as one repeat block."""
    catalogue = read_catalogue(DEFAULT_CATALOGUE)
    stage = run_stage("extremes", load_mutant(catalogue, catalogue.mutant("r06")), replace(RunPlan.of_profile("ci"), out_dir=tmp_path))
    assert not stage.passed and stage.counterexample, stage.failure
    written = Path(stage.counterexample).read_text()
    calls = [line for line in written.splitlines() if line and not line.startswith(("#", "block_size", "rules", "prefixspec-trace"))]
    assert len(calls) <= 8, written
    trace = read_trace(stage.counterexample)
    assert sum(1 for step in trace.steps if step.call.op == "lock") >= 128
    assert len(Trace(trace.block_size, list(trace.steps)).text().splitlines()) > 128  # negative control: unfolded, it is long
    assert main(["replay", stage.counterexample, "--target", f"{DEFAULT_CATALOGUE}#r06"]) == 1
    assert main(["replay", stage.counterexample, "--target", "impl:RadixCache"]) == 0
    capsys.readouterr()


# verify --shrink: its budget ----------------------------------------------------------------------


def recorded_with_reads(uses: int) -> Recording:
    """A recording of ``uses`` matches with counts between them, its last count recorded one too high."""
    calls = [parse_call("n1 = insert [1 2] [10 11]", 1)]
    for use in range(uses):
        calls += [parse_call(f"n{len(calls) + 1} = match [1 2 3]", 1), parse_call("cached_tokens", 1), parse_call("stats", 1)]
    calls.append(parse_call("cached_blocks", 1))
    trace = record(1, calls, impl.RadixCache(1))
    last = trace.steps[-1]
    trace.steps = [*trace.steps[:-1], Step(last.call, str(int(last.expected or "0") + 1), last.line)]
    return Recording.of(trace)


def test_a_shrink_with_no_budget_left_stops_says_so_and_still_diverges() -> None:
    recording = recorded_with_reads(100)
    shrunk = shrink_within(recording, time_budget=0.0)
    assert shrunk.stopped_at_budget
    assert recording.still_diverges(shrunk.kept) == shrunk.kept
    steps = recording.trace.steps
    assert not any(steps[index].call.op in READS_ONLY for index in shrunk.kept[:-1])  # the reads went in one cut
    assert sum(1 for step in steps[:-1] if step.call.op in READS_ONLY) == 200  # negative control: there were reads


def test_a_shrink_with_budget_finishes_and_says_it_did() -> None:
    recording = recorded_with_reads(20)
    shrunk = shrink_within(recording, time_budget=float("inf"))  # no clock: the cut ends when no cut helps
    assert not shrunk.stopped_at_budget
    assert [recording.trace.steps[index].call.op for index in shrunk.kept] == ["insert", "cached_blocks"]


def test_the_command_says_the_budget_stopped_the_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.trace"
    path.write_text(recorded_with_reads(50).trace.text())
    assert main(["verify", str(path), "--shrink", "--time-budget", "0.000001"]) == 1
    assert "stopped at its time budget" in capsys.readouterr().out
    assert main(["verify", str(tmp_path / "run.shrunk.trace")]) == 1
    assert main(["verify", str(path), "--shrink", "--time-budget", str(LONGEST_TIMEOUT)]) == 1
    assert "stopped at its time budget" not in capsys.readouterr().out  # negative control: a cut that finished


def engine_recording(steps: int) -> Recording:
    """An engine run recorded on impl, its last count recorded one too high."""
    out = io.StringIO()
    recorder = RecordingCache(impl.RadixCache(2), out, title="an engine run")
    engine = Engine(recorder, Workload(block_size=2, pool_size=24), prompt_seed=5)
    rng = random.Random(5)
    for _ in range(steps):
        engine.step(rng)
    recorder.cached_blocks()
    trace = parse_trace(out.getvalue())
    last = trace.steps[-1]
    trace.steps = [*trace.steps[:-1], Step(last.call, str(int(last.expected or "0") + 1), last.line)]
    return Recording.of(trace)


def cuts_of(recording: Recording, count: int) -> list[list[int]]:
    """``count`` cuts as delta debugging makes them: the whole prefix less one piece, or less a few last calls."""
    rng = random.Random(3)
    whole = list(range(len(recording.trace.steps)))
    cuts = []
    for _ in range(count):
        start = rng.randrange(len(whole) - 1)
        cuts.append(whole[:start] + whole[start + rng.randrange(1, 40) :])
        if rng.random() < 0.3:
            cuts.append(whole[: len(whole) - 1 - rng.randrange(3)] + whole[-1:])
    return cuts


def test_a_cut_walked_from_a_checkpoint_is_judged_as_a_fresh_replay_judges_it() -> None:
    recording = engine_recording(300)
    assert recording.still_diverges(range(len(recording.trace.steps))) is not None
    fresh = Recording.of(recording.trace)
    for cut in cuts_of(recording, 60):
        answer = recording.still_diverges(cut)
        assert answer == Recording.of(recording.trace).still_diverges(cut), cut
    assert recording.checkpoints.saved, "no cut was walked from a checkpoint: the gate compared nothing"
    assert fresh.checkpoints.saved == []


def test_the_checkpoint_gate_sees_a_checkpoint_of_another_cut() -> None:
    """Negative control: a checkpoint planted from a walk of other calls makes the answers differ."""
    recording = engine_recording(300)
    whole = list(range(len(recording.trace.steps)))
    recording.still_diverges(whole)
    recording.still_diverges(whole[:-200] + whole[-1:])  # walks the first calls again: saves checkpoints
    assert recording.checkpoints.saved
    planted = recording.new_walk()
    for index in whole[: len(whole) // 3]:  # another history: every third call of the first third
        if index % 3 == 0:
            recording.take(planted, index, last=False)
    recording.checkpoints.saved = [(position, pickle.dumps(planted)) for position, _ in recording.checkpoints.saved]
    differs = [cut for cut in cuts_of(recording, 60) if recording.still_diverges(cut) != Recording.of(recording.trace).still_diverges(cut)]
    assert differs


def test_a_counterexamples_header_names_nodes_as_its_lines_do() -> None:
    run = parse_trace("prefixspec-trace 1\nblock_size 1\nx = insert [1 2] [10 11] -> new []\ny = match [1 2 3] -> 2 [10 11] x\n")
    disagreement = Disagreement(run, "result", "2 [10 11] x", "1 [10] x", "R3")
    written = counterexample_trace(1, run.calls(), disagreement, "title", "prefixspec replay IT").text()
    assert "#   spec:  2 [10 11] n1\n#   cache: 1 [10] n1\n" in written and "n2 = match [1 2 3] -> 2 [10 11] n1" in written, written
    assert " x" not in written.split("block_size")[1]  # negative control: the old name is gone from every line
