"""Shared fixtures: every example test runs once on the spec and once on the implementation."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import impl
from spec.model import SpecCache
from spec.api import CacheFactory
from prefixspec.running.profiles import load_profile
from stateful_tests.stage_runs import SUITE_PROFILE

load_profile(SUITE_PROFILE)


CACHES: dict[str, CacheFactory] = {"spec": SpecCache, "impl": impl.RadixCache}


@pytest.fixture(params=sorted(CACHES))
def make_cache(request: pytest.FixtureRequest) -> CacheFactory:
    """A cache factory: ``SpecCache`` and ``impl.RadixCache`` in turn."""
    factory: CacheFactory = CACHES[request.param]
    return factory


CHECKOUT_COUNTEREXAMPLES = Path(__file__).resolve().parent.parent / "counterexamples"
"""Where a check run from the checkout writes its counterexamples by default (``RunPlan.out_dir``)."""


def written_counterexamples() -> set[str]:
    return set(os.listdir(CHECKOUT_COUNTEREXAMPLES)) if CHECKOUT_COUNTEREXAMPLES.is_dir() else set()


@pytest.fixture(autouse=True)
def no_counterexample_left_in_the_checkout() -> Iterator[None]:
    """A test writes its counterexamples under its own tmp_path: one left in the checkout's counterexamples/
    would be taken for a real one (and named by the next run's report), so the test that wrote it errors."""
    before = written_counterexamples()
    yield
    left = sorted(written_counterexamples() - before)
    # Under -n a test beside it on another worker may be the writer: the message says where to look.
    assert not left, f"{', '.join(left)} appeared in {CHECKOUT_COUNTEREXAMPLES} as this test ran (it, or one beside it under -n, wrote there): give its plan an out_dir under tmp_path"


@pytest.fixture(autouse=True)
def in_its_group(request: pytest.FixtureRequest) -> None:
    """Under ``--dist loadgroup`` a test marked ``xdist_group`` must be in its group, or it fails saying so.

    The marks keep a module's costly fixture (test_installed's venv) and the runs that tests share (``stage_runs``)
    on one worker; pytest 9.2 with pytest-xdist 3.8 dropped them without a word (pyproject.toml pins pytest)."""
    node = request.node
    if request.config.getoption("loadgroup", default=False) and node.get_closest_marker("xdist_group") is not None and "@" not in node.nodeid:
        pytest.fail(f"{node.nodeid} is marked xdist_group but in no group under --dist loadgroup: this pytest and pytest-xdist do not group tests; install the versions pyproject.toml asks for")
