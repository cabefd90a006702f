"""A guarded cache that a lockstep compares by digest after every call reads the digest in the call's own run.

- One guarded run a call, where there were two (the call's, then the digest's): counted by the guard's runs.
  Control: a lockstep that compares only every second call reads the digest in a run of its own, as before.
- What the digest does is still said as the digest's: a digest that raises is a disagreement on the snapshot
  digest (R11), one that hangs is reported as ``its snapshot_digest()`` after the call, under a time limit of
  its own; a digest that returns no int is said so.
- A call the spec refuses gives no answer to read it with: its digest is read apart, so a refused call that
  changed the cache still breaks R10.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from impl import RadixCache
from spec.api import BlockId, InvalidArgument
from spec.model import SpecCache
from prefixspec.compare.lockstep import Disagreement, Lockstep
from prefixspec.targets.guard import Guard, TargetHung
from prefixspec.targets.guarded import guarded


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What every guarded run was for (``its match_prefix()`` ...), in order."""
    made: list[str] = []
    real = Guard.run

    def counted(self: Guard, what: str, *arguments: object, **named: object) -> object:
        made.append(what)
        return real(self, what, *arguments, **named)  # type: ignore[arg-type]

    monkeypatch.setattr(Guard, "run", counted)
    yield made


def engine_calls(pair: Lockstep) -> int:
    """A few calls of every kind an engine makes, on ``pair``; how many."""
    found = pair.match_prefix([1, 2, 3, 4, 5])
    pair.lock(found.node)
    inserted = pair.insert([1, 2, 3, 4, 5], [1, 2])
    pair.lock(inserted.node)
    pair.unlock(found.node)
    pair.unlock(inserted.node)
    pair.cached_blocks()
    pair.evict(1)
    pair.stats()
    return 9


def test_each_call_and_its_digest_are_one_guarded_run(runs: list[str]) -> None:
    pair = Lockstep(SpecCache(2), guarded(RadixCache, "impl:RadixCache", 5.0)(2), take_every=None)
    pair.insert([7, 7], [9])  # the first comparison, a full one (it builds the snapshots), out of the count
    del runs[:]
    calls = engine_calls(pair)
    assert len(runs) == calls and "its snapshot_digest()" not in runs, runs
    assert pair.digests.comparisons == calls and pair.digests.misses == 0


def test_control_a_lockstep_that_compares_every_second_call_reads_the_digest_apart(runs: list[str]) -> None:
    pair = Lockstep(SpecCache(2), guarded(RadixCache, "impl:RadixCache", 5.0)(2), take_every=None, snapshot_every=2)
    pair.insert([7, 7], [9])
    del runs[:]
    calls = engine_calls(pair)
    assert runs.count("its snapshot_digest()") >= calls // 2 - 1, runs  # a full comparison (its snapshot()) reads none
    assert len([what for what in runs if what not in ("its snapshot_digest()", "its snapshot()")]) == calls, runs


class Digest(RadixCache):
    """impl whose digest, once ``broken``, raises, hangs or returns a str."""

    broken = ""

    def snapshot_digest(self) -> int:
        if self.broken == "raises":
            raise ValueError("no digest today")
        if self.broken == "hangs":
            time.sleep(5)
        if self.broken == "str":
            return "0"  # type: ignore[return-value]  # the target's mistake under test
        return super().snapshot_digest()


def broken_after_a_call(how: str, timeout: float = 5.0) -> Lockstep:
    """A lockstep over a guarded ``Digest`` whose digest breaks after its first compared call."""
    pair = Lockstep(SpecCache(2), guarded(Digest, "digest:Digest", timeout)(2), take_every=None)
    pair.insert([7, 7], [9])
    pair.match_prefix([7, 7, 1])
    Digest.broken = how
    return pair


@pytest.fixture(autouse=True)
def mended() -> Iterator[None]:
    yield
    Digest.broken = ""


def test_a_digest_that_raises_is_a_disagreement_on_the_digest() -> None:
    pair = broken_after_a_call("raises")
    with pytest.raises(Disagreement, match="R11, the snapshot") as raised:
        pair.cached_blocks()
    assert raised.value.kind == "snapshot digest" and "ValueError" in raised.value.got and "cached_blocks" in raised.value.last_call


def test_a_digest_that_returns_no_int_is_said_so() -> None:
    pair = broken_after_a_call("str")
    with pytest.raises(Disagreement) as raised:
        pair.cached_blocks()
    assert "snapshot_digest returned str, not an int" in raised.value.got


def test_a_digest_that_hangs_is_reported_as_the_digest_after_its_call() -> None:
    pair = broken_after_a_call("hangs", timeout=0.3)
    with pytest.raises(TargetHung) as raised:
        pair.cached_blocks()
    report = str(raised.value)
    assert "hangs: its snapshot_digest() did not return within 0.3 s" in report, report
    assert "after call 3 to a cache of block size 2" in report, report
    assert "cached_blocks" not in report


class ChangedByARefusal(RadixCache):
    """impl whose refused evict (of a negative count) evicts a block before it refuses."""

    def evict(self, n_blocks: int) -> list[BlockId]:
        if n_blocks < 0:
            super().evict(1)
            raise InvalidArgument(f"cannot evict {n_blocks} blocks")
        return super().evict(n_blocks)


def test_a_refused_call_reads_its_digest_apart_and_still_breaks_r10(runs: list[str]) -> None:
    pair = Lockstep(SpecCache(2), guarded(ChangedByARefusal, "refusal:ChangedByARefusal", 5.0)(2), take_every=None)
    pair.insert([7, 7], [9])
    del runs[:]
    with pytest.raises(Disagreement, match="R10, a refused call changes nothing"):
        pair.evict(-1)
    assert runs[:2] == ["its evict()", "its snapshot_digest()"], runs
