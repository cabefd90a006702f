"""The spec served as an engine over the line protocol, optionally misbehaving after a number of lines.

    python -m stateful_tests.engines.serve [--misbehave KIND] [--after N]

Without ``--misbehave`` it is a correct engine in Python (slow: it is the
spec).  With it, the first N lines are answered correctly and then the engine
breaks the protocol in one way, so that each of the checker's reports can be
seen: ``crash`` (exits with status 3), ``hang`` (stops answering), ``garbage``
(prints a line that is no answer), ``wrong_call`` (answers the line before
the one sent, as an engine that lost a line would), ``wrong_shape`` (answers
``ok`` to everything), ``handshake`` (claims another protocol version),
``banner`` (prints a greeting before the handshake's answer), ``noisy_crash``
(a panic line, 20 KB of log on stderr, its last words, then exits),
``fork_and_exit`` (forks a child that holds the pipes and sleeps, writes the
child's pid to ``--pidfile``, and exits), ``huge_number`` (answers with a
5,000-digit number), ``stderr_flood`` (writes 1 MB to stderr, then answers
correctly).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from spec.model import SpecCache
from prefixspec.formats.protocol import ProtocolServer

KINDS = (
    "crash",
    "hang",
    "garbage",
    "wrong_call",
    "wrong_shape",
    "handshake",
    "banner",
    "noisy_crash",
    "fork_and_exit",
    "huge_number",
    "stderr_flood",
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--misbehave", choices=KINDS, default=None)
    parser.add_argument("--after", type=int, default=0, help="lines answered correctly first")
    parser.add_argument("--pidfile", default=None, help="fork_and_exit: where the child writes its pid")
    arguments = parser.parse_args(argv)
    engine = ProtocolServer(SpecCache, "spec-in-python")
    previous = ""
    count = 0
    out = sys.stdout
    for raw in sys.stdin:
        line = raw.strip()
        if not line:
            continue
        count += 1
        kind = arguments.misbehave if count > arguments.after else None
        if kind == "banner" and count == 1:
            out.write("Welcome to the engine! Type help for help.\n")
        if kind == "crash":
            print("serve.py: crashing on purpose", file=sys.stderr)
            sys.stderr.flush()
            os._exit(3)
        if kind == "hang":
            time.sleep(3600)
        if kind == "noisy_crash":
            print("serve.py: panicked at the first line of the log", file=sys.stderr)
            for number in range(400):
                print(f"log line {number}: " + "x" * 40, file=sys.stderr)
            print("serve.py: the last words of the log", file=sys.stderr)
            sys.stderr.flush()
            os._exit(3)
        if kind == "fork_and_exit":
            if os.fork() == 0:  # the child keeps stdin and stdout open and answers nothing
                if arguments.pidfile:
                    with open(arguments.pidfile, "w", encoding="utf-8") as written:
                        written.write(str(os.getpid()))
                time.sleep(3600)
            os._exit(0)
        if kind == "stderr_flood" and count == arguments.after + 1:
            sys.stderr.write(("flood " * 20 + "\n") * 8000)
            sys.stderr.flush()
        if kind == "garbage":
            out.write("%%% this is not an answer %%%\n")
        elif kind == "wrong_call":
            out.write(f"{previous} -> ok\n")
        elif kind == "wrong_shape":
            out.write(f"{line} -> ok\n")
        elif kind == "huge_number" and line in ("cached_blocks", "cached_tokens", "evictable_blocks"):
            out.write(f"{line} -> {'9' * 5000}\n")
        elif kind == "handshake" and line.startswith("prefixspec-protocol"):
            out.write(f"{line} -> ProtocolError this engine speaks prefixspec-protocol 2\n")
        else:
            out.write(engine.answer(line) + "\n")
        out.flush()
        previous = line
    return 0


if __name__ == "__main__":
    sys.exit(main())
