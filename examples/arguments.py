"""The interface's argument checks an engine leaves to its caller, for the adapters over real engines.

Neither SGLang's caches nor vLLM's ``KVCacheManager`` check what a caller hands them: a token
or block id out of range, a namespace of the wrong shape, a negative count.  The interface
refuses those with ``InvalidArgument`` (R1, R8, R12), so every adapter checks them first, with
these functions, before anything reaches the engine (R10: a refused call changes nothing).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import cast

from spec.api import ID_LIMIT, NAMESPACE_SHAPE, InvalidArgument, Namespace, is_namespace


def caller_ids(values: object, what: str) -> list[int]:
    """R1: a sequence of ints in [0, 2**32) as a list, else InvalidArgument naming ``what``."""
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise InvalidArgument(f"{what} must be a sequence of ints")
    checked = []
    for value in values:
        try:
            number = operator.index(value)
        except TypeError:
            raise InvalidArgument(f"{what} must be ints, got {type(value).__name__}") from None
        if not 0 <= number < ID_LIMIT:
            raise InvalidArgument(f"{what} must lie in [0, 2**32), got {number}")
        checked.append(number)
    return checked


def caller_namespace(value: object) -> Namespace:
    """R12: ``value`` as a namespace (``spec.api.is_namespace``), else InvalidArgument."""
    if not is_namespace(value):
        raise InvalidArgument(f"{NAMESPACE_SHAPE}, got {type(value).__name__}")
    return cast(Namespace, value)


def caller_count(value: object) -> int:
    """R8: ``evict``'s block count, an int >= 0, else InvalidArgument."""
    try:
        wanted = operator.index(cast(int, value))
    except TypeError:
        raise InvalidArgument("n_blocks must be an int") from None
    if wanted < 0:
        raise InvalidArgument(f"n_blocks must be >= 0, got {wanted}")
    return wanted
