"""Shared fixtures: every example test runs once on the spec and once on the implementation."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import impl
from spec.model import SpecCache
from spec.api import CacheFactory
from prefixspec.running.profiles import load_profile

load_profile()



CACHES: dict[str, CacheFactory] = {"spec": SpecCache, "impl": impl.RadixCache}


@pytest.fixture(params=sorted(CACHES))
def make_cache(request: pytest.FixtureRequest) -> CacheFactory:
    """A cache factory: ``SpecCache`` and ``impl.RadixCache`` in turn."""
    factory: CacheFactory = CACHES[request.param]
    return factory
