"""The vocabulary of calls: every call and every result round-trips through its text, and one parser serves all."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spec.api import ID_LIMIT, Inserted, NotLocked, PrefixMatch, PrefixStats, UnknownNode
from spec.model import SpecCache
from prefixspec.formats import protocol, trace
from prefixspec.targets import engine_process
from spec.api import AllBlocksCleared, BlockRemoved, BlockStored
from prefixspec.formats.trace import same_outcome
from prefixspec.vocabulary import (
    BY_METHOD,
    CALLS,
    INTERFACE,
    Arg,
    Call,
    CallKind,
    TraceFormatError,
    WrongResult,
    parse_call,
    parse_result,
    read_namespace,
    render_namespace,
    render_result,
)

ints = st.integers(-1, ID_LIMIT)
handles = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)


def argument(kind: str) -> st.SearchStrategy[Arg]:
    if kind in ("tokens", "blocks"):
        return st.lists(ints, max_size=6).map(tuple)
    if kind == "count":
        return st.integers(-(10**12), 10**12)
    return handles


@st.composite
def calls(draw: st.DrawFn) -> Call:
    kind = draw(st.sampled_from(CALLS))
    args = tuple(draw(argument(param.kind)) for param in kind.params)
    name = draw(handles.filter(lambda word: word != "root")) if kind.names_node else ""
    namespace = draw(namespaces) if kind.namespaced else None
    return Call(kind.op, args, name, namespace)


namespace_words = st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=12))
namespaces = st.one_of(st.none(), namespace_words, st.lists(st.one_of(st.none(), namespace_words), max_size=4).map(tuple))
"""R12's namespaces, any text included: spaces, '#', ';', '>', '|', '->', quotes, newlines, astral characters."""


@given(calls())
def test_a_written_namespace_is_one_word_free_of_the_traces_separators(call: Call) -> None:
    if call.namespace is not None:
        word = render_namespace(call.namespace)
        assert not set(word) & set(" \t\n\r#;>|"), word
        assert read_namespace(word) == call.namespace and type(read_namespace(word)) is type(call.namespace)


@given(calls())
def test_every_call_reads_back_as_it_is_written(call: Call) -> None:
    assert parse_call(call.text(), 1) == call


def test_the_table_covers_the_whole_interface() -> None:
    methods = {name for name in dir(SpecCache) if not name.startswith("_")}
    assert set(INTERFACE) <= methods | {"root"}
    assert set(INTERFACE) == {"root", "block_size", "snapshot", *(kind.method for kind in CALLS if not kind.optional)}
    assert {kind.method for kind in CALLS if kind.optional} == {"take_events"} <= methods


def test_trace_protocol_and_pipe_share_one_parser() -> None:
    """There is one reader of calls: the trace, the served engine and the pipe's echo check all use it."""
    assert getattr(trace, "parse_call") is parse_call
    assert getattr(protocol, "parse_call") is parse_call
    assert getattr(engine_process, "parse_call") is parse_call


RESULTS: dict[str, object] = {
    "match": PrefixMatch(4, [10, 11], "n1"),
    "inserted": Inserted("root", [3]),
    "ok": None,
    "blocks": [7, 8],
    "count": 12,
    "stats": PrefixStats(1, 2, 3, 4, 5),
    "rate": 0.25,
    "events": [
        AllBlocksCleared(),
        BlockStored(None, (1, 2, 3, 4), (10, 11)),
        BlockStored(11, (5, 6), (12,), ("a b;c", 0, None)),
        BlockRemoved((12, 11, 10)),
    ],
}


def test_no_events_read_back_as_none_and_cut_events_are_the_same_events() -> None:
    kind = BY_METHOD["take_events"]
    assert render_result(kind, [], str) == "none" and parse_result(kind, "none", str) == []
    whole = render_result(kind, [BlockStored(None, (1, 2, 3, 4), (10, 11), "t")], str)
    cut = render_result(kind, [AllBlocksCleared(), BlockStored(None, (1, 2), (10,), "t"), BlockStored(10, (3, 4), (11,), "t")], str)
    assert same_outcome(whole, cut)
    assert not same_outcome(whole, render_result(kind, [BlockStored(None, (1, 2, 3, 4), (10, 11))], str))  # another namespace
    assert not same_outcome(whole, render_result(kind, [BlockStored(None, (1, 2), (10,), "t")], str))  # a block missing
    assert not same_outcome("removed [1 2]", "removed [2 1]")  # R13: in the order evict frees them


@pytest.mark.parametrize("kind", CALLS, ids=lambda kind: kind.op)
def test_every_result_reads_back_as_it_is_written(kind: CallKind) -> None:
    value = RESULTS[kind.result]
    text = render_result(kind, value, str)
    assert parse_result(kind, text, str) == value


@pytest.mark.parametrize(
    ("method", "value", "words"),
    [
        ("evict", (x for x in [1]), "evict returned a generator"),
        ("evict", (1, 2), "evict returned a tuple"),
        ("evict", [1, "2"], "not a list of ints"),
        ("cached_blocks", 4.0, "cached_blocks returned a float"),
        ("cached_blocks", True, "cached_blocks returned a bool"),
        ("match_prefix", (4, [1], "root"), "not a PrefixMatch"),
        ("match_prefix", PrefixMatch(4.0, [1], "root"), "matched_tokens"),  # type: ignore[arg-type]
        ("insert", None, "not an Inserted"),
        ("lock", 0, "lock returned a int, not None"),
        ("stats", {"lookups": 1}, "not a PrefixStats"),
        ("hit_rate", "0.5", "hit_rate returned a str"),
    ],
)
def test_a_result_of_the_wrong_type_is_named(method: str, value: object, words: str) -> None:
    with pytest.raises(WrongResult, match=words):
        render_result(BY_METHOD[method], value, str)


def test_errors_are_read_by_name() -> None:
    with pytest.raises(UnknownNode):
        parse_result(BY_METHOD["lock"], "UnknownNode no such node", str)
    with pytest.raises(NotLocked):
        parse_result(BY_METHOD["unlock"], "NotLocked", str)


@pytest.mark.parametrize(
    "text",
    ["evict ²", "evict 1 2", "n1 = match [1 x]", "n1 = match", "n1 = match [1] [2]", "lock [1]", "stats 3", "n1 = evict 2", "evict " + "9" * 5000],
)
def test_a_malformed_call_is_refused(text: str) -> None:
    with pytest.raises(TraceFormatError):
        parse_call(text, 7)
