"""Cutting long histories: calls replaced by inert fillers that keep the count of the clock's ticks.

A bug that needs many uses of R7's clock (a clock kept in 16 bits wraps after
2^16 matches and inserts) needs their count, not the particular calls: delta
debugging could remove none of them, since each removal moves the wrap.  So
here a cut replaces calls instead of removing them: a call that ticks the
clock becomes a ``filler``, a match of a one-token prompt, and any other call
goes (``hollowed``).  A filler is inert under every rule set: its usable
prefix is empty (R3: u = 0 for one token, whatever B), so it matches the root,
splits nothing, uses nothing (R7: the root is no use; under ``use=release`` a
lookup touches nothing anyway) and publishes no event (R13); it ticks the
clock (R7) and counts one lookup of one query token (R9).  Identical fillers
fold into one repeat block when the counterexample is written
(``repeats.fold``), so a clock-overflow counterexample reads as a handful of
lines.

Each replay of a long history costs seconds, and one of a history hollowed
but for a few calls a second, so ``cut_history`` tries those first: the last
few real calls alone (the calls around a clock's wrap), then the inserts alone
and those that add the most blocks (a count of blocks), the calls that changed nothing in
the spec's run (``inert``) hollowed with them, then those inserts joined into
one, two, four, ... inserts of fresh prompts caching the same blocks
(``joins.joined``: a count of blocks needs the count, not the prompts; a join
is kept only when the replay still fails at the last call); then whole kinds of calls
(every lock and unlock, every eviction, ...), then chunks in the order of
delta debugging's complements (halves, quarters, ...), then the fillers
themselves where the count was not what mattered, and where it was, the
earliest of them, as many as still fail: a count of uses is cut to within a
call of the fewest the bug needs (one in 4,096 of a longer history; a clock in
13 bits: 8,193 calls).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Collection, Sequence
from typing import cast

from spec.api import Rules
from prefixspec.compare.delta import delta_debug
from prefixspec.compare.joins import LONGEST_JOIN, added_blocks, joined
from prefixspec.formats.repeats import Step
from prefixspec.vocabulary import CALLS, TAKE_EVENTS, Call, read_ints, result_error

FILLER_TOKENS = (0,)
"""The prompt of a filler: one token, so that R3 searches none of it."""

QUERIES = frozenset(kind.op for kind in CALLS if not kind.params and not kind.optional)
"""The counters' reads (R9), read off the table: the calls without arguments but the optional take of events."""

KINDS: tuple[frozenset[str], ...] = (
    frozenset({"lock", "unlock"}),
    frozenset({"evict"}),
    frozenset({TAKE_EVENTS.op}),
    QUERIES,
    frozenset({"match"}),
    frozenset({"insert"}),
)
"""The kinds of calls ``cut_history`` tries to hollow all at once, a replay each: an engine's history is mostly
bookkeeping around the few calls a bug needs (its requests' locks, its evictions, the router's takes).  Locks
first: once they are gone no call names a node, so no later cut leaves a handle unresolved."""

Replay = Callable[[list[Call]], tuple[list[Call], Sequence[Step]] | None]
"""A test of a candidate: None when it no longer fails; else the failing calls to go on from (the candidate, cut
just after its disagreement) and the steps its run made, with the spec's results (``Disagreement.trace``)."""


def filler(calls: Sequence[Call]) -> Call:
    """The filler for ``calls``: a match of ``FILLER_TOKENS`` named by a handle no call of ``calls`` names or refers to
    (no later lock may find a filler's root where a removed call's node was)."""
    taken = {call.name for call in calls} | {handle for call in calls for handle in call.handles}
    name = "filler"
    number = 0
    while name in taken:
        number += 1
        name = f"filler_{number}"
    return Call("match", (FILLER_TOKENS,), name)


def ticks_clock(call: Call, rules: Rules) -> bool:
    """Whether ``call`` (not refused) ticks R7's clock: a match or an insert, and under ``use=release`` an unlock of
    a node (it releases blocks at a moment of its own)."""
    return call.kind.uses or (rules.use == "release" and call.op == "unlock" and call.handles != ("root",))


