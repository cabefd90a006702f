"""A target's process that runs out of memory: the address space capped a little above what it uses, then filled.

What a cache meets under ``ulimit -v`` or a container's limit when a prompt's blocks do not fit: ``MemoryError`` in
the middle of a call.  The cap stays on the process afterwards, as it would, and what was allocated before the
failure stays held by the cache, so the checker must report with the little memory left.
"""

from __future__ import annotations

import resource

HEADROOM = 16 << 20
"""Bytes above the process's size at the moment the cap is set: room for the checker's report, not for the hoard."""

hoard: list[bytearray] = []
"""What the target allocated; kept, so that freeing it cannot be what saves the checker."""


def run_out_of_memory() -> None:
    """Cap this process's address space at its size plus ``HEADROOM``, then allocate a MiB at a time until MemoryError."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        size = int(statm.read().split()[0]) * resource.getpagesize()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (size + HEADROOM, hard))
    while True:
        hoard.append(bytearray(1 << 20))
