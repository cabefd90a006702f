"""R12 namespaces and R13 events: the spec's own laws, the text that carries them, and the checks that catch their bugs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import impl
from spec.api import BlockRemoved, BlockStored, InvalidArgument, KVEvent, Namespace, NodeView, PrefixStats, Snapshot
from spec.model import SpecCache
from prefixspec.commands.main import main
from prefixspec.formats.protocol import greeting, parse_greeting, parse_snapshot, render_snapshot
from prefixspec.compare.lockstep import Disagreement, Lockstep
from prefixspec.drive.machines import NAMESPACE_PAIRS
from prefixspec.compare.mirror import Mirror, MirrorError
from prefixspec.vocabulary import features_of

CACHES = {"spec": SpecCache, "impl": impl.RadixCache}


@pytest.mark.parametrize("make", CACHES.values(), ids=CACHES.keys())
@pytest.mark.parametrize("pair", NAMESPACE_PAIRS, ids=repr)
def test_namespaces_that_alias_when_written_carelessly_share_nothing(make: type[SpecCache], pair: tuple[Namespace, Namespace]) -> None:
    first, second = pair
    cache = make(2)
    cache.insert([1, 2, 3, 4], [10, 11], namespace=first)
    assert cache.match_prefix([1, 2, 3, 4, 5], namespace=second).blocks == []  # no match across
    with pytest.raises(InvalidArgument):  # one pool of ids (R5 across namespaces)
        cache.insert([1, 2, 3, 4], [10, 11], namespace=second)
    cache.insert([1, 2, 9, 9], [20, 21], namespace=second)
    assert cache.match_prefix([1, 2, 3, 4, 5], namespace=first).blocks == [10, 11]  # no split across either
    assert {view.namespace for view in cache.snapshot().nodes} == {first, second}


@pytest.mark.parametrize("make", CACHES.values(), ids=CACHES.keys())
@pytest.mark.parametrize("bad", [True, 1.0, [1], ("a", ("b",)), {"a": 1}, b"a"], ids=repr)
def test_a_value_that_is_no_namespace_is_refused(make: type[SpecCache], bad: object) -> None:
    cache = make(2)
    with pytest.raises(InvalidArgument):
        cache.match_prefix([1, 2, 3], namespace=bad)  # type: ignore[arg-type]
    assert cache.stats() == PrefixStats(0, 0, 0, 0, 0)  # R10: nothing changed


@pytest.mark.parametrize("make", CACHES.values(), ids=CACHES.keys())
def test_eviction_is_one_order_across_namespaces(make: type[SpecCache]) -> None:
    cache = make(1)
    cache.insert([1], [10], namespace="a")
    cache.insert([1], [20], namespace="b")
    cache.insert([1], [30])
    cache.match_prefix([1, 0], namespace="a")  # "a" is now the newest
    assert cache.evict(1) == [20] and cache.evict(1) == [30] and cache.evict(1) == [10]


operations = st.lists(
    st.tuples(
        st.sampled_from(["insert", "match", "evict"]),
        st.lists(st.integers(0, 2), max_size=7),
        st.sampled_from([None, "a", ("a", "bc"), ("ab", "c"), 0, "0"]),
        st.integers(0, 4),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(operations)
def test_the_spec_s_events_fold_to_its_contents_after_every_call(ops: list[tuple[str, list[int], Namespace, int]]) -> None:
    """R13's law, on the spec itself: the mirror its events build is its contents, after every call."""
    spec, mirror, next_id = SpecCache(2), Mirror(), 0
    for op, tokens, namespace, count in ops:
        try:
            if op == "insert":
                blocks = list(range(next_id, next_id + len(tokens) // 2))
                next_id += len(blocks)
                spec.insert(tokens, blocks, namespace=namespace)
            elif op == "match":
                spec.match_prefix(tokens, namespace=namespace)
            else:
                spec.evict(count)
        except InvalidArgument:
            pass
        mirror.fold(spec.take_events())
        assert dict(mirror.contents()) == dict(spec.cached_contents())


def test_the_mirror_refuses_what_no_router_can_fold() -> None:
    mirror = Mirror()
    mirror.fold([BlockStored(None, (1, 2), (10,))])
    for broken in ([BlockStored(None, (1, 2), (10,))], [BlockStored(99, (3, 4), (11,))], [BlockRemoved((12,))], [BlockStored(10, (3, 4), (11,), "other")]):
        with pytest.raises(MirrorError):
            mirror.fold(broken)


class DropsRemovals(impl.RadixCache):
    """A publisher that loses every BlockRemoved: the router's mirror keeps evicted blocks forever."""

    def take_events(self) -> list[KVEvent]:
        return [event for event in super().take_events() if not isinstance(event, BlockRemoved)]


def test_the_lockstep_catches_a_dropped_removal_at_the_evict_that_lost_it() -> None:
    pair = Lockstep(SpecCache(2), DropsRemovals(2))
    pair.insert([1, 2, 3, 4], [10, 11], namespace="t")
    with pytest.raises(Disagreement) as caught:
        pair.evict(1)
    assert caught.value.rule.startswith("R13") and caught.value.last_call == "take_events"


def test_a_cache_without_namespaces_or_events_offers_neither() -> None:
    class Plain:
        def match_prefix(self, tokens: list[int]) -> None: ...
        def insert(self, tokens: list[int], blocks: list[int]) -> None: ...

    assert features_of(Plain()) == frozenset()
    assert features_of(impl.RadixCache(1)) == {"namespaces", "events", "digest"}


def test_snapshots_and_greetings_carry_namespaces_and_features_through_the_protocol() -> None:
    nodes = tuple(NodeView((1, 2), (10,), 0, space) for space in (None, 0, "0", ("a", "bc"), "a b;c>#|", ()))
    snapshot = Snapshot(2, nodes, PrefixStats(1, 2, 3, 4, 5))
    assert parse_snapshot(render_snapshot(snapshot), 2) == snapshot
    assert parse_greeting(greeting("engine 1.0", frozenset({"events", "namespaces"}))[3:]) == ("engine 1.0", frozenset({"namespaces", "events"}))
    assert parse_greeting("engine 1.0") == ("engine 1.0", frozenset())


def test_verify_finds_a_recorded_event_the_spec_does_not_publish(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "recorded.trace"
    lines = ["prefixspec-trace 1", "block_size 2", 'n1 = insert [1 2 3 4] [5 6] ns="t" -> new []', "take_events -> stored - [1 2 3 4] [5 6] ns=\"t\""]
    trace.write_text("\n".join(lines + ["evict 9 -> [5 6]", "take_events -> removed [5 6]"]) + "\n")
    assert main(["verify", str(trace)]) == 0
    trace.write_text("\n".join(lines + ["evict 9 -> [5 6]", "take_events -> none"]) + "\n")  # the removal the router never heard of
    assert main(["verify", str(trace)]) == 1
    assert "line 6" in capsys.readouterr().out
