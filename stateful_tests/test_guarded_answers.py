"""A target's answers are made plain under guard (``prefixspec/targets/plain.py``): its dunders never run unguarded.

Issue 22: a node's ``__hash__`` or ``__eq__``, an exception's ``__str__``, a
result object's ``__eq__``, a ``sys.exit`` code's ``repr`` ran after the call,
outside the guard: ``sys.exit(5)`` there ended the checker with a report of
"status 1 without a report outside its calls", a hang ran past ``--timeout``
for ever.  Each place (``hostile_targets.DUNDER_PLACES``) by each deed (an
exit, an interrupt, a hang) now gives a report naming the call and exit 1,
or never runs (status 0).  The unit tests below hold the conversions at their
boundaries.
"""

from __future__ import annotations

import operator
import traceback
from typing import cast
from pathlib import Path

import pytest

from prefixspec.commands.main import main
from prefixspec.errors import TargetError
from prefixspec.shipped import GOLDEN_TRACE
from prefixspec.targets.guard import Guard
from prefixspec.targets.guarded import GuardedCache, GuardedNode
from prefixspec.targets.plain import DEEPEST, TargetRaised, plain_data, plain_error, plain_result
from prefixspec.vocabulary import BY_METHOD, WrongResult, error_name
from spec.api import BlockRemoved, BlockStored, InvalidArgument, NodeView, PrefixMatch, PrefixStats, Snapshot, UnknownNode
from stateful_tests.hostile_dunders import DEEDS, DUNDERS
from stateful_tests.hostile_targets import HOSTILE
from impl import RadixCache


@pytest.mark.parametrize("name", sorted(DUNDERS))
def test_a_targets_dunder_runs_under_guard_or_never(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    hostile = HOSTILE[name]  # as the fuzz runs it: by its name in hostile_targets
    try:
        status = main(["replay", str(GOLDEN_TRACE), "--target", f"stateful_tests.hostile_targets:{name}", "--timeout", "0.5"])
    except SystemExit as exit:  # the old fault: the target's own exit status
        status = int(exit.code or 0)
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert "Traceback" not in output
    assert status == hostile.status, output[-2000:]
    assert hostile.words in output, output[-2000:]
    if hostile.words in DEEDS.values():  # the report names the call the dunder ran in
        assert f"{hostile.words} in its " in output or "hangs: its " in output, output[-2000:]
        assert "outside its calls" not in output


def test_the_family_covers_every_place_and_deed() -> None:
    """The grid itself: 3 places by 3 deeds, and 9 places once; a negative control that the table is not empty."""
    assert len(DUNDERS) == 18 and set(DUNDERS) <= set(HOSTILE)
    assert {name.rsplit("_", 1)[1] for name in DUNDERS} == set(DEEDS)


# plain_error ------------------------------------------------------------------------------------


class _Hostile(InvalidArgument):
    def __str__(self) -> str:
        raise ValueError("no")


def test_a_plain_error_keeps_the_name_the_interface_error_and_the_traceback() -> None:
    try:
        raise _Hostile("x")
    except _Hostile as error:
        plain = plain_error(error)
    assert type(plain).__name__ == "_Hostile" and isinstance(plain, InvalidArgument) and type(plain).__module__ != __name__
    assert str(plain) == "(its message raised ValueError)"
    assert error_name(plain) == "InvalidArgument"
    assert traceback.extract_tb(plain.__traceback__)[-1].name == "test_a_plain_error_keeps_the_name_the_interface_error_and_the_traceback"
    exact = plain_error(UnknownNode("node 3"))
    assert type(exact) is UnknownNode and str(exact) == "node 3"
    other = plain_error(GeneratorExit("bye"))
    assert isinstance(other, TargetRaised) and error_name(other) == "crash GeneratorExit: bye"


def test_the_checkers_own_errors_pass_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    """Raised by the checker's code under guard (loading's TargetError): its words stay its own."""
    own = TargetError("module 'impl' has no attribute 'NoSuch'")
    assert plain_error(own) is own
    assert type(plain_error(TargetError(object()))) is not TargetError  # words not all plain: made plain like a target's
    assert main(["replay", str(GOLDEN_TRACE), "--target", "impl:NoSuch"]) == 2
    assert capsys.readouterr().err == "prefixspec: module 'impl' has no attribute 'NoSuch'\n"


# plain_data at its boundaries ---------------------------------------------------------------------


class _Index:
    def __index__(self) -> int:
        return 7


class _Text(str):
    pass


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value, 2]
    return value