def hollowed(calls: Sequence[Call], gone: Collection[int], fill: Call, rules: Rules, *, refused: Collection[int] = ()) -> list[Call]:
    """``calls`` with those at the indices ``gone`` replaced, and with them every later call that refers to a node
    one of them named (its locks and unlocks): each that ticks the clock by ``fill``, any other left out, as is
    each of ``refused`` (a call the spec refused ticks nothing: R10).

    So the clock ticks as often, at the same places, as it did in ``calls``.
    """
    gone, refused = set(gone), set(refused)  # each looked up once a call: lists would make the cut quadratic
    orphaned: set[str] = set()
    kept: list[Call] = []
    for index, call in enumerate(calls):
        if index in refused:
            if call.name:
                orphaned.add(call.name)
        elif index in gone or (call.handles and not orphaned.isdisjoint(call.handles)):
            if call.name:
                orphaned.add(call.name)
            if ticks_clock(call, rules):
                kept.append(fill)
        else:
            if call.name:
                orphaned.discard(call.name)
            kept.append(call)
    return kept


def spec_results(calls: Sequence[Call], steps: Sequence[Step]) -> list[str | None]:
    """The spec's result of each of ``calls`` in a run that made ``steps``: when the calls take no events themselves,
    the lockstep's own takes among the steps are passed over (``shrink.replayed_calls``)."""
    own_takes = any(call.op == TAKE_EVENTS.op for call in calls)
    results = [step.expected for step in steps if own_takes or step.call.op != TAKE_EVENTS.op]
    return results[: len(calls)] + [None] * (len(calls) - len(results))


def inert(calls: Sequence[Call], results: Sequence[str | None]) -> tuple[set[int], set[int]]:
    """The calls that, by the spec's ``results``, changed nothing but the counters: a match of nothing (its usable
    prefix uncached: it used no node, R7), a lock or unlock of the root (R6), an eviction that freed nothing (R8),
    a take of no events (queries are what a counter's bug shows in); and the calls the spec refused (R10).  Both sets as indices."""
    quiet: set[int] = set()
    refused: set[int] = set()
    for index, (call, result) in enumerate(zip(calls, results)):
        if result is None:
            continue
        if result_error(result) is not None:
            refused.add(index)
        elif (
            (call.op == "match" and result == "0 [] root")
            or (call.op in ("lock", "unlock") and call.handles == ("root",))
            or (call.op == "evict" and result == "[]")
            or (call.op == TAKE_EVENTS.op and result == "none")
        ):
            quiet.add(index)
    return quiet, refused


def fresh_blocks(calls: Sequence[Call], results: Sequence[str | None]) -> list[Call]:
    """``calls`` with every block id that an eviction freed (by the spec's ``results``) given a new number for its
    next life, above every id the calls name: the same run, its blocks told apart, so that hollowing the evictions
    leaves no later insert refused for an id still cached (R5).  The first life of each id keeps its number."""
    top = max((block for call in calls if call.op == "insert" for block in cast(tuple[int, ...], call.arg("blocks"))), default=0)
    fresh = itertools.count(top + 1)
    renamed: dict[int, int] = {}
    freed: set[int] = set()
    kept: list[Call] = []
    for call, result in zip(calls, results):
        if call.op == "insert":
            blocks = cast(tuple[int, ...], call.arg("blocks"))
            for block in blocks:
                if block in freed:
                    freed.discard(block)
                    renamed[block] = next(fresh)
            call = dataclasses.replace(call, args=(call.args[0], tuple(renamed.get(block, block) for block in blocks)))
        elif call.op == "evict" and result is not None:
            freed.update(read_ints(result) or ())  # a refusal frees nothing
        kept.append(call)
    return kept + list(calls[len(kept) :])


def new_blocks(calls: Sequence[Call], block_size: int) -> list[int]:
    """For each of ``calls``, the whole blocks of its prompt that no earlier insert of ``calls`` covered (0 for
    any call but an insert): what it adds to the count of cached blocks when nothing is evicted (R2, R5)."""
    return [len(added) for added in added_blocks(calls, block_size)]


