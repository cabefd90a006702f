"""The ``prefixspec`` command line: check a cache against the spec, replay a trace.

Exit status: 0 when everything holds, 1 when the cache disagrees with the spec
(a minimised counterexample trace is written), 2 for bad usage (an unknown
option, a target that cannot be loaded, a trace that cannot be read).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from spec.checking import run_check
from spec.profiles import PROFILES
from spec.shrink import first_disagreement
from spec.targets import DEFAULT_TARGET, TargetError, UsageError, load_factory
from spec.trace import TraceFormatError, read_trace, replay
from spec.model import SpecCache


CommandAdder = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]
COMMANDS: list[CommandAdder] = []
"""The commands beyond check and replay: each a function that adds its subparser with set_defaults(run=...)."""


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prefixspec", description="Check a prefix cache against its executable specification.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = commands.add_parser("check", help="run the golden trace and both state machines against a cache")
    check.add_argument("target", nargs="?", default=DEFAULT_TARGET, help=f"module:factory, factory(block_size) -> cache (default {DEFAULT_TARGET})")
    check.add_argument("--profile", choices=PROFILES, default="ci", help="Hypothesis profile: ci (reproducible, minutes) or deep (long); default ci")
    check.add_argument("--steps", type=positive_int, default=3000, help="engine steps each engine example must reach (default 3000)")
    check.add_argument("--seed", type=int, default=None, help="Hypothesis seed (default: derandomized in ci, random in deep)")
    check.add_argument("--json", metavar="FILE", default=None, help="also write the report as JSON to FILE")
    check.add_argument("--out", metavar="DIR", default="counterexamples", help="where counterexample traces go (default counterexamples/)")
    check.add_argument("--quiet", action="store_true", help="no progress lines")
    check.set_defaults(run=command_check)

    replay_command = commands.add_parser("replay", help="replay a trace on the spec, or on a target beside the spec")
    replay_command.add_argument("file", help="a trace file (fixtures/README.md describes the format)")
    replay_command.add_argument("--target", default=None, help="module:factory to replay beside the spec")
    replay_command.set_defaults(run=command_replay)

    # Each further command lives in its own module, which adds its parser and sets run=.
    for add_command in COMMANDS:
        add_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    try:
        run: Callable[[argparse.Namespace], int] = arguments.run
        return run(arguments)
    except (TargetError, UsageError, TraceFormatError, OSError) as error:
        print(f"prefixspec: {error}", file=sys.stderr)
        return 2


def command_check(arguments: argparse.Namespace) -> int:
    factory = load_factory(arguments.target)
    report = run_check(
        factory,
        target_name=arguments.target,
        profile=arguments.profile,
        min_engine_steps=arguments.steps,
        seed=arguments.seed,
        out_dir=Path(arguments.out),
        progress=None if arguments.quiet else sys.stderr,
    )
    print(report.summary())
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(report.as_json(), indent=2) + "\n", encoding="utf-8")
    return 0 if report.passed else 1


def command_replay(arguments: argparse.Namespace) -> int:
    trace = read_trace(arguments.file)
    expected_divergence = replay(trace, SpecCache(trace.block_size))
    if arguments.target is None:
        if expected_divergence is not None:
            print(f"{arguments.file}: the spec does not give the recorded results\n{expected_divergence.describe()}")
            return 1
        print(f"{arguments.file}: {len(trace.steps)} calls replayed on the spec, every result as recorded")
        return 0
    factory = load_factory(arguments.target)
    disagreement = first_disagreement(trace.block_size, trace.calls(), factory)
    if disagreement is not None:
        step = disagreement.trace.steps[-1]
        line = trace.steps[len(disagreement.trace.steps) - 1].line
        print(
            f"{arguments.file}: {arguments.target} disagrees with the spec at line {line}, call {len(disagreement.trace.steps)}: "
            f"{step.call.text()}\n  on its {disagreement.kind}\n  spec:  {disagreement.expected}\n  cache: {disagreement.got}"
        )
        return 1
    divergence = replay(trace, factory(trace.block_size))
    if divergence is not None:
        print(f"{arguments.file}: {arguments.target} agrees with the spec, but not with the recorded results\n{divergence.describe()}")
        return 1
    print(f"{arguments.file}: {len(trace.steps)} calls replayed on {arguments.target} beside the spec: every result and snapshot agrees")
    return 0


if __name__ == "__main__":
    sys.exit(main())
