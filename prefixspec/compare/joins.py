"""Joining inserts: the blocks many inserts cached, cached by fewer, longer inserts of fresh prompts.

A bug of a count of cached blocks (a count kept in 12 bits wraps at 4,096)
needs that many blocks cached at once, not the prompts that brought them: a
history's cut (``history.cut_history``) that keeps the inserts alone still
keeps dozens of them when each adds a hundred blocks.  So a cut may replace
the inserts of one namespace by fewer: each ``joined`` insert caches, under a
fresh prompt (a token no call's prompt begins with, repeated), exactly the
block ids its part of the inserts added, in their order (``added_blocks``:
those at whole-block positions no earlier insert covered).  The ids stay those
the run cached, one owner each (R5), and nothing of another namespace changes
(R12); the join stands at its part's last insert, so that the clock ticks as
often (R7) once the part's other inserts are hollowed into fillers.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Sequence
from typing import cast

from spec.api import Namespace
from prefixspec.vocabulary import Call


LONGEST_JOIN = 4096
"""The most blocks a join caches: a prompt's cost grows with the square of its length in the spec (each prefix is a
key of its own) and in the lockstep's mirror of the events, some 4 s for one insert of 4,096 blocks of 4 tokens,
and a replay reads its deadline between calls only.  Past this a cut joins into more parts."""


def added_blocks(calls: Sequence[Call], block_size: int) -> list[tuple[int, ...]]:
    """For each of ``calls``, the block ids its prompt passes at whole-block positions (namespace and prefix) that
    no earlier insert of ``calls`` covered, in position order; () for any call but an insert.  When nothing is
    evicted or refused, the blocks each insert adds to the count of cached blocks (R2, R5), but for the copies
    R5's ``dup=keep`` caches at a position cached already: a join caches one id a position, so a count that needs
    the copies fails no more once joined, and the cut refuses that join."""
    children: dict[tuple[Namespace, int, tuple[int, ...]], int] = {}
    added: list[tuple[int, ...]] = []
    for call in calls:
        ids: list[int] = []
        if call.op == "insert":
            tokens = cast(tuple[int, ...], call.arg("tokens"))
            blocks = cast(tuple[int, ...], call.arg("blocks"))
            node = -1  # the namespace's root; each prefix known exactly, by its parent and its last block's tokens
            for position, start in enumerate(range(0, len(tokens) - block_size + 1, block_size)):
                key = (call.namespace, node, tokens[start : start + block_size])
                if key not in children:
                    children[key] = len(children)
                    if position < len(blocks):
                        ids.append(blocks[position])
                node = children[key]
        added.append(tuple(ids))
    return added


def parts_of(indices: Sequence[int], parts: int) -> list[list[int]]:
    """``indices`` in ``parts`` runs of neighbours (fewer when there are fewer indices), the longer runs first."""
    count = min(parts, len(indices))
    size, longer = divmod(len(indices), count) if count else (0, 0)
    runs: list[list[int]] = []
    start = 0
    for part in range(count):
        end = start + size + (part < longer)
        runs.append(list(indices[start:end]))
        start = end
    return runs


def fresh_tokens(calls: Sequence[Call]) -> Iterator[int]:
    """Tokens no prompt of ``calls`` begins with, the smallest first (from 1: small, and far below R1's limit)."""
    firsts = {cast(tuple[int, ...], call.arg("tokens"))[:1] for call in calls if call.op in ("insert", "match")}
    return (token for token in itertools.count(1) if (token,) not in firsts)


def joined(calls: Sequence[Call], inserts: Sequence[int], parts: int, block_size: int) -> tuple[list[Call], list[int]] | None:
    """``calls`` with the inserts at ``inserts`` joined, namespace by namespace, into at most ``parts`` inserts
    each, and the indices of those joins; None when no join would take the place of two inserts or more.

    A join stands at the index of its part's last insert and is named as it was; the part's other inserts are
    left as they were, for the caller to hollow.  A part whose inserts added no block has no join (its last
    insert is left, to be hollowed too).  Every insert of a namespace is replaced, each by its part's join, so
    that no insert kept passes an id that a join now caches at another position.
    """
    added = added_blocks(calls, block_size)
    spaces: dict[Namespace, list[int]] = {}
    for index in inserts:
        spaces.setdefault(calls[index].namespace, []).append(index)
    runs = [run for indices in spaces.values() for run in parts_of(indices, parts)]
    if all(len(run) < 2 for run in runs):
        return None
    kept = list(calls)
    joins: list[int] = []
    for run, token in zip(runs, fresh_tokens(calls)):
        blocks = tuple(dict.fromkeys(block for index in run for block in added[index]))  # one id once, in order
        if not blocks:
            continue
        last = run[-1]
        kept[last] = dataclasses.replace(calls[last], args=((token,) * (len(blocks) * block_size), blocks))
        joins.append(last)
    return kept, sorted(joins)
