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

from spec.api import ERROR_TYPES, NodeId, PrefixCacheError
from spec.model import SpecCache, SpecNode
from spec.trace import TraceFormatError, parse_call, render_ints, render_stats

HANDSHAKE = "prefixspec-protocol 1"
KINDS = ("crash", "hang", "garbage", "wrong_call", "wrong_shape", "handshake", "banner")


def node_text(cache: SpecCache, node: NodeId) -> str:
    if node == cache.root:
        return "root"
    assert isinstance(node, SpecNode)
    return str(node.serial)


class Engine:
    def __init__(self) -> None:
        self.cache: SpecCache | None = None
        self.handles: dict[str, NodeId] = {}

    def answer(self, line: str) -> str:
        if line.startswith("prefixspec-protocol"):
            return "ok spec-in-python" if line == HANDSHAKE else f"ProtocolError this engine speaks {HANDSHAKE}"
        if line.startswith("block_size"):
            try:
                self.cache = SpecCache(int(line.split()[1]))
            except (PrefixCacheError, ValueError, IndexError) as error:
                return f"InvalidArgument {error}"
            self.handles = {}
            return "ok"
        cache = self.cache
        if cache is None:
            return "ProtocolError no cache yet"
        if line == "snapshot":
            snapshot = cache.snapshot()
            nodes = "".join(f" {render_ints(view.prefix)} {render_ints(view.blocks)} {view.locks}" for view in snapshot.nodes)
            return f"{render_stats(snapshot.stats)} nodes={len(snapshot.nodes)}{nodes}"
        try:
            call = parse_call(line, 0)
        except TraceFormatError as error:
            return f"ProtocolError {error}"
        try:
            if call.op == "match":
                found = cache.match_prefix(call.tokens)
                self.handles[call.name] = found.node
                return f"{found.matched_tokens} {render_ints(found.blocks)} {node_text(cache, found.node)}"
            if call.op == "insert":
                done = cache.insert(call.tokens, call.blocks)
                self.handles[call.name] = done.node
                return f"{node_text(cache, done.node)} {render_ints(done.duplicates)}"
            if call.op in ("lock", "unlock"):
                node = cache.root if call.handle == "root" else self.handles.get(call.handle, "unknown")
                (cache.lock if call.op == "lock" else cache.unlock)(node)
                return "ok"
            if call.op == "evict":
                return render_ints(cache.evict(call.count))
            if call.op == "stats":
                return render_stats(cache.stats())
            if call.op == "hit_rate":
                return repr(cache.hit_rate())
            return str(getattr(cache, call.op)())
        except PrefixCacheError as error:
            for name, kind in ERROR_TYPES.items():
                if isinstance(error, kind):
                    return f"{name} {error}"
            raise


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--misbehave", choices=KINDS, default=None)
    parser.add_argument("--after", type=int, default=0, help="lines answered correctly first")
    arguments = parser.parse_args(argv)
    engine = Engine()
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
            out.write(f"{line} -> {engine.answer(line)}\n")
        out.flush()
        previous = line
    return 0


if __name__ == "__main__":
    sys.exit(main())
