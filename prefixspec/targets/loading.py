"""Loading the cache under test from a ``module:factory`` target; usage errors, each one line.

The target's code (its import, the factory, one sample cache) runs under a
``guard.Guard``, so whatever it does there (raise anything, call
``sys.exit``, raise ``KeyboardInterrupt``, print) ends as a ``TargetError``,
never a traceback or a silent exit; only the user's own Ctrl-C goes on.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from spec.api import CacheFactory
from prefixspec.errors import TargetError
from prefixspec.shipped import definition_module
from prefixspec.targets.guard import Guard, TargetCrash, one_line, raised_at
from prefixspec.targets.guarded import GuardedFactory
from prefixspec.vocabulary import INTERFACE, features_of

DEFAULT_TARGET = f"{definition_module('impl')}:RadixCache"
"""``impl:RadixCache`` in a checkout, ``prefixspec.impl:RadixCache`` installed."""

Loaded = TypeVar("Loaded")


def loading(guard: Guard, what: str, function: Callable[..., Loaded], *arguments: object, limit: bool = True, doing: str = "") -> Loaded:
    """``function(*arguments)``, the target's code ``doing`` (default ``what``), under ``guard``; whatever it raises, a one-line TargetError starting ``what``."""
    try:
        return guard.run(doing or what, "", function, *arguments, limit=limit)
    except (KeyboardInterrupt, TargetError):
        raise  # the guard lets only the user's Ctrl-C through; a TargetError is one already
    except TargetCrash as crash:
        raise TargetError(f"{what} {crash.deed}") from None
    except BaseException as error:  # any failure of the user's code while loading is a usage error, reported in one line
        raise TargetError(f"{what} raised {type(error).__name__}: {one_line(error)}{raised_at(error)}") from None


def load_factory(target: str, timeout: float | None = None) -> CacheFactory:
    """The factory a ``module:attribute`` target names, guarded (``timeout`` seconds a call), checked by building one cache."""
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        raise TargetError(f"target {target!r} must look like module:factory (for example {DEFAULT_TARGET})")
    if str(Path.cwd()) not in sys.path and "" not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # so a module beside the user's working directory is found
    guard = Guard(target, timeout)
    # No time limit on the import: a real engine's import (torch, CUDA) may take longer than any call.
    module = loading(guard, f"cannot import {module_name!r}: it", importlib.import_module, module_name, limit=False, doing=f"the import of {module_name!r}")
    factory = loading(guard, f"reading {attribute!r} of module {module_name!r}", _attribute, module, module_name, attribute)
    if not callable(factory):
        raise TargetError(f"{target} is a {type(factory).__name__}, not a callable factory(block_size)")
    return check_factory(target, factory, guard)


def _attribute(module: object, module_name: str, attribute: str) -> object:
    found = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise TargetError(f"module {module_name!r} has no attribute {attribute!r}")
        found = getattr(found, part)
    return found


def check_factory(target: str, factory: Callable[[int], object], guard: Guard | None = None) -> CacheFactory:
    """``factory`` under ``guard`` (default: one without a time limit), once a cache of block size 2 it builds has every call of the interface."""
    guard = guard if guard is not None else Guard(target, None)
    sample = loading(guard, f"{target}(2)", factory, 2)
    missing = loading(guard, f"reading the calls of {target}(2)", _missing_calls, sample)
    loading(guard, f"reading the features of {target}(2)", features_of, sample)  # its attributes may run its code: a usage error here
    if missing:
        raise TargetError(
            f"{target}(2) returned a {type(sample).__name__}, which lacks {', '.join(missing)} of the PrefixCache interface"
        )
    return GuardedFactory(factory, guard)


def _missing_calls(sample: object) -> list[str]:
    """The calls of the interface ``sample`` lacks; a property that raises otherwise (a root not ready) raises here."""
    missing: list[str] = []
    for name in INTERFACE:
        try:
            getattr(sample, name)  # not hasattr, which would let any other error of a property through as a traceback
        except AttributeError:
            missing.append(name)
    return missing
