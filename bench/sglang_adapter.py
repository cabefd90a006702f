"""SGLang's RadixCache behind the replay adapter.

SGLang is imported as ``bench/sglang_loading.py`` says (without torchvision).

The adapter drives the cache as SGLang's scheduler does
(``RadixCache.create_simulated(page_size=B)``, keys as ``array('q')`` in a
``RadixKey``, values as int64 tensors of KV slots, one slot per token).
Outside the timer it does what an engine does anyway: it builds the key (with
``limit = n - 1``, the scheduler's ``max_prefix_len``, so the last token is
left to compute), the slot tensor (block b holds slots ``b*B .. b*B+B-1``)
and the parameter objects.  Inside the timer it makes exactly one SGLang call
per cache call: ``match_prefix``, ``insert``, ``inc_lock_ref``,
``dec_lock_ref`` or ``evict``.  Reading the results back into block ids
(``path_device_indices`` of the returned node, the slots the mock allocator
was given to free) is also outside the timer: an engine reads the prefix's
slots with a second call, which is not charged to SGLang here.
"""

from __future__ import annotations

from array import array
from typing import Any

from bench.replay import Adapter
from bench.sglang_loading import PLACEHOLDER_MODULES, FreedSlots, Sglang, load_sglang
from spec.api import BlockId, Inserted, PrefixMatch

__all__ = ["PLACEHOLDER_MODULES", "SglangAdapter", "load_sglang"]

class SglangAdapter(Adapter):
    """SGLang's RadixCache (``create_simulated``, page size B) for the replay."""

    name = "sglang"

    def __init__(self, block_size: int, sglang: Sglang) -> None:
        super().__init__(block_size)
        self.sg = sglang
        torch = sglang.torch
        self.offsets = torch.arange(block_size, dtype=torch.int64)

    def reset(self) -> None:
        self.allocator = FreedSlots()
        self.cache = self.sg.RadixCache.create_simulated(mock_allocator=self.allocator, page_size=self.block_size)
        self.root = self.cache.root_node
        self.match = self.cache.match_prefix
        self.insert = self.cache.insert
        self.lock = self.cache.inc_lock_ref
        self.unlock = self.cache.dec_lock_ref
        self.evict = self.cache.evict

    # Outside the timer: what the engine does anyway.

    def slots(self, blocks: list[int]) -> Any:
        torch = self.sg.torch
        return (torch.tensor(blocks, dtype=torch.int64)[:, None] * self.block_size + self.offsets).reshape(-1)

    def prepare_match(self, tokens: list[int]) -> Any:
        key = self.sg.RadixKey(array("q", tokens), limit=max(len(tokens) - 1, 0))
        return self.sg.MatchPrefixParams(key=key)

    def prepare_insert(self, tokens: list[int], blocks: list[int]) -> tuple[Any, ...]:
        key = self.sg.RadixKey(array("q", tokens))
        return (self.sg.InsertParams(key=key, value=self.slots(blocks)),)

    def prepare_evict(self, count: int) -> Any:
        self.allocator.freed.clear()
        return self.sg.EvictParams(num_tokens=count * self.block_size)

    def block_ids(self, slots: Any) -> list[BlockId]:
        ids: list[BlockId] = (slots[:: self.block_size] // self.block_size).tolist()
        return ids

    def read_match(self, result: Any) -> PrefixMatch:
        node = result.last_device_node
        return PrefixMatch(result.device_prefix_len, self.block_ids(self.cache.path_device_indices(node)), node)

    def read_insert(self, result: Any, blocks: list[int]) -> Inserted:
        node = result.last_device_node
        cached = result.prefix_len // self.block_size  # positions the tree held before this insert
        path = self.block_ids(self.cache.path_device_indices(node))
        duplicates = [new for new, kept in zip(blocks[:cached], path[:cached]) if new != kept]
        return Inserted(node, duplicates)

    def read_evict(self, result: Any) -> list[BlockId]:
        freed: list[BlockId] = []
        for slots in self.allocator.freed:
            freed.extend(self.block_ids(slots))
        return freed
