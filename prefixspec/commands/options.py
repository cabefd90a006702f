"""Options that several commands share, each checked before any work starts."""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from spec.api import RULE_FIELDS, RULE_PRESETS, CacheFactory, Rules, parse_rules
from prefixspec.errors import UsageError
from prefixspec.running.report import write_whole
from prefixspec.running.stages import REACH_STAGES, STAGES
from prefixspec.targets.beacon import mark_stage
from prefixspec.targets.loading import DEFAULT_TARGET
from prefixspec.targets.named import load_target
from prefixspec.targets.pipe import DEFAULT_START_TIMEOUT, DEFAULT_TIMEOUT, EngineProtocolError, PipeEngine, exec_option

LONGEST_TIMEOUT = 86_400.0
"""A day: the longest per-call timeout accepted (select() cannot wait for ever, nor should a check)."""

MOST_ENGINE_STEPS = 1_000_000
"""The most ``--steps`` accepted: at about 2,000 engine steps a second, some 8 minutes an engine example."""


def positive_int(text: str, most: int | None = None) -> int:
    """``text`` as a whole number of at least 1 (and at most ``most``), else argparse's one-line error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    if most is not None and value > most:
        raise argparse.ArgumentTypeError(f"{value} is more than the most accepted, {most:,}")
    return value


def engine_steps(text: str) -> int:
    """``--steps``: from 1 to MOST_ENGINE_STEPS engine steps an example."""
    return positive_int(text, MOST_ENGINE_STEPS)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)) or value > LONGEST_TIMEOUT:
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds above 0 and at most {LONGEST_TIMEOUT:g}")
    return value


def _dangling(path: Path) -> str:
    """Where the symbolic link ``path`` points, when it points nowhere; "" otherwise."""
    if path.is_symlink() and not path.exists():
        return os.readlink(path)
    return ""


def _writable_folder(folder: Path) -> str:
    """Why a file cannot be made in the existing ``folder`` ("" when one can): tried, not read from its mode bits.

    ``os.access`` says yes to root everywhere, and to ``/proc`` or a read-only
    mount; making (and removing) a file is the one answer that holds.
    """
    try:
        descriptor, probe = tempfile.mkstemp(prefix=".prefixspec-probe-", dir=folder)
    except OSError as error:
        return error.strerror or type(error).__name__
    os.close(descriptor)
    os.unlink(probe)
    return ""


def output_folder(path: str, option: str = "--out") -> Path:
    """The folder ``option`` names, checked before any work: UsageError when it is a file, a dangling link, or cannot be made there.

    The folder is not made yet: a run that writes nothing leaves none behind.
    Callers keep it as an absolute path (``absolute_path``): a target that
    changes its working directory does not move it.
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option} {path}: it is a file, not a folder for the counterexamples")
    existing = folder
    while not existing.exists() and existing != existing.parent:
        pointed = _dangling(existing)
        if pointed:
            raise UsageError(f"{option} {path}: {existing} is a symbolic link to {pointed}, which does not exist")
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option} {path}: {existing} is a file, so the folder cannot be made")
    why = _writable_folder(existing)
    if why:
        raise UsageError(f"{option} {path}: {existing} is not writable (making a file there failed: {why})")
    return folder


def absolute_path(path: str) -> str:
    """``path`` from the working directory of now, for good: a target's ``chdir`` later does not move it."""
    return str(Path(path).absolute())


def output_file(path: str, option: str) -> Path:
    """The file ``option`` names, checked before any work: UsageError when it is a folder, or cannot be written.

    An existing regular file is opened for appending (which changes nothing);
    a new one is tried by making a file beside it; a device (``/dev/null``)
    is taken as it is, and a write that fails at the end says so then
    (``write_output``).
    """
    file = Path(path)
    if file.is_dir():
        raise UsageError(f"{option} {path}: it is a folder, not a file")
    pointed = _dangling(file)
    target = Path(os.path.realpath(file)) if pointed else file
    folder = target.parent
    if not folder.is_dir():
        where = f"it is a symbolic link to {pointed}, and " if pointed else ""
        raise UsageError(f"{option} {path}: {where}there is no folder {folder} to write it in")
    if file.is_file():
        try:
            with open(file, "a", encoding="utf-8"):
                pass
        except OSError as error:
            raise UsageError(f"{option} {path}: it cannot be written ({error.strerror})") from None
    elif not file.exists():
        why = _writable_folder(folder)
        if why:
            raise UsageError(f"{option} {path}: it cannot be written in {folder} (making a file there failed: {why})")
    return file


def not_stdout(path: str, option: str) -> None:
    """UsageError when ``path`` names this process's descriptor 1 (``/dev/stdout``, ``/dev/fd/1``,
    ``/proc/self/fd/1``, or a link to one), for a file a supervised run's child writes: the child's descriptor 1
    is its own pipe, whose lines reach the terminal on stderr, and the report is printed on stdout besides."""
    if descriptor_named(Path(path)) == 1:
        raise UsageError(f"{option} {path}: it is the stdout the report is printed on; give {option} a file of its own")


_DESCRIPTOR_PATH = re.compile(r"/(?:proc/self|dev)/fd/([0-9]+)")


def descriptor_named(file: Path) -> int | None:
    """The descriptor ``file`` names through ``/proc/self/fd/N`` or ``/dev/fd/N``, its links followed; None for a
    path that names a file for every process alike."""
    path = os.path.abspath(file)
    for _ in range(40):  # the kernel's own limit of links followed
        named = _DESCRIPTOR_PATH.fullmatch(path)
        if named is not None:
            return int(named[1])
        try:
            target = os.readlink(path)
        except OSError:  # no link: a file, a folder, or nothing
            return None
        path = os.path.normpath(os.path.join(os.path.dirname(path), target))
    return None


