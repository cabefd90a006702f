"""The call machine: every call of the interface, in any order and with bad arguments, on the spec and a cache.

Matches and inserts of prompts that share, extend and diverge; correct,
duplicate and wrong block lists; locks and unlocks of handles old and new
(including evicted ones); evictions of every size; the counters; and, in the
extremes stage, trees hundreds of nodes deep and wide.  The rules are grouped
by what they exercise (``drive.call_rules``); ``call_machine`` builds the
machine for one cache factory, one tally and one rule set.
"""

from __future__ import annotations

from typing import cast

from hypothesis import strategies as st
from hypothesis.stateful import MultipleResults, RuleBasedStateMachine, initialize

from spec.api import CacheFactory, Rules
from prefixspec.drive.call_rules import EvictRules, ExtremeRules, InsertRules, LockRules, NamespaceRules, PromptRules
from prefixspec.drive.call_state import PROMPTS, CallMachineSetup
from prefixspec.drive.coverage import BOUNDARY_VALUES, DEEP, MANY_LOCKS, MANY_TENANTS, WIDE
from prefixspec.drive.draws import BLOCK_SIZES, EXTREME_BLOCK_SIZES, EXTREMES, ID_BASES, TAKE_SCHEDULES, TOKEN_ALPHABETS
from prefixspec.drive.tallies import RunTally


class EveryCallRule(PromptRules, InsertRules, NamespaceRules, LockRules, EvictRules, ExtremeRules):
    """Every rule group; the two machines differ only in how an example starts."""


class CallMachine(EveryCallRule):
    """Every call of the interface, on the spec and the cache in lockstep, small and dense."""

    @initialize(block_size=BLOCK_SIZES, id_base=ID_BASES, take_every=TAKE_SCHEDULES, target=PROMPTS)
    def choose_block_size(self, block_size: int, id_base: int, take_every: int | None) -> MultipleResults[tuple[int, ...]]:
        return self.begin(block_size, id_base, take_every)


class ExtremesCallMachine(EveryCallRule):
    """The call machine at the extremes: each example opens with one extreme rule, its block size 1 or 2."""

    @initialize(
        block_size=EXTREME_BLOCK_SIZES, id_base=ID_BASES, take_every=TAKE_SCHEDULES, opening=st.sampled_from(EXTREMES), data=st.data(), target=PROMPTS
    )
    def choose_block_size_and_open(
        self, block_size: int, id_base: int, take_every: int | None, opening: str, data: st.DataObject
    ) -> MultipleResults[tuple[int, ...]]:
        """Start the example with one extreme rule, so that no example of the stage misses them all."""
        prompts = self.begin(block_size, id_base, take_every)
        if opening == "deep_path":
            self.deep_path(DEEP, data.draw(st.sampled_from(TOKEN_ALPHABETS[:2]), label="alphabet"), data)
        elif opening == "wide_node":
            self.wide_node(WIDE, data.draw(st.sampled_from(BOUNDARY_VALUES), label="base"))
        elif opening == "many_locks":
            self.many_locks(MANY_LOCKS)
        else:
            count = data.draw(st.integers(MANY_TENANTS, 4 * MANY_TENANTS), label="tenants")
            self.tenants((7,) * block_size, count, data.draw(st.integers(0, 2**32 - 1), label="population seed"), then_evict=True)
        return prompts


def call_machine(
    factory: CacheFactory, tally: RunTally | None = None, rules: Rules = Rules(), *, extremes: bool = False
) -> type[RuleBasedStateMachine]:
    """The call machine for caches made by ``factory``, against the spec under ``rules``, counted in ``tally``.

    With ``extremes`` it also builds paths hundreds of nodes deep, nodes with
    hundreds of children and nodes under hundreds of locks (the extremes
    stage): those rules cost hundreds of calls each, so the plain call
    machine, run twenty times as often, leaves them out.
    """
    setup = CallMachineSetup(factory, tally if tally is not None else RunTally(), rules, extremes)
    machine = ExtremesCallMachine if extremes else CallMachine
    # Made here, as its qualified name says: Hypothesis seeds a derandomized run from the source of the machine's
    # class, and finds none for a class made in a function (it takes the name), so the seeds stay as they were.
    made = type("CallMachine", (machine,), {"setup": setup, "__qualname__": "call_machine.<locals>.CallMachine"})
    return cast(type[RuleBasedStateMachine], made)
