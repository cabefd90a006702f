"""The cases of the fuzz, family by family, each with what the command line documents for it.

A ``Plan`` is a case for the sandbox, the files to write before it runs, the
exit statuses its documentation allows, words its output must hold, and text
that must never reach its stdout (a target's prints).  The families:

- ``trace_plans``: a hostile trace (``traces.hostile_traces``) through
  ``replay`` or ``verify`` (with ``--shrink``, ``--target``, ``--rules``);
- ``target_plans``: every target of ``hostile_targets`` and
  ``hostile_import``, by ``replay`` of the golden trace and a short
  ``check``, with its documented status; among them issue 22's dunders (a
  node's ``__hash__`` or ``__eq__``, an exception's ``__str__``, a result's
  ``__eq__``, an exit code's ``repr`` that exits, interrupts or hangs) and
  answers of 25 MiB, cut in the report (by ``replay`` alone: ``checked``);
- ``engine_table``: ``serve.py`` misbehaving in each way from its fifth line
  on, and shell commands that are no engine or leave helpers behind;
- ``engine_plans``: ``serve.py`` misbehaving in any way after 0 to 80 lines,
  or a command that is no engine, under ``replay`` or a short ``check``;
- ``option_plans`` (``option_plans.py``): option sets each refused with exit status 2, in one line (places no file can be made in:
  a dangling link, ``/proc``, ``--out`` and ``--json`` naming one place), and a ``--json /dev/full`` whose write
  fails at the end (2, the report printed all the same);
- ``interrupt_plans``: a command stopped by Ctrl-C at a random moment;
- ``process_end_plans``: a target that ends its process (``os._exit``, a signal, an abort, the C
  library's ``exit``) in its factory, a call, a replay or while shrinking, outlasts its alarm, or closes its
  stdout; hunts of mutants that exit, kill themselves, interrupt or loop, and a catalogue edit outside its package.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

from prefixspec.shipped import GOLDEN_TRACE
from stateful_tests.engines import CALL_LIMIT, SERVE
from stateful_tests.engines.serve import KINDS
from stateful_tests.fuzzing.sandbox import INTERRUPTED, PROMISED_STATUSES, ROOT, Case, Ran, Sandbox, problems
from stateful_tests.fuzzing.traces import GOLDEN_LINES, hostile_traces
from stateful_tests.hostile_import import OUTCOMES as IMPORT_OUTCOMES
from stateful_tests.hostile_import import PRINTED_AT_IMPORT
from stateful_tests.hostile_targets import HOSTILE, PRINTED

TRACE_LIMIT = 120.0
CHECK_LIMIT = 300.0
"""Seconds a case may run (replay and verify of a trace, then anything that runs a target) before it counts as a
hang: a guard against one, not a budget (no case hangs by design: a hostile hang is stopped by ``--timeout 0.5``),
so a loaded machine, which stretches every case, never turns a slow case into a broken promise."""

GOLDEN = str(GOLDEN_TRACE)
QUICK_CHECK = ("--quiet", "--profile", "ci", "--steps", "30")
"""A check as short as it goes, reproducible and writing no example database."""


@dataclass(frozen=True)
class Plan:
    """A case, the files written before it, and what its documentation promises of its outcome."""

    family: str
    case: Case
    statuses: frozenset[int] = PROMISED_STATUSES
    words: str = ""
    """Words its output (stdout and stderr) must hold, when its documentation names them."""
    files: tuple[tuple[str, bytes], ...] = ()
    never_on_stdout: tuple[str, ...] = field(default=(PRINTED, PRINTED_AT_IMPORT))
    """A target's prints: they go to stderr, never into the report."""
    trace: bytes | None = None
    """The trace file the command reads, whose line an error must name truly."""

    def broken_promises(self, ran: Ran) -> list[str]:
        """What in ``ran`` this plan's documentation does not allow (``sandbox.problems`` and the words)."""
        found = problems(ran, self.statuses)
        output = ran.stdout + ran.stderr
        if self.words and self.words not in output:
            found.append(f"the output lacks {self.words!r}: ...{output[-1500:]}")
        found.extend(f"its stdout holds a target's print {text[:30]!r}..." for text in self.never_on_stdout if text in ran.stdout)
        if ran.status == INTERRUPTED and "prefixspec: interrupted (Ctrl-C)" not in ran.stderr:
            found.append(f"exit status 130 without the interrupted line: {ran.stderr[-600:]}")
        if self.trace is not None and ran.status == 2:
            found.extend(named_line_problems(ran.stderr, self.trace))
        return found


