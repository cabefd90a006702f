"""A long history cut to a handful of lines: calls replaced by fillers that keep the clock's count (``compare.history``).

A planted bug that keeps the clock of last use in 13 bits (impl's r07 with a
smaller mask) shows only after 8,192 matches: two locked prefixes, one used
just before the wrap and one just after, are freed in the wrong order once
unlocked.  Each match between them counts, so removing calls (delta
debugging) cannot cut the thousands of matches that carry the clock; filling
them can, and the fillers fold into one repeat block.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest

from prefixspec.commands.replay import replay_beside_spec
from prefixspec.compare import shrink
from prefixspec.compare.delta import delta_debug
from prefixspec.compare.history import FILLER_TOKENS, filler, filler_slack, hollowed, inert, spec_results
from prefixspec.compare.lockstep import Disagreement
from prefixspec.compare.shrink import LONG_TRACE, DoesNotReproduce, counterexample_trace, first_disagreement, handles_resolve, minimise
from prefixspec.exit_status import ExitStatus
from prefixspec.formats.trace import Step, parse_trace, read_trace, record, replay
from prefixspec.running.report import cut_long_comments
from prefixspec.shipped import IMPL_CATALOGUE
from prefixspec.targets.mutants import load_mutant, read_catalogue
from prefixspec.vocabulary import Call, parse_call
from impl import RadixCache
from spec.api import CacheFactory, Namespace, PrefixMatch, Rules
from spec.model import SpecCache

BLOCK = 2
WRAP = 1 << 13


def clock_in_13_bits() -> CacheFactory:
    """impl with the catalogue's r07 edit (the clock kept in 16 bits) narrowed to 13."""
    catalogue = read_catalogue(IMPL_CATALOGUE)
    r07 = catalogue.mutant("r07")
    narrowed = dataclasses.replace(r07, id="clock13", replace=r07.replace.replace("0xFFFF", hex(WRAP - 1)))
    return load_mutant(catalogue, narrowed)


def noise(count: int, first: int) -> list[str]:
    """``count`` matches of distinct prompts that miss: each ticks the clock, none reads the same."""
    return [f"m{first + offset} = match [{first + offset + 100} 7 7]" for offset in range(count)]


def long_history() -> list[Call]:
    """Over LONG_TRACE calls: a prefix used at tick ~8,100 (just before the 13-bit wrap) and one at ~8,300."""
    lines = ["a = insert [1 2 3] [10]", "b = insert [5 6 7] [20]", "lock a", "lock b"]
    lines += noise(WRAP - 100, len(lines))
    lines.append("ua = match [1 2 9]")
    lines += noise(200, len(lines))
    lines.append("ub = match [5 6 9]")
    lines += noise(1000, len(lines))
    lines += ["unlock a", "unlock b"]
    calls = [parse_call(line, number) for number, line in enumerate(lines, start=1)]
    assert len(calls) > LONG_TRACE
    return calls


@pytest.fixture(scope="module")
def planted() -> CacheFactory:
    return clock_in_13_bits()


def test_a_filler_is_inert_and_ticks_the_clock() -> None:
    """The filler's usable prefix is empty under every block size (R3), so it matches the root; it is the
    history cut's only new call, and ``inert`` knows a miss for one."""
    calls = long_history()
    fill = filler(calls)
    assert fill.arg("tokens") == FILLER_TOKENS and fill.name not in {call.name for call in calls}
    probe = [parse_call(line, number) for number, line in enumerate(["n1 = insert [0 0 0 0] [1 2]", "n2 = match [0]", "n3 = match [0 0 0]"], 1)]
    steps = record(BLOCK, probe, SpecCache(BLOCK)).steps
    assert steps[1].expected == "0 [] root"
    quiet, refused = inert(probe, spec_results(probe, steps))
    assert not refused and 1 in quiet and 2 not in quiet  # [0] misses; [0 0 0] finds a block


def test_hollowed_keeps_the_ticks_and_drops_the_locks_of_what_went() -> None:
    calls = long_history()
    fill = filler(calls)
    cut = hollowed(calls, {0}, fill, Rules())
    assert cut[0] == fill and all(call.handles != ("a",) for call in cut) and handles_resolve(cut)
    assert sum(call.kind.uses for call in cut) == sum(call.kind.uses for call in calls)


def test_a_clock_overflow_is_cut_to_a_handful_of_lines(planted: CacheFactory) -> None:
    calls = long_history()
    assert first_disagreement(BLOCK, calls, planted) is not None
    kept, disagreement, _ = minimise(BLOCK, calls, planted, time_budget=120.0)
    text = cut_long_comments(counterexample_trace(BLOCK, kept, disagreement, "a clock in 13 bits", "-").text())
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(lines) <= 16, text
    assert "repeat" in text and len(kept) > WRAP - 100
    written = parse_trace(text)
    assert first_disagreement(BLOCK, written.calls(), planted) is not None  # the file still fails on the bug
    assert first_disagreement(BLOCK, written.calls(), load_mutant(read_catalogue(IMPL_CATALOGUE), None)) is None
    # Negative control: the calls it kept, without the fillers that carry the count, no longer fail.
    real = [call for call in written.calls() if not (call.op == "match" and call.args == (FILLER_TOKENS,))]
    assert len(real) < 10 and first_disagreement(BLOCK, real, planted) is None


