"""A target's dunders: its objects' ``__hash__``, ``__eq__``, ``__str__``, ``__repr__`` are the target's code.

``impl.RadixCache`` whose nodes, errors, results, exit codes or its own self
do a deed (``sys.exit(5)``, ``KeyboardInterrupt``, a hang) in one dunder
(``DUNDER_PLACES``): the checker must run each under guard (a report naming
the call, exit 1) or never (exit 0).  ``hostile_targets`` lists them with
the other misbehaving targets (``stateful_tests.hostile_targets:dunder_node_hash_exit``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from impl import RadixCache
from spec.api import BlockId, Inserted, Namespace, NodeId, PrefixMatch, PrefixStats

DEEDS = {"exit": "called sys.exit(5)", "interrupt": "raised KeyboardInterrupt though nobody pressed Ctrl-C", "hang": "hangs: its"}
"""What a hostile dunder does, and the words of the report that names the call it ran in."""


def _deed(how: str) -> None:
    if how == "exit":
        sys.exit(5)
    if how == "interrupt":
        raise KeyboardInterrupt
    time.sleep(3600)


class _Node:
    """A node of ``_DunderCache``: the root is plain, every other node does the deed in its ``place``."""

    def __init__(self, raw: NodeId, place: str, deed: str) -> None:
        self.raw, self.place, self.deed = raw, place, deed

    def _act(self, place: str) -> None:
        if self.place == place:
            _deed(self.deed)

    def __hash__(self) -> int:
        self._act("node_hash")
        return 0 if self.place == "node_eq" else hash(self.raw)  # one hash: every lookup compares with ==

    def __eq__(self, other: object) -> bool:
        self._act("node_eq")
        return isinstance(other, _Node) and self.raw == other.raw

    def __repr__(self) -> str:
        self._act("node_repr")
        return f"_Node({self.raw!r})"

    def __str__(self) -> str:
        self._act("node_str")
        return repr(self)


class _DunderError(ValueError):
    def __init__(self, deed: str) -> None:
        super().__init__("a message the checker must read under guard")
        self.deed = deed

    def __str__(self) -> str:
        _deed(self.deed)
        return "unreachable"


class _Code:
    """A ``sys.exit`` code whose ``repr`` does the deed."""

    def __init__(self, deed: str) -> None:
        self.deed = deed

    def __repr__(self) -> str:
        _deed(self.deed)
        return "unreachable"


@dataclass(frozen=True, eq=False)
class _DunderMatch(PrefixMatch):
    deed: str = "exit"

    def __eq__(self, other: object) -> bool:
        _deed(self.deed)
        return False

    __hash__ = PrefixMatch.__hash__


@dataclass(frozen=True, eq=False)
class _DunderStats(PrefixStats):
    deed: str = "exit"

    def __eq__(self, other: object) -> bool:
        _deed(self.deed)
        return False

    __hash__ = PrefixStats.__hash__


class _DunderCache(RadixCache):
    """``impl.RadixCache`` whose objects' dunders (or its own, ``cache_*``) do ``deed`` in ``place`` (``DUNDER_PLACES``)."""

    def __init__(self, block_size: int, place: str, deed: str) -> None:
        super().__init__(block_size)
        self.place, self.deed, self.matches = place, deed, 0
        self._root = _Node(super().root, "", deed)

    def _act(self, place: str) -> None:
        if getattr(self, "place", "") == place:
            _deed(self.deed)

    def _node(self, raw: NodeId) -> _Node:
        return self._root if raw == super().root else _Node(raw, self.place, self.deed)

    @property
    def root(self) -> NodeId:
        return self._root

    def match_prefix(self, tokens: Sequence[int], namespace: Namespace = None) -> PrefixMatch:
        self.matches += 1
        found = super().match_prefix(tokens, namespace)
        if self.matches == 3 and self.place == "error_str":
            raise _DunderError(self.deed)
        if self.matches == 3 and self.place == "exit_code":
            sys.exit(cast(int, _Code(self.deed)))
        if self.place == "match_eq":
            return _DunderMatch(found.matched_tokens, found.blocks, self._node(found.node), self.deed)
        return PrefixMatch(found.matched_tokens, found.blocks, self._node(found.node))

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        done = super().insert(tokens, blocks, namespace)
        return Inserted(self._node(done.node), done.duplicates)

    def lock(self, node: NodeId) -> None:
        super().lock(node.raw if isinstance(node, _Node) else node)

    def unlock(self, node: NodeId) -> None:
        super().unlock(node.raw if isinstance(node, _Node) else node)

    def stats(self) -> PrefixStats:
        real = super().stats()
        if self.place != "stats_eq":
            return real
        return _DunderStats(real.lookups, real.query_tokens, real.hit_tokens, real.inserted_blocks, real.evicted_blocks, self.deed)

    def __eq__(self, other: object) -> bool:
        self._act("cache_eq")
        return self is other

    def __hash__(self) -> int:
        self._act("cache_hash")
        return id(self)

    def __repr__(self) -> str:
        self._act("cache_repr")
        return "_DunderCache()"

    def __str__(self) -> str:
        self._act("cache_str")
        return "_DunderCache"


DUNDER_PLACES: dict[str, tuple[int, str]] = {
    "node_hash": (1, ""),
    "node_eq": (1, ""),
    "error_str": (1, ""),
    "exit_code": (1, "called sys.exit(a _Code)"),
    "match_eq": (1, "match_prefix returned a _DunderMatch, which is no value of the interface's types"),
    "stats_eq": (1, "stats returned a _DunderStats, which is no value of the interface's types"),
    "node_repr": (0, "every result and snapshot agrees"),
    "node_str": (0, "every result and snapshot agrees"),
    "cache_eq": (0, "every result and snapshot agrees"),
    "cache_hash": (0, "every result and snapshot agrees"),
    "cache_repr": (0, "every result and snapshot agrees"),
    "cache_str": (0, "every result and snapshot agrees"),
}
"""Where a dunder of the target's runs, with the status and words of its report ("": the deed's words).  The checker
holds no node, result or exception of the target's own classes, so these run under guard (status 1 and a report
naming the call) or never (status 0)."""


def _dunder_factory(place: str, deed: str) -> Callable[[int], RadixCache]:
    def factory(block_size: int) -> RadixCache:
        return _DunderCache(block_size, place, deed)

    factory.__name__ = f"dunder_{place}_{deed}"
    return factory


DUNDERS: dict[str, tuple[Callable[[int], RadixCache], int, str]] = {
    f"dunder_{place}_{deed}": (_dunder_factory(place, deed), status, words or DEEDS[deed])
    for place, (status, words) in DUNDER_PLACES.items()
    for deed in DEEDS
    if deed == "exit" or not words  # a place whose words are its own (a WrongResult, a pass) does its deed never: one case
}
"""Every place a target's dunder runs, by each deed: factory, exit status, words of the report (the family of issue
22's dunders: ``test_guarded_answers.py``; ``hostile_targets.HOSTILE`` holds them for the fuzz)."""

