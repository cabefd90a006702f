"""A target by its name: ``module:factory``, or ``CATALOGUE#ID`` for a planted bug of a catalogue."""

from __future__ import annotations

from spec.api import CacheFactory
from prefixspec.targets.loading import check_factory, load_factory
from prefixspec.targets.mutants import load_mutant_target


def load_target(name: str) -> CacheFactory:
    """The cache factory ``name`` names, checked by building one cache."""
    if "#" in name:
        return check_factory(name, load_mutant_target(name))
    return load_factory(name)
