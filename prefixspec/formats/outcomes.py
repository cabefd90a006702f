"""Running calls on one cache, and their outcomes as the text of results: what a trace's replay and the lockstep share.

``CallRunner`` makes a ``Call`` on one cache, its handles resolved to that cache's own nodes and the nodes it
returns named; ``Outcome`` is what a call did, as result text; ``same_outcome`` is when two outcome texts agree.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Hashable
from typing import cast

from spec.api import BlockRemoved, BlockStored, CacheFactory, Inserted, KVEvent, NodeId, PrefixCache, PrefixMatch, PrefixStats, TargetFailure
from prefixspec.vocabulary import CALLS, STATS_FIELDS, Call, CallKind, error_name, invoke, render_events, render_ints, render_result, render_stats, result_error, same_events

FOREIGN = "foreign"
"""The handle of a node of another cache (never named by a line of the trace)."""


class UnresolvedHandle(LookupError):
    """A call names a handle whose call gave no node (it raised an error)."""


PASSED_ON: tuple[type[BaseException], ...] = (KeyboardInterrupt, SystemExit, TargetFailure)
"""What a call raises that is no outcome of the call: the user's Ctrl-C, an exit, a target that failed as a program.

Every other exception, ``BaseException`` subclasses and ``GeneratorExit``
included, is the call's outcome (``crash Type: message``), compared like any other.
"""


def outcome_text(error: BaseException) -> str:
    """``error`` as a result writes it; a message that cannot even be made into text is named so."""
    try:
        return error_name(error)
    except PASSED_ON:
        raise
    except BaseException as broken:  # an exception whose __str__ raises: its type still says what happened
        return f"crash {type(error).__name__}: (its message raised {type(broken).__name__})"


class Outcome:
    """What one call did: its result as trace text, and the raw value or exception.

    A result of the interface's exact types (``plain_value``) may be made without its text (``CallRunner.run``
    with ``text=False``): rendering it cannot fail, so it is rendered when ``text`` is first read, and
    ``same_result`` compares such results by value.  ``node`` is the word its node is written as ("" for none).
    """

    __slots__ = ("_text", "value", "error", "kind", "node", "plain")

    def __init__(
        self, text: str | None, value: object = None, error: BaseException | None = None, kind: CallKind | None = None, node: str = "", plain: bool = False
    ) -> None:
        self._text = text
        self.value = value
        self.error = error
        self.kind = kind
        self.node = node
        self.plain = plain
        """``plain_value`` held of the result (so no error): ``same_result`` may compare it by value."""

    @property
    def text(self) -> str:
        if self._text is None:
            assert self.kind is not None, "an outcome without its text has its call's kind"
            # A plain value, written without ``render_result``'s checks of its types, which ``plain_value`` made
            # (a match's text: 2.4 us, 1.2 so, timeit).
            self._text = render_plain(self.kind, self.value, self.node) if self.plain else render_result(self.kind, self.value, self._node_word)
        return self._text

    def _node_word(self, node: object) -> str:
        return self.node

    def __repr__(self) -> str:
        return f"Outcome({self.text!r}, {self.value!r}, {self.error!r})"


_INT: frozenset[type] = frozenset({int})

_COUNTERS = operator.attrgetter(*STATS_FIELDS)


def plain_value(kind: CallKind, value: object) -> bool:
    """``value`` is a result of ``kind`` of the interface's exact types (ints, lists of ints, its dataclasses, a
    float): one ``render_result`` writes without a question, and whose equal is written alike (or, for a rate,
    agrees as text: 0.0 and -0.0)."""
    result = kind.result
    if result == "ok":  # a lock's, an unlock's: the most frequent first
        return value is None
    if result == "match":
        return (
            type(value) is PrefixMatch
            and type(value.matched_tokens) is int
            and type(value.blocks) is list
            and set(map(type, value.blocks)) <= _INT
        )
    if result == "inserted":
        return type(value) is Inserted and type(value.duplicates) is list and set(map(type, value.duplicates)) <= _INT
    if result == "count":
        return type(value) is int
    if result == "blocks":
        return type(value) is list and set(map(type, value)) <= _INT
    if result == "events":
        return type(value) is list and all(map(plain_event, value))
    if result == "stats":  # an engine's reading of its counters: each checked and written by render_result, 5 us a side
        return plain_stats(value)
    return result == "rate" and type(value) is float


def plain_stats(value: object) -> bool:
    """A ``PrefixStats`` of exact ints: written alike when equal, and a guarded cache keeps it as it is
    (``plain.plain_data``); its ``==`` and hash run none of the target's code."""
    return type(value) is PrefixStats and set(map(type, _COUNTERS(value))) <= _INT


