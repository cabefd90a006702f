"""Repeat blocks of a trace (format version 2): a block of calls written once and run N times, expanded lazily.

A history of 2^16 uses (a 16-bit clock overflowing) is 2^16 calls; written
folded it is a handful of lines::

    repeat 65536 {
    n* = match [1 2 3] -> 2 [10] n1
    }

``repeat N {`` opens a block, ``}`` closes it; blocks do not nest, hold at
least one call, and N runs from 1 to ``LARGEST_REPEAT``.  Inside a block a
call that names a node is named ``n*``: each copy is named ``n`` and its
position among the trace's calls (the trace's first call is 1), the names the
checker's own traces give, so a later line may name any copy.

Reading never writes the copies out: ``Steps`` is a sequence over the pieces
(single steps and ``Repeat`` blocks) that makes each copy when it is asked
for, so a block of 2^16 copies costs the memory of its body alone.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from prefixspec.vocabulary import Call, result_node


@dataclass(frozen=True)
class Step:
    """One line of a trace (``formats.trace``): a call and, when known, its expected result text; ``line`` is its line in the file."""

    call: Call
    expected: str | None
    line: int = 0

    def text(self) -> str:
        if self.expected is None:
            return self.call.text()
        return f"{self.call.text()} -> {self.expected}"




POSITIONAL = "n*"
"""The name a naming call carries inside a repeat block: its copy at position P is named ``nP``."""

LARGEST_REPEAT = 1 << 24
"""The largest count of a repeat block (16,777,216: a 24-bit counter's overflow, and more than any 16-bit one)."""

LARGEST_CALLS = 1 << 24
"""The most calls a trace may expand to.  A trace of plain lines is held to ``trace.LARGEST_TRACE`` bytes, some ten
million calls at most; a folded one is held to as many calls, so that no small file asks a replay for more."""

LONGEST_BODY = 16
"""The most calls ``fold`` puts in one block's body (a call and the lockstep's take of its events, a lock and its
unlock, ...): longer bodies are rarely repeated whole, and each length tried costs a pass over the trace."""

_NUMBERED = re.compile(r"n([1-9][0-9]{0,8})\Z")
"""A name a copy may take: ``n`` and a call's position, at most 9 digits (LARGEST_CALLS has 8; a longer number names no
copy, and would pass the interpreter's limit on converting digits, 4,300)."""


def copy_name(index: int) -> str:
    """The name of a copy at 0-based ``index`` among the trace's calls."""
    return f"n{index + 1}"


@dataclass(frozen=True)
class Repeat:
    """``body`` run ``count`` times, from the ``line`` of its ``repeat N {``."""

    count: int
    body: tuple[Step, ...]
    line: int = 0


class StepsOnDemand(Sequence[Step]):
    """Steps made as they are asked for, by index (negative too) or slice: a subclass says how many (``__len__``)
    and makes the one at an index in range (``step_at``)."""

    def step_at(self, index: int) -> Step:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> Step: ...

    @overload
    def __getitem__(self, index: slice) -> list[Step]: ...

    def __getitem__(self, index: int | slice) -> Step | list[Step]:
        length = len(self)
        if isinstance(index, slice):
            return [self.step_at(position) for position in range(*index.indices(length))]
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError(index)
        return self.step_at(index)


class Steps(StepsOnDemand):
    """The steps of a trace with repeat blocks, made as they are asked for (by index, slice or iteration)."""

    def __init__(self, pieces: Sequence[Step | Repeat]) -> None:
        self.pieces: tuple[Step | Repeat, ...] = tuple(pieces)
        self.starts: list[int] = []
        length = 0
        for piece in self.pieces:
            self.starts.append(length)
            length += piece.count * len(piece.body) if isinstance(piece, Repeat) else 1
        self.length = length

    def __len__(self) -> int:
        return self.length

    def step_at(self, index: int) -> Step:
        where = bisect.bisect_right(self.starts, index) - 1
        piece = self.pieces[where]
        if not isinstance(piece, Repeat):
            return piece
        return copy_of(piece.body, (index - self.starts[where]) % len(piece.body), index)

    def __iter__(self) -> Iterator[Step]:
        for start, piece in zip(self.starts, self.pieces):
            if isinstance(piece, Repeat):
                offsets = itertools.chain.from_iterable(itertools.repeat(range(len(piece.body)), piece.count))
                for index, offset in enumerate(offsets, start):
                    yield copy_of(piece.body, offset, index)
            else:
                yield piece

    def folded(self) -> bool:
        """Whether any piece is a repeat block (the trace is then written in format version 2)."""
        return any(isinstance(piece, Repeat) for piece in self.pieces)


def copy_of(body: Sequence[Step], offset: int, index: int) -> Step:
    """The copy of ``body[offset]`` at 0-based ``index`` in the trace: named for its position when it names a node,
    its handle ``n*`` the name of the copy of the latest naming call above it in the body."""
    step = body[offset]
    call = step.call
    if POSITIONAL in call.handles:
        above = latest_named(body, offset)
        call = call.with_handles(lambda handle: copy_name(index - offset + above) if handle == POSITIONAL else handle)
    if call.name == POSITIONAL:
        call = dataclasses.replace(call, name=copy_name(index))
    return step if call is step.call else dataclasses.replace(step, call=call)


def latest_named(body: Sequence[Step], offset: int) -> int:
    """The offset of the latest call above ``offset`` in ``body`` that names a node (``n*``); -1 when none does."""
    return next((above for above in range(offset - 1, -1, -1) if body[above].call.name == POSITIONAL), -1)


class PositionalNames:
    """The names the repeat blocks read so far give their copies, answered by arithmetic, never listed."""

    def __init__(self) -> None:
        self.blocks: list[tuple[int, int, int, frozenset[int]]] = []
        """(first index, body length, count, offsets in the body of the calls named ``n*``), in order."""

    def add(self, start: int, body: Sequence[Step], count: int) -> None:
        named = frozenset(offset for offset, step in enumerate(body) if step.call.name == POSITIONAL)
        if named:
            self.blocks.append((start, len(body), count, named))

    def gives(self, name: str) -> bool:
        """Whether a copy in a block read so far is named ``name``."""
        index = numbered(name)
        if index is None or not self.blocks:
            return False
        where = bisect.bisect_right(self.blocks, (index, LARGEST_CALLS + 1)) - 1
        if where < 0:
            return False
        start, length, count, named = self.blocks[where]
        return index < start + length * count and (index - start) % length in named


def numbered(name: str) -> int | None:
    """The 0-based index whose copy a block would name ``name`` (``n5``: 4), or None for a name no copy takes."""
    found = _NUMBERED.match(name)
    return int(found.group(1)) - 1 if found is not None else None


def clash(start: int, body: Sequence[Step], count: int, taken: set[int]) -> int | None:
    """An index of ``taken`` (the indices of names lines gave outright, ``numbered``) whose name the block at
    ``start`` gives a copy too; costs the fewer of ``taken`` and the block's copies."""
    named = {offset for offset, step in enumerate(body) if step.call.name == POSITIONAL}
    span = len(body) * count
    if not named:
        return None
    if len(taken) <= span:
        return next((index for index in taken if start <= index < start + span and (index - start) % len(body) in named), None)
    return next((index for index in range(start, start + span) if (index - start) % len(body) in named and index in taken), None)


def fold(steps: Sequence[Step]) -> Steps:
    """``steps`` with every run of two or more identical blocks (of up to LONGEST_BODY steps) written as a repeat.

    Steps are identical when their texts are, a naming call's own name aside
    when it is the name of its position (``copy_name``): such a call is
    written ``n*``.  A block is folded where it saves lines (a repeat costs two
    of its own); runs are taken greedily from the start, the body that saves
    most first, the shortest among equals.  Linear in the number of steps for
    each body length tried.
    """
    absolute, relative, back = _keys(steps)
    pieces: list[Step | Repeat] = []
    index = 0
    total = len(steps)
    while index < total:
        best_saved, best_length, best_count = 0, 0, 0
        keys: list[list[int]] = []
        for length in range(1, LONGEST_BODY + 1):
            if index + 2 * length > total:
                break
            # A handle of the latest naming call inside the body is written n* (each copy names its own); one of a
            # call above the body is written as it is (every copy names that one).  Which of the two an offset
            # compares by depends on the offset alone, so each length adds one: made afresh for every length, they
            # took 4.5 s of the 6 s that writing an uncut history of 80,000 steps took (py-spy, r07's scale stage).
            last = length - 1
            keys.append(relative if 0 < back[index + last] <= last else absolute)
            if keys[0][index + length] != keys[0][index]:
                continue  # its first step does not come again right after the body: no run of it here
            count = 1
            while index + (count + 1) * length <= total and all(
                keys[offset][index + count * length + offset] == keys[offset][index + offset] for offset in range(length)
            ):
                count += 1
            saved = length * (count - 1) - 2
            if saved > best_saved:
                best_saved, best_length, best_count = saved, length, count
        if best_count < 2:
            pieces.append(steps[index])
            index += 1
            continue
        best_count = min(best_count, LARGEST_REPEAT)
        template = tuple(
            _template(steps[index + offset], index + offset, back[index + offset] if back[index + offset] <= offset else 0)
            for offset in range(best_length)
        )
        pieces.append(Repeat(best_count, template))
        index += best_length * best_count
    return Steps(pieces)


def _template(step: Step, index: int, back: int) -> Step:
    """``step`` as a block's body writes it: its own name and its handle of the latest naming call ``n*``."""
    call = step.call
    if back:
        own = copy_name(index - back)
        call = call.with_handles(lambda handle: POSITIONAL if handle == own else handle)
    if call.name and call.name == copy_name(index):
        call = dataclasses.replace(call, name=POSITIONAL)
    return dataclasses.replace(step, call=call)


def _keys(steps: Sequence[Step]) -> tuple[list[int], list[int], list[int]]:
    """Two numbers per step, equal for steps a block may repeat (``fold``): the first with its handles as written,
    the second with its handle of the latest naming call written ``n*``; and how far back that call is (0 when the
    step names no handle of it).

    A step named otherwise than by its position is a number of its own: its
    copies could not all carry its name.
    """
    numbers: dict[tuple[str, str | None, int], int] = {}
    absolute: list[int] = []
    relative: list[int] = []
    backs: list[int] = []
    unique = itertools.count(-1, -1)
    latest = -1
    for index, step in enumerate(steps):
        back = index - latest if latest >= 0 and copy_name(latest) in step.call.handles else 0
        backs.append(back)
        if step.call.name and step.call.name != copy_name(index):
            absolute.append(next(unique))
            relative.append(next(unique))
        else:
            plain = _template(step, index, 0).call.text()
            absolute.append(numbers.setdefault((plain, step.expected, 0), len(numbers)))
            own = _template(step, index, back).call.text()
            relative.append(numbers.setdefault((own, step.expected, back), len(numbers)) if back else absolute[-1])
        if step.call.name:
            latest = index
    return absolute, relative, backs


def named_by_position(steps: Sequence[Step]) -> tuple[list[Step], dict[str, str]]:
    """``steps`` with every naming call renamed ``copy_name`` of its position, and every handle and result that
    names its node renamed alike (the same calls, written so that ``fold`` may fold runs of them); and the names
    given, old to new."""
    renamed: dict[str, str] = {}
    written: list[Step] = []
    for index, step in enumerate(steps):
        call = step.call.with_handles(lambda handle: renamed.get(handle, handle))
        expected = None if step.expected is None else renamed_result(call, step.expected, renamed)
        if call.name:
            renamed[call.name] = copy_name(index)
            call = dataclasses.replace(call, name=copy_name(index))
        written.append(dataclasses.replace(step, call=call, expected=expected))
    return written, renamed


def renamed_result(call: Call, result: str, renamed: dict[str, str]) -> str:
    """``result`` of ``call`` with the node it names renamed by ``renamed`` (old names to new)."""
    parts = result_node(call.kind, result)
    if parts is None:
        return result
    before, node, after = parts
    return before + renamed.get(node, node) + after
