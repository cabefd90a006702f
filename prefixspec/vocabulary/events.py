"""Events as text (R13): the answer to ``take_events``, written, read, checked and compared block by block.

An event is ``stored PARENT [TOKEN ...] [BLOCK ...]`` (PARENT a block id, or
``-`` for a namespace's first block; ``ns=WORD`` after it outside the default
namespace), ``removed [BLOCK ...]`` or ``cleared``; an answer is ``none`` or
the events joined by `` ; ``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import cast

from spec.api import AllBlocksCleared, BlockId, BlockRemoved, BlockStored, KVEvent, Namespace
from prefixspec.vocabulary.checks import ResultFormatError, WrongResult, checked_int, checked_ints, kind_name, numbers
from prefixspec.vocabulary.words import Unwritable, ints_pattern, namespace_of, read_namespace, render_ints, render_namespace

EVENT_TYPES = (BlockStored, BlockRemoved, AllBlocksCleared)


def checked_events(value: object) -> list[KVEvent]:
    """The events a cache returned from ``take_events``, each checked to be of the interface's types; WrongResult otherwise."""
    if not isinstance(value, list):
        raise WrongResult(f"take_events returned {kind_name(value)}, not a list of events")
    for event in value:
        if not isinstance(event, EVENT_TYPES):
            raise WrongResult(f"take_events returned {kind_name(event)} among its events, not a BlockStored, BlockRemoved or AllBlocksCleared")
        if isinstance(event, BlockStored):
            if event.parent is not None:
                checked_int(event.parent, "take_events", "a BlockStored's parent")
            checked_ints(list(event.tokens), "take_events", "a BlockStored's tokens")
            checked_ints(list(event.blocks), "take_events", "a BlockStored's blocks")
            try:
                namespace_of(event.namespace)
            except Unwritable as problem:
                raise WrongResult(f"take_events returned a BlockStored whose namespace is not one: {problem}") from None
        elif isinstance(event, BlockRemoved):
            checked_ints(list(event.blocks), "take_events", "a BlockRemoved's blocks")
    return cast(list[KVEvent], value)


def render_event(event: KVEvent) -> str:
    if isinstance(event, BlockStored):
        parent = "-" if event.parent is None else str(event.parent)
        text = f"stored {parent} {render_ints(event.tokens)} {render_ints(event.blocks)}"
        return text if event.namespace is None else f"{text} ns={render_namespace(event.namespace)}"
    if isinstance(event, BlockRemoved):
        return f"removed {render_ints(event.blocks)}"
    return "cleared"


def render_events(events: Sequence[KVEvent]) -> str:
    """The answer to ``take_events``: ``none``, or the events joined by `` ; ``."""
    return " ; ".join(render_event(event) for event in events) if events else "none"


_IDS = ints_pattern(signed=False)
_STORED = re.compile(rf"stored +(-|[0-9]+) +{_IDS} +{_IDS}(?: +ns=(\S+))?")
_REMOVED = re.compile(rf"removed +{_IDS}")


def parse_events(text: str) -> list[KVEvent]:
    """The events an answer to ``take_events`` stands for; ResultFormatError when a part is not an event."""
    if text == "none":
        return []
    events: list[KVEvent] = []
    for part in text.split(";"):
        part = part.strip()
        stored, removed = _STORED.fullmatch(part), _REMOVED.fullmatch(part)
        if stored is not None:
            parent = None if stored[1] == "-" else numbers(stored[1])[0]
            try:
                namespace = None if stored[4] is None else read_namespace(stored[4])
            except ValueError as problem:
                raise ResultFormatError(f"an event's namespace: {problem}") from None
            events.append(BlockStored(parent, tuple(numbers(stored[2])), tuple(numbers(stored[3])), namespace))
        elif removed is not None:
            events.append(BlockRemoved(tuple(numbers(removed[1]))))
        elif part == "cleared":
            events.append(AllBlocksCleared())
        else:
            raise ResultFormatError(f"`{EVENTS_SHAPE}`, not {part[:60]!r}")
    return events


BlockFact = tuple[str, Namespace, "BlockId | None", tuple[int, ...], BlockId]
"""One block's event: ("stored", namespace, parent, its tokens, the block) or ("removed", None, None, (), the block)."""


def per_block(events: Sequence[KVEvent]) -> list[BlockFact] | None:
    """R13's equality of event streams: each event cut into one fact per block, a ``cleared`` left out
    (the mirror checks what it empties); None when a BlockStored's tokens are not one block's worth per block."""
    facts: list[BlockFact] = []
    for event in events:
        if isinstance(event, BlockStored):
            count = len(event.blocks)
            if count == 0 or len(event.tokens) % count:
                return None
            size = len(event.tokens) // count
            parent = event.parent
            for index, block in enumerate(event.blocks):
                facts.append(("stored", event.namespace, parent, tuple(event.tokens[index * size : (index + 1) * size]), block))
                parent = block
        elif isinstance(event, BlockRemoved):
            facts.extend(("removed", None, None, (), block) for block in event.blocks)
    return facts


def same_events(expected: str, got: str) -> bool:
    """Two answers to ``take_events`` that stand for the same blocks stored and removed, in the same order."""
    try:
        wanted, actual = per_block(parse_events(expected)), per_block(parse_events(got))
    except ResultFormatError:
        return False
    return wanted is not None and wanted == actual


EVENTS_SHAPE = "none, or events joined by ' ; ': stored PARENT|- [TOKEN ...] [BLOCK ...] [ns=JSON], removed [BLOCK ...], cleared"

