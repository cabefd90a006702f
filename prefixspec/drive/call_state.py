"""The call machine's state: the pair of caches in lockstep, the example's ids, and the helpers every rule group uses.

``CallMachineState`` is the base of the call machine's rule groups
(``drive.call_rules``) and of the machines themselves (``drive.call_machine``);
what it is built for (the cache factory, the tally, the rule set, whether the
extreme rules run) is its ``setup``, given by ``call_machine``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

from hypothesis.stateful import Bundle, MultipleResults, RuleBasedStateMachine, multiple

from spec.api import ID_LIMIT, BlockId, CacheFactory, Namespace, NodeId, PrefixCacheError, Rules
from spec.model import SpecCache
from prefixspec.drive.coverage import Coverage
from prefixspec.compare.lockstep import Lockstep
from prefixspec.drive.tallies import RunTally, attach_trace
from prefixspec.vocabulary import features_of

PROMPTS: Bundle[tuple[int, ...]] = Bundle("prompts")
"""The example's prompts: drawn, extended, and the two every example starts with."""
NODES: Bundle[NodePair] = Bundle("nodes")
"""The nodes the example's matches and inserts returned, as both caches know them."""


@dataclass(frozen=True)
class NodePair:
    """A node as both caches know it: the trace handle, the spec's NodeId and the target's NodeId."""

    handle: str
    spec_node: NodeId
    target_node: NodeId

    def __repr__(self) -> str:
        return f"NodePair({self.handle!r})"


@dataclass(frozen=True)
class CallMachineSetup:
    """What a call machine is built for: caches made by ``factory``, checked against the spec under ``rules``, counted
    in ``counts``; ``extremes``: the extreme rules run too (the extremes stage)."""

    factory: CacheFactory
    counts: RunTally
    rules: Rules
    extremes: bool


def note_passed_back(coverage: Coverage, along: Sequence[BlockId | None], blocks: Sequence[BlockId]) -> None:
    """The mixes of passed-back ids an insert drew over the positions it finds cached (R5)."""
    agrees = [block == cached for block, cached in zip(blocks, along) if cached is not None]
    if True in agrees and False in agrees:
        coverage.note("insert: cached and differing ids mixed")
        if any(agree and False in agrees[:position] for position, agree in enumerate(agrees)):
            coverage.note("insert: a cached id at its own position after a differing one")
        if len(agrees) >= 3 and agrees[0] and agrees[-1]:
            coverage.note("insert: first and last cached ids agree, one between differs")


class CallMachineState(RuleBasedStateMachine):
    """The spec and the cache in lockstep, the example's block ids, and the helpers of every rule group."""

    setup: ClassVar[CallMachineSetup]

    def __init__(self) -> None:
        super().__init__()
        self.counts = self.setup.counts
        self.coverage = self.counts.coverage
        self.start(1, 0)
        self.counts.examples += 1
        if self.counts.progress is not None:
            self.counts.progress(self.counts)

    def start(self, block_size: int, id_base: int, take_every: int | None = 1) -> None:
        self.spec = SpecCache(block_size, self.setup.rules)
        factory = self.setup.factory
        self.pair = Lockstep(self.spec, factory(block_size), observer=self.coverage.observe, target_factory=factory, take_every=take_every,
                             digests=self.counts.digests)
        self.features = features_of(self.pair.target)
        self.coverage.features = self.features
        self.next_block: BlockId = id_base
        self.coverage.start_example()

    def begin(self, block_size: int, id_base: int, take_every: int | None) -> MultipleResults[tuple[int, ...]]:
        """A fresh pair of caches of ``block_size`` and the example's first prompts: one block of 0s, two of 1s."""
        self.start(block_size, id_base, take_every)
        self.coverage.note_block_size(block_size)
        if id_base:  # an example whose ids start just below a boundary crosses it at once, whatever it draws next
            self.call(lambda: self.pair.insert((1,) * (2 * block_size), self.fresh_blocks(2)))
        return multiple((0,) * block_size, (1,) * (2 * block_size))

    def teardown(self) -> None:
        """The router's last poll: the events still pending are taken, and the mirror compared, at the example's end.

        Not after a failure or an abandoned example (Hypothesis calls teardown in its ``finally``): those are reported already.
        """
        if sys.exc_info()[1] is None:
            self.call(self.pair.take_pending)

    def call(self, action: Callable[[], object]) -> object:
        """Make one call through the lockstep; an error both caches raised alike is an answer too."""
        self.counts.calls += 1
        try:
            return action()
        except PrefixCacheError:
            return None
        except AssertionError as failure:
            raise attach_trace(failure, self.pair, self.counts)

    def node_pair(self, node: NodeId) -> NodePair:
        handle = self.pair.handle_of(node)
        return NodePair(handle, node, self.pair.target_node(handle))

    def fresh_blocks(self, count: int) -> list[BlockId]:
        """Ids never used in this example, counting up from its base and wrapping at 2**32 (R1)."""
        blocks = [(self.next_block + offset) % ID_LIMIT for offset in range(count)]
        self.next_block += count
        return blocks

    def cached_blocks_along(self, prompt: tuple[int, ...], namespace: Namespace = None) -> list[BlockId | None]:
        """The spec's block at each whole-block position of ``prompt`` in ``namespace``, None where uncached."""
        size = self.spec.block_size()
        return [self.spec.block_cached_at(prompt[: (index + 1) * size], namespace) for index in range(len(prompt) // size)]

    def offered(self, namespace: Namespace) -> Namespace:
        """``namespace`` when the target takes namespaces (R12), else the default one."""
        if namespace is None or "namespaces" not in self.features:
            return None
        return namespace

    @contextmanager
    def batched(self) -> Iterator[None]:
        """``Lockstep.batch``, its final snapshot comparison's failure carrying the trace."""
        try:
            with self.pair.batch():
                yield
        except AssertionError as failure:
            raise attach_trace(failure, self.pair, self.counts)

    def fail_with_trace(self, message: str) -> None:
        raise attach_trace(AssertionError(message), self.pair, self.counts)
