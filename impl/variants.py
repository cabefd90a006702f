"""``impl.RadixCache`` under each named rule set (``spec.api.RULE_PRESETS``), as factories a target names.

``prefixspec check impl.variants:sglang_lfu --rules sglang-lfu`` checks one;
``prefixspec identify impl.variants:sglang_lfu`` names its rule set.
"""

from __future__ import annotations

from impl.cache import RadixCache
from spec.api import RULE_PRESETS, Rules


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


def vllm(block_size: int) -> RadixCache:
    """vLLM 0.32.0's automatic prefix caching: use=release, evict=lru, unit=block, dup=keep."""
    return RadixCache(block_size, RULE_PRESETS["vllm"])


def vllm_dedup(block_size: int) -> RadixCache:
    """vLLM's rules but R5's strict duplicates (a cache that de-duplicates): no preset."""
    return RadixCache(block_size, Rules("release", "lru", "block", "refuse"))


def strict_cut(block_size: int) -> RadixCache:
    """strict but R8's block granularity (exactly n blocks, a leaf cut from its tail): no preset."""
    return RadixCache(block_size, Rules(unit="block"))


def sglang_lfu_cut(block_size: int) -> RadixCache:
    """sglang-lfu but R8's block granularity: no preset."""
    return RadixCache(block_size, Rules("path+split-tail", "lfu", "block"))