def distinct_outputs(folder: str, file: str | None, folder_option: str = "--out", file_option: str = "--json") -> None:
    """UsageError when the file ``file_option`` names is the folder ``folder_option`` names: one would overwrite the other."""
    if file is not None and os.path.realpath(folder) == os.path.realpath(file):
        raise UsageError(f"{file_option} {file} and {folder_option} {folder} name one place: the report would overwrite the folder, or fail to")


def write_output(path: str, text: str, option: str) -> bool:
    """Write ``text`` to the file ``option`` names; False, with a one-line error, when it fails (``/dev/full``): the report on stdout stands."""
    try:
        write_whole(path, text)
    except OSError as error:
        print(f"prefixspec: {option} {path}: the report could not be written there ({error.strerror}); it is printed on stdout alone", file=sys.stderr)
        return False
    return True


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
        help=f"seconds the cache may take to answer one call, an engine's (--exec) or a Python target's (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--start-timeout",
        metavar="SECONDS",
        type=positive_seconds,
        default=DEFAULT_START_TIMEOUT,
        help=f"seconds an engine (--exec) may take to start and answer the handshake, apart from --timeout (default {DEFAULT_START_TIMEOUT:g})",
    )


def exec_engine(arguments: argparse.Namespace, other: str) -> PipeEngine | None:
    """The engine of ``--exec``, started and shaken hands with, or None; a usage error beside ``other``."""
    if arguments.exec is None:
        return None
    if getattr(arguments, other) is not None:
        raise UsageError(f"give either {'a TARGET' if other == 'target' else '--target'} or --exec CMD, not both")
    if not arguments.exec.strip():
        raise UsageError("--exec needs a command to start the engine; it was empty")
    engine = PipeEngine(arguments.exec, arguments.timeout, start_timeout=arguments.start_timeout)
    try:
        engine.probe()
    except EngineProtocolError as failure:
        engine.close()
        failure.before_handshake = True  # an engine that cannot make one cache cannot be checked: usage, exit 2
        raise
    return engine


TargetRun = Callable[[CacheFactory, str, str, argparse.Namespace], int]
"""A command's work on one target: (factory, the target's name, how replay names it, the options) -> exit status."""


def run_on_target(arguments: argparse.Namespace, run: TargetRun, rules: Rules | None = None) -> int:
    """``run`` on the command's TARGET (default impl:RadixCache) or its ``--exec`` engine, each call within ``--timeout``;
    a ``CATALOGUE#ID`` target's caches made under ``rules``, the run's rule set (``targets.mutants``)."""
    engine = exec_engine(arguments, "target")
    if engine is None:
        # None is the default target; "" is no target at all, which the loading refuses.
        target = DEFAULT_TARGET if arguments.target is None else arguments.target
        factory = load_target(target, arguments.timeout, rules)
        mark_stage("the run")  # loaded: from here on a target that ends its process fails the run (exit 1), not its loading
        return run(factory, target, f"--target {shlex.quote(target)}", arguments)
    mark_stage("the run")
    with engine:
        named = exec_name(arguments)
        return run(engine, named, named, arguments)


def exec_name(arguments: argparse.Namespace) -> str:
    """The ``--exec CMD`` (and ``--timeout``, ``--start-timeout``) that name the engine again, for replay lines."""
    return exec_option(arguments.exec, arguments.timeout, arguments.start_timeout)


def rule_set(text: str) -> Rules:
    try:
        return parse_rules(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_rules_option(parser: argparse.ArgumentParser, default: str | None = "strict") -> None:
    presets = ", ".join(RULE_PRESETS)
    fields = ",".join(f"{rule_field.key}={'|'.join(rule_field.variants)}" for rule_field in RULE_FIELDS)
    parser.add_argument(
        "--rules",
        metavar="RULES",
        type=rule_set,
        default=None if default is None else parse_rules(default),
        help=f"the rule set the spec follows: a preset ({presets}) or {fields} (any of them; slru:N for slru's threshold)"
        + (f" (default {default})" if default else " (default: the trace's own rules line)"),
    )


def stage_name(text: str) -> str:
    """A stage of ``check`` by its name (``call machine``), any case, a hyphen or an underscore for its space."""
    name = " ".join(text.replace("-", " ").replace("_", " ").lower().split())
    if name not in STAGES:
        raise argparse.ArgumentTypeError(f"no stage is called {text!r}: the stages are {', '.join(STAGES)} (call-machine for call machine)")
    return name


def add_stage_option(parser: argparse.ArgumentParser) -> None:
    """``--stage NAME``, again for more: run only those stages, in their usual order."""
    parser.add_argument(
        "--stage",
        metavar="NAME",
        dest="stages",
        type=stage_name,
        action="append",
        default=[],
        help=f"run only this stage ({', '.join(name.replace(' ', '-') for name in STAGES)}); again for more; they run in"
        f" that order, {' and '.join(REACH_STAGES)} only once the others chosen passed (default: every stage)",
    )


def add_jobs_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``-j N`` / ``--jobs N``: how many worker processes run ``what`` at once (default: the cores this process may use)."""
    from prefixspec.running.parallel import available_cores

    parser.add_argument(
        "-j",
        "--jobs",
        metavar="N",
        type=positive_int,
        default=available_cores(),
        help=f"{what} in N worker processes at once, the same results whatever N (default: the cores this process may use, {available_cores()}; 1: one after another)",
    )
