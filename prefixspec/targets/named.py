"""A target by its name: ``module:factory``, or ``CATALOGUE#ID`` for a planted bug of a catalogue."""

from __future__ import annotations

from spec.api import CacheFactory, Rules
from prefixspec.targets.guard import Guard
from prefixspec.targets.loading import check_factory, load_factory, loading
from prefixspec.targets.mutants import load_mutant_target


def load_target(name: str, timeout: float | None = None, rules: Rules | None = None) -> CacheFactory:
    """The cache factory ``name`` names, checked by building one cache; each call limited to ``timeout`` seconds (None: no limit).

    A ``CATALOGUE#ID`` makes its caches under ``rules``, the rule set of the run (``mutants.mutant_rules``); a
    ``module:factory`` is the user's own, called with the block size alone whatever the rules."""
    if "#" in name:
        guard = Guard(name, timeout)
        loaded = loading(guard, f"cannot load {name!r}: it", load_mutant_target, name, rules, limit=False, doing=f"the import of {name!r}")
        return check_factory(name, loaded, guard)
    return load_factory(name, timeout)
