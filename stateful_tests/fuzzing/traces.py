"""Hostile trace files, as a Hypothesis strategy: the golden trace, mutated.

``hostile_traces`` takes a window of the golden trace's lines (its header
kept), then applies up to eight mutations (in the shapes its docstring says): bytes flipped, inserted or deleted
(bytes that are not UTF-8 among them), odd line separators (form feed, lone
``\\r``, U+2028, NUL...), numbers replaced by superscripts, other scripts'
digits or 5,000 digits, results replaced, lines duplicated, dropped,
swapped, cut short, or made into a match of up to 2,000 tokens.

Lines stay short of the 60,000 tokens that made a match quadratic (T6, the
spec's to fix): a hostile trace is about the reading, not the spec's speed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hypothesis import strategies as st

from prefixspec.shipped import GOLDEN_TRACE

GOLDEN_LINES = GOLDEN_TRACE.read_bytes().split(b"\n")

LINE_BREAKERS = ("\f", "\r", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r\n", "\x00", "\t", "\ufeff")
ODD_NUMBERS = ("²", "³", "¹²", "٣", "߂", "０", "-0", "-1", "0", "00", "1_0", "+1", "9" * 5000, "1" * 4001, "1" * 4000, str(2**32), str(2**64), "1e3", "0x10", "inf", "nan")
ODD_WORDS = (
    *ODD_NUMBERS,
    "",
    " ",
    "root",
    "new",
    "n0",
    "n99999",
    "[",
    "]",
    "[]",
    "[1",
    "1]",
    "->",
    "-> ->",
    "=",
    "#",
    "block_size",
    "block_size 0",
    "prefixspec-trace 1",
    "prefixspec-trace 2",
    "rules strict",
    "rules use=x,evict=y",
    "stats",
    "lock",
    "UnknownNode",
    "crash",
    "ProtocolError",
    "é",
)
ODD_RESULTS = (*ODD_WORDS, *(f"[{number}]" for number in ODD_NUMBERS), "[1 ²]", "4 [10 ٣] n1", "new [²]", "crash ValueError: x")
"""What a recorded result is replaced by: odd words, and lists of odd numbers (what ``verify`` reads block ids from)."""
HEADER_VALUES = ("0", "00", "-1", "²", "9" * 5000, "1" * 4001, "", "two", "1 2", str(2**32), "strict", "sglang", "use=x,evict=y", "use=path")
"""What the block_size and rules lines are given: none of them a block size, few of them a rule set."""
BAD_BYTES = (b"\xff", b"\xfe", b"\xc3", b"\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf")
LONGEST_MATCH = 2000
"""Tokens of the longest match line a mutation writes."""

NUMBER = re.compile(rb"\d+")
POSITION = st.integers(0, 1 << 20)
"""A place in the text, taken modulo its length when used, so a mutation stays valid as the text changes."""

INSERTED = st.one_of(
    st.sampled_from(BAD_BYTES),
    st.sampled_from(LINE_BREAKERS).map(lambda text: text.encode("utf-8")),
    st.sampled_from(ODD_WORDS).map(lambda text: text.encode("utf-8")),
    st.binary(min_size=1, max_size=8),
)

MUTATION = st.one_of(
    st.tuples(st.just("flip"), POSITION, st.integers(0, 255)),
    st.tuples(st.just("insert"), POSITION, INSERTED),
    st.tuples(st.just("delete"), POSITION, st.integers(1, 64)),
    st.tuples(st.just("number"), POSITION, st.sampled_from(ODD_NUMBERS)),
    st.tuples(st.just("result"), POSITION, st.sampled_from(ODD_RESULTS)),
    st.tuples(st.just("duplicate"), POSITION, st.integers(1, 50)),
    st.tuples(st.just("drop"), POSITION, st.integers(1, 20)),
    st.tuples(st.just("swap"), POSITION, POSITION),
    st.tuples(st.just("cut"), POSITION, st.just(0)),
    st.tuples(st.just("long_match"), POSITION, st.integers(1, LONGEST_MATCH)),
)
Mutation = tuple[str, int, object]


def _lines_edit(data: bytes, kind: str, where: int, what: object) -> bytes:
    lines = data.split(b"\n")
    line = where % len(lines)
    if kind == "result":
        call, arrow, _ = lines[line].partition(b"->")
        lines[line] = call + b"-> " + str(what).encode("utf-8")
    elif kind == "duplicate":
        lines[line : line + 1] = [lines[line]] * (1 + int(str(what)))
    elif kind == "drop":
        del lines[line : line + int(str(what))]
    elif kind == "swap":
        other = int(str(what)) % len(lines)
        lines[line], lines[other] = lines[other], lines[line]
    elif kind == "header":  # the block_size line (0) or the rules line (1), whose values every later line depends on
        word = (b"block_size", b"rules")[where]
        for index, text in enumerate(lines):
            if text.startswith(word):
                lines[index] = word + b" " + str(what).encode("utf-8")
                break
    elif kind == "long_match":
        tokens = " ".join(str(token % 7) for token in range(int(str(what))))
        lines[line] = f"n{line}x = match [{tokens}]".encode()
    return b"\n".join(lines)


def mutate(data: bytes, mutations: Sequence[Mutation]) -> bytes:
    """``data`` with each mutation applied in turn."""
    for kind, where, what in mutations:
        at = where % (len(data) + 1)
        if kind == "flip" and data:
            at %= len(data)
            data = data[:at] + bytes([int(str(what))]) + data[at + 1 :]
        elif kind == "insert":
            assert isinstance(what, bytes)
            data = data[:at] + what + data[at:]
        elif kind == "delete":
            data = data[:at] + data[at + int(str(what)) :]
        elif kind == "number":
            numbers = list(NUMBER.finditer(data))
            if numbers:
                found = numbers[where % len(numbers)]
                data = data[: found.start()] + str(what).encode("utf-8") + data[found.end() :]
        elif kind == "cut":
            data = data[:at]
        else:
            data = _lines_edit(data, kind, where, what)
    return data


SEPARATOR = st.tuples(st.just("insert"), POSITION, st.sampled_from(LINE_BREAKERS).map(lambda text: text.encode("utf-8")))


@st.composite
def hostile_traces(draw: st.DrawFn) -> bytes:
    """A trace file's bytes: a window of the golden trace (its header kept), then mutations, in one of four shapes.

    - one in five: its block size or rule set changed alone, the values
      every later line depends on;
    - one in five: an odd line separator somewhere, then one more mutation,
      whose error must still name its true line;
    - one in five: one recorded result replaced alone (what ``verify`` reads);
    - the rest: zero to eight mutations, one alone in half of them (a file
      broken in one place gets past the reading to the replay, where most
      files broken in several stop at their first error).
    """
    kept = draw(st.integers(2, len(GOLDEN_LINES)))
    start = b"\n".join(GOLDEN_LINES[:kept]) + b"\n"
    shape = draw(st.integers(0, 4))
    if shape == 0:
        return mutate(start, [("header", draw(st.sampled_from([0, 1])), draw(st.sampled_from(HEADER_VALUES)))])
    if shape == 1:
        return mutate(start, [draw(SEPARATOR), draw(MUTATION)])
    if shape == 2:
        return mutate(start, [("result", draw(POSITION), draw(st.sampled_from(ODD_RESULTS)))])
    count = draw(st.one_of(st.just(1), st.integers(0, 8)))
    return mutate(start, draw(st.lists(MUTATION, min_size=count, max_size=count)))
