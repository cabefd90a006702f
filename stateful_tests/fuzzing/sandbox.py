"""A case of the command line and what came of it, and the sandbox that runs cases, each in a process of its own.

``Sandbox`` starts the fork server (``stateful_tests/fuzzing/server.py``)
once; ``sandbox.run(case)`` has it fork a fresh process for the case and
returns a ``Ran``: the exit status, both outputs, the time, whether the time
limit stopped it, and the processes it left behind.  ``problems`` says what
in a ``Ran`` breaks the command line's promises.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]

PROMISED_STATUSES = frozenset({0, 1, 2})
"""What every command exits with: 0 all holds, 1 a disagreement or a target that failed, 2 bad usage."""

INTERRUPTED = 130
"""The exit status the user's Ctrl-C gives."""


@dataclass(frozen=True)
class Case:
    """``prefixspec ARGV`` in ``cwd`` with ``env`` added, stopped after ``timeout`` s; Ctrl-C after ``interrupt_after`` s."""

    argv: tuple[str, ...]
    cwd: str
    timeout: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict)
    interrupt_after: float | None = None

    def as_json(self) -> str:
        return json.dumps({**asdict(self), "env": dict(self.env)})

    @classmethod
    def of_json(cls, text: str) -> Case:
        fields = json.loads(text)
        return cls(
            argv=tuple(str(word) for word in fields["argv"]),
            cwd=str(fields["cwd"]),
            timeout=float(fields["timeout"]),
            env={str(name): str(value) for name, value in fields["env"].items()},
            interrupt_after=None if fields["interrupt_after"] is None else float(fields["interrupt_after"]),
        )


@dataclass(frozen=True)
class Ran:
    """What a case did: exit status (negative: killed by that signal), outputs, seconds, timed out, processes left behind."""

    status: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    leaked: tuple[str, ...]

    def as_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def of_json(cls, text: str) -> Ran:
        fields = json.loads(text)
        return cls(
            status=int(fields["status"]),
            stdout=str(fields["stdout"]),
            stderr=str(fields["stderr"]),
            seconds=float(fields["seconds"]),
            timed_out=bool(fields["timed_out"]),
            leaked=tuple(str(line) for line in fields["leaked"]),
        )


def problems(ran: Ran, statuses: Collection[int] = PROMISED_STATUSES) -> list[str]:
    """Every promise ``ran`` breaks: an exit status outside ``statuses``, a traceback, a hang, a process left behind,
    a usage error (exit 2) longer than one line (argparse's usage lines, and an engine's one paragraph, excepted).
    """
    found: list[str] = []
    if ran.timed_out:
        found.append(f"hung: still running at the time limit ({ran.seconds:.1f} s)")
    if ran.status not in statuses:
        found.append(f"exit status {ran.status}, not one of {sorted(statuses)}")
    if ran.status == 2 and not ran.stderr.startswith(("usage:", "prefixspec: the engine")):
        lines = ran.stderr.strip().split("\n")
        if len(lines) != 1 or not lines[0].startswith("prefixspec: "):
            found.append(f"a usage error of {len(lines)} lines: {ran.stderr[:600]}")
    for name, text in (("stdout", ran.stdout), ("stderr", ran.stderr)):
        if "Traceback (most recent call last)" in text:
            found.append(f"a traceback on {name}: ...{text[text.index('Traceback') :][:2000]}")
    found.extend(f"left behind: {process}" for process in ran.leaked)
    return found


class Sandbox:
    """The fork server, started once: ``run`` a case in a fresh process; ``close`` (or ``with``) to end it."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "stateful_tests.fuzzing.server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            text=True,
            encoding="utf-8",
        )

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _pipes(self) -> tuple[IO[str], IO[str]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        return self.process.stdin, self.process.stdout

    def run(self, case: Case) -> Ran:
        requests, replies = self._pipes()
        requests.write(case.as_json() + "\n")
        requests.flush()
        reply = replies.readline()
        if not reply:
            raise RuntimeError(f"the fork server died (status {self.process.wait()}) running {case.argv}")
        return Ran.of_json(reply)

    def close(self) -> None:
        requests, _ = self._pipes()
        requests.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
