"""Loading the cache under test from a ``module:factory`` target; usage errors, each one line."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

from spec.api import CacheFactory
from prefixspec.errors import TargetError
from prefixspec.vocabulary import INTERFACE

DEFAULT_TARGET = "impl:RadixCache"


def load_factory(target: str) -> CacheFactory:
    """The factory a ``module:attribute`` target names, checked by building one cache."""
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
