"""SGLang's last-use rule, as a variant of the spec and of impl.

SGLang's RadixCache follows R1-R11 but for one rule.  When a match or an
insert ends inside a node, both split it; the spec (R4, R7) leaves the lower
part (the split node's unmatched tail) at its own last use, while SGLang sets
``last_access_time`` on that node before it splits it, so the tail counts as
used by the call.  Eviction order, and so every later result, then differs.

To replay SGLang on calls whose expected results it must reproduce, the
workload is recorded a second time under SGLang's rule, with these variants as
the reference: ``SglangRuleSpec`` is the spec with the tail refreshed, and
``SglangRuleCache`` is impl with the same change, cross-checked against it
(``bench.run``).  The tail counts as used just before the call's own nodes
(``clock - 0.5``): in SGLang the tail takes the call's access time and a leaf
the call creates takes its creation time, which is later, so when both are
leaves the tail goes first.

The other differences need no variant: SGLang evicts tokens (the adapter asks
for ``n * B``, and whole leaves come out as here), and the engine, not the
cache, keeps the last token out of a match (the adapter passes the key with
``limit = n - 1``, as SGLang's scheduler does).
"""

from __future__ import annotations

from collections.abc import Sequence

from impl import RadixCache
from impl.radix import Node, RadixTree
from spec.api import BlockId, Inserted, PrefixMatch
from spec.model import Prefix, SpecCache


class SglangRuleSpec(SpecCache):
    """The spec, but a node split by a match or insert counts its lower part as used."""

    def refresh_split_tails(self, before: set[Prefix]) -> None:
        for prefix in list(self.node_at):
            if prefix in before:
                continue
            for below in self.nodes_below(prefix):
                if below in before and self.parent_end(below) == len(prefix):
                    self.last_use[below] = self.clock - 0.5  # type: ignore[assignment]

    def match_prefix(self, tokens: Sequence[int]) -> PrefixMatch:
        before = set(self.node_at)
        found = super().match_prefix(tokens)
        self.refresh_split_tails(before)
        return found

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId]) -> Inserted:
        before = set(self.node_at)
        done = super().insert(tokens, blocks)
        self.refresh_split_tails(before)
        return done


class _TailTree(RadixTree):
    """impl's tree, remembering the lower node of every split."""

    def __init__(self, block_size: int) -> None:
        super().__init__(block_size)
        self.split_tails: list[Node] = []

    def split(self, node: Node, at: int) -> Node:
        upper = super().split(node, at)
        self.split_tails.append(node)
        return upper


class SglangRuleCache(RadixCache):
    """impl, but a node split by a match or insert counts its lower part as used."""

    def __init__(self, block_size: int) -> None:
        super().__init__(block_size)
        self._tree = _TailTree(self._block_size)

    def _refresh_split_tails(self) -> None:
        tree = self._tree
        assert isinstance(tree, _TailTree)
        for tail in tree.split_tails:
            if tail.owner is tree:
                tail.last_use = self._clock - 0.5  # type: ignore[assignment]
                if tail.queue_seq >= 0:
                    tree._enqueue(tail)
        tree.split_tails.clear()

    def match_prefix(self, tokens: Sequence[int]) -> PrefixMatch:
        found = super().match_prefix(tokens)
        self._refresh_split_tails()
        return found

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId]) -> Inserted:
        done = super().insert(tokens, blocks)
        self._refresh_split_tails()
        return done
