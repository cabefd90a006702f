"""Shared fixtures: every example test runs once on the spec and once on the implementation."""

from __future__ import annotations

import os
from collections.abc import Callable

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
