"""R5: insert: the whole blocks of a prompt cached, the refusals checked first, the duplicates handed back; its variant ``dup=keep`` beside it."""

from __future__ import annotations

from collections.abc import Sequence

from spec.api import BlockId, Inserted, InvalidArgument, Namespace
from spec.model.nodes import Nodes
from spec.model.state import Prefix, as_ids, as_namespace


class Inserting(Nodes):
    """``Nodes`` and R5, below."""

    # R5: insert ---------------------------------------------------------------------

    def insert(self, tokens: Sequence[int], blocks: Sequence[BlockId], namespace: Namespace = None) -> Inserted:
        """R5: cache the whole blocks of ``tokens``, one caller id per block.

        Exactly full_blocks(n, B) ids, so the partial tail is refused.  Where a
        position is cached already the cache keeps its id; a different id passed
        there is a duplicate, handed back in position order.  An id repeated in
        the call, or cached at another position, is refused: the caller would
        otherwise free or share a block the cache holds.  Every check comes
        before the first change (R10).  The returned node ends at the inserted
        prefix (R4 a); where the insert leaves the cached path inside a node,
        that node is split at the branch point (R4 c).  One use (R7); new blocks
        are counted (R9).  The prefix lies in ``namespace`` (R12), and one block id
        is cached at one position of one namespace.  The new blocks, if any, are
        published as one BlockStored (R13).
        """
        prompt = as_ids(tokens, "tokens")
        given = as_ids(blocks, "blocks")
        space = as_namespace(namespace)
        positions = list(self.whole_block_prefixes((space, prompt)))
        if len(given) != len(positions):
            raise InvalidArgument(
                f"insert of {len(prompt)} tokens takes {len(positions)} blocks "
                f"(one per whole block of {self._block_size}), got {len(given)}"
            )
        if len(set(given)) != len(given):
            raise InvalidArgument("a block id is repeated within the call")
        for prefix, block in zip(positions, given):
            if block in self._cached_at and self._cached_at[block] != prefix:
                raise InvalidArgument(f"block {block} is cached at another position")
        if self._rules.dup == "keep":
            self.check_reused_lead(positions, given)

        self.next_call()
        if not positions:
            return Inserted(node=self.root, duplicates=[])
        inserted = positions[-1]
        followed = self.cached_path(positions)
        if followed and followed[-1] != inserted:  # the branch point, where the insert leaves the cached path
            self.split_at(followed[-1])
        duplicates: list[BlockId] = []
        stored_at: list[int] = []
        held: list[BlockId] = []
        copied = False
        for index, (prefix, block) in enumerate(zip(positions, given)):
            cached = self._block_at.get(prefix)
            if cached is None:
                self.cache_block(prefix, block)
                stored_at.append(index)
            elif cached == block or block in self.copies_at(prefix):
                pass  # the caller passed back a block cached at this very position: it is no duplicate
            elif self._rules.dup == "keep":
                # Variant dup=keep (vLLM): the block is cached too, one more copy of this position's block.
                self._copies.setdefault(prefix, []).append(block)
                self._cached_at[block] = prefix
                copied = True
                stored_at.append(index)
            else:
                duplicates.append(block)
            # The id held at the position: under refuse the one cached there (the caller's, where it was not yet).
            held.append(cached if cached is not None and self._rules.dup == "refuse" else block)
        self._inserted_blocks += len(stored_at)
        self.publish_stored(space, prompt, held, stored_at)
        node = self.split_at(inserted)
        if copied:  # R11: a copy changes the view of the node it lies in, one of the nodes of the inserted path
            for prefix in positions:
                if prefix in self._node_at:
                    self._reshaped.add(prefix)
        if self._rules.use == "release":
            self.release(list(zip(positions, held)))
        else:
            self.use_path(positions, hit=True)
        return Inserted(node=node, duplicates=duplicates)

    def check_reused_lead(self, positions: list[Prefix], given: Sequence[BlockId]) -> None:
        """R5, variant ``dup=keep`` (vLLM): the ids passed back cached at their own positions lead the call;
        a cached id after one that is not is refused (InvalidArgument).

        A vLLM request holds the cached blocks its lookup found, then the new blocks it computed into: its
        block list is its computed blocks followed by blocks ``get_new_blocks`` took from the free queue
        (``single_type_kv_cache_manager.py:290-313``, ``:399-406``), and only blocks without a hash are
        cached anew (``cache_blocks``).  So no request reuses a cached block after one it computed: the
        caller would claim a state vLLM cannot be in.
        """
        computed: BlockId | None = None
        for prefix, block in zip(positions, given):
            reused = self._block_at.get(prefix) == block or block in self.copies_at(prefix)
            if not reused:
                computed = block if computed is None else computed
            elif computed is not None:
                raise InvalidArgument(
                    f"block {block} is cached at its position but follows block {computed}, which is not: "
                    "under dup=keep the blocks passed back cached lead the call (a request computes the rest anew)"
                )