TRACE_ERROR = re.compile(r"prefixspec: line (\d+): [^:]+: (.*)")
QUOTED = re.compile(r"(?:got|call|handle|name) '([A-Za-z0-9_\[\] =-]{1,40})'")
"""A plain fragment an error quotes from its line, not what it expected (a word of other characters is quoted
escaped, and not compared)."""


def named_line_problems(stderr: str, trace: bytes) -> list[str]:
    """What is untrue in a trace error's line: a line the file lacks, a comment blamed, a quote from elsewhere.

    Lines end at ``\\n`` alone; a form feed, a lone ``\\r`` or U+2028 inside a
    line is part of it (T5).
    """
    found = TRACE_ERROR.match(stderr.strip())
    if found is None:
        return []
    number, message = int(found[1]), found[2]
    lines = trace.split(b"\n")
    if not 1 <= number <= len(lines):
        return [f"the error names line {number} of a file of {len(lines)} lines: {message[:200]}"]
    line = lines[number - 1].decode("utf-8", "replace")
    problems: list[str] = []
    if line.strip().startswith("#") and "UTF-8" not in message and "empty trace" not in message:
        problems.append(f"the error blames line {number}, a comment ({line[:80]!r}): {message[:200]}")
    problems.extend(
        f"the error quotes {quote!r}, which line {number} ({line[:80]!r}) does not hold" for quote in QUOTED.findall(message)[:1] if quote not in line
    )
    return problems


def in_scratch(
    scratch: Path, argv: tuple[str, ...], timeout: float, *, env: dict[str, str] | None = None, interrupt_after: float | None = None
) -> Case:
    """``prefixspec ARGV`` run in ``scratch``, the folder its files and counterexamples go to."""
    return Case(argv, str(scratch), timeout, env or {}, interrupt_after)


# Traces -------------------------------------------------------------------------------------------


def trace_commands(trace: str, out: str) -> list[tuple[str, ...]]:
    """Each command that reads the trace file ``trace`` (``out``: a folder it may write in)."""
    return [
        ("replay", trace),
        ("verify", trace),
        ("verify", trace, "--shrink", "--time-budget", "1", "--out", f"{out}/shrunk.trace"),
        ("replay", trace, "--target", "impl:RadixCache"),
        ("replay", trace, "--rules", "sglang"),
        ("verify", trace, "--rules", "use=path,evict=fifo"),
    ]


@st.composite
def trace_plans(draw: st.DrawFn, scratch: Path, command: str | None = None) -> Plan:
    """A hostile trace through one of the commands that read traces (``command``: only ``replay`` or only ``verify``)."""
    path = scratch / "case.trace"
    commands = [argv for argv in trace_commands(str(path), str(scratch)) if command is None or argv[0] == command]
    argv = draw(st.sampled_from(commands))
    trace = draw(hostile_traces())
    return Plan("trace", in_scratch(scratch, argv, TRACE_LIMIT), files=((str(path), trace),), trace=trace)


# Targets ------------------------------------------------------------------------------------------


