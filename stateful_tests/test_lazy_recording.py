"""The lockstep records calls and outcomes, written as text only when read; events are compared by value where
equal values are written alike (``compare.lockstep.RecordedSteps``, ``formats.outcomes.plain_value``)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from impl import RadixCache
from prefixspec.compare.lockstep import Disagreement, Lockstep
from prefixspec.drive.engine import Engine, Workload
from prefixspec.formats.outcomes import Outcome, plain_value, render_plain, same_result
from prefixspec.formats.trace import record
from prefixspec.vocabulary import BY_METHOD, CallKind, render_result
from spec.api import BlockRemoved, BlockStored, KVEvent, PrefixStats
from spec.model import SpecCache

TAKE = BY_METHOD["take_events"]


def engine_run(steps: int, namespaces: bool) -> Lockstep:
    """``steps`` engine steps through a lockstep of the spec and impl, its events taken after every change."""
    spaces = (None, "tenant", 7) if namespaces else (None,)
    pair = Lockstep(SpecCache(2), RadixCache(2), take_every=1)
    engine = Engine(pair, Workload(block_size=2, pool_size=48, namespaces=spaces), prompt_seed=3)
    rng = random.Random(3)
    for _ in range(steps):
        engine.step(rng)
    engine.drain()
    return pair


@pytest.mark.parametrize("namespaces", [False, True], ids=["default namespace", "three namespaces"])
def test_the_recorded_steps_are_the_trace_the_calls_make_on_a_fresh_spec(namespaces: bool) -> None:
    """Every step, read late, holds the call and the spec's result as a fresh spec writes it at once (``record``)."""
    pair = engine_run(1500, namespaces)
    calls = pair.steps.calls
    assert len(pair.steps) == len(calls) > 3000 and {"match", "insert", "evict", "take_events"} <= {call.op for call in calls}
    eager = record(2, calls, SpecCache(2))
    assert pair.trace().text() == eager.text()
    assert pair.steps[-1] == eager.steps[-1] and pair.steps[-3:] == list(eager.steps[-3:])
    with pytest.raises(IndexError):
        pair.steps[len(calls)]


def test_a_disagreement_writes_the_recorded_steps_with_their_results() -> None:
    """The counterexample a disagreement carries is written from the recorded outcomes, the last call's too."""

    class CountsOneMore(RadixCache):
        def cached_blocks(self) -> int:
            return super().cached_blocks() + (1 if super().cached_blocks() >= 6 else 0)

    pair = Lockstep(SpecCache(2), CountsOneMore(2))
    with pytest.raises(Disagreement) as raised:
        for size in range(1, 10):
            pair.insert(list(range(100 * size, 100 * size + 2 * size)), list(range(10 * size, 10 * size + size)))
            pair.cached_blocks()
    lines = raised.value.trace.text().splitlines()
    assert lines[-1].startswith("cached_blocks -> ") and raised.value.got == str(int(raised.value.expected) + 1)
    assert any(line.startswith("n1 = insert [100 101] [10] -> new []") for line in lines)


STORED = BlockStored(None, (1, 2, 3, 4), (10, 11), None)
PLAIN_EVENTS: list[list[KVEvent]] = [
    [],
    [STORED, BlockRemoved((11, 10))],
    [BlockStored(10, (5, 6), (12,), "tenant"), BlockStored(None, (7, 8), (13,), 4)],
    [BlockStored(None, (1, 2), (14,), ("a", 1)), BlockStored(14, (3, 4), (15,), (None, "7", 7))],
]


@pytest.mark.parametrize("events", PLAIN_EVENTS, ids=["none", "stored and removed", "namespaced", "tuple namespaces"])
def test_plain_events_are_written_as_render_result_writes_them(events: list[KVEvent]) -> None:
    assert plain_value(TAKE, events)
    assert render_plain(TAKE, events, "") == render_result(TAKE, events, lambda node: "")


NOT_PLAIN: list[object] = [
    [dataclasses.replace(STORED, tokens=(1, 2, True, 4))],  # a bool, written True
    [dataclasses.replace(STORED, blocks=[10, 11])],  # type: ignore[arg-type]  # a list where the interface has a tuple
    [dataclasses.replace(STORED, namespace=("a", True))],  # a tuple namespace with a part of another type: written to compare
    [dataclasses.replace(STORED, parent=True)],
    (STORED,),  # a tuple of events, not a list
    [BlockRemoved((1.0,))],  # type: ignore[arg-type]
]


