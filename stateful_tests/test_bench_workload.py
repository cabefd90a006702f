"""bench's workload is a trace of the checker's format: the checker replays it, and both replays find a planted error.

The benchmark records its engine's calls on a reference cache as a ``prefixspec.formats.trace.Trace``
(``bench.workload``), and times them with its own replay (``bench.replay``), which writes and compares
each result as the trace does.  Neither needs SGLang, so these run in ``make test``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from bench.replay import ApiAdapter, replay
from bench.workload import SMALL_IN_FLIGHT, Recording, Shape, record
from impl import RadixCache
from prefixspec.formats.trace import parse_trace
from prefixspec.formats.trace import replay as replay_trace
from spec.api import RULE_PRESETS

TINY = Shape("tiny", pool_blocks=512, requests=60, in_flight=4)
"""Small enough that its pool is short: evictions, duplicates and shared prefixes all occur."""


def tiny_recording(shape: Shape = TINY) -> Recording:
    return record(shape, RadixCache(shape.block_size), rule="spec", reference="impl.RadixCache", rules=RULE_PRESETS["strict"])


def test_the_recording_is_a_trace_the_checker_replays() -> None:
    recording = tiny_recording()
    ops = Counter(step.call.op for step in recording.trace.steps)
    assert ops["match"] == ops["insert"] == ops["lock"] == ops["unlock"] == TINY.requests and ops["evict"] > 0
    assert recording.duplicates > 0, "requests in flight compute the same blocks"
    assert replay_trace(recording.trace, RadixCache(TINY.block_size)) is None
    again = parse_trace(recording.trace.text())
    assert [step.text() for step in again.steps] == [step.text() for step in recording.trace.steps]


def test_the_timed_replay_agrees_with_its_reference() -> None:
    recording = tiny_recording()
    result = replay(recording, ApiAdapter("impl", RadixCache, TINY.block_size))
    assert result.divergence is None and result.calls == len(recording)
    assert sum(result.count.values()) == len(recording)


def test_both_replays_find_a_planted_wrong_result() -> None:
    """Negative control: one evict's expected ids changed; the checker's replay and bench's stop at that line."""
    recording = tiny_recording()
    steps = list(recording.trace.steps)
    index = next(i for i, step in enumerate(steps) if step.call.op == "evict" and step.expected != "[]")
    steps[index] = dataclasses.replace(steps[index], expected="[99999]")
    planted = dataclasses.replace(recording, trace=dataclasses.replace(recording.trace, steps=steps))
    found = replay_trace(planted.trace, RadixCache(TINY.block_size))
    assert found is not None and found.line == steps[index].line
    timed = replay(planted, ApiAdapter("impl", RadixCache, TINY.block_size))
    assert timed.divergence is not None and timed.divergence.line == steps[index].line and timed.calls == index


def test_a_node_other_than_the_recorded_one_is_a_divergence() -> None:
    """Negative control: a match that found a new node is recorded as ending at an earlier call's; the replay says so."""
    recording = tiny_recording(dataclasses.replace(SMALL_IN_FLIGHT, requests=20))
    steps = list(recording.trace.steps)
    index = next(i for i, step in enumerate(steps) if i > 0 and step.call.op == "match" and (step.expected or "").endswith(" new"))
    earlier = steps[0].call.name
    words = (steps[index].expected or "").split()
    steps[index] = dataclasses.replace(steps[index], expected=" ".join([*words[:-1], earlier]))
    planted = dataclasses.replace(recording, trace=dataclasses.replace(recording.trace, steps=steps))
    timed = replay(planted, ApiAdapter("impl", RadixCache, 16))
    assert timed.divergence is not None and timed.divergence.line == steps[index].line
    assert timed.divergence.expected.endswith(earlier) and timed.divergence.got.endswith(" new")
