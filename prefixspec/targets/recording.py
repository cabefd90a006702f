"""``RecordingCache``: any Python cache, with every call written as a recorded trace line.

``prefixspec verify`` holds such a trace to the spec (``docs/recording.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from spec.api import NodeId, PrefixCache, Snapshot
from prefixspec.formats.trace import HEADER, CallRunner
from prefixspec.vocabulary import BY_METHOD, Call, CallThrough, Unwritable, features_of


class RecordingCache(CallThrough):
    """``cache``, with every call written to ``out`` as ``CALL -> RESULT`` (the cache's own result).

    The calls go through unchanged (errors are raised again after they are
    written).  Nodes are named ``n1``, ``n2``... by call count and written as
    ``root``, the first handle that returned them, or ``new``.  A call the
    trace cannot write (a token that is not an int, a lock of a node that no
    recorded call returned) goes through with a ``# not recorded`` comment in
    its place.
    """

    def __init__(self, cache: PrefixCache, out: TextIO, *, title: str = "") -> None:
        self.cache = cache
        self.out = out
        self.calls = 0
        self._runner = CallRunner(cache)
        self.prefixspec_features = features_of(cache)
        """What the recorded cache offers (namespaces, events): this wrapper has every call, the cache may not."""
        lines = [HEADER]
        if title:
            lines.append(f"# {title}")
        lines.append(f"block_size {cache.block_size()}")
        out.write("\n".join(lines) + "\n")
        out.flush()

    @property
    def root(self) -> NodeId:
        return self.cache.root

    def block_size(self) -> int:
        return self.cache.block_size()

    def next_name(self) -> str:
        return f"n{self.calls + 1}"

    def handle_of(self, node: NodeId) -> str:
        handle = self._runner.name_of(node)
        if handle is None:
            raise Unwritable("a node no recorded call returned")
        return handle

    def perform(self, call: Call) -> object:
        self.calls += 1
        outcome = self._runner.run(call)
        self.out.write(f"{call.text()} -> {outcome.text}\n")
        self.out.flush()
        if outcome.error is not None:
            raise outcome.error
        return outcome.value

    def unwritable(self, method: str, arguments: Sequence[object], problem: Unwritable) -> object:
        self.out.write(f"# not recorded: {BY_METHOD[method].op} of {problem}\n")
        result: object = getattr(self.cache, method)(*arguments)
        return result

    def snapshot(self) -> Snapshot:
        """Not a call of the trace format: it changes nothing, and goes through unrecorded."""
        return self.cache.snapshot()
