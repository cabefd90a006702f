"""The checker's own errors: bad usage, reported in one line with exit status 2."""

from __future__ import annotations


class UsageError(Exception):
    """Bad usage of the command line: reported in one line, exit status 2."""


class TargetError(UsageError):
    """A target that cannot be loaded or does not satisfy the interface; the message is one line."""