def test_removal_alone_leaves_the_history_long(planted: CacheFactory) -> None:
    """Negative control: delta debugging's removals, given the same calls and as many replays as the history cut
    needs, keep thousands: every match removed before the wrap moves it."""
    calls = long_history()
    replays = 0

    def still_fails(candidate: list[Call]) -> list[Call] | None:
        nonlocal replays
        replays += 1
        if replays > 20 or not handles_resolve(candidate):
            return None
        return candidate if first_disagreement(BLOCK, candidate, planted) is not None else None

    kept = delta_debug(calls, still_fails, time.monotonic() + 60.0, thorough=False)
    assert len(kept) > WRAP - 200


@pytest.mark.deep
def test_the_r07_hunt_writes_a_handful_of_lines(tmp_path: Path) -> None:
    """The scale stage's counterexample of a 16-bit clock: a handful of lines, failing on r07, passing on impl."""
    target = f"{IMPL_CATALOGUE}#r07"
    subprocess.run([sys.executable, "-m", "prefixspec", "hunt", "--quiet", "--mutant", "r07", "--out", str(tmp_path)], check=True, cwd=tmp_path)
    written = tmp_path / "r07.trace"
    lines = [line for line in written.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert len(lines) <= 40
    replay = [sys.executable, "-m", "prefixspec", "replay", str(written), "--target"]
    assert subprocess.run([*replay, target], cwd=tmp_path, capture_output=True).returncode == 1
    assert subprocess.run([*replay, "impl:RadixCache"], cwd=tmp_path, capture_output=True).returncode == 0


def failing_steps(calls: list[Call], target: CacheFactory) -> tuple[list[Call], list[Step]]:
    """The calls up to the disagreement and the steps of the run that found it, as a stage hands them over (the
    lockstep's takes of events among the calls)."""
    found = first_disagreement(BLOCK, calls, target)
    assert found is not None
    return [step.call for step in found.trace.steps], list(found.trace.steps)


@dataclass
class StepsCut:
    """The planted clock's history cut from the steps of the run that found it, and the lengths of its replays."""

    calls: list[Call]
    kept: list[Call]
    disagreement: Disagreement
    replayed: list[bool]
    """For each replay, whether it replayed the history whole."""


@pytest.fixture(scope="module")
def steps_cut(planted: CacheFactory) -> Iterator[StepsCut]:
    calls, steps = failing_steps(long_history(), planted)
    replayed: list[bool] = []
    real_replay = shrink.first_disagreement

    def counted(
        block_size: int, candidate: Sequence[Call], target: CacheFactory, rules: Rules = Rules(), *, deadline: float | None = None
    ) -> Disagreement | None:
        replayed.append(list(candidate) == calls)
        return real_replay(block_size, candidate, target, rules, deadline=deadline)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shrink, "first_disagreement", counted)
        kept, disagreement, _ = minimise(BLOCK, calls, planted, time_budget=120.0, steps=steps)
    yield StepsCut(calls, kept, disagreement, replayed)


def test_the_runs_own_steps_spare_the_first_replay_and_the_cut_replays_as_failing(
    planted: CacheFactory, steps_cut: StepsCut, tmp_path: Path
) -> None:
    assert steps_cut.replayed and not any(steps_cut.replayed)  # never the whole history: the run's steps told what was inert
    text = cut_long_comments(counterexample_trace(BLOCK, steps_cut.kept, steps_cut.disagreement, "a clock in 13 bits", "-").text())
    assert len([line for line in text.splitlines() if line and not line.startswith("#")]) <= 16, text
    written = tmp_path / "clock13.trace"
    written.write_text(text, encoding="utf-8")
    trace = read_trace(str(written))
    assert "repeat" in text and len(trace.calls()) > WRAP - 100
    assert replay(trace, SpecCache(BLOCK), SpecCache) is None  # its expectations are the spec's own results
    assert replay_beside_spec(trace, str(written), planted, "clock13") == ExitStatus.FAILED
    assert replay_beside_spec(trace, str(written), load_mutant(read_catalogue(IMPL_CATALOGUE), None), "impl") == ExitStatus.PASSED


def without_first_fillers(calls: list[Call], count: int) -> list[Call]:
    fillers = [index for index, call in enumerate(calls) if call.op == "match" and call.args == (FILLER_TOKENS,)]
    left_out = set(fillers[:count])
    return [call for index, call in enumerate(calls) if index not in left_out]


