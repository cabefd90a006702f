"""The ``prefixspec`` command line: every command, assembled; exit statuses (``prefixspec.exit_status``) and one-line errors.

``ExitStatus`` names them: PASSED when everything holds, FAILED when the cache
disagrees with the spec or fails as a program mid-run (an engine broke the
line protocol; a Python target hung past ``--timeout``, exited, raised its own
``KeyboardInterrupt`` or ended its process), USAGE for bad usage (an unknown
option, an output path that cannot be written, a target that cannot be
loaded, a trace or catalogue that cannot be read, an engine that does not
start or fails the handshake), INTERRUPTED / TERMINATED for the user's Ctrl-C
or a SIGTERM: the run stops, its engines are stopped, the stages that finished
are printed.  Commands that run a target (``supervised=True``) run in a
supervised child (``supervised_run``).  Every option is checked before any
work starts, and no outcome is a Python traceback.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence

from spec.api import TargetFailure
from prefixspec.commands.bench import add_bench_command
from prefixspec.commands.check import add_check_command
from prefixspec.commands.crosshair import add_crosshair_command
from prefixspec.commands.golden import add_golden_command
from prefixspec.commands.hunt import add_hunt_command
from prefixspec.commands.identify import add_identify_command
from prefixspec.commands.replay import add_replay_command
from prefixspec.commands.verify import add_verify_command
from prefixspec.errors import UsageError, os_error_words
from prefixspec.exit_status import ExitStatus, stop_words, stopped_by
from prefixspec.commands.supervised_run import run_supervised
from prefixspec.targets.supervised import supervised_child
from prefixspec.targets.interrupts import stop_signal, watching_stop_signals
from prefixspec.targets.pipe import EngineProtocolError
from prefixspec.vocabulary import TraceFormatError

CommandAdder = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]
COMMANDS: list[CommandAdder] = [
    add_check_command,
    add_replay_command,
    add_hunt_command,
    add_identify_command,
    add_verify_command,
    add_bench_command,
    add_crosshair_command,
    add_golden_command,
]
"""Every command: each a function that adds its subparser with set_defaults(run=...)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prefixspec", description="Check a prefix cache against its executable specification.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add_command in COMMANDS:
        add_command(commands)
    return parser


def stopped(signum: int) -> int:
    """The one line and the exit status of a command stopped by ``signum``: 130 for Ctrl-C, 143 for SIGTERM (128 + N, as a shell says)."""
    how = stop_words(signum)
    if not supervised_child():  # a supervised child's stop is its supervisor's to print, with what finished
        print(f"prefixspec: {how}; nothing was reported", file=sys.stderr)
    return stopped_by(signum)


def main(argv: Sequence[str] | None = None) -> int:
    with watching_stop_signals():
        try:
            # The parser is built inside the watch: a Ctrl-C while a slow machine is still building it is a stop too.
            arguments = build_parser().parse_args(argv)  # a bad option exits 2 here, with argparse's usage lines
        except KeyboardInterrupt:
            return stopped(stop_signal() or signal.SIGINT)
        if getattr(arguments, "supervised", False) and not supervised_child():
            return run_supervised(arguments, run_command)
        return run_command(arguments)


def run_command(arguments: argparse.Namespace) -> int:
    """The command ``arguments`` name, every outcome an exit status (``ExitStatus``) and at most a paragraph."""
    try:
        run: Callable[[argparse.Namespace], int] = arguments.run
        return run(arguments)
    except (UsageError, TraceFormatError, OSError) as error:
        print(f"prefixspec: {os_error_words(error) if isinstance(error, OSError) else error}", file=sys.stderr)
        return ExitStatus.USAGE
    except TargetFailure as failure:  # a target that failed as a program outside a check's stages (replay, verify)
        if isinstance(failure, EngineProtocolError) and failure.before_handshake:
            print(failure, file=sys.stderr)  # an engine that never started: a usage error, as one that cannot be loaded
            return ExitStatus.USAGE
        # A report, as a disagreement's and as the supervisor's of a target that ended its process: on stdout.
        print(f"{failure}\nresult: FAILED")
        return ExitStatus.FAILED
    except KeyboardInterrupt:  # the user's Ctrl-C or a SIGTERM (a target's own is a TargetFailure); engines stopped on the way out
        return stopped(stop_signal() or signal.SIGINT)
    except MemoryError:  # the checker's own work past the process's memory limit (a target's is reported with its call, by the guard)
        print(f"prefixspec: the checker ran out of memory during {arguments.command} (a memory limit: ulimit -v, a cgroup); nothing was reported", file=sys.stderr)
        return ExitStatus.FAILED
