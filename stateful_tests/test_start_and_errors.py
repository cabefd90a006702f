"""An engine's start has its own limit (``--start-timeout``), apart from each call's (``--timeout``); error answers
agree by their name in recorded traces as in the line protocol."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from prefixspec.commands.main import main
from prefixspec.formats.trace import parse_trace, same_outcome
from prefixspec.running.recorded import Recording
from prefixspec.shipped import GOLDEN_TRACE

ROOT = Path(__file__).resolve().parent.parent
SLOW_START = f"cd {shlex.quote(str(ROOT))} && sleep 3 && exec {shlex.quote(sys.executable)} -m stateful_tests.engines.serve"
"""A correct engine that takes three seconds to start, as one loading a model does."""


def test_a_slow_start_passes_under_a_short_per_call_limit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(GOLDEN_TRACE), "--exec", SLOW_START, "--timeout", "2.5"]) == 0, capsys.readouterr()


def test_the_start_limit_stops_an_engine_that_starts_too_slowly(capsys: pytest.CaptureFixture[str]) -> None:
    """The negative control: the same engine under --start-timeout 1 cannot start a cache (exit 2), and says which limit."""
    status = main(["replay", str(GOLDEN_TRACE), "--exec", SLOW_START, "--timeout", "10", "--start-timeout", "1"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "within 1 s (--start-timeout)" in err and "during the handshake" in err


def test_the_start_limit_is_checked_like_the_others(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:  # argparse's own usage error
        main(["check", "--exec", "true", "--start-timeout", "0"])
    assert stopped.value.code == 2
    assert "--start-timeout: 0 is not a number of seconds" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("recorded", "spec", "same"),
    [
        ("InvalidArgument block 10 is cached at another position", "InvalidArgument", True),
        ("InvalidArgument", "InvalidArgument", True),
        ("UnknownNode node 3 is not in the cache", "UnknownNode", True),
        ("NotLocked node 2 holds no lock", "UnknownNode", False),
        ("InvalidArgument", "[]", False),
        ("ok", "NotLocked", False),
        ("crash ValueError: boom", "InvalidArgument", False),
    ],
)
def test_error_answers_agree_by_name(recorded: str, spec: str, same: bool) -> None:
    assert same_outcome(recorded, spec) is same
    assert same_outcome(spec, recorded) is same


def test_a_recorded_error_with_a_message_does_not_diverge() -> None:
    """As an engine over the protocol may answer, so may its recording."""
    text = "prefixspec-trace 1\nblock_size 2\nn1 = insert [1 2 3] [7 7] -> InvalidArgument block 7 appears twice\nevict -1 -> InvalidArgument evict takes a count of at least 0\n"
    assert Recording.of(parse_trace(text)).first_divergence() is None
    wrong = text.replace("-> InvalidArgument evict", "-> NotLocked evict")
    assert Recording.of(parse_trace(wrong)).first_divergence() == 1