def target_plans(scratch: Path) -> list[Plan]:
    """Every misbehaving target by ``replay`` of the golden trace, and by ``check`` when it fails fast, with its documented status."""
    plans: list[Plan] = []
    for name, hostile in HOSTILE.items():
        target = f"stateful_tests.hostile_targets:{name}"
        statuses = frozenset({hostile.status})
        replay = ("replay", GOLDEN, "--target", target, "--timeout", "0.5")
        plans.append(Plan("target", in_scratch(scratch, replay, CHECK_LIMIT), statuses, hostile.words))
        if hostile.status and hostile.checked:  # a target that passes would run the whole check: seconds, not a fuzz case's fraction of one
            check = ("check", target, *QUICK_CHECK, "--timeout", "0.5", "--out", str(scratch / "out"))
            plans.append(Plan("target", in_scratch(scratch, check, CHECK_LIMIT), statuses, hostile.words))
    for behaviour, (status, words) in IMPORT_OUTCOMES.items():
        loading = ("replay", GOLDEN, "--target", "stateful_tests.hostile_import:make_cache")
        case = in_scratch(scratch, loading, CHECK_LIMIT, env={"HOSTILE_IMPORT": behaviour})
        plans.append(Plan("target", case, frozenset({status}), words))
    return plans


# Ends of a target's process, and hostile mutants (supervision) --------------------------------------------

PROCESS_ENDS = {
    "exit0": "exited with status 0",
    "exit3": "exited with status 3",
    "kill": "killed by signal SIGKILL",
    "abort": "killed by signal SIGABRT",
    "c_exit": "exited with status 0",
    "oom": "ran out of memory (MemoryError)",
    "sigterm": "was sent SIGTERM (by its own code",
    "sigint": "was sent SIGINT (by its own code",
}
"""What ``hostile_targets.ends_its_process`` does to its process (``HOSTILE_END``), and words of the report."""

HOSTILE_MUTANTS = {
    "x_exit0": ("__import__('os')._exit(0)", "exited with status 0"),
    "x_kill": ("__import__('os').kill(__import__('os').getpid(), 9)", "killed by signal SIGKILL"),
    "x_exit6": ("__import__('sys').exit(6)", "1 of 1 mutants killed"),
    "x_term": ("__import__('os').kill(__import__('os').getpid(), 15)", "1 of 1 mutants killed"),
    "x_interrupt": ("raise KeyboardInterrupt", "1 of 1 mutants killed"),
    "x_loop": ("while True: pass", "1 of 1 mutants killed"),
}
"""Mutants of ``impl`` whose ``match_prefix`` begins with the statement: each killed, never an exit of the hunt
(the guard's reports kill the last three in the seed tests, which the table names)."""

_MATCH = "    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:\n"


def _catalogue(mutants: dict[str, str], file: str = "cache.py") -> bytes:
    entries = "".join(
        f'[[mutant]]\nid = "{name}"\nbug = "{name}"\nfile = "{file}"\nfind = {json.dumps(_MATCH)}\nreplace = {json.dumps(_MATCH + "        " + statement + chr(10))}\n\n'
        for name, statement in mutants.items()
    )
    return f'package = "impl"\nfactory = "RadixCache"\n\n{entries}'.encode()  # JSON strings are TOML basic strings