_NAMESPACE_WORDS: frozenset[type] = frozenset({int, str, type(None)})
"""The namespaces whose equal values are written alike, and the parts of a tuple's that are (a tuple with an item
of another type is written to compare)."""


def plain_event(event: object) -> bool:
    """A BlockStored or BlockRemoved of exact ints and a namespace of ``_NAMESPACE_WORDS`` or a flat tuple of them:
    equal ones are written alike, and a guarded cache keeps it as it is (``plain.plain_data``)."""
    if type(event) is BlockRemoved:  # narrowed by ``type(...) is``, without typing.cast's call
        blocks = event.blocks
        return type(blocks) is tuple and set(map(type, blocks)) <= _INT
    if type(event) is not BlockStored:
        return False
    stored = event
    return (
        (stored.parent is None or type(stored.parent) is int)
        and type(stored.tokens) is tuple
        and type(stored.blocks) is tuple
        and (type(stored.namespace) in _NAMESPACE_WORDS or (type(stored.namespace) is tuple and set(map(type, stored.namespace)) <= _NAMESPACE_WORDS))
        and set(map(type, stored.tokens)) <= _INT
        and set(map(type, stored.blocks)) <= _INT
    )


def render_plain(kind: CallKind, value: object, node: str) -> str:
    """``render_result`` of a ``plain_value`` of ``kind``, its node written ``node``."""
    result = kind.result
    if result == "match":
        found = cast(PrefixMatch, value)
        return f"{found.matched_tokens} {render_ints(found.blocks)} {node}"
    if result == "inserted":
        return f"{node} {render_ints(cast(Inserted, value).duplicates)}"
    if result == "ok":
        return "ok"
    if result == "blocks":
        return render_ints(cast(list[int], value))
    if result == "events":
        return render_events(cast(list[KVEvent], value))
    if result == "stats":
        return render_stats(cast(PrefixStats, value))
    if result == "rate":
        return repr(value)
    return str(value)


def same_result(expected: Outcome, got: Outcome) -> bool:
    """``same_outcome`` of the two texts, by value where both results are of the interface's exact types (equal
    values of those types are written alike, their nodes by the words both outcomes hold)."""
    if expected.plain and got.plain and expected.node == got.node:
        mine, theirs = expected.value, got.value
        # A match or an insert holds each cache's own node, which never equals the other's: its other fields are
        # compared, the node by its word.  Comparing the whole value failed on every such call and rendered both
        # results (3 in 10 of the engine machine's calls are matches and inserts).
        # Both plain results of one call, so of one type: told by ``type(...) is``, which narrows without typing.cast's call.
        if type(mine) is PrefixMatch:
            if type(theirs) is PrefixMatch and mine.matched_tokens == theirs.matched_tokens and mine.blocks == theirs.blocks:
                return True
        elif type(mine) is Inserted:
            if type(theirs) is Inserted and mine.duplicates == theirs.duplicates:
                return True
        elif mine == theirs:  # counts, lists of ids, and events cut alike (R13: else compared as text, however cut)
            return True
    return same_outcome(expected.text, got.text)


_DONE: dict[str, Outcome] = {kind.op: Outcome("ok", None, None, kind, "", True) for kind in CALLS if kind.result == "ok"}
"""The outcome of every call whose result is ``ok`` (a lock's, an unlock's), one a call: an outcome is never
changed once made, and these are nearly half a lockstep's outcomes (bench.instructions)."""


class NodesByName(dict[str, NodeId]):
    """A cache's nodes by their handles: a handle not named yet is ``foreign`` (another cache's node, made by
    ``make_foreign`` when first asked for) or UnresolvedHandle."""

    def __init__(self, make_foreign: Callable[[], NodeId]) -> None:
        super().__init__()
        self.make_foreign = make_foreign

    def __missing__(self, handle: str) -> NodeId:
        if handle == FOREIGN:
            node = self[FOREIGN] = self.make_foreign()
            return node
        raise UnresolvedHandle(f"handle {handle} names no node: the call that named it raised an error")


