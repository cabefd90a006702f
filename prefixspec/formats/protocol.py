"""The line protocol (``docs/protocol.md``): the text of calls, spoken with an engine over stdin and stdout.

The checker sends one line per call, in the text of ``prefixspec.vocabulary``
(the trace's syntax), and the engine answers ``LINE -> RESULT``.  Beyond the
calls the protocol has three lines: the handshake, ``block_size B`` (a fresh,
empty cache) and ``snapshot`` (the canonical state, R11).  Nodes in results
are the engine's integers (or ``root``); errors are written by name.

``ProtocolServer`` is the engine's side for any Python cache factory, and
``serve`` its loop over stdin and stdout: a Python cache served as an engine
(``SpecCache`` serves the spec itself, the reference engine), and a model for
engines in other languages::

    prefixspec check --exec "python -c 'from prefixspec.formats.protocol import serve; from mypkg.cache import make_cache; serve(make_cache, \"mypkg\")'"
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Hashable, Iterable
from typing import TextIO

from spec.api import Namespace, NodeId, NodeView, PrefixCache, PrefixCacheError, PrefixStats, Snapshot
from prefixspec.vocabulary import (
    FEATURES,
    LONGEST_NUMBER,
    features_of,
    ints_pattern,
    read_namespace,
    render_namespace,
    RESULT_GRAMMAR,
    STATS_FIELDS,
    ResultFormatError,
    TraceFormatError,
    error_name,
    invoke,
    parse_call,
    read_int,
    render_ints,
    render_result,
    render_stats,
)

PROTOCOL_VERSION = 1
HANDSHAKE = f"prefixspec-protocol {PROTOCOL_VERSION}"

FEATURES_WORD = "features="


def greeting(name: str, features: frozenset[str]) -> str:
    """The engine's answer to the handshake: ``ok NAME``, and ``features=namespaces,events`` when it offers any (R12, R13)."""
    offered = ",".join(feature for feature in FEATURES if feature in features)
    return f"ok {name} {FEATURES_WORD}{offered}".rstrip() if offered else f"ok {name}".rstrip()


def parse_greeting(text: str) -> tuple[str, frozenset[str]]:
    """An engine's name and the features it offers, from the handshake's answer after ``ok``; unknown features are ignored."""
    name, _, last = text.strip().rpartition(" ")
    if not last.startswith(FEATURES_WORD):
        return text.strip(), frozenset()
    return name.strip(), frozenset(word for word in last[len(FEATURES_WORD) :].split(",") if word in FEATURES)


_INTS = ints_pattern(signed=False)
_BRACKET = ints_pattern(signed=False, group=False)
_COPIES = f"((?:{_BRACKET})+)"  # one bracket per own block, no space between: R5 dup=keep
_NODE = rf" +{_INTS} +{_INTS} +([0-9]+)(?: +copies={_COPIES})?(?: +ns=(\S+))?"
_SNAPSHOT = re.compile(rf"{RESULT_GRAMMAR['stats'][0].pattern} +nodes=([0-9]+)((?:{_NODE})*)(?: +released=(?P<released>{_BRACKET}))?")
_SNAPSHOT_NODE = re.compile(_NODE)
_BRACKETS = re.compile(_INTS)
SNAPSHOT_SHAPE = (
    "STATS nodes=K followed by K times [PREFIX ...] [BLOCK ...] LOCKS (then copies=[COPY ...][COPY ...]... when a position "
    "holds copies, and ns=JSON outside the default namespace), and released=[BLOCK ...] under use=release"
)


def render_snapshot(snapshot: Snapshot) -> str:
    """A snapshot as the answer to ``snapshot``: the counters, then every node in R11's order (and the released blocks, R7)."""
    nodes = "".join(
        f" {render_ints(view.prefix)} {render_ints(view.blocks)} {view.locks}"
        + ("" if not view.copies else " copies=" + "".join(render_ints(copies) for copies in view.copies))
        + ("" if view.namespace is None else f" ns={render_namespace(view.namespace)}")
        for view in snapshot.nodes
    )
    released = "" if not snapshot.released else f" released={render_ints(snapshot.released)}"
    return f"{render_stats(snapshot.stats)} nodes={len(snapshot.nodes)}{nodes}{released}"


def _namespace_word(text: str | None) -> Namespace:
    if text is None:
        return None
    try:
        return read_namespace(text)
    except ValueError as problem:
        raise ResultFormatError(f"a node's namespace: {problem}") from None


