"""Results as text: a call's result written by its kind, read back, and errors written by name.

    match     MATCHED_TOKENS [BLOCK ...] NODE     4 [10 11] n1
    inserted  NODE [DUPLICATE ...]                new []
    ok        ok
    blocks    [BLOCK ...]                         [10 11]
    count     N                                   4
    stats     lookups=L query_tokens=Q hit_tokens=H inserted_blocks=I evicted_blocks=E
    rate      a float                             0.4615384615384615
    events    none, or EVENT ; EVENT ...          stored - [1 2] [10] ; removed [10]

or an error by name (``UnknownNode``, optionally followed by a message).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from spec.api import ERROR_TYPES, Inserted, NodeId, PrefixCacheError, PrefixMatch, PrefixStats
from prefixspec.vocabulary.checks import ResultFormatError, WrongResult, checked_int, checked_ints, kind_name, numbers
from prefixspec.vocabulary.events import checked_events, parse_events, render_events
from prefixspec.vocabulary.table import STATS_FIELDS, CallKind, ResultKind
from prefixspec.vocabulary.words import ints_pattern, render_ints


def render_stats(stats: PrefixStats) -> str:
    return " ".join(f"{name}={getattr(stats, name)}" for name in STATS_FIELDS)


def render_result(kind: CallKind, value: object, node_text: Callable[[NodeId], str]) -> str:
    """The result ``value`` of a call of ``kind`` as text; WrongResult when it is not of the interface's type.

    ``node_text`` writes a node (a trace writes a handle, the line protocol an integer).
    """
    method = kind.method
    if kind.result == "match":
        if not isinstance(value, PrefixMatch):
            raise WrongResult(f"match_prefix returned {kind_name(value)}, not a PrefixMatch")
        matched = checked_int(value.matched_tokens, method, "matched_tokens")
        blocks = checked_ints(value.blocks, method, "blocks")
        return f"{matched} {render_ints(blocks)} {node_text(value.node)}"
    if kind.result == "inserted":
        if not isinstance(value, Inserted):
            raise WrongResult(f"insert returned {kind_name(value)}, not an Inserted")
        duplicates = checked_ints(value.duplicates, method, "duplicates")
        return f"{node_text(value.node)} {render_ints(duplicates)}"
    if kind.result == "ok":
        if value is not None:
            raise WrongResult(f"{method} returned {kind_name(value)}, not None")
        return "ok"
    if kind.result == "blocks":
        return render_ints(checked_ints(value, method, "the freed blocks"))
    if kind.result == "count":
        return str(checked_int(value, method))
    if kind.result == "stats":
        if not isinstance(value, PrefixStats):
            raise WrongResult(f"stats returned {kind_name(value)}, not a PrefixStats")
        for name in STATS_FIELDS:
            checked_int(getattr(value, name), method, name)
        return render_stats(value)
    if kind.result == "events":
        return render_events(checked_events(value))
    if not isinstance(value, float | int) or isinstance(value, bool):
        raise WrongResult(f"hit_rate returned {kind_name(value)}, not a float")
    return repr(float(value))


_INTS = ints_pattern()
_NODE_WORD = r"([A-Za-z_0-9]+)"
_STATS = " +".join(f"{name}=([0-9]+)" for name in STATS_FIELDS)
RESULT_GRAMMAR: dict[ResultKind, tuple[re.Pattern[str], str]] = {
    "match": (re.compile(rf"([0-9]+) +{_INTS} +{_NODE_WORD}"), "MATCHED_TOKENS [BLOCK ...] NODE"),
    "inserted": (re.compile(rf"{_NODE_WORD} +{_INTS}"), "NODE [DUPLICATE ...]"),
    "ok": (re.compile(r"ok"), "ok"),
    "blocks": (re.compile(_INTS), "[BLOCK ...]"),
    "count": (re.compile(r"([0-9]+)"), "a whole number"),
    "stats": (re.compile(_STATS), " ".join(f"{name}=N" for name in STATS_FIELDS)),
    "rate": (re.compile(r"(\S+)"), "a number"),
    "events": (re.compile(r"(none|(?:stored|removed|cleared).*)"), "none, or EVENT ; EVENT ... (stored, removed, cleared)"),
}
"""What a result of each kind looks like as text, its parts in groups; a node is one word."""

ERROR_NAMES = ", ".join(ERROR_TYPES)


def result_error(text: str) -> PrefixCacheError | None:
    """The interface error a result names (``UnknownNode`` or ``UnknownNode message``), else None."""
    name, _, message = text.partition(" ")
    error = ERROR_TYPES.get(name)
    return None if error is None else error(message or f"the cache answered {name}")


def parse_result(kind: CallKind, text: str, node_of: Callable[[str], NodeId]) -> object:
    """The value a result text stands for (nodes through ``node_of``); an error it names is raised.

    Raises ResultFormatError for text of another shape.
    """
    found = RESULT_GRAMMAR[kind.result][0].fullmatch(text)
    if found is None:
        error = result_error(text)
        if error is not None:
            raise error
        raise ResultFormatError(f"`{RESULT_GRAMMAR[kind.result][1]}` or an error name ({ERROR_NAMES})")
    if kind.result == "match":
        return PrefixMatch(numbers(found[1])[0], numbers(found[2]), node_of(found[3]))
    if kind.result == "inserted":
        return Inserted(node_of(found[1]), numbers(found[2]))
    if kind.result == "ok":
        return None
    if kind.result == "blocks":
        return numbers(found[1])
    if kind.result == "count":
        return numbers(found[1])[0]
    if kind.result == "stats":
        return PrefixStats(*numbers(" ".join(found.groups())))
    if kind.result == "events":
        return parse_events(found[1])
    try:
        return float(found[1])
    except ValueError:
        raise ResultFormatError("a number") from None


def result_node(kind: CallKind, text: str) -> tuple[str, str, str] | None:
    """A node-naming result as (text before the node, the node's word, text after it); None for an error."""
    if not kind.names_node:
        return None
    found = RESULT_GRAMMAR[kind.result][0].fullmatch(text)
    if found is None:
        return None
    group = 3 if kind.result == "match" else 1
    return text[: found.start(group)], found[group], text[found.end(group) :]


def error_name(error: BaseException) -> str:
    """An error as a result writes it: the interface error it is, else ``crash Type: message``."""
    for name, kind in ERROR_TYPES.items():
        if isinstance(error, kind):
            return name
    message = str(error).replace("\n", " ")
    return f"crash {type(error).__name__}: {message}"
