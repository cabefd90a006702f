"""A Python target's answers as plain values, made while its code is still under guard.

The checker hashes, compares and prints what a target returns and raises: a
node id, a ``PrefixMatch``, a snapshot, an exception.  Each of those may be
an object of the target's own class, whose ``__eq__``, ``__hash__``,
``__str__`` or ``__repr__`` is the target's code: run after the call, outside
the guard, it could end the checker with its own status or hang past
``--timeout``.  So ``guard.Guard`` turns every answer into checker-owned data
before its alarm is disarmed:

- ``plain_error``: an exception becomes one of the checker's, of the same
  name (and of the same interface error, ``InvalidArgument`` ...), its
  message read now;
- ``plain_data``: a result or a snapshot becomes ints, strs, floats, tuples,
  lists and the interface's own dataclasses; a value of a target's class (a
  subclass of the interface's dataclasses included) is a ``WrongResult``;
- node ids are not copied (they are the target's by design) but named by the
  guarded cache's table, whose lookups hash and compare them under guard
  (``guarded.GuardedCache``): the checker only ever holds a ``GuardedNode``.

Wrong types that are plain (a float for a count, a tuple for a list) stay as
they are, for the checker to report in its own words (``render_result``).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, SupportsIndex, cast

from spec.api import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    Inserted,
    InvalidArgument,
    NodeView,
    NotLocked,
    PrefixCacheError,
    PrefixMatch,
    PrefixStats,
    Snapshot,
    TargetFailure,
    UnknownNode,
)
from prefixspec.formats.outcomes import plain_event, plain_stats
from prefixspec.vocabulary import CallKind, WrongResult, render_result

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

DEEPEST = 8
"""Containers one inside another a plain value may have (a snapshot: Snapshot, its nodes, a NodeView, its copies, a tuple of ids): deeper is no interface value."""

_DATACLASSES: frozenset[type] = frozenset({PrefixMatch, Inserted, PrefixStats, NodeView, Snapshot, BlockStored, BlockRemoved, AllBlocksCleared})
_KEPT: frozenset[type] = frozenset({int, bool, str, float, type(None)})
_INT: frozenset[type] = frozenset({int})
_VIEWS: frozenset[type] = frozenset({NodeView})
_FIELDS: dict[type, tuple[str, ...]] = {
    kind: tuple(field.name for field in dataclasses.fields(cast("type[DataclassInstance]", kind))) for kind in _DATACLASSES
}
_SPEC_ERRORS: tuple[type[PrefixCacheError], ...] = (UnknownNode, NotLocked, InvalidArgument, PrefixCacheError)
"""Most derived first: a plain error keeps the interface error its original was."""


class TargetRaised(Exception):
    """Base of the plain copies of a target's exceptions that are no interface error (``crash Type: message``)."""


class _Named:
    """Classes made for a name a target's class had, so that reports keep that name; a bounded number of them."""

    made: dict[tuple[type, str], type] = {}
    MOST = 1000

    @classmethod
    def of(cls, base: type, name: str) -> type:
        key = (base, name)
        found = cls.made.get(key)
        if found is None:
            found = type(name, (base,), {"__module__": __name__, "__qualname__": name})
            if len(cls.made) < cls.MOST:
                cls.made[key] = found
        return found


def message_of(error: BaseException) -> str:
    """``str(error)``, or what stops it being read; a target's exit or hang in its ``__str__`` goes on, for the guard."""
    try:
        return str(error)
    except (SystemExit, KeyboardInterrupt, TargetFailure):
        raise
    except BaseException as broken:  # an exception whose __str__ raises still has a type to report
        return f"(its message raised {type(broken).__name__})"


def plain_error(error: BaseException) -> BaseException:
    """``error`` as the checker's own exception: same type name, same interface error, its message and traceback."""
    kind = type(error)
    if kind.__module__.partition(".")[0] == "prefixspec" and all(type(part) is str for part in error.args):
        return error  # the checker's own (a TargetError of loading, a WrongResult): its words are plain already
    name = kind.__name__ if type(kind.__name__) is str else "Exception"
    message = message_of(error)
    base: type = next((spec for spec in _SPEC_ERRORS if issubclass(kind, spec)), TargetRaised)
    plain_type = base if kind is base else _Named.of(base, name)
    plain = cast(BaseException, plain_type(message))
    return plain.with_traceback(error.__traceback__)


