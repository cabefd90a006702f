"""Traces: a line-oriented text format for sequences of cache calls and their results.

A trace is what a golden fixture, a counterexample and a recorded production
run have in common.  The format is specified in ``fixtures/README.md``; in
short::

    prefixspec-trace 1
    block_size 2
    # a comment
    n1 = insert [1 2 3 4 5] [10 11] -> new []
    n2 = match [1 2 3 4 9 9] -> 4 [10 11] n1
    lock n2 -> ok
    evict 1 -> []
    unlock n2 -> ok
    stats -> lookups=1 query_tokens=6 hit_tokens=4 inserted_blocks=2 evicted_blocks=0

Every ``match`` and ``insert`` names its result (``n1``); later calls refer to
the node by that handle (``root`` is the root).  A node in a result is written
``root``, the first handle that returned it, or ``new`` when no earlier line
returned it.  Errors are written by name (``-> UnknownNode``).  The part from
``->`` on is the expected result; a line without it is a call to make with no
expectation.

``python -m spec.trace generate FILE`` writes the golden trace from the spec.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from spec.api import ERROR_TYPES, Inserted, NodeId, PrefixCache, PrefixMatch, PrefixStats

FORMAT_VERSION = 1
HEADER = f"prefixspec-trace {FORMAT_VERSION}"

NODE_OPS = ("match", "insert")
HANDLE_OPS = ("lock", "unlock")
QUERY_OPS = ("stats", "cached_tokens", "cached_blocks", "evictable_blocks", "hit_rate")
ALL_OPS = (*NODE_OPS, *HANDLE_OPS, "evict", *QUERY_OPS)


class UnresolvedHandle(LookupError):
    """A lock or unlock names a handle whose call gave no node (it raised an error)."""


class TraceFormatError(ValueError):
    """A trace file that does not follow the format; names the line."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass(frozen=True)
class Call:
    """One cache call as the trace writes it.

    ``name`` is the handle a match or insert gives its node; ``handle`` is the
    node a lock or unlock refers to; ``count`` is evict's argument.
    """

    op: str
    tokens: tuple[int, ...] = ()
    blocks: tuple[int, ...] = ()
    handle: str = ""
    count: int = 0
    name: str = ""

    def text(self) -> str:
        """The call as a trace line, without its result."""
        if self.op == "match":
            return f"{self.name} = match {render_ints(self.tokens)}"
        if self.op == "insert":
            return f"{self.name} = insert {render_ints(self.tokens)} {render_ints(self.blocks)}"
        if self.op in HANDLE_OPS:
            return f"{self.op} {self.handle}"
        if self.op == "evict":
            return f"evict {self.count}"
        return self.op


@dataclass(frozen=True)
class Step:
    """A call and, when known, its expected result text; ``line`` is its line in the file."""

    call: Call
    expected: str | None
    line: int = 0

    def text(self) -> str:
        if self.expected is None:
            return self.call.text()
        return f"{self.call.text()} -> {self.expected}"


@dataclass
class Trace:
    """A block size and the steps to run on a fresh cache of that size."""

    block_size: int
    steps: list[Step] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [HEADER]
        for comment in self.comments:
            lines.append(f"# {comment}" if comment else "#")
        lines.append(f"block_size {self.block_size}")
        for step in self.steps:
            lines.append(step.text())
        return "\n".join(lines) + "\n"

    def calls(self) -> list[Call]:
        return [step.call for step in self.steps]


def render_ints(values: Sequence[int]) -> str:
    return "[" + " ".join(str(value) for value in values) + "]"


# Reading ------------------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LIST = re.compile(r"\[([^\]]*)\]")


def parse_ints(text: str, line: int, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(word) for word in text.split())
    except ValueError:
        raise TraceFormatError(line, f"{what} must be whole numbers, got [{text}]") from None


