"""Counterexamples: replay calls on the spec and a target side by side, and cut them to the fewest.

A counterexample is a list of trace calls on which the target disagrees with
the spec (a result, an error, or the snapshot after a call).  ``minimise``
removes calls by delta debugging until every call left is needed: removing
any one of them, or any two (a lock and its unlock), makes the disagreement disappear.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from spec.api import CacheFactory, PrefixCacheError, Rules
from spec.model import SpecCache
from prefixspec.formats.repeats import fold, named_by_position, renamed_result
from prefixspec.formats.trace import FOREIGN, Trace, UnresolvedHandle
from prefixspec.compare.lockstep import Disagreement, Lockstep
from prefixspec.vocabulary import TAKE_EVENTS, Call


def handles_resolve(calls: Sequence[Call]) -> bool:
    """Every lock and unlock names a node that an earlier call in ``calls`` returned, the root, or another cache's node."""
    named = {"root", FOREIGN}
    for call in calls:
        if any(handle not in named for handle in call.handles):
            return False
        if call.name:
            named.add(call.name)
    return True


LONG_TRACE = 5000
"""A trace longer than this replays with its snapshots compared every ``SAMPLED_SNAPSHOTS`` calls and at its end,
and is not cut by delta debugging: it comes from the scale stage, where the cache holds thousands of blocks and one
snapshot costs milliseconds."""
SAMPLED_SNAPSHOTS = 500
SHORT_TRACE = 200
"""Up to this many calls a replay compares the snapshots after every call; up to LONG_TRACE, after every
``SHORT_TRACE // 4``-th and at the end: the extremes stage's traces build trees hundreds of nodes deep, where a
snapshot after each of their hundreds of calls made one replay cost seconds and delta debugging overran its
minute (the planted bug r04: a report after 69 s)."""


def first_disagreement(block_size: int, calls: Sequence[Call], target: CacheFactory, rules: Rules = Rules()) -> Disagreement | None:
    """Run ``calls`` on a fresh spec (under ``rules``) and a fresh target in lockstep; the first disagreement, or None.

    The events are taken where ``calls`` take them (a router polls when it
    likes: a take may span several calls); calls that take none have them
    taken after every insert and evict.
    """
    every = 1 if len(calls) <= SHORT_TRACE else SHORT_TRACE // 4 if len(calls) <= LONG_TRACE else SAMPLED_SNAPSHOTS
    takes_recorded = any(call.op == TAKE_EVENTS.op for call in calls)
    pair = Lockstep(
        SpecCache(block_size, rules), target(block_size), snapshot_every=every, target_factory=target, take_every=None if takes_recorded else 1
    )
    for call in calls:
        try:
            pair.perform(call)
        except Disagreement as disagreement:
            return disagreement
        except PrefixCacheError:
            pass  # both refused the call alike
        except UnresolvedHandle:
            return None  # a cut that removed what named a handle is not a counterexample
    if pair.target is not None:  # in full: a difference only the snapshots show must be found in a short replay too
        try:
            pair.check_snapshots(pair.reference, pair.target, full=True)
        except Disagreement as disagreement:
            return disagreement
    return None


Item = TypeVar("Item")


