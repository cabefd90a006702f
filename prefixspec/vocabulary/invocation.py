"""Calls in Python: making a ``Call`` on a cache, a Python caller's call as a ``Call``, and the wrappers between them.

``invoke`` makes a call of the text on a cache; ``call_of`` turns the
arguments a Python caller passes into a call the text can hold; ``CallThrough``
is a ``PrefixCache`` whose every method, one per call of the table, becomes a
``Call`` handed to one method a wrapper overrides; ``features_of`` says what a
cache offers beyond the interface (R12, R13).
"""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable, Sequence
from typing import Concatenate, ParamSpec, SupportsIndex, TypeAlias, TypeVar, cast

from spec.api import BlockId, Inserted, KVEvent, Namespace, NodeId, PrefixCache, PrefixMatch, PrefixStats
from prefixspec.vocabulary.table import BY_METHOD, CALLS, TAKE_EVENTS, Arg, Call, CallKind
from prefixspec.vocabulary.words import Unwritable, namespace_of


_SEQUENCES = ("tokens", "blocks")


def invoke(cache: PrefixCache, call: Call, node_of: Callable[[str], NodeId], kind: CallKind | None = None) -> object:
    """Make ``call`` on ``cache``, its handles turned into the cache's nodes by ``node_of``; its raw result.
    ``kind`` is the call's, where the caller read it already."""
    if kind is None:
        kind = call.kind
    # By the kinds of the call's parameters, read off the table once: the comprehension over every parameter, a
    # kind test each, cost 0.5 us of a call's 3 (timeit of lock, unlock, match, cached_blocks, evict on impl).
    shape = _SHAPES[kind.op] if len(call.args) == len(kind.params) else _MIXED
    if shape is _NO_ARGUMENTS:
        arguments: Sequence[object] = ()
    elif shape is _ONE_NODE and type(handle := call.args[0]) is str:  # a handle, as the text writes it: typed without typing.cast (a call)
        arguments = (node_of(handle),)
    elif shape is _SEQUENCES_ONLY:
        sequences: _IntSequences = call.args  # type: ignore[assignment]  # the table's shape says so: no typing.cast's frame
        arguments = list(map(list, sequences))  # no comprehension's frame (py-spy: 1%)
    else:
        arguments = [
            node_of(cast(str, value)) if param.kind == "node" else list(cast(tuple[int, ...], value)) if param.kind in _SEQUENCES else value
            for param, value in zip(kind.params, call.args)
        ]
    if isinstance(cache, CallThrough):  # a wrapper's every method comes to its ``through``: called so at once
        return cache.through(kind.method, *arguments, namespace=call.namespace)
    method: Callable[..., object] = getattr(cache, kind.method)
    if call.namespace is not None:  # a cache without namespaces is called as before in the default one
        return method(*arguments, namespace=call.namespace)
    return method(*arguments)


_NO_ARGUMENTS, _ONE_NODE, _SEQUENCES_ONLY, _MIXED = "none", "node", "sequences", "mixed"

_IntSequences: TypeAlias = tuple[tuple[int, ...], ...]
"""The arguments of a call that takes sequences alone."""


def _shape(kind: CallKind) -> str:
    kinds = [param.kind for param in kind.params]
    if not kinds:
        return _NO_ARGUMENTS
    if kinds == ["node"]:
        return _ONE_NODE
    if all(name in _SEQUENCES for name in kinds):
        return _SEQUENCES_ONLY
    return _MIXED


_SHAPES: dict[str, str] = {kind.op: _shape(kind) for kind in CALLS}

_NAMING: frozenset[str] = frozenset(kind.method for kind in CALLS if kind.names_node)
"""The methods whose call names its node (``nK = match ...``)."""


def call_of(method: str, arguments: Sequence[object], handle_of: Callable[[NodeId], str], name: str, namespace: object = None) -> Call:
    """The call a Python caller makes with ``arguments``; Unwritable when the text of calls cannot hold them."""
    kind = BY_METHOD[method]
    space = None if namespace is None else namespace_of(namespace)
    name = name if kind.names_node else ""
    if len(arguments) == len(kind.params):
        # By the kinds of the call's parameters, read off the table once (as ``invoke`` does): a query and a lock,
        # half of an engine's calls, without the loop below (0.95 -> 0.65 us a lock's Call, timeit; a match's and
        # an insert's are made as fast by the loop as by a branch of their own).
        shape = _SHAPES[kind.op]
        if shape is _NO_ARGUMENTS:
            return Call(kind.op, (), name, space)
        if shape is _ONE_NODE:
            return Call(kind.op, (handle_of(arguments[0]),), name, space)
    args: list[Arg] = []
    for param, value in zip(kind.params, arguments, strict=True):
        what = param.kind
        if what == "node":
            args.append(handle_of(value))
        elif what in _SEQUENCES:
            # A tuple or a list, nearly always, told apart first: the test of the abstract Sequence costs more than the call's Call.
            if type(value) is tuple or type(value) is list or (isinstance(value, Sequence) and not isinstance(value, str)):
                args.append(as_ints(value, param.name))
            else:
                raise Unwritable(f"{param.name} must be a sequence of ints, got {type(value).__name__}")
        else:
            args.append(as_int(value, param.name))
    return Call(kind.op, tuple(args), name, space)


_INT: frozenset[type] = frozenset({int})


def as_ints(values: Sequence[object], what: str) -> tuple[int, ...]:
    # Plain ints, nearly always: a set of their types is made at C speed (the scale
    # stage spent a tenth of its time here item by item); anything else is checked one by one.
    if set(map(type, values)) <= _INT:
        ints: tuple[int, ...] = tuple(values)  # type: ignore[arg-type]  # ints, as the set of their types says: no typing.cast's frame
        return ints
    return tuple(as_int(item, what) for item in values)


