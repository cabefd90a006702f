"""``prefixspec golden [FILE]``: the golden trace the spec generates, written to FILE (``make fixtures``) or printed."""

from __future__ import annotations

import argparse
from pathlib import Path

from prefixspec.exit_status import ExitStatus
from prefixspec.drive.golden import golden_trace


def add_golden_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("golden", help="write the golden trace the spec generates (make fixtures)")
    parser.add_argument("file", nargs="?", default=None, help="where to write it (default: print it)")
    parser.set_defaults(run=command_golden)


def command_golden(arguments: argparse.Namespace) -> int:
    text = golden_trace().text()  # generated in full before the file is opened, so a failure leaves it whole
    if arguments.file is None:
        print(text, end="")
        return ExitStatus.PASSED
    Path(arguments.file).write_text(text, encoding="utf-8")
    print(f"wrote {arguments.file}")
    return ExitStatus.PASSED
