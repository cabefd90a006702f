"""``prefixspec crosshair``, the CrossHair gate: every contract of ``spec/arith.py`` proved, every impl twin shown equal.

``prefixspec crosshair`` (``make crosshair``) runs, two processes at a time,

- ``crosshair check --report_all`` on each function of ``spec/arith.py``, and
- ``crosshair diffbehavior spec.arith.F impl.blocks.F`` for each such F,

prints one row per run (verdict, seconds, conditions proved) and exits 1
unless every run passed.  CrossHair's exit code alone proves nothing: it is
0 when a precondition cannot even be evaluated (a misspelt name in ``pre:``
makes every input fail it, so there is nothing left to refute), 0 when a
condition is merely "Not confirmed", and 0 when diffbehavior ran out of time
before exhausting the paths.  So the gate reads the whole report:

- a check passes when every ``post:`` line of the function is reported
  "Confirmed over all paths." and nothing else is reported at all; a
  function without a ``post:`` line, or one CrossHair never reported on,
  fails;
- a diffbehavior run passes when it found no difference *and* exhausted
  every path.

diffbehavior does not read preconditions, so a pair must agree on every
int, not only on the rules' domain; exceptions count as equal when their
types are (their messages are CPython's wording, not the rule's).

Floats are modelled as reals (the plugin below) for the functions whose
signature has one, the hit rate.  CrossHair otherwise also explores each
float as an exact IEEE double, which z3 cannot settle for a quotient of two
unknown ints: given 120 s per condition it confirmed none of the hit rate's
three conditions in 8 minutes, against a 2-minute budget for the whole gate.
The real model proves the rule (a share in [0, 1], 0.0 exactly when nothing
hit, 1.0 exactly when everything did); that rounding preserves it is argued
in ``arith.hit_rate`` and pinned at its edges by ``test_crosshair.py``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from prefixspec.exit_status import ExitStatus
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import spec
from prefixspec.commands.options import positive_int
from prefixspec.errors import UsageError

ROOT = Path(spec.__file__).resolve().parents[spec.__name__.count(".") + 1]
"""The folder that holds the ``spec`` and ``impl`` packages: a checkout, or site-packages."""
SPEC_ARITH = Path(spec.__file__).resolve().parent / "arith.py"
IMPL_ARITH = SPEC_ARITH.parent.parent / "impl" / "blocks.py"

# CPU seconds CrossHair may spend on one condition (or one diffbehavior pair).
# Every condition is confirmed in well under a second; the slack is for
# slower machines, and 21 conditions that all time out still end near the budget.
PER_CONDITION_TIMEOUT = 10.0
# Wall seconds for one crosshair process: a solver that hangs fails the gate
# instead of the CI job's own timeout.
PROCESS_TIMEOUT = 60.0

CONFIRMED = "Confirmed over all paths."
NO_DIFFERENCES = "No differences found."
EXHAUSTED = "All paths exhausted"

# ``<file>:<line>: <level>: <message>``; a message may run on over further lines.
REPORT_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+): (?P<level>[a-z]+): (?P<message>.*)$")
POST_LINE = re.compile(r"^\s*post(\[[^\]]*\])?:")
FLOAT_WORD = re.compile(r"\bfloat\b")

# Executed by ``crosshair --extra_plugin`` inside CrossHair: model every float
# as a real number only, never as an IEEE double (see the module docstring).
REAL_FLOATS_PLUGIN = """\
from crosshair.libimpl import builtinslib as _builtinslib
_builtinslib._PYTYPE_TO_WRAPPER_TYPE[float] = ((_builtinslib.RealBasedSymbolicFloat, 1.0),)
"""


@dataclass(frozen=True)
class ContractedFunction:
    """A top-level function of a module, where its source lies and what its docstring promises."""

    module: str
    name: str
    path: Path
    first_line: int
    last_line: int
    post_lines: frozenset[int]
    uses_floats: bool

    @property
    def qualified_name(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass(frozen=True)
class Finding:
    """One message of a ``crosshair check`` report; ``line`` is None for text outside any message."""

    line: int | None
    level: str
    message: str

    def __str__(self) -> str:
        where = "?" if self.line is None else str(self.line)
        return f"line {where}: {self.level}: {self.message}"


@dataclass(frozen=True)
class Verdict:
    """The outcome of one crosshair run: ``passed`` only if nothing in the report is unproved."""

    kind: str  # "check" or "diff"
    subject: str
    passed: bool
    seconds: float
    proved: int  # conditions confirmed (check) or pairs exhausted without a difference (diff)
    of: int
    problems: tuple[str, ...]
    floats_as_reals: bool


@dataclass(frozen=True)
class Run:
    """What one crosshair process printed and returned."""

    returncode: int | None  # None: killed at PROCESS_TIMEOUT
    stdout: str
    stderr: str
    seconds: float


def module_name(path: Path) -> str:
    """``spec/arith.py`` under ROOT -> ``spec.arith``."""
    relative = path.resolve().relative_to(ROOT).with_suffix("")
    return ".".join(relative.parts)


def contracted_functions(path: Path) -> list[ContractedFunction]:
    """Every top-level function of ``path``, with the lines of its ``post:`` conditions."""
    source = path.read_text()
    lines = source.splitlines()
    module = module_name(path)
    found: list[ContractedFunction] = []
    for node in ast.parse(source, filename=str(path)).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
        last = node.end_lineno if node.end_lineno is not None else node.lineno
        posts = frozenset(number for number in range(first, last + 1) if POST_LINE.match(lines[number - 1]))
        annotations = [argument.annotation for argument in node.args.args] + [node.returns]
        uses_floats = any(annotation is not None and FLOAT_WORD.search(ast.unparse(annotation)) for annotation in annotations)
        found.append(ContractedFunction(module, node.name, path, first, last, posts, uses_floats))
    return found


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, and each of their parent packages."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            names.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return names


def parse_check_report(stdout: str) -> list[Finding]:
    """The messages of a ``crosshair check`` report, continuation lines joined to their message."""
    findings: list[Finding] = []
    for text in stdout.splitlines():
        match = REPORT_LINE.match(text)
        if match:
            findings.append(Finding(int(match["line"]), match["level"], match["message"]))
        elif findings and findings[-1].line is not None:
            last = findings.pop()
            findings.append(Finding(last.line, last.level, f"{last.message}\n{text}"))
        elif text.strip():
            findings.append(Finding(None, "text", text))
    return findings


def judge_check(function: ContractedFunction, run: Run) -> Verdict:
    """Pass only if every post line of ``function`` is confirmed over all paths and nothing else was said."""
    problems: list[str] = []
    confirmed: set[int] = set()
    if not function.post_lines:
        problems.append("no post: condition, so nothing to prove")
    for finding in parse_check_report(run.stdout):
        if finding.level == "info" and finding.message == CONFIRMED and finding.line in function.post_lines:
            confirmed.add(finding.line)
        else:
            problems.append(str(finding))
    for line in sorted(function.post_lines - confirmed):
        problems.append(f"line {line}: condition never reported confirmed")
    problems.extend(_process_problems(run))
    return Verdict("check", function.qualified_name, not problems, run.seconds, len(confirmed), len(function.post_lines), tuple(problems), function.uses_floats)


def judge_diff(spec_name: str, impl_name: str, run: Run, floats_as_reals: bool) -> Verdict:
    """Pass only if diffbehavior found no difference and exhausted every path."""
    lines = run.stdout.splitlines()
    agreed = any(line.startswith(NO_DIFFERENCES) for line in lines) and any(line.startswith(EXHAUSTED) for line in lines)
    problems = [] if agreed else [line for line in lines if line.strip()] or ["no report"]
    problems.extend(_process_problems(run))
    passed = not problems
    return Verdict("diff", f"{spec_name} ~ {impl_name}", passed, run.seconds, int(passed), 1, tuple(problems), floats_as_reals)


def _process_problems(run: Run) -> list[str]:
    # A run that was killed, crashed or wrote to stderr has not proved anything,
    # whatever its stdout says.
    problems = []
    if run.returncode is None:
        problems.append(f"killed after {PROCESS_TIMEOUT:.0f} s")
    elif run.returncode != 0:
        problems.append(f"crosshair exited {run.returncode}")
    problems.extend(f"stderr: {line}" for line in run.stderr.splitlines() if line.strip())
    return problems


@contextlib.contextmanager
def real_floats_plugin() -> Iterator[Path]:
    """A plugin file for ``--extra_plugin``, alive for the duration of the block."""
    with tempfile.TemporaryDirectory(prefix="crosshair-gate-") as directory:
        plugin = Path(directory) / "real_floats.py"
        plugin.write_text(REAL_FLOATS_PLUGIN)
        yield plugin


def run_crosshair(arguments: Sequence[str]) -> Run:
    """Run ``crosshair ARGUMENTS`` from ROOT, so that ``spec`` and ``impl`` import."""
    command = [sys.executable, "-m", "crosshair", *arguments]
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=PROCESS_TIMEOUT)
    except subprocess.TimeoutExpired as expired:
        return Run(None, _text(expired.stdout), _text(expired.stderr), time.monotonic() - start)
    return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - start)


def _text(output: str | bytes | None) -> str:
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def _plugin_options(uses_floats: bool, plugin: Path) -> list[str]:
    # ``--extra_plugin`` takes several files; the ``=`` form stops it from
    # swallowing the target that follows.
    return [f"--extra_plugin={plugin}"] if uses_floats else []


def check_function(function: ContractedFunction, plugin: Path) -> Verdict:
    """``crosshair check --report_all`` on one function, judged."""
    run = run_crosshair(
        [
            "check",
            "--report_all",
            "--analysis_kind=PEP316",
            f"--per_condition_timeout={PER_CONDITION_TIMEOUT}",
            *_plugin_options(function.uses_floats, plugin),
            function.qualified_name,
        ]
    )
    return judge_check(function, run)


def diff_functions(spec_function: ContractedFunction, impl_name: str, plugin: Path) -> Verdict:
    """``crosshair diffbehavior`` between a spec function and its implementation twin, judged."""
    run = run_crosshair(
        [
            "diffbehavior",
            "--exception_equivalence=SAME_TYPE",
            f"--per_condition_timeout={PER_CONDITION_TIMEOUT}",
            *_plugin_options(spec_function.uses_floats, plugin),
            spec_function.qualified_name,
            impl_name,
        ]
    )
    return judge_diff(spec_function.qualified_name, impl_name, run, spec_function.uses_floats)


def check_file(path: Path, jobs: int = 2) -> list[Verdict]:
    """Check every function of ``path``; the negative controls call this on their planted bugs."""
    functions = contracted_functions(path)
    with real_floats_plugin() as plugin, ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda function: check_function(function, plugin), functions))


def diff_pair(spec_name: str, impl_name: str, path: Path = SPEC_ARITH) -> Verdict:
    """diffbehavior between ``spec_name`` (a function of ``path``) and ``impl_name`` (qualified)."""
    (spec_function,) = [function for function in contracted_functions(path) if function.name == spec_name]
    with real_floats_plugin() as plugin:
        return diff_functions(spec_function, impl_name, plugin)


def run_gate(jobs: int) -> list[Verdict]:
    """Every check of ``spec/arith.py`` and every spec/impl pair, ``jobs`` processes at a time."""
    spec_functions = contracted_functions(SPEC_ARITH)
    impl_names = {function.name for function in contracted_functions(IMPL_ARITH)}
    impl_module = module_name(IMPL_ARITH)
    missing = [
        Verdict("diff", f"{function.qualified_name} ~ {impl_module}.{function.name}", False, 0.0, 0, 1, ("the implementation has no such function",), False)
        for function in spec_functions
        if function.name not in impl_names
    ]
    borrowed = imports_of(IMPL_ARITH) & {spec.__name__, module_name(SPEC_ARITH)}
    if borrowed:
        # An implementation that calls the spec's functions agrees with them by construction.
        missing.append(Verdict("diff", impl_module, False, 0.0, 0, 1, (f"imports {', '.join(sorted(borrowed))}: it must keep its own arithmetic",), False))
    with real_floats_plugin() as plugin, ThreadPoolExecutor(max_workers=jobs) as pool:
        checks = [pool.submit(check_function, function, plugin) for function in spec_functions]
        diffs = [pool.submit(diff_functions, function, f"{impl_module}.{function.name}", plugin) for function in spec_functions if function.name in impl_names]
        return [future.result() for future in checks] + [future.result() for future in diffs] + missing


def format_table(verdicts: Sequence[Verdict]) -> str:
    """One row per run, then the problems of the runs that failed."""
    rows = [("run", "subject", "verdict", "proved", "seconds", "note")]
    for verdict in verdicts:
        rows.append(
            (
                verdict.kind,
                verdict.subject,
                "ok" if verdict.passed else "FAIL",
                f"{verdict.proved}/{verdict.of}",
                f"{verdict.seconds:.1f}",
                "floats as reals" if verdict.floats_as_reals else "",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    for verdict in verdicts:
        if not verdict.passed:
            lines.append(f"\n{verdict.kind} {verdict.subject}:")
            lines.extend(f"    {problem}" for problem in verdict.problems)
    return "\n".join(lines)


def add_crosshair_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("crosshair", help="prove the contracts of spec/arith.py with CrossHair (needs crosshair-tool: the dev extra)")
    parser.add_argument("--jobs", type=positive_int, default=min(2, os.cpu_count() or 1), help="crosshair processes at a time (default: 2)")
    parser.set_defaults(run=command_crosshair)


def command_crosshair(arguments: argparse.Namespace) -> int:
    if importlib.util.find_spec("crosshair") is None:
        raise UsageError("prefixspec crosshair needs CrossHair: pip install crosshair-tool (in a checkout, pip install -e '.[dev]')")
    start = time.monotonic()
    verdicts = run_gate(arguments.jobs)
    print(format_table(verdicts))
    failed = sum(not verdict.passed for verdict in verdicts)
    print(f"\n{len(verdicts) - failed}/{len(verdicts)} runs passed in {time.monotonic() - start:.1f} s wall")
    return ExitStatus.FAILED if failed else ExitStatus.PASSED