SUFFIX_GROWTH = 8
"""The first candidates keep the last 8 real calls, everything before them hollowed, then the last 64 and 512
(``LONGEST_SUFFIX``): a bug of the clock's count needs the calls around its wrap alone, so one replay of a mostly
hollow history may cut it at once.  A bug of a count of blocks then keeps the 8, 64, ... inserts that add most (``new_blocks``)."""
LONGEST_SUFFIX = 512
"""Past this many real calls a candidate's replay costs as much as the history's (a cache of thousands of blocks)."""


SLACK_SHARE = 4096
"""The fewest fillers are searched for to within one call in 4,096 of the history (``filler_slack``)."""


def filler_slack(calls: int) -> int:
    """How many fillers more than the fewest a cut of a history of ``calls`` calls may keep: one under 8,192 calls,
    else one in ``SLACK_SHARE``.  A history of 2^16 uses replays in a second, and finding its last few dozen
    fillers one by one took a dozen replays more (r07's hunt, minimising 36 fillers too many of 65,574 calls:
    18.9 s with no search, 23.8 s with this slack, side by side; 34.3 s with none, in another run)."""
    return max(1, calls // SLACK_SHARE)


def cut_history(
    calls: list[Call], steps: Sequence[Step], replay: Replay, deadline: float, rules: Rules, *, short: int, block_size: int
) -> list[Call]:
    """Failing calls, as few real ones as found by ``deadline`` (time.monotonic, checked before each replay), the
    rest fillers; ``calls`` must fail, in a run that made ``steps``.  The last call, after which the disagreement
    showed, is never hollowed, nor the last take of events (without any the lockstep would take after each insert).

    In turn: the last real calls alone kept (``SUFFIX_GROWTH``, then halved towards the fewest that fail), the
    ``inert`` ones hollowed with them; failing that, the inserts alone (``fresh_blocks``: a bug of a count of
    blocks), then those that add the most blocks (``new_blocks``) alone, then those ``joined`` into as few as
    still fail at the last call (halving: one a namespace, two, four, ..., none of more than ``LONGEST_JOIN``
    blocks); then every kind of ``KINDS`` hollowed at once; then the calls left
    hollowed by delta debugging's complements (``delta_debug`` without its windows and pairs, which cost a replay
    each and find little that the complements left); then the fillers left out, all of them (a bug of counts,
    not of the clock), else those after the last real call and then the earliest, as many as still fail.
    """
    fill = filler(calls)
    best, best_steps = calls, steps

    def accepted(candidate: list[Call], *, at_last: bool = False) -> bool:
        """Whether ``candidate`` still fails (``at_last``: at its last call, as ``best`` did), then the new ``best``."""
        nonlocal best, best_steps
        if time.monotonic() >= deadline or candidate == best:
            return False
        failing = replay(candidate)
        if failing is None or (at_last and len(failing[0]) < len(candidate)):
            return False
        best, best_steps = failing
        return True

    known: tuple[list[Call], set[int], set[int], list[int]] | None = None

    def read() -> tuple[set[int], set[int], list[int]]:
        """Of ``best``: the ``inert`` calls, the refused ones, and the real ones (neither fillers nor either of
        those, the last call and the last take apart), read once for each ``best``."""
        nonlocal known
        if known is None or known[0] is not best:
            quiet, refused = inert(best, spec_results(best, best_steps))
            takes = [index for index, call in enumerate(best[:-1]) if call.op == TAKE_EVENTS.op]
            quiet.difference_update(takes[-1:])
            spared = quiet | refused | set(takes[-1:])
            real = [index for index, call in enumerate(best[:-1]) if call != fill and index not in spared]
            known = (best, quiet, refused, real)
        return known[1], known[2], known[3]

    def real_calls() -> list[int]:
        return read()[2]

    def real_inserts() -> list[int]:
        return [index for index in real_calls() if best[index].op == "insert"]

    def keeping(kept: Collection[int], base: list[Call] | None = None) -> list[Call]:
        """``best`` (or ``base``, the same run renamed) with every call hollowed but those at ``kept``, the last
        call and the last take; the inert ones hollowed too."""
        quiet, refused, real = read()
        keep = set(kept)
        return hollowed(best if base is None else base, {index for index in real if index not in keep} | quiet, fill, rules, refused=refused)

    def fewest_alone(ranked: Callable[[], list[int]], longest: int) -> bool:
        """Whether the last 8, 64, ... (up to ``longest``) of ``ranked()`` (real calls, the least wanted first)
        fail alone; then as few of them as halving finds."""
        failed_with, count = 0, SUFFIX_GROWTH
        while not accepted(keeping(ranked()[-count:])):
            if count >= min(len(ranked()), longest) or time.monotonic() >= deadline:
                return False
            failed_with, count = count, count * SUFFIX_GROWTH
        while len(ranked()) > failed_with + 1 and time.monotonic() < deadline:  # fewer, down to a count that did not fail
            fewer = (len(ranked()) + failed_with) // 2
            if not accepted(keeping(ranked()[-fewer:])):
                failed_with = fewer
        return True

    ranking: tuple[list[Call], list[int]] | None = None

    def inserts_by_new_blocks() -> list[int]:
        """The real inserts, the fewest new blocks first (stable: the earlier of two as many first), read once for each ``best``."""
        nonlocal ranking
        if ranking is None or ranking[0] is not best:
            stored = new_blocks(best, block_size)
            ranking = (best, sorted(real_inserts(), key=lambda index: stored[index]))
        return ranking[1]

    def fewest_joins() -> bool:
        """Whether the real inserts, ``joined`` namespace by namespace into one, two, four, ... inserts of fresh
        prompts, still fail at the last call (a join that fails earlier fails otherwise: it is refused); the
        fewest that do."""
        parts = 1
        while time.monotonic() < deadline:
            inserts = real_inserts()
            found = joined(best, inserts, parts, block_size)
            if found is None:
                return False
            base, joins = found
            longest = max((len(cast(tuple[int, ...], base[index].arg("blocks"))) for index in joins), default=0)
            others = set(real_calls()) - set(inserts)
            if longest <= LONGEST_JOIN and accepted(keeping([*joins, *others], base), at_last=True):
                return True
            parts *= 2
        return False

    if not fewest_alone(real_calls, LONGEST_SUFFIX):
        inserts = real_inserts()
        alone = keeping(inserts, fresh_blocks(best, spec_results(best, best_steps)))  # the same run: the spec's results hold
        if alone == best or accepted(alone):
            fewest_alone(inserts_by_new_blocks, len(best))
            fewest_joins()
    for kinds in KINDS:
        accepted(keeping([index for index in real_calls() if best[index].op not in kinds]))
    if fill in best and accepted([call for call in best if call != fill]) and len(best) <= short:
        return best  # the count of uses was not what mattered, and the calls left are few: delta debugging's turn

    def hollow_all_but(kept: list[int]) -> list[int] | None:
        """A candidate of ``delta_debug``: of the real calls (indices in ``best``), those at ``kept``, and fillers."""
        return real_calls() if accepted(keeping(kept)) else None

    def fewest_fillers() -> None:
        """The earliest fillers left out, as many as still fail, to within ``filler_slack``: that many, twice as
        many, ... until a cut no longer fails, then halving between the last two counts.  A bug of a count needs
        the count, not where the uses fall."""
        base = best
        fillers = [index for index, call in enumerate(base) if call == fill]
        slack = filler_slack(len(base))

        def without_first(count: int) -> list[Call]:
            left_out = set(fillers[:count])
            return [call for index, call in enumerate(base) if index not in left_out]

        failing_with, count = 0, slack
        while count < len(fillers) and accepted(without_first(count)):
            failing_with, count = count, count * 2
        passing_with = min(count, len(fillers))  # all of them left out: tried before, it no longer failed
        while passing_with - failing_with > slack and time.monotonic() < deadline:
            middle = (failing_with + passing_with) // 2
            if accepted(without_first(middle)):
                failing_with = middle
            else:
                passing_with = middle

    if len(real_calls()) >= 2:
        delta_debug(real_calls(), hollow_all_but, deadline, thorough=False)
    if fill in best and not accepted([call for call in best if call != fill]):
        real = [index for index, call in enumerate(best) if call != fill]
        if real:  # none when the fillers alone fail, a count of lookups (R9) wrapping at one of them
            accepted(best[: real[-1] + 1])  # the fillers after the last real call
        fewest_fillers()
    return best
