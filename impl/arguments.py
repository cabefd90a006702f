"""The arguments of impl's calls, read once at the door: ids and tokens as ``array('I')`` (R1), namespaces (R12).

Each function checks a whole argument in C where it can and raises ``InvalidArgument`` before the call changes anything (R10).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from impl.node import TOKEN_TYPECODE
from spec.api import NAMESPACE_SHAPE, InvalidArgument, Namespace, is_namespace


def namespace_argument(value: object) -> Namespace:
    """``value`` as a namespace (R12): an int that is not a bool, a str, or a tuple of those and None; else InvalidArgument.

    Runtime complexity: O(len(value)) for a tuple, O(1) otherwise.
    """
    if not is_namespace(value):
        raise InvalidArgument(f"{NAMESPACE_SHAPE}, got {type(value).__name__}")
    return value


def id_array(values: object, what: str) -> array[int]:
    """``values`` as an ``array('I')``, or InvalidArgument (R1).

    ``values`` must be a sequence (not a str) of values ``operator.index``
    accepts, each in [0, 2**32); the array checks every item in C.  A
    bytes-like sequence counts as its items, not as raw machine words.

    Runtime complexity: O(len(values)), in C for a list or a tuple.
    """
    try:
        if type(values) is list:
            # fromlist reads a list without the constructor's generic item
            # access: 0.66-0.7 x the time of array('I', values), the read
            # floor (benchmark: bench/ read costs and match vs read floor,
            # issue 7).  It checks every item as the constructor does and
            # keeps nothing on error.
            converted = array(TOKEN_TYPECODE)
            converted.fromlist(values)
            return converted
        if isinstance(values, (list, tuple)):
            return array(TOKEN_TYPECODE, values)
        if isinstance(values, (bytes, bytearray)):
            # array() would read a bytes initializer as raw machine words.
            return array(TOKEN_TYPECODE, list(values))
        if isinstance(values, Sequence) and not isinstance(values, str):
            return array(TOKEN_TYPECODE, values)
    except (TypeError, OverflowError) as exc:
        raise InvalidArgument(f"{what} must hold integers in [0, 2**32): {exc}") from exc
    raise InvalidArgument(f"{what} must be a sequence of integers, not {type(values).__name__}")