def process_end_plans(scratch: Path) -> list[Plan]:
    """A target that ends its process at every place (factory, a call of a check, a replay, shrinking), outlasts its alarm,
    or closes its stdout, prints from a thread, moves away; and hunts of mutants that exit, kill themselves or loop."""
    plans: list[Plan] = []
    target = "stateful_tests.hostile_targets:ends_its_process"
    for end, words in PROCESS_ENDS.items():
        factory = in_scratch(scratch, ("replay", GOLDEN, "--target", target), CHECK_LIMIT, env={"HOSTILE_END": end, "HOSTILE_STAGE": "factory"})
        plans.append(Plan("process end", factory, frozenset({2}), words))
        call = in_scratch(scratch, ("check", target, *QUICK_CHECK, "--out", str(scratch / "out")), CHECK_LIMIT, env={"HOSTILE_END": end})
        plans.append(Plan("process end", call, frozenset({1}), words))
        replay = in_scratch(scratch, ("replay", GOLDEN, "--target", target), CHECK_LIMIT, env={"HOSTILE_END": end, "HOSTILE_STAGE": "the replay"})
        plans.append(Plan("process end", replay, frozenset({1}), words))
        shrinking = ("check", "stateful_tests.hostile_targets:ends_while_shrinking", *QUICK_CHECK, "--out", str(scratch / "out"))
        plans.append(Plan("process end", in_scratch(scratch, shrinking, CHECK_LIMIT, env={"HOSTILE_END": end}), frozenset({1}), words))
    for end in ("mask_alarm", "retry_alarm"):
        hung = in_scratch(scratch, ("replay", GOLDEN, "--target", target, "--timeout", "0.5"), CHECK_LIMIT, env={"HOSTILE_END": end, "HOSTILE_STAGE": "the replay"})
        plans.append(Plan("process end", hung, frozenset({1}), "ran on past the alarm"))
    for end in ("close_stdout", "thread_prints", "chdir"):
        quiet = in_scratch(scratch, ("replay", GOLDEN, "--target", target), CHECK_LIMIT, env={"HOSTILE_END": end, "HOSTILE_STAGE": "the replay"})
        plans.append(Plan("process end", quiet, frozenset({0}), "every result and snapshot agrees", never_on_stdout=("a line the target's thread printed",)))
    catalogue = scratch / "hostile_mutants.toml"
    text = _catalogue({name: statement for name, (statement, _) in HOSTILE_MUTANTS.items()})
    for name, (_, words) in HOSTILE_MUTANTS.items():
        hunt = ("hunt", str(catalogue), "--mutant", name, "--quiet", "--profile", "ci", "--timeout", "0.5", "--out", str(scratch / "hunt"))
        plans.append(Plan("hostile mutant", in_scratch(scratch, hunt, CHECK_LIMIT), frozenset({0}), words, files=((str(catalogue), text),)))
    outside = scratch / "outside.toml"
    stray = ("hunt", str(outside), "--quiet", "--out", str(scratch / "hunt"))
    outside_text = _catalogue({"x_out": "pass"}, file="../spec/model/state.py")
    plans.append(Plan("hostile mutant", in_scratch(scratch, stray, CHECK_LIMIT), frozenset({2}), "is not a module of package impl", files=((str(outside), outside_text),)))
    return plans


# Engines ------------------------------------------------------------------------------------------

ENGINE_START_TIMEOUT = "5"
"""``--start-timeout`` of an engine case: a hang at the start costs it, yet a loaded machine (load 5 on 2 cores)
starts serve.py well within it (at 1 s such a machine made good engines fail their handshake: a promise load could break)."""

NOT_ENGINES = (
    "sleep 1014 & exit 0",
    "true",
    "exit 3",
    "cat",
    "yes",
    "head -c 20000000 /dev/zero",
    "printf '\\377\\n'",
    "printf 'prefixspec-protocol 1 -> ok\\n'; sleep 1015",
    f"sleep 1016 & {SERVE}",
    f"(sleep 1017 &); {SERVE}",
    "kill -SEGV $$",
    "no-such-engine-xyz",
    "read l; printf 'prefixspec-protocol 1 -> ok '; head -c 3000000 /dev/zero | tr '\\0' x; echo",
    "read l; printf 'prefixspec-protocol 1 -> ok e features='; yes junk, | head -c 2000000 | tr -d '\\n'; echo; cat",
)
"""Shell commands that are no engine, die, flood, or start helpers that outlive them (the last but two are good engines)."""

ENGINE_OUTCOMES: dict[str, tuple[int, str]] = {
    "crash": (1, "exited with status 3"),
    "hang": (1, "hangs"),
    "garbage": (1, "printed garbage"),
    "wrong_call": (1, "answered a different call"),
    "wrong_shape": (1, "malformed answer"),
    "noisy_crash": (1, "panicked at the first line of the log | log line 0"),
    "fork_and_exit": (1, "hangs"),
    "huge_number": (1, "malformed answer"),
    "stderr_flood": (0, "every result and snapshot agrees"),
}
"""Each way ``serve.py`` misbehaves after the handshake, and the status and words of ``replay GOLDEN --exec``."""


