"""Hypothesis's draws during a stage, made independent of the modules the process has loaded.

Hypothesis (since 6.13x) now and then draws an integer or a string from a pool of constants it reads from the
source of every module loaded from outside ``site-packages``: in a checkout the checker's own modules, the
target's module wherever it is, a user's test modules under ``conformance_suite``.  So one profile and one
``--seed`` ran other calls as those modules changed: the ci call machine on ``impl:RadixCache`` ran 19,015
calls from a script, and 28,764 once a module holding four constants had been imported beside it; the command,
which loads more of the checker, ran 266 examples where the script ran 257; twenty call-machine examples in
pytest ran 1,890, 1,761 or 1,650 calls by the tests before them; and since the pool is read from the source,
every edit of the checker's constants in a checkout, and an installed wheel (in ``site-packages``, outside it),
changed the run too.

``without_local_constants`` empties that pool while a stage's machine runs, and gives it back after it, so a
user's own Hypothesis tests in the same process keep it: a stage's calls are a function of the profile, the seed
and the target's answers alone.  The pool is Hypothesis's internal state (``providers._get_local_constants`` and
the ``CONSTANTS_CACHE`` of its draws); a Hypothesis without it has no pool to empty, and the block runs as it is.
``stateful_tests/test_draw_pool.py`` holds the runs equal with and without such a module, and shows them differ
with the pool left alone.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from types import ModuleType
from typing import Protocol, cast


class _ConstantsCache(Protocol):
    """Hypothesis's cache of the constants each kind of draw may take (an LRU cache over a mapping)."""

    @property
    def cache(self) -> MutableMapping[object, object]: ...


@contextmanager
def without_local_constants() -> Iterator[None]:
    """Within the block Hypothesis draws no constant of the loaded modules' source, only its own (the same
    everywhere); after it, as before.  The cache of constants each kind of draw may take is emptied on the way in
    and on the way out: filled from the pool before the block, or from the empty one in it, it would carry one
    into the other."""
    providers = _providers()
    getter = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    make_empty = getattr(providers, "Constants", None)
    if getter is None or cache is None or make_empty is None:  # a Hypothesis without the pool
        yield
        return
    empty = cast(Callable[[], object], make_empty)()
    drawn = cast(_ConstantsCache, cache)
    drawn.cache.clear()
    setattr(providers, "_get_local_constants", lambda: empty)
    try:
        yield
    finally:
        setattr(providers, "_get_local_constants", getter)
        drawn.cache.clear()


def _providers() -> ModuleType | None:
    """Hypothesis's module of draws, where this Hypothesis has one (``pyproject.toml`` admits releases before it)."""
    try:
        return importlib.import_module("hypothesis.internal.conjecture.providers")
    except ImportError:
        return None
