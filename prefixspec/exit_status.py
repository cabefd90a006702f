"""The exit statuses of every ``prefixspec`` command, named once (README's table says the same in prose).

A CI gate reads them: ``PASSED`` is printed as ``result: PASSED`` (or a
command's own words that everything holds) and means nothing else.
"""

from __future__ import annotations

import signal
from enum import IntEnum


class ExitStatus(IntEnum):
    PASSED = 0
    """Everything holds."""
    FAILED = 1
    """The cache disagrees with the spec, or failed as a program mid-run (a one-paragraph report names the call)."""
    USAGE = 2
    """Bad usage, in one line: an option, a target that cannot be loaded, a file that cannot be read."""
    INTERRUPTED = 128 + signal.SIGINT
    """The user pressed Ctrl-C: the run stops, what finished is printed."""
    TERMINATED = 128 + signal.SIGTERM
    """The command got SIGTERM: as for Ctrl-C."""


def stopped_by(signum: int) -> ExitStatus:
    """The status of a command stopped by ``signum`` (SIGTERM: TERMINATED, anything else: INTERRUPTED)."""
    return ExitStatus.TERMINATED if signum == signal.SIGTERM else ExitStatus.INTERRUPTED


def stop_words(signum: int) -> str:
    """How a stop by ``signum`` is said in every command's last line: ``interrupted (Ctrl-C)``, ``terminated (SIGTERM)``."""
    return "interrupted (Ctrl-C)" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
