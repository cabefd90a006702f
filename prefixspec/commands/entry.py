"""The ``prefixspec`` console script and ``python -m prefixspec``: ``commands.main.main``, loaded here.

Loading the commands takes a third of a second (Hypothesis and every command's
modules), longer on a loaded machine, and Python's own handler of Ctrl-C is in
place until ``main`` installs the checker's: a Ctrl-C while they load is a stop
like any other (one line, 130), not a traceback.  So this module imports
nothing heavy before it.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

from prefixspec.commands.standard_streams import drop_what_cannot_be_written
from prefixspec.exit_status import ExitStatus, stop_words


def main(argv: Sequence[str] | None = None) -> int:
    drop_what_cannot_be_written()  # `prefixspec check | head`, `> /dev/full`, `>&-`: the run goes on to its verdict
    try:
        from prefixspec.commands.main import main as run_command_line

        return run_command_line(argv)
    except KeyboardInterrupt:  # Ctrl-C before ``main`` watches for it: while the commands load, or between
        print(f"prefixspec: {stop_words(signal.SIGINT)}; nothing was reported", file=sys.stderr)
        return ExitStatus.INTERRUPTED