def delta_debug(
    items: list[Item], cut: Callable[[list[Item]], list[Item] | None], deadline: float, *, keep_last: bool = False
) -> list[Item]:
    """The shortest sublist of ``items`` (order kept) that ``cut`` accepts, by delta debugging.

    ``cut(candidate)`` returns None when the candidate no longer fails, else
    the failing list to go on from (the candidate, or a shorter one).  First
    complements of ever smaller chunks, then every window of 1 to 8
    neighbouring items (an insert, its lock and unlock, and the evict that
    freed it, only go together), then every pair of items apart (a lock and
    its unlock with a needed call between them: neither goes alone, since the
    unlock of a node never locked, or a lock never released, changes what
    follows; on lists of up to ``PAIRS_UP_TO`` items), until no removal
    helps.  So the result is 1-minimal, and more: no item, no window of up to
    8 and (up to ``PAIRS_UP_TO`` items) no pair of items can be removed.
    ``keep_last`` never removes the last item.  Stops improving at
    ``deadline`` (time.monotonic), the only way it returns a list that is not so.
    """
    best = items
    chunks = 2
    while len(best) >= 2 and time.monotonic() < deadline:
        removable = len(best) - 1 if keep_last else len(best)
        size = max(1, removable // chunks)
        reduced = False
        for start in range(0, removable, size):
            if time.monotonic() >= deadline:
                return best  # every candidate replays the calls: the deadline is checked before each
            shorter = cut(best[:start] + best[min(start + size, removable) :])
            if shorter is not None:
                best = shorter
                chunks = max(chunks - 1, 2)
                reduced = True
                break
        if not reduced:
            if size == 1:
                break
            chunks = min(removable, chunks * 2)
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for width in range(1, 9):
            for start in range(len(best) - width - (1 if keep_last else 0), -1, -1):
                if time.monotonic() >= deadline:
                    return best
                if start + width <= len(best) - (1 if keep_last else 0):
                    shorter = cut(best[:start] + best[start + width :])
                    if shorter is not None:
                        best = shorter
                        changed = True
        if not changed and len(best) <= PAIRS_UP_TO:
            shorter = without_a_pair(best, cut, deadline, keep_last)
            if shorter is not None:
                best = shorter
                changed = True  # the windows again: one pair gone may free single items
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


class DoesNotReproduce(ValueError):
    """Calls to minimise on which the target agrees with the spec."""


def minimise(
    block_size: int, calls: Sequence[Call], target: CacheFactory, rules: Rules = Rules(), *, time_budget: float = 60.0
) -> tuple[list[Call], Disagreement]:
    """The fewest calls, kept in order, on which ``target`` still disagrees with the spec.

    ``calls`` must disagree to begin with.  Delta debugging (``delta_debug``);
    every kept run is cut just after its disagreement.  Stops improving after
    ``time_budget`` seconds and returns the best found so far.
    """
    found = first_disagreement(block_size, calls, target, rules)
    if found is None:
        raise DoesNotReproduce("the calls do not make the target disagree with the spec")
    best = list(calls[: replayed_calls(calls, found)])
    if len(best) > LONG_TRACE:
        return best, found  # each replay would cost seconds: the calls up to the disagreement are the counterexample
    deadline = time.monotonic() + time_budget

    def still_fails(candidate: list[Call]) -> list[Call] | None:
        nonlocal found
        if not candidate or not handles_resolve(candidate):
            return None
        disagreement = first_disagreement(block_size, candidate, target, rules)
        if disagreement is None:
            return None
        found = disagreement
        return candidate[: replayed_calls(candidate, disagreement)]

    best = delta_debug(best, still_fails, deadline)
    return best, found


def replayed_calls(calls: Sequence[Call], disagreement: Disagreement) -> int:
    """How many of ``calls`` ``first_disagreement`` made up to the disagreement: all its steps when ``calls`` take
    the events themselves, else the steps less the takes the lockstep made."""
    if any(call.op == TAKE_EVENTS.op for call in calls):
        return len(disagreement.trace.steps)
    return driven_calls(disagreement)


def driven_calls(disagreement: Disagreement) -> int:
    """The calls made up to the disagreement, less the ``take_events`` the lockstep made itself."""
    return sum(1 for step in disagreement.trace.steps if step.call.op != TAKE_EVENTS.op)


def calls_count(calls: int) -> str:
    return f"{calls} call" if calls == 1 else f"{calls} calls"


def takes_note(takes: int) -> str:
    return f" (and {takes} take_events)" if takes else ""


def counterexample_trace(block_size: int, calls: Sequence[Call], disagreement: Disagreement, title: str, reproduce: str) -> Trace:
    """The calls the disagreement's run made (``calls``, and the lockstep's takes of events between them) with the
    spec's results as expectations, and the disagreement in the header.

    Every naming call is renamed for its position, and runs of identical calls or blocks of calls are written as
    repeat blocks (``repeats.fold``): a history of 2^16 uses reads as a handful of lines.
    """
    steps, renamed = named_by_position(disagreement.trace.steps)
    trace = Trace(block_size, fold(steps), rules=disagreement.trace.rules)
    last = disagreement.trace.steps[-1].call if disagreement.kind == "result" and disagreement.trace.steps else None
    spec, cache = (
        (disagreement.expected, disagreement.got)
        if last is None
        else (renamed_result(last, disagreement.expected, renamed), renamed_result(last, disagreement.got, renamed))
    )
    trace.comments = [
        title,
        f"{calls_count(driven_calls(disagreement))}{takes_note(len(trace.steps) - driven_calls(disagreement))}; the last one shows the disagreement ({disagreement.kind}):",
        f"  spec:  {spec}",
        f"  cache: {cache}",
        f"Reproduce with: {reproduce}",
    ]
    return trace
