"""Whole-block token prefixes as small ints: a trie of blocks, so that a prompt of n blocks costs O(n * B), not O(n^2).

The adapters over engines that speak of prefixes (SGLang's events name a parent hash and a block's tokens, vLLM
keys blocks by a chain of hashes) match what the engine says against what an insert left at each prefix.  Keyed
by the prefix's token tuple, an insert of n blocks builds n tuples of up to n * B tokens: quadratic time and
memory, about 20 GB for the extremes stage's node of 2^16+ blocks at block size 1.  Here a prefix is the key of
its parent and its last block's tokens; its tokens are rebuilt only when asked (``tokens``), in O(its length).
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence

PlaceKey = int
"""A namespace's whole-block token prefix, as ``PlaceKeys`` numbers it (its empty prefix included)."""


class PlaceKeys:
    """Every prefix seen, numbered once: key -> (its namespace, its parent's key, its last block's tokens, its length).

    Keys are never reused within one ``PlaceKeys``; an adapter keeps one a cache, as long as the cache lives.
    """

    def __init__(self) -> None:
        self._child: dict[tuple[PlaceKey, tuple[int, ...]], PlaceKey] = {}
        self._roots: dict[tuple[str, Hashable], PlaceKey] = {}
        self._namespace: list[Hashable] = []
        self._parent: list[PlaceKey] = []
        self._block: list[tuple[int, ...]] = []
        self._length: list[int] = []
        self._tokens: dict[PlaceKey, tuple[int, ...]] = {}  # the prefixes ``tokens`` rebuilt

    def _new(self, namespace: Hashable, parent: PlaceKey, block: tuple[int, ...], length: int) -> PlaceKey:
        self._namespace.append(namespace)
        self._parent.append(parent)
        self._block.append(block)
        self._length.append(length)
        return len(self._length) - 1

    def root(self, namespace: Hashable = None) -> PlaceKey:
        """The key of ``namespace``'s empty prefix (namespaces equal as values but of other types stay apart)."""
        label = (repr(type(namespace)), namespace)
        key = self._roots.get(label)
        if key is None:
            key = self._roots[label] = self._new(namespace, -1, (), 0)
        return key

    def extend(self, key: PlaceKey, block: Sequence[int]) -> PlaceKey:
        """The key of ``key``'s prefix followed by ``block``'s tokens."""
        tokens = tuple(block)
        found = self._child.get((key, tokens))
        if found is None:
            found = self._child[(key, tokens)] = self._new(self._namespace[key], key, tokens, self._length[key] + len(tokens))
        return found

    def along(self, namespace: Hashable, tokens: Sequence[int], block_size: int) -> list[PlaceKey]:
        """The keys of ``tokens``' whole-block prefixes in ``namespace``, shortest first (none for the partial tail)."""
        keys: list[PlaceKey] = []
        key = self.root(namespace)
        for end in range(block_size, len(tokens) + 1, block_size):
            key = self.extend(key, tokens[end - block_size : end])
            keys.append(key)
        return keys

    def is_root(self, key: PlaceKey) -> bool:
        return self._parent[key] < 0

    def parent(self, key: PlaceKey) -> PlaceKey:
        """The key one block shorter (a root is its own parent)."""
        above = self._parent[key]
        return key if above < 0 else above

    def namespace(self, key: PlaceKey) -> Hashable:
        return self._namespace[key]

    def length(self, key: PlaceKey) -> int:
        return self._length[key]

    def tokens(self, key: PlaceKey) -> tuple[int, ...]:
        """The prefix's tokens, rebuilt by walking up: O(its length) the first time, then kept (a snapshot asks
        for the same nodes' prefixes call after call; only the prefixes asked for are kept, never every one)."""
        known = self._tokens.get(key)
        if known is not None:
            return known
        start = key
        blocks: list[tuple[int, ...]] = []
        while self._parent[key] >= 0:
            blocks.append(self._block[key])
            key = self._parent[key]
        blocks.reverse()
        found = self._tokens[start] = tuple(itertools.chain.from_iterable(blocks))
        return found
