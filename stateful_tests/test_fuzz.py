"""The fuzz test (issue 13): hostile traces, misbehaving targets and engines, odd options, Ctrl-C, each in a process of its own.

Every case runs as a fresh process forked by the sandbox (``fuzzing/sandbox.py``)
under a time limit, and must keep the command line's promises: an exit
status of 0, 1 or 2 (the documented one, where there is one; 130 after
Ctrl-C), no Python traceback, no hang, no process left behind, a usage error
in one line, a target's prints off the report.  The cases come from
Hypothesis, seeded, so every run makes the same ones.  ``make fuzz``
runs the same families by the ten thousand (``fuzzing/campaign.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from stateful_tests.fuzzing.option_plans import option_plans
from stateful_tests.fuzzing.plans import (
    Plan,
    engine_plans,
    engine_table,
    interrupt_plans,
    process_end_plans,
    run_plan,
    target_plans,
    trace_plans,
)
from stateful_tests.fuzzing.sandbox import Sandbox

SEEDED = settings(
    deadline=None,
    derandomize=False,  # each family has a seed of its own (below): derandomized, families alike would draw alike
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
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


# Three groups, so that pytest-xdist spreads the cases over both workers, about 20 s each.
FUZZ_REPLAY, FUZZ_VERIFY, FUZZ_ENGINES = (pytest.mark.xdist_group(name) for name in ("fuzz-replay", "fuzz-verify", "fuzz-engines"))

Drawn = Callable[[Path], st.SearchStrategy[Plan]]
DRAWN = [
    pytest.param(lambda scratch: trace_plans(scratch, "replay"), 150, 1301, marks=FUZZ_REPLAY, id="hostile traces through replay"),
    pytest.param(lambda scratch: trace_plans(scratch, "verify"), 150, 1302, marks=FUZZ_VERIFY, id="hostile traces through verify"),
    pytest.param(engine_plans, 25, 1303, marks=FUZZ_ENGINES, id="engines misbehaving at any line"),
    pytest.param(interrupt_plans, 6, 1304, marks=FUZZ_ENGINES, id="Ctrl-C at any moment"),
]


@pytest.mark.parametrize(("plans", "examples", "fixed_seed"), DRAWN)
def test_drawn_cases_keep_every_promise(sandbox: Sandbox, scratch: Path, plans: Drawn, examples: int, fixed_seed: int) -> None:
    @seed(fixed_seed)
    @settings(SEEDED, max_examples=examples)
    @given(plan=plans(scratch))
    def case(plan: Plan) -> None:
        kept(sandbox, plan)

    case()


Table = Callable[[Path], list[Plan]]
TABLES = [
    pytest.param(target_plans, marks=FUZZ_VERIFY, id="every misbehaving target"),
    pytest.param(engine_table, marks=FUZZ_REPLAY, id="every misbehaving engine"),
    pytest.param(option_plans, marks=FUZZ_ENGINES, id="every odd option set"),
    pytest.param(process_end_plans, marks=FUZZ_ENGINES, id="every end of a target's process, every hostile mutant"),
]


@pytest.mark.parametrize("table", TABLES)
def test_every_case_of_the_tables_gets_its_documented_outcome(sandbox: Sandbox, scratch: Path, table: Table) -> None:
    broken: list[str] = []
    for plan in table(scratch):  # every case of the table runs; the failure lists each one that broke a promise
        _, found = run_plan(sandbox, plan)
        broken.extend(f"{plan.case.argv} {dict(plan.case.env) or ''}:\n    " + "\n    ".join(found) for _ in found[:1])
    assert not broken, f"{len(broken)} cases broke promises:\n" + "\n".join(broken)


def test_the_campaign_gives_every_family_its_quota(tmp_path: Path) -> None:
    """``make fuzz`` runs each family of the drawn and the table plans: a family with no weight ended the campaign
    with a KeyError after its 10,000 cases, and its report unprinted (the negative control: a family the weights lack)."""
    from stateful_tests.fuzzing.campaign import WEIGHTS, drawn_families, quotas, table_families

    families = set(drawn_families(tmp_path)) | set(table_families(tmp_path))

    def unweighted(weights: dict[str, int]) -> set[str]:
        return families - set(weights)

    assert not unweighted(WEIGHTS) and set(WEIGHTS) <= families
    assert all(share > 0 for share in quotas(10_000).values()) and sum(quotas(10_000).values()) == 10_000
    assert unweighted({family: weight for family, weight in WEIGHTS.items() if family != "process end"}) == {"process end"}
