"""The ``prefixspec`` command line: check a cache against the spec, replay a trace.

Exit status: 0 when everything holds, 1 when the cache disagrees with the spec
(a minimised counterexample trace is written) or an engine driven with
``--exec`` broke the line protocol mid-run, 2 for bad usage (an unknown
option, a target that cannot be loaded, a trace that cannot be read, an
engine that does not start or fails the handshake).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from spec.api import TargetFailure
from spec.bench_command import add_bench_command
from spec.checking import run_check
from spec.hunt import add_hunt_command
from spec.pipe import DEFAULT_TIMEOUT, EngineProtocolError, PipeEngine
from spec.profiles import PROFILES
from spec.shrink import first_disagreement
from spec.targets import DEFAULT_TARGET, CacheFactory, TargetError, UsageError, load_factory
from spec.trace import Trace, TraceFormatError, read_trace, replay
from spec.verify import add_verify_command
from spec.model import SpecCache


CommandAdder = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]
COMMANDS: list[CommandAdder] = [add_hunt_command, add_verify_command, add_bench_command]
"""The commands beyond check and replay: each a function that adds its subparser with set_defaults(run=...)."""


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} is not above 0")
    return value


def add_exec_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--exec", metavar="CMD", default=None, help=f"{what}: an engine in any language, started as CMD (by /bin/sh) and driven over the line protocol of docs/protocol.md")
    parser.add_argument("--timeout", metavar="SECONDS", type=positive_seconds, default=DEFAULT_TIMEOUT, help=f"with --exec: seconds the engine may take to answer one call (default {DEFAULT_TIMEOUT:g})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prefixspec", description="Check a prefix cache against its executable specification.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = commands.add_parser("check", help="run the golden trace and both state machines against a cache")
    check.add_argument("target", nargs="?", default=None, help=f"module:factory, factory(block_size) -> cache (default {DEFAULT_TARGET})")
    add_exec_options(check, "instead of a TARGET")
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
    add_exec_options(replay_command, "instead of --target")
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
    except TargetFailure as failure:  # an engine that broke the protocol outside a check's stages
        print(failure, file=sys.stderr)
        return 2 if isinstance(failure, EngineProtocolError) and failure.before_handshake else 1


def exec_engine(arguments: argparse.Namespace, other: str) -> PipeEngine | None:
    """The engine of ``--exec``, started and shaken hands with, or None; a usage error beside ``other``."""
    if arguments.exec is None:
        return None
    if getattr(arguments, other) is not None:
        raise UsageError(f"give either {'a TARGET' if other == 'target' else '--target'} or --exec CMD, not both")
    engine = PipeEngine(arguments.exec, arguments.timeout)
    try:
        engine.probe()
    except EngineProtocolError as failure:
        engine.close()
        failure.before_handshake = True  # an engine that cannot make one cache cannot be checked: usage, exit 2
        raise
    return engine


def command_check(arguments: argparse.Namespace) -> int:
    engine = exec_engine(arguments, "target")
    if engine is None:
        return run_and_report(load_factory(arguments.target or DEFAULT_TARGET), arguments.target or DEFAULT_TARGET, "", arguments)
    with engine:
        named = f"--exec {shlex.quote(arguments.exec)}"
        timeout = "" if arguments.timeout == DEFAULT_TIMEOUT else f" --timeout {arguments.timeout:g}"
        return run_and_report(engine, named, named + timeout, arguments)


def run_and_report(factory: CacheFactory, target_name: str, replay_target: str, arguments: argparse.Namespace) -> int:
    report = run_check(
        factory,
        target_name=target_name,
        profile=arguments.profile,
        min_engine_steps=arguments.steps,
        seed=arguments.seed,
        out_dir=Path(arguments.out),
        progress=None if arguments.quiet else sys.stderr,
    )
    report.replay_target = replay_target
    print(report.summary())
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(report.as_json(), indent=2) + "\n", encoding="utf-8")
    return 0 if report.passed else 1


def command_replay(arguments: argparse.Namespace) -> int:
    trace = read_trace(arguments.file)
    expected_divergence = replay(trace, SpecCache(trace.block_size))
    if arguments.target is None and arguments.exec is None:
        if expected_divergence is not None:
            print(f"{arguments.file}: the spec does not give the recorded results\n{expected_divergence.describe()}")
            return 1
        print(f"{arguments.file}: {len(trace.steps)} calls replayed on the spec, every result as recorded")
        return 0
    engine = exec_engine(arguments, "target")
    if engine is None:
        return replay_beside_spec(trace, arguments.file, load_factory(arguments.target), arguments.target)
    with engine:
        return replay_beside_spec(trace, arguments.file, engine, f"--exec {shlex.quote(arguments.exec)}")


def replay_beside_spec(trace: Trace, file: str, factory: CacheFactory, target: str) -> int:
    disagreement = first_disagreement(trace.block_size, trace.calls(), factory)
    if disagreement is not None:
        step = disagreement.trace.steps[-1]
        line = trace.steps[len(disagreement.trace.steps) - 1].line
        print(
            f"{file}: {target} disagrees with the spec at line {line}, call {len(disagreement.trace.steps)}: "
            f"{step.call.text()}\n  on its {disagreement.kind}\n  spec:  {disagreement.expected}\n  cache: {disagreement.got}"
        )
        return 1
    divergence = replay(trace, factory(trace.block_size))
    if divergence is not None:
        print(f"{file}: {target} agrees with the spec, but not with the recorded results\n{divergence.describe()}")
        return 1
    print(f"{file}: {len(trace.steps)} calls replayed on {target} beside the spec: every result and snapshot agrees")
    return 0


if __name__ == "__main__":
    sys.exit(main())
