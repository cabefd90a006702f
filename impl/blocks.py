"""The block arithmetic of the cache, as small pure functions on ints.

Each function has the same name and signature as its counterpart in the
specification, so ``crosshair diffbehavior`` can compare the two one by one.
They are meant for the domain the cache calls them on: token counts and prefix
ends >= 0, ``block_size`` >= 1 (R1), prefix ends that are multiples of the
block size (R2).
"""

from __future__ import annotations


def usable_prefix(n_tokens: int, block_size: int) -> int:
    """Tokens of an ``n_tokens`` prompt that a match may search (R3).

    The last token must be computed by the engine, so only the whole blocks
    before it are searched: ``((n - 1) // B) * B``, and 0 for an empty prompt.

    Runtime complexity: O(1).
    """
    if n_tokens == 0:
        return 0
    return ((n_tokens - 1) // block_size) * block_size


def full_blocks(n_tokens: int, block_size: int) -> int:
    """Whole blocks in ``n_tokens`` tokens; a partial tail holds no block (R2, R5).

    Runtime complexity: O(1).
    """
    return n_tokens // block_size


def block_span(index: int, block_size: int) -> tuple[int, int]:
    """Tokens ``[start, end)`` covered by block ``index`` of a prefix (R2).

    Runtime complexity: O(1).
    """
    return index * block_size, (index + 1) * block_size


def segment_blocks(parent_end: int, node_end: int, block_size: int) -> int:
    """Blocks a node holds when its parent's prefix ends at ``parent_end`` tokens
    and its own at ``node_end`` tokens (R2, R4).

    Runtime complexity: O(1).
    """
    return (node_end - parent_end) // block_size


def hit_rate(hit_tokens: int, query_tokens: int) -> float:
    """``hit_tokens / query_tokens``, 0.0 before any query token (R9).

    Runtime complexity: O(1).
    """
    if query_tokens == 0:
        return 0.0
    return hit_tokens / query_tokens


def cached_tokens(cached_blocks: int, block_size: int) -> int:
    """Tokens covered by ``cached_blocks`` whole blocks (R9).

    Runtime complexity: O(1).
    """
    return cached_blocks * block_size
