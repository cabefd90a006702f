"""The supervised child's side of its message pipe (``prefixspec.targets.supervised``): what it tells its parent.

The report and the child's last word (its exit status) go over a pipe of their own, as length-prefixed pickles of
``(kind, value)``; outside a supervised child ``send`` does nothing, so the same code runs supervised or not.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import sys
import threading

from prefixspec.targets.beacon import mark_stage

LENGTH = struct.Struct("<I")
"""The length of a message, before its pickled ``(kind, value)``."""


class Channel:
    """The child's end of the message pipe."""

    fd = -1


def send(kind: str, value: object) -> None:
    """Tell the supervising parent ``(kind, value)``; nothing outside a supervised child."""
    if Channel.fd < 0:
        return
    payload = pickle.dumps((kind, value))
    data = LENGTH.pack(len(payload)) + payload
    while data:
        written = os.write(Channel.fd, data)
        data = data[written:]


def announce_stage(name: str, stage: object | None) -> None:
    """``RunPlan.announce`` of a supervised run: the beacon names the stage running, the parent hears of each that finished."""
    if stage is None:
        mark_stage(name)
    else:
        send("stage", stage)


def supervised_child() -> bool:
    """True in the child of ``supervise``."""
    return Channel.fd >= 0


class ReportStream(io.TextIOBase):
    """The child's ``sys.stdout``: the checker's report (main thread) goes to the parent; anything else to stderr."""

    def write(self, text: str) -> int:
        if threading.current_thread() is threading.main_thread():
            send("out", text)
        else:  # a target's thread printing between calls: never the report
            sys.stderr.write(text)
        return len(text)

    def writable(self) -> bool:
        return True
