"""Delta debugging ends 1-minimal: no call, no window of neighbours and no pair of calls can be removed.

Shown where the windows alone kept calls (a lock and its unlock around a call
that is needed), on a recorded trace (``verify --shrink``) and on the
counterexamples of the core stages, checked by brute force.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from spec.model import SpecCache
from prefixspec.formats.trace import parse_trace, read_trace, record
from prefixspec.running.recorded import Recording, shrink
from prefixspec.compare.delta import PAIRS_UP_TO
from prefixspec.compare.shrink import delta_debug, first_disagreement, handles_resolve
from prefixspec.running.stages import RunPlan, run_stage
from prefixspec.shipped import IMPL_CATALOGUE
from prefixspec.targets.mutants import load_mutant, read_catalogue
from prefixspec.vocabulary import TAKE_EVENTS, Call, locks_and_unlocks, parse_call

FOREVER = float("inf")


def test_a_pair_that_only_goes_together_goes() -> None:
    """Items x and y are removable only together, with b between them needed: the windows keep all five."""

    def cut(candidate: list[str]) -> list[str] | None:
        needed = {"a", "b", "c"} <= set(candidate)
        return candidate if needed and (("x" in candidate) == ("y" in candidate)) else None

    assert delta_debug(["a", "x", "b", "y", "c"], cut, FOREVER) == ["a", "b", "c"]


def pairs_apart(needed: int, pairs: int) -> tuple[list[str], Callable[[list[str]], list[str] | None]]:
    """``needed`` items that must stay, and ``pairs`` pairs (``xK`` and ``yK``) each removable only together, with
    needed items between its two: the windows keep them all."""
    items = [f"n{index}" for index in range(needed)]
    for pair in range(pairs):
        items.insert(3 * pair, f"x{pair}")
        items.insert(3 * pair + 2, f"y{pair}")

    def cut(candidate: list[str]) -> list[str] | None:
        kept = set(candidate)
        together = all((f"x{pair}" in kept) == (f"y{pair}" in kept) for pair in range(pairs))
        return candidate if together and all(f"n{index}" in kept for index in range(needed)) else None

    return items, cut


def x_and_y(items: list[str]) -> list[tuple[int, int]]:
    """The positions of each ``xK`` and its ``yK``."""
    where = {item: position for position, item in enumerate(items)}
    return [(where[item], where["y" + item[1:]]) for item in items if item[0] == "x" and "y" + item[1:] in where]


def test_paired_items_go_from_a_list_too_long_for_every_pair() -> None:
    """Past ``PAIRS_UP_TO`` items every pair is too many to try, but the pairs ``paired`` gives (a lock and its
    unlock) go all the same, each tried once a sweep; the negative control: without ``paired`` they stay."""
    items, cut = pairs_apart(needed=60, pairs=12)
    assert len(items) > PAIRS_UP_TO
    tried: list[int] = []

    def counted_cut(candidate: list[str]) -> list[str] | None:
        tried.append(len(candidate))
        return cut(candidate)

    assert delta_debug(items, counted_cut, FOREVER, paired=x_and_y) == [f"n{index}" for index in range(60)]
    assert len(tried) < 3_000, len(tried)
    assert len(delta_debug(items, cut, FOREVER)) == len(items)


def call(text: str) -> Call:
    return parse_call(text, 1)


def test_each_unlock_is_paired_with_the_lock_it_releases() -> None:
    """An unlock goes with the latest lock of its handle that no unlock released before it; the root's locks, an
    unlock of nothing locked and calls of other kinds are paired with nothing."""
    calls = [call(text) for text in (
        "n1 = insert [1 2] [10]", "lock n1", "lock n1", "lock root", "unlock n1", "lock n2", "unlock root",
        "unlock n2", "unlock n1", "unlock n1", "lock n3",
    )]
    assert locks_and_unlocks(calls) == [(2, 4), (5, 7), (1, 8)]


def test_items_removable_one_at_a_time_cost_candidates_linear_in_the_list() -> None:
    """Half of 200 items go, each only alone (a long run's take_events): the complements go on past each removal
    instead of starting over, so the cut tries 1,104 candidates, where starting over tried 6,226 (n^2 / 2 in the
    removable ones); and the windows of one, which the last pass of the complements tried already, are not tried."""
    tried: list[int] = []

    def cut(candidate: list[int]) -> list[int] | None:
        tried.append(len(candidate))
        return candidate if all(item in candidate for item in range(0, 200, 2)) else None

    assert delta_debug(list(range(200)), cut, FOREVER) == list(range(0, 200, 2))
    assert len(tried) <= 8 * 200, len(tried)


LOCKED_AROUND = [
    "n1 = insert [1 2 3] [10]",
    "lock n1",
    "n3 = insert [5 6 7] [20]",
    "n4 = match [1 2 9]",
    "unlock n1",
    "cached_blocks",
    "n7 = match [5 6 9]",
    "evict 1",
]


def test_verify_shrink_drops_a_lock_and_its_unlock() -> None:
    """An engine that evicts the newest leaf: 8 recorded calls, 3 needed (both inserts and the evict).

    Neither the lock nor the unlock goes alone (the unlock's recorded `ok`
    would be NotLocked, or the evict would find the node pinned): the windows
    kept 5 of the 8.
    """
    calls = [parse_call(line, number) for number, line in enumerate(LOCKED_AROUND, start=1)]
    text = record(2, calls, SpecCache(2)).text().replace("evict 1 -> [10]", "evict 1 -> [20]")
    recording = Recording.of(parse_trace(text))
    kept = shrink(recording)
    assert [recording.trace.steps[index].call.text() for index in kept] == ["n1 = insert [1 2 3] [10]", "n3 = insert [5 6 7] [20]", "evict 1"]


CATALOGUE = read_catalogue(IMPL_CATALOGUE)


@pytest.mark.parametrize("mutant_id", ["s01", "s07", "s10", "m01", "n01"])
def test_the_core_stages_counterexamples_are_1_minimal(mutant_id: str, tmp_path: Path) -> None:
    """Every call and every pair of calls of the call machine's counterexample is needed (brute force)."""
    target = load_mutant(CATALOGUE, CATALOGUE.mutant(mutant_id))
    stage = run_stage("call machine", target, replace(RunPlan.of_profile("ci"), out_dir=tmp_path))
    assert stage.counterexample, stage.failure
    trace = read_trace(stage.counterexample)
    calls = [call for call in trace.calls() if call.op != TAKE_EVENTS.op]

    def still_fails(kept: list[int]) -> bool:
        candidate = [calls[index] for index in kept]
        return bool(candidate) and handles_resolve(candidate) and first_disagreement(trace.block_size, candidate, target, trace.rules) is not None

    everything = list(range(len(calls)))
    assert still_fails(everything)
    removable = [
        dropped
        for size in (1, 2)
        for dropped in itertools.combinations(everything, size)
        if still_fails([index for index in everything if index not in dropped])
    ]
    assert not removable, (stage.counterexample, removable)
