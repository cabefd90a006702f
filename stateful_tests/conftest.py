"""Shared fixtures: every example test runs once on the spec and once on the implementation."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import impl
from spec.model import SpecCache
from spec.api import CacheFactory
from prefixspec.running.profiles import PROFILE_ENV, load_profile

# The suite's own default is dev (a handful of examples); make test exports HYPOTHESIS_PROFILE=ci.
load_profile(os.environ.get(PROFILE_ENV) or "dev")


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
