"""The cycle collector during a machine stage: the heap before it frozen out, and collected in larger steps.

A machine stage allocates a few dozen small objects a call (calls, steps, results, snapshots) that reference
counting frees, and few cycles: with the default thresholds the collector ran some 480 times in a ci engine
machine run of 15,000 steps, each oldest-generation pass through the whole heap of the interpreter, Hypothesis
and the target (the interpreter's gc callbacks: 0.20-0.24 s of 4.2 CPU s).  Frozen out (``gc.freeze``) and with a
young generation of ``YOUNG`` objects, the same run spends 0.09 s.  Nothing is left uncollected for long: what the
stage makes is collected as before, only less often, and the frozen heap is the one the process had before the
stage (it goes back to the collector after it).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG = 5000
"""Allocations between two collections of the youngest generation during a stage (the interpreter's default is 700)."""


@contextmanager
def collector_spared() -> Iterator[None]:
    """Within the block: the heap so far frozen out of the collector, the young generation ``YOUNG``; as before after it.

    A heap someone else froze (an adapter that freezes its engine's import, as vLLM's engine does) stays frozen:
    only what this block froze is given back."""
    thresholds = gc.get_threshold()
    frozen_before = gc.get_freeze_count()
    gc.freeze()
    gc.set_threshold(max(YOUNG, thresholds[0]), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if frozen_before == 0:
            gc.unfreeze()
