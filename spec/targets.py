"""Loading the cache under test from a ``module:factory`` target; usage errors, each one line."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

from spec.api import PrefixCache

CacheFactory = Callable[[int], PrefixCache]

DEFAULT_TARGET = "impl:RadixCache"

INTERFACE = (
    "root",
    "block_size",
    "match_prefix",
    "insert",
    "lock",
    "unlock",
    "evict",
    "cached_tokens",
    "cached_blocks",
    "evictable_blocks",
    "stats",
    "hit_rate",
    "snapshot",
)


class UsageError(Exception):
    """Bad usage of the command line: reported in one line, exit status 2."""


class TargetError(UsageError):
    """A target that cannot be loaded or does not satisfy the interface; the message is one line."""


def load_factory(target: str) -> CacheFactory:
    """The factory a ``module:attribute`` target (or a ``CATALOGUE#MUTANT`` one) names, checked by building one cache."""
    if "#" in target:
        from spec.mutants import load_mutant_target  # mutants import this module

        return check_factory(target, load_mutant_target(target))
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        raise TargetError(f"target {target!r} must look like module:factory (for example impl:RadixCache)")
    if str(Path.cwd()) not in sys.path and "" not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # so a module beside the user's working directory is found
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # any import failure of the user's module is a usage error, reported in one line
        raise TargetError(f"cannot import {module_name!r}: {type(error).__name__}: {error}") from None
    factory: object = module
    for part in attribute.split("."):
        if not hasattr(factory, part):
            raise TargetError(f"module {module_name!r} has no attribute {attribute!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise TargetError(f"{target} is a {type(factory).__name__}, not a callable factory(block_size)")
    return check_factory(target, factory)


def check_factory(target: str, factory: Callable[..., object]) -> CacheFactory:
    """``factory`` itself, once one cache of block size 2 it builds has every call of the interface."""
    try:
        sample = factory(2)
    except Exception as error:  # as above: the user's factory failing is reported, not raised
        raise TargetError(f"{target}(2) raised {type(error).__name__}: {error}") from None
    missing = [name for name in INTERFACE if not hasattr(sample, name)]
    if missing:
        raise TargetError(
            f"{target}(2) returned a {type(sample).__name__}, which lacks {', '.join(missing)} of the PrefixCache interface"
        )
    # The interface was checked on a sample above; the factory's own annotations are the user's.
    return cast(CacheFactory, factory)
