"""A usable prefix that matches a fully cached prompt whole (the R3 off-by-one).

Same name, signature and contract as ``spec.arith.usable_prefix``; only the
body is wrong: for n a multiple of B it searches all n tokens, leaving the
engine no last token to compute.
"""

from __future__ import annotations


def usable_prefix(n_tokens: int, block_size: int) -> int:
    """R3: the tokens a match may cover, leaving the last prompt token to compute.

    pre: n_tokens >= 0
    pre: block_size >= 1
    post: __return__ % block_size == 0
    post: 0 <= __return__ <= max(n_tokens - 1, 0)
    post: n_tokens == 0 or __return__ + block_size > n_tokens - 1
    """
    return (n_tokens // block_size) * block_size
