"""Python caches that misbehave as programs or answer with the wrong types: what ``prefixspec check`` must survive.

Each is ``impl.RadixCache`` with one thing wrong, named by its factory, so
``prefixspec check stateful_tests.hostile_targets:NAME`` (or ``replay --target``)
runs it.  ``HOSTILE`` maps every factory name to the outcome the command
line documents for it (``stateful_tests/test_robustness.py`` asserts it,
``stateful_tests/test_fuzz.py`` runs them all).  A misbehaviour at import
time is ``stateful_tests/hostile_import.py``'s.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from impl import RadixCache
from spec.api import Namespace, BlockId, Inserted, NodeId, NodeView, PrefixMatch, PrefixStats, Snapshot
from stateful_tests.hostile_dunders import DUNDERS

PRINTED = "a line the cache printed on stdout " * 4
"""What ``prints_in_every_call`` prints, about 140 characters a call."""


class OwnBaseException(BaseException):
    """An exception a cache invents beside Exception: it is still an answer, to be compared."""


class UnprintableError(RuntimeError):
    """An error whose message cannot be made into text."""

    def __str__(self) -> str:
        raise ValueError("no message for you")


class InterruptsInStats(RadixCache):
    def stats(self) -> PrefixStats:
        raise KeyboardInterrupt


class ExitsInStats(RadixCache):
    def stats(self) -> PrefixStats:
        sys.exit(3)


class ExitsZeroInEvict(RadixCache):
    def evict(self, n_blocks: int) -> list[BlockId]:
        sys.exit(0)


class BaseExceptionInEvict(RadixCache):
    def evict(self, n_blocks: int) -> list[BlockId]:
        raise OwnBaseException("evict gave up")


class GeneratorExitInEvict(RadixCache):
    def evict(self, n_blocks: int) -> list[BlockId]:
        raise GeneratorExit


class RootRaises(RadixCache):
    @property
    def root(self) -> NodeId:
        raise RuntimeError("the root is not ready")


class RootInterrupts(RadixCache):
    @property
    def root(self) -> NodeId:
        raise KeyboardInterrupt


class HangsInStats(RadixCache):
    def stats(self) -> PrefixStats:
        time.sleep(3600)
        return super().stats()


class PrintsInEveryCall(RadixCache):
    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        print(PRINTED)
        return super().match_prefix(tokens, namespace)

    def stats(self) -> PrefixStats:
        print(PRINTED)
        return super().stats()


# The wrong types below are the point: each cast tells mypy what the interface
# promises, and the checker must see through it.


class EvictReturnsGenerator(RadixCache):
    def evict(self, n_blocks: int) -> list[BlockId]:
        freed = super().evict(n_blocks)
        return cast(list[BlockId], (block for block in freed))


class EvictReturnsTuple(RadixCache):
    def evict(self, n_blocks: int) -> list[BlockId]:
        return cast(list[BlockId], tuple(super().evict(n_blocks)))


class CachedBlocksFloat(RadixCache):
    def cached_blocks(self) -> int:
        return cast(int, float(super().cached_blocks()))


class BlockSizeText(RadixCache):
    def block_size(self) -> int:
        return cast(int, "two")


class SnapshotNone(RadixCache):
    def snapshot(self) -> Snapshot:
        return cast(Snapshot, None)


class SnapshotDict(RadixCache):
    def snapshot(self) -> Snapshot:
        return cast(Snapshot, {"nodes": []})


class RaisingEquality(Snapshot):
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("cannot compare")

    __hash__ = Snapshot.__hash__


class SnapshotEqualityRaises(RadixCache):
    def snapshot(self) -> Snapshot:
        real = super().snapshot()
        return RaisingEquality(real.block_size, real.nodes, real.stats)


class SnapshotNodesNone(RadixCache):
    def snapshot(self) -> Snapshot:
        real = super().snapshot()
        return Snapshot(real.block_size, cast(tuple[NodeView, ...], None), real.stats)


class UnprintableErrorInMatch(RadixCache):
    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        raise UnprintableError


class RecursesInMatch(RadixCache):
    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        return self.match_prefix(tokens, namespace)


class MemoryErrorInInsert(RadixCache):
    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        raise MemoryError("out of KV blocks")


HUGE = 25 << 20
"""Characters of a huge answer (25 MiB): a message, or the text of a result, far past any line a report holds."""


class HugeMessageInMatch(RadixCache):
    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        raise ValueError("m" * HUGE)


_HUGE_ID = 10**18
_HUGE_IDS = [_HUGE_ID] * (HUGE // len(f"{_HUGE_ID} "))
"""HUGE characters as text in 1.3 million ids, made once: the call itself stays fast, under any --timeout."""


class HugeResultInEvict(RadixCache):
    def evict(self, n_blocks: int) -> list[BlockId]:
        return super().evict(n_blocks) + _HUGE_IDS


class _AttributesRaise(RadixCache):
    """Every attribute that is not the interface's raises (``prefixspec_features``, ``take_events``): a cache with a hostile ``__getattr__``."""

    def __getattr__(self, name: str) -> object:
        raise RuntimeError(f"no {name} here")

    def __getattribute__(self, name: str) -> object:
        # impl declares its features on the class, where __getattr__ is never asked: ask it, as a cache without them would
        if name == "prefixspec_features":
            raise RuntimeError(f"no {name} here")
        return super().__getattribute__(name)


