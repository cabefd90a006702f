"""``prefixspec identify [TARGET | --exec CMD]``: the rule sets a cache conforms to (``prefixspec.running.identify``)."""

from __future__ import annotations

import argparse
import functools
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from spec.api import CacheFactory, Rules
from prefixspec.commands.options import absolute_path, add_exec_options, output_folder, run_on_target
from prefixspec.exit_status import ExitStatus
from prefixspec.running.identify import IDENTIFY_EXAMPLES, IDENTIFY_STEPS, CacheMaker, beside_strict, explain, identify
from prefixspec.running.profiles import load_profile
from prefixspec.running.stages import RunPlan
from prefixspec.targets.loading import DEFAULT_TARGET
from prefixspec.targets.guarded import GuardedFactory
from prefixspec.targets.mutants import takes_rules
from prefixspec.targets.named import load_target
from prefixspec.vocabulary import counted


def add_identify_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("identify", help="which rule sets (presets) a cache conforms to, and why not the others")
    parser.add_argument("target", nargs="?", default=None, help=f"module:factory (default {DEFAULT_TARGET})")
    add_exec_options(parser, "instead of a TARGET")
    parser.add_argument("--out", metavar="DIR", default="counterexamples/identify", help="where counterexamples go, a folder per preset")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--no-explain", action="store_true", help="when no preset conforms, do not search the other rule sets")
    parser.set_defaults(run=command_identify, supervised=True)


def command_identify(arguments: argparse.Namespace) -> int:
    output_folder(arguments.out)
    arguments.out = absolute_path(arguments.out)
    return run_on_target(arguments, identify_and_report)


def identify_and_report(factory: CacheFactory, target_name: str, replay_target: str, arguments: argparse.Namespace) -> int:
    base = replace(RunPlan.of_profile(load_profile("ci")), out_dir=Path(arguments.out), replay_target=replay_target)
    made_under: CacheMaker | None = None
    if arguments.exec is None and "#" in target_name and isinstance(factory, GuardedFactory) and takes_rules(factory.factory):
        # a catalogue's mutant of a factory that takes a rule set: made under each, as check makes it
        made_under = functools.cache(functools.partial(mutant_under, target_name, arguments.timeout))
    progress = None if arguments.quiet else sys.stderr
    verdicts = identify(factory, target_name=target_name, base=base, progress=progress, made_under=made_under)
    print(
        f"prefixspec identify {target_name}: the golden trace, {20 * IDENTIFY_EXAMPLES} call-machine examples and "
        f"{IDENTIFY_EXAMPLES} engine examples of {IDENTIFY_STEPS:,} steps under each preset"
    )
    if made_under is not None:
        print("  a catalogue's mutant, made under each rule set it is held to: it conforms where its planted bug does not show")
    for verdict in verdicts:
        print(verdict.line())
    conforming = [verdict.rules.name for verdict in verdicts if verdict.conforms]
    print(f"conforms to: {', '.join(conforming) if conforming else 'none of the presets'}")
    for verdict in verdicts:
        if verdict.conforms:
            print(f"  {verdict.rules.name}: {verdict.rules.text}")
    aborted = any(stage.aborted for verdict in verdicts for stage in verdict.report.stages)
    differences = [] if aborted else beside_strict(factory, target_name=target_name, base=base, verdicts=verdicts, progress=progress, made_under=made_under)
    if differences:
        print(f"  {conforming[0]} differs from strict in {counted(len(differences), 'field')}, each shown alone:")
        for difference in differences:
            print(difference.line())
    if not conforming and not aborted and not arguments.no_explain:
        explanation = explain(factory, target_name=target_name, base=base, verdicts=verdicts, progress=progress, made_under=made_under)
        for line in explanation.lines():
            print(line)
        if explanation.found is not None:
            conforming = [explanation.found.rules.text]
    if conforming:
        print(f"check it fully with: prefixspec check {replay_target.removeprefix('--target ')} --rules {shlex.quote(conforming[0])}")
    return ExitStatus.PASSED if conforming else ExitStatus.FAILED


def mutant_under(target: str, timeout: float | None, rules: Rules) -> CacheFactory:
    """The ``CATALOGUE#ID`` target's caches made under ``rules`` (``targets.mutants``), loaded as a check loads them."""
    return load_target(target, timeout, rules)