def plain_data(value: object, what: str, depth: int = 0) -> object:
    """``value`` rebuilt from ints, strs, floats, tuples, lists and the interface's dataclasses; WrongResult for anything else.

    Index-ables (a numpy integer) become ints, str and float subclasses their
    plain values: that is how the comparison read them before.
    """
    kind = type(value)
    if kind in _KEPT:
        return value
    if depth >= DEEPEST and (kind in _DATACLASSES or isinstance(value, tuple | list)):
        raise WrongResult(f"{what} returned values nested deeper than any of the interface's")
    if kind is tuple or kind is list:
        items = cast("tuple[object, ...] | list[object]", value)
        types = set(map(type, items))
        if types <= _INT:  # the common case (tokens, blocks) at C speed
            return kind(items)
        if types == _VIEWS and all(map(_plain_view, cast("tuple[NodeView, ...]", items))):  # a snapshot's nodes
            return kind(items)
        if types <= _EVENTS and all(map(plain_event, items)):  # a take's events
            return kind(items)
        return kind(plain_data(item, what, depth + 1) for item in items)
    if kind is NodeView and _plain_view(cast(NodeView, value)):
        return value  # the common case, a snapshot's every node: checked at C speed, nothing to copy
    if plain_stats(value):
        return value  # the interface's frozen dataclass of exact ints, kept as it is
    if kind in _DATACLASSES:
        return kind(*(plain_data(getattr(value, name), what, depth + 1) for name in _FIELDS[kind]))
    if hasattr(kind, "__index__"):
        return operator.index(cast(SupportsIndex, value))
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, tuple | list):  # a subclass (a named tuple): read as its base, as == read it
        return plain_data(tuple(value) if isinstance(value, tuple) else list(value), what, depth)
    raise WrongResult(f"{what} returned a {kind.__name__}, which is no value of the interface's types")


def _plain_view(view: NodeView) -> bool:
    """``view`` holds plain values only (tuples of ints, an int, a plain namespace, no copies): it is plain as it is.

    The interface's own frozen dataclass, of plain fields: its ``==`` and
    ``hash`` are the dataclass's, comparing those fields, none of the target's code.
    """
    prefix, blocks, namespace, copies = view.prefix, view.blocks, view.namespace, view.copies
    return (
        type(prefix) is tuple
        and type(blocks) is tuple
        and type(view.locks) is int
        and type(copies) is tuple
        and not copies
        and (namespace is None or type(namespace) in _KEPT)
        and set(map(type, prefix)) <= _INT
        and set(map(type, blocks)) <= _INT
    )


_EVENTS: frozenset[type] = frozenset({BlockStored, BlockRemoved})
"""A take's events: kept as they are where ``outcomes.plain_event`` holds of each (rebuilt field by field, they cost
the engine machine some 3% of its time, py-spy of a lockstep workload)."""


def _plain_ids(ids: object, what: str) -> list[int]:
    """``plain_data`` of a list of block ids, a list of exact ints copied at C speed."""
    if type(ids) is list and set(map(type, ids)) <= _INT:
        return list(ids)
    return cast("list[int]", plain_data(ids, what))


NodeNamer = Callable[[object], object]
"""The guarded cache's name for a node the target returned (``GuardedCache.node``)."""


def plain_result(kind: CallKind, value: object, node: NodeNamer) -> object:
    """The result ``value`` of a call of ``kind`` as plain data, its node named by ``node``; WrongResult as ``render_result`` says it."""
    result = kind.result
    if (value is None and result == "ok") or (type(value) is int and result == "count"):
        return value  # a lock's or an unlock's None, a count: plain as they are, and half an engine's calls
    method = kind.method
    # A match's and an insert's fields of exact ints, nearly always, are copied as plain_data copies them, without
    # its calls: a match and an insert are 3 in 10 of an engine machine's calls (py-spy of a lockstep workload).
    if type(value) is PrefixMatch and kind.result == "match":
        found = value
        tokens = found.matched_tokens if type(found.matched_tokens) is int else cast(int, plain_data(found.matched_tokens, method))
        return PrefixMatch(tokens, _plain_ids(found.blocks, method), node(found.node))
    if type(value) is Inserted and kind.result == "inserted":
        done = value
        return Inserted(node(done.node), _plain_ids(done.duplicates, method))
    try:
        if kind.result in ("match", "inserted"):  # not the interface's dataclass: render_result names what it is
            raise WrongResult(f"{method} returned a {type(value).__name__}, which is no value of the interface's types")
        return plain_data(value, method)
    except WrongResult:
        render_result(kind, value, lambda _: "")  # its own words, where it has them (a generator, a tuple)
        raise
