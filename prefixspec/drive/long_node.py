"""One node of 2^16+ blocks: a 64k-token context at block size 1, split by an insert and by a match past 2^16.

An engine that keeps an offset inside a node in 16 bits splits such a node in
the wrong place, and one that keeps its count of cached blocks or tokens in 16
bits reads it wrong (R9, read once the node holds the most); nothing smaller shows either.  The spec cannot hold that node
itself: it keeps every cached prefix as a tuple of its own (R2), 2^16 prefixes
of up to 2^16 tokens, some 17 GB.  So the node is checked against the spec at
block size ``COARSE`` on the same tokens, where every block stands for
``COARSE`` consecutive blocks of the target's: every length and every place
the calls below diverge is a multiple of ``COARSE``, and there R2-R9 cut,
match, keep and order the same prefixes at both block sizes (a match of
``m + 1`` tokens searches ``m`` at block size 1 and ``(m // COARSE) * COARSE
= m`` at ``COARSE``).  The spec's ids and counts of blocks are multiplied out
(``expand``) and compared with the target's, call by call, snapshots included.

A disagreement is raised with the calls that led to it, written out; it is no
trace to replay, since a replay beside the spec at block size 1 would need
the 17 GB.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from spec.api import ID_LIMIT, BlockId, CacheFactory, Inserted, NodeView, PrefixCacheError, PrefixMatch, PrefixStats, Rules, Snapshot
from spec.model import SpecCache
from prefixspec.compare.lockstep import snapshots_agree
from prefixspec.compare.observable import order_report
from prefixspec.drive.coverage import LONG_NODE
from prefixspec.vocabulary import BY_OP, features_of

COARSE = 4096
"""Target blocks per spec block: the spec holds some twenty prefixes where it would hold 2^16 and more (its
cost grows with the square of the tokens over COARSE: at 256 one check took 17 s, at 4096 a few)."""

ID_START = 1000
"""The target's block ids: ``ID_START + j * COARSE + t`` is the t-th of the ids the spec's block ``j`` stands for."""


Result = TypeVar("Result")


LONG_NODE_CALLS = 6
"""The calls ``check_long_node`` makes, besides its reads of the counts (``LONG_NODE_COUNT_READS``)."""
LONG_NODE_COUNT_READS = 3
"""The reads of the counts ``check_long_node`` makes when asked (``read_counts``)."""


class LongNodeDisagreement(AssertionError):
    """The target disagrees with the spec on the node of 2^16+ blocks: ``calls`` led to it, the last one shows it."""

    def __init__(self, message: str, calls: Sequence[str], rule: str) -> None:
        super().__init__(message)
        self.calls = list(calls)
        self.rule = rule


def expand(blocks: Sequence[BlockId]) -> list[BlockId]:
    """The target's ids for the spec's ``blocks`` (each spec block id ``j`` is a group of COARSE target ids)."""
    return [ID_START + block * COARSE + offset for block in blocks for offset in range(COARSE)]


def expected_snapshot(spec: Snapshot) -> Snapshot:
    """The spec's snapshot at block size COARSE as the target's at block size 1 must be."""
    nodes = tuple(NodeView(view.prefix, tuple(expand(view.blocks)), view.locks, view.namespace) for view in spec.nodes)
    stats = spec.stats
    scaled = PrefixStats(stats.lookups, stats.query_tokens, stats.hit_tokens, stats.inserted_blocks * COARSE, stats.evicted_blocks * COARSE)
    # use=release: a coarse block's target ids are released by one call, tail first (R7), so they queue in reverse.
    released = tuple(block for coarse in spec.released for block in reversed(expand([coarse])))
    return Snapshot(1, nodes, scaled, released)


def shorten(value: object) -> str:
    """A result of tens of thousands of ids, readable: its length and both ends."""
    text = str(value)
    return text if len(text) <= 300 else f"{text[:140]} ... {text[-140:]} ({len(text)} characters)"


def describe_node(view: NodeView) -> str:
    return f"{len(view.prefix)}-token prefix with {len(view.blocks)} blocks"


def check_long_node(factory: CacheFactory, rules: Rules, base: int, past: int, *, read_counts: bool = False) -> list[str]:
    """The calls of the long node on a fresh target at block size 1 beside the spec at COARSE; the coverage events reached.

    ``read_counts``: its counts of cached blocks and tokens and of evictable blocks read too, once it holds the
    most.  The scale stage asks it after its own run, whose replayable trace is the better report of a count
    that wraps sooner (kept in 12 bits); the extremes stage, which runs first, does not.

    ``base`` is the first token (tokens count up from it, wrapping at 2^32), ``past`` how many COARSE groups the
    splits lie past 2^16: the node holds ``2^16 + 3 * past * COARSE`` blocks, the insert leaves it at ``2^16 + 2 * past
    * COARSE`` tokens, the match at ``2^16 + past * COARSE``, both inside one node past 2^16 of its blocks.
    """
    target = factory(1)
    order = order_report(features_of(target))
    spec = SpecCache(COARSE, rules)
    length = LONG_NODE + 3 * past * COARSE
    prompt = tuple((base + index) % ID_LIMIT for index in range(length))
    by_insert = LONG_NODE + 2 * past * COARSE
    by_match = LONG_NODE + past * COARSE
    branch = tuple((token + 1) % ID_LIMIT for token in prompt[by_insert : by_insert + COARSE])
    other = prompt[:by_insert] + branch
    groups = length // COARSE
    done: list[str] = []
    seen: list[Snapshot] = []  # the spec's snapshot after the last call compared

    def compare(call: str, expected: object, got: object) -> None:
        done.append(call)
        if expected != got:
            raise LongNodeDisagreement(
                f"the node of {length} blocks (block size 1), call {len(done)} `{call}`: the cache under test disagrees with the spec on its result\n"
                f"  spec:  {shorten(expected)}\n  cache: {shorten(got)}\n  calls: " + "; ".join(done),
                done,
                BY_OP[call.partition(" ")[0]].rule,  # each call's description starts with its op
            )
        seen[:] = [spec.snapshot()]
        wanted, actual = expected_snapshot(seen[0]), target.snapshot()
        if not snapshots_agree(wanted, actual, order):  # only the order the cache reports and a call can observe
            spec_nodes = [describe_node(view) for view in wanted.nodes]
            cache_nodes = [describe_node(view) for view in actual.nodes]
            detail = f"nodes {spec_nodes}" if spec_nodes != cache_nodes else f"{wanted}"[:300]
            raise LongNodeDisagreement(
                f"the node of {length} blocks (block size 1), after call {len(done)} `{call}`: the snapshots differ (R4, where nodes end)\n"
                f"  spec:  {detail}\n  cache: {f'nodes {cache_nodes}' if spec_nodes != cache_nodes else f'{actual}'[:300]}\n  calls: " + "; ".join(done),
                done,
                "R4, where nodes end" if spec_nodes != cache_nodes else "R11, the snapshot",
            )

    def inserted(result: Inserted) -> list[BlockId]:
        return list(result.duplicates)

    def counted(result: object) -> object:
        return result if type(result) is int else f"{type(result).__name__} {result!r}"

    def matched(result: PrefixMatch) -> tuple[int, list[BlockId]]:
        return (result.matched_tokens, list(result.blocks))

    def attempt(call: Callable[[], Result], read: Callable[[Result], object]) -> object:
        try:
            return read(call())
        except PrefixCacheError as error:  # refused where the spec accepts: a disagreement like any other
            return f"{type(error).__name__} {error}"

    reached: list[str] = []

    def node_ending_at(end: int) -> int:
        """The target blocks of the spec's node whose prefix is ``end`` tokens long (0: none)."""
        return max((len(view.blocks) * COARSE for view in seen[0].nodes if len(view.prefix) == end), default=0)

    whole = list(range(groups))
    spec_done = spec.insert(prompt, whole)
    compare(f"insert {length} tokens, {length} new blocks", inserted(spec_done), attempt(lambda: target.insert(list(prompt), expand(whole)), inserted))
    if node_ending_at(length) >= LONG_NODE:
        reached.append(f"one node of {LONG_NODE}+ blocks")
    passed = list(range(by_insert // COARSE)) + [groups]  # the cached ids, then a new one for the branch
    spec_done = spec.insert(other, passed)
    compare(
        f"insert its first {by_insert} tokens and {COARSE} others: a split by insert {by_insert} blocks into the node",
        expand(inserted(spec_done)),
        attempt(lambda: target.insert(list(other), expand(passed)), inserted),
    )
    if node_ending_at(by_insert) >= LONG_NODE:  # the upper part of the split, from the node's start: its offset inside the node
        reached.append(f"split by insert {LONG_NODE}+ blocks into a node")
    if read_counts:  # R9's counts of 2^16+ blocks (a count kept in 16 bits wraps): at block size 1 a token is a block
        counts = (("cached_blocks", spec.cached_blocks() * COARSE), ("cached_tokens", spec.cached_tokens()), ("evictable_blocks", spec.evictable_blocks() * COARSE))
        for query, wanted in counts:
            compare(f"{query} ({wanted})", wanted, attempt(getattr(target, query), counted))
    probe = prompt[:by_match] + ((prompt[by_match] + 1) % ID_LIMIT,)
    spec_found = spec.match_prefix(probe)
    compare(
        f"match its first {by_match} tokens and another: a split by match {by_match} blocks into the node",
        (spec_found.matched_tokens, expand(spec_found.blocks)),
        attempt(lambda: target.match_prefix(list(probe)), matched),
    )
    if node_ending_at(by_match) >= LONG_NODE:
        reached.append(f"split by match {LONG_NODE}+ blocks into a node")
    spec_found = spec.match_prefix(prompt + (0,))
    compare(
        f"match all {length} tokens and one more",
        (spec_found.matched_tokens, expand(spec_found.blocks)),
        attempt(lambda: target.match_prefix(list(prompt) + [0]), matched),
    )
    # R8 unit=block frees exactly n blocks, each leaf cut from its tail: one coarse block is COARSE target blocks,
    # freed last first; unit=leaf frees whole leaves, their blocks in token order, whatever n asks.
    cut = rules.unit == "block"

    def freed(coarse: Sequence[BlockId]) -> list[BlockId]:
        return [block for one in coarse for block in (reversed(expand([one])) if cut else expand([one]))]

    one = COARSE if cut else 1
    compare(f"evict {one}", freed(spec.evict(1)), attempt(lambda: target.evict(one), list))
    compare("evict everything", freed(spec.evict(10**9)), attempt(lambda: target.evict(10**9), list))
    return reached
