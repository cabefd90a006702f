"""Joined inserts: the blocks many inserts cached, cached by a few inserts of fresh prompts (``compare.joins``).

A bug of a count of cached blocks needs the count, not the prompts: the history
cut replaces the inserts it kept by fewer, longer ones (``joins.joined``), each
replay kept only when it still fails at its last call.  Here the joins are
replayed on the spec under several rule sets (none refused, the same count),
and the cut is driven by replays that stand for bugs: one of a count alone
(joined), one of the prompts too (a join passes: refused), one that a join
makes fail elsewhere (refused too).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prefixspec.compare import history
from prefixspec.compare.history import cut_history
from prefixspec.compare.joins import LONGEST_JOIN, added_blocks, joined, parts_of
from prefixspec.formats.repeats import Step
from prefixspec.formats.trace import record
from prefixspec.vocabulary import Call, parse_call, result_error
from spec.api import RULE_PRESETS, Namespace, Rules
from spec.model import SpecCache

SPACES: tuple[Namespace, ...] = (None, "a", ("t", 1))


def as_calls(lines: Sequence[str]) -> list[Call]:
    return [parse_call(line, number) for number, line in enumerate(lines, start=1)]


@st.composite
def insert_histories(draw: st.DrawFn) -> tuple[int, list[Call]]:
    """Inserts of prompts over three tokens (so that they share prefixes) in three namespaces, as an engine makes
    them: the cached id passed back where a position is cached, a new id elsewhere; then the count of blocks."""
    block = draw(st.sampled_from([1, 2, 4]))
    cached: dict[tuple[Namespace, tuple[int, ...]], int] = {}
    ids = itertools.count(10)
    calls: list[Call] = []
    for number in range(draw(st.integers(2, 10))):
        space = draw(st.sampled_from(SPACES))
        tokens = tuple(draw(st.lists(st.integers(1, 3), max_size=5 * block)))
        blocks = [cached.setdefault((space, tokens[:end]), next(ids)) for end in range(block, len(tokens) + 1, block)]
        calls.append(Call("insert", (tokens, tuple(blocks)), f"n{number + 1}", space))
    return block, [*calls, Call("cached_blocks")]


@settings(max_examples=60, deadline=None)
@given(insert_histories(), st.sampled_from([1, 2, 3]), st.sampled_from(sorted(RULE_PRESETS)))
def test_joins_cache_the_same_blocks_within_each_namespace_under_every_rule_set(
    history_: tuple[int, list[Call]], parts: int, preset: str
) -> None:
    block, calls = history_
    rules = RULE_PRESETS[preset]
    count = record(block, calls, SpecCache(block, rules)).steps[-1].expected
    inserts = [index for index, call in enumerate(calls) if call.op == "insert"]
    found = joined(calls, inserts, parts, block)
    spaces = {space: [index for index in inserts if calls[index].namespace == space] for space in SPACES}
    if found is None:
        assert all(len(run) < 2 for indices in spaces.values() for run in parts_of(indices, parts))
        return
    base, joins = found
    candidate = [base[index] for index in joins] + calls[-1:]  # the parts' other inserts hollowed (here: left out)
    steps = record(block, candidate, SpecCache(block, rules)).steps
    assert all(step.expected is None or result_error(step.expected) is None for step in steps), [step.text() for step in steps]
    assert steps[-1].expected == count
    added = added_blocks(calls, block)
    for space, indices in spaces.items():
        mine = [index for index in joins if base[index].namespace == space]
        assert len(mine) <= parts
        assert sorted(block_id for index in mine for block_id in cast(tuple[int, ...], base[index].arg("blocks"))) == sorted(
            block_id for index in indices for block_id in added[index]
        )


def test_parts_are_runs_of_neighbours() -> None:
    assert parts_of([3, 5, 8, 9, 12], 2) == [[3, 5, 8], [9, 12]]
    assert parts_of([3, 5], 4) == [[3], [5]] and parts_of([], 2) == []


BLOCK = 2
PROMPTS = 12
NEEDED = 40
"""Blocks a planted count bug needs cached: ten of the twelve 4-block prompts."""


def lively_history(spaces: Sequence[Namespace] = (None,)) -> list[Call]:
    """Twelve inserts of 4-block prompts (tokens from 1000), namespaces in turn from ``spaces``, each followed by a
    match of it, then the count of blocks."""
    calls: list[Call] = []
    for number in range(PROMPTS):
        tokens = tuple(range(1000 + 10 * number, 1008 + 10 * number))
        space = spaces[number % len(spaces)]
        calls.append(Call("insert", (tokens, tuple(range(100 + 4 * number, 104 + 4 * number))), f"i{number}", space))
        calls.append(Call("match", (tokens[:5],), f"m{number}", space))
    return [*calls, Call("cached_blocks")]


Failing = Callable[[list[Call], list[Step]], int | None]
"""A planted bug: the count of ``calls`` (of the spec's run that made ``steps``) at which it fails, or None."""


def cut_with(calls: list[Call], failing: Failing) -> list[Call]:
    """``cut_history`` of ``calls`` with the spec's run standing for the target, ``failing`` for the bug."""

    def replay(candidate: list[Call]) -> tuple[list[Call], Sequence[Step]] | None:
        steps = list(record(BLOCK, candidate, SpecCache(BLOCK)).steps)
        upto = failing(candidate, steps)
        return None if upto is None else (candidate[:upto], steps[:upto])

    assert failing(calls, list(record(BLOCK, calls, SpecCache(BLOCK)).steps)) == len(calls)
    return cut_history(calls, record(BLOCK, calls, SpecCache(BLOCK)).steps, replay, time.monotonic() + 30.0, Rules(), short=5000, block_size=BLOCK)


def count_bug(candidate: list[Call], steps: list[Step]) -> int | None:
    """Fails at the count of blocks once ``NEEDED`` are cached."""
    last = steps[-1]
    return len(candidate) if last.call.op == "cached_blocks" and int(last.expected or 0) >= NEEDED else None


def joins_of(cut: list[Call]) -> list[Call]:
    return [call for call in cut if call.op == "insert" and cast(tuple[int, ...], call.arg("tokens"))[0] < 1000]


def test_a_count_of_blocks_is_cut_to_one_join() -> None:
    cut = cut_with(lively_history(), count_bug)
    [join] = [call for call in cut if call.op == "insert"]
    assert joins_of(cut) == [join] and len(cast(tuple[int, ...], join.arg("blocks"))) == PROMPTS * 4
    assert len(cut) == 2 and cut[-1].op == "cached_blocks"


def test_without_joins_the_cut_keeps_the_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: the join step disabled, the cut keeps the ten prompts a count of 40 needs."""
    monkeypatch.setattr(history, "joined", lambda *_: None)
    cut = cut_with(lively_history(), count_bug)
    assert not joins_of(cut) and len([call for call in cut if call.op == "insert"]) >= NEEDED // 4


def test_joins_keep_to_their_namespaces() -> None:
    cut = cut_with(lively_history(("a", None)), count_bug)
    inserts = [call for call in cut if call.op == "insert"]
    assert joins_of(cut) == inserts and sorted(map(str, (call.namespace for call in inserts))) == ["None", "a"]
    assert len(cut) == 3


def test_a_join_that_passes_is_refused() -> None:
    """A bug of the prompts as well as of the count (the planted one reads the prompts' first tokens): every join
    passes, so the cut keeps the prompts."""

    def prompt_bug(candidate: list[Call], steps: list[Step]) -> int | None:
        return None if joins_of(candidate) else count_bug(candidate, steps)

    cut = cut_with(lively_history(), prompt_bug)
    assert not joins_of(cut) and len([call for call in cut if call.op == "insert"]) >= NEEDED // 4


def test_a_join_that_fails_elsewhere_is_refused() -> None:
    """A join that fails at another call than the last (here: at the join itself) fails otherwise: refused, though
    the replay failed (``at_last``)."""

    def elsewhere(candidate: list[Call], steps: list[Step]) -> int | None:
        joins = joins_of(candidate)
        return candidate.index(joins[0]) + 1 if joins else count_bug(candidate, steps)

    cut = cut_with(lively_history(), elsewhere)
    assert not joins_of(cut) and len([call for call in cut if call.op == "insert"]) >= NEEDED // 4


def test_a_join_past_the_longest_is_split() -> None:
    """A join of more than ``LONGEST_JOIN`` blocks is never replayed (one call of it would outlast a deadline):
    the cut joins into halves.  The replay stands for a bug of the count, and runs nothing."""
    size = LONGEST_JOIN // 4 + 8
    calls = [
        Call("insert", (tuple(range(1000 + 2 * size * number, 1000 + 2 * size * (number + 1))), tuple(range(size * number, size * (number + 1)))), f"i{number}")
        for number in range(4)
    ]
    calls.append(Call("cached_blocks"))
    found = joined(calls, range(4), 1, BLOCK)
    assert found is not None and len(cast(tuple[int, ...], found[0][found[1][0]].arg("blocks"))) > LONGEST_JOIN
    replayed: list[list[Call]] = []

    def replay(candidate: list[Call]) -> tuple[list[Call], Sequence[Step]] | None:
        """Fails while the inserts hold all four prompts' blocks, and counts them at the last call."""
        replayed.append(candidate)
        held = sum(len(cast(tuple[int, ...], call.arg("blocks"))) for call in candidate if call.op == "insert")
        return (candidate, [Step(call, None) for call in candidate]) if held == 4 * size and candidate[-1].op == "cached_blocks" else None

    cut = cut_history(calls, [Step(call, None) for call in calls], replay, time.monotonic() + 60.0, Rules(), short=5000, block_size=BLOCK)
    assert replayed and all(len(cast(tuple[int, ...], call.arg("blocks"))) <= LONGEST_JOIN for candidate in replayed for call in candidate if call.op == "insert")
    assert len(joins_of(cut)) == 2
