"""``prefixspec golden [FILE]``: the golden trace the spec generates, written to FILE (``make fixtures``) or printed."""

from __future__ import annotations

import argparse
import sys

from prefixspec.exit_status import ExitStatus
from prefixspec.drive.golden import golden_trace
from prefixspec.running.report import write_whole


def add_golden_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("golden", help="write the golden trace the spec generates (make fixtures)")
    parser.add_argument("file", nargs="?", default=None, help="where to write it (default: print it)")
    parser.set_defaults(run=command_golden)


def command_golden(arguments: argparse.Namespace) -> int:
    text = golden_trace().text()  # generated in full before the file is opened
    if arguments.file is None:
        print(text, end="")
        return ExitStatus.PASSED
    try:
        write_whole(arguments.file, text)  # a write that fails midway (a full disk) leaves the old file, not half a trace
    except OSError as error:
        print(f"prefixspec: {arguments.file}: the golden trace could not be written there ({error.strerror or error}); nothing of it was left", file=sys.stderr)
        return ExitStatus.USAGE
    print(f"wrote {arguments.file}")
    return ExitStatus.PASSED