def test_plain_data_keeps_plain_values_and_converts_what_the_comparison_read_as_them() -> None:
    assert plain_data(_Index(), "x") == 7 and type(plain_data(_Index(), "x")) is int
    assert type(plain_data(_Text("ns"), "x")) is str
    assert plain_data(True, "x") is True  # a bool stays one, for render_result to refuse as a count
    assert type(plain_data((1, 2), "x")) is tuple and type(plain_data([1, 2], "x")) is list  # a tuple for a list stays wrong
    view = NodeView((1, 2), (5,), 0, _Text("a"))
    snapshot = Snapshot(2, (view,), PrefixStats(0, 0, 0, 1, 0))
    copied = plain_data(snapshot, "snapshot")
    assert copied == snapshot and copied is not snapshot and type(plain_data(view, "x")) is NodeView


def test_a_takes_plain_events_are_kept_as_they_are_and_any_other_is_made_plain() -> None:
    """The events of a take of plain fields come back as the very objects (``outcomes.plain_event``); one with a value of
    a target's class in any field is rebuilt field by field, as before the shortcut."""
    plain_events = [BlockStored(None, (1, 2), (5,), ("tenant", 3)), BlockRemoved((5, 6)), BlockStored(5, (3, 4), (6,), None)]
    kept = plain_data(plain_events, "take_events")
    assert kept == plain_events and all(map(operator.is_, kept, plain_events))
    index = cast(int, _Index())  # an int as an engine's numpy would hand it over
    for odd in (BlockStored(None, (1, 2), (5,), _Text("a")), BlockStored(index, (1, 2), (5,)), BlockStored(None, (1, 2), (index,)),
                BlockStored(None, (1, 2), (5,), (_Text("a"),)), BlockRemoved((index,))):
        made = cast(list[object], plain_data([odd], "take_events"))[0]
        assert made is not odd and made == plain_data(odd, "take_events")
        for name in ("parent", "tokens", "blocks", "namespace"):
            field = getattr(made, name, None)
            assert type(field) in (int, str, tuple, type(None)), (odd, name, type(field))
            if type(field) is tuple:
                assert set(map(type, field)) <= {int, str}, (odd, name)


def test_plain_data_refuses_a_class_of_the_target_and_nesting_past_the_deepest() -> None:
    plain_data(nested(DEEPEST), "x")  # the boundary: as deep as any interface value, accepted
    with pytest.raises(WrongResult, match="nested deeper"):
        plain_data(nested(DEEPEST + 1), "x")
    with pytest.raises(WrongResult, match="returned a object"):
        plain_data(object(), "x")


def test_plain_result_keeps_render_results_words_for_a_wrong_type() -> None:
    with pytest.raises(WrongResult, match="evict returned a generator"):
        plain_result(BY_METHOD["evict"], (block for block in [1]), lambda node: node)
    with pytest.raises(WrongResult, match="match_prefix returned a str, not a PrefixMatch"):
        plain_result(BY_METHOD["match_prefix"], "no", lambda node: node)
    named = plain_result(BY_METHOD["match_prefix"], PrefixMatch(0, [], "root"), lambda node: f"<{node}>")
    assert named == PrefixMatch(0, [], "<root>")


# Nodes: named by the guarded cache, under guard ----------------------------------------------------


def guarded_cache() -> GuardedCache:
    return GuardedCache(RadixCache(2), Guard("impl:RadixCache", None), 2)


def test_a_guarded_cache_names_equal_nodes_alike_and_passes_its_own_back() -> None:
    cache = guarded_cache()
    inserted = cache.insert([1, 2, 3, 4], [7, 8])
    found = cache.match_prefix([1, 2, 3, 4, 5])
    assert isinstance(inserted.node, GuardedNode) and inserted.node == found.node and hash(inserted.node) == hash(found.node)
    assert cache.root != found.node and cache.root == cache.root
    cache.lock(found.node)  # the raw node goes back to the target: R6 holds it known
    assert cache.evictable_blocks() == 0
    other = guarded_cache()
    foreign = other.insert([1, 2, 3, 4], [7, 8]).node
    assert foreign != found.node  # another cache's node, however its raw node compares
    with pytest.raises(UnknownNode):
        cache.lock(foreign)


def test_an_unhashable_node_is_written_as_before(tmp_path: Path) -> None:
    cache = guarded_cache()
    node = cache.node([1])
    assert type(node).__name__ == "list"
    with pytest.raises(TypeError):
        hash(node)
