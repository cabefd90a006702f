"""A target module that misbehaves while it is imported, as ``HOSTILE_IMPORT`` says: what loading a target must survive.

    HOSTILE_IMPORT=exit prefixspec check stateful_tests.hostile_import:make_cache

``exit`` calls ``sys.exit(5)``, ``interrupt`` raises ``KeyboardInterrupt``,
``base`` raises a ``BaseException`` of its own, ``os_exit0`` calls ``os._exit(0)``, ``kill`` sends itself SIGKILL, ``print`` prints to stdout
(and then imports fine); unset, the module is a plain ``impl.RadixCache``
factory.
"""

from __future__ import annotations

import os
import sys

from impl import RadixCache

BEHAVIOUR = os.environ.get("HOSTILE_IMPORT", "")

PRINTED_AT_IMPORT = "stateful_tests.hostile_import: printed while it was imported"

OUTCOMES: dict[str, tuple[int, str]] = {
    "exit": (2, "called sys.exit(5)"),
    "os_exit0": (2, "exited with status 0"),
    "kill": (2, "killed by signal SIGKILL"),
    "interrupt": (2, "raised KeyboardInterrupt though nobody pressed Ctrl-C"),
    "base": (2, "raised ImportTimeBaseException"),
    "print": (0, "every result and snapshot agrees"),
}
"""Each behaviour and the exit status and words ``prefixspec replay GOLDEN --target`` documents for it."""


class ImportTimeBaseException(BaseException):
    """Raised by the import itself under ``HOSTILE_IMPORT=base``."""


if BEHAVIOUR == "exit":
    sys.exit(5)
if BEHAVIOUR == "os_exit0":
    os._exit(0)
if BEHAVIOUR == "kill":
    os.kill(os.getpid(), 9)
if BEHAVIOUR == "interrupt":
    raise KeyboardInterrupt
if BEHAVIOUR == "base":
    raise ImportTimeBaseException("no import today")
if BEHAVIOUR == "print":
    print(PRINTED_AT_IMPORT)


def make_cache(block_size: int) -> RadixCache:
    return RadixCache(block_size)