def engine_table(scratch: Path) -> list[Plan]:
    """Every misbehaving engine from its fifth line on, and every command that is none, with its documented status."""
    plans: list[Plan] = []
    engines = [(f"{SERVE} --misbehave {kind} --after 5", status, words) for kind, (status, words) in ENGINE_OUTCOMES.items()]
    # A good engine with a helper beside it passes; anything else cannot even start a cache (exit 2).
    engines += [(command, 0 if SERVE in command else 2, "") for command in NOT_ENGINES]
    for engine, status, words in engines:
        replay = ("replay", GOLDEN, "--exec", engine, "--timeout", CALL_LIMIT, "--start-timeout", ENGINE_START_TIMEOUT)
        plans.append(Plan("engine", in_scratch(scratch, replay, CHECK_LIMIT), frozenset({status}), words))
    return plans


@st.composite
def engine_plans(draw: st.DrawFn, scratch: Path) -> Plan:
    """A misbehaving engine (any way, after 0 to 80 lines) or a command that is none, by ``replay`` or a short ``check``."""
    if draw(st.booleans()):
        kind = draw(st.sampled_from(KINDS))
        after = draw(st.integers(0, 80))
        engine = f"{SERVE} --misbehave {kind} --after {after}"
        # These break the protocol within the golden trace's first lines, or at the handshake: a check of them is short.
        quick = kind != "stderr_flood" and (kind not in ("handshake", "banner") or after == 0)
    else:
        engine = draw(st.sampled_from(NOT_ENGINES))
        quick = SERVE not in engine
    small = scratch / "small.trace"
    # A check runs to its end only on an engine that answers well: the spec in Python, too slow for a fuzz case.
    if not quick or draw(st.booleans()):
        argv: tuple[str, ...] = ("replay", str(small), "--exec", engine, "--timeout", CALL_LIMIT, "--start-timeout", ENGINE_START_TIMEOUT)
    else:
        argv = ("check", "--exec", engine, *QUICK_CHECK, "--timeout", CALL_LIMIT, "--start-timeout", ENGINE_START_TIMEOUT, "--out", str(scratch / "out"))
    return Plan("engine", in_scratch(scratch, argv, CHECK_LIMIT), files=((str(small), b"\n".join(GOLDEN_LINES[:60]) + b"\n"),))


# Ctrl-C -------------------------------------------------------------------------------------------

INTERRUPTED_STATUSES = PROMISED_STATUSES | {INTERRUPTED, -signal.SIGINT}
"""After Ctrl-C: 130, or killed by SIGINT itself (-2) when it comes as Python shuts down after the command's end (a
shell says 130 of both), or the command's own status when it ended first."""


@st.composite
def interrupt_plans(draw: st.DrawFn, scratch: Path) -> Plan:
    """A command stopped by Ctrl-C after 0.3 to 2 seconds: a check of impl, of engines (one with a helper), of a hanging target, a replay."""
    out = str(scratch / "out")
    argv: tuple[str, ...] = draw(
        st.sampled_from(
            [
                ("check", "--quiet", "--out", out),
                ("check", "--quiet", "--out", out, "--exec", SERVE),
                ("check", "--quiet", "--out", out, "--exec", f"sleep 1020 & {SERVE}"),
                ("check", "stateful_tests.hostile_targets:hangs_in_stats", "--quiet", "--timeout", "60", "--out", out),
                ("replay", GOLDEN, "--exec", SERVE),
            ]
        )
    )
    case = in_scratch(scratch, argv, CHECK_LIMIT, interrupt_after=draw(st.floats(0.3, 2.0)))
    return Plan("interrupt", case, INTERRUPTED_STATUSES)


def run_plan(sandbox: Sandbox, plan: Plan) -> tuple[Ran, list[str]]:
    """Write the plan's files, run its case in the sandbox: what it did, and the promises it broke."""
    for path, data in plan.files:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)
    ran = sandbox.run(plan.case)
    return ran, plan.broken_promises(ran)
