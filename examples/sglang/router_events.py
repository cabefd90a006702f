"""R13: SGLang's KV events read as a router reads them: from the events alone, and the ids the adapter passed to insert."""

from __future__ import annotations

from collections import deque
from typing import Any

from spec.api import AllBlocksCleared, BlockId, BlockRemoved, BlockStored, KVEvent
from examples.places import PlaceKey, PlaceKeys
from examples.sglang.namespaces import namespace_of


class RouterEvents:
    """The translation of the events of ``cache`` (an SGLang cache), in pages of ``size`` tokens.

    The router's side of an adapter: what it learnt from the events it translated, and the ids SGLang took
    in each insert (the KV slots it was given), waiting for their BlockStored; the adapter fills ``awaiting``.
    """

    cache: Any
    size: int

    def __init__(self) -> None:
        self.id_of_hash: dict[int, BlockId] = {}  # the id last stored under each SGLang block hash
        self.keys = PlaceKeys()  # token prefixes as small ints (examples/places.py: tuples would be quadratic)
        self.prefix_of_hash: dict[int, PlaceKey] = {}  # the token prefix from the root to each hash's block
        self.awaiting: dict[PlaceKey, deque[BlockId]] = {}  # token prefix -> ids taken there, oldest first

    def take_events(self) -> list[KVEvent]:
        """R13: SGLang's events since the last take (``RadixCache.take_events``, base_prefix_cache.py:673),
        translated one for one, in order, as a router would, never corrected:

        - ``AllBlocksCleared`` (SGLang records one at construction, ``reset``, radix_cache.py:362) passes
          through, and the adapter forgets the hashes it knew;
        - ``BlockStored(block_hashes, parent_block_hash, token_ids, ...)``: the parent is the id last
          stored under ``parent_block_hash`` (None when SGLang gives None); each block's token prefix is
          the parent's prefix and the event's tokens, a page each; its id is the oldest id an ``insert``
          passed at that token prefix and SGLang took (the KV slots the adapter gave; no event carries
          them), so the id follows the insert whatever namespace the event says; the namespace is what
          the event carries: ``cache_salt`` decoded by ``namespace_of``, else None (SGLang's BlockStored
          has no extra_key field, kv_events.py:279-295);
        - ``BlockRemoved(block_hashes)``: each hash becomes the id last stored under it.

        A hash is SGLang's only name for a block, so two blocks under one hash (the same tokens in two
        namespaces whose hashes SGLang does not tell apart) are one to the adapter: the later id wins.
        RuntimeError when an event names a hash no event stored, or a block no insert passed.
        """
        translated: list[KVEvent] = []
        for event in self.cache.take_events():
            kind = type(event).__name__
            if kind == "AllBlocksCleared":
                self.id_of_hash.clear()
                self.prefix_of_hash.clear()
                translated.append(AllBlocksCleared())
            elif kind == "BlockStored":
                translated.append(self.translate_stored(event))
            elif kind == "BlockRemoved":
                translated.append(BlockRemoved(tuple(self.known_id(block_hash) for block_hash in event.block_hashes)))
            else:
                raise RuntimeError(f"SGLang published an event of an unknown kind: {event!r}")
        return translated

    def known_id(self, block_hash: int) -> BlockId:
        if block_hash not in self.id_of_hash:
            raise RuntimeError(f"SGLang's event names block hash {block_hash}, which no BlockStored stored")
        return self.id_of_hash[block_hash]

    def translate_stored(self, event: Any) -> BlockStored:
        if event.lora_name is not None or event.lora_id is not None:
            raise RuntimeError(f"SGLang's BlockStored carries a LoRA adapter the adapter never named: {event!r}")
        namespace = namespace_of(event.cache_salt)
        tokens = [int(token) for token in event.token_ids]
        hashes = [int(block_hash) for block_hash in event.block_hashes]
        if not hashes or len(tokens) != len(hashes) * self.size:
            raise RuntimeError(f"SGLang's BlockStored of {len(hashes)} hashes and {len(tokens)} tokens is not one page a hash: {event!r}")
        parent_hash = event.parent_block_hash
        parent: BlockId | None = None
        prefix = self.keys.root(None)
        if parent_hash is not None:
            parent = self.known_id(parent_hash)
            prefix = self.prefix_of_hash[parent_hash]
        blocks: list[BlockId] = []
        for index, block_hash in enumerate(hashes):
            prefix = self.keys.extend(prefix, tokens[index * self.size : (index + 1) * self.size])
            waiting = self.awaiting.get(prefix)
            if not waiting:
                raise RuntimeError(f"SGLang's BlockStored stores tokens {list(self.keys.tokens(prefix))}, where no insert left a block")
            block = waiting.popleft()
            if not waiting:
                del self.awaiting[prefix]
            self.id_of_hash[block_hash] = block
            self.prefix_of_hash[block_hash] = prefix
            blocks.append(block)
        return BlockStored(parent, tuple(tokens), tuple(blocks), namespace)