def _factory(cache: type[RadixCache]) -> Callable[[int], RadixCache]:
    def factory(block_size: int) -> RadixCache:
        return cache(block_size)

    factory.__name__ = cache.__name__
    return factory


def interrupts_in_factory(block_size: int) -> RadixCache:
    raise KeyboardInterrupt


def exits_in_factory(block_size: int) -> RadixCache:
    sys.exit(4)


def hangs_in_factory(block_size: int) -> RadixCache:
    time.sleep(3600)
    return RadixCache(block_size)


_caches_made = itertools.count(1)


def fails_after_two_caches(block_size: int) -> RadixCache:
    """Makes the sample cache the loading asks for and one more, then raises for good."""
    made = next(_caches_made)
    if made > 2:
        raise ValueError(f"cache {made} is one too many")
    return RadixCache(block_size)


def returns_none(block_size: int) -> None:
    return None


@dataclass(frozen=True)
class Hostile:
    """A misbehaving target and what ``prefixspec check`` documents for it."""

    factory: Callable[[int], object]
    status: int
    """Exit status of ``prefixspec check`` (and of ``replay --target`` of the golden trace)."""
    words: str
    """Words the report (stdout) or the one-line error (stderr) holds."""
    checked: bool = True
    """The fuzz runs ``check`` of it too, not only ``replay`` (False: the replay shows the same guard, a check
    of it costs minutes, as a 25 MiB answer does in every stage, or tens of seconds a case, for a family of many)."""


HOSTILE: dict[str, Hostile] = {
    "interrupts_in_stats": Hostile(_factory(InterruptsInStats), 1, "raised KeyboardInterrupt though nobody pressed Ctrl-C"),
    "interrupts_in_factory": Hostile(interrupts_in_factory, 2, "raised KeyboardInterrupt though nobody pressed Ctrl-C"),
    "root_interrupts": Hostile(_factory(RootInterrupts), 2, "raised KeyboardInterrupt"),
    "exits_in_stats": Hostile(_factory(ExitsInStats), 1, "called sys.exit(3)"),
    "exits_zero_in_evict": Hostile(_factory(ExitsZeroInEvict), 1, "called sys.exit(0)"),
    "exits_in_factory": Hostile(exits_in_factory, 2, "called sys.exit(4)"),
    "base_exception_in_evict": Hostile(_factory(BaseExceptionInEvict), 1, "crash OwnBaseException: evict gave up"),
    "generator_exit_in_evict": Hostile(_factory(GeneratorExitInEvict), 1, "crash GeneratorExit"),
    "root_raises": Hostile(_factory(RootRaises), 2, "raised RuntimeError: the root is not ready"),
    "hangs_in_stats": Hostile(_factory(HangsInStats), 1, "hangs: its"),
    "hangs_in_factory": Hostile(hangs_in_factory, 2, "did not return within"),
    "prints_in_every_call": Hostile(_factory(PrintsInEveryCall), 0, "every result and snapshot agrees"),
    "evict_returns_generator": Hostile(_factory(EvictReturnsGenerator), 1, "evict returned a generator"),
    "evict_returns_tuple": Hostile(_factory(EvictReturnsTuple), 1, "evict returned a tuple"),
    "cached_blocks_float": Hostile(_factory(CachedBlocksFloat), 1, "cached_blocks returned a float"),
    "block_size_text": Hostile(_factory(BlockSizeText), 1, "block_size returned a str"),
    "snapshot_none": Hostile(_factory(SnapshotNone), 1, "snapshot returned NoneType"),
    "snapshot_dict": Hostile(_factory(SnapshotDict), 1, "snapshot returned dict"),
    "snapshot_equality_raises": Hostile(_factory(SnapshotEqualityRaises), 1, "snapshot returned RaisingEquality, not a Snapshot"),
    "snapshot_nodes_none": Hostile(_factory(SnapshotNodesNone), 1, "snapshot"),
    "unprintable_error_in_match": Hostile(_factory(UnprintableErrorInMatch), 1, "crash UnprintableError"),
    "recurses_in_match": Hostile(_factory(RecursesInMatch), 1, "crash RecursionError"),
    "memory_error_in_insert": Hostile(_factory(MemoryErrorInInsert), 1, "ran out of memory (MemoryError) in its insert()"),
    "fails_after_two_caches": Hostile(fails_after_two_caches, 1, "when asked for a cache"),
    "returns_none": Hostile(returns_none, 2, "lacks"),
    "huge_message_in_match": Hostile(_factory(HugeMessageInMatch), 1, "more characters cut", checked=False),
    "huge_result_in_evict": Hostile(_factory(HugeResultInEvict), 1, "more characters cut", checked=False),
    "attributes_raise": Hostile(_factory(_AttributesRaise), 2, "RuntimeError: no prefixspec_features here"),
}
"""Every misbehaving target by factory name, with its documented outcome."""


