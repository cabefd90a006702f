"""The fuzz test (issue 13): hostile traces, misbehaving targets and engines, odd options, Ctrl-C, each in a process of its own.

Every case runs as a fresh process forked by the sandbox (``fuzzing/sandbox.py``)
under a time limit, and must keep the command line's promises: an exit
status of 0, 1 or 2 (the documented one, where there is one; 130 after
Ctrl-C), no Python traceback, no hang, no process left behind, a usage error
in one line, a target's prints off the report.  The cases come from
Hypothesis, derandomized, so every run makes the same ones.  ``make fuzz``
runs the same families by the ten thousand (``fuzzing/campaign.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from stateful_tests.fuzzing.plans import (
    Plan,
    engine_plans,
    engine_table,
    interrupt_plans,
    option_plans,
    run_plan,
    target_plans,
    trace_plans,
)
from stateful_tests.fuzzing.sandbox import Sandbox

SEEDED = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)
"""Reproducible runs: the same cases every time, no example database (make test leaves nothing behind)."""


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as running:
        yield running


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def kept(sandbox: Sandbox, plan: Plan) -> None:
    """Run ``plan``, and assert that it kept every promise of its documentation."""
    _, broken = run_plan(sandbox, plan)
    assert not broken, f"{plan.case.argv}:\n" + "\n".join(broken)


# Three groups, so that pytest-xdist spreads them over both workers, each of them about 15 s.


@pytest.mark.xdist_group("fuzz-replay")
@settings(SEEDED, max_examples=120)
@given(data=st.data())
def test_replay_survives_hostile_traces(sandbox: Sandbox, scratch: Path, data: st.DataObject) -> None:
    kept(sandbox, data.draw(trace_plans(scratch, "replay")))


@pytest.mark.xdist_group("fuzz-verify")
@settings(SEEDED, max_examples=120)
@given(data=st.data())
def test_verify_survives_hostile_traces(sandbox: Sandbox, scratch: Path, data: st.DataObject) -> None:
    kept(sandbox, data.draw(trace_plans(scratch, "verify")))


@pytest.mark.xdist_group("fuzz-verify")
def test_every_misbehaving_target_gets_its_documented_outcome(sandbox: Sandbox, scratch: Path) -> None:
    for plan in target_plans(scratch):
        kept(sandbox, plan)


@pytest.mark.xdist_group("fuzz-replay")
def test_every_misbehaving_engine_gets_its_documented_outcome(sandbox: Sandbox, scratch: Path) -> None:
    for plan in engine_table(scratch):
        kept(sandbox, plan)


@pytest.mark.xdist_group("fuzz-engines")
@settings(SEEDED, max_examples=30)
@given(data=st.data())
def test_engines_misbehaving_at_any_line(sandbox: Sandbox, scratch: Path, data: st.DataObject) -> None:
    kept(sandbox, data.draw(engine_plans(scratch)))


@pytest.mark.xdist_group("fuzz-engines")
def test_odd_options_are_refused_in_one_line(sandbox: Sandbox, scratch: Path) -> None:
    for plan in option_plans(scratch):
        kept(sandbox, plan)


@pytest.mark.xdist_group("fuzz-engines")
@settings(SEEDED, max_examples=6)
@given(data=st.data())
def test_ctrl_c_stops_every_command_cleanly(sandbox: Sandbox, scratch: Path, data: st.DataObject) -> None:
    kept(sandbox, data.draw(interrupt_plans(scratch)))
