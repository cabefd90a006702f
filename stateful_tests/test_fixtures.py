"""The golden trace is what the spec generates now, and the trace format reads back what it writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from prefixspec.drive.golden import golden_trace
from spec.model import SpecCache
from prefixspec.formats.trace import Divergence, Step, Trace, parse_trace, replay
from prefixspec.shipped import GOLDEN_TRACE as GOLDEN
from prefixspec.vocabulary import Call, TraceFormatError


def test_the_committed_golden_trace_is_what_the_spec_generates() -> None:
    committed = GOLDEN.read_text(encoding="utf-8")
    assert committed == golden_trace().text(), "fixtures/radix_trace.txt is stale: run `make fixtures`"


def test_the_golden_trace_covers_what_it_claims() -> None:
    trace = parse_trace(GOLDEN.read_text(encoding="utf-8"))
    texts = [step.text() for step in trace.steps]
    assert len(texts) >= 300
    assert any(step.call.op == "insert" and step.expected not in (None, "InvalidArgument") and not step.expected.endswith("[]") for step in trace.steps), "no duplicates"
    assert any(step.call.op == "evict" and step.expected != "[]" for step in trace.steps), "no eviction"
    assert any(step.call.op == "match" and (step.expected or "").endswith(" new") for step in trace.steps), "no split on match"
    for error in ("InvalidArgument", "NotLocked", "UnknownNode"):
        assert any(text.endswith(f"-> {error}") for text in texts), error


def test_a_trace_reads_back_what_it_writes() -> None:
    trace = golden_trace()
    assert parse_trace(trace.text()).text() == trace.text()


def test_a_replay_names_the_line_of_the_first_divergence() -> None:
    text = (
        "prefixspec-trace 1\nblock_size 2\n# comment\n\n"
        "n1 = insert [1 2 3 4 5] [10 11] -> new []\n"
        "n2 = match [1 2 3 4] -> 4 [10 11] n1\n"  # wrong: R3 leaves the last token
        "lock n2 -> ok\n"
    )
    divergence = replay(parse_trace(text), SpecCache(2))
    assert divergence == Divergence(6, "n2 = match [1 2 3 4]", "4 [10 11] n1", "2 [10] new")
    assert "line 6" in divergence.describe()


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("", 1, "empty trace"),
        ("prefixspec-trace 9\n", 1, "header"),
        ("prefixspec-trace 1\nblock_size two\n", 2, "block_size"),
        ("prefixspec-trace 1\nblock_size 2\nfrobnicate\n", 3, "unknown call"),
        ("prefixspec-trace 1\nblock_size 2\nmatch [1 2]\n", 3, "handle name"),
        ("prefixspec-trace 1\nblock_size 2\nn1 = match [1 x]\n", 3, "whole numbers"),
        ("prefixspec-trace 1\nblock_size 2\nlock n7 -> ok\n", 3, "not named"),
        ("prefixspec-trace 1\nblock_size 2\nn1 = match [1]\nn1 = match [2]\n", 4, "named twice"),
        ("prefixspec-trace 1\nblock_size 2\nevict many\n", 3, "whole number"),
        ("prefixspec-trace 1\nblock_size 2\nstats ->\n", 3, "nothing after"),
    ],
)
def test_a_bad_trace_is_refused_with_its_line(text: str, line: int, words: str) -> None:
    with pytest.raises(TraceFormatError) as raised:
        parse_trace(text)
    assert raised.value.line == line
    assert words in str(raised.value)


def test_calls_write_as_they_read() -> None:
    calls = [
        Call("insert", ((1, 2, 3), (7,)), name="n1"),
        Call("match", ((),), name="n2"),
        Call("lock", ("n1",)),
        Call("unlock", ("root",)),
        Call("evict", (3,)),
        Call("hit_rate"),
    ]
    text = Trace(2, [Step(call, None) for call in calls]).text()
    assert parse_trace(text).calls() == calls


def test_the_format_example_in_fixtures_readme_replays() -> None:
    """The documentation's example is a real trace with the right results."""
    readme = (Path(__file__).resolve().parents[1] / "fixtures" / "README.md").read_text(encoding="utf-8")
    example = readme.split("```\n", 2)[1]
    trace = parse_trace(example)
    assert len(trace.steps) == 12
    assert replay(trace, SpecCache(trace.block_size)) is None
