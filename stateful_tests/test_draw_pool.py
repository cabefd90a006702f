"""A stage's draws depend on the profile, the seed and the target's answers, not on the modules a process loaded.

Hypothesis reads constants from the source of every module loaded from outside ``site-packages`` and draws from
them now and then (``prefixspec/running/draw_pool.py``): the stages run with that pool emptied.  Held here: a
module of constants imported between two runs of one stage changes nothing; whatever the pool, a stage runs as
with none, where left alone two pools run two different stages (the control); and the pool is Hypothesis's again
after a stage.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.internal.conjecture import providers
from hypothesis.internal.constants_ast import Constants

from impl import RadixCache
import prefixspec.running.draw_pool as draw_pool
import prefixspec.running.stages as stages
from prefixspec.running.stages import RunPlan, run_stage


def short_plan(engine_examples: int) -> RunPlan:
    """Derandomized call-machine examples, twenty for each engine example: about a second of work for forty."""
    dev = RunPlan.of_profile("dev")
    return replace(dev, base=settings(dev.base, max_examples=engine_examples, derandomize=True, database=None))


@contextmanager
def module_of_constants(folder: Path, name: str) -> Iterator[None]:
    """A module of the kind a user's project holds, outside site-packages, imported while the block runs: constants
    no module of the checker holds (one it holds already adds nothing to the pool)."""
    (folder / f"{name}.py").write_text("SLOTS = 48611\nLIMIT = 91373\nWORD = 'zq-probe-xk'\nCOUNT = 3119\n", encoding="utf-8")
    sys.path.insert(0, str(folder))
    try:
        importlib.import_module(name)
        yield
    finally:
        sys.path.remove(str(folder))


def calls_of_a_run(engine_examples: int = 1) -> tuple[int, int, dict[str, int]]:
    stage = run_stage("call machine", RadixCache, short_plan(engine_examples))
    assert stage.passed, stage.failure
    return stage.examples, stage.calls, stage.events


def test_a_module_loaded_beside_the_check_changes_none_of_its_draws(tmp_path: Path) -> None:
    """With the pool left alone, such a module changed the ci call machine's run from 19,015 calls to 28,764."""
    before = calls_of_a_run(2)
    with module_of_constants(tmp_path, "prefixspec_probe_constants"):
        assert calls_of_a_run(2) == before


def pool_of(integers: range) -> Callable[[], Constants]:
    """A pool of Hypothesis's, as the modules of some project would fill it: these integers.  Its cache of the
    constants each kind of draw may take is emptied, as Hypothesis empties it when a module adds constants."""
    pool = Constants(integers=set(integers))
    providers.CONSTANTS_CACHE.cache.clear()
    return lambda: pool


def test_whatever_the_pool_a_stage_runs_as_with_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """The control, with pools made up so that it holds in any process: left alone, an empty pool and a full one run
    other calls (a stage's forty call-machine examples: 2,734 against 3,121 on one machine); emptied by the stage,
    a full pool runs as the empty one."""
    monkeypatch.setattr(stages, "without_local_constants", nullcontext)
    monkeypatch.setattr(providers, "_get_local_constants", pool_of(range(0)))
    nothing = calls_of_a_run(2)
    monkeypatch.setattr(providers, "_get_local_constants", pool_of(range(0, 2**20, 7)))
    full = calls_of_a_run(2)
    assert full != nothing
    monkeypatch.undo()
    monkeypatch.setattr(providers, "_get_local_constants", pool_of(range(0, 2**20, 7)))
    assert calls_of_a_run(2) == nothing


def test_after_a_stage_the_pool_is_hypothesiss_again() -> None:
    """A user's own Hypothesis tests in the same process (``conformance_suite`` beside them) keep their pool."""
    getter = providers._get_local_constants
    calls_of_a_run()
    assert providers._get_local_constants is getter


def test_a_hypothesis_without_the_pool_runs_the_block_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pyproject.toml`` admits Hypothesis releases from before the pool: there the block runs, and nothing is patched."""
    getter = providers._get_local_constants
    monkeypatch.setattr(draw_pool, "_providers", lambda: None)
    ran = []
    with draw_pool.without_local_constants():
        ran.append(providers._get_local_constants is getter)
    assert ran == [True]