def as_int(value: object, what: str) -> int:
    if not hasattr(type(value), "__index__"):
        raise Unwritable(f"{what} must be ints, got {type(value).__name__}")
    return operator.index(cast(SupportsIndex, value))



FEATURES = ("namespaces", "events", "walk-order", "unordered")
"""R12 (``match_prefix`` and ``insert`` take ``namespace``) and R13 (``take_events``): a cache may offer either.
``walk-order`` and ``unordered`` say how its snapshot reports the order (R11, ``compare.observable``): as its
eviction walk would free the nodes, or not at all; without either, in its eviction order."""

NAMESPACED_METHODS: tuple[str, ...] = tuple(kind.method for kind in CALLS if kind.namespaced)


def features_of(cache: object) -> frozenset[str]:
    """What ``cache`` offers of ``FEATURES``.

    A wrapper that has every call (a pipe, a guard, the lockstep) says what the
    cache behind it offers in ``prefixspec_features``; a plain cache offers
    events when it has ``take_events`` and namespaces when every call that takes
    one (``match_prefix`` and ``insert``) takes a ``namespace`` argument.
    """
    declared = getattr(cache, "prefixspec_features", None)
    if isinstance(declared, frozenset):
        return declared
    offered: set[str] = set()
    if callable(getattr(cache, TAKE_EVENTS.method, None)):
        offered.add("events")
    try:
        if all("namespace" in inspect.signature(getattr(cache, method)).parameters for method in NAMESPACED_METHODS):
            offered.add("namespaces")
    except (TypeError, ValueError, AttributeError):  # no signature to read (a builtin, a missing call): no namespaces
        pass
    return frozenset(offered)


# Wrappers --------------------------------------------------------------------------------------

Face = TypeVar("Face", bound="CallThrough")
Params = ParamSpec("Params")
Result = TypeVar("Result")


def passed_through(face: Callable[Concatenate[Face, Params], Result]) -> Callable[Concatenate[Face, Params], Result]:
    """``CallThrough``'s method for the call of the table named like ``face``: its arguments, in the table's order
    (by position or by their names), and its namespace handed to ``CallThrough.through``.  ``face`` gives the
    interface's signature alone; its body never runs."""
    kind = BY_METHOD[face.__name__]
    names = [param.name for param in kind.params]

    def call(self: Face, *arguments: object, namespace: object = None, **named: object) -> object:
        if named:  # an argument passed by its name, as ``insert(tokens=..., blocks=...)``
            arguments = (*arguments, *(named.pop(name) for name in names[len(arguments) :] if name in named))
            if named:
                raise TypeError(f"{kind.method}() got an unexpected keyword argument {next(iter(named))!r}")
        return self.through(kind.method, *arguments, namespace=namespace)

    functools.update_wrapper(call, face)  # its name, and the interface's signature for inspect and help()
    return cast(Callable[Concatenate[Face, Params], Result], call)


class CallThrough:
    """A ``PrefixCache`` whose every call becomes a ``Call`` handed to ``perform``.

    A wrapper between a caller and a cache (the lockstep, a recording, a pipe)
    subclasses it and overrides ``perform`` (make the call, return the
    result), ``handle_of`` (the handle of a node a caller passes) and
    ``next_name`` (the handle the next node-naming call gives its node).
    Its methods, one per call of the table (``passed_through``), all come to
    ``through``, which a subclass may override but never the methods themselves:
    ``invoke`` calls a ``CallThrough``'s ``through`` at once.
    """

    @property
    def root(self) -> NodeId:
        raise NotImplementedError

    def block_size(self) -> int:
        raise NotImplementedError

    def perform(self, call: Call) -> object:
        raise NotImplementedError

    def handle_of(self, node: NodeId) -> str:
        raise NotImplementedError

    def next_name(self) -> str:
        raise NotImplementedError

    def unwritable(self, method: str, arguments: Sequence[object], problem: Unwritable) -> object:
        """What a call the text cannot hold does; by default the error is raised."""
        raise problem

    def through(self, method: str, *arguments: object, namespace: object = None) -> object:
        try:
            # The next name only for a call that names a node: the others make no handle (bench.stage_throughput).
            call = call_of(method, arguments, self.handle_of, self.next_name() if method in _NAMING else "", namespace)
        except Unwritable as problem:
            return self.unwritable(method, arguments, problem)
        return self.perform(call)

    # The interface's signatures; ``passed_through`` makes each a call of the table.

    @passed_through
    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        raise NotImplementedError

    @passed_through
    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        raise NotImplementedError

    @passed_through
    def take_events(self) -> list[KVEvent]:
        raise NotImplementedError

    @passed_through
    def lock(self, node: NodeId) -> None:
        raise NotImplementedError

    @passed_through
    def unlock(self, node: NodeId) -> None:
        raise NotImplementedError

    @passed_through
    def evict(self, n_blocks: int) -> list[BlockId]:
        raise NotImplementedError

    @passed_through
    def cached_tokens(self) -> int:
        raise NotImplementedError

    @passed_through
    def cached_blocks(self) -> int:
        raise NotImplementedError

    @passed_through
    def evictable_blocks(self) -> int:
        raise NotImplementedError

    @passed_through
    def stats(self) -> PrefixStats:
        raise NotImplementedError

    @passed_through
    def hit_rate(self) -> float:
        raise NotImplementedError
