"""The checker's own errors: bad usage, reported in one line with exit status 2."""

from __future__ import annotations


class UsageError(Exception):
    """Bad usage of the command line: reported in one line, exit status 2."""


class TargetError(UsageError):
    """A target that cannot be loaded or does not satisfy the interface; the message is one line."""


def os_error_words(error: OSError) -> str:
    """``error`` as one line, the way a shell's tools say it: ``/x.trace: No such file or directory`` where it names
    a file, not Python's ``[Errno 2] No such file or directory: '/x.trace'``; its own words otherwise."""
    if error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return error.strerror or str(error) or type(error).__name__
