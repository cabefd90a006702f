"""A target by its name: ``module:factory``, or ``CATALOGUE#ID`` for a planted bug of a catalogue."""

from __future__ import annotations

from spec.api import CacheFactory
from prefixspec.targets.guarded import Guard
from prefixspec.targets.loading import check_factory, load_factory, loading
from prefixspec.targets.mutants import load_mutant_target


def load_target(name: str, timeout: float | None = None) -> CacheFactory:
    """The cache factory ``name`` names, checked by building one cache; each call limited to ``timeout`` seconds (None: no limit)."""
    if "#" in name:
        guard = Guard(name, timeout)
        return check_factory(name, loading(guard, f"cannot load {name!r}: it", load_mutant_target, name, limit=False, doing=f"the import of {name!r}"), guard)
    return load_factory(name, timeout)
