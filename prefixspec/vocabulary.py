"""The vocabulary of calls: every call of ``spec.api.PrefixCache``, its arguments, its result, said once.

``CALLS`` is the table.  Everything that speaks calls is derived from it: the
trace's text (``Call.text`` and ``parse_call``), the results as text
(``render_result``) and back (``parse_result``), the line protocol (which
writes the same lines), making a call on a cache (``invoke``), and the
wrappers that stand between a caller and a cache (``CallThrough``: the
lockstep, the recording cache, the pipe cache), which override one method
that takes a ``Call``.  Adding an argument to a call is a change to this
table and to the caches.

A call as text::

    n1 = insert [1 2 3 4 5] [10 11]      # a call that returns a node names it (n1)
    lock n1                              # a node argument is a handle named earlier, or root
    evict 2
    stats
    n2 = match [1 2 3] ns="tenant-a"     # R12: a namespace other than the default, last, as ns=JSON
    take_events                          # R13: optional; a cache that publishes events answers it

A namespace is written ``ns=`` and one word of JSON: an integer, a string, or an
array of null, integers and strings (``ns=0``, ``ns="0"``, ``ns=["a","bc"]``);
the default namespace (None) is written by leaving ``ns=`` out.  The word holds
no space, ``#``, ``;``, ``>`` or ``|``: inside strings they are ``\\u`` escapes.

and its result after `` -> ``, by the call's result kind::

    match     MATCHED_TOKENS [BLOCK ...] NODE     4 [10 11] n1
    inserted  NODE [DUPLICATE ...]                new []
    ok        ok
    blocks    [BLOCK ...]                         [10 11]
    count     N                                   4
    stats     lookups=L query_tokens=Q hit_tokens=H inserted_blocks=I evicted_blocks=E
    rate      a float                             0.4615384615384615
    events    none, or EVENT ; EVENT ...          stored - [1 2] [10] ; removed [10]

where an event is ``stored PARENT [TOKEN ...] [BLOCK ...]`` (PARENT a block id,
or ``-`` for a namespace's first block; ``ns=WORD`` after it outside the
default namespace), ``removed [BLOCK ...]`` or ``cleared``.

or an error by name (``UnknownNode``, optionally followed by a message).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, SupportsIndex, cast

from spec.api import (
    ERROR_TYPES,
    AllBlocksCleared,
    BlockId,
    BlockRemoved,
    BlockStored,
    Inserted,
    KVEvent,
    Namespace,
    NodeId,
    PrefixCache,
    PrefixCacheError,
    PrefixMatch,
    PrefixStats,
)

ParamKind = Literal["tokens", "blocks", "node", "count"]
ResultKind = Literal["match", "inserted", "ok", "blocks", "count", "stats", "rate", "events"]


@dataclass(frozen=True)
class Param:
    """One argument of a call: its name in ``PrefixCache`` and what kind of value it takes."""

    name: str
    kind: ParamKind


@dataclass(frozen=True)
class CallKind:
    """One call of the interface: its word in the trace, its method, its arguments and its result."""

    op: str
    method: str
    params: tuple[Param, ...]
    result: ResultKind
    namespaced: bool = False
    """Takes a namespace after its arguments (R12): ``ns=`` in the text, the keyword ``namespace`` in Python."""
    optional: bool = False
    """A cache may lack the call; the checker asks whether it has it (R13's ``take_events``)."""

    @property
    def names_node(self) -> bool:
        """A call whose result is a node is written ``nK = op ...``: later calls refer to the node as nK."""
        return self.result in ("match", "inserted")


CALLS: tuple[CallKind, ...] = (
    CallKind("match", "match_prefix", (Param("tokens", "tokens"),), "match", namespaced=True),
    CallKind("insert", "insert", (Param("tokens", "tokens"), Param("blocks", "blocks")), "inserted", namespaced=True),
    CallKind("lock", "lock", (Param("node", "node"),), "ok"),
    CallKind("unlock", "unlock", (Param("node", "node"),), "ok"),
    CallKind("evict", "evict", (Param("n_blocks", "count"),), "blocks"),
    CallKind("stats", "stats", (), "stats"),
    CallKind("cached_tokens", "cached_tokens", (), "count"),
    CallKind("cached_blocks", "cached_blocks", (), "count"),
    CallKind("evictable_blocks", "evictable_blocks", (), "count"),
    CallKind("hit_rate", "hit_rate", (), "rate"),
    CallKind("take_events", "take_events", (), "events", optional=True),
)
"""Every call of ``PrefixCache`` but ``block_size`` and ``snapshot``, which change nothing and take nothing,
and ``PublishesEvents.take_events``."""

BY_OP: dict[str, CallKind] = {kind.op: kind for kind in CALLS}
BY_METHOD: dict[str, CallKind] = {kind.method: kind for kind in CALLS}
OPS: tuple[str, ...] = tuple(BY_OP)
QUERIES: tuple[str, ...] = tuple(kind.op for kind in CALLS if not kind.params and not kind.optional)
"""The calls that take no argument and every cache has: the counters."""

INTERFACE: tuple[str, ...] = ("root", "block_size", *(kind.method for kind in CALLS if not kind.optional), "snapshot")
"""Every attribute a cache must have."""

TAKE_EVENTS = BY_OP["take_events"]

STATS_FIELDS: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(PrefixStats))