def test_the_fillers_are_cut_to_the_fewest_the_wrap_needs(planted: CacheFactory, steps_cut: StepsCut) -> None:
    """The history held some 100 ticks more than the wrap needs (its matches before the first prefix's use); the
    earliest fillers are left out until ``filler_slack`` more (two, of some 8,300 calls) no longer fail.
    Negative control: that many fillers fewer passes."""
    slack = filler_slack(len(steps_cut.calls))
    assert slack == 2 and WRAP < len(steps_cut.kept) <= WRAP + slack + 2
    assert first_disagreement(BLOCK, without_first_fillers(steps_cut.kept, slack), planted) is None


COUNTED = 5200
"""Matches whose hit tokens ``HitsUncountedAfter`` counts: the next ones count none."""


class HitsUncountedAfter(RadixCache):
    """impl whose hit tokens stop counting after ``COUNTED`` matches: a bug of a count of uses, not of the clock."""

    def __init__(self, block_size: int) -> None:
        super().__init__(block_size)
        self.matches = 0

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        self.matches += 1
        found = super().match_prefix(tokens, namespace=namespace)
        if self.matches > COUNTED:
            self._hit_tokens -= found.matched_tokens
        return found


def test_a_count_of_uses_is_cut_to_the_fewest_that_fail() -> None:
    """A hit after 6,000 misses shows the planted counter; the fewest calls that do: its insert, ``COUNTED``
    fillers and the hit (the lockstep's take of the insert's event beside them).  Negative control: one filler
    fewer passes, and impl passes the cut."""
    lines = ["a = insert [1 2 3] [10]", *noise(6000, 1), "hit = match [1 2 9]"]
    history = [parse_call(line, number) for number, line in enumerate(lines, start=1)]
    calls, steps = failing_steps(history, HitsUncountedAfter)
    kept, _, _ = minimise(BLOCK, calls, HitsUncountedAfter, time_budget=120.0, steps=steps)
    assert COUNTED + 2 <= len(kept) <= COUNTED + 3
    assert filler_slack(len(calls)) == 1 and first_disagreement(BLOCK, without_first_fillers(kept, 1), HitsUncountedAfter) is None
    assert first_disagreement(BLOCK, kept, RadixCache) is None


class LookupsIn13Bits(RadixCache):
    """impl whose count of lookups (R9) wraps at 2^13: only matches show it, and the fillers are matches."""

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        found = super().match_prefix(tokens, namespace=namespace)
        self._lookups %= WRAP
        return found


def test_a_count_the_fillers_alone_carry_is_cut_to_fillers_alone() -> None:
    """The wrap shows at a filler, so the cut keeps no real call: ``WRAP`` matches of one token, to within
    ``filler_slack``, one repeat block (a cut that looked for the last real call among none failed here, as in a
    scale run's, whose calls leave the takes of events to the lockstep).  Negative control: that many fillers
    fewer passes."""
    lines = ["a = insert [1 2 3] [10]", *noise(WRAP + 200, 1)]
    history = [parse_call(line, number) for number, line in enumerate(lines, start=1)]
    kept, disagreement, _ = minimise(BLOCK, history, LookupsIn13Bits, time_budget=120.0)
    slack = filler_slack(len(history))
    assert WRAP <= len(kept) <= WRAP + slack and all(call.op == "match" and call.args == (FILLER_TOKENS,) for call in kept)
    text = counterexample_trace(BLOCK, kept, disagreement, "lookups in 13 bits", "-").text()
    assert len([line for line in text.splitlines() if line and not line.startswith("#")]) == 6, text  # header, size, rules, a block of one call
    assert first_disagreement(BLOCK, without_first_fillers(kept, slack), LookupsIn13Bits) is None


def test_a_cut_that_hollows_a_needed_call_is_refused(planted: CacheFactory, steps_cut: StepsCut) -> None:
    """Negative control: the history cut's first candidates keep the last real calls alone, which hollows the
    inserts of the two prefixes whose order the wrap reverses; that no longer fails, so the cut keeps them."""
    without = hollowed(steps_cut.calls, [index for index, call in enumerate(steps_cut.calls) if call.op == "insert"], filler(steps_cut.calls), Rules())
    assert first_disagreement(BLOCK, without, planted) is None
    assert [call.arg("tokens") for call in steps_cut.kept if call.op == "insert"] == [(1, 2, 3), (5, 6, 7)]


def test_a_history_that_does_not_fail_is_no_counterexample(planted: CacheFactory) -> None:
    """Negative control: the steps of a failing run, handed over with a target on which neither the calls nor any
    cut of them fails, give no counterexample (its repeat-form cuts included)."""
    calls, steps = failing_steps(long_history(), planted)
    with pytest.raises(DoesNotReproduce):
        minimise(BLOCK, calls, load_mutant(read_catalogue(IMPL_CATALOGUE), None), time_budget=30.0, steps=steps)


def test_a_replay_stops_undecided_at_its_deadline(planted: CacheFactory) -> None:
    """A report waits for no replay past its budget: a replay past its deadline answers None, no disagreement."""
    calls = long_history()
    assert first_disagreement(BLOCK, calls, planted, deadline=time.monotonic() - 1.0) is None
    assert first_disagreement(BLOCK, calls, planted, deadline=None) is not None