@pytest.mark.parametrize("value", NOT_PLAIN, ids=["bool token", "list of blocks", "tuple namespace", "bool parent", "tuple", "float id"])
def test_events_of_other_types_are_not_plain(value: object) -> None:
    assert not plain_value(TAKE, value)


def test_events_agree_by_value_or_as_text_however_cut_and_differ_otherwise() -> None:
    """Equal plain events agree without their text; events cut into other blocks still agree as text (R13); other
    events differ (the negative control: one block id changed)."""
    spec = Outcome(None, [STORED], None, TAKE, "", plain=True)
    assert same_result(spec, Outcome(None, [STORED], None, TAKE, "", plain=True))
    cut = [BlockStored(None, (1, 2), (10,), None), BlockStored(10, (3, 4), (11,), None)]
    assert same_result(spec, Outcome(None, cut, None, TAKE, "", plain=True))
    other = [dataclasses.replace(STORED, blocks=(10, 12))]
    assert not same_result(spec, Outcome(None, other, None, TAKE, "", plain=True))


def test_events_of_tuple_namespaces_whose_texts_coincide_differ() -> None:
    """Plain tuple namespaces compare by value: ``(7,)`` and ``("7",)``, or ``("t", "71")`` and ``("t7", "1")``, are
    other tenants (R12), whose events differ; the same tenant's events, cut otherwise, agree as text."""
    for mine, theirs in (((7,), ("7",)), (("t", "71"), ("t7", "1"))):
        spec = Outcome(None, [dataclasses.replace(STORED, namespace=mine)], None, TAKE, "", plain=True)
        assert not same_result(spec, Outcome(None, [dataclasses.replace(STORED, namespace=theirs)], None, TAKE, "", plain=True))
        cut = [BlockStored(None, (1, 2), (10,), mine), BlockStored(10, (3, 4), (11,), mine)]
        assert same_result(spec, Outcome(None, cut, None, TAKE, "", plain=True))


STATS = BY_METHOD["stats"]
RATE = BY_METHOD["hit_rate"]


@pytest.mark.parametrize(
    "kind, value",
    [(STATS, PrefixStats(3, 40, 12, 9, 2)), (STATS, PrefixStats(0, 0, 0, 0, 0)), (RATE, 0.3), (RATE, 0.0), (RATE, -0.0), (RATE, float("nan"))],
    ids=["stats", "zero stats", "rate", "zero rate", "negative zero", "nan"],
)
def test_plain_counters_and_rates_are_written_as_render_result_writes_them(kind: CallKind, value: object) -> None:
    assert plain_value(kind, value)
    assert render_plain(kind, value, "") == render_result(kind, value, lambda node: "")


@pytest.mark.parametrize(
    "kind, value",
    [(STATS, PrefixStats(3, 40, True, 9, 2)), (STATS, (3, 40, 12, 9, 2)), (RATE, 0), (RATE, True), (RATE, "0.5")],
    ids=["bool counter", "tuple of counters", "int rate", "bool rate", "str rate"],
)
def test_counters_and_rates_of_other_types_are_not_plain(kind: CallKind, value: object) -> None:
    assert not plain_value(kind, value)


def test_counters_and_rates_agree_by_value_or_as_text_and_differ_otherwise() -> None:
    """Equal counters agree without their text, one counter off differs (the negative control); rates within 1e-12
    agree as text, as two engines' float printing may differ, and a rate farther off differs."""
    counters = Outcome(None, PrefixStats(3, 40, 12, 9, 2), None, STATS, "", plain=True)
    assert same_result(counters, Outcome(None, PrefixStats(3, 40, 12, 9, 2), None, STATS, "", plain=True))
    assert not same_result(counters, Outcome(None, PrefixStats(3, 40, 12, 9, 3), None, STATS, "", plain=True))
    rate = Outcome(None, 0.3, None, RATE, "", plain=True)
    assert same_result(rate, Outcome(None, 0.1 + 0.2, None, RATE, "", plain=True))
    assert same_result(Outcome(None, 0.0, None, RATE, "", plain=True), Outcome(None, -0.0, None, RATE, "", plain=True))
    assert not same_result(rate, Outcome(None, 0.31, None, RATE, "", plain=True))
