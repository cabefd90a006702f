"""Where a supervised run is, in memory its supervisor reads: the stage, and the target's call running now.

A ``Beacon`` is an anonymous shared mapping made before the fork
(``supervised``): the child writes, the parent reads it when the child has
ended without a word (to name the call it was in) and while it runs (to stop a
call past ``--timeout`` that the child's own alarm could not interrupt).  A
call costs one ``struct.pack_into`` and one slice assignment: no system call.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass

_HEADER = struct.Struct("<QBHQH")  # the call's serial, its state, the length of its text, its number and where that goes
NO_NUMBER = 0xFFFF
"""Where the number goes in a text that has none."""
_TEXT_AT = _HEADER.size
_TEXT_SIZE = 1024
_STAGE_AT = _TEXT_AT + _TEXT_SIZE
_STAGE_SIZE = 256
_STOP_AT = _STAGE_AT + 2 + _STAGE_SIZE
_SIZE = _STOP_AT + 1

IDLE, TIMED, UNTIMED = 0, 1, 2
"""A beacon's state: no target code running; target code under a time limit; target code without one (an import)."""


@dataclass(frozen=True)
class Reading:
    serial: int
    state: int
    call: str
    """The target's code running (or last run): ``its insert() at call 3 to a cache of block size 2``."""
    stage: str
    """The part of the run: ``""`` while the target is loaded, then a stage's name."""


class Beacon:
    """The child's current call and stage, in shared memory."""

    def __init__(self) -> None:
        self.memory = mmap.mmap(-1, _SIZE)  # anonymous and MAP_SHARED: the parent and the forked child see one page
        self.serial = 0
        self._words: tuple[str, str, str] | None = None
        """The words of the numbered text in the memory (``enter_numbered``), None after another text."""
        self._length = 0
        self._split = NO_NUMBER

    def enter(self, what: str, where: str, timed: bool) -> None:
        """Target code ``what`` starts ``where`` in the run."""
        self.serial += 1
        text = f"{what} {where}".encode("utf-8", "replace")[:_TEXT_SIZE]
        self.memory[_TEXT_AT : _TEXT_AT + len(text)] = text
        self._words = None
        _HEADER.pack_into(self.memory, 0, self.serial, TIMED if timed else UNTIMED, len(text), 0, NO_NUMBER)

    def enter_numbered(self, what: str, head: str, number: int, tail: str, timed: bool) -> None:
        """Target code ``what`` starts at ``head`` ``number`` ``tail`` in the run (``its lock() at call 7 to a cache
        of block size 2``): the words are written when they change, the number as an int that ``read`` writes in.

        A guarded cache's every call writes the same words with the next number: written as ``enter`` writes
        them, a guarded ``cached_blocks()`` took 2.9 us, 2.25 us so (timeit, with the guard's other changes)."""
        self.serial += 1
        words = self._words
        if words is None or words[0] is not what or words[1] is not head or words[2] is not tail:
            first = f"{what} {head}".encode("utf-8", "replace")[:_TEXT_SIZE]
            text = first + tail.encode("utf-8", "replace")[: _TEXT_SIZE - len(first)]
            self.memory[_TEXT_AT : _TEXT_AT + len(text)] = text
            self._words, self._length, self._split = (what, head, tail), len(text), len(first)
        _HEADER.pack_into(self.memory, 0, self.serial, TIMED if timed else UNTIMED, self._length, number, self._split)

    def leave(self) -> None:
        self.memory[8] = IDLE

    def stage(self, name: str) -> None:
        text = name.encode("utf-8", "replace")[:_STAGE_SIZE]
        self.memory[_STAGE_AT + 2 : _STAGE_AT + 2 + len(text)] = text
        struct.pack_into("<H", self.memory, _STAGE_AT, len(text))

    def ask_stop(self) -> None:
        """The supervisor's word, before it sends SIGTERM: this stop is the user's (a signal without it is not)."""
        self.memory[_STOP_AT] = 1

    def stop_asked(self) -> bool:
        return self.memory[_STOP_AT] == 1

    def read(self) -> Reading:
        serial, state, length, number, split = _HEADER.unpack_from(self.memory, 0)
        (stage_length,) = struct.unpack_from("<H", self.memory, _STAGE_AT)
        text = bytes(self.memory[_TEXT_AT : _TEXT_AT + min(length, _TEXT_SIZE)])
        if split != NO_NUMBER:
            text = text[:split] + str(number).encode() + text[split:]
        call = text.decode("utf-8", "replace")
        stage = bytes(self.memory[_STAGE_AT + 2 : _STAGE_AT + 2 + min(stage_length, _STAGE_SIZE)]).decode("utf-8", "replace")
        return Reading(serial, state, call, stage)


class Installed:
    """The beacon of this process when it is a supervised child, else None: read as ``Installed.beacon`` where a
    call of ``current`` would cost a frame (a guard reads it at every run of the target's code)."""

    beacon: Beacon | None = None


def current() -> Beacon | None:
    """The beacon of this process when it is a supervised child, else None."""
    return Installed.beacon


def install(beacon: Beacon | None) -> None:
    Installed.beacon = beacon


def mark_stage(name: str) -> None:
    """Tell the supervisor (if any) that the run is in ``name`` now (the target is loaded)."""
    beacon = Installed.beacon
    if beacon is not None:
        beacon.stage(name)
