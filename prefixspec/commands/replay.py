"""``prefixspec replay FILE [--target T | --exec CMD]``: a trace on the spec, or on a target beside the spec."""

from __future__ import annotations

import argparse
import functools

from spec.api import CacheFactory
from spec.model import SpecCache
from prefixspec.commands.options import add_exec_options, add_rules_option, exec_engine, exec_name
from prefixspec.exit_status import ExitStatus
from prefixspec.targets.beacon import mark_stage
from prefixspec.formats.trace import Trace, read_trace, replay
from prefixspec.compare.shrink import first_disagreement
from prefixspec.targets.named import load_target
from prefixspec.vocabulary import counted


def add_replay_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay_command = commands.add_parser("replay", help="replay a trace on the spec, or on a target beside the spec")
    replay_command.add_argument("file", help="a trace file (fixtures/README.md describes the format)")
    replay_command.add_argument("--target", default=None, help="module:factory to replay beside the spec")
    add_exec_options(replay_command, "instead of --target")
    add_rules_option(replay_command, default=None)
    replay_command.set_defaults(run=command_replay, supervised=True)


def command_replay(arguments: argparse.Namespace) -> int:
    trace = read_trace(arguments.file)
    if arguments.rules is not None:
        trace.rules = arguments.rules
    if arguments.target is None and arguments.exec is None:
        expected_divergence = replay(trace, SpecCache(trace.block_size, trace.rules), functools.partial(SpecCache, rules=trace.rules))
        if expected_divergence is not None:
            print(f"{arguments.file}: the spec does not give the recorded results\n{expected_divergence.describe()}")
            return ExitStatus.FAILED
        print(f"{arguments.file}: {counted(len(trace.steps), 'call')} replayed on the spec, every result as recorded")
        return ExitStatus.PASSED
    engine = exec_engine(arguments, "target")
    if engine is None:
        factory = load_target(arguments.target, arguments.timeout, trace.rules)  # a CATALOGUE#ID made under the replay's rules
        mark_stage(f"the replay of {arguments.file}")
        return replay_beside_spec(trace, arguments.file, factory, arguments.target)
    mark_stage(f"the replay of {arguments.file}")
    with engine:
        return replay_beside_spec(trace, arguments.file, engine, exec_name(arguments))


def replay_beside_spec(trace: Trace, file: str, factory: CacheFactory, target: str) -> int:
    disagreement = first_disagreement(trace.block_size, trace.calls(), factory, trace.rules)
    if disagreement is not None:
        step = disagreement.trace.steps[-1]
        # The lockstep takes events after the calls that publish them (R13): count the file's own calls, not its takes.
        position = max(len(disagreement.trace.driven_steps()), 1)
        driven = trace.driven_steps()
        line = driven[min(position, len(driven)) - 1].line if driven else 0
        print(
            f"{file}: {target} disagrees with the spec at line {line}, call {position}: "
            f"{step.call.text()}\n  on its {disagreement.kind}\n  spec:  {disagreement.expected}\n  cache: {disagreement.got}"
        )
        return ExitStatus.FAILED
    divergence = replay(trace, factory(trace.block_size), factory)
    if divergence is not None:
        print(f"{file}: {target} agrees with the spec, but not with the recorded results\n{divergence.describe()}")
        return ExitStatus.FAILED
    print(f"{file}: {counted(len(trace.steps), 'call')} replayed on {target} beside the spec: every result and snapshot agrees")
    return ExitStatus.PASSED
