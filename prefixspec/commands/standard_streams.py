"""Output that cannot be written: the run goes on to its verdict, its files and its exit status all the same.

The console script's stdout may be a pipe whose reader has gone (``prefixspec check | head``), a full disk
(``> /dev/full``) or closed (``>&-``), and its stderr alike.  Python raised at the next write (BrokenPipeError,
OSError) or had no stream at all (None): the supervisor's write of a report ended in a traceback, a command's
own print in ``prefixspec: Broken pipe`` and exit 2 whatever the verdict, and ``verify --shrink | head`` never
wrote the cut it had promised.  SIGPIPE stays ignored, as Python leaves it: the checker learns of an engine's
end from the broken pipe to it.  So the console script writes its stdout and stderr through ``DroppingOutput``
instead: once a stream cannot be written, what is written to it goes to /dev/null, as a shell tool that dies
of SIGPIPE writes nothing more, and the run goes on.  A stdout that fails otherwise than by its reader going
(a full disk) is said on stderr, once: its report is not whole.
"""

from __future__ import annotations

import fcntl
import io
import os
import sys
from typing import TextIO


class DroppingOutput(io.TextIOWrapper):
    """A text stream over a file descriptor of its own (a copy of the process's) that, once a write to it fails,
    writes to /dev/null: the text it was given then, and all after it.  ``name`` is how a failure is said."""

    def __init__(self, descriptor: int, name: str, like: io.TextIOWrapper | None) -> None:
        """Over ``descriptor``, encoded and buffered ``like`` the stream it stands for (None: UTF-8, as Python's)."""
        super().__init__(
            io.BufferedWriter(io.FileIO(descriptor, "w")),
            encoding="utf-8" if like is None else like.encoding,
            errors="backslashreplace" if like is None else like.errors,
            line_buffering=False if like is None else like.line_buffering,
            write_through=False if like is None else like.write_through,
        )
        self.stream_name = name

    def write(self, text: str) -> int:
        try:
            return super().write(text)
        except BlockingIOError:  # a descriptor left non-blocking, momentarily full: no failure, not this class's to drop
            raise
        except OSError as error:
            self.drop(error)
            return len(text)

    def flush(self) -> None:
        try:
            super().flush()
        except BlockingIOError:
            raise
        except OSError as error:
            self.drop(error)
            super().flush()  # what was buffered goes to /dev/null now, so that the last flush at exit succeeds

    def drop(self, error: OSError) -> None:
        """From here on the descriptor is /dev/null's: no write fails, none reaches where it failed."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self.fileno())
        finally:
            os.close(devnull)
        if not isinstance(error, BrokenPipeError) and self.stream_name == "stdout":  # a reader gone asks for no word
            print(f"prefixspec: {self.stream_name}: {error.strerror or error}; the rest of the output is dropped, the run goes on", file=sys.stderr)


def dropping(stream: TextIO | None, name: str, number: int) -> TextIO:
    """``stream`` (the process's descriptor ``number``) as a ``DroppingOutput`` over a copy of its descriptor, with
    its encoding and line buffering; the stream itself where it is no file of the process's (a test's capture).

    A closed descriptor (``>&-``, Python's None) is /dev/null's from here on: left closed, the next pipe the
    checker made took its number, and a supervised child, which points 1 and 2 at its own pipe, wrote its
    report into the other.  The copy is numbered 3 or above, so that no standard number is the stream's to
    close (a child that replaces ``sys.stderr`` lets the old one go, and its descriptor with it)."""
    if stream is None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != number:
            os.dup2(devnull, number)
            os.close(devnull)
        return DroppingOutput(fcntl.fcntl(number, fcntl.F_DUPFD_CLOEXEC, 3), name, None)
    if type(stream) is not io.TextIOWrapper:
        return stream
    try:
        descriptor = fcntl.fcntl(stream.fileno(), fcntl.F_DUPFD_CLOEXEC, 3)
    except (OSError, ValueError):  # no descriptor under the stream after all: what it is given goes nowhere
        descriptor = fcntl.fcntl(os.open(os.devnull, os.O_WRONLY), fcntl.F_DUPFD_CLOEXEC, 3)
    return DroppingOutput(descriptor, name, stream)


def drop_what_cannot_be_written() -> None:
    """stdout and stderr each behind a ``DroppingOutput``: the console script's, before any command runs."""
    sys.stdout = dropping(sys.stdout, "stdout", 1)
    sys.stderr = dropping(sys.stderr, "stderr", 2)
