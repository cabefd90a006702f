"""A Python target's caches, each call of the interface made under a ``guard.Guard``, its answers plain data.

``guarded(factory, name, timeout)`` is a cache factory whose caches are the
target's, each call made through a ``Guard`` (a time limit, its prints kept off
the report, its exits reported: ``guard``) and its answer made plain before the
guard is off (``plain``).  The factory itself raising, or ``root`` raising, is
a ``TargetCrash``: neither is a call with an outcome to compare.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import cast

from spec.api import DIGEST_FEATURE, CacheFactory, NodeId, PrefixCache, Snapshot, TargetFailure
from prefixspec.targets.guard import CallPlace, Guard, one_line, raised_at
from prefixspec.targets.plain import _Named, plain_data, plain_error, plain_result
from prefixspec.vocabulary import BY_METHOD, CALLS, FEATURES, TAKE_EVENTS, CallKind, CallThrough, WrongResult, features_of


class GuardedNode:
    """The checker's name for a node a target returned: compared and hashed as itself, never as the target's object.

    ``GuardedCache.node`` makes one per node (``cache``, ``number``) and hands it
    out again for that node, so identity is equality, at C speed: a dataclass's
    ``==`` and ``hash`` over ``(cache, number)`` ran Python code at every lookup
    of a node's handle (a comparison and a lookup: 0.34 us, now 0.10, timeit).
    Two nodes the target's own ``==`` finds equal get one name (the table of
    ``GuardedCache.node`` looks them up under guard); ``raw`` goes back to the
    target when a call passes the node.
    """

    __slots__ = ("cache", "number", "raw")

    def __init__(self, cache: int, number: int, raw: object) -> None:
        self.cache = cache
        self.number = number
        self.raw = raw

    def __repr__(self) -> str:
        return f"<node {self.number} of guarded cache {self.cache}>"


class UnhashableNode:
    """A node the target returned that cannot be hashed: no handle can name it (``CallRunner`` writes ``unhashable TYPE``)."""

    __hash__ = None  # type: ignore[assignment]  # unhashable on purpose, as the target's node was

    def __init__(self, raw: object) -> None:
        self.raw = raw

    def __repr__(self) -> str:
        return f"<unhashable node of type {type(self).__name__}>"


_DOING = {kind.method: f"its {kind.method}()" for kind in CALLS}
"""What a guarded call is doing, as reports say it."""

TAKES_NODE = frozenset(kind.method for kind in CALLS if any(param.kind == "node" for param in kind.params))
"""The calls that pass a node back to the target (``lock``, ``unlock``): only theirs are unwrapped."""


_NODES = (GuardedNode, UnhashableNode)
"""Named once: ``GuardedNode | UnhashableNode`` written in a call is a union made anew at each (52 ns an isinstance, 13 so)."""


def _raw(argument: object) -> object:
    """What a call passes to the target: its own node for a ``GuardedNode`` (of any guarded cache: R6 wants foreign ones), else the argument."""
    return argument.raw if isinstance(argument, _NODES) else argument


class GuardedCache(CallThrough):
    """A target's cache, each call made through ``guard``, its results plain data (``plain``), to be checked by the caller.

    It overrides ``CallThrough.through`` rather than ``perform``: the target
    gets the caller's arguments as they are, not as the text of calls writes them.
    """

    _serials = itertools.count(1)

    def __init__(self, cache: PrefixCache, guard: Guard, block_size: int) -> None:
        self.cache = cache
        self.guard = guard
        self._block_size = block_size
        self.calls_made = 0
        self._serial = next(GuardedCache._serials)
        self._nodes: dict[object, GuardedNode] = {}
        self._answers: dict[str, Callable[[object], object]] = {}
        self._where = CallPlace(self, "at", block_size)
        self._after = CallPlace(self, "after", block_size)
        self._digest_with_calls = False
        self._digest_read: int | BaseException | None = None
        """The digest read in the last call's run, or what its read raised made plain: what ``snapshot_digest``
        returns, or raises, right after that call (None: none was read, or other code of the target's ran since)."""
        self.prefixspec_features = self._features()
        """What the target's cache offers beyond the interface: this wrapper has every call (``features_of``)."""

    def _features(self) -> frozenset[str]:
        """``features_of`` the target's cache, under guard: reading its attributes runs its code (a ``__getattr__`` that raises)."""
        where = f"while making a cache of block size {self._block_size}"
        try:
            return self.guard.run("reading its features (prefixspec_features, take_events, namespace arguments)", where, self._read_features)
        except (TargetFailure, KeyboardInterrupt):
            raise
        except BaseException as error:  # no call has the features as outcome: a cache whose attributes cannot be read stops the check
            raise self.guard.failure(
                f"raised {type(error).__name__}: {one_line(error)} when its features were read{raised_at(error)}", where
            ) from None

    def _read_features(self) -> frozenset[str]:
        declared = features_of(self.cache)
        # A plain set: ``in`` on the target's own runs here.  The digest is a Python cache's feature, not the protocol's.
        return frozenset(name for name in (*FEATURES, DIGEST_FEATURE) if name in declared)

    def node(self, raw: object) -> object:
        """The checker's name for the node ``raw`` (called under guard: the lookup runs the target's ``__hash__`` and ``__eq__``)."""
        try:
            known = self._nodes.get(raw)
        except TypeError:  # an unhashable node, of the type's own name (what CallRunner writes)
            return cast(Callable[[object], object], _Named.of(UnhashableNode, type(raw).__name__))(raw)
        if known is None:
            known = GuardedNode(self._serial, len(self._nodes), raw)
            self._nodes[raw] = known
        return known

    @property
    def root(self) -> NodeId:
        try:
            root: NodeId = self.guard.run("its root", self._where(), self._read_root, answer=self.node)
            return root
        except (TargetFailure, KeyboardInterrupt):
            raise
        except BaseException as error:  # no call has the root as outcome: a root that raises stops the check
            raise self.guard.failure(f"raised {type(error).__name__} when its root was read{raised_at(error)}", self._where()) from None

    def _read_root(self) -> object:
        return self.cache.root

    def read_digest_with_each_call(self) -> None:
        """From now on each call (but ``take_events``, which changes no snapshot) reads the target's snapshot
        digest in its own guarded run, where ``snapshot_digest`` right after the call finds it: a lockstep that
        compares by digest after every call spares a guarded run a call.  A target without the digest is left as it is."""
        if DIGEST_FEATURE in self.prefixspec_features:
            self._digest_with_calls = True
            self._answers.clear()

    def _answer_and_digest(self, kind: CallKind, value: object) -> object:
        """The call's answer made plain, then the digest read as ``snapshot_digest`` reads it, in the call's run."""
        answer = plain_result(kind, value, self.node)
        self.guard.go_on_as("its snapshot_digest()", self._after)
        try:
            read: Callable[[], object] = getattr(self.cache, "snapshot_digest")  # a call the interface leaves out
            self._digest_read = self._plain_digest(read())
        except (SystemExit, KeyboardInterrupt, TargetFailure, MemoryError):
            raise  # the guard's to report, as the digest's: an exit, a stop, a hang, no memory
        except BaseException as error:  # the digest's outcome: raised where the lockstep reads the digest
            self._digest_read = plain_error(error)
        return answer

    def block_size(self) -> int:
        self._digest_read = None  # any run of the target's code after its call may change what a digest read then says
        return cast(int, self.guard.run("its block_size()", self._where, self._method, "block_size", (), answer=self._plain_size))

    def snapshot(self) -> Snapshot:
        self._digest_read = None
        return cast(Snapshot, self.guard.run("its snapshot()", self._after, self._method, "snapshot", (), answer=self._plain_snapshot))

    def snapshot_digest(self) -> int:
        """The target's snapshot digest, for a lockstep that compares by it (``spec.api.DIGEST_FEATURE``): a plain int;
        the one read in the last call's run, if it was (``read_digest_with_each_call``)."""
        read, self._digest_read = self._digest_read, None
        if type(read) is int:  # read in the call's run, nearly always
            return read
        if isinstance(read, BaseException):
            raise read
        return cast(int, self.guard.run("its snapshot_digest()", self._after, self._method, "snapshot_digest", (), answer=self._plain_digest))

    @staticmethod
    def _plain_digest(value: object) -> int:
        if type(value) is not int:  # said inside the guard: no code of the target's runs once it is off
            raise WrongResult(f"snapshot_digest returned {type(value).__name__}, not an int")
        return value

    @staticmethod
    def _plain_size(value: object) -> object:
        return plain_data(value, "block_size")

    @staticmethod
    def _plain_snapshot(value: object) -> object:
        if type(value) is not Snapshot:  # the lockstep's words for it, said inside the guard
            raise WrongResult(f"snapshot returned {type(value).__name__}, not a Snapshot")
        return plain_data(value, "snapshot")

    def through(self, method: str, *arguments: object, namespace: object = None) -> object:
        """Every call of the interface (``CallThrough``'s methods) comes here, its arguments as the caller gave them."""
        self.calls_made += 1
        self._digest_read = None
        answer = self._answers.get(method)
        if answer is None:
            if self._digest_with_calls and method != TAKE_EVENTS.method:
                answer = self._answers[method] = functools.partial(self._answer_and_digest, BY_METHOD[method])
            else:
                answer = self._answers[method] = functools.partial(plain_result, BY_METHOD[method], node=self.node)
        return self.guard.run(_DOING[method], self._where, self._method, method, arguments, namespace, answer=answer)

    def _method(self, method: str, arguments: Sequence[object], namespace: object = None) -> object:
        function: Callable[..., object] = getattr(self.cache, method)  # inside the guard: reading it may run the target's code
        if method in TAKES_NODE:
            arguments = list(map(_raw, arguments))
        if namespace is not None:  # a cache without namespaces is called as before, in the default one
            return function(*arguments, namespace=namespace)
        return function(*arguments)


class GuardedFactory:
    """``factory`` under ``guard``: each cache it makes is a ``GuardedCache``; a factory that raises stops the check."""

    def __init__(self, factory: Callable[[int], object], guard: Guard) -> None:
        self.factory = factory
        self.guard = guard

    def __call__(self, block_size: int) -> PrefixCache:
        where = f"while making a cache of block size {block_size}"
        try:
            cache = self.guard.run(f"{self.guard.target}({block_size})", where, self.factory, block_size)
        except (TargetFailure, KeyboardInterrupt):
            raise
        except BaseException as error:  # a factory that cannot make a cache leaves nothing to compare
            raise self.guard.failure(f"raised {type(error).__name__}: {one_line(error)} when asked for a cache{raised_at(error)}", where) from None
        # The interface was checked on a sample when the target was loaded; a later cache that lacks a call crashes that call.
        return GuardedCache(cast(PrefixCache, cache), self.guard, block_size)


def guarded(factory: Callable[[int], object], target: str, timeout: float | None) -> CacheFactory:
    """``factory``'s caches, every call under a ``Guard`` with ``timeout`` seconds a call (None: no limit)."""
    return GuardedFactory(factory, Guard(target, timeout))