class CallRunner:
    """Runs calls on one cache, resolving handles to that cache's own NodeIds and naming the nodes it returns.

    The handle ``foreign`` names a node of another cache, made by ``foreign``
    (a factory of caches like this one): R6 makes it unknown here.
    """

    def __init__(self, cache: PrefixCache, foreign: CacheFactory | None = None) -> None:
        self.cache = cache
        self.foreign = foreign
        self.root = cache.root
        """Read once: a cache's root is one node for its life, and reading it may be a guarded run of the target's code."""
        self.node_by_name: dict[str, NodeId] = NodesByName(self.foreign_node)
        self.node_by_name["root"] = self.root
        self.node_of: Callable[[str], NodeId] = self.node_by_name.__getitem__
        """The node behind a handle: ``foreign`` made when first asked for, UnresolvedHandle for a handle that names
        none.  The table's own lookup, without a frame of Python for a handle named already (nearly every one)."""
        self.name_by_node: dict[Hashable, str] = {}

    def name_of(self, node: NodeId) -> str | None:
        """The first handle that returned ``node``; 'root' for the root."""
        try:
            if node == self.root:
                return "root"
            return self.name_by_node.get(node)
        except PASSED_ON:
            raise
        except BaseException:  # a node whose == or hash raises is no node any handle names
            return None

    def foreign_node(self) -> NodeId:
        """A node another cache of this block size returned (two blocks of zeros, ids 0 and 1)."""
        if self.foreign is None:
            raise UnresolvedHandle("the handle foreign needs a factory of caches to make another cache's node")
        size = self.cache.block_size()
        return self.foreign(size).insert([0] * (2 * size), [0, 1]).node

    def run(self, call: Call, *, text: bool = True, kind: CallKind | None = None) -> Outcome:
        """Make ``call`` on the cache; any exception becomes the outcome, but those of ``PASSED_ON``, which escape.

        ``text`` false: a result of the interface's exact types (``plain_value``) is rendered only when its
        text is read (a lockstep compares it by value); its node is named now all the same.  ``kind`` is the call's,
        where the caller read it already.
        """
        if kind is None:
            kind = call.kind
        try:
            value = invoke(self.cache, call, self.node_of, kind)
            if plain_value(kind, value):  # its text cannot fail: made now, or when first read
                if kind.result == "ok":  # a lock's, an unlock's: every one the same, so one outcome kept for them all
                    return _DONE[kind.op]
                node = self.written_node(value.node, call.name) if type(value) is PrefixMatch or type(value) is Inserted else ""
                outcome = Outcome(None, value, None, kind, node, True)
                if text:
                    _ = outcome.text  # rendered now, as the caller asked
                return outcome
            words: list[str] = []

            def node_text(node: NodeId) -> str:  # named once the rest of the result is known to be of its type
                words.append(self.written_node(node, call.name))
                return words[-1]

            written = render_result(kind, value, node_text)
        except PASSED_ON:
            raise
        except BaseException as error:  # the outcome of a call may be any error, GeneratorExit too; the caller compares it
            return Outcome(outcome_text(error), None, error)
        return Outcome(written, value, None, kind, words[-1] if words else "")

    def written_node(self, node: NodeId, name: str) -> str:
        """A node as a result writes it (root, an earlier handle, or new); records it under ``name``."""
        self.node_by_name[name] = node
        known = self.name_of(node)
        if known is not None:
            return known
        try:
            self.name_by_node[node] = name
        except TypeError:
            return f"unhashable {type(node).__name__}"
        return "new"


EVENT_WORDS = ("none", "stored ", "removed ", "cleared")


_ASCII_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_ASCII_INT = re.compile(r"-?[0-9]+")


def same_outcome(expected: str, got: str) -> bool:
    """Outcome texts agree; hit rates agree to 1e-12, so other languages' float printing passes.

    An error agrees by its name, as in the line protocol: ``InvalidArgument``
    and ``InvalidArgument block 10 is cached at another position`` are one
    outcome (the message is the engine's own words).  Compared by type, as
    live results are: a count is an int, so ``0.0``, ``1e-16`` or another
    script's digits (``٠``) never equal ``0``; the tolerance applies only
    where one side is a float written in ASCII digits.
    """
    if expected == got:
        return True
    expected_error, got_error = result_error(expected), result_error(got)
    if expected_error is not None or got_error is not None:
        return type(expected_error) is type(got_error)
    if expected.startswith(EVENT_WORDS) and got.startswith(EVENT_WORDS):  # R13: the same events, however they are cut
        return same_events(expected, got)
    if len(expected) > 40 or len(got) > 40 or " " in expected or " " in got:
        return False
    if not (_ASCII_NUMBER.fullmatch(expected) and _ASCII_NUMBER.fullmatch(got)):
        return False
    if _ASCII_INT.fullmatch(got):
        return False  # ``got`` (the spec's, or the live cache's) is a count: only its own digits equal it
    try:
        return math.isclose(float(expected), float(got), rel_tol=1e-12, abs_tol=1e-15)
    except ValueError:
        return False
