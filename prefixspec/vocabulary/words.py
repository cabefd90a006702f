"""Values as the text of calls writes them: lists of ints, whole numbers, handles and namespaces (R12).

The words a call's arguments, a result's parts and a snapshot's nodes are made
of; the table (``vocabulary.table``) and the readers of calls, results and
snapshots build on them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from spec.api import NAMESPACE_SHAPE, Namespace, is_namespace


class TraceFormatError(ValueError):
    """Text that does not follow the format of calls and traces; names the line."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


class Unwritable(TypeError):
    """A call whose arguments the text of calls cannot write (a token that is not an int, a node nobody named)."""


# Namespaces as text (R12) ---------------------------------------------------------------------

_ESCAPED = {ord(" "): "\\u0020", ord("#"): "\\u0023", ord(";"): "\\u003b", ord(">"): "\\u003e", ord("|"): "\\u007c"}
LONGEST_NAMESPACE = 1000
"""Characters the written namespace may have."""


def render_namespace(namespace: Namespace) -> str:
    """The namespace as one word of compact JSON; only strings hold the escaped characters, as ``\\u`` escapes."""
    value = list(namespace) if isinstance(namespace, tuple) else namespace
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).translate(_ESCAPED)


def read_namespace(text: str) -> Namespace:
    """The namespace one word of JSON stands for; ValueError naming what it is instead."""
    if len(text) > LONGEST_NAMESPACE:
        raise ValueError(f"a namespace of at most {LONGEST_NAMESPACE} characters")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError("a namespace in JSON: an integer, a string or an array of null, integers and strings") from None
    if isinstance(value, list) and is_namespace(tuple(value)):
        return tuple(value)
    if value is not None and is_namespace(value):  # JSON's null is no word: the default namespace is written as nothing
        return value
    raise ValueError("a namespace in JSON: an integer, a string or an array of null, integers and strings, not " + type(value).__name__)


def namespace_of(value: object) -> Namespace:
    """A namespace a Python caller passes, as the text can write it; Unwritable otherwise."""
    if not is_namespace(value):
        raise Unwritable(f"{NAMESPACE_SHAPE}, got {type(value).__name__}")
    return value



def render_ints(values: Sequence[int]) -> str:
    return "[" + " ".join(map(str, values)) + "]"



def ints_pattern(*, signed: bool = True, group: bool = True) -> str:
    """A regex for ``[1 2 3]`` (each number maybe negative when ``signed``), its numbers in one group when ``group``.

    Each number but the last is followed by at least one space: with ``(?:-?[0-9]+ *)*`` the digits of one number
    could be split in exponentially many ways, and a garbled result line took a fullmatch minutes (make fuzz).
    """
    number = "-?[0-9]+" if signed else "[0-9]+"
    inside = f"(?:{number} +)*(?:{number})?"
    return rf"\[ *({inside}) *\]" if group else rf"\[ *{inside} *\]"


HANDLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DIGITS = re.compile(r"[0-9]+\Z")
_SIGNED = re.compile(r"-?[0-9]+\Z")

LONGEST_NUMBER = 4000
"""Digits a number may have; Python refuses to read longer ones, and no cache has such an id."""


def counted(count: int, noun: str) -> str:
    """A count of things as reports say it, the noun's plural but for one: ``1 call``, ``3 calls``, ``65,542 calls``
    (for nouns whose plural adds an s: calls, examples, replays, fields)."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def read_int(text: str, *, signed: bool = False) -> int | None:
    """``text`` as a whole number of ASCII digits (``-`` first when ``signed``), else None."""
    if not (_SIGNED if signed else _DIGITS).match(text) or len(text) > LONGEST_NUMBER:
        return None
    return int(text)


def read_ints(text: str) -> tuple[int, ...] | None:
    """``[1 2 3]`` as a tuple of ints (each maybe negative, so R1's refusals can be written), else None."""
    if not (text.startswith("[") and text.endswith("]")):
        return None
    values: list[int] = []
    for word in text[1:-1].split():
        value = read_int(word, signed=True)
        if value is None:
            return None
        values.append(value)
    return tuple(values)


