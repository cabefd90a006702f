"""Output whose reader has gone: ``prefixspec check | head`` runs on to its verdict and exits with its status.

A Python program whose stdout is a pipe gets BrokenPipeError at its next write once the reader has exited:
the supervisor's write of a report ended in a traceback, and a command's own print in ``prefixspec: Broken
pipe`` and exit 2, whatever the verdict (``verify --shrink | head`` then never cut the trace it had promised to
write).  SIGPIPE stays ignored, as Python leaves it: the checker learns of an engine's end from the broken
pipe to it.  So the console script writes its stdout and stderr through ``QuietWhenClosed`` instead: once a
reader has gone, what is written to it goes to /dev/null, as a shell tool that dies of SIGPIPE writes nothing
more, and the run goes on to its verdict and its exit status.
"""

from __future__ import annotations

import io
import os
import sys
from typing import TextIO


class QuietWhenClosed(io.TextIOWrapper):
    """A text stream over a file descriptor of its own (a copy of the process's) that, once its reader has gone,
    writes to /dev/null: the text it was given then, and all after it."""

    def write(self, text: str) -> int:
        try:
            return super().write(text)
        except BrokenPipeError:
            self.reader_gone()
            return len(text)

    def flush(self) -> None:
        try:
            super().flush()
        except BrokenPipeError:
            self.reader_gone()
            super().flush()  # what was buffered goes to /dev/null now, so that the last flush at exit succeeds

    def reader_gone(self) -> None:
        """From here on the descriptor is /dev/null's: no write fails, none reaches the pipe."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self.fileno())
        finally:
            os.close(devnull)


def quiet_when_closed(stream: TextIO) -> TextIO:
    """``stream`` as a ``QuietWhenClosed`` over a copy of its descriptor, with its encoding and buffering; the
    stream itself where it is no file (None, closed, or a test's capture).  The copy leaves the process's own
    descriptor, and ``sys.__stdout__`` over it, as they were."""
    if type(stream) is not io.TextIOWrapper:
        return stream
    try:
        descriptor = os.dup(stream.fileno())
    except (OSError, ValueError):  # no descriptor behind it, or a closed one
        return stream
    stream.flush()
    raw = io.FileIO(descriptor, "w")
    return QuietWhenClosed(
        io.BufferedWriter(raw),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=stream.line_buffering,
        write_through=stream.write_through,
    )


def quiet_standard_streams() -> None:
    """stdout and stderr each behind a ``QuietWhenClosed``: the console script's, before any command runs."""
    sys.stdout = quiet_when_closed(sys.stdout)
    sys.stderr = quiet_when_closed(sys.stderr)
