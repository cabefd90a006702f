"""Shared fixtures: every example test runs once on the spec and once on the implementation."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import impl
import spec
from spec.api import PrefixCache
from spec.profiles import load_profile

load_profile()

CacheFactory = Callable[[int], PrefixCache]

CACHES: dict[str, CacheFactory] = {"spec": spec.SpecCache, "impl": impl.RadixCache}


@pytest.fixture(params=sorted(CACHES))
def make_cache(request: pytest.FixtureRequest) -> CacheFactory:
    """A cache factory: ``spec.SpecCache`` and ``impl.RadixCache`` in turn."""
    factory: CacheFactory = CACHES[request.param]
    return factory
