"""Delta debugging: the shortest sublist of a list that a test still accepts, by removing chunks, windows and pairs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar


Item = TypeVar("Item")


def delta_debug(
    items: list[Item],
    cut: Callable[[list[Item]], list[Item] | None],
    deadline: float,
    *,
    keep_last: bool = False,
    thorough: bool = True,
    paired: Callable[[list[Item]], Iterable[tuple[int, int]]] | None = None,
) -> list[Item]:
    """The shortest sublist of ``items`` (order kept) that ``cut`` accepts, by delta debugging.

    ``cut(candidate)`` returns None when the candidate no longer fails, else
    the failing list to go on from (the candidate, or a shorter one).  First
    complements of ever smaller chunks (a pass goes on past a removal, so
    n items that go one at a time cost n candidates, not n^2 / 2), then
    every window of 1 (unless the last pass of complements, of single items,
    removed none) to 8 neighbouring items (an insert, its lock and unlock,
    and the evict that freed it, only go together), then every pair of
    items apart (a lock and its unlock with a needed call between them:
    neither goes alone, since the unlock of a node never locked, or a lock
    never released, changes what follows; on lists of up to ``PAIRS_UP_TO``
    items), until no removal helps.  So the result is 1-minimal, and more: no item, no window of up to
    8 and (up to ``PAIRS_UP_TO`` items) no pair of items can be removed.  On a longer list, given
    ``paired`` (the positions of the pairs of a list worth trying together: a lock and the unlock that
    releases it), those pairs are tried, and none of them can be removed either: as many as the items at
    most, few enough to try on any list.
    ``keep_last`` never removes the last item.  Not ``thorough``: the
    complements alone, 1-minimal but no more (where each candidate costs a
    replay of seconds).  Stops improving at ``deadline`` (time.monotonic), the
    only way it returns a list that is not so.
    """
    best = items
    chunks = 2
    singles_tried = False  # a whole pass removed no single item: every one is needed, windows of 1 would try them again
    while len(best) >= 2 and time.monotonic() < deadline:
        removable = len(best) - 1 if keep_last else len(best)
        size = max(1, removable // chunks)
        reduced = False
        start = 0
        while start < removable:
            if time.monotonic() >= deadline:
                return best  # every candidate replays the calls: the deadline is checked before each
            shorter = cut(best[:start] + best[min(start + size, removable) :])
            if shorter is None:
                start += size
                continue
            # The pass goes on from here, the chunks before it tried already: starting over after each removal
            # made a list of n items needing n removals one at a time (the takes of a long run) cost n^2 / 2
            # candidates, where it costs n (n05's counterexample of 513 steps, 256 of them takes: still cut short
            # after 600 s, now 1-minimal and past its windows in 67 s).
            best = shorter
            removable = len(best) - 1 if keep_last else len(best)
            reduced = True
        if reduced:
            chunks = max(chunks - 1, 2)
        elif size == 1:
            singles_tried = True
            break
        else:
            chunks = min(removable, chunks * 2)
    if not thorough:
        return best
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for width in range(2 if singles_tried else 1, 9):
            for start in range(len(best) - width - (1 if keep_last else 0), -1, -1):
                if time.monotonic() >= deadline:
                    return best
                if start + width <= len(best) - (1 if keep_last else 0):
                    shorter = cut(best[:start] + best[start + width :])
                    if shorter is not None:
                        best = shorter
                        changed = True
                        singles_tried = False
        if not changed and len(best) <= PAIRS_UP_TO:
            shorter = without_a_pair(best, cut, deadline, keep_last)
        elif not changed and paired is not None:
            shorter = without_paired(best, cut, deadline, keep_last, paired)
        else:
            shorter = None
        if shorter is not None:
            best = shorter
            changed = True  # the windows again: one pair gone may free single items
            singles_tried = False
    return best


PAIRS_UP_TO = 64
"""The longest list whose pairs are tried (2,016 candidates): the windows leave counterexamples of a few calls, and
a longer list, one the windows could not cut, would spend the whole budget on pairs and report later."""


def without_a_pair(
    items: list[Item], cut: Callable[[list[Item]], list[Item] | None], deadline: float, keep_last: bool
) -> list[Item] | None:
    """The first failing list ``cut`` gives for ``items`` less two items that are not neighbours, nearest pairs first; None if none.

    Neighbours went with the windows already.  Quadratic in the number of
    items, each candidate a replay: it runs on lists that the windows have
    cut already, and stops at ``deadline``.
    """
    end = len(items) - (1 if keep_last else 0)
    for gap in range(2, end):
        for first in range(end - gap - 1, -1, -1):
            if time.monotonic() >= deadline:
                return None
            second = first + gap
            shorter = cut(items[:first] + items[first + 1 : second] + items[second + 1 :])
            if shorter is not None:
                return shorter
    return None


def without_paired(
    items: list[Item],
    cut: Callable[[list[Item]], list[Item] | None],
    deadline: float,
    keep_last: bool,
    paired: Callable[[list[Item]], Iterable[tuple[int, int]]],
) -> list[Item] | None:
    """``items`` less every pair ``paired`` gives that ``cut`` lets go, in one sweep down from the end that goes on
    past each removal; None if none goes.

    A long counterexample the windows could not cut holds locks and the unlocks that release them with needed
    calls between: a pass that went back to the windows after each pair replayed every window again.  The
    positions below a removed pair's first never move, so the sweep goes on below it with the pairs of the
    shorter list: each pair is tried once a sweep (a broken cache's 400-step engine run, left at 124 calls
    with 81 removable pairs, is cut to 23 in 7.3 s: ``stateful_tests/test_shrink_held_out.py``).
    """
    best = items
    removed = False
    below = len(best)
    while True:
        end = len(best) - (1 if keep_last else 0)
        todo = sorted(((first, second) for first, second in paired(best) if first < below and first + 1 < second < end), reverse=True)
        for first, second in todo:
            if time.monotonic() >= deadline:
                return best if removed else None
            shorter = cut(best[:first] + best[first + 1 : second] + best[second + 1 :])
            if shorter is not None:
                best, removed, below = shorter, True, first
                break
        else:
            return best if removed else None
