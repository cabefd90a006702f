"""``prefixspec check [TARGET | --exec CMD]``: every stage of a check against one cache, as a report."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from spec.api import CacheFactory
from prefixspec.commands.options import (
    absolute_path,
    MOST_ENGINE_STEPS,
    add_exec_options,
    add_jobs_option,
    add_rules_option,
    add_stage_option,
    distinct_outputs,
    engine_steps,
    output_file,
    output_folder,
    not_stdout,
    run_on_target,
    write_output,
)
from prefixspec.exit_status import ExitStatus
from prefixspec.running.profiles import PROFILE_HELP, PROFILES, load_profile
from prefixspec.running.stage_workers import run_check_in_workers
from prefixspec.running.stages import RunPlan
from prefixspec.targets.loading import DEFAULT_TARGET
from prefixspec.targets.pipe import PipeEngine
from prefixspec.targets.supervised import announce_stage


def add_check_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = commands.add_parser("check", help="run the golden trace and both state machines against a cache")
    check.add_argument("target", nargs="?", default=None, help=f"module:factory, factory(block_size) -> cache (default {DEFAULT_TARGET})")
    add_exec_options(check, "instead of a TARGET")
    check.add_argument("--profile", choices=PROFILES, default=None, help=PROFILE_HELP)
    check.add_argument(
        "--steps", type=engine_steps, default=3000, help=f"engine steps each engine example must reach (default 3000, at most {MOST_ENGINE_STEPS:,})"
    )
    check.add_argument("--seed", type=int, default=None, help="Hypothesis seed (default: derandomized in ci, random in deep)")
    check.add_argument("--json", metavar="FILE", default=None, help="also write the report as JSON to FILE")
    check.add_argument("--out", metavar="DIR", default="counterexamples", help="where counterexample traces go (default counterexamples/)")
    check.add_argument("--quiet", action="store_true", help="no progress lines")
    add_stage_option(check)
    add_jobs_option(check, "the stages")
    add_rules_option(check)
    check.set_defaults(run=command_check, supervised=True)


def command_check(arguments: argparse.Namespace) -> int:
    # Where the results go is checked before the run, so a long check never ends unable to write them.
    output_folder(arguments.out)
    if arguments.json is not None:
        output_file(arguments.json, "--json")
        not_stdout(arguments.json, "--json")  # the child that writes it has a stdout of its own
        distinct_outputs(arguments.out, arguments.json)
        arguments.json = absolute_path(arguments.json)
    arguments.out = absolute_path(arguments.out)
    return run_on_target(arguments, run_and_report, arguments.rules)


def run_and_report(factory: CacheFactory, target_name: str, replay_target: str, arguments: argparse.Namespace) -> int:
    plan = replace(
        RunPlan.of_profile(load_profile(arguments.profile)),
        min_engine_steps=arguments.steps,
        seed=arguments.seed,
        out_dir=Path(arguments.out),
        progress=None if arguments.quiet else sys.stderr,
        replay_target=replay_target,
        rules=arguments.rules,
        announce=announce_stage,
        jobs=arguments.jobs,
        stages=tuple(arguments.stages),
        call_timeout=arguments.timeout,
        fresh_target=None if arguments.exec is None else lambda: PipeEngine(arguments.exec, arguments.timeout, start_timeout=arguments.start_timeout),
    )
    report = run_check_in_workers(factory, target_name=target_name, plan=plan)  # -j N: side by side, the same report
    print(report.summary())
    if arguments.json and not write_output(arguments.json, json.dumps(report.as_json(), indent=2) + "\n", "--json"):
        return ExitStatus.USAGE  # the report stands on stdout; a gate that wanted the file learns it is missing
    return ExitStatus.PASSED if report.passed else ExitStatus.FAILED
