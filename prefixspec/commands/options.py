"""Options that several commands share, each checked before any work starts."""

from __future__ import annotations

import argparse
import math
import shlex
from collections.abc import Callable

from spec.api import RULE_PRESETS, CacheFactory, Rules, parse_rules
from prefixspec.errors import UsageError
from prefixspec.targets.loading import DEFAULT_TARGET
from prefixspec.targets.named import load_target
from prefixspec.targets.pipe import DEFAULT_TIMEOUT, EngineProtocolError, PipeEngine

LONGEST_TIMEOUT = 86_400.0
"""A day: the longest per-call timeout accepted (select() cannot wait for ever, nor should a check)."""


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
    if not (value > 0 and math.isfinite(value)) or value > LONGEST_TIMEOUT:
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds above 0 and at most {LONGEST_TIMEOUT:g}")
    return value


def add_exec_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--exec",
        metavar="CMD",
        default=None,
        help=f"{what}: an engine in any language, started as CMD (by /bin/sh) and driven over the line protocol of docs/protocol.md",
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT,
        help=f"with --exec: seconds the engine may take to answer one call (default {DEFAULT_TIMEOUT:g})",
    )


def exec_engine(arguments: argparse.Namespace, other: str) -> PipeEngine | None:
    """The engine of ``--exec``, started and shaken hands with, or None; a usage error beside ``other``."""
    if arguments.exec is None:
        return None
    if getattr(arguments, other) is not None:
        raise UsageError(f"give either {'a TARGET' if other == 'target' else '--target'} or --exec CMD, not both")
    if not arguments.exec.strip():
        raise UsageError("--exec needs a command to start the engine; it was empty")
    engine = PipeEngine(arguments.exec, arguments.timeout)
    try:
        engine.probe()
    except EngineProtocolError as failure:
        engine.close()
        failure.before_handshake = True  # an engine that cannot make one cache cannot be checked: usage, exit 2
        raise
    return engine


def exec_name(arguments: argparse.Namespace) -> str:
    """The ``--exec CMD`` (and ``--timeout``) that name the engine again, for replay lines."""
    named = f"--exec {shlex.quote(arguments.exec)}"
    return named if arguments.timeout == DEFAULT_TIMEOUT else f"{named} --timeout {arguments.timeout:g}"


def rule_set(text: str) -> Rules:
    try:
        return parse_rules(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_rules_option(parser: argparse.ArgumentParser, default: str | None = "strict") -> None:
    presets = ", ".join(RULE_PRESETS)
    parser.add_argument(
        "--rules",
        metavar="RULES",
        type=rule_set,
        default=None if default is None else parse_rules(default),
        help=f"the rule set the spec follows: a preset ({presets}) or use=path|path+split-tail,evict=lru|lfu|fifo|mru|filo"
        + (f" (default {default})" if default else " (default: the trace's own rules line)"),
    )


TargetRun = Callable[[CacheFactory, str, str, argparse.Namespace], int]
"""``run(factory, the target's name, what follows 'prefixspec replay FILE' to name it again, arguments)``."""


def run_on_target(arguments: argparse.Namespace, run: TargetRun) -> int:
    """``run`` on the positional TARGET (default ``impl:RadixCache``) or on the ``--exec`` engine, closed after."""
    engine = exec_engine(arguments, "target")
    if engine is None:
        target = arguments.target or DEFAULT_TARGET
        return run(load_target(target), target, f"--target {target}", arguments)
    with engine:
        named = exec_name(arguments)
        return run(engine, named, named, arguments)
