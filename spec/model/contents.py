"""R2: the cached contents, block-granular: the cached prefixes, their blocks, and the longest one a prompt starts with."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType

from spec import arith
from spec.api import BlockId, Namespace
from spec.model.state import Prefix, State


class Contents(State):
    """``State`` and R2, below."""

    # R2: block-granular contents ------------------------------------------------

    def whole_block_prefixes(self, prefix: Prefix) -> Iterator[Prefix]:
        """R2: the prefixes of ``prefix`` that end at a block boundary, shortest first (made as they are asked for)."""
        namespace, tokens = prefix
        size = self._block_size
        # Block i ends at arith.block_span(i, B)[1] = (i + 1) * B: the ends are stepped by B up to the last whole
        # block's, where a call of block_span a block was a tenth of the spec's time in the engine machine (py-spy).
        last_end = arith.cached_tokens(arith.full_blocks(len(tokens), size), size)
        for end in range(size, last_end + 1, size):
            yield namespace, tokens[:end]

    def one_block_shorter(self, prefix: Prefix) -> Prefix:
        """R2: the prefix without its last block (the empty prefix of its namespace after one block)."""
        namespace, tokens = prefix
        return namespace, tokens[: len(tokens) - self._block_size]

    def blocks_of(self, path: Iterable[Prefix]) -> list[BlockId]:
        """R2: the ids of the blocks of ``path``'s cached prefixes, in its order."""
        return [self._block_at[prefix] for prefix in path]

    def block_cached_at(self, tokens: Sequence[int], namespace: Namespace = None) -> BlockId | None:
        """R2: the id of the block that ends at ``tokens`` (a whole-block prefix) in ``namespace``, None where none is cached."""
        return self._block_at.get((namespace, tuple(tokens)))

    def cached_contents(self) -> Mapping[Prefix, BlockId]:
        """R2, R12, R13: every cached prefix (namespace, tokens) and the id of its last block: what the events fold to (a read-only view)."""
        return MappingProxyType(self._block_at)

    def cached_block_ids(self) -> list[BlockId]:
        """R2, R5: every id the cache holds, copies included (``dup=keep``), in no particular order."""
        ids = list(self._block_at.values())
        for copies in self._copies.values():
            ids.extend(copies)
        return ids

    def copies_at(self, prefix: Prefix) -> list[BlockId]:
        """R5, ``dup=keep``: the further blocks cached at ``prefix`` besides ``_block_at[prefix]``, oldest first."""
        return self._copies.get(prefix, [])

    def cache_block(self, prefix: Prefix, block: BlockId) -> None:
        """R2: cache ``block`` as the last block of ``prefix``, whose shorter whole-block prefixes are cached."""
        self._block_at[prefix] = block
        self._cached_at[block] = prefix
        self._extensions[prefix] = set()
        self._extensions.setdefault(self.one_block_shorter(prefix), set()).add(prefix)
        self._namespaces.add(prefix[0])
        # Not marked for R11: a block is cached only by an insert, whose new node (R4) ends below it and is marked.

    def drop_block(self, prefix: Prefix) -> None:
        """R2: forget the block of ``prefix``, which no cached prefix extends."""
        block = self._block_at.pop(prefix)
        del self._cached_at[block]
        del self._extensions[prefix]
        self._extensions[self.one_block_shorter(prefix)].discard(prefix)
        self._restamped_blocks.add(block)  # R11: not the prefix: the callers mark the node it ended, once

    def cached_path(self, prefixes: Iterable[Prefix]) -> list[Prefix]:
        """R2: the leading cached ones of ``prefixes`` (a prompt's whole-block prefixes, shortest first): its longest
        cached whole-block prefix and the shorter ones, the path a match or an insert follows from the root.

        Cached prefixes are closed under shortening, so the first uncached block
        ends the search.  The path is made once a call and read by every rule the call applies (R3, R4, R5, R7):
        each reading made its prefixes anew, a tuple sliced and hashed per block.
        """
        path: list[Prefix] = []
        for prefix in prefixes:
            if prefix not in self._block_at:
                break
            path.append(prefix)
        return path
