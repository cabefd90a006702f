"""The spec served as an engine over the line protocol, optionally misbehaving after a number of lines.

    python -m stateful_tests.engines.serve [--misbehave KIND] [--after N]

Without ``--misbehave`` it is a correct engine in Python (slow: it is the
spec).  With it, the first N lines are answered correctly and then the engine
breaks the protocol in one way, so that each of the checker's reports can be
seen: ``crash`` (exits with status 3), ``hang`` (stops answering), ``garbage``
(prints a line that is no answer), ``wrong_call`` (answers the line before
the one sent, as an engine that lost a line would), ``wrong_shape`` (answers
``ok`` to everything), ``handshake`` (claims another protocol version),
``banner`` (prints a greeting before the handshake's answer).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence

from spec.model import SpecCache
from prefixspec.formats.protocol import ProtocolServer

KINDS = ("crash", "hang", "garbage", "wrong_call", "wrong_shape", "handshake", "banner")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--misbehave", choices=KINDS, default=None)
    parser.add_argument("--after", type=int, default=0, help="lines answered correctly first")
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
        if kind == "garbage":
            out.write("%%% this is not an answer %%%\n")
        elif kind == "wrong_call":
            out.write(f"{previous} -> ok\n")
        elif kind == "wrong_shape":
            out.write(f"{line} -> ok\n")
        elif kind == "handshake" and line.startswith("prefixspec-protocol"):
            out.write(f"{line} -> ProtocolError this engine speaks prefixspec-protocol 2\n")
        else:
            out.write(engine.answer(line) + "\n")
        out.flush()
        previous = line
    return 0


if __name__ == "__main__":
    sys.exit(main())
