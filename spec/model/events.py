"""R13: events: the BlockStored an insert publishes, and the take of every event published since the last."""

from __future__ import annotations

from spec import arith
from spec.api import BlockId, BlockStored, KVEvent, Namespace
from spec.model.namespaces import Namespacing
from spec.model.state import Tokens


class Publishing(Namespacing):
    """``Namespacing`` and R13, below."""

    # R13: events ------------------------------------------------------------------------

    def publish_stored(self, namespace: Namespace, prompt: Tokens, held: list[BlockId], stored_at: list[int]) -> None:
        """R13: the blocks an insert cached, at the block positions ``stored_at`` of ``prompt``, as one
        BlockStored per run of consecutive positions, each under the block the insert holds just before the run
        (``held``: the cached block, or under ``dup=keep`` the caller's, cached there too; None at the first block).

        Under ``dup=refuse`` the positions stored are the last ones of the insert, one run.
        """
        runs: list[list[int]] = []
        for index in stored_at:
            if runs and runs[-1][-1] == index - 1:
                runs[-1].append(index)
            else:
                runs.append([index])
        for run in runs:
            start, _ = arith.block_span(run[0], self._block_size)
            _, end = arith.block_span(run[-1], self._block_size)
            parent = held[run[0] - 1] if run[0] else None
            self._events.append(BlockStored(parent, prompt[start:end], tuple(held[index] for index in run), namespace))

    def take_events(self) -> list[KVEvent]:
        """R13: the events published since the last take, oldest first; folded over an empty mirror from the
        cache's start they give exactly ``cached_contents()``."""
        taken, self._events = self._events, []
        return taken
