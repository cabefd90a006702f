"""Counterexamples: replay calls on the spec and a target side by side, and cut them to the fewest.

A counterexample is a list of trace calls on which the target disagrees with
the spec (a result, an error, or the snapshot after a call).  ``minimise``
removes calls by delta debugging until every call left is needed: removing
any one of them, or any two (a lock and its unlock), makes the disagreement disappear.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

from spec.api import CacheFactory, PrefixCacheError, Rules
from spec.model import SpecCache
from prefixspec.formats.repeats import fold, named_by_position, renamed_result
from prefixspec.formats.trace import FOREIGN, Step, Trace, UnresolvedHandle
from prefixspec.compare.delta import delta_debug as delta_debug  # re-exported: where it was first
from prefixspec.compare.history import cut_history
from prefixspec.compare.lockstep import Disagreement, Lockstep
from prefixspec.vocabulary import TAKE_EVENTS, Call, counted, locks_and_unlocks


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
and is cut as a history before delta debugging (``history.cut_history``): it comes from the scale stage, where the
cache holds thousands of blocks, one snapshot costs milliseconds and one replay seconds."""
SAMPLED_SNAPSHOTS = 500
SHORT_TRACE = 200
"""Up to this many calls a replay compares the snapshots after every call; up to LONG_TRACE, after every
``SHORT_TRACE // 4``-th and at the end: the extremes stage's traces build trees hundreds of nodes deep, where a
snapshot after each of their hundreds of calls made one replay cost seconds and delta debugging overran its
minute (the planted bug r04: a report after 69 s)."""


def first_disagreement(
    block_size: int, calls: Sequence[Call], target: CacheFactory, rules: Rules = Rules(), *, deadline: float | None = None
) -> Disagreement | None:
    """Run ``calls`` on a fresh spec (under ``rules``) and a fresh target in lockstep; the first disagreement, or None.

    The events are taken where ``calls`` take them (a router polls when it
    likes: a take may span several calls); calls that take none have them
    taken after every insert and evict.  Past ``deadline`` (time.monotonic,
    read every ``DEADLINE_EVERY`` calls) the run stops, undecided: None.
    """
    every = 1 if len(calls) <= SHORT_TRACE else SHORT_TRACE // 4 if len(calls) <= LONG_TRACE else SAMPLED_SNAPSHOTS
    takes_recorded = any(call.op == TAKE_EVENTS.op for call in calls)
    pair = Lockstep(
        SpecCache(block_size, rules), target(block_size), snapshot_every=every, target_factory=target, take_every=None if takes_recorded else 1
    )
    for index, call in enumerate(calls):
        if deadline is not None and index % DEADLINE_EVERY == 0 and time.monotonic() >= deadline:
            return None
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


DEADLINE_EVERY = 1000
"""How often a replay reads the clock: 1,000 calls of a long history take some 10 ms."""


class DoesNotReproduce(ValueError):
    """Calls to minimise on which the target agrees with the spec."""


def minimise(
    block_size: int,
    calls: Sequence[Call],
    target: CacheFactory,
    rules: Rules = Rules(),
    *,
    time_budget: float = 60.0,
    steps: Sequence[Step] | None = None,
) -> Minimised:
    """The fewest calls, kept in order, on which ``target`` still disagrees with the spec.

    ``calls`` must disagree to begin with.  Delta debugging (``delta_debug``);
    every kept run is cut just after its disagreement.  A run longer than
    ``LONG_TRACE`` is first cut as a history (``history.cut_history``: calls
    replaced by fillers that keep the clock's count), and what is left, when
    short, by delta debugging.  Stops improving after ``time_budget`` seconds
    and returns the best found so far: of a long run, from the start, every
    replay stopped at the deadline; ``stopped_at_budget`` then says so.

    ``steps``, the run that found ``calls`` failing (its ``Disagreement.trace.steps``, with the spec's results),
    spares a long run its first replay: the history is cut from them at once, and ``calls`` are replayed whole,
    the check that they fail at all, only when no cut of them failed by the deadline.
    """
    started = time.monotonic()
    found: Disagreement | None = None

    def still_fails(candidate: list[Call]) -> list[Call] | None:
        nonlocal found
        if not candidate or not handles_resolve(candidate):
            return None
        disagreement = first_disagreement(block_size, candidate, target, rules, deadline=deadline)
        if disagreement is None:
            return None
        found = disagreement
        return candidate[: replayed_calls(candidate, disagreement)]

    def replay(candidate: list[Call]) -> tuple[list[Call], Sequence[Step]] | None:
        failing = still_fails(candidate)
        return None if failing is None or found is None else (failing, found.trace.steps)

    deadline = started + time_budget
    best = list(calls)
    if steps is not None and len(best) > LONG_TRACE and len(steps) == len(best):
        best = cut_history(best, steps, replay, deadline, rules, short=LONG_TRACE, block_size=block_size)
    if found is None:  # no cut failed: the calls themselves must
        found = first_disagreement(block_size, calls, target, rules)
        if found is None:
            raise DoesNotReproduce("the calls do not make the target disagree with the spec")
        best = list(calls[: replayed_calls(calls, found)])
        if len(best) > LONG_TRACE and steps is None:
            best = cut_history(best, found.trace.steps, replay, deadline, rules, short=LONG_TRACE, block_size=block_size)
        elif len(best) <= LONG_TRACE:
            deadline = time.monotonic() + time_budget  # a short run's budget is its cut's alone
    if len(best) <= LONG_TRACE:
        best = delta_debug(without_takes(best, still_fails), still_fails, deadline, paired=locks_and_unlocks)
    return Minimised(best, found, time.monotonic() >= deadline)


def without_takes(calls: list[Call], still_fails: Callable[[list[Call]], list[Call] | None]) -> list[Call]:
    """``calls`` less every ``take_events``, if they still fail so, else ``calls``: one replay, where delta debugging
    would remove them one by one.  Without takes of their own the lockstep takes the events after every insert and
    evict (``first_disagreement``), the schedule of most runs; a bug that shows only in a batch spanning calls keeps them.
    (n05, whose extremes run took after each of its 257 inserts: its minute ran out with every take still there.)"""
    kept = [call for call in calls if call.op != TAKE_EVENTS.op]
    if len(kept) == len(calls):
        return calls
    return still_fails(kept) or calls


class Minimised(NamedTuple):
    """What ``minimise`` kept, the disagreement they end with, and whether its time budget, not the cut, ended it
    (the calls still fail, but a longer budget, or a faster machine, may cut them further)."""

    calls: list[Call]
    disagreement: Disagreement
    stopped_at_budget: bool


def replayed_calls(calls: Sequence[Call], disagreement: Disagreement) -> int:
    """How many of ``calls`` ``first_disagreement`` made up to the disagreement: all its steps when ``calls`` take
    the events themselves, else the steps less the takes the lockstep made."""
    if any(call.op == TAKE_EVENTS.op for call in calls):
        return len(disagreement.trace.steps)
    return driven_calls(disagreement)


def driven_calls(disagreement: Disagreement) -> int:
    """The calls made up to the disagreement, less the ``take_events`` the lockstep made itself."""
    return sum(1 for step in disagreement.trace.steps if step.call.op != TAKE_EVENTS.op)


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
        f"{counted(driven_calls(disagreement), 'call')}{takes_note(len(trace.steps) - driven_calls(disagreement))}; the last one shows the disagreement ({disagreement.kind}):",
        f"  spec:  {spec}",
        f"  cache: {cache}",
        f"Reproduce with: {reproduce}",
    ]
    return trace
