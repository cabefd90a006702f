"""``impl.RadixCache`` under each named rule set (``spec.api.RULE_PRESETS``), as factories a target names.

``prefixspec check impl.variants:sglang_lfu --rules sglang-lfu`` checks one;
``prefixspec identify impl.variants:sglang_lfu`` names its rule set.
"""

from __future__ import annotations

from impl.cache import RadixCache
from spec.api import RULE_PRESETS


def strict(block_size: int) -> RadixCache:
    return RadixCache(block_size, RULE_PRESETS["strict"])


def sglang(block_size: int) -> RadixCache:
    return RadixCache(block_size, RULE_PRESETS["sglang"])


def sglang_lfu(block_size: int) -> RadixCache:
    return RadixCache(block_size, RULE_PRESETS["sglang-lfu"])


def sglang_fifo(block_size: int) -> RadixCache:
    return RadixCache(block_size, RULE_PRESETS["sglang-fifo"])


def sglang_mru(block_size: int) -> RadixCache:
    return RadixCache(block_size, RULE_PRESETS["sglang-mru"])


def sglang_filo(block_size: int) -> RadixCache:
    return RadixCache(block_size, RULE_PRESETS["sglang-filo"])


def sglang_slru(block_size: int) -> RadixCache:
    return RadixCache(block_size, RULE_PRESETS["sglang-slru"])


def sglang_unified_fifo(block_size: int) -> RadixCache:
    return RadixCache(block_size, RULE_PRESETS["sglang-unified-fifo"])


def sglang_unified_filo(block_size: int) -> RadixCache:
    return RadixCache(block_size, RULE_PRESETS["sglang-unified-filo"])