Arg = tuple[int, ...] | int | str
"""An argument as a call holds it: a list of ints (tokens, blocks), an int (a count) or a handle (a node)."""


class TraceFormatError(ValueError):
    """Text that does not follow the format of calls and traces; names the line."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


class Unwritable(TypeError):
    """A call whose arguments the text of calls cannot write (a token that is not an int, a node nobody named)."""


class WrongResult(TypeError):
    """A cache answered a call with a value of the wrong type: a disagreement, named as such."""


@dataclass(frozen=True)
class Call:
    """One call as the text of calls writes it: the call, its arguments, and the handle it names (if any)."""

    op: str
    args: tuple[Arg, ...] = ()
    name: str = ""
    namespace: Namespace = None
    """R12: the namespace of a match or an insert."""

    @property
    def kind(self) -> CallKind:
        return BY_OP[self.op]

    def arg(self, param: str) -> Arg:
        """The argument named ``param``."""
        for declared, value in zip(self.kind.params, self.args):
            if declared.name == param:
                return value
        raise KeyError(f"{self.op} takes no argument {param!r}")

    @property
    def handles(self) -> tuple[str, ...]:
        """The handles of the nodes this call refers to."""
        return tuple(cast(str, value) for declared, value in zip(self.kind.params, self.args) if declared.kind == "node")

    def with_handles(self, rename: Callable[[str], str]) -> Call:
        """The same call with every node handle passed through ``rename``."""
        args = tuple(
            rename(cast(str, value)) if declared.kind == "node" else value for declared, value in zip(self.kind.params, self.args)
        )
        return Call(self.op, args, self.name, self.namespace)

    def text(self) -> str:
        """The call as a line, without its result."""
        words = [self.op, *(render_arg(declared.kind, value) for declared, value in zip(self.kind.params, self.args))]
        if self.namespace is not None:
            words.append(f"ns={render_namespace(self.namespace)}")
        line = " ".join(words)
        return f"{self.name} = {line}" if self.name else line


def make_call(op: str, *args: Arg, name: str = "", namespace: Namespace = None) -> Call:
    """A call, its arguments checked against the table (a wrong one is a programming error: TypeError)."""
    kind = BY_OP[op]
    if len(args) != len(kind.params) or kind.names_node != bool(name) or (namespace is not None and not kind.namespaced):
        raise TypeError(f"{op} takes {len(kind.params)} arguments{' and a name' if kind.names_node else ''}, got {args!r} {name!r}")
    return Call(op, tuple(args), name, namespace)


# Namespaces as text (R12) ---------------------------------------------------------------------

_ESCAPED = {ord(" "): "\\u0020", ord("#"): "\\u0023", ord(";"): "\\u003b", ord(">"): "\\u003e", ord("|"): "\\u007c"}
LONGEST_NAMESPACE = 1000
"""Characters the written namespace may have."""


def render_namespace(namespace: Namespace) -> str:
    """The namespace as one word of compact JSON; only strings hold the escaped characters, as ``\\u`` escapes."""
    value = list(namespace) if isinstance(namespace, tuple) else namespace
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).translate(_ESCAPED)


def _is_namespace_word(value: object) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def read_namespace(text: str) -> Namespace:
    """The namespace one word of JSON stands for; ValueError naming what it is instead."""
    if len(text) > LONGEST_NAMESPACE:
        raise ValueError(f"a namespace of at most {LONGEST_NAMESPACE} characters")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError("a namespace in JSON: an integer, a string or an array of null, integers and strings") from None
    if isinstance(value, list) and all(part is None or _is_namespace_word(part) for part in value):
        return tuple(value)
    if _is_namespace_word(value):
        return cast(Namespace, value)
    raise ValueError("a namespace in JSON: an integer, a string or an array of null, integers and strings, not " + type(value).__name__)


def namespace_of(value: object) -> Namespace:
    """A namespace a Python caller passes, as the text can write it; Unwritable otherwise."""
    if value is None or _is_namespace_word(value):
        return cast(Namespace, value)
    if isinstance(value, tuple) and all(part is None or _is_namespace_word(part) for part in value):
        return value
    raise Unwritable(f"a namespace is None, an int, a str or a tuple of those, got {type(value).__name__}")


def render_ints(values: Sequence[int]) -> str:
    return "[" + " ".join(str(value) for value in values) + "]"


def render_arg(kind: ParamKind, value: Arg) -> str:
    if kind in ("tokens", "blocks"):
        return render_ints(cast(tuple[int, ...], value))
    return str(value)


# Reading calls ------------------------------------------------------------------------------

HANDLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_WORD = re.compile(r"\[[^\]]*\]|[^\s\[\]]+|\[")
_DIGITS = re.compile(r"[0-9]+\Z")
_SIGNED = re.compile(r"-?[0-9]+\Z")

LONGEST_NUMBER = 4000
"""Digits a number may have; Python refuses to read longer ones, and no cache has such an id."""


def read_int(text: str, *, signed: bool = False) -> int | None:
    """``text`` as a whole number of ASCII digits (``-`` first when ``signed``), else None."""
    if not (_SIGNED if signed else _DIGITS).match(text) or len(text) > LONGEST_NUMBER:
        return None
    return int(text)


def read_ints(text: str) -> tuple[int, ...] | None:
    """``[1 2 3]`` as a tuple of ints (each maybe negative, so R1's refusals can be written), else None."""
    if not (text.startswith("[") and text.endswith("]")):
        return None
    values: list[int] = []
    for word in text[1:-1].split():
        value = read_int(word, signed=True)
        if value is None:
            return None
        values.append(value)
    return tuple(values)


def _usage(kind: CallKind) -> str:
    shown = {"tokens": "[t ...]", "blocks": "[b ...]", "node": "nK", "count": "N"}
    words = " ".join(shown[param.kind] for param in kind.params)
    call = f"{kind.op} {words}".strip()
    return f"nK = {call}" if kind.names_node else call


def parse_call(text: str, line: int) -> Call:
    """One call, without its result; raises TraceFormatError naming ``line``."""
    name = ""
    if "=" in text:
        name, _, text = text.partition("=")
        name = name.strip()
        if not HANDLE.match(name) or name in ("root", "foreign"):
            raise TraceFormatError(line, f"bad handle name {name!r}")
    namespace: Namespace = None
    before, space, last = text.strip().rpartition(" ")
    if space and last.startswith("ns="):
        text = before
        try:
            namespace = read_namespace(last[3:])
        except ValueError as problem:
            raise TraceFormatError(line, f"bad namespace {last[3:63]!r}: {problem}") from None
    words = _WORD.findall(text)
    if not words:
        raise TraceFormatError(line, "missing call")
    op, rest = words[0], words[1:]
    kind = BY_OP.get(op)
    if kind is None:
        raise TraceFormatError(line, f"unknown call {op!r} (known: {', '.join(OPS)})")
    if space and last.startswith("ns=") and not kind.namespaced:
        raise TraceFormatError(line, f"{op} takes no namespace")
    if kind.names_node != bool(name):
        raise TraceFormatError(line, f"{op} {'needs' if kind.names_node else 'takes no'} a handle name ('nK = {op} ...')")
    if len(rest) != len(kind.params):
        raise TraceFormatError(line, f"{op} takes {len(kind.params) or 'no'} argument{'' if len(kind.params) == 1 else 's'}: {_usage(kind)}")
    args: list[Arg] = []
    for param, word in zip(kind.params, rest):
        value: Arg | None
        if param.kind in ("tokens", "blocks"):
            value = read_ints(word)
        elif param.kind == "count":
            value = read_int(word, signed=True)
        else:
            value = word if HANDLE.match(word) else None
        if value is None:
            raise TraceFormatError(line, f"{op}'s {param.name} must be {_PARAM_SHAPES[param.kind]}, got {word[:60]!r}: {_usage(kind)}")
        args.append(value)
    return Call(op, tuple(args), name, namespace)


_PARAM_SHAPES: dict[ParamKind, str] = {
    "tokens": "a list of whole numbers [t1 t2 ...]",
    "blocks": "a list of whole numbers [b1 b2 ...]",
    "node": "a handle (nK or root)",
    "count": "a whole number",
}


# Making a call on a cache ---------------------------------------------------------------------


def invoke(cache: PrefixCache, call: Call, node_of: Callable[[str], NodeId]) -> object:
    """Make ``call`` on ``cache``, its handles turned into the cache's nodes by ``node_of``; its raw result."""
    arguments: list[object] = []
    for param, value in zip(call.kind.params, call.args):
        if param.kind == "node":
            arguments.append(node_of(cast(str, value)))
        elif param.kind in ("tokens", "blocks"):
            arguments.append(list(cast(tuple[int, ...], value)))
        else:
            arguments.append(value)
    method: Callable[..., object] = getattr(cache, call.kind.method)
    if call.namespace is not None:  # a cache without namespaces is called as before in the default one
        return method(*arguments, namespace=call.namespace)
    return method(*arguments)


def call_of(method: str, arguments: Sequence[object], handle_of: Callable[[NodeId], str], name: str, namespace: object = None) -> Call:
    """The call a Python caller makes with ``arguments``; Unwritable when the text of calls cannot hold them."""
    kind = BY_METHOD[method]
    space = namespace_of(namespace)
    args: list[Arg] = []
    for param, value in zip(kind.params, arguments, strict=True):
        if param.kind == "node":
            args.append(handle_of(value))
        elif param.kind in ("tokens", "blocks"):
            if not isinstance(value, Sequence) or isinstance(value, str):
                raise Unwritable(f"{param.name} must be a sequence of ints, got {type(value).__name__}")
            args.append(_as_ints(value, param.name))
        else:
            args.append(_as_int(value, param.name))
    return Call(kind.op, tuple(args), name if kind.names_node else "", space)


def _as_ints(values: Sequence[object], what: str) -> tuple[int, ...]:
    # Plain ints, nearly always: a set of their types is made at C speed (the scale
    # stage spent a tenth of its time here item by item); anything else is checked one by one.
    if set(map(type, values)) <= {int}:
        return tuple(cast(Sequence[int], values))
    return tuple(_as_int(item, what) for item in values)


def _as_int(value: object, what: str) -> int:
    if not hasattr(type(value), "__index__"):
        raise Unwritable(f"{what} must be ints, got {type(value).__name__}")
    return operator.index(cast(SupportsIndex, value))


# Results as text --------------------------------------------------------------------------------


def _kind_name(value: object) -> str:
    if inspect.isgenerator(value):
        return "a generator"
    return f"a {type(value).__name__}"


def _is_int(value: object) -> bool:
    """An int as R1 counts one (``operator.index`` takes it), but not a bool."""
    return hasattr(type(value), "__index__") and not isinstance(value, bool)


def _checked_ints(value: object, method: str, what: str) -> list[int]:
    if isinstance(value, list) and set(map(type, value)) <= {int}:  # the common case at C speed, as in _as_ints
        return cast(list[int], value)
    if not isinstance(value, list) or not all(_is_int(item) for item in value):
        raise WrongResult(f"{method} returned {_kind_name(value)} as {what}, not a list of ints")
    return [operator.index(item) for item in value]


def _checked_int(value: object, method: str, what: str = "its result") -> int:
    if not _is_int(value):
        raise WrongResult(f"{method} returned {_kind_name(value)} as {what}, not an int")
    return operator.index(cast(SupportsIndex, value))


def render_stats(stats: PrefixStats) -> str:
    return " ".join(f"{name}={getattr(stats, name)}" for name in STATS_FIELDS)


def render_result(kind: CallKind, value: object, node_text: Callable[[NodeId], str]) -> str:
    """The result ``value`` of a call of ``kind`` as text; WrongResult when it is not of the interface's type.

    ``node_text`` writes a node (a trace writes a handle, the line protocol an integer).
    """
    method = kind.method
    if kind.result == "match":
        if not isinstance(value, PrefixMatch):
            raise WrongResult(f"match_prefix returned {_kind_name(value)}, not a PrefixMatch")
        matched = _checked_int(value.matched_tokens, method, "matched_tokens")
        blocks = _checked_ints(value.blocks, method, "blocks")
        return f"{matched} {render_ints(blocks)} {node_text(value.node)}"
    if kind.result == "inserted":
        if not isinstance(value, Inserted):
            raise WrongResult(f"insert returned {_kind_name(value)}, not an Inserted")
        duplicates = _checked_ints(value.duplicates, method, "duplicates")
        return f"{node_text(value.node)} {render_ints(duplicates)}"
    if kind.result == "ok":
        if value is not None:
            raise WrongResult(f"{method} returned {_kind_name(value)}, not None")
        return "ok"
    if kind.result == "blocks":
        return render_ints(_checked_ints(value, method, "the freed blocks"))
    if kind.result == "count":
        return str(_checked_int(value, method))
    if kind.result == "stats":
        if not isinstance(value, PrefixStats):
            raise WrongResult(f"stats returned {_kind_name(value)}, not a PrefixStats")
        for name in STATS_FIELDS:
            _checked_int(getattr(value, name), method, name)
        return render_stats(value)
    if kind.result == "events":
        return render_events(_checked_events(value))
    if not isinstance(value, float | int) or isinstance(value, bool):
        raise WrongResult(f"hit_rate returned {_kind_name(value)}, not a float")
    return repr(float(value))


# Events as text (R13) ----------------------------------------------------------------------------

EVENT_TYPES = (BlockStored, BlockRemoved, AllBlocksCleared)


def _checked_events(value: object) -> list[KVEvent]:
    """The events a cache returned from ``take_events``, each checked to be of the interface's types; WrongResult otherwise."""
    if not isinstance(value, list):
        raise WrongResult(f"take_events returned {_kind_name(value)}, not a list of events")
    for event in value:
        if not isinstance(event, EVENT_TYPES):
            raise WrongResult(f"take_events returned {_kind_name(event)} among its events, not a BlockStored, BlockRemoved or AllBlocksCleared")
        if isinstance(event, BlockStored):
            if event.parent is not None:
                _checked_int(event.parent, "take_events", "a BlockStored's parent")
            _checked_ints(list(event.tokens), "take_events", "a BlockStored's tokens")
            _checked_ints(list(event.blocks), "take_events", "a BlockStored's blocks")
            try:
                namespace_of(event.namespace)
            except Unwritable as problem:
                raise WrongResult(f"take_events returned a BlockStored whose namespace is not one: {problem}") from None
        elif isinstance(event, BlockRemoved):
            _checked_ints(list(event.blocks), "take_events", "a BlockRemoved's blocks")
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


_STORED = re.compile(r"stored +(-|[0-9]+) +\[([0-9 ]*)\] +\[([0-9 ]*)\](?: +ns=(\S+))?")
_REMOVED = re.compile(r"removed +\[([0-9 ]*)\]")


def parse_events(text: str) -> list[KVEvent]:
    """The events an answer to ``take_events`` stands for; ResultFormatError when a part is not an event."""
    if text == "none":
        return []
    events: list[KVEvent] = []
    for part in text.split(";"):
        part = part.strip()
        stored, removed = _STORED.fullmatch(part), _REMOVED.fullmatch(part)
        if stored is not None:
            parent = None if stored[1] == "-" else _numbers(stored[1])[0]
            try:
                namespace = None if stored[4] is None else read_namespace(stored[4])
            except ValueError as problem:
                raise ResultFormatError(f"an event's namespace: {problem}") from None
            events.append(BlockStored(parent, tuple(_numbers(stored[2])), tuple(_numbers(stored[3])), namespace))
        elif removed is not None:
            events.append(BlockRemoved(tuple(_numbers(removed[1]))))
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


# Each number but the last is followed by at least one space: with ``(?:-?[0-9]+ *)*`` the digits of one
# number could be split in exponentially many ways, and a garbled result line took a fullmatch minutes (make fuzz).
_INTS = r"\[ *((?:-?[0-9]+ +)*(?:-?[0-9]+)?) *\]"
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


class ResultFormatError(ValueError):
    """A result text that is neither of its call's shape nor an error name."""


def result_error(text: str) -> PrefixCacheError | None:
    """The interface error a result names (``UnknownNode`` or ``UnknownNode message``), else None."""
    name, _, message = text.partition(" ")
    error = ERROR_TYPES.get(name)
    return None if error is None else error(message or f"the cache answered {name}")


def _numbers(text: str) -> list[int]:
    values: list[int] = []
    for word in text.split():
        value = read_int(word, signed=True)
        if value is None:
            raise ResultFormatError(f"the number {word[:40]}... is longer than {LONGEST_NUMBER} digits")
        values.append(value)
    return values


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
        return PrefixMatch(_numbers(found[1])[0], _numbers(found[2]), node_of(found[3]))
    if kind.result == "inserted":
        return Inserted(node_of(found[1]), _numbers(found[2]))
    if kind.result == "ok":
        return None
    if kind.result == "blocks":
        return _numbers(found[1])
    if kind.result == "count":
        return _numbers(found[1])[0]
    if kind.result == "stats":
        return PrefixStats(*_numbers(" ".join(found.groups())))
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


# What a cache offers beyond the interface -------------------------------------------------------

FEATURES = ("namespaces", "events", "walk-order", "unordered")
"""R12 (``match_prefix`` and ``insert`` take ``namespace``) and R13 (``take_events``): a cache may offer either.
``walk-order`` and ``unordered`` say how its snapshot reports the order (R11, ``running.observable``): as its
eviction walk would free the nodes, or not at all; without either, in its eviction order."""


def features_of(cache: object) -> frozenset[str]:
    """What ``cache`` offers of ``FEATURES``.

    A wrapper that has every call (a pipe, a guard, the lockstep) says what the
    cache behind it offers in ``prefixspec_features``; a plain cache offers
    events when it has ``take_events`` and namespaces when both ``match_prefix``
    and ``insert`` take a ``namespace`` argument.
    """
    declared = getattr(cache, "prefixspec_features", None)
    if isinstance(declared, frozenset):
        return declared
    offered: set[str] = set()
    if callable(getattr(cache, "take_events", None)):
        offered.add("events")
    try:
        if all("namespace" in inspect.signature(getattr(cache, method)).parameters for method in ("match_prefix", "insert")):
            offered.add("namespaces")
    except (TypeError, ValueError, AttributeError):  # no signature to read (a builtin, a missing call): no namespaces
        pass
    return frozenset(offered)


# Wrappers --------------------------------------------------------------------------------------


class CallThrough:
    """A ``PrefixCache`` whose every call becomes a ``Call`` handed to ``perform``.

    A wrapper between a caller and a cache (the lockstep, a recording, a pipe)
    subclasses it and overrides ``perform`` (make the call, return the
    result), ``handle_of`` (the handle of a node a caller passes) and
    ``next_name`` (the handle the next node-naming call gives its node).
    """

    @property
    def root(self) -> NodeId:
        raise NotImplementedError

    def block_size(self) -> int:
        raise NotImplementedError

    def perform(self, call: Call) -> object:
        raise NotImplementedError

    def handle_of(self, node: NodeId) -> str:
        raise NotImplementedError

    def next_name(self) -> str:
        raise NotImplementedError

    def unwritable(self, method: str, arguments: Sequence[object], problem: Unwritable) -> object:
        """What a call the text cannot hold does; by default the error is raised."""
        raise problem

    def through(self, method: str, *arguments: object, namespace: object = None) -> object:
        try:
            call = call_of(method, arguments, self.handle_of, self.next_name(), namespace)
        except Unwritable as problem:
            return self.unwritable(method, arguments, problem)
        return self.perform(call)

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        return cast(PrefixMatch, self.through("match_prefix", tokens, namespace=namespace))

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        return cast(Inserted, self.through("insert", tokens, blocks, namespace=namespace))

    def take_events(self) -> list[KVEvent]:
        return cast(list[KVEvent], self.through("take_events"))

    def lock(self, node: NodeId) -> None:
        self.through("lock", node)

    def unlock(self, node: NodeId) -> None:
        self.through("unlock", node)

    def evict(self, n_blocks: int) -> list[BlockId]:
        return cast(list[BlockId], self.through("evict", n_blocks))

    def cached_tokens(self) -> int:
        return cast(int, self.through("cached_tokens"))

    def cached_blocks(self) -> int:
        return cast(int, self.through("cached_blocks"))

    def evictable_blocks(self) -> int:
        return cast(int, self.through("evictable_blocks"))

    def stats(self) -> PrefixStats:
        return cast(PrefixStats, self.through("stats"))

    def hit_rate(self) -> float:
        return cast(float, self.through("hit_rate"))
