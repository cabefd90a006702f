"""Result checks: whether a value a cache returned is of the interface's type, and the numbers of a result text.

A value of the wrong type is a disagreement (``WrongResult``), named by the
call and the part; a text of the wrong shape is a ``ResultFormatError``.
"""

from __future__ import annotations

import inspect
import operator
from typing import SupportsIndex, cast

from prefixspec.vocabulary.words import LONGEST_NUMBER, read_int


class WrongResult(TypeError):
    """A cache answered a call with a value of the wrong type: a disagreement, named as such."""


class ResultFormatError(ValueError):
    """A result text that is neither of its call's shape nor an error name."""


def kind_name(value: object) -> str:
    if inspect.isgenerator(value):
        return "a generator"
    return f"a {type(value).__name__}"


def is_int(value: object) -> bool:
    """An int as R1 counts one (``operator.index`` takes it), but not a bool."""
    return hasattr(type(value), "__index__") and not isinstance(value, bool)


def checked_ints(value: object, method: str, what: str) -> list[int]:
    if isinstance(value, list) and set(map(type, value)) <= {int}:  # the common case at C speed, as in invocation.as_ints
        return cast(list[int], value)
    if not isinstance(value, list) or not all(is_int(item) for item in value):
        raise WrongResult(f"{method} returned {kind_name(value)} as {what}, not a list of ints")
    return [operator.index(item) for item in value]


def checked_int(value: object, method: str, what: str = "its result") -> int:
    if not is_int(value):
        raise WrongResult(f"{method} returned {kind_name(value)} as {what}, not an int")
    return operator.index(cast(SupportsIndex, value))

def numbers(text: str) -> list[int]:
    """The whole numbers of a result text's group, each maybe negative; ResultFormatError for one too long to read."""
    values: list[int] = []
    for word in text.split():
        value = read_int(word, signed=True)
        if value is None:
            raise ResultFormatError(f"the number {word[:40]}... is longer than {LONGEST_NUMBER} digits")
        values.append(value)
    return values