def parse_call(text: str, line: int) -> Call:
    """One call, without its result; raises TraceFormatError."""
    name = ""
    if "=" in text:
        name, _, text = text.partition("=")
        name = name.strip()
        if not _NAME.match(name) or name == "root":
            raise TraceFormatError(line, f"bad handle name {name!r}")
    words = text.split(None, 1)
    if not words:
        raise TraceFormatError(line, "missing call")
    op, rest = words[0], (words[1] if len(words) > 1 else "")
    if op not in ALL_OPS:
        raise TraceFormatError(line, f"unknown call {op!r} (known: {', '.join(ALL_OPS)})")
    if (op in NODE_OPS) != bool(name):
        raise TraceFormatError(line, f"{op} {'needs' if op in NODE_OPS else 'takes no'} a handle name ('nK = {op} ...')")
    lists = _LIST.findall(rest)
    leftover = _LIST.sub("", rest).strip()
    if op == "match":
        if len(lists) != 1 or leftover:
            raise TraceFormatError(line, "match takes one token list: nK = match [t1 t2 ...]")
        return Call("match", tokens=parse_ints(lists[0], line, "tokens"), name=name)
    if op == "insert":
        if len(lists) != 2 or leftover:
            raise TraceFormatError(line, "insert takes a token list and a block list: nK = insert [t ...] [b ...]")
        return Call(
            "insert",
            tokens=parse_ints(lists[0], line, "tokens"),
            blocks=parse_ints(lists[1], line, "blocks"),
            name=name,
        )
    if op in HANDLE_OPS:
        if lists or not _NAME.match(rest.strip()):
            raise TraceFormatError(line, f"{op} takes one handle: {op} nK (or {op} root)")
        return Call(op, handle=rest.strip())
    if op == "evict":
        try:
            return Call("evict", count=int(rest.strip()))
        except ValueError:
            raise TraceFormatError(line, f"evict takes one whole number, got {rest.strip()!r}") from None
    if rest.strip():
        raise TraceFormatError(line, f"{op} takes no argument")
    return Call(op)


def parse_step(text: str, line: int) -> Step:
    call_text, arrow, expected = text.partition("->")
    call = parse_call(call_text.strip(), line)
    if arrow and not expected.strip():
        raise TraceFormatError(line, "nothing after '->'")
    return Step(call, expected.strip() if arrow else None, line)


def parse_trace(text: str) -> Trace:
    """A whole trace; raises TraceFormatError naming the first bad line."""
    trace: Trace | None = None
    seen_header = False
    names: set[str] = {"root"}
    header_comments: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            if seen_header and trace is None:
                header_comments.append(stripped[1:].strip())
            continue
        if not seen_header:
            if stripped != HEADER:
                raise TraceFormatError(number, f"expected the header {HEADER!r}, got {stripped!r}")
            seen_header = True
            continue
        if trace is None:
            words = stripped.split()
            if len(words) != 2 or words[0] != "block_size" or not words[1].isdigit():
                raise TraceFormatError(number, "expected 'block_size B' after the header")
            trace = Trace(block_size=int(words[1]), comments=header_comments)
            continue
        step = parse_step(stripped, number)
        if step.call.op in HANDLE_OPS and step.call.handle not in names:
            raise TraceFormatError(number, f"handle {step.call.handle!r} is not named by an earlier line")
        if step.call.name:
            if step.call.name in names:
                raise TraceFormatError(number, f"handle {step.call.name!r} is named twice")
            names.add(step.call.name)
        trace.steps.append(step)
    if trace is None:
        raise TraceFormatError(1, f"empty trace: expected {HEADER!r} and 'block_size B'")
    return trace


def read_trace(path: str) -> Trace:
    with open(path, encoding="utf-8") as handle:
        return parse_trace(handle.read())


# Running --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one call did: its result as trace text, and the raw value or exception."""

    text: str
    value: object = None
    error: BaseException | None = None


def render_stats(stats: PrefixStats) -> str:
    return (
        f"lookups={stats.lookups} query_tokens={stats.query_tokens} hit_tokens={stats.hit_tokens} "
        f"inserted_blocks={stats.inserted_blocks} evicted_blocks={stats.evicted_blocks}"
    )


def error_name(error: BaseException) -> str:
    """An error as a trace writes it: the interface error it is, else 'crash Type: message'."""
    for name, kind in ERROR_TYPES.items():
        if isinstance(error, kind):
            return name
    message = str(error).replace("\n", " ")
    return f"crash {type(error).__name__}: {message}"


