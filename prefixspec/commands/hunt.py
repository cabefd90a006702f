"""``prefixspec hunt [CATALOGUE] [--mutant ID]...``: plant each catalogued bug, show what catches it (``prefixspec.running.hunt``)."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from prefixspec.commands.options import MOST_ENGINE_STEPS, add_jobs_option, add_rules_option, add_stage_option, engine_steps, output_folder, positive_seconds
from prefixspec.drive.tallies import ENGINE_STEPS_PER_EXAMPLE
from prefixspec.targets.pipe import DEFAULT_TIMEOUT
from prefixspec.exit_status import ExitStatus, stop_words, stopped_by
from prefixspec.targets.interrupts import stop_signal
from prefixspec.running.hunt import hunt, table
from prefixspec.running.profiles import PROFILE_HELP, PROFILES, load_profile
from prefixspec.running.stages import in_stage_order
from prefixspec.targets.mutants import DEFAULT_CATALOGUE, read_catalogue
from prefixspec.vocabulary import counted


def command_hunt(arguments: argparse.Namespace) -> int:
    output_folder(arguments.out)
    catalogue = read_catalogue(Path(arguments.catalogue))
    started = time.perf_counter()
    try:
        results = hunt(
            catalogue,
            only=arguments.mutant,
            profile=load_profile(arguments.profile),
            out_dir=Path(arguments.out),
            progress=None if arguments.quiet else sys.stderr,
            rules=arguments.rules,
            timeout=arguments.timeout,
            jobs=arguments.jobs,
            steps=arguments.steps,
            stages=tuple(arguments.stages),
        )
    except KeyboardInterrupt as stop:  # the user's Ctrl-C or SIGTERM: the mutants that finished, then the stop
        signum = stop_signal() or signal.SIGINT
        finished = getattr(stop, "prefixspec_hunted", [])
        how = stop_words(signum)
        if finished:
            print(table(finished))
        print(f"result: STOPPED, {how}, after {counted(len(finished), 'finished mutant')}")
        return stopped_by(signum)
    print(table(results))
    if arguments.stages:  # a survivor of some stages has not survived a whole check
        print(f"only the stages {', '.join(in_stage_order(arguments.stages))} ran on each mutant")
    print(f"counterexamples in {arguments.out}/ (prefixspec replay {arguments.out}/ID.trace --target {catalogue.path}#ID); {time.perf_counter() - started:.1f} s")
    return ExitStatus.PASSED if all(result.killed for result in results) else ExitStatus.FAILED


def add_hunt_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("hunt", help="plant each catalogued bug and show what catches it")
    parser.add_argument("catalogue", nargs="?", default=str(DEFAULT_CATALOGUE), help="a mutant catalogue (default: the packaged one, prefixspec/data/impl.toml, the planted bugs of impl)")
    parser.add_argument("--mutant", action="append", default=None, metavar="ID", help="hunt only this mutant (again for more; they run in catalogue order)")
    parser.add_argument("--profile", choices=PROFILES, default=None, help=PROFILE_HELP)
    parser.add_argument(
        "--steps",
        type=engine_steps,
        default=ENGINE_STEPS_PER_EXAMPLE,
        help=f"engine steps each engine example of a mutant's check must reach, as check's (default {ENGINE_STEPS_PER_EXAMPLE}, at most {MOST_ENGINE_STEPS:,}): fewer, a shorter hunt",
    )
    parser.add_argument("--out", default="hunt", metavar="DIR", help="where the counterexample traces go (default hunt/)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument(
        "--timeout", metavar="SECONDS", type=positive_seconds, default=DEFAULT_TIMEOUT, help=f"seconds a mutant may take to answer one call (default {DEFAULT_TIMEOUT:g})"
    )
    add_stage_option(parser)
    add_jobs_option(parser, "the mutants")
    add_rules_option(parser)
    parser.set_defaults(run=command_hunt)
