"""The conformance state machines: any cache against the spec, call by call.

Two Hypothesis machines, each built for a cache factory (``factory(block_size)``
returns a fresh ``PrefixCache``):

- ``call_machine(factory)`` (``drive.call_machine``): the calls themselves,
  in any order and with bad arguments: matches and inserts of prompts that
  share, extend and diverge, correct, duplicate and wrong block lists, locks
  and unlocks of handles old and new (including evicted ones), evictions of
  every size, the counters.  Its rules come in groups (``drive.call_rules``)
  over one state (``drive.call_state``).
- ``engine_machine(factory)`` (``drive.engine_machine``): an engine's block
  manager (``drive.engine``) over a pool of 64 block ids, in seeded bursts.

Both drive a ``Lockstep`` of the spec and the cache, so every result, error
and snapshot is compared after every call, and a failure carries the calls
that led to it as a trace.  ``RunTally`` (``drive.tallies``) counts what was
run and checked; what the machines draw is in ``drive.draws``.  This module
is their face: the names the stages and the tests import.
"""

from __future__ import annotations

from prefixspec.drive.call_machine import call_machine
from prefixspec.drive.call_state import NodePair, note_passed_back
from prefixspec.drive.draws import NAMESPACE_PAIRS, namespace_population
from prefixspec.drive.engine_machine import engine_machine
from prefixspec.drive.tallies import (
    BURST_STEPS,
    CALLS_PER_EXAMPLE,
    ENGINE_STEPS_PER_EXAMPLE,
    RunTally,
    attach_trace,
    call_machine_examples,
    engine_bursts,
)

__all__ = [
    "BURST_STEPS",
    "CALLS_PER_EXAMPLE",
    "ENGINE_STEPS_PER_EXAMPLE",
    "NAMESPACE_PAIRS",
    "NodePair",
    "RunTally",
    "attach_trace",
    "call_machine",
    "call_machine_examples",
    "engine_bursts",
    "engine_machine",
    "namespace_population",
    "note_passed_back",
]