# By replay alone in the fuzz: the guard is the same in a check, and the family is 18 cases.
HOSTILE.update({name: Hostile(factory, status, words, checked=False) for name, (factory, status, words) in DUNDERS.items()})


def __getattr__(name: str) -> Callable[[int], object]:
    """``hostile_targets:NAME`` finds the factory of ``HOSTILE[NAME]``."""
    if name in HOSTILE:
        return HOSTILE[name].factory
    raise AttributeError(name)


# Ends of the process itself: what only a supervised run survives ---------------------------------------

ENDS = ("exit0", "exit3", "kill", "abort", "c_exit", "oom", "sigterm", "sigint", "close_stdout", "mask_alarm", "retry_alarm", "thread_prints", "chdir", "wait")
"""What ``ends_its_process`` does when its moment comes (``HOSTILE_END``): ``os._exit(0)``, ``os._exit(3)``, SIGKILL
to itself, ``os.abort()``, the C library's ``exit(0)``, running out of memory (``hostile_memory``), SIGTERM or SIGINT to itself (a stop the user never sent), closing fd 1 (then answering on), blocking SIGALRM and
sleeping, sleeping in a loop that swallows every exception, a thread that prints 1,000 lines, a ``chdir``, writing
the file ``HOSTILE_MARK`` names and sleeping (for a test to stop the run there)."""


def _end_process(how: str) -> None:
    import ctypes
    import faulthandler
    import os
    import signal
    import threading

    if how == "exit0":
        os._exit(0)
    if how == "exit3":
        os._exit(3)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "abort":
        faulthandler.disable()  # the abort is planted: the test wants its signal, not a dump of its stack on the log
        os.abort()
    if how in ("sigterm", "sigint"):
        os.kill(os.getpid(), signal.SIGTERM if how == "sigterm" else signal.SIGINT)
    if how == "c_exit":
        ctypes.CDLL(None).exit(0)
    if how == "oom":
        from stateful_tests.hostile_memory import run_out_of_memory

        run_out_of_memory()
    if how == "close_stdout":
        os.close(1)
    if how == "mask_alarm":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(3600)
    if how == "retry_alarm":
        while True:
            try:
                time.sleep(3600)
            except BaseException:  # noqa: B036 - a target that swallows the checker's alarm on purpose
                pass
    if how == "thread_prints":
        def chatter() -> None:
            for number in range(1000):
                print(f"a line the target's thread printed, number {number}")

        threading.Thread(target=chatter, daemon=True).start()
    if how == "chdir":
        os.chdir("/")
    if how == "wait":
        written = f"{os.environ['HOSTILE_MARK']}.{os.getpid()}.part"  # its own: under -j two workers may wait at once
        with open(written, "w", encoding="utf-8") as mark:
            mark.write(str(os.getpid()))
        os.replace(written, os.environ["HOSTILE_MARK"])  # whole or not there: a test that sees it reads the pid
        time.sleep(3600)


class _EndsItsProcess(RadixCache):
    """impl.RadixCache that does ``HOSTILE_END`` at its first ``match_prefix`` once the run is in ``HOSTILE_STAGE``."""

    done = False

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        if not _EndsItsProcess.done and _in_stage():
            _EndsItsProcess.done = True
            _end_process(_setting("HOSTILE_END"))
        return super().match_prefix(tokens, namespace)


def _setting(name: str) -> str:
    import os

    return os.environ.get(name, "")


def _in_stage() -> bool:
    from prefixspec.targets.beacon import current

    wanted = _setting("HOSTILE_STAGE") or "golden trace"
    beacon = current()
    return beacon is not None and beacon.read().stage.startswith(wanted)


def ends_its_process(block_size: int) -> RadixCache:
    """``HOSTILE_STAGE=factory`` ends it in the factory (when the target is loaded), else in a call of that stage."""
    if _setting("HOSTILE_STAGE") == "factory":
        _end_process(_setting("HOSTILE_END"))
    return _EndsItsProcess(block_size)


class _EndsWhileShrinking(RadixCache):
    """Wrong at once (a hit rate off by a half), and ends its process in the first cache made after the disagreement was seen."""

    caches = 0

    def __init__(self, block_size: int) -> None:
        super().__init__(block_size)
        _EndsWhileShrinking.caches += 1
        if _EndsWhileShrinking.caches == 4:  # the sample, the golden trace's own, its replay: the next is the shrinker's
            _end_process(_setting("HOSTILE_END") or "exit0")

    def hit_rate(self) -> float:
        return super().hit_rate() + 0.5


def ends_while_shrinking(block_size: int) -> RadixCache:
    return _EndsWhileShrinking(block_size)


def attributes_raise(block_size: int) -> RadixCache:
    return _AttributesRaise(block_size)