def _whole(text: str) -> int:
    value = read_int(text)
    if value is None:
        raise ResultFormatError(f"the number {text[:40]} is not a whole number of at most {LONGEST_NUMBER} digits")
    return value


def parse_snapshot(text: str, block_size: int) -> Snapshot:
    """The snapshot an answer to ``snapshot`` stands for; ResultFormatError when it is not one."""
    found = _SNAPSHOT.fullmatch(text)
    if found is None:
        raise ResultFormatError(f"`{SNAPSHOT_SHAPE}`")
    fields = len(STATS_FIELDS)
    stats = PrefixStats(*(_whole(found[index]) for index in range(1, fields + 1)))
    nodes = tuple(
        NodeView(
            tuple(map(_whole, node[1].split())),
            tuple(map(_whole, node[2].split())),
            _whole(node[3]),
            _namespace_word(node[5]),
            _copies(node[4], len(node[2].split())),
        )
        for node in _SNAPSHOT_NODE.finditer(found[fields + 2])
    )
    if len(nodes) != _whole(found[fields + 1]):
        raise ResultFormatError(f"a snapshot whose nodes= count ({found[fields + 1]}) is the number of nodes it lists ({len(nodes)})")
    released = () if found["released"] is None else tuple(map(_whole, found["released"].strip(" []").split()))
    return Snapshot(block_size, nodes, stats, released)


def _copies(text: str | None, own_blocks: int) -> tuple[tuple[int, ...], ...]:
    """A node's ``copies=`` word (R5 ``dup=keep``): one bracket per own block; ResultFormatError otherwise."""
    if text is None:
        return ()
    copies = tuple(tuple(map(_whole, found[1].split())) for found in _BRACKETS.finditer(text))
    if len(copies) != own_blocks:
        raise ResultFormatError(f"a node of {own_blocks} blocks with copies= of {len(copies)} positions (one bracket per block)")
    return copies


class ProtocolServer:
    """The engine's side of the protocol for caches made by ``factory``: ``answer(line)`` is the line to print."""

    def __init__(self, factory: Callable[[int], PrefixCache], name: str) -> None:
        self.factory = factory
        self.name = name
        self.cache: PrefixCache | None = None
        self.handles: dict[str, NodeId] = {}
        self.node_ids: dict[Hashable, int] = {}

    def answer(self, line: str) -> str:
        return f"{line} -> {self.result(line)}"

    def result(self, line: str) -> str:
        if line.startswith("prefixspec-protocol"):
            return greeting(self.name, features_of(self.factory(1))) if line == HANDSHAKE else f"ProtocolError this engine speaks {HANDSHAKE}"
        if line.startswith("block_size"):
            words = line.split()
            size = read_int(words[1]) if len(words) == 2 else None
            if size is None:
                return "ProtocolError block_size takes one whole number"
            try:
                self.cache = self.factory(size)
            except PrefixCacheError as error:
                return f"{error_name(error)} {error}"
            self.handles = {}
            self.node_ids = {}
            return "ok"
        cache = self.cache
        if cache is None:
            return "ProtocolError no cache yet: send block_size B first"
        if line == "snapshot":
            return render_snapshot(cache.snapshot())
        try:
            call = parse_call(line, 0)
        except TraceFormatError as error:
            return f"ProtocolError {str(error).partition(': ')[2]}"
        try:
            value = invoke(cache, call, lambda handle: cache.root if handle == "root" else self.handles.get(handle, handle))
        except PrefixCacheError as error:
            return f"{error_name(error)} {error}"
        return render_result(call.kind, value, lambda node: self.node_text(cache, node, call.name))

    def node_text(self, cache: PrefixCache, node: NodeId, name: str) -> str:
        self.handles[name] = node
        if node == cache.root:
            return "root"
        return str(self.node_ids.setdefault(node, len(self.node_ids) + 1))


def serve(factory: Callable[[int], PrefixCache], name: str, lines: Iterable[str] | None = None, out: TextIO | None = None) -> None:
    """Answer the protocol's lines (default: stdin) on ``out`` (default: stdout) for caches ``factory`` makes, until the input ends.

    Each answer is flushed at once, as the protocol asks; a blank line is skipped.
    """
    server = ProtocolServer(factory, name)
    written = sys.stdout if out is None else out
    for raw in sys.stdin if lines is None else lines:
        line = raw.strip()
        if line:
            written.write(server.answer(line) + "\n")
            written.flush()
