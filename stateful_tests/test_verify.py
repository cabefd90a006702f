"""``prefixspec verify``: recorded traces held to the spec, divergences by line, and cut by --shrink."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

import impl
from spec.api import PrefixCacheError
from prefixspec.commands.main import main
from prefixspec.drive.engine import Engine, Workload
from prefixspec.formats.trace import parse_trace, read_trace
from prefixspec.running.recorded import Recording, shrink
from prefixspec.targets.recording import RecordingCache
from stateful_tests.broken_caches import LockPinsNothing


def record_engine_run(cache: impl.RadixCache, steps: int = 300) -> str:
    out = io.StringIO()
    recorder = RecordingCache(cache, out, title="an engine run, recorded")
    engine = Engine(recorder, Workload(block_size=cache.block_size(), pool_size=24), prompt_seed=5)
    rng = random.Random(5)
    try:
        for _ in range(steps):
            engine.step(rng)
    except (AssertionError, PrefixCacheError):
        pass  # a broken cache may trip the engine's own checks; the recording up to there is what counts
    return out.getvalue()


def test_a_recording_of_a_sound_cache_verifies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recorded = tmp_path / "run.trace"
    recorded.write_text(record_engine_run(impl.RadixCache(2)))
    assert main(["verify", str(recorded)]) == 0
    assert "are what the spec gives" in capsys.readouterr().out


def test_a_recording_of_a_broken_cache_diverges_at_a_line_and_shrinks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recorded = tmp_path / "run.trace"
    recorded.write_text(record_engine_run(LockPinsNothing(2)))
    assert main(["verify", str(recorded), "--shrink"]) == 1
    output = capsys.readouterr().out
    assert "diverge from the spec at line" in output
    assert "recorded:" in output and "spec:" in output
    shrunk = tmp_path / "run.shrunk.trace"
    cut = read_trace(str(shrunk))
    assert 1 <= len(cut.driven_steps()) <= 6
    assert main(["verify", str(shrunk)]) == 1
    assert f"(call {len(cut.steps)} of {len(cut.steps)})" in capsys.readouterr().out


def test_shrink_never_writes_its_cut_over_the_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--out`` naming the trace being verified, or a link to it, is usage, exit 2, before the run, the recording
    whole (the cut replaced it); another file takes the cut (the control)."""
    recorded = tmp_path / "run.trace"
    recorded.write_text(record_engine_run(LockPinsNothing(2)))
    (tmp_path / "link.trace").symlink_to(recorded)
    whole = recorded.read_text()
    for out in (recorded, tmp_path / "link.trace"):
        assert main(["verify", str(recorded), "--shrink", "--out", str(out)]) == 2
        assert "is the trace being verified" in capsys.readouterr().err
        assert recorded.read_text() == whole
    assert main(["verify", str(recorded), "--shrink", "--out", str(tmp_path / "cut.trace")]) == 1
    assert "the 3 calls before it" in capsys.readouterr().out and recorded.read_text() == whole
    assert len(read_trace(str(tmp_path / "cut.trace")).steps) < len(read_trace(str(recorded)).steps)


def test_shrinking_renames_nodes_and_repoints_locks() -> None:
    """The first handle of a node may go: later results call the node `new`, locks use the kept handle."""
    trace = parse_trace(
        "prefixspec-trace 1\nblock_size 1\n"
        "n1 = insert [1 2] [10 11] -> new []\n"
        "n2 = match [1 2 3] -> 2 [10 11] n1\n"
        "stats -> lookups=1 query_tokens=3 hit_tokens=2 inserted_blocks=2 evicted_blocks=0\n"
        "lock n1 -> ok\n"
        "n5 = insert [7] [12] -> new []\n"
        "evict 9 -> [10 11 12]\n"  # wrong: n1's prefix is locked; the spec frees [12]
    )
    recording = Recording.of(trace)
    assert recording.first_divergence() == 5
    kept = shrink(recording)
    cut = recording.cut(kept)
    assert cut is not None
    _, steps, _ = cut
    # The stats call and the match go; the insert of [7] stays, because block 12 that the
    # recorded evict names must stay where it was.
    assert [step.text() for step in steps] == [
        "n1 = insert [1 2] [10 11] -> new []",
        "lock n1 -> ok",
        "n5 = insert [7] [12] -> new []",
        "evict 9 -> [10 11 12]",
    ]
    renamed = recording.cut([1, 3, 4, 5])  # without n1's insert: n2 returns the node first, the lock points at it
    assert renamed is not None
    assert [step.text() for step in renamed[1]] == [
        "n2 = match [1 2 3] -> 2 [10 11] new",
        "lock n2 -> ok",
        "n5 = insert [7] [12] -> new []",
        "evict 9 -> [10 11 12]",
    ]
    assert recording.still_diverges([1, 3, 4, 5]) is None  # without the insert, [1 2] is not cached for n2 to match
    assert recording.still_diverges([4, 5]) is None  # blocks 10 and 11, which the recorded evict names, are gone


def test_a_trace_without_results_is_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "bare.trace"
    bare.write_text("prefixspec-trace 1\nblock_size 2\nn1 = match [1 2 3]\n")
    assert main(["verify", str(bare)]) == 2
    assert "records no results" in capsys.readouterr().err


def test_recording_writes_errors_and_passes_them_on() -> None:
    out = io.StringIO()
    cache = RecordingCache(impl.RadixCache(2), out)
    node = cache.insert([1, 2, 3], [4]).node
    with pytest.raises(Exception) as refused:
        cache.unlock(node)
    assert type(refused.value).__name__ == "NotLocked"
    assert out.getvalue().splitlines()[-2:] == ["n1 = insert [1 2 3] [4] -> new []", "unlock n1 -> NotLocked"]