class CallRunner:
    """Runs trace calls on one cache, resolving handles to that cache's own NodeIds."""

    def __init__(self, cache: PrefixCache) -> None:
        self.cache = cache
        self.node_by_name: dict[str, NodeId] = {"root": cache.root}
        self.name_by_node: dict[Hashable, str] = {}

    def name_of(self, node: NodeId) -> str | None:
        """The first handle that returned ``node``; 'root' for the root."""
        if node == self.cache.root:
            return "root"
        try:
            return self.name_by_node.get(node)
        except TypeError:
            return None

    def render_node(self, node: NodeId, name: str) -> str:
        self.node_by_name[name] = node
        known = self.name_of(node)
        if known is not None:
            return known
        try:
            self.name_by_node[node] = name
        except TypeError:
            return f"unhashable {type(node).__name__}"
        return "new"

    def run(self, call: Call) -> Outcome:
        """Make ``call`` on the cache; any exception becomes the outcome, never escapes."""
        try:
            return self._run(call)
        except Exception as error:  # the outcome of a call may be any error; the caller compares it
            return Outcome(error_name(error), None, error)

    def _run(self, call: Call) -> Outcome:
        cache = self.cache
        if call.op == "match":
            found = cache.match_prefix(list(call.tokens))
            if not isinstance(found, PrefixMatch):
                raise TypeError(f"match_prefix returned {type(found).__name__}, not PrefixMatch")
            node = self.render_node(found.node, call.name)
            return Outcome(f"{found.matched_tokens} {render_ints(found.blocks)} {node}", found)
        if call.op == "insert":
            done = cache.insert(list(call.tokens), list(call.blocks))
            if not isinstance(done, Inserted):
                raise TypeError(f"insert returned {type(done).__name__}, not Inserted")
            node = self.render_node(done.node, call.name)
            return Outcome(f"{node} {render_ints(done.duplicates)}", done)
        if call.op in HANDLE_OPS:
            if call.handle not in self.node_by_name:
                raise UnresolvedHandle(f"handle {call.handle} names no node: the call that named it raised an error")
            target = self.node_by_name[call.handle]
            if call.op == "lock":
                cache.lock(target)
            else:
                cache.unlock(target)
            return Outcome("ok")
        if call.op == "evict":
            freed = cache.evict(call.count)
            return Outcome(render_ints(freed), freed)
        if call.op == "stats":
            stats = cache.stats()
            return Outcome(render_stats(stats), stats)
        if call.op == "hit_rate":
            rate = cache.hit_rate()
            return Outcome(repr(float(rate)), rate)
        count = getattr(cache, call.op)()
        return Outcome(str(count), count)


def same_outcome(expected: str, got: str) -> bool:
    """Outcome texts agree; hit rates agree to 1e-12, so other languages' float printing passes."""
    if expected == got:
        return True
    try:
        return math.isclose(float(expected), float(got), rel_tol=1e-12, abs_tol=1e-15)
    except ValueError:
        return False


@dataclass(frozen=True)
class Divergence:
    """The first call whose result differs from the expected one."""

    line: int
    call: str
    expected: str
    got: str

    def describe(self) -> str:
        return f"line {self.line}: {self.call}\n  expected: {self.expected}\n  got:      {self.got}"


def replay(trace: Trace, cache: PrefixCache) -> Divergence | None:
    """Run ``trace`` on ``cache`` (fresh, of the trace's block size); the first divergence, or None."""
    runner = CallRunner(cache)
    for step in trace.steps:
        outcome = runner.run(step.call)
        if step.expected is not None and not same_outcome(step.expected, outcome.text):
            return Divergence(step.line, step.call.text(), step.expected, outcome.text)
    return None


def record(block_size: int, calls: Sequence[Call], cache: PrefixCache) -> Trace:
    """The trace of ``calls`` with the results ``cache`` gives as expectations."""
    runner = CallRunner(cache)
    trace = Trace(block_size)
    for call in calls:
        trace.steps.append(Step(call, runner.run(call).text))
    return trace


def main(argv: Sequence[str]) -> int:
    """``python -m spec.trace generate FILE``: write the golden trace from the spec."""
    if len(argv) != 2 or argv[0] != "generate":
        print("usage: python -m spec.trace generate FILE", file=sys.stderr)
        return 2
    from spec.golden import golden_trace

    text = golden_trace().text()  # generated in full before the file is opened, so a failure leaves it whole
    with open(argv[1], "w", encoding="utf-8") as handle:
        handle.write(text)
    print(f"wrote {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
